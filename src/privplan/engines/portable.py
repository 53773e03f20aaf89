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
  divisors, over integer columns, constants and the planner's clamp of a column to its bounds
  (``CASE WHEN v < lo THEN lo WHEN v > hi THEN hi ELSE v END``, so ``SUM(x * 2)`` runs; a bare
  float column has no bound: refused);
  ``FLOOR`` / ``CEIL`` of such a value; under ``TRY`` the same, plus on Spark ``+ - *`` of any
  integers (``try_add`` & co. fail exactly where DuckDB's TRY gives NULL);
* ``YEAR`` / ``MONTH`` / ``DAY`` of a date or timestamp (under TRY);
* ``LIKE`` with a constant pattern without backslashes (DuckDB has no default escape
  character; PostgreSQL's and Spark's is the backslash);
* ``TRY_CAST`` that cannot fail (to text, or a number to a wider number);
* dates and timestamps written as text only in the form every engine reads alike:
  ``YYYY-MM-DD[( |T)HH:MM[:SS[.ffffff]]]``, year 1 to 9999 (:func:`_plain_temporal_text`);
* no cast to a type the engine lacks (HUGEINT, the unsigned types), and on Spark no integer
  constant of more than 38 digits (Spark's widest DECIMAL: refused when Spark analyses the
  query, where DuckDB computes it). (A TRY_CAST of an integer to a DECIMAL that cannot hold
  it is guarded by the renderer on PostgreSQL, whose TRY_CAST is a CAST.)

Every measure's aggregate is portable (a quantile's histogram is rendered as a two-level
aggregate, :mod:`privplan.engines.histograms`). A private column whose stored type the policy
reads through a conversion that could fail on the remote engine is refused.
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
_SPARK_DIGITS = 38  # Spark's widest DECIMAL
_NO_SUCH_TYPE = ("HUGEINT", "UHUGEINT", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT",
                 "BIGNUM", "VARINT", "INT128", "UINT128")
"""DuckDB types neither PostgreSQL nor Spark has (a cast to one is refused there)."""
_COMPARED = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
             exp.NullSafeNEQ, exp.In, exp.Between, exp.Case, exp.If, exp.Coalesce, exp.Nullif)
_TEMPORAL_TEXT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,6})?)?)?")


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
        check = _Check(lowered, dialect, engine)
        check.check(tree, in_try=False)
        if dialect == "spark":
            check.numbers(tree)


def check_stored_types(table: str, stored: Mapping[str, str], columns: Mapping[str, object],
                       dialect: str) -> None:
    """Refuse a private column the policy reads through a conversion that could fail on the
    remote engine, or that the engine would compare otherwise than DuckDB (before anything is
    charged). What is accepted (:data:`STORED`), each read so that no storable value fails:

    * ``int``: the engine's integers, read as they are (a BIGINT holds every one);
    * ``float``: floats (a REAL widened to DOUBLE, exactly), integers and DECIMAL(p, s) up to
      38 digits (converted to the nearest double, which cannot fail), and PostgreSQL's
      unconstrained ``numeric`` (or wider than 38 digits, or of a negative scale), read as
      DuckDB reads the number's text: the nearest double, ±infinity past DOUBLE's range, ±0.0
      below its least subnormal, NaN as NaN (``render._numeric_to_double``: PostgreSQL's own
      conversion fails on those, on the rows that hold them);
    * ``str``: text of the default collation, in binary order (``COLLATE "C"`` /
      ``UTF8_BINARY``); on PostgreSQL only in a UTF-8 database; on Spark a string that is not
      valid UTF-8 is read as NULL (``render``), as DuckDB holds no such string;
    * ``bool``, ``date``, ``timestamp`` (without time zone): the same type. Every date and
      timestamp the engines hold is read, compared and counted (±infinity and years outside
      1-9999 included: a key outside those years is released as NULL, and YEAR counts years
      as DuckDB does, 0 for 1 BC).

    Refused: anything else — text read as a number, date or timestamp (a parse that fails on
    some rows), numbers as integers (rounding differs: PostgreSQL rounds half away from zero,
    Spark truncates), timestamps with a time zone, dates as timestamps, blank-padded
    ``char(n)`` (compared padded), PostgreSQL's ``oid`` (unsigned: ``oid < -1`` holds for 0),
    binary strings."""
    if dialect == "duckdb":
        return
    for name, col in columns.items():
        kind = str(getattr(col, "type", None))
        got = stored.get(name, "")
        if family(got.upper()) not in STORED.get(kind, ()):
            raise PolicyError(
                f"table '{table}': column '{name}' is stored as {got} in "
                f"{ENGINE_NAMES[dialect]} but the policy declares it {kind}; {_why(got)}. "
                "Declare the column's own type in the policy, or convert it in a view in the "
                "database and name the view in the policy. Nothing was charged.")


