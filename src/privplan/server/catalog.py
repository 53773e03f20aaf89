"""``pg_catalog`` reflection answered free, from the policy's public metadata only.

What clients ask a PostgreSQL server about its tables (psql's ``\\dt`` and ``\\d visits``,
SQLAlchemy's ``inspect(engine)``, asyncpg's type introspection) is read from ``pg_catalog``.
Such a query is answered on a sandbox: a new in-memory DuckDB connection that holds an empty
replica of the policy's tables (names and column types, as the DB-API's ``information_schema``
answers: :meth:`privplan.dbapi.connection.Connection.describe_schema`), with file access
disabled and its configuration locked. DuckDB has its own ``pg_catalog`` views over its catalog;
the few PostgreSQL spellings DuckDB does not read (``OPERATOR(pg_catalog.~)``, ``COLLATE
pg_catalog.default``, ``::regclass``, ``pg_get_userbyid``...) are rewritten to DuckDB's, and the
functions psql calls that DuckDB lacks are macros returning what a server without the feature
says (no owner, no comment, no hstore type).

A statement is a catalog query when it is one SELECT (or UNION) whose every table is a
``pg_catalog`` or ``information_schema`` relation, written with its schema or as a bare
``pg_*`` name the policy does not use, or a CTE of the statement. Anything else (a statement
that names a policy table, ``SELECT * FROM pg_class, visits``) is not answered here: it goes to
the DP path, whatever else it names.

Privacy: the sandbox never holds a row of any table: whatever a catalog query computes, it
reads metadata the policy publishes. The replica is built from the policy (and the column
lists of public tables), never from a private table's rows.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable

import duckdb
import sqlglot
from sqlglot import exp

from privplan.dbapi.free import TableInfo, _columns, _ident, _replicate, _rows
from privplan.server.formats import Answer
from privplan.server.sqlstate import ClientError

__all__ = ["CatalogSandbox", "is_catalog_query"]

_SCHEMAS = ("pg_catalog", "information_schema")
_WORD = re.compile(r"\b(pg_catalog|information_schema|pg_[a-z_]+)\b", re.IGNORECASE)

# functions psql and drivers call that DuckDB lacks (or takes other arguments of): macros
# answering as a server without the feature does (no owner, comment, default or definition)
_FUNCTIONS = ("pg_get_userbyid", "obj_description", "col_description", "shobj_description",
              "pg_get_indexdef", "pg_get_constraintdef", "pg_get_partkeydef", "pg_get_viewdef",
              "pg_get_triggerdef", "pg_get_ruledef", "pg_relation_is_publishable",
              "pg_encoding_to_char", "pg_get_statisticsobjdef_columns", "pg_get_expr",
              "pg_total_relation_size", "pg_relation_size", "array_to_string", "array_upper",
              "to_regtype", "pg_get_serial_sequence", "pg_collation_is_visible",
              "format_type", "pg_table_size", "pg_database_size", "pg_indexes_size")

# PostgreSQL spellings DuckDB does not read, and what they become (catalog queries only)
_REWRITES = [
    (re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([~!=<>*]+)\s*\)", re.IGNORECASE), r"\1"),
    (re.compile(r"\s+COLLATE\s+pg_catalog\s*\.\s*\"?default\"?", re.IGNORECASE), ""),
    (re.compile(r"\bAS\s+(?:pg_catalog\s*\.\s*)?(?:regclass|regtype|regproc|regnamespace|oid)"
                r"\s*\)", re.IGNORECASE), "AS BIGINT)"),
    (re.compile(r"::\s*(?:pg_catalog\s*\.\s*)?(regclass|regtype|regproc|regnamespace|"
                r"regoper|oid)\b(\[\])?", re.IGNORECASE), r"::BIGINT\2"),
    (re.compile(r"::\s*pg_catalog\s*\.\s*(?=(?:text|int[248]|bool|float[48]|varchar)\b)",
                re.IGNORECASE), "::"),
    (re.compile(r"::\s*(?:pg_catalog\s*\.\s*)?(name|\"char\"|char)\b(\[\])?", re.IGNORECASE),
     r"::VARCHAR\2"),
    (re.compile(r"\bpg_catalog\s*\.\s*(?=(?:generate_series|unnest|string_agg|array_length|"
                r"pg_table_is_visible)\s*\()", re.IGNORECASE), ""),
    (re.compile(r"\b(?:information_schema\s*\.\s*)?_pg_expandarray\s*\(", re.IGNORECASE),
     "privplan_pg_expandarray("),
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?(" + "|".join(_FUNCTIONS) + r")\s*\(",
                re.IGNORECASE), r"privplan_\1("),
]
_JSON = re.compile(r"\b(?:pg_catalog\s*\.\s*)?json_build_object\s*\(", re.IGNORECASE)
_MACROS = [
    "CREATE MACRO privplan_pg_get_userbyid(x) AS 'privplan'",
    "CREATE MACRO privplan_obj_description(x, y := NULL) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_col_description(x, y) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_shobj_description(x, y) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_get_indexdef(x, y := 0, z := false) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_get_constraintdef(x, y := false) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_get_partkeydef(x) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_get_viewdef(x, y := false) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_get_triggerdef(x, y := false) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_get_ruledef(x, y := false) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_relation_is_publishable(x) AS false",
    "CREATE MACRO privplan_pg_encoding_to_char(x) AS 'UTF8'",
    "CREATE MACRO privplan_pg_get_statisticsobjdef_columns(x) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_get_expr(x, y, z := false) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_total_relation_size(x) AS 0",
    "CREATE MACRO privplan_pg_relation_size(x) AS 0",
    # (sizes are 0: a real size would tell how many rows a private table holds)
    "CREATE MACRO privplan_pg_table_size(x) AS 0",
    "CREATE MACRO privplan_pg_database_size(x) AS 0",
    "CREATE MACRO privplan_pg_indexes_size(x) AS 0",
    "CREATE MACRO privplan_array_upper(a, d) AS len(a)",
    "CREATE MACRO privplan_pg_get_serial_sequence(x, y) AS CAST(NULL AS VARCHAR)",
    "CREATE MACRO privplan_pg_collation_is_visible(x) AS true",
    # (PostgreSQL's names of the types, which clients map: SQLAlchemy knows "bigint", not
    # DuckDB's "int8")
    ("CREATE MACRO privplan_format_type(t, m) AS CASE t WHEN 16 THEN 'boolean' WHEN 17 THEN "
    "'bytea' WHEN 20 THEN 'bigint' WHEN 21 THEN 'smallint' WHEN 23 THEN 'integer' WHEN 25 "
    "THEN 'text' WHEN 700 THEN 'real' WHEN 701 THEN 'double precision' WHEN 1043 THEN "
    "'character varying' WHEN 1082 THEN 'date' WHEN 1083 THEN 'time without time zone' "
    "WHEN 1114 THEN 'timestamp without time zone' WHEN 1184 THEN "
    "'timestamp with time zone' WHEN 1700 THEN 'numeric' ELSE format_type(t, m) END"),
    "CREATE MACRO privplan_to_regtype(x) AS CAST(NULL AS BIGINT)",  # (no hstore, no extension)
    # (JDBC's getPrimaryKeys/getIndexInfo expand pg_index.indkey; the replica has no index, so
    # no row reaches it: its shape is what matters)
    "CREATE MACRO privplan_pg_expandarray(a) AS {'x': NULL::BIGINT, 'n': NULL::BIGINT}",
    "CREATE MACRO privplan_array_to_string(a, s) AS array_to_string(CAST(a AS VARCHAR[]), s)",
]


# pg_catalog relations DuckDB's views lack columns of: views of their own, in a schema of the
# sandbox, that queries are pointed at
_OWN = "(SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = 'privplan_pg')"
_OVERRIDES = {
    "pg_class": "SELECT *, false AS relforcerowsecurity FROM pg_catalog.pg_class "
                f"WHERE relnamespace NOT IN {_OWN}",
    "pg_namespace": f"SELECT * FROM pg_catalog.pg_namespace WHERE oid NOT IN {_OWN}",
    "pg_tables": "SELECT * FROM pg_catalog.pg_tables WHERE schemaname <> 'privplan_pg'",
    "pg_database": "SELECT *, 0 AS datdba, 6 AS encoding, 'C' AS datcollate, 'C' AS datctype, "
                   "CAST(NULL AS VARCHAR) AS daticulocale, 'c' AS datlocprovider, "
                   "CAST(NULL AS VARCHAR[]) AS datacl FROM pg_catalog.pg_database",
    "pg_collation": "SELECT *, CAST(NULL AS BIGINT) AS collnamespace FROM pg_catalog.pg_collation",
    # (JDBC reads max_index_keys before getImportedKeys/getExportedKeys; PostgreSQL's value)
    "pg_settings": "SELECT * FROM pg_catalog.pg_settings UNION ALL SELECT 'max_index_keys', "
                   "'32', 'Shows the maximum number of index keys.', 'integer'",
    "pg_attribute": "SELECT * FROM pg_catalog.pg_attribute WHERE attrelid NOT IN (SELECT oid "
                    f"FROM pg_catalog.pg_class WHERE relnamespace IN {_OWN})",
}
# relations DuckDB has no view of, read by psql's \\d: empty (no policy, role, trigger,
# inheritance, publication or extended statistics exists here)
_EMPTY = {
    "pg_policy": "polname VARCHAR, polpermissive BOOLEAN, polroles BIGINT[], polqual VARCHAR, "
                 "polwithcheck VARCHAR, polcmd VARCHAR, polrelid BIGINT",
    "pg_roles": "oid BIGINT, rolname VARCHAR",
    "pg_statistic_ext": "oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT, "
                        "stxkeys VARCHAR, stxkind VARCHAR[], stxstattarget INTEGER",
    "pg_publication": "oid BIGINT, pubname VARCHAR, puballtables BOOLEAN",
    "pg_publication_rel": "oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, "
                          "prattrs VARCHAR",
    "pg_publication_namespace": "oid BIGINT, pnpubid BIGINT, pnnspid BIGINT",
    "pg_inherits": "inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, "
                   "inhdetachpending BOOLEAN",
    "pg_trigger": "oid BIGINT, tgrelid BIGINT, tgname VARCHAR, tgenabled VARCHAR, "
                  "tgisinternal BOOLEAN, tgparentid BIGINT",
    "pg_rewrite": "oid BIGINT, ev_class BIGINT, rulename VARCHAR, ev_enabled VARCHAR",
    "pg_extension": "oid BIGINT, extname VARCHAR, extversion VARCHAR, extnamespace BIGINT",
}


def is_catalog_query(sql: str, private: set[str]) -> bool:
    """Whether ``sql`` reads ``pg_catalog``/``information_schema`` relations and nothing else
    (see the module doc); ``private``: the policy's table names (lower case)."""
    if _WORD.search(sql) is None:
        return False
    try:
        trees = sqlglot.parse(_rewrite(sql), dialect="postgres")
    except (sqlglot.errors.SqlglotError, RecursionError):
        return False
    if len(trees) != 1 or not isinstance(trees[0], (exp.Select, exp.Union)):
        return False
    tree = trees[0]
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = list(tree.find_all(exp.Table))
    if not tables:
        return False
    for table in tables:
        if not isinstance(table.this, exp.Identifier):
            continue  # (a table function, generate_series: the sandbox has no file access)
        name, schema = table.name.lower(), table.text("db").lower()
        if table.text("catalog") or not name:
            return False
        if schema:
            if schema not in _SCHEMAS:
                return False
        elif name in private or not (name.startswith("pg_") or name in ctes):
            return False
    return True


