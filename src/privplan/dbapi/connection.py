"""A PEP 249 (DB-API 2.0) connection, so reporting pipelines can read DP answers like any SQL.

>>> import privplan as pp, privplan.dbapi.connection as dbapi                       # doctest: +SKIP
>>> con = dbapi.connect("data.duckdb", policy="policy.yaml",            # doctest: +SKIP
...                     budget=pp.PureDP(3), epsilon=0.5)
>>> cur = con.cursor()                                                   # doctest: +SKIP
>>> cur.execute("SELECT hospital, COUNT(*) AS n FROM visits WHERE age >= ? "
...             "GROUP BY hospital", [65])                                # doctest: +SKIP
>>> cur.fetchall(), cur.cost, con.remaining()                            # doctest: +SKIP
>>> pandas.read_sql("SELECT COUNT(*) AS n FROM visits", con)             # doctest: +SKIP

Every ``execute`` is one DP query of a :class:`privplan.Session`: planned, charged against the
session budget (composed with the general composition theorem) and only then answered. The
connection's ``epsilon=``/``delta=``/``rho=``/``mu=`` set each query's default budget (a pipeline
such as ``pandas.read_sql`` cannot pass one); ``Cursor.execute(..., epsilon=...)`` overrides it for
one query (the per-query parameters replace the defaults as a whole). A query in BigQuery's
``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=...)`` syntax carries its own budget.

Decisions, in DB-API terms:

* ``paramstyle = "qmark"``: ``?`` placeholders with a sequence of values. As in ``sqlite3``, a
  mapping of values with ``:name`` placeholders is accepted too. Placeholders are found with
  sqlglot's tokenizer (so ``?`` inside a string literal or a comment is not one) and each value
  is rendered as a SQL literal by sqlglot (``exp.convert``: strings quoted and escaped, dates as
  ``CAST('…' AS DATE)``); the result is re-tokenized and checked to be exactly the original
  tokens with each placeholder replaced by one literal, so a value can never become SQL.
* ``commit()`` is a no-op: every answer is charged (durably, in the ledger) before it is
  released, so there is nothing pending. ``rollback()`` raises :class:`NotSupportedError`: a
  released answer cannot be un-spent.
* ``executemany`` raises :class:`NotSupportedError`: every privplan query returns an answer,
  and its budget is spent to release that answer; ``executemany`` discards result sets
  (PEP 249 leaves it undefined for queries that return rows), so it would spend budget for
  nothing. Call ``execute`` once per parameter set and fetch each answer.
* Errors: privplan's errors are re-raised as the DB-API classes (see :func:`_translate`), with
  the original as ``__cause__`` and as ``.privplan_error``.
* ``threadsafety = 1``: threads may share the module, not connections (a session's ledger and
  engine connection are not shared between threads).
* ``close()`` may be called twice (as in ``sqlite3``; connection pools and ``with`` blocks do);
  every other use of a closed connection or cursor raises :class:`ProgrammingError`.
* Optional methods privplan cannot honour are absent, as PEP 249 prefers (so ``hasattr`` tells):
  ``callproc`` (there are no stored procedures) and ``nextset`` (one answer per ``execute``).

Statements answered without a charge. Two kinds of statement read no private row, so their
answers release nothing about anyone; they are answered here, cost the zero of the session's
privacy definition (``cursor.cost``) and write nothing to the ledger:

* **Constant selects**: ``SELECT 1``, ``SELECT 1 AS x, 'a', NULL, TRUE, -2.5`` — no ``FROM``,
  and every selected item a literal (number, string, NULL, TRUE/FALSE, a negated number),
  optionally aliased. Such an answer is a function of the query text alone. It is what
  connection pools send to check a connection (SQLAlchemy's ``pool_pre_ping``), and a
  :class:`~privplan.Session` refuses it ("there is no private table to aggregate"), so without
  this a pool could not check its connections. The decision is deliberately narrow: anything
  else without ``FROM`` (a function call, a cast, a subquery, a second statement) still goes
  to the Session and is refused there. The literals are evaluated here, in Python: no engine
  runs the statement.
* **Schema queries**: a ``SELECT`` that reads only ``information_schema`` (``tables``,
  ``columns``, ...) is answered from the *policy*: table and column names, types and
  nullability, which an analyst needs to write queries and which privplan's accounting already
  treats as public (DESIGN.md invariant 2); never data. A public table the policy lists
  without columns has the columns the database reports (a public table is not protected).
  The query runs on a sandbox: a new in-memory DuckDB connection holding only an empty
  replica of that schema, with file access disabled and its configuration locked, so it
  cannot reach the session's database or any file. See :meth:`Connection.describe_schema`.
  A query that mixes ``information_schema`` with other tables is refused.
"""

