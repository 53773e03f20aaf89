"""The three-valued analyser: a WHERE predicate's TRUE- and FALSE-regions, atom by atom.

It walks ``AND`` / ``OR`` / ``NOT`` (``NOT`` swaps the two sets, never complements one) and
turns each atom -- a comparison of a declared column with a constant, ``BETWEEN``, ``IN``,
``IS [NOT] DISTINCT FROM``, ``IS NULL`` / ``IS TRUE`` -- into exact sets; everything else gets
the conservative (full, full) with a note. These regions are what disjointness (and so the
parallel composition of the privacy accounting) is proved from.

Privacy: atoms become exact sets, NOT swaps TRUE and FALSE, and anything else gets (full, full).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

from sqlglot import exp

from privplan.analysis.literal_lists import LiteralList, literal_list
from privplan.analysis.predicates.canonical import _canon_set
from privplan.analysis.predicates.literals import (
    _NULL,
    _Const,
    _const,
    _NotAnalysed,
    _widen_group,
)
from privplan.analysis.predicates.point_lists import exact_list_sets, exact_point_sets
from privplan.analysis.predicates.positions import _COMPARISONS, _FLIP, _bounds, _Op, _op_sets
from privplan.analysis.predicates.region_algebra import _RegionAlgebra
from privplan.analysis.predicates.truth import (
    _FALSE,
    _NEITHER,
    _TRUE,
    TruthRegions,
    _describe,
    _unsupported,
)
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet, Interval

ColumnType = Literal["int", "float", "str", "bool", "date", "timestamp"]
COLUMN_TYPES: frozenset[str] = frozenset(get_args(ColumnType))


@dataclass(frozen=True, slots=True)
class _ColumnRef:
    name: str
    ctype: str


class _Analyser(_RegionAlgebra):
    """Walks a predicate and builds its truth regions; holds the column types."""

    # -- dispatch --------------------------------------------------------------------------
    def visit(self, e: exp.Expr, positive: bool) -> Region:
        """The TRUE-region of e (positive) or its FALSE-region, built only as far as needed.

        T(a AND b) = T(a) ∩ T(b), F(a AND b) = F(a) ∪ F(b); dually for OR; NOT flips.
        """
        while isinstance(e, (exp.Paren, exp.Where, exp.Not)):
            if isinstance(e, exp.Not):
                positive = not positive
            e = e.this
        if isinstance(e, (exp.And, exp.Or)):
            parts = [self.visit(part, positive) for part in e.flatten()]
            meet = isinstance(e, exp.And) == positive
            return self.fold(parts, self.intersect if meet else self.union)
        tr = self.atom(e)
        return tr.true if positive else tr.false

    @staticmethod
    def fold(parts: list[Region], combine: Callable[[Region, Region], Region]) -> Region:
        """Combine n regions pairwise in a balanced tree, so long chains stay near n log n."""
        while len(parts) > 1:
            paired = [combine(a, b) for a, b in zip(parts[::2], parts[1::2], strict=False)]
            parts = paired + ([parts[-1]] if len(parts) % 2 else [])
        return parts[0]

    def atom(self, e: exp.Expr) -> TruthRegions:
        """Truth regions of a predicate that is not AND / OR / NOT."""
        if isinstance(e, exp.Boolean):
            return _TRUE if e.this else _FALSE
        if isinstance(e, exp.Null):
            return _NEITHER
        if isinstance(e, exp.Column):
            return self.bare_column(e)
        op = _COMPARISONS.get(type(e))
        if op is not None:
            return self.compare(op, e.this, e.expression, e)
        if isinstance(e, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            tr = self.null_safe_eq(e.this, e.expression, e)
            return tr if isinstance(e, exp.NullSafeEQ) else tr.negate()
        if isinstance(e, exp.Between):
            return self.between(e)
        if isinstance(e, exp.In):
            return self.in_list(e)
        if isinstance(e, exp.Is):
            return self.is_(e)
        if isinstance(e, (exp.Like, exp.ILike, exp.SimilarTo, exp.RegexpLike, exp.Glob)):
            on = f" on {e.this.name}" if isinstance(e.this, exp.Column) else ""
            kind = e.key.upper()
            return _unsupported(f"{kind}{on}: pattern predicates are not analysed", e)
        return _unsupported(f"{_describe(e)} is not analysed", e)

    # -- operands --------------------------------------------------------------------------
    def operand(self, e: exp.Expr) -> _ColumnRef | _Const | str:
        """A declared column, a constant, or the reason the operand is not analysed."""
        while isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.Column):
            name = e.name.lower()
            ctype = self.columns.get(name)
            if ctype is None:
                return f"column {name} is not declared for this table"
            if ctype not in COLUMN_TYPES:
                return f"column {name} has unsupported type {ctype!r}"
            return _ColumnRef(name, ctype)
        try:
            return _const(e)
        except _NotAnalysed as err:
            return str(err)

    def compare(
        self, op: _Op, left: exp.Expr, right: exp.Expr, e: exp.Expr
    ) -> TruthRegions:
        """``left op right``: exact for a column against a constant; NULL operand -> neither."""
        a, b = self.operand(left), self.operand(right)
        if a == _NULL or b == _NULL:
            return _NEITHER  # a comparison with NULL is UNKNOWN whatever the other side is
        if isinstance(b, _ColumnRef) and isinstance(a, _Const):
            a, b, op = b, a, _FLIP[op]
        if isinstance(a, _ColumnRef) and isinstance(b, _Const):
            return self.compare_const(op, a, b, e)
        if isinstance(a, _ColumnRef) and isinstance(b, _ColumnRef):
            reason = "comparison between two columns is not analysed"
        elif isinstance(a, _Const) and isinstance(b, _Const):
            reason = "comparison between two constants is not analysed"
        else:
            reason = a if isinstance(a, str) else str(b)
        return _unsupported(reason, e)

    def compare_const(self, op: _Op, col: _ColumnRef, c: _Const, e: exp.Expr) -> TruthRegions:
        """``column op constant``: exact sets (or sound hulls, see :func:`_bounds`)."""
        if c == _NULL:
            return _NEITHER
        try:
            t, f = self.comparison_sets(op, col, c)
        except _NotAnalysed as err:
            return _unsupported(str(err), e)
        return TruthRegions(self.column_region(col, t), self.column_region(col, f))

    def comparison_sets(self, op: _Op, col: _ColumnRef, c: _Const) -> tuple[ColumnSet, ColumnSet]:
        lo, hi = _bounds(c, col.ctype, col.name)
        return _op_sets(op, lo, hi)

    def column_region(self, col: _ColumnRef, s: ColumnSet) -> Region:
        return Region.column(col.name, _canon_set(s, col.ctype))

    def null_safe_eq(
        self, left: exp.Expr, right: exp.Expr, e: exp.Expr
    ) -> TruthRegions:
        """``IS NOT DISTINCT FROM``: ``=`` where NULL equals NULL; never UNKNOWN."""
        a, b = self.operand(left), self.operand(right)
        if isinstance(b, _ColumnRef) and isinstance(a, _Const):
            a, b = b, a
        if a == _NULL and b == _NULL:
            return _TRUE
        if isinstance(a, _ColumnRef) and b == _NULL:
            return self.null_test(a)
        if isinstance(a, _ColumnRef) and isinstance(b, _Const):
            try:
                t, f = self.comparison_sets("eq", a, b)
            except _NotAnalysed as err:
                return _unsupported(str(err), e)
            with_null = f.union(ColumnSet.only_null())
            return TruthRegions(self.column_region(a, t), self.column_region(a, with_null))
        return _unsupported("IS [NOT] DISTINCT FROM on a non-column is not analysed", e)

    def null_test(self, col: _ColumnRef) -> TruthRegions:
        return TruthRegions(
            Region.column(col.name, ColumnSet.only_null()),
            Region.column(col.name, _canon_set(ColumnSet.not_null(), col.ctype)),
        )

    # -- forms -----------------------------------------------------------------------------
    def bare_column(self, e: exp.Column) -> TruthRegions:
        ref = self.operand(e)
        if isinstance(ref, _ColumnRef) and ref.ctype == "bool":
            return TruthRegions(
                Region.column(ref.name, ColumnSet.points([True])),
                Region.column(ref.name, ColumnSet.points([False])),
            )
        if isinstance(ref, str):
            reason = ref
        elif isinstance(ref, _ColumnRef):
            reason = f"{ref.ctype} column {ref.name} used as a condition is not analysed"
        else:
            reason = "a constant used as a condition is not analysed"
        return _unsupported(reason, e)

    def between(self, e: exp.Between) -> TruthRegions:
        """``x BETWEEN a AND b`` is ``x >= a AND x <= b`` (also under three-valued logic).

        Only ``column BETWEEN constant AND constant``: DuckDB types the three operands together.
        """
        if e.args.get("symmetric"):
            return _unsupported("BETWEEN SYMMETRIC is not analysed", e)
        col = self.operand(e.this)
        bounds = [self.operand(e.args["low"]), self.operand(e.args["high"])]
        consts = [b for b in bounds if isinstance(b, _Const)]
        if not isinstance(col, _ColumnRef) or len(consts) < len(bounds):
            reasons = [x for x in (col, *bounds) if isinstance(x, str)]
            why = reasons[0] if reasons else "BETWEEN other than column BETWEEN constants"
            return _unsupported(f"{why} is not analysed" if not reasons else why, e)
        low, high = _widen_group(consts, col.ctype)
        return self.conj(
            self.compare_const("ge", col, low, e), self.compare_const("le", col, high, e)
        )

    def in_list(self, e: exp.In) -> TruthRegions:
        """``x IN (a, b, ...)`` is ``x = a OR x = b OR ...``: a NULL item makes it never FALSE."""
        values = literal_list(e)
        if values is not None:
            return self.in_literal_list(e, values)
        items = e.expressions
        if not items or any(e.args.get(k) for k in ("query", "unnest", "field")):
            return _unsupported("IN with a subquery or a non-list is not analysed", e)
        col = self.operand(e.this)
        operands = [self.operand(item) for item in items]
        consts = [c for c in operands if isinstance(c, _Const)]
        if not isinstance(col, _ColumnRef) or len(consts) < len(operands):
            reasons = [x for x in (col, *operands) if isinstance(x, str)]
            why = reasons[0] if reasons else "IN other than column IN (constants) is not analysed"
            return _unsupported(why, e)  # DuckDB types the whole list together
        try:
            return self.in_constants(col, _widen_group(consts, col.ctype))
        except _NotAnalysed as err:
            return _unsupported(str(err), e)

    def in_literal_list(self, e: exp.In, values: LiteralList) -> TruthRegions:
        """A list read as a whole: the same sets as its literal items would give (plain
        integers or plain strings, one kind: nothing to widen, no NULL)."""
        col = self.operand(e.this)
        if not isinstance(col, _ColumnRef):
            why = col if isinstance(col, str) else "IN other than column IN (constants) is not analysed"
            return _unsupported(why, e)
        points = exact_list_sets(col.ctype, values.kind, values.values)
        if points is not None:  # (the sets in_constants gives, without a _Const per item)
            return TruthRegions(Region.column(col.name, points[0]),
                                Region.column(col.name, points[1]))
        try:
            return self.in_constants(col, [_Const(values.kind, v) for v in values.values])
        except _NotAnalysed as err:
            return _unsupported(str(err), e)

    def in_constants(self, col: _ColumnRef, consts: list[_Const]) -> TruthRegions:
        """``column IN (constants)`` in one step, so long lists stay fast.

        Same sets as the OR of ``=``: T is the union of the items' TRUE-sets; F is the
        intersection of their FALSE-sets, i.e. every non-NULL value except the exactly known
        items (a widened item's FALSE-set is all non-NULL values), and empty with a NULL item.
        Items that are all exact points of the column take a direct way to the same sets.
        """
        points = None if _NULL in consts else exact_point_sets(col.ctype, consts)
        if points is not None:
            return TruthRegions(Region.column(col.name, points[0]),
                                Region.column(col.name, points[1]))
        return self.in_constants_general(col, consts)

    def in_constants_general(self, col: _ColumnRef, consts: list[_Const]) -> TruthRegions:
        """:meth:`in_constants` for any constants (interval by interval)."""
        hulls = [_bounds(c, col.ctype, col.name) for c in consts if c != _NULL]
        true = ColumnSet.of(Interval(lo, hi) for lo, hi in hulls)
        if _NULL in consts:
            false = ColumnSet.empty()
        else:
            exact = ColumnSet.of(Interval(lo, hi) for lo, hi in hulls if lo == hi)
            false = ColumnSet(exact.intervals, True).complement()
        return TruthRegions(self.column_region(col, true), self.column_region(col, false))

    def is_(self, e: exp.Is) -> TruthRegions:
        """``IS NULL`` and ``IS TRUE / FALSE``: never UNKNOWN."""
        target = e.expression
        subject = self.operand(e.this)
        if isinstance(target, exp.Null):
            if isinstance(subject, _ColumnRef):
                return self.null_test(subject)
            if isinstance(subject, _Const):
                return _TRUE if subject.kind == "null" else _FALSE
        elif isinstance(target, exp.Boolean):
            want = bool(target.this)
            if isinstance(subject, _ColumnRef) and subject.ctype == "bool":
                return TruthRegions(
                    Region.column(subject.name, ColumnSet.points([want])),
                    Region.column(subject.name, ColumnSet.points([not want], null=True)),
                )
            if isinstance(subject, _Const) and subject.kind in ("null", "bool"):
                return _TRUE if subject.value is want else _FALSE
        return _unsupported("this IS test is not analysed", e)