# ``'pg_class'::regclass`` (JDBC's getTables): the named relation's oid, looked up in the
# sandbox's pg_class (a number stays a number, cast by _REWRITES)
_REGCLASS = re.compile(r"'((?:[^']|'')*)'\s*::\s*(?:pg_catalog\s*\.\s*)?regclass\b",
                       re.IGNORECASE)


def _regclass(match: re.Match[str]) -> str:
    name = match.group(1).replace("''", "'")
    if name.strip().isdigit():
        return f"CAST({int(name)} AS BIGINT)"
    name = name.rsplit(".", 1)[-1].strip().strip('"').replace("'", "''")
    return f"(SELECT min(oid) FROM pg_catalog.pg_class WHERE relname = '{name}')"


def _rewrite(sql: str) -> str:
    sql = _REGCLASS.sub(_regclass, sql)
    for pattern, replacement in _REWRITES:
        sql = pattern.sub(replacement, sql)
    return sql


def _relations(names: list[str]) -> re.Pattern[str]:
    """A catalog relation's name, with or without ``pg_catalog.`` (not a function's)."""
    return re.compile(r"(?<![.\w\"'])(?:pg_catalog\s*\.\s*)?(" + "|".join(sorted(names, key=len,
                      reverse=True)) + r")\b(?!\s*\()", re.IGNORECASE)


