"""Syntax-tree helpers of the totality check: constant subtrees, typed skeletons, operands.

A node with no column below it is a constant (evaluated by the engine before the charge); a
*skeleton* replaces every column by a typed NULL (to ask the engine for a type) or by a sample
value of its type (to try a node's constant arguments once); the other helpers read a node's
operands, ancestors and SQL name for the check and its messages. None of them reads data.
"""

from __future__ import annotations

from sqlglot import exp

from privplan.errors import UnsupportedQueryError
from privplan.sql.totality.allow_list import _NOT_VALUES
from privplan.sql.totality.engine_types import _SAMPLE, family


def _constant_nodes(expr: exp.Expr) -> set[int]:
    """ids of the nodes with no column reference below them (computed bottom-up)."""
    has_column: dict[int, bool] = {}
    for node in reversed(list(expr.walk())):
        has_column[id(node)] = isinstance(node, exp.Column) or any(
            has_column.get(id(c), False) for c in node.iter_expressions())
    return {i for i, c in has_column.items() if not c}


def _skeleton(node: exp.Expr, columns: dict[str, str], *,
              sample: bool = False) -> exp.Expr:
    """``node`` with every column replaced by a typed NULL (or a sample value of its type)."""
    out = node.copy()

    def visit(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column):
            t = columns.get(n.name.lower())
            if t is None:
                raise UnsupportedQueryError(f"unknown column '{n.name}'")
            if sample:
                return exp.maybe_parse(f"CAST({_SAMPLE.get(family(t), 'NULL')} AS {t})",
                                       dialect="duckdb")
            return exp.cast(exp.null(), exp.DataType.build(t, dialect="duckdb"))
        return n

    return out.transform(visit, copy=False)


def _operands(node: exp.Expr) -> list[exp.Expr]:
    return [c for c in node.iter_expressions() if not isinstance(c, _NOT_VALUES)]


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    out = []
    p = node.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out


def _plain(node: exp.Expr) -> str:
    return node.sql(dialect="duckdb")


def _fname(node: exp.Expr) -> str:
    """The construct's SQL name: ``REPEAT()`` for a function, ``COLLATE`` for an operator."""
    if isinstance(node, exp.Anonymous):
        return f"{node.name.upper()}()"
    if isinstance(node, exp.Func):
        return f"{node.sql_name()}()"
    return node.key.upper()
