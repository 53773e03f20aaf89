"""The measures behind each aggregate: their kinds, grids, regions and sensitivities.

A mixin of the plan builder (:mod:`privplan.sql.builder`). Every released aggregate becomes
one or more :class:`~privplan.sql.plan.Measure` (COUNT, SUM on the column's integer grid, the
sum of squares behind VAR/STDDEV, their DISTINCT forms), each with its region (WHERE ∩ FILTER ∩
value-not-NULL ∩ key domain) and the sensitivity of ONE row (a unit's r rows in a group are
charged r times by the accountant, :mod:`privplan.accounting.model`); sums are centred for AVG
and VAR, so a row moves them by about half the range (:func:`grid.sum_sensitivity`).

Privacy: a measure's region holds every row that can change it; its sensitivity, one row's effect.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from sqlglot import exp

from privplan.analysis.predicates import region_of
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet
from privplan.errors import InternalError, UnsupportedQueryError
from privplan.mechanisms import grid as gridlib
from privplan.policy import ColumnPolicy, ColumnType, TablePolicy
from privplan.sql.aggregates import Aggregate
from privplan.sql.expression_bounds import Bounded
from privplan.sql.plan import AggregateUse, Measure, MeasureKind
from privplan.sql.validate import refuse

__all__ = ["SQUARE_STEPS", "MeasureBuilder"]

_NUMERIC = ("int", "float")
SQUARE_STEPS = 2**11  # (2^11)^2 * 2^40 rows = 2^62: the grid.check_no_overflow limit


class MeasureBuilder:
    """Measures of one SELECT's aggregates (a mixin of the plan builder)."""

    sql: str
    table: TablePolicy
    prefix: str
    k: int
    types: dict[str, ColumnType]
    key_region: Region
    clamps: dict[str, tuple[Any, Any]]
    measures: dict[tuple[Any, ...], Measure]
    _virtual: dict[str, tuple[ColumnPolicy, Bounded]]

    def _col(self, name: str) -> ColumnPolicy:  # (the builder's)
        raise NotImplementedError

    def _label_name(self, column: str) -> str:  # (the builder's)
        raise NotImplementedError

    def _measure(self, kind: MeasureKind, column: str | None, cond: exp.Expression | None,
                 label: str, *, centre: Fraction = Fraction(0),
                 coarse: bool = False) -> Measure:
        cond_sql = cond.sql(dialect="duckdb") if cond is not None else None
        if column is not None and column in self._virtual:
            label = label.replace(f"({column}", f"({self._label_name(column)}")
        if kind == "count" and column is not None and not self._col(column).nullable:
            # declared NOT NULL (and checked when the session first reads the table):
            # COUNT(col) is COUNT(*), one measure for both
            column, label = None, "COUNT(*)"
        mkey = (kind, column, cond_sql, centre, coarse)
        if mkey in self.measures:
            return self.measures[mkey]
        region = self.key_region
        if cond is not None:
            region = region.intersect(region_of(cond, self.types))
        virtual = self._virtual.get(column) if column is not None else None
        sources = virtual[1].columns if virtual is not None else (column,) if column else ()
        for source in sources:
            if self.table.columns[source].nullable:
                region = region.intersect(Region.column(source, ColumnSet.not_null()))
        expression = virtual[1].sql if virtual is not None else None
        mid = f"{self.prefix}_m{len(self.measures)}"
        # counts and sums are calibrated to one row: the accountant charges a unit for each of
        # its rows in a group's input (cost growth, accounting.model), so a unit of k rows
        # spread over k groups pays k one-row costs, not k groups x k rows
        per_row = self.k > 1
        if kind == "count_units":  # one unit is one distinct value: sensitivity 1 per group
            m = Measure(id=mid, kind="count_units", column=column, condition=cond,
                        region=region, sensitivity=1, label=label)
        elif kind == "count_distinct":
            # a row adds at most one distinct value, whatever the engine's equality (collation,
            # -0.0, NaN): sensitivity 1 per row, so a unit's r rows in a group move it by <= r
            m = Measure(id=mid, kind="count_distinct", column=column, condition=cond,
                        region=region, sensitivity=1, label=label, per_row=per_row)
        elif kind == "count":
            m = Measure(id=mid, kind="count", column=column, condition=cond, region=region,
                        sensitivity=gridlib.count_sensitivity(1), label=label, per_row=per_row,
                        expression=expression)
        else:
            assert column is not None
            col = self._col(column)
            lower, upper = col.require_bounds(label, self.table.name)
            res, lo, hi = gridlib.sum_grid(col)  # the one grid of SUMs (and the bounded copy's)
            squares = kind in ("sum_sq", "sum_sq_distinct")
            if squares or coarse:
                res = self._square_resolution(res, lower, upper)
                lo, hi = gridlib.Grid(res).to_grid_bounds(lower, upper)
            # centred (AVG, VAR): a row adds g - c with c about the middle of [lo, hi], so
            # removing it moves the sum by about half the range instead of max(|lo|, |hi|)
            steps = centre / res
            if steps.denominator != 1:  # pragma: no cover - _centre picks a common grid point
                raise InternalError(f"centre {centre} is not on the grid of {label}")
            centre_int = int(steps)
            clo, chi = lo - centre_int, hi - centre_int
            replace_nb = self.table.neighbourhood == "replace"
            try:
                if squares:
                    sq_lo, sq_hi = gridlib.square_bounds(clo, chi)
                    gridlib.check_no_overflow(sq_lo, sq_hi, self.k)
                    gridlib.check_real_range(sq_lo, sq_hi, res * res)
                    sens = gridlib.sum_sensitivity(sq_lo, sq_hi, 1, replace=replace_nb)
                else:
                    gridlib.check_no_overflow(clo, chi, self.k)
                    gridlib.check_real_range(clo, chi, res)
                    sens = gridlib.sum_sensitivity(clo, chi, 1, replace=replace_nb)
            except UnsupportedQueryError as err:
                raise UnsupportedQueryError(
                    f"{label} refused: {self._value_source(column)} (bounds [{_short(lower)}, "
                    f"{_short(upper)}], resolution {_short(res)}, up to {self.k} rows per unit):"
                    f" {err} (policy keys `tables.{self.table.name}.columns.<column>.lower`/"
                    "`upper`/`resolution`, `max_rows_per_unit`)") from None
            if kind == "count_distinct_grid":  # one row adds at most one distinct value
                sens = gridlib.count_sensitivity(1)
            m = Measure(id=mid, kind=kind, column=column, condition=cond, region=region,
                        sensitivity=int(sens), lo=lo, hi=hi, resolution=res, label=label,
                        per_row=per_row, centre=centre_int, expression=expression)
        self.measures[mkey] = m
        return m

    def _value_source(self, column: str) -> str:
        """How an error names the values being summed: the column, or the expression the
        query wrote (never the internal name of its virtual column)."""
        virtual = self._virtual.get(column)
        if virtual is not None:
            return f"the expression over '{self.table.name}' columns {list(virtual[1].columns)}"
        return f"column '{self.table.name}.{column}'"

    def _derive(self, key: str, row: Aggregate, column: str | None,
                cond: exp.Expression | None, multiplier: Any,
                agg: exp.Expression) -> AggregateUse:
        """The measures of ``row``'s call over ``column`` (None: ``*`` or a constant): a
        count (of rows, or of a constant's rows: SUM(3) is 3 × COUNT), else a sum on the
        column's grid and the count and sum of squares the row needs, centred for AVG/VAR."""
        if row.counts_rows or multiplier is not None:
            m = self._measure("count", column, cond, f"COUNT({column or '*'})")
            return AggregateUse(sql=key, func=row.name, column=column, count=m.id,
                                multiplier=1 if row.counts_rows else multiplier)
        assert column is not None and row.needs("sum")
        col = self._col(column)
        self._numeric(col, column, row, agg)
        lower, upper = col.require_bounds(f"{row.label}({column})", self.table.name)
        cond_sql = cond.sql(dialect="duckdb") if cond is not None else None
        # AVG/VAR/STDDEV sum (value - centre) unless the query sums the column anyway
        centre = Fraction(0)
        if row.centred and ("sum", column, cond_sql, Fraction(0), False) not in self.measures:
            centre = self._centre(column)
        # VAR/STDDEV: the sum on the squares' grid too, so that Σ(g-c)²/n - (Σ(g-c)/n)² is
        # exactly the variance of the grid values (with sums on two grids the centre would
        # multiply their rounding difference)
        fine, _, _ = gridlib.sum_grid(col)
        coarse = (row.needs("sum_sq") and bool(centre)
                  and self._square_resolution(fine, lower, upper) != fine)
        s = self._measure("sum", column, cond, f"SUM({column})", centre=centre, coarse=coarse)
        c = self._measure("count", column, cond, f"COUNT({column})") \
            if row.needs("count") else None
        q = self._measure("sum_sq", column, cond, f"SUM({column}²)", centre=centre) \
            if row.needs("sum_sq") else None
        return AggregateUse(sql=key, func=row.name, column=column, sum=s.id,
                            count=c.id if c else None, sum_sq=q.id if q else None,
                            lower=lower, upper=upper, centre=centre if row.centred else 0)

    def _derive_distinct(self, key: str, row: Aggregate, column: str,
                         cond: exp.Expression | None, agg: exp.Expression) -> AggregateUse:
        """SUM/AVG/VAR/STDDEV over the DISTINCT values of a bounded column, from measures over
        the distinct values of its clamped grid value g: SUM(DISTINCT g), COUNT(DISTINCT g)
        and the sum of the distinct g² (one set of distinct values, so all on one grid: the
        squares' grid when a VAR/STDDEV needs it). Why these are as sensitive as their
        plain versions per row: adding or removing a row adds or removes at most one distinct
        value g (|g| <= max(|lo|, |hi|)); replacing it removes at most one and adds at most
        one, a change within the replace bound of :func:`grid.sum_sensitivity`; so a unit's
        r rows move each by at most r times one row's bound (``per_row``, like SUM). The
        values are the grid's: with noise off this is the plain SQL answer when the values lie
        on the grid and within the bounds (clamping can merge values the SQL keeps apart)."""
        col = self._col(column)
        self._numeric(col, column, row, agg)
        if column in self.clamps:
            refuse(self.sql, agg, f"{row.label}(DISTINCT {column}) with per-query bounds "
                   "refused", "distinct values are taken of the policy's grid.",
                   "Remove the per-query bounds for this aggregate.")
        lower, upper = col.require_bounds(f"{row.label}(DISTINCT {column})", self.table.name)
        fine, _, _ = gridlib.sum_grid(col)  # (VAR's squares need the coarser grid only when
        coarse = (row.needs("sum_sq")  # it differs: then SUM and AVG share measures)
                  and self._square_resolution(fine, lower, upper) != fine)
        assert row.needs("sum")
        s = self._measure("sum_distinct", column, cond, f"SUM(DISTINCT {column})",
                          coarse=coarse)
        c = self._measure("count_distinct_grid", column, cond, f"COUNT(DISTINCT {column})",
                          coarse=coarse) if row.needs("count") else None
        q = self._measure("sum_sq_distinct", column, cond, f"SUM(DISTINCT {column}²)",
                          coarse=True) if row.needs("sum_sq") else None
        return AggregateUse(sql=key, func=row.name, column=column, sum=s.id,
                            count=c.id if c else None, sum_sq=q.id if q else None,
                            lower=lower, upper=upper)

    def _numeric(self, col: ColumnPolicy, column: str, row: Aggregate,
                 agg: exp.Expression) -> None:
        if col.type not in _NUMERIC:
            refuse(self.sql, agg, f"{row.label} over {col.type} column '{column}' refused",
                   "only int and float columns can be summed or averaged.",
                   "Aggregate a numeric column.")

    def _centre(self, column: str) -> Fraction:
        """The centre of AVG/VAR sums of ``column``: the middle point of the grid of its sum
        of squares, which is also a point of its SUM grid (that grid's step divides it), so
        the centred sum and the centred sum of squares share one centre (VAR needs both)."""
        col = self._col(column)
        lower, upper = col.require_bounds(f"AVG({column})", self.table.name)
        res, _, _ = gridlib.sum_grid(col)
        res_sq = self._square_resolution(res, lower, upper)
        lo, hi = gridlib.Grid(res_sq).to_grid_bounds(lower, upper)
        return Fraction((lo + hi) // 2) * res_sq

    @staticmethod
    def _square_resolution(res: Fraction, lower: Any, upper: Any) -> Fraction:
        """Squares need a coarser grid to stay exact in int64: |value| <= 2^11 steps."""
        while max(abs(Fraction(lower)), abs(Fraction(upper))) / res > SQUARE_STEPS:
            res *= 10
        return res


def _short(value: Any) -> str:
    """A bound or resolution for an error message: exact when short, else 3 significant
    digits (a bound of 2e303 written out has 304 digits)."""
    text = str(value)
    return text if len(text) <= 16 else f"{float(Fraction(value)):.3g}"
