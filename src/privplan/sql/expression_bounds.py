"""Bounds of an arithmetic expression over bounded columns, for SUM/AVG/VAR of expressions.

``SUM(price * quantity)`` needs the range of ``price * quantity`` per row. Interval arithmetic
over the declared bounds gives a sound one: for +, -, unary -, * and division by a non-zero
literal the result of each operation on values inside its operands' intervals lies inside the
interval computed from their end points (for * the four corner products hold both extremes).
The engine evaluates the same expression over each column *clamped to its declared bounds*
and in DOUBLE (no integer overflow, no error): so every row's value lies in the computed
interval (up to float rounding, which the grid clamp of the SUM absorbs), and the SUM's
sensitivity follows from it exactly as for a column. A NULL in any column makes the value NULL
(skipped by SUM, excluded from the region). Anything else — functions, CASE, columns without
bounds, division by a column — is refused by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sqlglot import exp

__all__ = ["Bounded", "NotBoundable", "bound_expression", "clamped"]


class NotBoundable(Exception):
    """The expression is outside what interval arithmetic here covers; ``node`` says where."""

    def __init__(self, node: exp.Expression, why: str) -> None:
        super().__init__(why)
        self.node = node
        self.why = why


@dataclass(frozen=True)
class Bounded:
    """An expression's interval, its engine SQL (over clamped DOUBLE columns) and its columns."""

    lower: Fraction
    upper: Fraction
    sql: str
    columns: tuple[str, ...]


def _num(v: Fraction) -> str:
    """An exact-enough DOUBLE literal (the final grid clamp absorbs the last bit)."""
    return repr(float(v))


def clamped(name: str, lo: Fraction, hi: Fraction) -> Bounded:
    """Column ``name`` clamped to [lo, hi] in DOUBLE (NULL stays NULL; NaN clamps to hi)."""
    ident = exp.column(name).sql(dialect="duckdb")
    value = f"CAST({ident} AS DOUBLE)"
    sql = (f"(CASE WHEN {value} < {_num(lo)} THEN {_num(lo)} WHEN {value} > {_num(hi)} "
           f"THEN {_num(hi)} ELSE {value} END)")
    return Bounded(lo, hi, sql, (name,))


def bound_expression(node: exp.Expression, columns: Any) -> Bounded:
    """``columns``: the table's column policies by lower-case name (type, lower, upper)."""
    if isinstance(node, exp.Paren):
        return bound_expression(node.this, columns)
    if isinstance(node, exp.Column):
        name = node.name.lower()
        col = columns.get(name)
        if col is None or col.type not in ("int", "float") or not col.has_bounds:
            raise NotBoundable(node, f"column '{node.name}' has no declared numeric bounds")
        return clamped(name, Fraction(col.lower), Fraction(col.upper))
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            v = Fraction(node.this)
        except (ValueError, ZeroDivisionError):
            raise NotBoundable(node, f"literal {node.sql()} is not a number") from None
        return Bounded(v, v, _num(v), ())
    if isinstance(node, exp.Neg):
        a = bound_expression(node.this, columns)
        return Bounded(-a.upper, -a.lower, f"(-{a.sql})", a.columns)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
        a = bound_expression(node.this, columns)
        b = bound_expression(node.expression, columns)
        cols = tuple(dict.fromkeys(a.columns + b.columns))
        if isinstance(node, exp.Add):
            return Bounded(a.lower + b.lower, a.upper + b.upper, f"({a.sql} + {b.sql})", cols)
        if isinstance(node, exp.Sub):
            return Bounded(a.lower - b.upper, a.upper - b.lower, f"({a.sql} - {b.sql})", cols)
        if isinstance(node, exp.Mul):
            corners = [x * y for x in (a.lower, a.upper) for y in (b.lower, b.upper)]
            return Bounded(min(corners), max(corners), f"({a.sql} * {b.sql})", cols)
        if b.columns or b.lower != b.upper or b.lower == 0:
            raise NotBoundable(node, "division is allowed by a non-zero number only")
        ends = sorted((a.lower / b.lower, a.upper / b.lower))
        return Bounded(ends[0], ends[1], f"({a.sql} / {b.sql})", a.columns)
    raise NotBoundable(node, f"`{node.sql(dialect='duckdb')}` is not +, -, * or / of bounded "
                             "columns and numbers")
