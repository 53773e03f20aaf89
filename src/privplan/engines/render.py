"""Render a DuckDB-dialect engine statement for PostgreSQL or Spark, computing the same values.

privplan's analysis, its totality judge and the rewrite all speak DuckDB
(:mod:`privplan.engines.base`). A statement for another engine is the same sqlglot tree,
rendered for that dialect after the rewrites below, each of which removes one difference
between what DuckDB computes and what the other engine would compute for the same text:

* **Collation.** Strings compare by code point in the analysis (``COLLATE "binary"``).
  PostgreSQL's default collation is the database's (ICU / libc: ``'a' < 'B'``), so it becomes
  ``COLLATE "C"`` (byte order of UTF-8 = code point order); Spark 4 compares in
  ``UTF8_BINARY``, said explicitly so a column's own collation cannot apply. A Spark string
  need not be UTF-8 (a Parquet file can hold any bytes), and no DuckDB VARCHAR holds one that
  is not: such a string is read as NULL (``is_valid_utf8``) wherever a column is read in
  binary collation — the typed view's every ``str`` column, public join keys and columns —
  so WHERE, keys, measures and public domains see the same NULL, and nothing fails when the
  rows reach DuckDB. (PostgreSQL checks its text, in a UTF-8 database, the only kind whose
  ``str`` columns privplan reads.)
* **The grid.** DuckDB's cast of a double to BIGINT rounds half to even (so does
  PostgreSQL's; Spark's truncates: ``rint`` first) and its float products overflow to
  infinity, where PostgreSQL raises: the grid value is guarded by a bound (:func:`_grid`).
* **Floating-point literals.** ``1e0`` is a DOUBLE in DuckDB and a NUMERIC in PostgreSQL, which
  would compare a BIGINT column exactly instead of as a double (9007199254740993 = 1e0·2^53 in
  DuckDB, not in PostgreSQL): such literals are cast to DOUBLE PRECISION. A literal DuckDB
  reads as a DOUBLE that the other engine cannot read as one — out of range (``1e400`` is
  infinity in DuckDB; PostgreSQL and Spark refuse it), a nonzero one that rounds to 0
  (``1e-400``), or a decimal of more than 38 digits (a DOUBLE in DuckDB, which no DECIMAL
  holds: ``n = 4611686018427387904.00000000000000000000001`` holds for n = 2^62 in DuckDB;
  exact in PostgreSQL, refused by Spark) — is written as the text of DuckDB's double, cast:
  ``CAST('Infinity' AS DOUBLE)``, exact in both (:func:`_double_literal`).
* **TRY.** The totality checker wraps what could fail in ``TRY(...)`` (DuckDB: a failure is
  NULL). Only constructs whose failures each engine can reproduce are rendered (the session
  refuses the others before anything is charged, :mod:`privplan.engines.portable`): date parts
  (PostgreSQL: NULL for an infinite date, as DuckDB's failure under TRY) and, on Spark, ``+``,
  ``-``, ``*`` as ``try_add`` / ``try_subtract`` / ``try_multiply``. PostgreSQL numbers the
  years before 1 AD -1, -2, ... (no year 0), DuckDB (and Spark) 0, -1, ...: ``YEAR`` of such
  a date is shifted by one there.
* **TRY_CAST** on PostgreSQL (which has none) is a plain CAST: the session only lets through
  casts that cannot fail (to text, and numeric widening; :mod:`privplan.engines.portable`) and
  integers to ``DECIMAL(p, s)``, which fails for |x| >= 10^(p-s): where that can happen to a
  BIGINT the cast is guarded, NULL outside (as DuckDB's TRY_CAST), never a failure that
  depends on a row (:func:`_try_cast`); and the typed view's reading of an unconstrained
  ``numeric`` column as a double, guarded where PostgreSQL's conversion would fail
  (:func:`_numeric_to_double`).

* **Days since 1970** (a date in the row order's key, :mod:`privplan.rewrite.row_order`):
  DuckDB's ``date_diff('day', DATE '1970-01-01', d)`` is NULL for an infinite date; it becomes
  ``CASE WHEN isfinite(d) THEN d - DATE '1970-01-01' END`` on PostgreSQL (whose unguarded
  subtraction raises) and ``unix_date(d)`` on Spark (:func:`_epoch_days`).

* **Histograms** (a quantile's per-group cell counts, DuckDB's ``histogram``) become a
  two-level aggregate joined to the rest of the statement
  (:func:`privplan.engines.histograms.split_histograms`).

Anything else the rewrite emits (window functions, FILTER, IS NOT DISTINCT FROM, unnest of a
list, VALUES) means the same in all three and is left to sqlglot's generator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import sqlglot
from sqlglot import exp

from privplan.engines.histograms import split_histograms
from privplan.errors import UnsupportedQueryError

ENGINE_NAMES = {"postgres": "PostgreSQL", "spark": "Spark", "duckdb": "DuckDB"}
_DATE_PARTS = (exp.Year, exp.Month, exp.Day)
_DECIMAL_DIGITS = 38  # DuckDB types a decimal literal with more digits as DOUBLE
_SPARK_TRY: dict[type[exp.Expr], str] = {exp.Add: "try_add", exp.Sub: "try_subtract", exp.Mul: "try_multiply"}


@functools.lru_cache(maxsize=2048)
def render(sql: str, dialect: str) -> str:
    """``sql`` (DuckDB dialect, built by privplan) as ``dialect`` must run it to compute what
    DuckDB computes. Raises UnsupportedQueryError for a construct it cannot render exactly."""
    if dialect == "duckdb":
        return sql
    tree = split_histograms(sqlglot.parse_one(sql, read="duckdb"), dialect)
    for n, sub in enumerate(tree.find_all(exp.Subquery)):
        if not sub.alias and isinstance(sub.parent, (exp.From, exp.Join)):
            # PostgreSQL (before 16) requires every derived table to have a name
            sub.set("alias", exp.TableAlias(this=exp.to_identifier(f"__s{n}")))
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
    if isinstance(node, exp.Cast) and node.to.is_type("bigint") and isinstance(node.this, exp.Case):
        grid = _grid(node.this, dialect)
        if grid is not None:
            return exp.Cast(this=grid, to=node.args["to"])
    if isinstance(node, exp.Try):
        return _try(node.this, dialect)
    if isinstance(node, exp.TryCast) and dialect == "postgres":
        return _try_cast(node)
    if isinstance(node, exp.Literal) and not node.is_string:
        return _double_literal(node, dialect)
    if isinstance(node, exp.DateDiff):
        return _epoch_days(node, dialect)
    return node


def _epoch_days(node: exp.DateDiff, dialect: str) -> exp.Expr:
    """DuckDB's ``date_diff('day', DATE '1970-01-01', d)`` (a date in the row order's key,
    :mod:`privplan.rewrite.row_order`): the days since 1970, NULL for an infinite date. On
    PostgreSQL the guarded subtraction (unguarded, it raises for an infinite date: a failure
    that depends on a row, after the charge); on Spark ``unix_date`` (no infinite dates).
    Any other date_diff is left to sqlglot."""
    epoch = node.expression
    unit = node.args.get("unit")
    if not (isinstance(epoch, exp.Cast) and epoch.to.is_type("date")
            and isinstance(epoch.this, exp.Literal) and epoch.this.this == "1970-01-01"
            and unit is not None and unit.name.upper() == "DAY"):
        return node
    date = node.this
    if dialect == "spark":
        return exp.Anonymous(this="unix_date", expressions=[date])
    days = exp.Sub(this=date, expression=epoch)
    return exp.Case(ifs=[exp.If(this=exp.func("isfinite", date.copy()), true=days)])


def _double_literal(node: exp.Literal, dialect: str) -> exp.Expr:
    """A numeric literal as the other engine must read it to get DuckDB's value (see the
    module doc): a DOUBLE in DuckDB (an exponent, or a decimal of more than 38 digits) is a
    double there too; one the engine cannot read as that double (out of range: ``1e400`` is
    DuckDB's infinity; a nonzero one that rounds to 0; more than 38 digits, which Spark
    refuses) is written as the text of DuckDB's double, cast."""
    text = node.this.lower()
    digits = sum(ch.isdigit() for ch in text)
    if "e" not in text and not ("." in text and digits > _DECIMAL_DIGITS):
        return node  # (an integer or a DECIMAL in all three engines)
    value = float(text)
    special = (value in (float("inf"), float("-inf")) or digits > _DECIMAL_DIGITS
               and "e" not in text
               or value == 0.0 and any(ch in "123456789" for ch in text.partition("e")[0]))
    if special:
        spelled = {float("inf"): "Infinity", float("-inf"): "-Infinity"}.get(value, repr(value))
        return exp.cast(exp.Literal.string(spelled), "DOUBLE")
    return exp.cast(node.copy(), "DOUBLE") if dialect == "postgres" else node


