"""The *shadow*: DuckDB's result types for statements another engine runs.

Engine statements are written in DuckDB's dialect and must come back with the types the
embedded DuckDB engine would give (:mod:`privplan.engines.base`). A remote engine's own result
types differ (``ROW_NUMBER()`` is an INT on Spark, ``FLOOR`` of a double a BIGINT, ``SUM`` of a
DECIMAL has another precision, ...), so a remote engine keeps a :class:`Shadow`: a private
in-process DuckDB holding one **empty** table for each remote table (or view) its statements
read, with the DuckDB column types the engine's own ``columns()`` reports for it. Binding the
statement there (``con.sql``: nothing runs, no row exists) gives DuckDB's own result types,
which the engine then casts the remote rows to before DuckDB converts them to pandas.

No table of the user's is ever visible on the shadow's connection: it holds empty tables only,
replacement scans of Python objects are off, and so is access to files and the network.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import duckdb
import sqlglot
from sqlglot import exp

from privplan.errors import PolicyError

_CACHE = 512  # statements whose types are kept


def quote(name: str) -> str:
    """``name`` as a double-quoted identifier (DuckDB, PostgreSQL)."""
    return '"' + name.replace('"', '""') + '"'


def shadow_type(duckdb_type: str) -> str:
    """The DuckDB column type standing for a remote column reported as ``duckdb_type``: the
    type itself, DOUBLE for an unmodelled NUMERIC, VARCHAR for a blank-padded BPCHAR, a
    collated string (``VARCHAR COLLATE ...``) and any name DuckDB has no type for."""
    if duckdb_type == "NUMERIC":
        return "DOUBLE"
    if duckdb_type == "BPCHAR" or duckdb_type.startswith("VARCHAR COLLATE "):
        return "VARCHAR"
    try:
        duckdb.sqltype(duckdb_type)
    except (duckdb.Error, ValueError, TypeError):
        return "VARCHAR"
    return duckdb_type


class Shadow:
    """Empty DuckDB tables shaped like a remote engine's tables, made when a statement first
    reads them; ``columns`` is the engine's own ``columns(table_sql)`` (column -> DuckDB type
    of a DuckDB-dialect table reference, PolicyError if there is no such table)."""

    def __init__(self, columns: Callable[[str], dict[str, str]]) -> None:
        self._columns = columns
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET python_enable_replacements = false")
        self.con.execute("SET enable_external_access = false")
        self._shadowed: set[tuple[str, str]] = set()  # (schema, name) as statements write them
        self._types: dict[str, list[tuple[str, str]] | None] = {}

    def _make(self, sql: str) -> None:
        """Make an empty table for every table ``sql`` reads that has none yet; a table the
        engine does not have (or names DuckDB cannot hold) is left out (the statement's bind
        on the engine reports it)."""
        try:
            tree = sqlglot.parse_one(sql, read="duckdb")
        except sqlglot.errors.ParseError:
            return
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier) or table.catalog:
                continue
            key = (table.db, table.name)
            if key in self._shadowed or (not table.db and table.name.lower() in ctes):
                continue
            name = f"{quote(table.db)}.{quote(table.name)}" if table.db else quote(table.name)
            try:
                cols = self._columns(name)
            except PolicyError:
                continue
            items = ", ".join(f"{quote(c)} {shadow_type(t)}" for c, t in cols.items())
            try:
                if table.db:
                    self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(table.db)}")
                self.con.execute(f"CREATE OR REPLACE TABLE {name} ({items})")
            except duckdb.Error:
                continue
            self._shadowed.add(key)

    def types(self, sql: str) -> list[tuple[str, str]] | None:
        """The (column, DuckDB type) pairs DuckDB binds ``sql`` to over the shadow, or None
        where it cannot (a statement only the remote engine understands)."""
        if sql not in self._types:
            self._make(sql)
            try:
                relation = self.con.sql(sql)
                found: list[tuple[str, str]] | None = list(
                    zip(relation.columns, (str(t) for t in relation.types)))
            except duckdb.Error:
                found = None
            if len(self._types) > _CACHE:
                self._types.clear()
            self._types[sql] = found
        return self._types[sql]

    def forget(self, name: str, schema: str = "") -> None:
        """The remote table or view ``name`` changed (redefined, re-registered, dropped): its
        empty table goes (made again from ``columns`` when next read), and so does every
        statement's cached types."""
        self._types.clear()
        for key in [k for k in self._shadowed
                    if k[0].lower() == schema.lower() and k[1].lower() == name.lower()]:
            self._shadowed.discard(key)
            table = f"{quote(key[0])}.{quote(key[1])}" if key[0] else quote(key[1])
            with contextlib.suppress(duckdb.Error):
                self.con.execute(f"DROP TABLE IF EXISTS {table}")

    def forget_all(self) -> None:
        """Every remote table may have changed: every empty table and cached type goes."""
        for schema, name in list(self._shadowed):
            self.forget(name, schema)
        self._types.clear()

    def close(self) -> None:
        self._shadowed.clear()
        self._types.clear()
        self.con.close()
