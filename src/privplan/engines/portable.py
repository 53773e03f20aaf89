"""What privplan runs on PostgreSQL and Spark: only what it can show computes DuckDB's values.

The analysis models DuckDB (types, comparisons, which expressions can fail; see
:mod:`privplan.sql.totality`). On another engine the same text can compute something else —
PostgreSQL raises on a float overflow and a division by zero where DuckDB gives infinity, Spark's
``floor`` of a large double overflows a BIGINT, each engine names and rounds functions its own
way — and a value computed differently is a region the analysis did not model (an overlap it
proved impossible: an under-charge) or a failure that depends on the rows (one exact bit about
the data). So before anything is charged, a query for a remote engine is checked here, and every
construct outside a small portable subset is refused with what to do instead:

* comparisons, ``IN``, ``BETWEEN``, ``IS [NOT] NULL``, ``IS [NOT] DISTINCT FROM``, ``AND`` /
  ``OR`` / ``NOT``, ``CASE``, ``COALESCE``, ``NULLIF``, columns and constants;
* arithmetic whose result is bounded far below overflow, with only nonzero constants as
  divisors, over integer columns and constants (a float column has no bound: refused);
  ``FLOOR`` / ``CEIL`` of such a value; under ``TRY`` the same, plus on Spark ``+ - *`` of any
  integers (``try_add`` & co. fail exactly where DuckDB's TRY gives NULL);
* ``YEAR`` / ``MONTH`` / ``DAY`` of a date or timestamp (under TRY);
* ``LIKE`` with a constant pattern without backslashes (DuckDB has no default escape
  character; PostgreSQL's and Spark's is the backslash);
* ``TRY_CAST`` that cannot fail (to text, or a number to a wider number).

Every measure's aggregate is portable (a quantile's histogram is rendered as a two-level
aggregate, :mod:`privplan.engines.histograms`). A private column whose stored type the policy
reads through a conversion that could fail on the remote engine is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlglot
from sqlglot import exp

from privplan.engines.render import ENGINE_NAMES
from privplan.errors import PolicyError, UnsupportedQueryError
from privplan.sql.plan import CorePlan
from privplan.sql.totality import family

_INT_BOUND = {"TINYINT": 2.0 ** 7, "SMALLINT": 2.0 ** 15, "INTEGER": 2.0 ** 31,
              "BIGINT": 2.0 ** 63, "HUGEINT": 2.0 ** 127, "UTINYINT": 2.0 ** 8,
              "USMALLINT": 2.0 ** 16, "UINTEGER": 2.0 ** 32, "UBIGINT": 2.0 ** 64}
_FLOAT_LIMIT = 1e300  # far below DOUBLE's 1.8e308: no result near overflow
_SAFE_INT = 2.0 ** 15  # below every integer type PostgreSQL and Spark share with DuckDB
_LOGIC = (exp.Connector, exp.Not, exp.Paren, exp.Case, exp.If, exp.Coalesce, exp.Nullif,
          exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ,
          exp.Is, exp.In, exp.Between, exp.Null, exp.Boolean, exp.Literal, exp.Collate,
          exp.DataType, exp.DataTypeParam, exp.Var, exp.Identifier, exp.Tuple)


def check_portable(core: CorePlan, types: Mapping[str, str], dialect: str) -> None:
    """Refuse (UnsupportedQueryError, before anything is charged) what the remote engine
    ``dialect`` might compute differently from DuckDB (see the module doc). ``types``: the
    DuckDB type of each column the core's expressions read."""
    if dialect == "duckdb":
        return
    engine = ENGINE_NAMES[dialect]
    trees: list[exp.Expr] = [k.expr for k in core.keys]
    trees += [t for t in [core.where, *(m.condition for m in core.measures)] if t is not None]
    trees += [sqlglot.parse_one(m.expression, read="duckdb") for m in core.measures
              if m.expression is not None]
    lowered = {c.lower(): t for c, t in types.items()}
    for tree in trees:
        _Check(lowered, dialect, engine).check(tree, in_try=False)


def check_stored_types(table: str, stored: Mapping[str, str], columns: Mapping[str, object],
                       dialect: str) -> None:
    """Refuse a private column the policy reads through a conversion that could fail on the
    remote engine (the typed view's TRY_CAST, which PostgreSQL lacks and Spark rounds its own
    way): only a number read as ``float``, or any integer read as ``int``, is converted there."""
    if dialect == "duckdb":
        return
    for name, col in columns.items():
        kind = getattr(col, "type", None)
        got = family(stored.get(name, "").upper())
        ok = {"int": ("int",), "float": ("float", "int", "decimal"), "str": ("str",),
              "bool": ("bool",), "date": ("date",), "timestamp": ("timestamp",)}.get(
                  str(kind), ())
        if got not in ok:
            raise PolicyError(
                f"table '{table}': column '{name}' is stored as {stored.get(name)} in "
                f"{ENGINE_NAMES[dialect]} but the policy declares it {kind}; privplan would "
                "read it through a conversion that fails on some values there. Declare the "
                "column's own type in the policy, or convert it in a view in the database and "
                "name the view in the policy. Nothing was charged.")


def _exact_to_double(duckdb_type: str) -> bool:
    """A type whose conversion to DOUBLE is one correct rounding in every engine: integers,
    floats, and decimals of at most 15 digits (DuckDB divides the unscaled integer, exact
    below 2^53, by an exact power of ten: one IEEE rounding, as PostgreSQL's and Spark's
    decimal-to-double conversions)."""
    kind = family(duckdb_type)
    if kind in ("int", "float"):
        return True
    t = duckdb_type.upper().replace(" ", "")
    return t.startswith("DECIMAL(") and int(t[8:].split(",")[0].rstrip(")")) <= 15