def _try_cast(node: exp.TryCast) -> exp.Expr:
    """PostgreSQL's CAST for DuckDB's ``TRY_CAST(x AS to)``. The casts the session lets through
    cannot fail (:mod:`privplan.engines.portable`), except an integer to ``DECIMAL(p, s)``: it
    fails for |x| >= 10^(p-s) on PostgreSQL, where DuckDB's TRY_CAST gives NULL (a comparison
    of a BIGINT with a constant of scale 20 reads the column as ``DECIMAL(38, 20)``). When a
    BIGINT can reach that bound (p - s <= 18) the cast is guarded: NULL outside, as DuckDB.
    The typed view's reading of an unconstrained ``numeric`` column as a double is guarded
    too (:func:`_numeric_to_double`)."""
    inner = node.this
    if node.to.is_type("double") and isinstance(inner, exp.Cast) and inner.to.is_type(
            "varchar", "text") and isinstance(inner.this, exp.Column):
        return _numeric_to_double(inner.this)
    cast = exp.Cast(this=node.this, to=node.args["to"])
    to = node.args["to"]
    params = [p.this for p in to.expressions if isinstance(p, exp.DataTypeParam)]
    if not (to.is_type("decimal") and len(params) == 2 and all(
            isinstance(p, exp.Literal) and not p.is_string for p in params)):
        return cast
    digits = int(params[0].this) - int(params[1].this)
    if digits > 18:  # (10^19 > 2^63: every BIGINT fits, the cast cannot fail)
        return cast
    bound = exp.Literal.number(10 ** digits)
    inside = exp.and_(exp.GT(this=node.this.copy(), expression=exp.Neg(this=bound.copy())),
                      exp.LT(this=node.this.copy(), expression=bound))
    return exp.Case(ifs=[exp.If(this=inside, true=cast)])


