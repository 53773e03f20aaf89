"""The region algebra of the predicate analyser: unions, intersections, simplification and the
size cap.

``AND`` and ``OR`` combine truth regions by intersecting and uniting boxes. Merging boxes that
agree outside one column and dropping boxes inside others are exact; above :data:`MAX_BOXES`
boxes (or a too large intersection) a region is replaced by its per-column hull, which only
grows it and is noted -- so every step keeps the over-approximation the privacy argument needs.

Privacy: merging and dropping boxes are exact, and the size cap's hull only grows a region.
"""

from __future__ import annotations

from collections.abc import Mapping

from privplan.analysis.predicates.canonical import _canon_set
from privplan.analysis.predicates.truth import TruthRegions
from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet, Interval

MAX_BOXES = 256
"""Above this many boxes a region is replaced by its per-column hull (sound, with a note)."""

_MAX_PRODUCT = 4096  # largest box product an intersection may enumerate before hulling


class _RegionAlgebra:
    """Combines and simplifies regions over one table; holds the column types."""

    def __init__(self, columns: Mapping[str, str]) -> None:
        self.columns = dict(columns)

    def conj(self, a: TruthRegions, b: TruthRegions) -> TruthRegions:
        return TruthRegions(self.intersect(a.true, b.true), self.union(a.false, b.false))

    def disj(self, a: TruthRegions, b: TruthRegions) -> TruthRegions:
        return TruthRegions(self.union(a.true, b.true), self.intersect(a.false, b.false))

    def union(self, a: Region, b: Region) -> Region:
        return self.finish_boxes(a.boxes + b.boxes, a.notes + b.notes)

    def intersect(self, a: Region, b: Region) -> Region:
        while len(a.boxes) * len(b.boxes) > _MAX_PRODUCT:  # sound: hulls only grow a region
            if len(a.boxes) >= len(b.boxes):
                a = self.hull(list(a.boxes), a.notes)
            else:
                b = self.hull(list(b.boxes), b.notes)
        boxes = tuple(_intersect_boxes(x, y) for x in a.boxes for y in b.boxes)
        return self.finish_boxes(boxes, a.notes + b.notes)

    def finish(self, region: Region) -> Region:
        boxes = tuple(self.canon_box(b) for b in region.boxes)
        return self.finish_boxes(boxes, region.notes)

    def finish_boxes(self, boxes: tuple[Box, ...], notes: tuple[str, ...]) -> Region:
        """Boxes merged/absorbed, and the size cap (hull above it).

        The boxes' sets must be canonical. Leaves are built canonical, and unions and
        intersections of canonical sets stay canonical (two result intervals of an intersection
        cannot be adjacent: their meeting units would lie in one interval of each operand).
        """
        kept = list(dict.fromkeys(b for b in boxes if not b.is_empty()))
        if any(not b.constraints for b in kept):
            return Region.full(*notes)
        kept = self.simplify(kept)
        if len(kept) > MAX_BOXES:
            return self.hull(kept, notes)
        # kept is already what Region.of would make (non-empty, distinct, no free box); building
        # directly skips its quadratic duplicate check.
        return Region(tuple(kept), tuple(dict.fromkeys(notes)))

    def canon_box(self, b: Box) -> Box:
        return Box.of({c: _canon_set(s, self.columns.get(c)) for c, s in b.constraints})

    def hull(self, boxes: list[Box], notes: tuple[str, ...]) -> Region:
        """One box containing all boxes: per column, the union of its sets (free if any is)."""
        note = (
            f"region had more than {MAX_BOXES} boxes; over-approximated by its per-column hull "
            "(conservative)"
        )
        if not boxes:
            return Region.of((), notes)
        cols = set.intersection(*(set(b.columns) for b in boxes))
        sets: dict[str, ColumnSet] = {}
        for c in sorted(cols):
            acc = ColumnSet.of(
                (iv for b in boxes for iv in b.get(c).intervals), any(b.get(c).null for b in boxes)
            )
            sets[c] = _canon_set(acc, self.columns.get(c))
        return Region.of([Box.of(sets)], notes + (note,))

    def simplify(self, boxes: list[Box]) -> list[Box]:
        """Merge boxes that agree outside one column, drop boxes inside others (both exact).

        Box order is kept (a merged box takes its first member's place), so a region with
        nothing to merge comes back unchanged.
        """
        out = list(dict.fromkeys(b for b in boxes if not b.is_empty()))
        while True:
            merged = self.merge_pass(out)
            absorbed = self.absorb_pass(merged) if len(merged) <= _MAX_ABSORB else merged
            if absorbed == out:
                return out
            out = absorbed

    def merge_pass(self, boxes: list[Box]) -> list[Box]:
        """For each column c, boxes with equal constraints off c become one (union on c)."""
        cols = sorted({c for b in boxes for c in b.columns})
        for c in cols:
            groups: dict[tuple[tuple[str, ColumnSet], ...], list[Box]] = {}
            for b in boxes:
                groups.setdefault(tuple(x for x in b.constraints if x[0] != c), []).append(b)
            if len(groups) == len(boxes):
                continue
            out: list[Box] = []
            for rest, members in groups.items():
                if len(members) == 1:
                    out.append(members[0])
                    continue
                union = ColumnSet.of(
                    (iv for m in members for iv in m.get(c).intervals),
                    any(m.get(c).null for m in members),
                )
                out.append(Box.of({**dict(rest), c: _canon_set(union, self.columns.get(c))}))
            boxes = out
        return boxes

    def absorb_pass(self, boxes: list[Box]) -> list[Box]:
        """Drop each box contained in another (boxes are distinct, so no two contain each other)."""
        keep = []
        cols = [b.columns for b in boxes]
        for i, a in enumerate(boxes):
            inside = any(
                j != i and cols[j] <= cols[i] and _box_subset(a, b) for j, b in enumerate(boxes)
            )
            if not inside:
                keep.append(a)
        return keep


