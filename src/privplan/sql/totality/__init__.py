"""Expressions over private rows must be *total*: no value of any column may make them fail.

Why (DESIGN.md invariant 7): an expression in WHERE, FILTER or GROUP BY is evaluated on every
private row. If some value makes it raise (``CAST('abc' AS INTEGER)``, ``x // 0``, an overflow,
``error()``), the query fails exactly when such a row exists: one exact, un-noised bit about the
data, whatever ε was charged. So before anything is charged every such expression is checked
here against an allow-list, with the engine's own types (asked of DuckDB, see
:mod:`privplan.engines.judge`), and made total:

* **Allowed as they are** (they cannot fail on any value of their argument types): comparisons,
  ``IN``, ``BETWEEN``, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``, ``CASE``/``COALESCE``/``NULLIF``/
  ``GREATEST``/``LEAST`` whose branches share a type, ``LIKE``/``GLOB``/regular expressions with
  constant patterns, string functions with constant arguments (``lower``, ``length``, ``trim``,
  ``substring``, ``replace``, ...), ``TRY_CAST``, and ``CAST`` to a type that holds every value
  (to ``VARCHAR``, to a wider number, from ``TIMESTAMP`` to ``DATE``).
* **Made total with** ``TRY(...)`` (a failure becomes NULL): arithmetic that can overflow or
  divide by zero (anything but floating point), numeric functions (``abs``, ``round``, ``ln``,
  ...) and date parts (``year``, ``date_trunc``, ...), which can fail on extreme values.
  Wrapping a node in ``TRY`` only removes rows from the TRUE- and FALSE-sets of a condition, so
  the analyser's regions (computed on the expression as written) stay over-approximations.
* **Refused**, with the fix: a ``CAST`` that can fail (use ``TRY_CAST``), a comparison that makes
  the engine convert a column's values (``str_column = 5``: DuckDB converts every string to a
  number and fails on 'abc'), branches of different types, ``COLLATE`` (the analysis assumes
  binary comparison), and every function not on the list (``error()``, ``repeat()``, whose cost
  grows with a value, ``strptime`` ...).
* **Constants** (no column inside) may use any deterministic function, but are evaluated by the
  engine now, before the charge, and so is every implicit conversion of a constant to a column's
  type (``date_col > 'not a date'``): a constant that fails is refused, whatever the data.

What is left that could still fail at run time is resource exhaustion (memory, interrupts),
which the threat model leaves out of scope with timing (docs/DESIGN.md).
"""

from __future__ import annotations

from sqlglot import exp

from privplan.analysis.literal_lists import literal_list
from privplan.process_memory import kept
from privplan.sql.totality.checker import _Checker
from privplan.sql.totality.engine_types import Family, family
from privplan.sql.totality.interface import ExpressionJudge, JudgeError, TotalExpression

__all__ = ["ExpressionJudge", "Family", "JudgeError", "TotalExpression", "family", "make_total"]


def make_total(expr: exp.Expression, column_types: dict[str, str], judge: ExpressionJudge,
               *, sql: str, clause: str, condition: bool) -> TotalExpression:
    """Check ``expr`` (over columns typed ``column_types``, DuckDB type names) and return it
    made total, with its type. ``condition``: the expression is a WHERE/FILTER condition, so
    it must be a boolean. Raises :class:`UnsupportedQueryError` naming the construct, where,
    why and the fix. Nothing here reads data. An expression already checked (same text, same
    column types) is answered from a cache."""
    used = {c.name.lower() for c in expr.find_all(exp.Column)}
    key = (expr.sql(dialect="duckdb"), tuple(sorted((c, t) for c, t in column_types.items()
                                                    if c in used)), clause, condition, id(judge),
           any(literal_list(n) is not None for n in expr.find_all(exp.In)))
    done = _DONE.get(key)
    if done is None:
        done = _Checker(column_types, judge, sql, clause).run(expr, condition)
        if len(_DONE) >= 4096:
            _DONE.clear()
        _DONE[key] = done
    return TotalExpression(done.expr.copy(), done.type)


_DONE: dict[tuple[object, ...], TotalExpression] = {}
kept(__name__, _DONE.clear)