from __future__ import annotations

import datetime as _dt
import time as _time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self

import pandas as pd

from privplan.accounting.definitions import budget_keywords, keyword_menu
from privplan.arguments import accepts, checked_arguments
from privplan.result import Result
from privplan.session.session import Session
from privplan.sql.bigquery import QUERY_OPTIONS, apply_dp_clause

__all__ = [
    "BINARY",
    "BOOLEAN",
    "DATETIME",
    "NUMBER",
    "ROWID",
    "STRING",
    "Binary",
    "BudgetExceeded",
    "ColumnInfo",
    "Connection",
    "Cursor",
    "DataError",
    "DatabaseError",
    "Date",
    "DateFromTicks",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "TableInfo",
    "Time",
    "TimeFromTicks",
    "Timestamp",
    "TimestampFromTicks",
    "Warning",
    "apilevel",
    "bind_parameters",
    "connect",
    "paramstyle",
    "threadsafety",
]

apilevel = "2.0"
threadsafety = 1
paramstyle = "qmark"


from privplan.dbapi.errors import (
    BudgetExceeded,
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Warning,
    _Translating,
)
from privplan.dbapi.free import (
    _POLICY_TYPES,
    DEFAULT_SCHEMA,
    ColumnInfo,
    TableInfo,
    _columns,
    _free_answer,
    _public_columns,
    _rows,
)
from privplan.dbapi.params import bind_parameters
from privplan.dbapi.tables import refuse_table_read
from privplan.dbapi.url import is_url, missing_keywords, session_given, url_arguments
from privplan.engines.recognise import refuse_engine_keyword

# ------------------------------------------------------------------------- type objects


class _TypeObject:
    """A PEP 249 type object: compares equal to every type code it covers."""

    def __init__(self, name: str, *codes: str) -> None:
        self.name = name
        self.codes = frozenset(codes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _TypeObject):
            return self is other
        return isinstance(other, str) and other.upper() in self.codes

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"<dbapi type {self.name}>"


