"""The PostgreSQL engine: privplan's engine statements run on a PostgreSQL database.

Statements arrive in DuckDB's dialect with DuckDB's semantics (:mod:`privplan.engines.base`);
each is rendered for PostgreSQL (:func:`privplan.engines.render.render`) and run in a
**read-only transaction of its own** (``SET TRANSACTION READ ONLY``), with the settings that
make values transfer exactly set for that transaction only (``SET LOCAL``: ``TimeZone`` UTC,
``DateStyle`` ISO, ``IntervalStyle`` postgres, ``extra_float_digits`` 3, UTF-8) and a
``statement_timeout``. The transaction ends (commit, or rollback on any error) before the call
returns, so a connection is never left inside a transaction, and a caller's connection keeps
its own settings. Nothing the owner keeps is ever written: per-unit views and public domains
are inlined as subqueries; a session's bounded copy of a table (user level, or a prepared
session) is a temporary table of its connection, made once after the second query that needs it
is charged (the first reads it inline), filled inside a read-only transaction and dropped when the engine closes; where it
cannot be made the SELECT is inlined as before (:mod:`privplan.engines.postgres_copies`, which
also says why that keeps the answers, the privacy guarantees and the read-only rule).

Results keep DuckDB's types and DuckDB's conversion to Python. Every statement is also bound by
a private in-process DuckDB over empty tables shaped like the PostgreSQL tables it reads (the
*shadow*), which gives the DuckDB result types the embedded engine would have given; the rows
PostgreSQL returns travel as text (exact for every type: floats with all their digits, NaN and
±inf, numerics as written, timestamps to the microsecond) and are cast to those types by that
DuckDB, whose own ``df()`` / ``fetchall()`` then makes the pandas frame or Python values. So a
frame from :meth:`PostgresEngine.run` has the columns and dtypes ``DuckDBEngine.run`` gives for
the same statement over the same rows.

Statements run through libpq's extended protocol (one statement per call: a text holding
several is refused by the server). psycopg is imported here only, so ``import privplan`` does
not need it (the ``postgres`` extra).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import duckdb
import pandas as pd
import sqlglot
from sqlglot import exp

from privplan.engines import postgres_probe
from privplan.engines.base import RUN_FAILED, ProbeFailed, StandIn, Values
from privplan.engines.frames import duckdb_frame
from privplan.engines.postgres_copies import SessionCopies
from privplan.engines.render import render
from privplan.engines.shadow import Shadow, shadow_type
from privplan.engines.shadow import quote as _quote
from privplan.errors import (
    EngineUnavailableError,
    ExecutionError,
    PolicyError,
    UnsupportedQueryError,
)

if TYPE_CHECKING:
    import psycopg

DEFAULT_STATEMENT_TIMEOUT_MS = 30 * 60 * 1000
"""Thirty minutes: longer than any exact aggregate privplan should need, short enough that a
runaway statement does not hold a server's resources indefinitely (0 turns the limit off)."""

# PostgreSQL type OID -> DuckDB type name (numeric and the rest: _duckdb_type)
_BUILTIN = {16: "BOOLEAN", 20: "BIGINT", 21: "SMALLINT", 23: "INTEGER", 700: "FLOAT",
            701: "DOUBLE", 25: "VARCHAR", 1043: "VARCHAR", 1082: "DATE", 1114: "TIMESTAMP",
            1184: "TIMESTAMP WITH TIME ZONE", 1042: "BPCHAR", 17: "BLOB", 1083: "TIME",
            1186: "INTERVAL", 2950: "UUID"}
# (oid, 26, is no BIGINT: an unsigned 32-bit integer a negative constant is converted to,
# ``oid < -1`` holding for 0; reported as OID, a type no policy column accepts)
_NUMERIC = 1700
UNMODELLED = ("NUMERIC", "BPCHAR")
"""Types :meth:`PostgresEngine.columns` reports for PostgreSQL columns DuckDB has no exact type
for: unconstrained ``numeric`` (or precision over 38) and blank-padded ``char(n)``, whose
comparisons ignore trailing spaces. privplan refuses them as policy column types."""


