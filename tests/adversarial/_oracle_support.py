"""The harness shared by the engine-as-judge oracles (test support, not a test module).

The oracles in this folder (``test_key_uniqueness_oracle.py``, ``test_total_functions_oracle.py``,
``test_disjointness_oracle.py``) ask real privplan sessions over tables of edge values stored
in several physical layouts, and judge each answer with plain DuckDB on the same connection.
What each oracle asserts, and its own statement of privplan's rules, stays in its file; this
module holds only the machinery they run on:

* data files and layouts: :func:`load_data`, :class:`StorageLayout`, :func:`load_layouts`;
* the candidate rows: :func:`text_table`, stored per layout by :func:`store_rows`;
* one layout's database and privplan sessions: :class:`BaseLayoutRun`, :class:`SessionOutcome`;
* which layouts to ask: :func:`rotated`, :func:`first_per_signature`;
* the engine's side of a failure: :func:`engine_message`, :func:`engine_keys`;
* failure reports: :func:`first_line`, :func:`mask`, :func:`group_findings`,
  :func:`layouts_first`, :func:`timings_line`, :func:`failures_line`, :func:`shrink_ids`.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import duckdb
import pyarrow as pa
import yaml

import privplan as pp
import privplan.testing

DATA = Path(__file__).parent / "data"
"""The oracles' data files (literal pools, edge values, layouts)."""

REFUSALS: tuple[type[Exception], ...] = (pp.UnsupportedQueryError, pp.PolicyError)
"""Errors that refuse a query before anything is charged."""

PURE_EPSILON = 1.0
"""The budget of one query asked of a ``"pure"`` session."""

APPROX_EPSILON, APPROX_DELTA = 20.0, 1e-6
"""The budget of one query asked of an ``"approx"`` session (partition selection: with noise
disabled, a threshold of 3 rows: `planner.selection_margin`)."""

BINARY = 'COLLATE "binary"'
"""How the oracles compare strings: byte for byte, whatever the layout's collation."""

T = TypeVar("T")

# -----------------------------------------------------------------------------------------------
# Data files and layouts
# -----------------------------------------------------------------------------------------------


