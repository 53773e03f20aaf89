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
* ``TRY_CAST`` that cannot fail (to text, or a number to a wider number);
* a date or timestamp constant written as text (``DATE '...'``, ``CAST('...' AS TIMESTAMP)``,
  or a string compared with a date or timestamp column) only in the ISO form every engine
  reads alike: ``YYYY-MM-DD`` for a date, ``YYYY-MM-DD[ HH:MM:SS[.ffffff]]`` for a timestamp,
  years 1 to 9999. Each engine parses other spellings its own way (``'infinity'``, ``'epoch'``,
  years BC or past 9999, ``'2020-1-1'``, surrounding spaces): DuckDB accepts them where
  PostgreSQL refuses them or Spark fails on them while reading rows, after the charge;
* on Spark, integer constants of at most 38 digits (Spark's widest DECIMAL: a longer one is
  refused when Spark analyses the query, where DuckDB computes it);
* no cast to a type the engine lacks (HUGEINT, the unsigned types), and on PostgreSQL, whose
  TRY_CAST is a CAST, a TRY_CAST of an integer column to ``DECIMAL(38,s)`` only when the
  decimal holds every value of the column's type.

Measures whose engine aggregate DuckDB alone computes (quantiles: ``histogram``; ``VAR`` /
``STDDEV`` of DISTINCT values) are refused, and so is a private column whose stored type the
policy reads through a conversion that could fail on the remote engine.
"""

from __future__ import annotations

import datetime as dt
import re
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
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
                exp.NullSafeNEQ)
_ISO = {"date": re.compile(r"\d{4}-\d{2}-\d{2}"),
        "timestamp": re.compile(r"\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)?")}
_SPARK_DIGITS = 38  # Spark's widest DECIMAL
_INT_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 19, "HUGEINT": 39,
               "UTINYINT": 3, "USMALLINT": 5, "UINTEGER": 10, "UBIGINT": 20, "UHUGEINT": 39}
_NO_SUCH_TYPE = ("HUGEINT", "UHUGEINT", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT",
                 "BIGNUM", "VARINT", "INT128", "UINT128")
"""DuckDB types neither PostgreSQL nor Spark has (a cast to one is refused there)."""
_REFUSED_MEASURES = {"quantile": "quantiles (the engine's per-group histogram)",
                     "sum_sq_distinct": "VAR / STDDEV of DISTINCT values"}


def check_portable(core: CorePlan, types: Mapping[str, str], dialect: str) -> None:
    """Refuse (UnsupportedQueryError, before anything is charged) what the remote engine
    ``dialect`` might compute differently from DuckDB (see the module doc). ``types``: the
    DuckDB type of each column the core's expressions read."""
    if dialect == "duckdb":
        return
    engine = ENGINE_NAMES[dialect]
    for m in core.measures:
        if m.kind in _REFUSED_MEASURES:
            raise UnsupportedQueryError(
                f"{_REFUSED_MEASURES[m.kind]} run on DuckDB only; {engine} has no exact "
                "equivalent privplan can use. Run this query on the embedded DuckDB engine "
                "(e.g. over a Parquet export of the table). Nothing was charged.")
    trees: list[exp.Expr] = [k.expr for k in core.keys]
    trees += [t for t in [core.where, *(m.condition for m in core.measures)] if t is not None]
    trees += [sqlglot.parse_one(m.expression, read="duckdb") for m in core.measures
              if m.expression is not None]
    lowered = {c.lower(): t for c, t in types.items()}
    for tree in trees:
        check = _Check(lowered, dialect, engine)
        check.check(tree, in_try=False)
        if dialect == "spark":
            check.numbers(tree)


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


def _iso(text: str, kind: str) -> bool:
    """``text`` is a valid date (``kind`` "date") or timestamp in the ISO form all three engines
    read as the same value (see the module doc)."""
    if not _ISO[kind].fullmatch(text):
        return False
    try:
        (dt.date if kind == "date" else dt.datetime).fromisoformat(text)
    except ValueError:
        return False
    return True


