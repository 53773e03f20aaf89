"""Every sub-expression of an expression, to be evaluated on its own over stand-in rows.

An engine evaluates ``a AND b``, ``CASE WHEN c THEN x ELSE y END`` and ``COALESCE(a, b)``
lazily: ``b`` is not evaluated on a row where ``a`` is false, ``x`` not where ``c`` fails to
hold. Stand-in rows are edge values of each column, not the rows of the data; a branch that
fails only under a condition the stand-ins never meet (``CASE WHEN age = 37 THEN
CAST(s AS INT) END``) would pass a probe of the whole expression and fail on a real row after
the charge. So the gate evaluates every sub-expression *as a value of its own*, on every
stand-in row, whatever the condition around it: a failure anywhere is a failure.

What is not evaluated on its own: leaves (columns, literals), the inside of ``TRY(...)`` (its
failures become NULL by design: ``TRY`` is what makes an expression total), lambda bodies
(their variables are not columns), and structural nodes that are not values (a CASE's WHEN
clause, a window specification, ``ORDER BY`` items). A sub-expression that does not bind on its
own (e.g. it reads a lambda variable) is dropped by the caller: the node around it is still
evaluated.

Privacy: every sub-expression a short circuit or a branch could hide is probed on its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

__all__ = ["sub_expressions"]

_LEAVES = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Identifier, exp.Star,
           exp.DataType, exp.Var, exp.Placeholder, exp.Parameter)
_NOT_VALUES = (exp.If, exp.Paren, exp.Ordered, exp.Window, exp.WindowSpec, exp.Kwarg,
               exp.Distinct, exp.Tuple, exp.Lambda, exp.Interval, exp.Order, exp.Alias,
               exp.Collate, exp.Subquery, exp.Select)


def sub_expressions(roots: Iterable[exp.Expression]) -> dict[str, frozenset[str]]:
    """The DuckDB SQL of every sub-expression of ``roots`` to evaluate on its own, each once,
    in a fixed order (outermost first), with the (lower-case) columns it reads.

    Not evaluated as values of their own: the connectives (``AND``, ``OR``, ``NOT``: over
    booleans they cannot fail; each operand is evaluated, and an operand that is not a
    predicate also under ``NOT``, which converts it to BOOLEAN as the connective does — a
    string column as a condition fails on 'x'); and a comparison of a column with a literal
    once per column, operator and literal *type* (whether it fails on a row depends on the
    row's value and the types compared, not on which constant of that type: a 1,000-term OR
    of ``age = k`` is one probe; the constants themselves are evaluated before the charge by
    the totality check)."""
    out: dict[str, frozenset[str]] = {}
    shapes: set[tuple[object, ...]] = set()
    for root in roots:
        stack: list[tuple[exp.Expression, exp.Expression | None]] = [(root, None)]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, exp.Predicate) and (shape := _shape(node)) is not None:
                if shape in shapes:
                    continue
                shapes.add(shape)
            if not isinstance(node, _LEAVES + _NOT_VALUES + (exp.Connector, exp.Not)):
                _add(out, node, node.sql(dialect="duckdb"))
            if isinstance(parent, (exp.Connector, exp.Not)) and not isinstance(
                    node, (exp.Predicate, exp.Connector, exp.Not, exp.Paren, exp.Boolean)):
                _add(out, node, f"NOT ({node.sql(dialect='duckdb')})")
            if isinstance(node, (exp.Try, exp.Lambda, exp.Subquery, exp.Select)):
                continue  # (TRY: total by design; a lambda's body reads its own variables)
            children = list(node.iter_expressions())
            stack.extend((child, node) for child in reversed(children))
    return out


def _shape(node: exp.Expression) -> tuple[object, ...] | None:
    """A binary comparison of a column with a literal: (operator, column, the literal's kind
    and, for a number, DuckDB's type of it); None for anything else."""
    if not isinstance(node, exp.Binary):
        return None
    left, right = node.this, node.expression
    if isinstance(left, exp.Literal) and isinstance(right, exp.Column):
        left, right = right, left
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Literal)):
        return None
    from privplan.sql.totality.engine_types import _number_type

    kind = "str" if right.is_string else _number_type(str(right.this))
    return (type(node), tuple(p.name.lower() for p in left.parts), kind)


def _add(out: dict[str, frozenset[str]], node: exp.Expression, text: str) -> None:
    if text not in out:
        out[text] = frozenset(c.name.lower() for c in node.find_all(exp.Column))