STRING = _TypeObject("STRING", "VARCHAR")
BINARY = _TypeObject("BINARY", "BLOB")
NUMBER = _TypeObject("NUMBER", "BIGINT", "DOUBLE", "DECIMAL")
DATETIME = _TypeObject("DATETIME", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE")
ROWID = _TypeObject("ROWID")  # privplan never returns rows of a table
BOOLEAN = _TypeObject("BOOLEAN", "BOOLEAN")  # an extension: PEP 249 has no boolean type object

Date = _dt.date
Time = _dt.time
Timestamp = _dt.datetime


def DateFromTicks(ticks: float) -> _dt.date:
    return Date(*_time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> _dt.time:
    return Time(*_time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> _dt.datetime:
    return Timestamp(*_time.localtime(ticks)[:6])


def Binary(value: bytes | bytearray | memoryview) -> bytes:
    return bytes(value)


# ------------------------------------------------------------------------- connection

_BUDGET_KEYS = budget_keywords()
"""The per-query budget keywords (each registered definition's: epsilon, delta, rho, mu)."""


@checked_arguments
@accepts(*_BUDGET_KEYS)
def connect(
    database: Any = ":memory:",
    *,
    policy: Any = None,
    budget: Any = None,
    ledger: Any = None,
    intervals: bool = False,
    composition: str = "additive",
    engine: None = None,
    **defaults: Any,
) -> Connection:
    """Open a DB-API connection over a new :class:`privplan.Session`.

    ``database``, ``policy``, ``budget`` (the session total) and ``ledger`` are as in
    :func:`privplan.connect`; ``epsilon``/``delta``/``rho``/``mu`` set the default budget of each
    query (optional: without them every ``execute`` must pass one). ``intervals=True`` makes
    every answer carry each noisy column's 95% interval right after it (``<col>_low``,
    ``<col>_high``), the shape of ``Result.with_intervals()``, the CLI and report files; the
    default is the query's own columns, which SQL tools expect. ``composition="pld"``: PLD
    accounting of an (ε, δ) budget, as in :func:`privplan.connect`.

    Or one ``privplan://`` URL, the form the SQLAlchemy dialect takes
    (:mod:`privplan.sqlalchemy_dialect`): ``connect("privplan:///data.duckdb?policy=
    policy.yaml&ledger=ledger.sqlite&budget_epsilon=3&epsilon=0.5")`` (needs SQLAlchemy), with
    no other keywords (:mod:`privplan.dbapi.url`).
    """
    refuse_engine_keyword(engine, "privplan.dbapi.connect")
    session_given(database)
    keywords: dict[str, Any] = {"policy": policy, "budget": budget, "ledger": ledger,
                                **{k: defaults.get(k) for k in _BUDGET_KEYS}}
    if is_url(database):
        given = {k: v for k, v in keywords.items() if v is not None}
        given.update({k: v for k, v, default in (("intervals", intervals, False),
                                                  ("composition", composition, "additive"))
                      if v != default})
        keywords = url_arguments(database, given)
        database = keywords.pop("database")
        intervals = keywords.pop("intervals", False)
        composition = keywords.pop("composition", "additive")
    elif policy is None or budget is None:
        raise missing_keywords([k for k in ("policy", "budget") if keywords[k] is None])
    with _Translating():
        session = Session(database, policy=keywords.pop("policy"),
                          budget=keywords.pop("budget"), ledger=keywords.pop("ledger", None),
                          composition=composition)
    try:
        return Connection(session, **keywords, intervals=intervals)
    except BaseException:
        session.close()
        raise


class Connection:
    """A DB-API connection: a privplan session plus a default per-query budget."""

    def __init__(self, session: Session, *, budget: Any = None, intervals: bool = False,
                 **defaults: Any) -> None:
        if not isinstance(intervals, bool):
            raise InterfaceError(f"intervals must be True or False, got {intervals!r}")
        self.intervals = intervals
        self._session: Session | None = session
        unknown = [k for k in defaults if k not in _BUDGET_KEYS]
        if unknown:
            raise TypeError(f"Connection() got an unexpected keyword argument {unknown[0]!r}: "
                            f"the budget keywords are {', '.join(_BUDGET_KEYS)} and budget")
        self._defaults = {k: v for k, v in (*defaults.items(), ("budget", budget))
                          if v is not None}
        if self._defaults:
            _resolve_budget(session, self._defaults)  # fail now, not at the first query
        self._cursors: list[Cursor] = []

    # -- PEP 249 -------------------------------------------------------------------------
    def cursor(self) -> Cursor:
        self._check_open()
        cur = Cursor(self)
        self._cursors.append(cur)
        return cur

    def close(self) -> None:
        """Close the session (engine and ledger). Closing twice is allowed."""
        if self._session is None:
            return
        for cur in self._cursors:
            cur._closed = True
        self._cursors.clear()
        session, self._session = self._session, None
        with _Translating():
            session.close()

    def commit(self) -> None:
        """No-op: every answer was charged (durably) before it was released."""
        self._check_open()

    def rollback(self) -> None:
        """Always :class:`NotSupportedError`: a released answer cannot be un-spent."""
        self._check_open()
        raise NotSupportedError(
            "rollback is not possible: every answer is charged to the privacy budget before it "
            "is released, and a released answer cannot be un-spent")

    def __enter__(self) -> Self:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- extras --------------------------------------------------------------------------
    @property
    def session(self) -> Session:
        """The underlying :class:`privplan.Session`."""
        return self._check_open()

    @property
    def closed(self) -> bool:
        return self._session is None

    def spent(self) -> Any:
        """The composed cost of everything released (by every cursor, and other sessions on the
        same ledger)."""
        with _Translating():
            return self._check_open().spent()

    def remaining(self) -> Any:
        with _Translating():
            return self._check_open().remaining()

    def describe_schema(self) -> tuple[TableInfo, ...]:
        """Every table the policy declares, with its columns: the schema an analyst may see.

        Private tables: the policy's columns, typed as privplan reads them (the policy type's
        engine type) and nullable unless declared ``nullable: false``; this is the policy, not
        the data. Public tables: the policy's columns if it lists any, else the columns the
        database reports (a public table is not protected; reading its column list is what
        the Session does to plan a join). Costs nothing; reads no private row.
        """
        session = self._check_open()
        out = []
        for table in session.policy.tables.values():
            if table.columns:
                columns = tuple(ColumnInfo(c.name, _POLICY_TYPES[c.type], c.nullable)
                                for c in table.columns.values())
            elif table.public:
                columns = _public_columns(session, table)
            else:
                columns = ()
            out.append(TableInfo(table.name, table.schema or DEFAULT_SCHEMA, table.public,
                                 columns))
        return tuple(out)

    # Error classes as attributes (an optional PEP 249 extension).
    Warning = Warning
    Error = Error
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def _check_open(self) -> Session:
        if self._session is None:
            raise ProgrammingError("the connection is closed")
        return self._session


def _resolve_budget(session: Session, kwargs: Mapping[str, Any]) -> Any:
    """The budget value for ``kwargs`` in the session's privacy definition."""
    try:
        with _Translating():
            return session.query_value(kwargs)
    except (ValueError, TypeError) as err:
        raise ProgrammingError(f"invalid budget: {err}") from err


# ------------------------------------------------------------------------------ cursor


class Cursor:
    """A DB-API cursor. Each ``execute`` is one charged DP query (or a statement that reads no
    private row, answered free: see the module docstring); rows are fully fetched."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.arraysize = 1
        self._closed = False
        self._rows: list[tuple[Any, ...]] | None = None
        self._pos = 0
        self._description: tuple[tuple[Any, ...], ...] | None = None
        self.rowcount = -1
        self.lastrowid = None
        self.cost: Any = None
        self.result: Any = None

    @property
    def description(self) -> tuple[tuple[Any, ...], ...] | None:
        """One 7-tuple per result column: (name, type_code, None, None, None, None, None);
        type codes compare equal to STRING/NUMBER/DATETIME/BOOLEAN. None before a query."""
        return self._description

    @checked_arguments
    @accepts(*_BUDGET_KEYS)
    def execute(
        self,
        operation: str,
        parameters: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        budget: Any = None,
        **given: Any,
    ) -> Cursor:
        """Answer one DP query, charging it first. Keyword budget parameters override the
        connection's defaults for this query (a statement answered free ignores them). Returns
        the cursor (an extension, for chaining)."""
        session = self._check_open()
        self._reset()
        sql = bind_parameters(operation, parameters)
        free = _free_answer(self.connection, sql)
        if free is not None:  # reads no private row: answered without a charge (module doc)
            zero = session.kind.zero()
            self.result = Result(df=free.df, cost=zero, query_cost=zero, accuracy={},
                                 intervals=pd.DataFrame(index=free.df.index),
                                 notes=["reads no private row: answered without a charge"])
            self._answer(free.rows, free.columns, zero)
            return self
        refuse_table_read(session.policy, sql)  # pandas.read_sql_table: says why, spends nothing
        explicit = {k: v for k, v in (*given.items(), ("budget", budget))
                    if v is not None}
        with _Translating():
            sql, kwargs = apply_dp_clause(sql, session.policy, session.kind, explicit)
        if not kwargs:
            kwargs = dict(self.connection._defaults)
        if not kwargs:
            raise ProgrammingError(
                "no privacy budget for this query, and privplan never picks one for you (every "
                f"answer spends some of the session's budget): pass {', '.join(keyword_menu())} "
                "or budget= to execute(), set a default with "
                "privplan.dbapi.connect(..., epsilon=...), or use BigQuery's SELECT WITH "
                "DIFFERENTIAL_PRIVACY OPTIONS(epsilon=...) syntax")
        extra = {k: kwargs.pop(k) for k in QUERY_OPTIONS if k in kwargs}
        value = _resolve_budget(session, kwargs)
        with _Translating():
            result = session.sql(sql, budget=value, **extra)
        self.result = result
        df = result.with_intervals() if self.connection.intervals else result.df
        self._answer(_rows(df), _columns(df), result.cost)
        return self

    def executemany(self, operation: str, seq_of_parameters: Any) -> None:
        """Not supported: it would spend budget on answers it discards (see the module doc)."""
        self._check_open()
        raise NotSupportedError(
            "executemany is not supported: each DP query spends budget to release its answer, "
            "and executemany discards answers. Call execute() once per parameter set and fetch "
            "each result")

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self._result_rows()
        if self._pos >= len(rows):
            return None
        self._pos += 1
        return rows[self._pos - 1]

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        rows = self._result_rows()
        n = self.arraysize if size is None else size
        if not isinstance(n, int) or n < 0:
            raise ProgrammingError(f"fetchmany size must be a non-negative int, got {n!r}")
        out = rows[self._pos:self._pos + n]
        self._pos += len(out)
        return out

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows = self._result_rows()
        out = rows[self._pos:]
        self._pos = len(rows)
        return out

    def close(self) -> None:
        self._closed = True
        self._rows = None

    def setinputsizes(self, sizes: Any) -> None:
        """No-op (PEP 249)."""

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        """No-op (PEP 249)."""

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self

    def __next__(self) -> tuple[Any, ...]:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------
    def _check_open(self) -> Session:
        if self._closed:
            raise ProgrammingError("the cursor is closed")
        return self.connection._check_open()

    def _answer(self, rows: list[tuple[Any, ...]], columns: list[tuple[str, str]],
                cost: Any) -> None:
        self._rows, self.cost, self.rowcount = rows, cost, len(rows)
        self._description = tuple((name, code, None, None, None, None, None)
                                  for name, code in columns)

    def _reset(self) -> None:
        self._rows, self._pos, self._description = None, 0, None
        self.rowcount, self.cost, self.result = -1, None, None

    def _result_rows(self) -> list[tuple[Any, ...]]:
        self._check_open()
        if self._rows is None:
            raise ProgrammingError("fetch*(): no result to fetch on this cursor, since "
                                   "a cursor holds only the answer of its last execute(): "
                                   "call execute() first")
        return self._rows
