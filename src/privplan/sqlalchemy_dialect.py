"""A SQLAlchemy 2 dialect over :mod:`privplan.dbapi.connection`: DP answers through engines and pandas.

>>> import sqlalchemy, pandas                                            # doctest: +SKIP
>>> engine = sqlalchemy.create_engine(
...     "privplan:///data.duckdb?policy=policy.yaml&ledger=ledger.sqlite"
...     "&budget_epsilon=3&epsilon=0.5", pool_pre_ping=True)              # doctest: +SKIP
>>> pandas.read_sql("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital",
...                 engine)                                              # doctest: +SKIP
>>> sqlalchemy.inspect(engine).get_columns("visits")                    # doctest: +SKIP

Installed with ``pip install 'privplan[sqlalchemy]'``, which registers the dialect under the
name ``privplan`` (entry point ``sqlalchemy.dialects``). ``import privplan`` never imports this
module (nor SQLAlchemy): SQLAlchemy's registry loads it when a ``privplan://`` URL is used.

The URL
-------

``privplan:///<database>?<parameters>``. As for SQLite, the database path follows the third
slash: ``privplan:///data.duckdb`` is relative to the working directory and
``privplan:////srv/data.duckdb`` is absolute. Without a path (``privplan://``) the database is
``:memory:`` (for a policy whose tables name their files with ``source:``). The parameters:

``policy`` (required)
    Path of the policy YAML file. It is read once, when the engine is created, and every
    connection of the engine uses that policy.
``ledger`` (required)
    Path of the SQLite ledger file that records every charge. Required because each pooled
    connection is its own :class:`privplan.Session`: only a shared ledger file makes them
    (and other processes) share one budget. With an in-memory ledger every new connection
    would start with a fresh budget, and a pool opens connections whenever it likes.
``budget_epsilon`` / ``budget_delta`` / ``budget_rho`` / ``budget_mu`` (exactly one kind)
    The session's total budget, and with it the privacy definition the ledger composes in:
    ``budget_epsilon=3`` is ``PureDP(3)``, ``budget_epsilon=3&budget_delta=1e-6`` is
    ``ApproxDP(3, 1e-6)``, ``budget_rho=0.5`` is ``ZCDP(0.5)``, ``budget_mu=1`` is
    ``GDP(1)``.
``epsilon`` / ``delta`` / ``rho`` / ``mu`` (optional)
    The default budget of each query, as in :func:`privplan.dbapi.connect` (``pandas.read_sql``
    and SQLAlchemy cannot pass one per query). Without it, each query must carry its own,
    in BigQuery's ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=...)`` syntax.

Numbers are read as exact decimals (``0.1`` is one tenth). Every parameter is checked when
the engine is created, before any connection is opened: an unknown or repeated parameter, a
missing one, a value that is not a positive number or a per-query budget of another privacy
definition than the total raises :class:`sqlalchemy.exc.ArgumentError` naming the parameter
and the fix; nothing is spent.

What SQLAlchemy sees
--------------------

* Every statement is one DP query, charged (durably, in the ledger) before its answer is
  released; ``cursor.cost`` tells what it added. Transactions are therefore trivial: the
  isolation level is ``AUTOCOMMIT``, ``commit`` is a no-op and ``rollback`` does nothing (see
  :meth:`PrivplanDialect.do_rollback`).
* ``pandas.read_sql_table("visits", engine)`` (a SELECT of every column of the table) is
  refused with the reason and the fix: it would release every row; pass a DP query to
  ``pandas.read_sql`` instead (:mod:`privplan.dbapi.tables`). Nothing is spent.
* ``SELECT 1`` and the pool's pre-ping (:meth:`PrivplanDialect.do_ping`) are answered without
  a charge and without reading any table (see :mod:`privplan.dbapi.connection`).
* The inspector shows the policy's schema: every declared table (in schema ``main`` unless
  the policy names one) with its columns, types and nullability; no views, keys or indexes.
  This is public metadata, never data, and costs nothing.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

from sqlalchemy import exc
from sqlalchemy import types as sqltypes
from sqlalchemy.engine import URL, reflection
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.engine.interfaces import (
    IsolationLevel,
    ReflectedColumn,
    ReflectedPrimaryKeyConstraint,
    ReflectedTableComment,
)

from privplan.dbapi.sqlalchemy_url import connect_arguments

__all__ = ["PrivplanDialect", "connect_arguments"]

_AUTOCOMMIT: IsolationLevel = "AUTOCOMMIT"

# DuckDB type names (as privplan.dbapi.describe_schema reports them) -> SQLAlchemy types.
_TYPES: dict[str, Any] = {
    "BIGINT": sqltypes.BIGINT,
    "INTEGER": sqltypes.INTEGER,
    "SMALLINT": sqltypes.SMALLINT,
    "TINYINT": sqltypes.SMALLINT,
    "UBIGINT": sqltypes.BIGINT,
    "UINTEGER": sqltypes.BIGINT,
    "USMALLINT": sqltypes.INTEGER,
    "UTINYINT": sqltypes.SMALLINT,
    "DOUBLE": sqltypes.DOUBLE,
    "FLOAT": sqltypes.FLOAT,
    "REAL": sqltypes.REAL,
    "VARCHAR": sqltypes.VARCHAR,
    "BOOLEAN": sqltypes.BOOLEAN,
    "DATE": sqltypes.DATE,
    "TIME": sqltypes.TIME,
    "TIMESTAMP": sqltypes.TIMESTAMP,
    "BLOB": sqltypes.BLOB,
    "UUID": sqltypes.UUID,
    "INTERVAL": sqltypes.Interval,
}
_DECIMAL = re.compile(r"(?:DECIMAL|NUMERIC)\((\d+),\s*(\d+)\)")


def _sa_type(name: str) -> sqltypes.TypeEngine[Any]:
    """The SQLAlchemy type of a DuckDB type name (NullType for one it does not know)."""
    upper = name.strip().upper()
    if upper in _TYPES:
        return _TYPES[upper]()
    if upper in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"):
        return sqltypes.TIMESTAMP(timezone=True)
    if upper in ("HUGEINT", "UHUGEINT"):
        return sqltypes.NUMERIC(38, 0)
    found = _DECIMAL.fullmatch(upper)
    if found:
        return sqltypes.NUMERIC(int(found[1]), int(found[2]))
    return sqltypes.NullType()


class PrivplanDialect(DefaultDialect):
    """The ``privplan://`` dialect: each connection a :class:`privplan.dbapi.Connection`."""

    name = "privplan"
    driver = "dbapi"
    supports_statement_cache = True
    default_paramstyle = "qmark"
    supports_native_boolean = True
    supports_native_decimal = True
    supports_alter = False
    supports_sequences = False
    supports_default_values = False
    supports_empty_insert = False
    supports_multivalues_insert = False
    supports_sane_rowcount = False
    supports_sane_multi_rowcount = False
    supports_server_side_cursors = False
    use_insertmanyvalues = False
    postfetch_lastrowid = False
    default_schema_name = "main"

    @classmethod
    def import_dbapi(cls) -> ModuleType:
        from privplan import dbapi

        return dbapi

    def create_connect_args(self, url: URL) -> tuple[list[Any], dict[str, Any]]:
        """Checked when the engine is created, so a bad URL fails before any connection."""
        return [], connect_arguments(url)

    # -- connection health and transactions ------------------------------------------------
    def do_ping(self, dbapi_connection: Any) -> bool:
        """``SELECT 1`` through a cursor: privplan.dbapi.connection answers a constant select itself,
        without a charge and without reading any table. A closed connection raises, which
        :meth:`is_disconnect` reports so that the pool replaces it."""
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SELECT 1")
            return bool(cursor.fetchone() == (1,))
        finally:
            cursor.close()

    def is_disconnect(self, e: Exception, connection: Any, cursor: Any) -> bool:
        from privplan import dbapi

        return isinstance(e, dbapi.ProgrammingError) and "is closed" in str(e)

    def do_rollback(self, dbapi_connection: Any) -> None:
        """Nothing to roll back. The pool calls this whenever it takes a connection back,
        but nothing is ever pending: every answer is charged durably, in the ledger, before
        it is released (privplan.dbapi.connection's ``commit`` is a no-op for that reason). Its
        ``rollback`` raises NotSupportedError because a released answer cannot be un-spent;
        passing that on here would make every return to the pool an error."""

    def get_isolation_level(self, dbapi_connection: Any) -> IsolationLevel:
        """``AUTOCOMMIT``: each statement's charge is committed before its answer exists."""
        return _AUTOCOMMIT

    def get_isolation_level_values(self, dbapi_connection: Any) -> list[IsolationLevel]:
        return [_AUTOCOMMIT]

    def set_isolation_level(self, dbapi_connection: Any, level: IsolationLevel) -> None:
        if level != _AUTOCOMMIT:
            raise exc.ArgumentError(
                f"privplan supports only the AUTOCOMMIT isolation level, not {level!r}: every "
                "answer is charged and committed before it is released")

    def _get_server_version_info(self, connection: Any) -> tuple[int, ...]:
        from privplan import __version__

        return tuple(int(p) for p in re.findall(r"\d+", __version__)[:3])

    def _get_default_schema_name(self, connection: Any) -> str:
        return self.default_schema_name

    # -- reflection: the policy's schema -----------------------------------------------------
    def _tables(self, connection: Any, schema: str | None) -> dict[str, Any]:
        """The tables of ``schema`` (default ``main``), by lower-case name."""
        wanted = (schema or self.default_schema_name or "main").lower()
        described = connection.connection.dbapi_connection.describe_schema()
        return {t.name.lower(): t for t in described if t.schema.lower() == wanted}

    def _table(self, connection: Any, table_name: str, schema: str | None) -> Any:
        table = self._tables(connection, schema).get(table_name.lower())
        if table is None:
            raise exc.NoSuchTableError(f"{schema}.{table_name}" if schema else table_name)
        return table

    @reflection.cache
    def get_schema_names(self, connection: Any, **kw: Any) -> list[str]:
        described = connection.connection.dbapi_connection.describe_schema()
        return list(dict.fromkeys([self.default_schema_name, *(t.schema for t in described)]))

    @reflection.cache
    def get_table_names(self, connection: Any, schema: str | None = None,
                        **kw: Any) -> list[str]:
        return [t.name for t in self._tables(connection, schema).values()]

    def has_table(self, connection: Any, table_name: str, schema: str | None = None,
                  **kw: Any) -> bool:
        return table_name.lower() in self._tables(connection, schema)

    @reflection.cache
    def get_columns(self, connection: Any, table_name: str, schema: str | None = None,
                    **kw: Any) -> list[ReflectedColumn]:
        table = self._table(connection, table_name, schema)
        return [{"name": c.name, "type": _sa_type(c.type), "nullable": c.nullable,
                 "default": None, "autoincrement": False} for c in table.columns]

    def get_view_names(self, connection: Any, schema: str | None = None,
                       **kw: Any) -> list[str]:
        return []

    def get_materialized_view_names(self, connection: Any, schema: str | None = None,
                                    **kw: Any) -> list[str]:
        return []

    def get_temp_table_names(self, connection: Any, schema: str | None = None,
                             **kw: Any) -> list[str]:
        return []

    def get_temp_view_names(self, connection: Any, schema: str | None = None,
                            **kw: Any) -> list[str]:
        return []

    def get_sequence_names(self, connection: Any, schema: str | None = None,
                           **kw: Any) -> list[str]:
        return []

    def has_sequence(self, connection: Any, sequence_name: str, schema: str | None = None,
                     **kw: Any) -> bool:
        return False

    def has_index(self, connection: Any, table_name: str, index_name: str,
                  schema: str | None = None, **kw: Any) -> bool:
        self._table(connection, table_name, schema)
        return False

    def get_view_definition(self, connection: Any, view_name: str, schema: str | None = None,
                            **kw: Any) -> str:
        raise exc.NoSuchTableError(view_name)

    def get_pk_constraint(self, connection: Any, table_name: str, schema: str | None = None,
                          **kw: Any) -> ReflectedPrimaryKeyConstraint:
        self._table(connection, table_name, schema)
        return {"constrained_columns": [], "name": None}

    def get_foreign_keys(self, connection: Any, table_name: str, schema: str | None = None,
                         **kw: Any) -> list[Any]:
        self._table(connection, table_name, schema)
        return []

    def get_indexes(self, connection: Any, table_name: str, schema: str | None = None,
                    **kw: Any) -> list[Any]:
        self._table(connection, table_name, schema)
        return []

    def get_unique_constraints(self, connection: Any, table_name: str,
                               schema: str | None = None, **kw: Any) -> list[Any]:
        self._table(connection, table_name, schema)
        return []

    def get_check_constraints(self, connection: Any, table_name: str,
                              schema: str | None = None, **kw: Any) -> list[Any]:
        self._table(connection, table_name, schema)
        return []

    def get_table_comment(self, connection: Any, table_name: str, schema: str | None = None,
                          **kw: Any) -> ReflectedTableComment:
        self._table(connection, table_name, schema)
        return {"text": None}

    def get_table_options(self, connection: Any, table_name: str, schema: str | None = None,
                          **kw: Any) -> dict[str, Any]:
        self._table(connection, table_name, schema)
        return {}


dialect = PrivplanDialect