_OVERFLOW = 2 ** 1024 - 2 ** 970
"""The least number whose nearest double is beyond DBL_MAX (halfway between DBL_MAX and 2^1024,
a tie that rounds to the even 2^1024): from here on the conversion overflows."""
_UNDERFLOW = "0." + "0" * (1075 - len(str(5 ** 1075))) + str(5 ** 1075)
"""2^-1075 exactly, half the least subnormal (a tie that rounds to the even 0): up to here a
nonzero number's nearest double is 0, and PostgreSQL's conversion fails."""


def _numeric_to_double(column: exp.Expr) -> exp.Expr:
    """``TRY_CAST(CAST(v AS VARCHAR) AS DOUBLE)`` of an unconstrained ``numeric`` column: the
    typed view's reading of it as a policy ``float`` (:func:`privplan.planning.typed_view.typed_view`),
    in DuckDB the correctly rounded double of the number's text. PostgreSQL converts a numeric
    to a double by the same rounding of the same text, but raises (SQLSTATE 22003) where the
    double overflows or a nonzero number rounds to 0, on the rows that hold such a value (one
    un-noised bit after the charge). So those are settled first, as DuckDB reads such text:
    ``|v| >= 2^1024 - 2^970`` is ±infinity, ``0 < |v| <= 2^-1075`` is ±0.0 (the sign kept),
    NaN is NaN, ±Infinity ±infinity; every other value is PostgreSQL's own conversion, which
    then cannot fail. (DuckDB's BIGNUM reads an out-of-range number as NULL instead; the text
    reading is the one DuckDB gives a number of any size and scale.)"""
    def num(text: str) -> exp.Expr:
        return exp.cast(exp.Literal.string(text), "NUMERIC")

    def double(text: str) -> exp.Expr:
        return exp.cast(exp.Literal.string(text), "DOUBLE")

    def when(condition: exp.Expr, value: exp.Expr) -> exp.If:
        return exp.If(this=condition, true=value)

    v = column
    big, tiny = num(str(_OVERFLOW)), num(_UNDERFLOW)
    return exp.Case(ifs=[
        when(exp.EQ(this=v.copy(), expression=num("NaN")), double("NaN")),
        when(exp.GTE(this=v.copy(), expression=big.copy()), double("Infinity")),
        when(exp.LTE(this=v.copy(), expression=exp.Neg(this=big)), double("-Infinity")),
        when(exp.and_(exp.GT(this=v.copy(), expression=exp.Literal.number(0)),
                      exp.LTE(this=v.copy(), expression=tiny.copy())), double("0")),
        when(exp.and_(exp.LT(this=v.copy(), expression=exp.Literal.number(0)),
                      exp.GTE(this=v.copy(), expression=exp.Neg(this=tiny))), double("-0")),
    ], default=exp.cast(v.copy(), "DOUBLE"))


def _number(node: exp.Expr) -> float | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        inner = _number(node.this)
        return None if inner is None else -inner
    return None


