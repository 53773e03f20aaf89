"""Whole-table reads through the DB-API, recognised and explained: ``pandas.read_sql_table``
and ``pandas.read_sql("visits", con)``.

Over a raw DB-API connection pandas treats the connection as SQLite: ``read_sql_table`` first
asks SQLite's catalog (``SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND
name = ?``), and ``read_sql`` with a table name sends the bare name as SQL. Left to the
planner they were refused for the wrong reason ("table 'sqlite_master' is not in the policy").
The real reason is that a table read releases every row, which privplan never does: only
differentially private aggregates. The refusal reads nothing and charges nothing; it names only
the policy's own tables and columns (public, DESIGN.md invariant 2), never a value.
"""

from __future__ import annotations

import re
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from privplan.dbapi.errors import ProgrammingError

__all__ = ["SQLITE_CATALOG", "dp_query_example", "refuse_table_read", "table_read_message"]

_BARE_NAME = re.compile(r'\s*"?([A-Za-z_][A-Za-z0-9_$]*)"?\s*;?\s*')
SQLITE_CATALOG = ("sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema")


def dp_query_example(policy: Any, table: str | None) -> str:
    """A DP query over ``table`` (else the policy's first private table) that the policy
    answers: grouped by a column with public values (or a bool), else a plain count."""
    private = list(policy.private_tables())
    chosen = next((t for t in private if table and t.name == table.lower()),
                  private[0] if private else None)
    if chosen is None:
        return "SELECT COUNT(*) AS n FROM <table>"
    for name, col in chosen.columns.items():
        if col.public_values is not None or col.type == "bool":
            return f"SELECT {name}, COUNT(*) AS n FROM {chosen.name} GROUP BY {name}"
    return f"SELECT COUNT(*) AS n FROM {chosen.name}"


def table_read_message(call: str, policy: Any, table: str | None, con: str = "con") -> str:
    """What / why / fix for a whole-table read made with ``call`` (e.g. the pandas call)."""
    example = dp_query_example(policy, table)
    return (f"{call} reads a whole table, which privplan does not answer. Why: it would "
            f"release every row, and privplan releases only differentially private "
            f"aggregates (charged to the budget). Fix: pass a DP query instead, e.g. "
            f"pandas.read_sql(\"{example}\", {con}); the tables and columns are listed by "
            f"pandas.read_sql(\"SELECT table_name, column_name FROM "
            f"information_schema.columns\", {con}) (free).")


def _catalog_table(tree: exp.Expr) -> str | None:
    """The table name a ``sqlite_master`` lookup asks for (``name = 'visits'``), if any."""
    for eq in tree.find_all(exp.EQ):
        sides = (eq.this, eq.expression)
        for col, lit in (sides, sides[::-1]):
            if (isinstance(col, exp.Column) and col.name.lower() in ("name", "tbl_name")
                    and isinstance(lit, exp.Literal) and lit.is_string):
                return str(lit.this)
    return None


def _every_column_of(policy: Any, sql: str) -> str | None:
    """The private table whose every declared column ``sql`` selects, bare (no aggregate,
    filter or grouping): the statement of ``pandas.read_sql_table`` over SQLAlchemy (``SELECT
    t.a, t.b, ... FROM t``). None for anything else; parsed only without parentheses (every
    aggregate has them)."""
    if "(" in sql or "from" not in sql.lower():
        return None
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except SqlglotError:
        return None
    if not isinstance(tree, exp.Select) or any(
            tree.args.get(k) for k in ("joins", "where", "group", "having", "distinct")):
        return None
    source = tree.args.get("from") or tree.args.get("from_")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or not all(
            isinstance(e, exp.Column) for e in tree.expressions):
        return None
    found = next((t for t in policy.private_tables() if t.name == table.name.lower()), None)
    selected = {e.name.lower() for e in tree.expressions}
    if found is None or not found.columns or not set(found.columns) <= selected:
        return None
    return str(found.name)


def refuse_table_read(policy: Any, sql: str) -> None:
    """Raise ProgrammingError for pandas' whole-table reads (module doc); return otherwise.
    Cheap for every other statement: parsed only if it names SQLite's catalog."""
    known = {name.lower() for name in policy.tables}
    bare = _BARE_NAME.fullmatch(sql)
    if bare is not None and bare.group(1).lower() in known:
        name = bare.group(1)
        raise ProgrammingError(table_read_message(
            f"pandas.read_sql('{name}', con) passes the table name '{name}' where a raw "
            f"DB-API connection needs a query: it", policy, name))
    whole = _every_column_of(policy, sql)
    if whole is not None:
        raise ProgrammingError(table_read_message(
            f"SELECT of every column of table '{whole}' (what pandas.read_sql_table('{whole}', "
            f"engine) sends through SQLAlchemy)", policy, whole, con="engine"))
    lowered = sql.lower()
    if not any(c in lowered and c not in known for c in SQLITE_CATALOG):
        return
    try:
        trees = sqlglot.parse(sql, read="sqlite")
    except SqlglotError:
        return
    for tree in (t for t in trees if t is not None):
        if any(t.name.lower() in SQLITE_CATALOG for t in tree.find_all(exp.Table)):
            table = _catalog_table(tree)
            shown = f"'{table}'" if table else "'<table>'"
            raise ProgrammingError(table_read_message(
                f"pandas.read_sql_table({shown}, con) (it asks SQLite's catalog, "
                f"sqlite_master, which privplan does not have)", policy, table))