class _Failed(Exception):
    """PostgreSQL refused or failed a statement (primary message, SQLSTATE)."""

    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.message, self.sqlstate = message, sqlstate


def _first(err: BaseException) -> str:
    """The first line of an error's message (its class name if it has none)."""
    return str(err).splitlines()[0] if str(err).strip() else type(err).__name__


def _alive(con: psycopg.Connection[Any]) -> bool:
    """Whether the connection can still run a statement (not closed, not broken by a lost
    server; its transaction state known)."""
    from psycopg import pq

    return (not con.closed and not con.broken and con.pgconn.status == pq.ConnStatus.OK
            and con.info.transaction_status != pq.TransactionStatus.UNKNOWN)


def _gone(why: str, *, given: bool = False) -> str:
    """EngineUnavailableError's message: the server went away (``why``: libpq's words)."""
    after = ("Open a new connection and a new session over it (the ledger keeps what was "
             "spent)." if given else "privplan connects again on the next query.")
    return (f"the PostgreSQL server went away ({why}): the connection was lost or cannot be "
            f"made. Nothing was charged for this query. {after}")


class _Result:
    """One statement's result as it came: column names, type OIDs and modifiers, and every
    value as PostgreSQL's text (None for NULL), column by column."""

    def __init__(self, names: list[str], oids: list[int], mods: list[int],
                 columns: list[list[str | None]], types: list[str]) -> None:
        self.names, self.oids, self.mods, self.columns = names, oids, mods, columns
        self.types = types  # (DuckDB type names from the OIDs)


def _numeric(mod: int) -> str:
    """numeric(p, s) as DECIMAL(p, s) where DuckDB holds it exactly; else NUMERIC (unmodelled).
    (typmod = ((p << 16) | s) + 4, s an 11-bit signed field since PostgreSQL 15.)"""
    if mod < 4:
        return "NUMERIC"
    p, s = ((mod - 4) >> 16) & 0xFFFF, (mod - 4) & 0x7FF
    if s & 0x400:  # a negative scale: no DuckDB DECIMAL holds it
        return "NUMERIC"
    return f"DECIMAL({p},{s})" if 1 <= p <= 38 and s <= p else "NUMERIC"


def _duckdb_type(oid: int, mod: int, names: dict[int, str]) -> str:
    """The DuckDB type name for a PostgreSQL column type (see the table in ``columns``)."""
    if oid == _NUMERIC:
        return _numeric(mod)
    return _BUILTIN.get(oid) or names.get(oid, f"OID {oid}").upper()


def _from_text(column: str, duckdb_type: str) -> str:
    """The DuckDB expression turning PostgreSQL's text of a value into the DuckDB value."""
    upper = duckdb_type.upper()
    if upper.startswith(("DATE", "TIMESTAMP")):  # 0044-03-15 10:00:00 BC -> 0044-03-15 (BC) ...
        column = f"regexp_replace({column}, '^([0-9]+-[0-9]+-[0-9]+)(.*) BC$', '\\1 (BC)\\2')"
    elif upper == "INTERVAL":  # -1 days +02:00:00 -> -1 days 02:00:00
        column = f"replace({column}, ' +', ' ')"
    elif upper in ("BLOB", "BYTEA"):  # \x0102
        return f"unhex(substr({column}, 3))"
    return f"CAST({column} AS {duckdb_type})"


def _frame(relation: duckdb.DuckDBPyRelation) -> pd.DataFrame:
    """As :func:`privplan.engines.duckdb_engine._frame` (:mod:`privplan.engines.frames`)."""
    return duckdb_frame(relation)


