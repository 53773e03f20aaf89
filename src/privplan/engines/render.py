"""Render a DuckDB-dialect engine statement for PostgreSQL or Spark, computing the same values.

privplan's analysis, its totality judge and the rewrite all speak DuckDB
(:mod:`privplan.engines.base`). A statement for another engine is the same sqlglot tree,
rendered for that dialect after the rewrites below, each of which removes one difference
between what DuckDB computes and what the other engine would compute for the same text:

* **Collation.** Strings compare by code point in the analysis (``COLLATE "binary"``).
  PostgreSQL's default collation is the database's (ICU / libc: ``'a' < 'B'``), so it becomes
  ``COLLATE "C"`` (byte order of UTF-8 = code point order); Spark 4 compares in
  ``UTF8_BINARY``, said explicitly so a column's own collation cannot apply.
* **Rounding onto the grid.** The rewrite rounds half to even (``round_even(x, 0)``):
  PostgreSQL's ``round`` of a double does exactly that, Spark's ``bround``.
* **Floating-point literals.** ``1e0`` is a DOUBLE in DuckDB and a NUMERIC in PostgreSQL, which
  would compare a BIGINT column exactly instead of as a double (9007199254740993 = 1e0·2^53 in
  DuckDB, not in PostgreSQL): such literals are cast to DOUBLE PRECISION.
* **TRY.** The totality checker wraps what could fail in ``TRY(...)`` (DuckDB: a failure is
  NULL). Only constructs whose failures each engine can reproduce are rendered (the session
  refuses the others before anything is charged, :mod:`privplan.engines.portable`): date parts
  (PostgreSQL: NULL for an infinite date, as DuckDB's failure under TRY) and, on Spark, ``+``,
  ``-``, ``*`` as ``try_add`` / ``try_subtract`` / ``try_multiply``.
* **TRY_CAST** on PostgreSQL (which has none) is a plain CAST: the session only lets through
  casts that cannot fail (to text, and numeric widening; :mod:`privplan.engines.portable`).

Anything else the rewrite emits (window functions, FILTER, IS NOT DISTINCT FROM, unnest of a
list, VALUES) means the same in all three and is left to sqlglot's generator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import sqlglot
from sqlglot import exp

from privplan.errors import UnsupportedQueryError

ENGINE_NAMES = {"postgres": "PostgreSQL", "spark": "Spark", "duckdb": "DuckDB"}
_DATE_PARTS = (exp.Year, exp.Month, exp.Day)
_SPARK_TRY: dict[type[exp.Expr], str] = {
    exp.Add: "try_add", exp.Sub: "try_subtract", exp.Mul: "try_multiply"}


@functools.lru_cache(maxsize=2048)
def render(sql: str, dialect: str) -> str:
    """``sql`` (DuckDB dialect, built by privplan) as ``dialect`` must run it to compute what
    DuckDB computes. Raises UnsupportedQueryError for a construct it cannot render exactly."""
    if dialect == "duckdb":
        return sql
    tree = sqlglot.parse_one(sql, read="duckdb")
    return _post_order(tree, functools.partial(_rewrite, dialect=dialect)).sql(dialect=dialect)


def _post_order(node: exp.Expr, fun: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """``fun`` applied to every node, children first (so a rewrite sees rewritten children)."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expr):
            node.set(key, _post_order(value, fun))
        elif isinstance(value, list):
            node.set(key, [_post_order(v, fun) if isinstance(v, exp.Expr) else v
                           for v in value])
    return fun(node)


def _rewrite(node: exp.Expr, dialect: str) -> exp.Expr:
    if isinstance(node, exp.Collate):
        return _collate(node, dialect)
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "round_even":
        value = node.expressions[0]
        if dialect == "postgres":
            return exp.func("round", exp.cast(value, "DOUBLE"))
        return exp.Anonymous(this="bround", expressions=[value, exp.Literal.number(0)])
    if isinstance(node, exp.Try):
        return _try(node.this, dialect)
    if isinstance(node, exp.TryCast) and dialect == "postgres":
        return exp.Cast(this=node.this, to=node.args["to"])
    if (dialect == "postgres" and isinstance(node, exp.Literal) and not node.is_string
            and any(c in node.this.lower() for c in "e")):
        return exp.cast(node.copy(), "DOUBLE")
    return node


def _collate(node: exp.Collate, dialect: str) -> exp.Expr:
    name = node.expression
    if not (isinstance(name, (exp.Identifier, exp.Var)) and str(name.this).lower() == "binary"):
        raise UnsupportedQueryError(
            f"collation {name.sql()} cannot be rendered for {ENGINE_NAMES[dialect]}")
    if dialect == "postgres":
        return exp.Collate(this=node.this, expression=exp.Identifier(this="C", quoted=True))
    return exp.Collate(this=node.this, expression=exp.Var(this="UTF8_BINARY"))


def _try(inner: exp.Expr, dialect: str) -> exp.Expr:
    """``TRY(inner)``: ``inner`` with every operation that could fail made NULL instead, as
    DuckDB's TRY does (see the module doc for what is supported)."""
    def safe(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Neg) and isinstance(node.this, (exp.Literal, exp.Cast)):
            return node  # (a negative constant)
        if isinstance(node, _DATE_PARTS):
            if dialect == "postgres":
                arg = node.this
                part = exp.Extract(this=exp.var(type(node).__name__.upper()), expression=arg)
                return exp.Case(ifs=[exp.If(this=exp.func("isfinite", arg),
                                            true=exp.cast(part, "BIGINT"))])
            return node
        if dialect == "spark" and type(node) in _SPARK_TRY:
            return exp.Anonymous(this=_SPARK_TRY[type(node)],
                                 expressions=[node.this, node.expression])
        if isinstance(node, (exp.Column, exp.Literal, exp.Paren, exp.Cast, exp.Boolean,
                             exp.Null, exp.Identifier, exp.DataType, exp.DataTypeParam,
                             exp.Var, exp.Collate)):
            return node
        raise UnsupportedQueryError(
            f"{node.sql(dialect='duckdb')} cannot be made total on {ENGINE_NAMES[dialect]} "
            "exactly as on DuckDB")
    return _post_order(inner, safe)
