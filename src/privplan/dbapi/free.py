"""What :mod:`privplan.dbapi.connection` answers without a charge, and how answers become DB-API rows.

Two kinds of statement read no private row (see :mod:`privplan.dbapi.connection`'s docstring): constant
selects, evaluated here in Python, and ``information_schema`` queries, answered from the
policy's schema on a sandbox connection that holds no row of any table.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import warnings
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

import duckdb
import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import SqlglotError, TokenError
from sqlglot.tokens import TokenType

from privplan import errors as _pe
from privplan.dbapi.errors import OperationalError, ProgrammingError

if TYPE_CHECKING:
    from privplan.session.session import Session

DEFAULT_SCHEMA = "main"  # DuckDB's: the schema of a policy table that declares none

# The engine type privplan reads each policy type as (see privplan.session.session.typed_view).
_POLICY_TYPES = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR", "bool": "BOOLEAN",
                 "date": "DATE", "timestamp": "TIMESTAMP"}


@dataclass(frozen=True)
class ColumnInfo:
    """One column of :meth:`Connection.describe_schema`: its name, its DuckDB type as privplan
    reads it, and whether it may hold NULL."""

    name: str
    type: str
    nullable: bool = True


@dataclass(frozen=True)
class TableInfo:
    """One table of :meth:`Connection.describe_schema`: name, schema (``"main"`` unless the
    policy declares one), whether the policy makes it public, and its columns."""

    name: str
    schema: str
    public: bool
    columns: tuple[ColumnInfo, ...]


def _public_columns(session: Session, table: Any) -> tuple[ColumnInfo, ...]:
    """The columns the database reports for a public table the policy lists without columns
    (none if the database has no such table: a query over it reports that, this does not)."""
    try:
        found = session.engine.columns(session.engine.table_sql(table))
    except (_pe.PrivplanError, duckdb.Error):
        return ()
    return tuple(ColumnInfo(name, str(kind)) for name, kind in found.items())



# ------------------------------------------------------------------------- free answers
# Statements that read no private row (see the module docstring): their answers release
# nothing about anyone, so they are answered here without a charge.

_NUMBER = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]*\.[0-9]*")
_SCHEMA_DB = "information_schema"
_RESERVED_CATALOGS = ("memory", "system", "temp")


@dataclass(frozen=True)
class _Answer:
    """A free answer: its frame, rows and (name, type code) per column."""

    df: pd.DataFrame
    rows: list[tuple[Any, ...]]
    columns: list[tuple[str, str]]


def _one_statement(sql: str) -> exp.Expr | None:
    """The one statement of ``sql`` as sqlglot reads it; None for several statements or SQL
    sqlglot cannot read (the Session then decides, and reports why)."""
    try:
        statements = sqlglot.parse(sql, read="duckdb")
    except SqlglotError:
        return None
    if len(statements) != 1 or statements[0] is None:
        return None
    return statements[0]


def _constant(node: exp.Expr) -> tuple[Any, str] | None:
    """(value, type code) of a literal select item, None for anything else (the allow-list:
    number, string, NULL, TRUE/FALSE, a negated number; no function, cast or subquery)."""
    if isinstance(node, exp.Null):
        return None, "NULL"
    if isinstance(node, exp.Boolean):
        return bool(node.this), "BOOLEAN"
    negate = isinstance(node, exp.Neg)
    if negate:
        node = node.this
    if not isinstance(node, exp.Literal) or (negate and node.is_string):
        return None
    text = str(node.this)
    if node.is_string:
        return text, "VARCHAR"
    value: Any
    if _NUMBER.fullmatch(text):
        value, code = int(text), "BIGINT"
    elif _DECIMAL.fullmatch(text) and text != ".":
        value, code = Decimal(text), "DECIMAL"
    else:
        try:
            value, code = float(text), "DOUBLE"  # e.g. 1e3
        except ValueError:
            return None
        if not math.isfinite(value):
            return None
    return (-value if negate else value), code


def _constant_select(tree: exp.Expr) -> _Answer | None:
    """The answer of ``SELECT <literals>`` (no FROM, nor any other clause), evaluated here in
    Python; None if ``tree`` is anything else."""
    if type(tree) is not exp.Select:
        return None
    if any(value for key, value in tree.args.items() if key != "expressions"):
        return None  # FROM, WHERE, WITH, DISTINCT, LIMIT, ...: not a pure constant select
    columns: list[tuple[str, str]] = []
    values: list[Any] = []
    for item in tree.expressions:
        name = item.alias if isinstance(item, exp.Alias) else None
        node = item.this if isinstance(item, exp.Alias) else item
        found = _constant(node)
        if found is None:
            return None
        values.append(found[0])
        columns.append((name or node.sql(dialect="duckdb"), found[1]))
    if not columns:
        return None
    df = pd.DataFrame([values], columns=[n for n, _ in columns])
    return _Answer(df, [tuple(values)], columns)


def _is_schema_query(tree: exp.Expr) -> bool:
    """Whether ``tree`` reads ``information_schema``; if so, it must read nothing else."""
    tables = list(tree.find_all(exp.Table))
    schema = [t for t in tables if t.text("db").lower() == _SCHEMA_DB]
    if not schema:
        return False
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    others = [t for t in tables if t not in schema
              and not (not t.text("db") and t.name.lower() in ctes)]
    if others or not isinstance(tree, exp.Query):
        raise ProgrammingError(
            "a query over information_schema may read only information_schema tables (and its "
            "own WITH queries) in one SELECT: it is answered from the policy, apart from the "
            "data. Query the schema and the data in separate statements")
    return True


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _catalog(session: Session) -> str | None:
    """The engine's database name (e.g. the DuckDB file's stem), shown as ``table_catalog``;
    None when it would clash with a catalog every DuckDB connection has."""
    try:
        row = session.engine.con.execute(  # type: ignore[attr-defined]
            "SELECT current_database()").fetchone()
    except (duckdb.Error, AttributeError):  # (a PostgreSQL or Spark engine: no catalog shown)
        return None
    name = str(row[0]) if row and row[0] else None
    return None if name is None or name.lower() in _RESERVED_CATALOGS else name


class SchemaReader(Protocol):
    """What a statement answered free reads of its connection
    (:class:`~privplan.dbapi.connection.Connection` is one; it imports this module)."""

    def _check_open(self) -> Session: ...
    def describe_schema(self) -> tuple[TableInfo, ...]: ...


def _schema_answer(connection: SchemaReader, sql: str) -> _Answer:
    """Run ``sql`` (an information_schema query) on a sandbox holding an empty replica of the
    policy's schema (:meth:`Connection.describe_schema`): a new in-memory DuckDB connection
    with file access disabled and its configuration locked, closed afterwards. It holds no
    row of any table and cannot open a file, so its answers and error messages are metadata
    only (shown as they are)."""
    session = connection._check_open()
    tables = connection.describe_schema()
    catalog = _catalog(session)
    sandbox = duckdb.connect(":memory:")
    try:
        try:
            for setting in ("SET python_enable_replacements = false",
                            "SET enable_external_access = false",
                            "SET lock_configuration = true"):
                sandbox.execute(setting)
            if catalog is not None:
                try:  # (else the catalog is shown as DuckDB's "memory")
                    sandbox.execute(f"ATTACH ':memory:' AS {_ident(catalog)}")
                    sandbox.execute(f"USE {_ident(catalog)}")
                except duckdb.Error:
                    pass
            for schema in dict.fromkeys(t.schema for t in tables):
                sandbox.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(schema)}")
            for t in tables:
                _replicate(sandbox, t)
        except duckdb.Error as err:  # a replica of names and types only: its message is safe
            raise OperationalError("could not build the information_schema replica: "
                                   f"{str(err).splitlines()[0]}") from None
        try:
            result = sandbox.execute(sql)
        except duckdb.Error as err:
            raise ProgrammingError(
                "the information_schema query failed (it reads only the policy's schema, so "
                f"the engine's message is shown): {str(err).splitlines()[0]}") from None
        with warnings.catch_warnings():
            # DuckDB's DataFrame conversion may trip a pandas deprecation about DuckDB's own
            # code; it is not the query's (as in the engine's ``_frame``)
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            df = result.df()
    finally:
        sandbox.close()
    return _Answer(df, _rows(df), _columns(df))


def _replicate(sandbox: duckdb.DuckDBPyConnection, table: TableInfo) -> None:
    """An empty table with ``table``'s columns; a column type the sandbox cannot create (a
    database's user-defined type) is shown as VARCHAR."""
    def create(types: list[str]) -> None:
        items = [f"{_ident(c.name)} {kind}{'' if c.nullable else ' NOT NULL'}"
                 for c, kind in zip(table.columns, types, strict=True)]
        sandbox.execute(f"CREATE TABLE {_ident(table.schema)}.{_ident(table.name)} "
                        f"({', '.join(items)})" if items else
                        f"CREATE TABLE {_ident(table.schema)}.{_ident(table.name)} AS "
                        "SELECT WHERE FALSE")

    try:
        create([c.type for c in table.columns])
    except duckdb.Error:
        create([c.type if c.type in _POLICY_TYPES.values() else "VARCHAR"
                for c in table.columns])


