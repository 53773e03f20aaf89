"""A PostgreSQL session's bounded copies: temporary tables made once, read by every later query.

A user-level query reads the table's *bounded copy* (at most ``max_rows_per_unit`` rows per
unit, chosen by a deterministic order over the unit's own rows, unit-level columns made
canonical, bounded numeric columns on their SUM grid: :func:`privplan.rewrite.engine_sql.
bounded_source`). The PostgreSQL engine used to inline that SELECT as a subquery of every
statement, so every query ran the per-unit window over every row again (a user-level grouped
COUNT 18x the plain query). As the DuckDB and Spark engines do, a session now makes the copy
once, on the *second* query that needs it (the first with ``prepare=True``), as a **temporary
table** of its connection (``pg_temp."__privplan_copy_<hash of the SELECT>"``), and later
statements read it.

**Why the second query.** Filling the copy costs about twice the inlined statement (1M rows:
7.0 s against 3.1 s; PostgreSQL 15 runs ``INSERT ... SELECT`` without parallel workers, and
temporary tables go through ``temp_buffers``). A session that asks once (the CLI, a DB-API
connection per request) would pay that for one answer, so the first query of a session that
needs a copy reads its SELECT inline, as before copies, and the second makes the copy that it
and every later one read (then about 2x the plain query). The choice depends on how many
queries the session ran over that SELECT, never on a row. It is the session's choice, made in
one place for every engine (:class:`privplan.session.copies.SessionCopies`): this module makes
a copy whenever it is asked for one.

**The same rows.** The table is filled by ``INSERT INTO copy <the very SELECT that is inlined
otherwise>``, rendered by the same renderer, so it holds exactly the rows (and values, types and
collations: ``CREATE TABLE AS`` keeps each output column's type and collation) the inlined
subquery computes. It is keyed by the hash of that SELECT (table, column types, bounds,
resolutions, ``max_rows_per_unit``, unit-level columns): a statement reads a copy only in place
of the identical subquery. The engine's shadow types the copy's columns by DuckDB's binding of
that SELECT, so statements over the copy come back with the types the inlined ones had.

**Privacy: when it is made, and what a failure does.** The session asks for the copy only after
a query that needs it is charged (``Session._run_core``, as on DuckDB: DESIGN.md
invariant 3); making it returns nothing to anyone (the rows go from one server table to
another). A failure while making it — no ``TEMP`` privilege, a hot standby, a full disk, the
``temp_file_limit``, the statement timeout, the connection lost, or any error at all — is never
shown and never fails the query: the half-made table is dropped, the session stops making
copies, and the query runs its statement with the SELECT inlined, as before. So the analyst
sees the answer the inlined statement gives (or its failure, which reads the same rows with the
same expressions the copy would have read), whatever happened to the copy: a failure that does
not depend on the data spends nothing beyond the query's own charge and changes no answer;
one that does (disk space) changes the time taken only (timing is out of scope, DESIGN.md §1).
(DuckDB and Spark report such a failure after the charge as ``COPY_FAILED``; PostgreSQL can do
better because the inlined statement is always at hand.)

**Read-only transactions.** Every statement that reads rows still runs in a ``READ ONLY``
transaction: PostgreSQL refuses every write in one except to temporary tables, so the copy is
filled there, by ``INSERT``, under the engine's settings and statement timeout. Only the
``CREATE TEMP TABLE ... WITH NO DATA`` (which reads no row: the SELECT is planned, never run)
and the ``DROP`` of privplan's own copies run in a short read-write transaction (``SET
TRANSACTION READ WRITE``, also where the role's default is read only: a temporary table lives
in the session's own schema and goes with it; an owner who wants none revokes ``TEMP`` on the
database, and privplan then inlines). No persistent relation can be written: the statements
that read private rows are SELECTs the rewrite built, in read-only transactions, and the only
temporary tables on privplan's own connection are its copies (on a caller's connection the
caller's own temporary tables are as writable as before, by the caller).

**Staleness: a copy is the session's snapshot.** A copy holds the rows as they were when it
was made, and the session reads it until it closes, as a DuckDB session's copies (``connect``'s
``prepare``) are snapshots: later changes to the table are not seen by that session (open a new
session to see them). Privacy does not depend on it: the copy is a fixed function of each
unit's own rows at the time it is made, which is exactly what the accountant models (a unit is
a fixed set of at most k records), and a session over a live table without copies sees a new
dataset at every query, which the threat model already leaves to the owner (DESIGN.md §1: a
session queries one dataset). Statements join the copy with tables read live: public tables
(their keys checked unique before each charge, so each private row still meets at most one
public row whatever changed: stability 1) — answers then mix the snapshot with the current
public rows, which is an accuracy matter only. Private tables joined on their unit are one
relation whose copy is made as one, so no statement mixes a stale private table with a fresh
one. No cheap, exact change stamp exists for a PostgreSQL table (statistics counters are
asynchronous and can be reset; ``xmin`` scans every row), so none is checked.

**A lost connection** (the server restarted) takes its temporary tables with it: when the
engine opens a new connection the copies are forgotten (the next query makes them again, from
the rows then), and a statement already built over a lost copy reads its SELECT inlined
instead (:meth:`SessionCopies.inline_lost`, through sqlglot's tree, never by text replacement).
"""

from __future__ import annotations

import hashlib
import logging
import time
from contextlib import AbstractContextManager
from typing import Any, Protocol

import sqlglot
from sqlglot import exp

from privplan.engines.shadow import Shadow

__all__ = ["PREFIX", "SCHEMA", "SessionCopies"]

SCHEMA = "pg_temp"
PREFIX = "__privplan_copy_"


