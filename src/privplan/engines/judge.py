"""DuckDB as the judge of expressions, before anything is charged: types and constants.

privplan must know how the engine will *type* an expression (so a comparison that would convert
every value of a column, and fail on some, is refused) and whether its constants evaluate (so a
constant that fails, e.g. ``CAST('x' AS INTEGER)``, is refused instead of failing at run time —
where it would fail only if some row reached it, an un-noised bit about the data). Rather than
re-implementing DuckDB's type rules, privplan asks DuckDB itself, on a connection of its own
that holds no data at all:

* :meth:`Judge.types` binds ``SELECT typeof(e1), typeof(e2), ...`` where every column reference
  was replaced by a typed ``NULL`` (the caller's *skeleton*). ``typeof`` is resolved when the
  statement is bound, so nothing is evaluated, and the answer is the engine's own.
* :meth:`Judge.evaluate` runs constant expressions (no column references), so a constant that
  cannot be computed is found now, whatever the data.

Everything sent here is built by privplan from the query text and the policy (never from data),
so its messages may be shown to the user. The connection has external access disabled, its
configuration locked and default settings. The owner's connection may differ (``integer_division``
changes the type of ``/``, ``ieee_floating_point_ops`` makes a float division by zero fail,
``default_collation`` changes string comparison): the checks built on these answers do not rely
on those settings (every division runs inside ``TRY``, every string column and key is compared
``COLLATE "binary"``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import duckdb

from privplan.sql.totality import JudgeError

__all__ = ["Judge", "JudgeError", "judge"]


class Judge:
    """Binds and evaluates privplan-built expressions on an empty, locked DuckDB connection
    (the judge planning is given: :class:`~privplan.planning.reads.DomainJudge`)."""

    def __init__(self) -> None:
        self._con = duckdb.connect(":memory:")
        self._con.execute("SET python_enable_replacements = false")
        self._con.execute("SET enable_external_access = false")
        self._con.execute("SET lock_configuration = true")
        self._lock = threading.Lock()
        self._over: OrderedDict[Any, tuple[tuple[object, ...], ...]] = OrderedDict()

    def types(self, expressions: Sequence[str]) -> list[str]:
        """The engine's type of each expression (bound, not evaluated)."""
        return list(self._types(tuple(expressions)))

    def evaluate(self, expressions: Sequence[str]) -> None:
        """Evaluate each constant expression; raise :class:`JudgeError` naming the first that
        fails."""
        if expressions:
            self._evaluate(tuple(expressions))

    @lru_cache(maxsize=4096)  # noqa: B019 - one judge per process; entries are small strings
    def _types(self, expressions: tuple[str, ...]) -> tuple[str, ...]:
        if not expressions:
            return ()
        sql = "SELECT " + ", ".join(f"typeof({e})" for e in expressions)
        try:
            row = self._run(sql)
        except duckdb.Error as err:
            raise JudgeError(_first_line(err), self._culprit(expressions, "typeof(", ")")) from None
        return tuple(str(v) for v in row)

    @lru_cache(maxsize=4096)  # noqa: B019
    def _evaluate(self, expressions: tuple[str, ...]) -> bool:
        # the length of the text forces every value to be computed, and returns only small ints
        sql = "SELECT " + ", ".join(f"length(CAST(({e}) AS VARCHAR))" for e in expressions)
        try:
            self._run(sql)
        except duckdb.Error as err:
            raise JudgeError(_first_line(err),
                            self._culprit(expressions, "length(CAST(", " AS VARCHAR))")) from None
        return True

    def fetch(self, sql: str) -> list[tuple[object, ...]]:
        """Rows of a privplan-built query over constants only (e.g. typing a public domain);
        deterministic, so answers are kept."""
        return list(self._fetch(sql))

    @lru_cache(maxsize=1024)  # noqa: B019
    def _fetch(self, sql: str) -> tuple[tuple[object, ...], ...]:
        with self._lock:
            try:
                return tuple(self._con.execute(sql).fetchall())
            except duckdb.Error as err:
                raise JudgeError(_first_line(err), None) from None

    def fetch_over(self, sql: str, values: list[object]) -> list[tuple[object, ...]]:
        """Rows of a privplan-built query over one list of public constants passed as its
        parameter ``$1`` (a long public domain binds in milliseconds, where the same values
        written as SQL literals take seconds to parse and bind). Deterministic, so answers
        are kept, keyed by the values *and their Python types* (1, 1.0 and True are equal
        keys but type differently in the engine)."""
        try:
            key = (sql, tuple(map(type, values)), tuple(values))
            hash(key)
        except TypeError:
            key = None
        with self._lock:
            if key is not None and key in self._over:
                self._over.move_to_end(key)
                return list(self._over[key])
            try:
                rows = tuple(self._con.execute(sql, [values]).fetchall())
            except duckdb.Error as err:
                raise JudgeError(_first_line(err), None) from None
            if key is not None:
                self._over[key] = rows
                if len(self._over) > _OVER_KEPT:
                    self._over.popitem(last=False)
            return list(rows)

    def _run(self, sql: str) -> tuple[object, ...]:
        with self._lock:
            row = self._con.execute(sql).fetchone()
        assert row is not None
        return row

    def _culprit(self, expressions: tuple[str, ...], before: str, after: str) -> int | None:
        """The first expression that fails on its own (for the error message)."""
        for i, e in enumerate(expressions):
            try:
                self._run(f"SELECT {before}({e}){after}")
            except duckdb.Error:
                return i
        return None


_OVER_KEPT = 64  # fetch_over answers kept (public domains typed, per process)


def _first_line(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


_JUDGE: Judge | None = None
_JUDGE_LOCK = threading.Lock()


def judge() -> Judge:
    """The process's judge (one connection, opened on first use: ~50 ms)."""
    global _JUDGE
    with _JUDGE_LOCK:
        if _JUDGE is None:
            _JUDGE = Judge()
        return _JUDGE