class PostgresEngine:
    """Runs privplan's engine statements on PostgreSQL (a ``postgresql://`` URL, or an open
    psycopg connection, which stays open and unchanged when the engine closes)."""

    dialect = "postgres"

    def __init__(self, database: str | psycopg.Connection[Any], *,
                 statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS) -> None:
        import psycopg

        if statement_timeout_ms < 0:
            raise PolicyError("statement_timeout_ms is a number of milliseconds (0: no limit)")
        self._owned = isinstance(database, str)
        self._url = database if isinstance(database, str) else ""
        if isinstance(database, str):
            if not database.startswith(("postgresql://", "postgres://")):
                raise PolicyError("a PostgreSQL database is named by a 'postgresql://' URL")
            try:
                self._con: psycopg.Connection[Any] = psycopg.connect(
                    database, autocommit=True, application_name="privplan")
            except psycopg.Error as err:  # (the message names host and port, never a password)
                raise PolicyError(f"cannot connect to PostgreSQL ({_first(err)}). Check the URL, "
                                  "that the server runs and accepts this user.") from None
        elif isinstance(database, psycopg.Connection):
            self._con = database
        else:
            raise PolicyError("PostgresEngine takes a 'postgresql://' URL or an open psycopg "
                              f"connection, got {type(database).__name__}")
        self.statement_timeout_ms = int(statement_timeout_ms)
        self._views: dict[str, str] = {}
        # the shadow: empty DuckDB tables shaped like the PostgreSQL tables statements read,
        # where statements bind to their DuckDB result types (see the module doc); it also
        # casts the rows' text to those types
        self._shadow = Shadow(self._shadow_columns)
        self._encoding: str | None = None  # the database's server_encoding, once read
        self._closed = False
        self.generation = 0
        self._stand_in_shapes: dict[str, dict[str, str]] = {}  # quoted name -> columns
        self._copies = SessionCopies(self)

    # -- transactions ------------------------------------------------------------------------
    def _connection(self) -> psycopg.Connection[Any]:
        """The connection, usable: one privplan opened and found closed or broken (the server
        restarted, the backend was terminated) is replaced by a new one; a caller's is not
        privplan's to replace (EngineUnavailableError)."""
        import psycopg

        if _alive(self._con):
            return self._con
        if self._closed:
            raise PolicyError("this PostgreSQL engine is closed: open a new session.")
        if not self._owned:
            raise EngineUnavailableError(
                "the PostgreSQL connection privplan was given is closed or broken (the server "
                "went away, the backend was terminated, or the connection was closed). Nothing "
                "was charged for this query. Open a new connection and a new session over it "
                "(the ledger keeps what was spent).")
        with suppress(psycopg.Error):
            self._con.close()
        self._copies.lose()  # (its temporary tables went with it)
        try:
            self._con = psycopg.connect(self._url, autocommit=True, application_name="privplan")
        except psycopg.Error as err:  # (names host and port, never a password)
            raise EngineUnavailableError(_gone(_first(err))) from None
        return self._con

    def _read_only(self, con: psycopg.Connection[Any]
                   ) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        """A read-only transaction with this engine's settings, ended (committed, or rolled
        back on an error) when the block ends."""
        return self._transaction(con, read_only=True)

    @contextmanager
    def _transaction(self, con: psycopg.Connection[Any], *, read_only: bool
                     ) -> Iterator[psycopg.Connection[Any]]:
        """A transaction with this engine's settings: read only for every statement that reads
        rows; read-write only to create or drop the session's temporary copies
        (:mod:`privplan.engines.postgres_copies`)."""
        from psycopg import pq

        if con.info.transaction_status != pq.TransactionStatus.IDLE:
            raise PolicyError(
                "the PostgreSQL connection is inside a transaction: privplan reads in a "
                "read-only transaction of its own. Commit or roll back first.")
        with con.transaction():
            con.execute(
                f"SET TRANSACTION READ {'ONLY' if read_only else 'WRITE'}; "
                f"SET LOCAL statement_timeout = {self.statement_timeout_ms}; "
                "SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; "
                "SET LOCAL IntervalStyle = 'postgres'; SET LOCAL extra_float_digits = 3; "
                "SET LOCAL client_encoding = 'UTF8'; SET LOCAL bytea_output = 'hex'")
            yield con

    def _query(self, sql: str) -> _Result:
        """Render one DuckDB-dialect statement, run it read-only and keep its result as
        text. A statement the renderer cannot carry over fails like one PostgreSQL refuses.

        A connection lost while the statement runs (the server stopped, the backend was
        terminated) is EngineUnavailableError, never a refusal of the statement; a connection
        privplan opened is opened again and the statement run once more first (nothing was
        returned: running it again releases nothing twice)."""

        # (a statement over a copy lost with its connection reads the copy's SELECT inline:
        # rendered again on the second attempt, after a new connection forgot the copies)
        return self._attempts(lambda: self._render(self._copies.inline_lost(sql)))

    def _render(self, sql: str) -> str:
        """One DuckDB-dialect statement in PostgreSQL's dialect."""
        try:
            return render(sql, self.dialect)
        except sqlglot.errors.SqlglotError as err:
            raise _Failed(f"it cannot be written for PostgreSQL ({_first(err)})", "") from None

    def _query_native(self, pg_sql: str) -> _Result:
        """:meth:`_query` of a statement already in PostgreSQL's dialect."""
        return self._attempts(lambda: pg_sql)

    def _attempts(self, text: Callable[[], str]) -> _Result:
        """Run ``text()`` read-only, once more on a new connection if privplan's was lost."""
        import psycopg

        for attempt in (1, 2):
            con = self._connection()
            pg_sql = text()
            try:
                with self._read_only(con) as transaction:
                    return self._execute(transaction, pg_sql)
            except (_Failed, psycopg.Error) as err:  # (the statement, or the rollback, failed)
                if _alive(con):
                    if isinstance(err, _Failed):
                        raise
                    raise _Failed(_first(err), getattr(err, "sqlstate", None) or "") from None
                why = err.message if isinstance(err, _Failed) else _first(err)
            if not self._owned or attempt == 2:
                raise EngineUnavailableError(_gone(why, given=not self._owned))
        raise AssertionError("unreachable")

    def _execute(self, con: psycopg.Connection[Any], pg_sql: str) -> _Result:
        from psycopg import pq

        res = con.pgconn.exec_params(pg_sql.encode("utf-8"), [], result_format=0)
        if res.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            message = res.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b"failed"
            state = res.error_field(pq.DiagnosticField.SQLSTATE) or b""
            raise _Failed(message.decode("utf-8", "replace"), state.decode())
        n, rows = res.nfields, res.ntuples
        oids = [res.ftype(i) for i in range(n)]
        mods = [res.fmod(i) for i in range(n)]
        try:  # (a SQL_ASCII database returns its bytes unchecked: not always UTF-8)
            names = [(res.fname(i) or b"").decode("utf-8") for i in range(n)]
            columns = [[None if (v := res.get_value(r, i)) is None else v.decode("utf-8")
                        for r in range(rows)] for i in range(n)]
        except UnicodeDecodeError:
            raise _Failed("a value is not valid UTF-8 (the database's server_encoding does "
                          "not check its strings)", "22021") from None
        finally:
            res.clear()
        unknown = sorted({o for o in oids if o not in _BUILTIN and o != _NUMERIC})
        found: dict[int, str] = {}
        if unknown:
            listed = ", ".join(str(o) for o in unknown)
            typed = con.pgconn.exec_params(
                f"SELECT oid::bigint, typname FROM pg_catalog.pg_type WHERE oid IN ({listed})"
                .encode(), [], result_format=0)
            found = {int(typed.get_value(r, 0) or 0): (typed.get_value(r, 1) or b"").decode()
                     for r in range(typed.ntuples)}
        types = [_duckdb_type(o, m, found) for o, m in zip(oids, mods)]
        return _Result(names, oids, mods, columns, types)

    # -- tables ------------------------------------------------------------------------------
    def table_sql(self, table: Any) -> str:
        """How statements name the policy table: a view this engine defined (inlined as its
        parenthesised select), the table's ``source`` (a table expression), or
        ``"schema"."name"`` / ``"name"`` (PostgreSQL's search_path finds an unqualified one)."""
        name = table.name
        if name.lower() in self._views:
            return self._views[name.lower()]
        source = getattr(table, "source", None)
        if source:
            if source.lower().endswith((".csv", ".parquet")):
                raise PolicyError(
                    f"table {name}: a PostgreSQL session reads the tables in its database, not "
                    f"files ('{source}'). Load the file into PostgreSQL, or use the embedded "
                    "DuckDB engine.")
            return str(source)
        schema = getattr(table, "schema", None)
        if schema and self._exists(f"{_quote(schema)}.{_quote(name)}"):
            return f"{_quote(schema)}.{_quote(name)}"
        return _quote(name)  # (as the DuckDB engine: a schema the database lacks is ignored)

    def _exists(self, qualified: str) -> bool:
        try:
            found = self._query(f"SELECT to_regclass('{qualified.replace(chr(39), chr(39) * 2)}')")
        except _Failed:
            return False
        return bool(found.columns and found.columns[0] and found.columns[0][0] is not None)

    def columns(self, table_sql: str) -> dict[str, str]:
        """Column (lower case) -> DuckDB type name, from a ``LIMIT 0`` describe: int2 SMALLINT,
        int4 INTEGER, int8 BIGINT, float4 FLOAT, float8 DOUBLE, numeric(p,s) DECIMAL(p,s) for
        p <= 38, text and varchar VARCHAR (``TEXT IN <encoding>`` in a database whose
        server_encoding is not UTF8), bool BOOLEAN, date DATE, timestamp TIMESTAMP,
        timestamptz TIMESTAMP WITH TIME ZONE, and any other type its name upper-cased; an
        unconstrained or wider numeric is NUMERIC and char(n) BPCHAR (:data:`UNMODELLED`)."""
        sql = f"SELECT * FROM {table_sql} AS __describe LIMIT 0"
        try:
            result = self._query(sql)
        except _Failed as err:
            raise PolicyError(
                f"table {table_sql} is declared in the policy but the database has no such "
                f"table ({err.message}). Create it in PostgreSQL, or set `source:` in the "
                "policy.") from None
        types = {n.lower(): t for n, t in zip(result.names, result.types)}
        if "VARCHAR" in types.values() and (encoding := self._server_encoding()) != "UTF8":
            types = {n: f"TEXT IN {encoding}" if t == "VARCHAR" else t for n, t in types.items()}
        return types

    def _server_encoding(self) -> str:
        """The database's server_encoding (read once). In any other than UTF8, text compares
        by that encoding's bytes, and SQL_ASCII does not even check that a string is text:
        its text columns are reported as ``TEXT IN <encoding>``, a type no policy column
        accepts (:func:`privplan.engines.portable.check_stored_types`)."""
        if self._encoding is None:
            found = self._query("SELECT current_setting('server_encoding')")
            self._encoding = str(found.columns[0][0] or "").upper()
        return self._encoding

    def not_null_columns(self, table_sql: str) -> set[str]:
        """The columns (lower case) a ``NOT NULL`` constraint of the table ``table_sql`` names
        rules out NULL for, read from the catalog (``pg_attribute.attnotnull``), never from rows:
        what a bool group key's public domain may rely on, as on DuckDB (see
        ``SessionCatalog.schema_not_null``). A view or table expression has none."""
        literal = "'" + table_sql.replace("'", "''") + "'"
        sql = ("SELECT a.attname FROM pg_catalog.pg_attribute AS a WHERE a.attrelid = "
               f"to_regclass({literal}) AND a.attnum > 0 AND a.attnotnull AND NOT a.attisdropped")
        try:
            result = self._query_native(sql)
        except _Failed:
            return set()  # (no such relation by that name: a table expression, or a view)
        return {str(n).lower() for n in (result.columns[0] if result.columns else []) if n}

    def null_columns(self, table_sql: str, columns: list[str]) -> list[str]:
        """Which of ``columns`` hold a NULL (one scan; see ``Session._check_not_null``)."""
        items = ", ".join(f"bool_or({_quote(c)} IS NULL)" for c in columns)
        try:
            result = self._query(f"SELECT {items} FROM {table_sql}")
        except _Failed:
            raise ExecutionError(
                "the engine failed while checking `nullable: false` columns for NULLs; the "
                "engine's message is withheld because it could quote private values.") from None
        return [c for c, values in zip(columns, result.columns) if values and values[0] == "t"]

    def register(self, name: str, data: Any) -> None:
        """Refused: PostgreSQL is read, never written, by privplan."""
        raise PolicyError(
            f"cannot register '{name}': a PostgreSQL session reads the tables in its database. "
            "Create the table in PostgreSQL, or use the embedded DuckDB engine to register "
            "DataFrames and files.")

    def create_view(self, name: str, select_sql: str) -> None:
        """Define (or redefine) ``name`` as ``select_sql`` without DDL (the transaction is
        read-only): ``table_sql`` of that name returns the parenthesised select. It is bound
        now (no row is read), so its errors are about names and types only and are shown."""
        self._bind_pg(select_sql, "the engine rejected the per-unit subquery", "Check the "
                      "inner query's columns and types against the policy.")
        self._views[name.lower()] = f"({select_sql})"
        self._shadow.forget(name)
        self.generation += 1

    def materialize(self, select_sql: str) -> str:
        """The session's copy of ``select_sql``'s rows (a temporary table, made once per
        distinct SELECT; the session calls this only after the query is charged), or the
        SELECT itself, parenthesised, where no copy can be made: the same rows either way, and
        a failure is never shown (:mod:`privplan.engines.postgres_copies`)."""
        return self._copies.make(select_sql)

    def materialized(self, select_sql: str) -> str | None:
        """The copy :meth:`materialize` made for ``select_sql``, or None if not made yet."""
        return self._copies.made_for(select_sql)

    def domain_table(self, values: list[Any]) -> str:
        """A relation (one column ``x``) holding ``values``, inline: usable as
        ``FROM {relation} AS __u0(x)``. The literals are the DuckDB literals of the values."""
        literals = ", ".join(exp.convert(v).sql("duckdb") for v in values)
        return f"(SELECT unnest([{literals}]) AS x)"

    def forget_durable(self) -> None:
        """Nothing to forget: durable copies are DuckDB-only."""

    # -- the DuckDB types of a statement -----------------------------------------------------
    def _typed(self, sql: str, result: _Result) -> list[tuple[str, str]]:
        """The statement's (column, DuckDB type) pairs: DuckDB's own where the shadow binds it
        to as many columns as PostgreSQL returned, else mapped from PostgreSQL's types."""
        types = self._shadow.types(sql)
        if types is not None and len(types) == len(result.names):
            return types
        return [(n, shadow_type(t)) for n, t in zip(result.names, result.types)]

    def _convert(self, typed: list[tuple[str, str]],
                 result: _Result) -> duckdb.DuckDBPyRelation:
        """The text values cast to the DuckDB types by DuckDB (a relation to convert)."""
        params = [list(values) for values in result.columns]
        inner = ", ".join(f"unnest(${i + 1}::VARCHAR[]) AS c{i}" for i in range(len(typed)))
        outer = ", ".join(f"{_from_text(f'c{i}', t)} AS {_quote(n)}"
                          for i, (n, t) in enumerate(typed))
        if not typed:
            return self._shadow.con.sql("SELECT 1 WHERE false")
        if not result.columns[0]:  # (no row: unnest of empty lists binds to no row either)
            return self._shadow.con.sql(
                f"SELECT {outer} FROM (SELECT " + ", ".join(
                    f"CAST(NULL AS VARCHAR) AS c{i}" for i in range(len(typed)))
                + ") WHERE false")
        return self._shadow.con.query(f"SELECT {outer} FROM (SELECT {inner})", params=params)

    # -- statements --------------------------------------------------------------------------
    def _bind_pg(self, sql: str, what: str, fix: str) -> _Result:
        try:
            return self._query(f"SELECT * FROM ({sql}) AS __bind LIMIT 0")
        except _Failed as err:
            raise UnsupportedQueryError(f"{what}: {err.message}. {fix}") from None

    def bind(self, sql: str) -> list[tuple[str, str]]:
        """Bind the statement on PostgreSQL without reading a row (``LIMIT 0`` of it, in a
        read-only transaction): errors that do not depend on the data (unknown names, types,
        functions PostgreSQL lacks) surface here, before any charge. Returns (column, DuckDB
        type) pairs: DuckDB's binding of the statement where the shadow can make it."""
        result = self._bind_pg(sql, "the engine rejected the query", "Check column types "
                               "against the policy (e.g. comparing a number with a string).")
        return self._typed(sql, result)

    def run(self, sql: str) -> pd.DataFrame:
        """Run an engine statement; the frame has the columns and dtypes ``DuckDBEngine.run``
        gives for it. A failure (on PostgreSQL, or converting a value) may quote a raw value,
        so its message is withheld, and so is its kind (the SQLSTATE of a failed conversion is
        a bit about the rows; DESIGN.md invariant 5); a statement stopped by privplan's own
        timeout says so."""
        try:
            result = self._query(sql)
        except EngineUnavailableError:  # (gone while the charged statement ran: withheld too)
            raise ExecutionError(RUN_FAILED) from None
        except _Failed as err:
            if err.sqlstate == "57014":  # query_canceled: the statement_timeout
                raise ExecutionError(
                    f"the engine stopped the query after statement_timeout "
                    f"({self.statement_timeout_ms} ms); no rows were returned.") from None
            raise ExecutionError(RUN_FAILED) from None
        try:
            return _frame(self._convert(self._typed(sql, result), result))
        except duckdb.Error:  # (a value the engine returned did not convert to its type)
            raise ExecutionError(RUN_FAILED) from None

    def fetch_public(self, sql: str) -> list[tuple[Any, ...]]:
        """Run a query over PUBLIC tables only; values as DuckDB's ``fetchall`` gives them.
        Its errors may be shown, since public data is not protected."""
        try:
            result = self._query(sql)
            return self._convert(self._typed(sql, result), result).fetchall()
        except _Failed as err:
            raise UnsupportedQueryError(
                f"a query over the public table failed: {err.message}") from None
        except duckdb.Error as err:
            raise UnsupportedQueryError(
                f"a query over the public table failed: {str(err).splitlines()[0]}") from None

    # -- the pre-charge gate's stand-in rows (privplan.gate) ---------------------------------
    def _shadow_columns(self, table_sql: str) -> dict[str, str]:
        """The shadow's view of a table: a stand-in relation's columns, or the table's."""
        shape = self._stand_in_shapes.get(table_sql) or self._copies.shapes.get(table_sql)
        return dict(shape) if shape is not None else self.columns(table_sql)

    def stand_in_values(self, storage_type: str) -> Values:
        """The edge values a column of ``storage_type`` can store, for the pre-charge gate
        (:func:`privplan.engines.postgres_probe.stand_in_values`)."""
        return postgres_probe.stand_in_values(self, storage_type)

    def stand_in_rows(self, select_sql: str) -> str:
        """Stand-in rows of the gate as they are: PostgreSQL plans the statement that reads them
        quickly enough (no table is made for them)."""
        return select_sql

    def probe(self, sql: str, stand_ins: Mapping[str, StandIn], *, bind_only: bool = False
              ) -> pd.DataFrame | None:
        """``sql`` over stand-in rows, for the pre-charge gate
        (:func:`privplan.engines.postgres_probe.probe`)."""
        return postgres_probe.probe(self, sql, stand_ins, bind_only=bind_only)

    def _probe_native(self, text: str, typed_as: str, *, bind_only: bool
                      ) -> pd.DataFrame | None:
        """Run a probe already in PostgreSQL's dialect (:mod:`.postgres_probe`); its answer
        typed as ``typed_as`` (the DuckDB statement) would be, as :meth:`run` types one."""
        try:
            result = self._query_native(text)
        except _Failed as err:
            raise ProbeFailed("bind" if bind_only or err.sqlstate.startswith("42") else "run",
                              err.message) from None
        if bind_only:
            return None
        try:
            return _frame(self._convert(self._typed(typed_as, result), result))
        except duckdb.Error as err:
            raise ProbeFailed("run", str(err).splitlines()[0]) from None

    def close(self) -> None:
        """Drop the session's copies, close the connection this engine opened (a caller's
        stays open) and the shadow."""
        import psycopg

        self._copies.drop_all()
        self._closed = True
        if self._owned:
            with suppress(psycopg.Error):
                self._con.close()
        self._shadow.close()
