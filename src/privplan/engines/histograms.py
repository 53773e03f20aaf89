"""Per-group histograms (a quantile's input) as a two-level aggregate every engine computes.

A quantile's engine aggregate is, per released group, the number of rows in each grid cell:
``histogram(g) FILTER (WHERE c)`` (:func:`privplan.rewrite.engine_sql.measure_sql`), a
``MAP(BIGINT, UBIGINT)`` from cell to row count — DuckDB's aggregate, which PostgreSQL and
Spark lack. :func:`split_histograms` rewrites a statement holding such aggregates so that it
computes the same map with plain grouping:

* the statement without its histograms (the keys and every other aggregate), ``__main``;
* per histogram, the rows of the same FROM and WHERE that also pass ``c`` and have a cell
  (``g IS NOT NULL``, as the aggregate skips NULL), counted per (keys, g), then gathered into
  one value per group in the engine's form (:func:`_cells`): a map on Spark, DuckDB's MAP
  literal text on PostgreSQL (``{1=4, 3=2}``), which the engine casts back to DuckDB's type;
* both joined on the keys (``IS NOT DISTINCT FROM``: a NULL key is a group too). A group with
  no such row gets NULL, as ``histogram`` of no row is NULL in DuckDB.

Why this is the same computation: every piece reads the same relation with the same WHERE
and groups by the same key expressions, so each group's rows, and each row's cell, are what
the single statement sees (the rows a unit contributes are chosen deterministically,
:func:`privplan.rewrite.row_order.row_order`, so repeating the bounded source chooses the
same rows). Nothing else is read, so the engine computes only what the analysis modelled.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

_CELL_AGGREGATES = {
    "duckdb": "MAP_FROM_ENTRIES(LIST(STRUCT_PACK(k := __g, v := __n)))",
    # (an empty list's map is {} on Spark, where DuckDB's histogram of no row is NULL)
    "spark": "CASE WHEN COUNT(*) > 0 THEN MAP_FROM_ENTRIES(COLLECT_LIST(STRUCT(__g, __n))) END",
    "postgres": "'{' || STRING_AGG(CAST(__g AS TEXT) || '=' || CAST(__n AS TEXT), ', ') || '}'",
}


def _cells(dialect: str) -> exp.Expr:
    """The aggregate gathering one group's (cell ``__g``, rows ``__n``) pairs into one value
    that converts to DuckDB's ``MAP(BIGINT, UBIGINT)``."""
    return sqlglot.parse_one(_CELL_AGGREGATES[dialect], read=dialect)


def _histogram(item: exp.Expr) -> tuple[exp.Expr, exp.Expr | None] | None:
    """(g, c) of a select item ``histogram(g) [FILTER (WHERE c)] AS name``, else None."""
    if not isinstance(item, exp.Alias):
        return None
    agg, cond = item.this, None
    if isinstance(agg, exp.Filter):
        agg, cond = agg.this, agg.expression.this
    if isinstance(agg, exp.Anonymous) and agg.name.lower() == "histogram" and len(
            agg.expressions) == 1:
        return agg.expressions[0], cond
    return None


def _name(item: exp.Expr) -> exp.Identifier:
    """The output name of a select item, quoted as the statement quotes it."""
    node = item.args.get("alias") if isinstance(item, exp.Alias) else item
    if isinstance(node, exp.TableAlias):
        node = node.this
    if isinstance(node, exp.Column):
        node = node.this
    assert isinstance(node, exp.Identifier), item
    return node.copy()


def split_histograms(tree: exp.Expr, dialect: str) -> exp.Expr:
    """``tree`` (a DuckDB-dialect engine statement) with every SELECT that aggregates
    ``histogram(...)`` rewritten as described in the module doc; ``dialect`` chooses how the
    cells are gathered. A statement without histograms is returned as it is."""
    if not any(_histogram(e) for s in tree.find_all(exp.Select) for e in s.expressions):
        return tree
    return tree.transform(lambda node: _split(node, dialect) if isinstance(node, exp.Select)
                          else node)


def _split(select: exp.Select, dialect: str) -> exp.Expr:
    items = select.expressions
    found = [(i, h) for i, h in ((i, _histogram(e)) for i, e in enumerate(items)) if h]
    if not found:
        return select
    group = select.args.get("group")
    keys = [e.name for e in group.expressions] if group is not None else []
    key_items = [e for e in items if e.alias_or_name in keys]
    main = select.copy()
    kept = [e.copy() for i, e in enumerate(items) if i not in dict(found)]
    # (only histograms, no GROUP BY: the other side is one aggregate row all the same)
    main.set("expressions", kept or [exp.alias_(exp.Count(this=exp.Star()), "__rows")])
    outer = exp.select(*[
        exp.column(_name(e), table=f"__h{i}" if i in dict(found) else "__main")
        for i, e in enumerate(items)
    ]).from_(exp.Subquery(this=main, alias=exp.TableAlias(this=exp.to_identifier("__main"))))
    for i, (g, cond) in found:
        counts = exp.select(*[k.copy() for k in key_items],
                            exp.alias_(g.copy(), "__g"),
                            exp.alias_(exp.Count(this=exp.Star()), "__n"))
        counts.set("from_", select.args["from_"].copy())
        if select.args.get("joins"):
            counts.set("joins", [j.copy() for j in select.args["joins"]])
        where = [w for w in (select.args.get("where"), cond) if w is not None]
        conditions = [w.this.copy() if isinstance(w, exp.Where) else exp.paren(w.copy())
                      for w in where] + [exp.Not(this=exp.Is(this=g.copy(), expression=exp.Null()))]
        counts = counts.where(exp.and_(*conditions), copy=False)
        counts = counts.group_by(*keys, "__g", copy=False)
        gathered = exp.select(*keys, exp.alias_(_cells(dialect), _name(items[i]))).from_(
            exp.Subquery(this=counts, alias=exp.TableAlias(this=exp.to_identifier(f"__c{i}"))))
        if keys:
            gathered = gathered.group_by(*keys, copy=False)
        joined = exp.Subquery(this=gathered, alias=exp.TableAlias(
            this=exp.to_identifier(f"__h{i}")))
        if keys:
            on = exp.and_(*[exp.NullSafeEQ(this=exp.column(k, table="__main"),
                                           expression=exp.column(k, table=f"__h{i}"))
                            for k in keys])
            outer = outer.join(joined, on=on, join_type="LEFT", copy=False)
        else:
            outer = outer.join(joined, join_type="CROSS", copy=False)
    return outer