class CatalogSandbox:
    """One connection's sandbox (built on its first catalog query, closed with it)."""

    def __init__(self, tables: Callable[[], tuple[TableInfo, ...]]) -> None:
        self._tables = tables
        self._con: duckdb.DuckDBPyConnection | None = None
        self._names = re.compile("(?!)")

    def _sandbox(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            con = duckdb.connect(":memory:")
            tables = self._tables()
            try:
                for schema in dict.fromkeys(t.schema for t in tables):
                    con.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(schema)}")
                for table in tables:
                    _replicate(con, table)
                for macro in _MACROS:
                    con.execute(macro)
                self._names = self._own_catalog(con)
                for setting in ("SET python_enable_replacements = false",
                                "SET enable_external_access = false",
                                "SET lock_configuration = true"):
                    con.execute(setting)
            except duckdb.Error as err:  # (names and types only: the message is safe)
                con.close()
                raise ClientError("XX000", "could not build the pg_catalog replica: "
                                  f"{str(err).splitlines()[0]}") from None
            self._con = con
        return self._con

    @staticmethod
    def _own_catalog(con: duckdb.DuckDBPyConnection) -> re.Pattern[str]:
        """Every pg_catalog relation as a view (or empty table) of the sandbox's own schema,
        ``privplan_pg``, which queries are pointed at: DuckDB's views (with the columns
        :data:`_OVERRIDES` adds and its own schema hidden), and :data:`_EMPTY`'s tables."""
        views = [r[0] for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE schema_name = 'pg_catalog'").fetchall()]
        con.execute("CREATE SCHEMA privplan_pg")
        for name in views:
            select = _OVERRIDES.get(name, f"SELECT * FROM pg_catalog.{name}")
            con.execute(f"CREATE VIEW privplan_pg.{name} AS {select}")
        for name, columns in _EMPTY.items():
            con.execute(f"CREATE TABLE privplan_pg.{name} ({columns})")
        return _relations([*views, *_EMPTY])

    def _sandbox_sql(self, sql: str) -> str:
        """``sql`` as the sandbox runs it: DuckDB's spellings, its catalog relations read
        from the sandbox's own views."""
        sql = _JSON.sub("json_object(", _rewrite(sql))  # (not before sqlglot: it reads other args)
        return self._names.sub(lambda m: f"privplan_pg.{m.group(1).lower()}", sql)

    def answer(self, sql: str) -> Answer:
        """The catalog query's answer over the empty replica (its failure is shown as it is:
        the sandbox holds metadata only)."""
        con = self._sandbox()
        try:
            result = con.execute(self._sandbox_sql(sql))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.simplefilter("ignore", FutureWarning)
                df = result.df()
        except duckdb.Error as err:
            raise ClientError("0A000", "this pg_catalog query is not answered by privplan's "
                              "catalog replica (it holds the policy's tables and columns "
                              f"only): {str(err).splitlines()[0]}") from None
        return Answer.table(_columns(df), _rows(df))

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
