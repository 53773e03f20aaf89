"""Refuse what privplan cannot answer privately, naming the construct, where, why, and the fix.

The checks here are structural and run before anything touches data. Each refusal is an
:class:`UnsupportedQueryError` (nothing is spent).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import NoReturn

from sqlglot import exp

from privplan.errors import UnsupportedQueryError
from privplan.sql.locate import with_location

# Functions whose result is not a deterministic function of the row, or that reach outside the
# query (files, settings, sequences). Non-determinism breaks the "f-dependent" model of a
# mechanism; outside access could read data the policy does not cover. CURRENT_DATE is allowed:
# one public constant for the whole statement (the day it runs), so a mechanism using it is a
# function of the rows given that public value; the analysis does not fold it (a predicate on
# it is not analysed into a region, so its region stays the conservative whole domain).
_DENIED_CLASSES: tuple[type[exp.Expression], ...] = tuple(
    getattr(exp, name)
    for name in (
        "Rand",
        "Randn",
        "Uuid",
        "ReadCSV",
        "ReadParquet",
        "CurrentTime",
        "CurrentTimestamp",
        "CurrentUser",
        "CurrentSchema",
        "CurrentDatetime",
        "Localtime",
        "Localtimestamp",
        "SysDate",
    )
    if hasattr(exp, name)
)
_DENIED_PREFIXES = ("read_", "random", "setseed", "uuid", "gen_random", "nextval", "currval",
                    "current_", "now", "get_current", "glob", "query", "sniff_", "parquet_",
                    "getenv", "getvariable", "setvariable", "pragma", "duckdb_", "sql_auto", "summary", "range", "generate_series",
                    "file", "md5", "sha", "hash", "to_json", "json_", "txid", "pg_", "version")

_STATEMENT_HINT = (
    "privplan answers SELECT queries that aggregate (COUNT, SUM, AVG, VAR, STDDEV) over a "
    "private table."
)

NESTED_WHY = ("the inner aggregate's exact value is private: privplan adds noise once, to "
              "aggregates of rows, so an aggregate of aggregates would be computed from "
              "un-noised values.")
NESTED_FIX = ("Compute the inner aggregate in its own query, or post-process its DP answer "
              "in FROM: SELECT SUM(n) FROM (SELECT hospital, COUNT(*) AS n FROM t GROUP BY "
              "hospital).")
"""Why and how a nested aggregate is refused (the plan builder and the quantile reader both
meet one): the inner aggregate would be an exact function of private rows, so it may only be
released noised, as a DP query of its own whose answer an outer query post-processes."""


def refuse(sql: str, node: exp.Expr | None, what: str, why: str, fix: str) -> NoReturn:
    raise UnsupportedQueryError(with_location(f"{what}: {why} {fix}", sql, node))


def did_you_mean(name: str, declared: Iterable[str]) -> str:
    """`` (did you mean 'age'?)`` for the declared name closest to ``name``, else ``""``.
    Only the policy's names are offered (public), never a value."""
    close = difflib.get_close_matches(name.lower(), sorted(declared), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


MAX_DEPTH = 200
"""Deepest expression nesting accepted: deeper trees (3,000 nested parentheses or NOTs) would
exhaust Python's recursion limit in the parser's, analyser's or renderer's recursive walks."""


def check_depth(sql: str, statement: exp.Expr) -> None:
    """Refuse trees nested deeper than :data:`MAX_DEPTH` (measured without recursion).

    A chain of one connective (``a OR b OR c ...``, which sqlglot and the analyser walk
    iteratively) counts as one level, so long flat filters stay accepted."""
    stack: list[tuple[exp.Expr, int]] = [(statement, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            refuse(sql, node, "query nested too deeply",
                   f"its expressions nest more than {MAX_DEPTH} levels.",
                   "Flatten the expression (fewer nested parentheses, functions or NOTs).")
        for child in node.iter_expressions():
            flat = isinstance(node, exp.Connector) and type(child) is type(node)
            stack.append((child, depth if flat else depth + 1))


def validate_statement(sql: str, statement: exp.Expression) -> None:
    """Whole-statement checks; per-SELECT structure is checked by the plan builder."""
    if not isinstance(statement, (exp.Select, exp.Union, exp.Intersect, exp.Except)):
        kind = type(statement).__name__.upper()
        refuse(sql, statement, f"{kind} statement refused",
               "only read-only aggregate SELECT queries are answered;", _STATEMENT_HINT)
    for node in statement.walk():
        _check_node(sql, node)


def _check_node(sql: str, node: exp.Expr) -> None:
    if isinstance(node, (exp.Intersect, exp.Except)):
        refuse(sql, node, f"{type(node).__name__.upper()} refused",
               "set operations other than UNION ALL compare private rows directly.",
               "Use UNION ALL of aggregate queries, or filters.")
    if isinstance(node, exp.Union) and node.args.get("distinct"):
        refuse(sql, node, "UNION (distinct) refused",
               "de-duplicating released rows is not supported.", "Write UNION ALL.")
    if isinstance(node, exp.Window):
        refuse(sql, node, "window function refused",
               "window functions over private data release per-row values.",
               "Use GROUP BY with aggregates; rank or compare the noisy results afterwards "
               "in an outer ORDER BY.")
    if isinstance(node, exp.With):
        refuse(sql, node, "WITH (common table expression) refused",
               "derived tables over private data are not analysed yet.",
               "Inline the filter into WHERE, or aggregate directly.")
    if isinstance(node, exp.Subquery) or (
        isinstance(node, exp.Select) and node.parent is not None
        and not isinstance(node.parent, exp.Union)
    ):
        refuse(sql, node, "subquery refused",
               "a subquery here would feed its exact, un-noised result into the query (privplan "
               "adds noise to the aggregates it releases, not to values it filters or computes "
               "with).",
               "Write a single aggregate SELECT and compute derived values in its select list, "
               "or post-process a DP answer in FROM: SELECT SUM(n) FROM (SELECT hospital, "
               "COUNT(*) AS n FROM t GROUP BY hospital).")
    if isinstance(node, exp.TableSample):
        refuse(sql, node, "USING SAMPLE / TABLESAMPLE refused",
               "a random sample drawn by the engine is neither a function of the table (the "
               "analysis needs one) nor accounted for (sampling would change the cost).",
               "Query the whole table; the noise already protects every row.")
    if isinstance(node, (exp.Qualify,)):
        refuse(sql, node, "QUALIFY refused", "it filters on per-row window values.",
               "Use HAVING on aggregates.")
    if isinstance(node, (exp.Cube, exp.Rollup, exp.GroupingSets)):
        refuse(sql, node, "GROUPING SETS / ROLLUP / CUBE refused",
               "multi-level grouping is not supported yet.",
               "Send one GROUP BY query per level (or UNION ALL them).")
    if isinstance(node, _DENIED_CLASSES):
        refuse(sql, node, f"function {node.sql(dialect='duckdb')} refused",
               "it is non-deterministic or reads outside the query, so a mechanism using it is "
               "not a function of the private table.", "Remove it.")
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name.startswith(_DENIED_PREFIXES):
            refuse(sql, node, f"function {name}() refused",
                   "it is non-deterministic, reads outside the query, or exposes raw values.",
                   "Remove it, or use a deterministic scalar function.")
    if isinstance(node, exp.Table):
        extra = [k for k in ("when", "version", "system_time", "changes", "partition", "hints",
                             "pivots", "laterals", "ordinality", "rows_from")
                 if node.args.get(k)]
        if extra:
            refuse(sql, node, f"table modifier ({', '.join(extra)}) refused",
                   "privplan queries the table as the policy and the session see it; a version, "
                   "time travel, partition or pivot clause would read something else.",
                   "Remove the clause after the table name.")
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous | exp.Func):
        refuse(sql, node, "table function refused",
               "queries may read only the tables the policy declares.",
               "Query a table named in the policy.")