class _Check:
    def __init__(self, types: Mapping[str, str], dialect: str, engine: str) -> None:
        self.types, self.dialect, self.engine = types, dialect, engine

    def refuse(self, node: exp.Expr, why: str) -> UnsupportedQueryError:
        return UnsupportedQueryError(
            f"on {self.engine}, privplan runs only expressions it can show compute the same "
            f"values as on DuckDB; {node.sql(dialect='duckdb')} is not one ({why}). Compute it "
            f"in a view in the database and name the view in the policy, or run the query on "
            "the embedded DuckDB engine. Nothing was charged.")

    def check(self, node: exp.Expr, in_try: bool) -> None:
        if isinstance(node, exp.Try):
            self.check(node.this, in_try=True)
            return
        if isinstance(node, exp.Column):
            return
        if isinstance(node, (exp.Cast, exp.TryCast)):
            self._cast(node, in_try)
            return
        if isinstance(node, (exp.Year, exp.Month, exp.Day)):
            if not in_try and self.dialect == "postgres":
                raise self.refuse(node, "a date part outside TRY")
            self._plain_column(node.this, node)
            return
        if isinstance(node, exp.Like) and not isinstance(node.this, exp.Literal):
            pattern = node.expression
            if not (isinstance(pattern, exp.Literal) and pattern.is_string
                    and "\\" not in pattern.this):
                raise self.refuse(node, "LIKE with a pattern that is not a constant without "
                                        "backslashes (the engines' default escapes differ)")
            self.check(node.this, in_try)
            return
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Floor, exp.Ceil)):
            self._arithmetic(node, in_try)
            return
        if not isinstance(node, _LOGIC):
            raise self.refuse(node, f"{type(node).__name__.upper()} is not in the portable set")
        for child in node.iter_expressions():
            self.check(child, in_try)

    def _plain_column(self, arg: exp.Expr, node: exp.Expr) -> None:
        if not isinstance(arg, exp.Column):
            raise self.refuse(node, "a date part of anything but a column")

    def _cast(self, node: exp.Expr, in_try: bool) -> None:
        inner = node.this
        target = node.args["to"].sql(dialect="duckdb").upper()
        if not any(isinstance(n, exp.Column) for n in inner.find_all(exp.Column)):
            # a constant: DuckDB's judge evaluated it before the charge; PostgreSQL's bind plans
            # the statement (folding constants) so one it cannot compute fails there too.
            # Spark folds constants only at run time (optimizing at bind is no cure: over a
            # local relation Spark's optimizer evaluates the rows themselves, and its errors
            # quote values), so there such a constant fails after the charge: an over-charge
            # for a failure that does not depend on the data, never a release
            return
        if isinstance(node, exp.TryCast) and isinstance(inner, exp.Column):
            source = family(self.types.get(inner.name.lower(), "?"))
            wide = (target.startswith("VARCHAR") or source == "int" and (
                target in ("BIGINT", "HUGEINT", "DOUBLE") or target.startswith("DECIMAL(38")))
            if wide:
                return
        if target == "DOUBLE" and isinstance(inner, exp.Column) and _exact_to_double(
                self.types.get(inner.name.lower(), "?")):
            return  # rounded once to nearest in all three engines; cannot fail
        if target.startswith("VARCHAR") and isinstance(inner, exp.Column) and family(
                self.types.get(inner.name.lower(), "?")) in ("int", "str", "bool"):
            return  # integer / boolean text is the same in all three engines
        raise self.refuse(node, "a conversion that may fail or round differently")

    def _arithmetic(self, node: exp.Expr, in_try: bool) -> None:
        if isinstance(node, exp.Div):
            divisor = node.expression
            if not (isinstance(divisor, exp.Literal) and not divisor.is_string
                    and float(divisor.this) != 0):
                raise self.refuse(node, "a division by anything but a nonzero constant")
        spark_try = in_try and self.dialect == "spark" and isinstance(
            node, (exp.Add, exp.Sub, exp.Mul))
        if spark_try:
            for child in node.iter_expressions():
                self.check(child, in_try)
            return
        bound = self._bound(node)
        limit = _SAFE_INT if in_try and isinstance(node, (exp.Add, exp.Sub, exp.Mul)) else (
            _FLOAT_LIMIT)
        if bound is None or bound >= limit:
            raise self.refuse(node, "its value is not bounded far from overflow")

    def _bound(self, node: exp.Expr) -> float | None:
        """An upper bound on |value| of a numeric expression, None if unknown/unbounded."""
        if isinstance(node, exp.Paren):
            return self._bound(node.this)
        if isinstance(node, exp.Literal) and not node.is_string:
            return abs(float(node.this))
        if isinstance(node, exp.Column):
            return _INT_BOUND.get(self.types.get(node.name.lower(), "?").upper())
        if isinstance(node, exp.Try):
            return self._bound(node.this)
        if isinstance(node, (exp.Neg, exp.Floor, exp.Ceil)):
            inner = self._bound(node.this)
            return None if inner is None else inner + 1
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
            a, b = self._bound(node.this), self._bound(node.expression)
            if a is None or b is None:
                return None
            if isinstance(node, exp.Mul):
                return a * b
            if isinstance(node, exp.Div):
                return a / abs(float(node.expression.this))  # (a nonzero constant, checked)
            return a + b
        return None
