"""The statement a session runs for one core, with its per-key row count.

:func:`engine_statement` is :func:`~privplan.rewrite.engine_sql.core_sql` plus the count, with
the engine's own equality, of the rows that share each released key
(:func:`~privplan.rewrite.engine_sql.with_key_check`, checked by the session before any noise).

On Spark a grouped statement over a public key domain is written as **one aggregation**
(:func:`one_aggregation`) instead of an aggregation, a join with the domain and a window for the
count: each of those is a stage of its own there (the join's broadcast and the window's
exchange), 0.36 s of 0.75 s at 1M rows where the aggregation alone takes 0.39 s. The domain's
rows are put beside the private rows (``UNION ALL``), marked, and one ``GROUP BY`` computes
every measure over the private rows only, keeps the groups that hold a domain row, and counts
the domain rows of each group. For every domain key this is the joined statement's row: the
same measures (0 for an empty group), and a count that is 1 exactly where the joined statement's
is (more than one domain row with one key, under the engine's grouping equality, is a count
above 1 in both). DuckDB and PostgreSQL keep the joined form (DuckDB runs it no slower, and its
window over a GROUP BY is fenced, see :func:`engine_statement`).

Privacy: the one aggregation computes the planned aggregates over the same private rows (the
marker only excludes the domain's rows, which hold no private value) and counts rows per key
with the engine's own equality; like every statement, the pre-charge gate runs it over stand-in
rows before anything is charged.
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

from privplan.rewrite.engine_sql import (
    DUPLICATES,
    core_sql,
    domain_sql,
    group_bounded,
    key_column,
    key_sql,
    measure_items_sql,
    row_source,
    where_sql,
    with_key_check,
)
from privplan.sql.plan import CorePlan, Measure

SOURCE = "__privplan_src"
"""The one aggregation's marker: 0 on a private row, 1 on a row of the public key domain."""
_ONE_AGGREGATION_KINDS = frozenset({"count", "sum", "sum_sq"})
"""Measures the one aggregation computes: plain COUNT/SUM aggregates with a FILTER (a
DISTINCT aggregate or a histogram keeps the joined form)."""


def engine_statement(core: CorePlan, column_types: dict[str, str], measures: list[Measure],
                     dialect: str = "duckdb") -> str:
    """The statement a session runs for ``core``: :func:`core_sql` with the key check (on
    Spark, :func:`one_aggregation` where it applies).

    On DuckDB a statement without the public-domain join (groups chosen by partition
    selection, or no public key) computes its groups in a MATERIALIZED CTE before counting
    them. Why: DuckDB's ``window_self_join`` optimizer turns ``COUNT(*) OVER (PARTITION BY
    keys)`` over a GROUP BY into a second aggregation of the same input, which reads the
    private table (or a prepared copy) twice: 1.5x the statement at 1M rows.
    The CTE changes no value (the same rows, counted with the same equality). With the domain
    join on top DuckDB does not rewrite, and the CTE would only cost (~0.3 ms)."""
    if dialect == "spark":
        one = one_aggregation(core, column_types, measures)
        if one is not None:
            return one
    fenced = dialect == "duckdb" and bool(core.keys) and not core.public_keys
    return with_key_check(core_sql(core, column_types, measures, dialect), len(core.keys),
                          fenced=fenced)


def one_aggregation(core: CorePlan, column_types: dict[str, str], measures: list[Measure]
                    ) -> str | None:
    """The statement as one ``GROUP BY`` over the private rows and the public key domain's
    rows (see the module doc), or None where it does not apply: no public key domain, no
    measure, a measure other than a plain COUNT or SUM, rows kept per unit after keying, or
    a measure reading a qualified column."""
    if not (core.keys and core.public_keys and measures) or group_bounded(core):
        return None
    if any(m.kind not in _ONE_AGGREGATION_KINDS for m in measures):
        return None
    marked = measure_items_sql(core, column_types, measures, "spark", only=f"{SOURCE} = 0")
    bare = measure_items_sql(core, column_types, measures, "spark")
    items = [b if _null_on_domain_rows(m) else f for m, b, f in zip(measures, bare, marked,
                                                                     strict=True)]
    columns = _read_columns(", ".join(marked))
    if columns is None:
        return None
    n = len(core.keys)
    keys = [key_column(i) for i in range(n)]
    private = [f"{key_sql(k)} AS {key_column(i)}" for i, k in enumerate(core.keys)]
    private += columns + [f"0 AS {SOURCE}"]
    domain = [f"__dom.{k}" for k in keys] + [f"NULL AS {c}" for c in columns]
    domain.append(f"1 AS {SOURCE}")
    united = (f"SELECT {', '.join(private)} FROM {row_source(core)}{where_sql(core)} "
              f"UNION ALL SELECT {', '.join(domain)} FROM ({domain_sql(core)}) AS __dom")
    in_domain = f"COUNT(*) FILTER (WHERE {SOURCE} = 1)"
    return (f"SELECT {', '.join(keys + items)}, {in_domain} AS {DUPLICATES} "
            f"FROM ({united}) AS __united GROUP BY {', '.join(keys)} HAVING {in_domain} > 0")


def _null_on_domain_rows(m: Measure) -> bool:
    """Whether the measure reads NULL on every domain row without a filter: a COUNT or SUM
    of a bare column with no condition (the domain rows hold NULL there, and so does its grid
    value: SUM and COUNT skip them). A COUNT(*), an expression or a condition is filtered on
    the marker instead (an expression such as COALESCE need not be NULL on NULL columns)."""
    return m.column is not None and m.expression is None and m.condition is None


@functools.lru_cache(maxsize=1024)
def _read_columns(items: str) -> list[str] | None:
    """The (unqualified, quoted) columns the aggregates ``items`` read, in a fixed order; None
    if one is qualified (it would name a relation the one aggregation does not have)."""
    tree = sqlglot.parse_one(f"SELECT {items}", read="duckdb")
    names: dict[str, None] = {}
    for col in tree.find_all(exp.Column):
        if col.table:
            return None
        if col.name != SOURCE:
            names[exp.to_identifier(col.name).sql(dialect="duckdb")] = None
    return sorted(names)


__all__ = ["engine_statement", "one_aggregation"]