def _intersect_boxes(a: Box, b: Box) -> Box:
    """``Box.intersect`` with a linear sweep per column (long IN / <> chains stay fast)."""
    merged = dict(a.constraints)
    for c, s in b.constraints:
        merged[c] = _intersect_sets(merged[c], s) if c in merged else s
    return Box.of(merged)


def _intersect_sets(x: ColumnSet, y: ColumnSet) -> ColumnSet:
    """``ColumnSet.intersect`` for sorted disjoint interval lists, in one sweep."""
    xs, ys = x.intervals, y.intervals
    out: list[Interval] = []
    i = j = 0
    while i < len(xs) and j < len(ys):
        c = xs[i].intersect(ys[j])
        if c is not None:
            out.append(c)
        if _ends_first(xs[i], ys[j]):
            i += 1
        else:
            j += 1
    return ColumnSet.of(out, x.null and y.null)


def _ends_first(a: Interval, b: Interval) -> bool:
    """a's upper end is at or below b's (so a cannot meet anything after b)."""
    if a.hi is None:
        return b.hi is None
    if b.hi is None or a.hi < b.hi:
        return True
    return a.hi == b.hi and (not a.hi_closed or b.hi_closed)


_MAX_ABSORB = 32  # the containment pass is quadratic; larger regions skip it (still exact)


def _box_subset(a: Box, b: Box) -> bool:
    """a ⊆ b for boxes of canonical sets: each set b constrains holds a's set on that column."""
    return all(_set_subset(a.get(c), s) for c, s in b.constraints)


def _set_subset(x: ColumnSet, y: ColumnSet) -> bool:
    """x ⊆ y for canonical sets, in one sorted sweep.

    Canonical intervals are disjoint and not mergeable, so an interval of x inside y lies inside
    a single interval of y: the first one that does not end before it.
    """
    if x.null and not y.null:
        return False
    ys = y.intervals
    j = 0
    for iv in x.intervals:
        while j < len(ys) and _ends_before(ys[j], iv):
            j += 1
        if j == len(ys) or not _within(iv, ys[j]):
            return False
    return True


def _ends_before(a: Interval, b: Interval) -> bool:
    """Every value of a is below every value of b."""
    if a.hi is None or b.lo is None:
        return False
    return a.hi < b.lo or (a.hi == b.lo and not (a.hi_closed and b.lo_closed))


def _within(a: Interval, b: Interval) -> bool:
    """a ⊆ b."""
    lo_ok = b.lo is None or (
        a.lo is not None and (a.lo > b.lo or (a.lo == b.lo and (b.lo_closed or not a.lo_closed)))
    )
    hi_ok = b.hi is None or (
        a.hi is not None and (a.hi < b.hi or (a.hi == b.hi and (b.hi_closed or not a.hi_closed)))
    )
    return lo_ok and hi_ok