STORED: dict[str, tuple[str, ...]] = {
    "int": ("int",), "float": ("float", "int", "decimal"), "str": ("str",), "bool": ("bool",),
    "date": ("date",), "timestamp": ("timestamp",)}
"""Policy type -> the families of stored types a remote engine reads it from."""


def _why(stored: str) -> str:
    """Why a stored type is refused for the policy type (see :func:`check_stored_types`)."""
    upper = stored.upper()
    if upper.startswith("TEXT IN "):
        encoding = stored[len("TEXT IN "):]
        return (f"the database's server_encoding is {encoding}, not UTF8: PostgreSQL keeps "
                "its strings in that encoding and compares their bytes, which is not the "
                "order of code points the analysis assumes"
                + (", and does not check them: a row may hold bytes that are no text at all, "
                   "and fail when it is read" if encoding.upper() == "SQL_ASCII" else "")
                + ". Use a database created WITH ENCODING 'UTF8'")
    if upper in ("BPCHAR",) or upper.startswith("CHAR("):
        return ("a CHAR(n) value is padded with spaces and compared padded ('a' = 'a  '), "
                "where privplan compares strings as they are")
    if upper == "OID":
        return ("an oid is an unsigned integer that negative constants are converted to "
                "(oid < -1 holds for 0): it compares otherwise than an integer")
    return ("privplan would read it through a conversion that fails on some values there, "
            "or compares them otherwise")


def _plain_temporal_text(text: str) -> bool:
    """Whether DuckDB, PostgreSQL and Spark read ``text`` as the same date or timestamp: ISO
    ``YYYY-MM-DD``, optionally `` HH:MM[:SS[.ffffff]]`` (or ``T``), valid fields, year 1 to
    9999 (the form the analysis reads, see :mod:`privplan.analysis.predicates.literals`).

    Outside it each engine reads text its own way: DuckDB truncates a seventh fractional
    digit, PostgreSQL rounds it (``'2020-01-01 00:00:00.0000009'`` is midnight in DuckDB and
    a microsecond later in PostgreSQL); Spark reads ``'2020-01-01 (BC)'`` as the year 2020
    AD, DuckDB as 2020 BC; ``'infinity'``, ``'24:00:00'`` or the year 10000 fail on Spark
    only, when the statement runs (after the charge)."""
    m = _TEMPORAL_TEXT.fullmatch(text)
    if m is None:
        return False
    try:
        dt.datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4] or 0), int(m[5] or 0),
                    int(m[6] or 0))
    except ValueError:
        return False
    return True


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _converted_together(node: exp.Expr) -> list[list[exp.Expr | None]]:
    """The groups of values a comparison, IN, BETWEEN, CASE, IF, COALESCE or NULLIF converts to
    one type each (text among them becomes a date or timestamp if one of them is one): a
    CASE's subject with its WHEN values, and its results."""
    if isinstance(node, exp.Case):
        ifs = node.args.get("ifs") or []
        groups = [[node.this, *(i.this for i in ifs)]] if node.this is not None else []
        return groups + [[*(i.args.get("true") for i in ifs), node.args.get("default")]]
    if isinstance(node, exp.If):
        return [[node.args.get("true"), node.args.get("false")]]
    if isinstance(node, exp.Between):
        return [[node.this, node.args.get("low"), node.args.get("high")]]
    if isinstance(node, (exp.In, exp.Coalesce)):
        return [[node.this, *node.expressions]]
    return [[node.this, node.expression]]