def copy_name(select_sql: str) -> str:
    """The copy's table name: the hash of the SELECT that fills it."""
    return PREFIX + hashlib.sha256(select_sql.encode()).hexdigest()[:16]


def reference(select_sql: str) -> str:
    """How statements (DuckDB's dialect, and PostgreSQL's after rendering) name the copy."""
    return f'{SCHEMA}."{copy_name(select_sql)}"'


class _Engine(Protocol):
    """What the copies need of :class:`~privplan.engines.postgres_engine.PostgresEngine`
    (named here so that this module does not import the engine's)."""

    generation: int
    _con: Any
    _shadow: Shadow

    def _render(self, sql: str) -> str: ...
    def _connection(self) -> Any: ...
    def _execute(self, con: Any, pg_sql: str) -> Any: ...
    def _transaction(self, con: Any, *, read_only: bool) -> AbstractContextManager[Any]: ...


class SessionCopies:
    """The copies one :class:`~privplan.engines.postgres_engine.PostgresEngine` made on its
    connection (see the module doc)."""

    def __init__(self, engine: _Engine) -> None:
        self._engine = engine
        self.made: dict[str, str] = {}  # SELECT -> reference, on the current connection
        self._lost: dict[str, str] = {}  # copy name -> its SELECT, for copies whose connection went
        self._connection: Any = None  # the connection the copies live on
        self.disabled = False  # making one failed: this session inlines from now on
        self.shapes: dict[str, dict[str, str]] = {}  # '"pg_temp"."name"' -> DuckDB columns

    def made_for(self, select_sql: str) -> str | None:
        """The copy of ``select_sql`` on the current connection, or None."""
        ref = self.made.get(select_sql)
        if ref is not None and self._connection is not self._engine._con:
            self.lose()
            return None
        return ref

    def make(self, select_sql: str) -> str:
        """The copy of ``select_sql``, made now if needed; where it cannot be made, the SELECT
        itself, parenthesised (inlined: the statement reads the same rows)."""
        known = self.made_for(select_sql)
        if known is not None:
            return known
        inline = f"({select_sql})"
        if self.disabled:
            return inline
        engine = self._engine
        ref, started = reference(select_sql), time.perf_counter()
        try:
            shape = engine._shadow.types(select_sql)  # (DuckDB's types of the inlined columns)
            pg_select = engine._render(select_sql)
            con = engine._connection()
            with engine._transaction(con, read_only=False):  # (reads no row: WITH NO DATA)
                engine._execute(con, f"CREATE TEMP TABLE {ref} AS {pg_select} WITH NO DATA")
            try:
                with engine._transaction(con, read_only=True):
                    engine._execute(con, f"INSERT INTO {ref} {pg_select}")
                    engine._execute(con, f"ANALYZE {ref}")  # (no autovacuum for temp tables)
            except BaseException:
                self._drop(con, [ref])
                raise
        except Exception:  # noqa: BLE001 - any failure: never shown, the query runs inlined
            self.disabled = True
            logging.getLogger("privplan").info(
                "could not make the session's copy of the table on PostgreSQL; this session "
                "reads the table's bounded rows inline (as fast as before copies)")
            return inline
        self._connection = con
        self.made[select_sql] = ref
        self._lost.pop(copy_name(select_sql), None)
        if shape is not None:
            self.shapes[f'"{SCHEMA}"."{copy_name(select_sql)}"'] = dict(shape)
        engine._shadow.forget(copy_name(select_sql), SCHEMA)
        engine.generation += 1  # (plans made before read the table: made again, over the copy)
        logging.getLogger("privplan").info(
            "made the session's copy of the table (%s) in %.2f s", copy_name(select_sql),
            time.perf_counter() - started)
        return ref

    def lose(self) -> None:
        """The connection the copies lived on is gone (a new one replaced it): forget them."""
        if not self.made:
            return
        for select_sql in self.made:
            self._lost[copy_name(select_sql)] = select_sql
        self.made.clear()
        self._connection = None
        self._engine.generation += 1

    def inline_lost(self, sql: str) -> str:
        """``sql`` with every copy lost with its connection read as its SELECT inlined (the
        same rows, made again from the table by the statement itself); ``sql`` unchanged when
        it names none. The tables are replaced in sqlglot's tree (a string literal that happens
        to spell a copy's name stays a string)."""
        if not self._lost or not any(name in sql for name in self._lost):
            return sql
        tree = sqlglot.parse_one(sql, read="duckdb")

        def swap(node: exp.Expression) -> exp.Expression:
            if (isinstance(node, exp.Table) and node.db.lower() == SCHEMA
                    and node.name in self._lost):
                select = sqlglot.parse_one(self._lost[node.name], read="duckdb")
                alias = node.args.get("alias")
                return exp.Subquery(this=select, alias=alias.copy() if alias else None)
            return node

        return tree.transform(swap).sql(dialect="duckdb")

    def drop_all(self) -> None:
        """Drop every copy (the engine closes; a caller's connection stays open without them)."""
        refs = list(self.made.values())
        self.made.clear()
        con = self._connection
        self._connection = None
        if refs and con is not None:
            self._drop(con, refs)

    def _drop(self, con: Any, refs: list[str]) -> None:
        """``DROP TABLE IF EXISTS`` each copy in a read-write transaction; errors ignored (the
        connection may be closed or broken: its temporary tables went with it)."""
        if con.closed or con.broken:
            return
        try:
            with self._engine._transaction(con, read_only=False):
                for ref in refs:
                    self._engine._execute(con, f"DROP TABLE IF EXISTS {ref}")
        except Exception:  # noqa: BLE001 - nothing to report: the copies are the session's own
            logging.getLogger("privplan").debug("could not drop the session's copies")