def _grid(case: exp.Case, dialect: str) -> exp.Expr | None:
    """The rewrite's grid value ``CAST(CASE WHEN s < lo THEN lo WHEN s > hi THEN hi ELSE s
    END AS BIGINT)``, ``s`` = ``x * d``, ``x / n`` or ``x * d / n``
    (:func:`privplan.rewrite.engine_sql.grid_expression`), made to compute DuckDB's integer:

    * a multiplication is guarded by a bound B on ``x`` (``|x| > B``: clamped before the
      product, which then cannot overflow — PostgreSQL raises on a float overflow, Spark and
      PostgreSQL on a BIGINT one, where DuckDB's float product is infinity, clamped); B · d
      stays below 10^18 and B · d / n beyond [lo, hi], so the clamped value is the same, and
      NaN compares above every number in all three engines (clamped to ``hi`` as in DuckDB);
    * a division (``n > 1``) is guarded by a threshold t = n / (4·d) (``|x| < t``: the value
      of 0, clamped): PostgreSQL raises (SQLSTATE 22003, "underflow") where a nonzero double
      divided by n rounds to 0 — a subnormal cost read by a quantile's or a square's grid, on
      the rows that hold one — and DuckDB rounds every ``|x · d / n| < 1/2`` to 0, so the
      clamped integer is the same (0, or ``lo`` / ``hi`` where 0 lies outside [lo, hi]);
    * on Spark, whose cast truncates, the value is rounded half to even first (``rint``: Java's
      ``Math.rint``, exact on a double, as DuckDB's and PostgreSQL's casts round; Spark's
      ``bround`` rounds the same but through a BigDecimal per row, which made a 10M-row
      grouped SUM twice as slow).
    Returns None for any other CASE."""
    ifs = case.args.get("ifs") or []
    scaled = case.args.get("default")
    if len(ifs) != 2 or scaled is None or not isinstance(ifs[0].this, exp.LT) or not (
            isinstance(ifs[1].this, exp.GT)) or ifs[0].this.this != scaled:
        return None
    lo, hi = _number(ifs[0].args["true"]), _number(ifs[1].args["true"])
    if lo is None or hi is None:
        return None
    x, d, n = scaled, 1.0, 1.0
    if isinstance(x, exp.Div) and _number(x.expression) is not None:
        n, x = float(_number(x.expression) or 1), x.this
    if isinstance(x, exp.Mul) and _number(x.expression) is not None:
        d, x = float(_number(x.expression) or 1), x.this
    out = case.copy()
    if d > 1:
        bound = 10 ** (18 - len(str(int(d))))
        if bound * d / n > max(abs(lo), abs(hi)):
            guard = [exp.If(this=exp.LT(this=x.copy(), expression=exp.Literal.number(-bound)),
                            true=ifs[0].args["true"].copy()),
                     exp.If(this=exp.GT(this=x.copy(), expression=exp.Literal.number(bound)),
                            true=ifs[1].args["true"].copy())]
            out.set("ifs", guard + [i.copy() for i in ifs])
    if n > 1:
        t = exp.cast(exp.Literal.string(repr(n / (4 * d))), "DOUBLE")
        zero = int(lo) if lo > 0 else int(hi) if hi < 0 else 0
        tiny = exp.and_(exp.GT(this=x.copy(), expression=exp.Neg(this=t.copy())),
                        exp.LT(this=x.copy(), expression=t))
        out.set("ifs", [exp.If(this=tiny, true=exp.Literal.number(zero))]
                + [i.copy() for i in out.args.get("ifs") or []])
    if dialect == "spark":
        return exp.Anonymous(this="rint", expressions=[out])
    return out


def _collate(node: exp.Collate, dialect: str) -> exp.Expr:
    name = node.expression
    if not (isinstance(name, (exp.Identifier, exp.Var)) and str(name.this).lower() == "binary"):
        raise UnsupportedQueryError(
            f"collation {name.sql()} cannot be rendered for {ENGINE_NAMES[dialect]}")
    if dialect == "postgres":
        return exp.Collate(this=node.this, expression=exp.Identifier(this="C", quoted=True))
    value = node.this
    if isinstance(value, exp.Column):  # (a string read from a table: see the module doc)
        value = exp.Case(ifs=[exp.If(this=exp.func("is_valid_utf8", value.copy()), true=value)])
    return exp.Collate(this=value, expression=exp.Var(this="UTF8_BINARY"))


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
                value: exp.Expr = exp.cast(part, "BIGINT")
                if isinstance(node, exp.Year):  # (PostgreSQL's 1 BC is year -1, DuckDB's 0)
                    value = exp.Add(this=value, expression=exp.Case(
                        ifs=[exp.If(this=exp.LT(this=part.copy(), expression=exp.Literal.number(
                            0)), true=exp.Literal.number(1))], default=exp.Literal.number(0)))
                return exp.Case(ifs=[exp.If(this=exp.func("isfinite", arg.copy()),
                                            true=value)])
            return node
        if isinstance(node, (exp.Floor, exp.Ceil)) or isinstance(node, exp.Div) and (
                isinstance(node.expression, exp.Literal)):
            return node  # (of a bounded value / by a nonzero constant: portable.py checked)
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