def _result(node: exp.Expr) -> list[exp.Expr]:
    """The values a CASE, IF, COALESCE or NULLIF returns one of."""
    return [v for v in _converted_together(node)[-1] if v is not None]


def _temporal_type(node: exp.Expr) -> bool:
    """Whether a CAST / TRY_CAST converts to a date or a timestamp."""
    to = node.args.get("to")
    name = to.sql(dialect="duckdb").upper() if isinstance(to, exp.DataType) else ""
    return name == "DATE" or name.startswith("TIMESTAMP")


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
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and (
                not node.this.is_string):
            return  # a negative constant, as a positive one
        if isinstance(node, _COMPARED):
            for group in _converted_together(node):
                values = [v for v in group if v is not None]
                if any(self._temporal(v) for v in values):
                    for v in values:
                        self._temporal_text(v)
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

    def _temporal(self, node: exp.Expr) -> bool:
        """Whether ``node`` is a date or timestamp (a column, a cast, or a CASE, IF, COALESCE
        or NULLIF returning one): text compared with it is read as one."""
        node = _unparen(node)
        if isinstance(node, exp.Column):
            return family(self.types.get(node.name.lower(), "?")) in ("date", "timestamp")
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return _temporal_type(node)
        if isinstance(node, (exp.Case, exp.If, exp.Coalesce, exp.Nullif)):
            return any(self._temporal(v) for v in _result(node))
        return False

    def _temporal_text(self, node: exp.Expr) -> None:
        """Refuse text the engine reads as a date or timestamp unless every engine reads it
        alike (:func:`_plain_temporal_text`)."""
        node = _unparen(node)
        if isinstance(node, exp.Literal) and node.is_string and not _plain_temporal_text(
                node.this):
            raise self.refuse(node, "a date or time written in a form the engines read "
                                    "differently; write it as YYYY-MM-DD or YYYY-MM-DD "
                                    "HH:MM:SS[.ffffff], year 1 to 9999")

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

    def _cast(self, node: exp.Expr, in_try: bool) -> None:
        inner = node.this
        target = node.args["to"].sql(dialect="duckdb").upper()
        if target in _NO_SUCH_TYPE:
            raise self.refuse(node, f"{self.engine} has no type {target}")
        if _temporal_type(node):
            self._temporal_text(inner)
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
                target in ("BIGINT", "DOUBLE") or target.startswith("DECIMAL(38")))
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
        for child in node.iter_expressions():  # (a bounded operand must be portable too)
            self.check(child, in_try)

    def _case_bound(self, node: exp.Case) -> float | None:
        """A CASE's value is one of its results: the largest of their bounds. The clamp the
        planner writes for a SUM of an expression, ``CASE WHEN v < lo THEN lo WHEN v > hi THEN
        hi ELSE v END``, is bounded by its limits whatever ``v`` is: a NaN compares above
        every number in DuckDB, PostgreSQL and Spark alike (so it becomes ``hi``), and a
        NULL stays NULL."""
        ifs = node.args.get("ifs") or []
        default = node.args.get("default")
        if (len(ifs) == 2 and default is not None and isinstance(ifs[0].this, exp.LT)
                and isinstance(ifs[1].this, exp.GT) and ifs[0].this.this == default
                and ifs[1].this.this == default
                and ifs[0].this.expression == ifs[0].args.get("true")
                and ifs[1].this.expression == ifs[1].args.get("true")):
            lo, hi = self._bound(ifs[0].args["true"]), self._bound(ifs[1].args["true"])
            if lo is not None and hi is not None and isinstance(
                    _unparen(ifs[0].args["true"]), (exp.Literal, exp.Neg)):
                return max(lo, hi)
        bounds = [self._bound(r) for r in [*(i.args.get("true") for i in ifs), default]
                  if r is not None]
        if not bounds or any(b is None for b in bounds):
            return None
        return max(b for b in bounds if b is not None)

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
        if isinstance(node, exp.Cast) and node.to.is_type("double") and isinstance(
                node.this, exp.Column) and family(
                    self.types.get(node.this.name.lower(), "?")) == "int":
            return self._bound(node.this)  # (an integer read as a double: no larger)
        if isinstance(node, exp.Case):
            return self._case_bound(node)
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