def _temporal(duckdb_type: str) -> str | None:
    """"date" or "timestamp" for a DuckDB type a string converts to as such; "other" for another
    date-time type (TIMESTAMPTZ, TIME, TIMESTAMP_NS ...); None for a type that is not one."""
    kind = family(duckdb_type)
    if kind in ("date", "timestamp"):
        return kind
    upper = duckdb_type.upper()
    return "other" if upper.startswith(("DATE", "TIME", "INTERVAL")) else None


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


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
        if isinstance(node, (*_COMPARISONS, exp.In, exp.Between)):
            self._temporal_strings(node)
        if not isinstance(node, _LOGIC):
            raise self.refuse(node, f"{type(node).__name__.upper()} is not in the portable set")
        for child in node.iter_expressions():
            self.check(child, in_try)

    def numbers(self, tree: exp.Expr) -> None:
        """Spark reads an integer of more than 38 digits as a DECIMAL it cannot hold, and
        refuses the query (DuckDB computes it; a longer decimal is a DOUBLE in DuckDB, and
        rendered as one: :func:`privplan.engines.render._double_literal`)."""
        for node in tree.find_all(exp.Literal):
            digits = sum(ch.isdigit() for ch in node.this)
            if not node.is_string and not any(c in node.this.lower() for c in ".e") and (
                    digits > _SPARK_DIGITS):
                raise self.refuse(node, f"a number of more than {_SPARK_DIGITS} digits, which "
                                        "Spark cannot read")

    def _temporal_strings(self, node: exp.Expr) -> None:
        """A string the engine converts to a date or timestamp because it is compared with a
        column of that type must be in the ISO form (see the module doc)."""
        if isinstance(node, exp.In):
            operands = [node.this, *node.expressions]
        elif isinstance(node, exp.Between):
            operands = [node.this, node.args["low"], node.args["high"]]
        else:
            operands = [node.this, node.expression]
        operands = [_unparen(o) for o in operands]
        kinds = {_temporal(self.types.get(o.name.lower(), "?")) for o in operands
                 if isinstance(o, exp.Column)} - {None}
        for o in operands:
            if isinstance(o, exp.Literal) and o.is_string:
                for kind in kinds:
                    self._iso_constant(o, str(kind), node)

    def _iso_constant(self, text: exp.Literal, kind: str, node: exp.Expr) -> None:
        if kind not in _ISO or not _iso(text.this, kind):
            raise self.refuse(node, f"the {kind if kind in _ISO else 'date-time'} constant "
                                    f"{text.sql(dialect='duckdb')} is not written YYYY-MM-DD"
                                    f"{'' if kind == 'date' else '[ HH:MM:SS[.ffffff]]'} with "
                                    "a year from 1 to 9999, the only form every engine reads "
                                    "as the same value")

    def _plain_column(self, arg: exp.Expr, node: exp.Expr) -> None:
        if not isinstance(arg, exp.Column):
            raise self.refuse(node, "a date part of anything but a column")

    def _cast(self, node: exp.Expr, in_try: bool) -> None:
        inner = node.this
        target = node.args["to"].sql(dialect="duckdb").upper()
        if target in _NO_SUCH_TYPE:
            raise self.refuse(node, f"{self.engine} has no type {target}")
        kind, text = _temporal(target), _unparen(inner)
        if kind is not None and isinstance(text, exp.Literal) and text.is_string:
            self._iso_constant(text, kind, node)  # (DATE '...', TIMESTAMP '...')
            return
        if not any(isinstance(n, exp.Column) for n in inner.find_all(exp.Column)):
            # a constant: DuckDB's judge evaluated it before the charge; PostgreSQL's bind plans
            # the statement (folding constants) so one it cannot compute fails there too.
            # Spark folds constants only at run time (optimizing at bind is no cure: over a
            # local relation Spark's optimizer evaluates the rows themselves, and its errors
            # quote values), so there such a constant fails after the charge: an over-charge
            # for a failure that does not depend on the data, never a release. (Not so where
            # Spark converts a constant compared with a column: over a local relation the
            # optimizer evaluates the comparison row by row, and `ts IN ('infinity')` failed
            # only for rows whose ts is not NULL. Dates and timestamps written as text, the
            # constants Spark reads otherwise than DuckDB, are checked above and in
            # _temporal_strings: only the ISO form every engine reads alike gets this far.)
            return
        if isinstance(node, exp.TryCast) and isinstance(inner, exp.Column):
            stored = self.types.get(inner.name.lower(), "?").upper()
            source = family(stored)
            wide = (target.startswith("VARCHAR") or source == "int" and (
                target in ("BIGINT", "DOUBLE") or target.startswith("DECIMAL(38")
                and self._holds(target, stored)))
            if wide:
                return
        if target == "DOUBLE" and isinstance(inner, exp.Column) and _exact_to_double(
                self.types.get(inner.name.lower(), "?")):
            return  # rounded once to nearest in all three engines; cannot fail
        if target.startswith("VARCHAR") and isinstance(inner, exp.Column) and family(
                self.types.get(inner.name.lower(), "?")) in ("int", "str", "bool"):
            return  # integer / boolean text is the same in all three engines
        raise self.refuse(node, "a conversion that may fail or round differently")

    def _holds(self, decimal: str, integer: str) -> bool:
        """``DECIMAL(38,s)`` holds every value of the integer type (PostgreSQL's TRY_CAST is a
        CAST, which fails where DuckDB's gives NULL: ``DECIMAL(38,20)`` has 18 integer digits,
        a BIGINT 19); Spark's ``try_cast`` gives NULL as DuckDB's."""
        if self.dialect != "postgres":
            return True
        scale = int(decimal.replace(" ", "").rstrip(")").partition(",")[2] or 0)
        return 38 - scale >= _INT_DIGITS.get(integer, 39)

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