def _free_answer(connection: SchemaReader, sql: str) -> _Answer | None:
    """The answer of a statement that reads no private row (a constant select or a schema
    query), or None: the statement is then a DP query for the Session."""
    try:
        tokens = DuckDB().tokenizer_class().tokenize(sql)
    except TokenError:
        return None
    if any(t.token_type == TokenType.FROM for t in tokens) and not any(
            t.text.lower() == _SCHEMA_DB for t in tokens):
        return None  # reads a table other than information_schema: not parsed twice
    tree = _one_statement(sql)
    if tree is None:
        return None
    constant = _constant_select(tree)
    if constant is not None:
        return constant
    if _is_schema_query(tree):
        return _schema_answer(connection, sql)
    return None



def _type_code(series: pd.Series) -> str:
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "BOOLEAN"
    if pd.api.types.is_integer_dtype(dtype):
        return "BIGINT"
    if pd.api.types.is_float_dtype(dtype):
        return "DOUBLE"
    if isinstance(dtype, pd.DatetimeTZDtype):
        return "TIMESTAMP WITH TIME ZONE"
    if pd.api.types.is_datetime64_dtype(dtype):
        return "TIMESTAMP"
    if pd.api.types.is_string_dtype(dtype) and not pd.api.types.is_object_dtype(dtype):
        return "VARCHAR"
    first = next((v for v in series if not _is_null(v)), None)
    for kind, code in ((bool, "BOOLEAN"), (int, "BIGINT"), (float, "DOUBLE"),
                       (Decimal, "DECIMAL"), (str, "VARCHAR"), (_dt.datetime, "TIMESTAMP"),
                       (_dt.date, "DATE"), (_dt.time, "TIME"), (bytes, "BLOB")):
        if isinstance(first, kind):
            return code
    return "VARCHAR" if first is None else type(first).__name__.upper()


def _is_null(v: Any) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    return isinstance(v, float) and math.isnan(v)


def _python(v: Any) -> Any:
    if _is_null(v):
        return None
    if isinstance(v, pd.Timestamp):
        return v.to_pydatetime()
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars
        v = v.item()
        return None if _is_null(v) else v
    return v


def _columns(df: pd.DataFrame) -> list[tuple[str, str]]:
    """(name, type code) per column (by position: names may repeat, as in ``SELECT a, a``)."""
    return [(str(name), _type_code(df.iloc[:, i])) for i, name in enumerate(df.columns)]


def _rows(df: pd.DataFrame) -> list[tuple[Any, ...]]:
    columns = [[_python(v) for v in df.iloc[:, i].tolist()] for i in range(df.shape[1])]
    return list(zip(*columns)) if columns else [() for _ in range(len(df))]