def load_data(name: str) -> Any:
    """The parsed YAML of the data file ``name`` (in :data:`DATA`)."""
    return yaml.safe_load((DATA / name).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class StorageLayout:
    """One physical storage of an oracle's policy table: the DuckDB type of each column whose
    storage the layout chooses (collations included) and the connection's settings
    (``default_collation``, ``TimeZone`` ...). An oracle subclasses it to add its own rule of
    which layouts answer alike (its *signature*)."""

    name: str
    columns: Mapping[str, str]
    settings: Mapping[str, str]

    column_note: ClassVar[str] = ""
    """Appended to the column list in :meth:`describe` (e.g. columns stored like others)."""

    def describe(self) -> str:
        """The layout for a failure report: its columns' types and its settings."""
        cols = ", ".join(f"{c} {t}" for c, t in self.columns.items())
        sets = "; ".join(f"SET {k}='{v}'" for k, v in self.settings.items()) or "no settings"
        return f"layout {self.name!r}: ({cols}{self.column_note}); {sets}"


LayoutT = TypeVar("LayoutT", bound=StorageLayout)


def load_layouts(name: str, layout_type: type[LayoutT]) -> list[LayoutT]:
    """The layouts of the data file ``name`` (``layouts: [{name, columns, settings}]``)."""
    return [layout_type(spec["name"], dict(spec["columns"]), dict(spec.get("settings") or {}))
            for spec in load_data(name)["layouts"]]


# -----------------------------------------------------------------------------------------------
# The candidate rows, stored in a layout
# -----------------------------------------------------------------------------------------------


def text_table(columns: Mapping[str, Sequence[str | None]]) -> pa.Table:
    """The candidate rows as text (None is NULL), one column per entry of ``columns`` (all of
    one length), after an ``id`` column (BIGINT) that numbers them from 1: witnesses are
    searched for over ``id``."""
    count = len(next(iter(columns.values()), ()))
    return pa.table({"id": pa.array(range(1, count + 1), pa.int64()),
                     **{c: pa.array(list(v), pa.string()) for c, v in columns.items()}})


def base_type(physical: str) -> str:
    """The type to cast text to for a column stored as ``physical`` (its collation, if any,
    is declared on the table)."""
    return physical.split(" COLLATE ")[0]


def open_database(settings: Mapping[str, str]) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB database with a layout's settings applied."""
    con = duckdb.connect(":memory:")
    for key, value in settings.items():
        con.execute(f"SET {key} = '{value}'")
    return con


def store_rows(con: duckdb.DuckDBPyConnection, table: str, types: Mapping[str, str],
               rows: pa.Table) -> str:
    """Create ``table`` with the columns and DuckDB types of ``types`` (in that order) and fill
    it with the text ``rows``, each value through ``TRY_CAST`` to its column's type (a text the
    type cannot hold is stored as NULL). Returns the ``CREATE TABLE`` statement."""
    cols = ", ".join(f'"{c}" {t}' for c, t in types.items())
    ddl = f'CREATE TABLE "{table}" ({cols})'
    con.execute(ddl)
    con.register("__oracle_staging", rows)
    casts = ", ".join(f'TRY_CAST("{c}" AS {base_type(t)})' for c, t in types.items())
    con.execute(f'INSERT INTO "{table}" SELECT {casts} FROM __oracle_staging')
    con.unregister("__oracle_staging")
    return ddl


# -----------------------------------------------------------------------------------------------
# One layout: its database and the privplan sessions asked over it
# -----------------------------------------------------------------------------------------------


def session_budget(kind: str) -> pp.PureDP | pp.ApproxDP:
    """The (practically unlimited) total budget of a session of ``kind``: the oracles judge
    answers, not the accountant running out."""
    return pp.PureDP(1e9) if kind == "pure" else pp.ApproxDP(1e9, 0.5)


def query_budget(kind: str) -> dict[str, float]:
    """The keyword arguments giving one query its budget in a session of ``kind``."""
    if kind == "pure":
        return {"epsilon": PURE_EPSILON}
    return {"epsilon": APPROX_EPSILON, "delta": APPROX_DELTA}


@dataclass
class SessionOutcome:
    """What a session did with one query: the error it raised (any exception; the oracle
    classifies it), the last engine statement it ran, and its spent budget before and after
    (a refusal must leave it unchanged). An oracle subclasses it to keep the answer."""

    sql: str
    error: BaseException | None = None
    statement: str | None = None
    spent_before: Any = None
    spent_after: Any = None

    @property
    def refused(self) -> bool:
        return isinstance(self.error, REFUSALS)


class BaseLayoutRun(Generic[LayoutT]):
    """The candidate rows stored in one layout (an in-memory DuckDB database), with privplan
    sessions to ask over it.

    There is one session per kind (``"pure"``: a PureDP budget, ``"approx"``: ApproxDP), each
    replaced by a fresh one after ``session_queries`` queries (the accountant's work grows
    with its history), under the policy ``policies[kind]``. Every session's engine records the
    last statement it runs: privplan withholds the engine's messages, so the oracles re-run it
    with plain DuckDB (:func:`engine_message`)."""

    def __init__(self, layout: LayoutT, table: str, types: Mapping[str, str],
                 rows: pa.Table, policies: Mapping[str, Mapping[str, Any]],
                 session_queries: int) -> None:
        self.layout = layout
        self.con = open_database(layout.settings)
        self.ddl = store_rows(self.con, table, types, rows)
        self.total_rows = rows.num_rows
        self.policies = policies
        self.session_queries = session_queries
        self._sessions: dict[str, Any] = {}
        self._used: Counter[str] = Counter()
        self._last_statement: str | None = None

    def session(self, kind: str, fresh: bool = False) -> Any:
        """The session of ``kind`` for the next query; with ``fresh``, a new session that is
        the caller's alone (witness searches: no history)."""
        if fresh or kind not in self._sessions or self._used[kind] >= self.session_queries:
            sess = pp.connect(self.con, policy=self.policies[kind], budget=session_budget(kind))
            self._record_statements(sess)
            if fresh:
                return sess
            self._sessions[kind] = sess
            self._used[kind] = 0
        self._used[kind] += 1
        return self._sessions[kind]

    def fresh_session(self, kind: str) -> Any:
        """A new session of ``kind``, the caller's alone."""
        return self.session(kind, fresh=True)

    def _record_statements(self, sess: Any) -> None:
        """Keep the last statement the session's engine runs (test only: wraps the instance's
        ``run``; a session without one is simply not recorded)."""
        engine: Any = getattr(sess, "engine", None)
        run = getattr(engine, "run", None)
        if run is None:
            return
        original: Any = run

        def recording(sql: str, *args: Any, **kw: Any) -> Any:
            self._last_statement = sql
            return original(sql, *args, **kw)

        engine.run = recording

    def ask_session(self, sess: Any, outcome: SessionOutcome, kind: str) -> Any:
        """Ask ``outcome.sql`` of ``sess`` with noise disabled (counts are exact) and the query
        budget of ``kind``; record in ``outcome`` the error, the engine statement and the spent
        budget before and after. Returns privplan's result, or None when it raised."""
        self._last_statement = None
        outcome.spent_before = sess.spent()
        result: Any = None
        try:
            with privplan.testing.noise_disabled():
                result = sess.sql(outcome.sql, **query_budget(kind))
        except Exception as err:  # noqa: BLE001 -- every outcome is classified by the caller
            outcome.error = err
        outcome.statement = self._last_statement
        try:
            outcome.spent_after = sess.spent()
        except Exception as err:  # noqa: BLE001
            outcome.spent_after = f"spent() raised {type(err).__name__}"
        return result


RunT = TypeVar("RunT")


def rotated(runs: Sequence[RunT], n: int) -> list[RunT]:
    """``runs`` starting from the ``n``-th (modulo their number): query ``n`` starts from
    another layout than query ``n - 1``, so each layout is first for some queries."""
    return [*runs[n % len(runs):], *runs[:n % len(runs)]]


def first_per_signature(runs: Iterable[RunT],
                        signature: Callable[[RunT], Hashable]) -> list[RunT]:
    """The first of ``runs`` of each signature (the oracle's rule of which layouts answer a
    query alike), in order."""
    seen: set[Hashable] = set()
    out = []
    for run in runs:
        sig = signature(run)
        if sig not in seen:
            seen.add(sig)
            out.append(run)
    return out


# -----------------------------------------------------------------------------------------------
# The engine's side of a failure
# -----------------------------------------------------------------------------------------------


def engine_message(con: duckdb.DuckDBPyConnection, statement: str | None) -> str:
    """The engine's own message for a failed statement (privplan withholds it): the statement
    re-run with plain DuckDB, then its result converted to a pandas frame."""
    if statement is None:
        return "no engine statement was run"
    try:
        con.execute(statement).fetchall()
    except duckdb.Error as err:
        return "engine: " + first_line(err)
    except Exception as err:  # noqa: BLE001 -- e.g. a Python conversion of a value
        return f"fetching the rows: {type(err).__name__}: {first_line(err)}"
    try:
        con.execute(statement).df()
    except Exception as err:  # noqa: BLE001
        return f"result to pandas: {first_line(err)}"
    return "does not fail when re-run with plain DuckDB"


def collated(expr: str, engine_type: str) -> str:
    """``expr`` compared in binary collation if its DuckDB type is a string, else as it is."""
    return f"({expr}) {BINARY}" if engine_type.upper().startswith("VARCHAR") else expr


@dataclass(frozen=True)
class EngineKeys:
    """The group keys of an engine statement (its columns ``__k*``, first) and whether its
    rows have distinct keys as DuckDB compares them (strings in binary)."""

    columns: list[str]
    types: list[str]
    distinct: bool


def engine_keys(con: duckdb.DuckDBPyConnection, statement: str) -> EngineKeys:
    """The keys of ``statement`` (see :class:`EngineKeys`). When privplan's
    ``check_one_row_per_key`` fires on an answer, distinct keys mean that distinct engine keys
    collided in the conversion to pandas, not that the engine returned one key twice."""
    rel = con.sql(statement)
    keys = [(c, str(t)) for c, t in zip(rel.columns, rel.types) if c.startswith("__k")]
    grouped = ", ".join(collated(f'e."{c}"', t) for c, t in keys)
    row = con.execute(f"SELECT (SELECT count(*) FROM ({statement}) AS e), (SELECT count(*) FROM "
                      f"(SELECT 1 FROM ({statement}) AS e GROUP BY {grouped}))").fetchone()
    return EngineKeys([c for c, _ in keys], [t for _, t in keys],
                      row is not None and row[0] == row[1])


# -----------------------------------------------------------------------------------------------
# Failure reports
# -----------------------------------------------------------------------------------------------


def first_line(err: BaseException | str) -> str:
    """An error's first line (its type's name if it has no message), at most 300 characters."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    return text if len(text) < 300 else text[:297] + "..."


def mask(message: str, limit: int, *, code: bool = True) -> str:
    """``message`` with its values masked (quoted strings and identifiers as ``?``, numbers,
    dates and times as ``N``; with ``code``, SQL quoted in backticks as ```...```), cut to
    ``limit`` characters: the failures and refusals of one cause group together."""
    if code:
        message = re.sub(r"`[^`]*`", "`...`", message)
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "?", message)
    return re.sub(r"-?\d+(?:[:.\-+]\d+)*", "N", message)[:limit]


class Classified(Protocol):
    """A finding: what failed (``kind``) and what the findings of one class share (``cause``)."""

    kind: str
    cause: str


FindingT = TypeVar("FindingT", bound=Classified)


def group_findings(findings: Iterable[FindingT],
                   size: Callable[[FindingT], int]) -> dict[tuple[str, str], list[FindingT]]:
    """Findings by failure class ``(kind, cause)``, classes in sorted order, each smallest first
    by ``size`` (the length of its SQL): the first of a class is its reproducer."""
    out: dict[tuple[str, str], list[FindingT]] = defaultdict(list)
    for f in findings:
        out[(f.kind, f.cause)].append(f)
    return {k: sorted(v, key=size) for k, v in sorted(out.items())}


def layouts_first(members: Sequence[T], layout: Callable[[T], str], rest: bool = True) -> list[T]:
    """The members of a failure class to list: the first on each layout (so every layout the
    class occurs on is seen), then, with ``rest``, the others in their order."""
    firsts: dict[str, T] = {}
    for f in members:
        firsts.setdefault(layout(f), f)
    if not rest:
        return list(firsts.values())
    chosen = {id(f) for f in firsts.values()}
    return [*firsts.values(), *(f for f in members if id(f) not in chosen)]


def class_lines(groups: Mapping[tuple[str, str], Sequence[Any]],
                details: Mapping[tuple[str, str], str], more: int) -> list[str]:
    """The failure report's lines for each failure class ``(kind, cause)``: the layouts where
    it occurs, its shrunk reproducer (``details``, when made), and up to ``more`` pairs
    (findings with ``run.layout.name`` and ``describe()``)."""
    out: list[str] = []
    for (kind, cause), members in groups.items():
        layouts = Counter(f.run.layout.name for f in members)
        out += ["", f"== {kind.upper()} | cause: {cause}",
                f"   {len(members)} pair(s) on layouts {dict(layouts)}"]
        if (kind, cause) in details:
            out.append(details[(kind, cause)])
        out.append("   more pairs (smallest first, one per layout first):")
        shown = layouts_first(members, lambda f: f.run.layout.name)
        out += [f"   - {f.describe()}" for f in shown[:more]]
    return out


def timings_line(timings: Mapping[str, float]) -> str:
    """The summary's line of phase timings."""
    return "timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())


def failures_line(findings: Iterable[Classified], classes: int) -> str:
    """The summary's line counting failures by kind."""
    return f"FAILURES: {dict(Counter(f.kind for f in findings))} in {classes} classes"


def shrink_ids(ids: list[int], fails: Callable[[list[int]], bool], budget: int) -> list[int]:
    """A smaller set of row ids on which ``fails`` still holds (it must hold on ``ids``):
    greedy removal of chunks of halving size, at most ``budget`` calls of ``fails``."""
    chunk = len(ids) // 2
    while chunk >= 1 and budget > 0:
        i = 0
        while i < len(ids) and budget > 0:
            budget -= 1
            candidate = ids[:i] + ids[i + chunk:]
            if candidate and fails(candidate):
                ids = candidate
            else:
                i += chunk
        chunk //= 2
    return ids
