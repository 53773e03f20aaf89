"""Regions of one table's record domain: finite unions of boxes.

A mechanism reads the table only through ``f(D) = {x in D : p(x) is TRUE}`` (a *dependency
function*, CSF'24 Definition IV.8). Its *region* is ``R = {x : p(x) TRUE}``: adding or removing
record x changes ``f(D)`` iff ``x in R``. privplan represents R as a union of boxes, a box being
one :class:`~privplan.analysis.sets.ColumnSet` per constrained column (absent columns are free).

Regions are always *over-approximations* of the true TRUE-set (DESIGN.md invariant 1): a region
that is too large can only over-charge, never under-charge. Whatever the analyzer cannot
understand becomes :meth:`Region.full` with the reason kept in ``notes`` for ``explain``.

Privacy: regions only over-approximate: each operation is exact or grows a region, never shrinks it.

>>> from privplan.analysis.sets import ColumnSet
>>> a = Region.box(grp=ColumnSet.points(["a"]))
>>> b = Region.box(grp=ColumnSet.points(["b"]))
>>> a.intersect(b).is_empty()
True
>>> a.union(b).contains({"grp": "b", "x": 1})
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime

from privplan.analysis.sets import ColumnSet, Value


@dataclass(frozen=True, slots=True)
class Box:
    """A product set: for each listed column its allowed values; unlisted columns are free.

    ``constraints`` is sorted by column name and never lists a full set, so equal boxes compare
    equal.
    """

    constraints: tuple[tuple[str, ColumnSet], ...] = ()

    @classmethod
    def of(cls, constraints: Mapping[str, ColumnSet]) -> Box:
        return cls(tuple(sorted((c, s) for c, s in constraints.items() if not s.is_full())))

    def get(self, column: str) -> ColumnSet:
        for c, s in self.constraints:
            if c == column:
                return s
        return ColumnSet.full()

    @property
    def columns(self) -> frozenset[str]:
        return frozenset(c for c, _ in self.constraints)

    def is_empty(self) -> bool:
        return any(s.is_empty() for _, s in self.constraints)

    def intersect(self, other: Box) -> Box:
        merged = dict(self.constraints)
        for c, s in other.constraints:
            merged[c] = merged[c].intersect(s) if c in merged else s
        return Box.of(merged)

    def contains(self, record: Mapping[str, Value | None]) -> bool:
        """Membership of a record given as {column: value or None}; missing columns are NULL."""
        return all(s.contains(record.get(c)) for c, s in self.constraints)


@dataclass(frozen=True, slots=True)
class Region:
    """A finite union of non-empty boxes, plus the reasons any part was over-approximated."""

    boxes: tuple[Box, ...] = ()
    notes: tuple[str, ...] = ()

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def full(cls, *notes: str) -> Region:
        return cls((Box(),), tuple(notes))

    @classmethod
    def empty(cls) -> Region:
        return cls((), ())

    @classmethod
    def box(cls, **constraints: ColumnSet) -> Region:
        return cls.of([Box.of(constraints)])

    @classmethod
    def column(cls, column: str, values: ColumnSet) -> Region:
        return cls.of([Box.of({column: values})])

    @classmethod
    def of(cls, boxes: Iterable[Box], notes: Iterable[str] = ()) -> Region:
        kept: list[Box] = []
        for b in boxes:
            if b.is_empty() or b in kept:
                continue
            kept.append(b)
        if any(not b.constraints for b in kept):  # one free box swallows the rest
            kept = [Box()]
        return cls(tuple(kept), _dedup(notes))

    # -- algebra -----------------------------------------------------------------------------
    def union(self, other: Region) -> Region:
        return Region.of(self.boxes + other.boxes, self.notes + other.notes)

    def intersect(self, other: Region) -> Region:
        return Region.of(
            (a.intersect(b) for a in self.boxes for b in other.boxes), self.notes + other.notes
        )

    def with_notes(self, *notes: str) -> Region:
        return Region(self.boxes, _dedup(self.notes + notes))

    # -- queries -----------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return not self.boxes

    def is_full(self) -> bool:
        return any(not b.constraints for b in self.boxes)

    def contains(self, record: Mapping[str, Value | None]) -> bool:
        return any(b.contains(record) for b in self.boxes)

    @property
    def columns(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for b in self.boxes:
            out |= b.columns
        return out

    def may_overlap(self, other: Region) -> bool:
        """False only when the two regions are provably disjoint."""
        return any(not a.intersect(b).is_empty() for a in self.boxes for b in other.boxes)


def _dedup(items: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for i in items:
        seen.setdefault(i, None)
    return tuple(seen)


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
    "date": (date,), "timestamp": (datetime,),
}


def conform_region(region: Region, column_types: Mapping[str, str]) -> Region:
    """``region`` with every column's values of that column's policy type; a column holding a
    value of another type (a region recorded before join keys were typed, e.g. a public DATE
    matched to a TIMESTAMP column) loses its constraint, with a note.

    Why it is sound: dropping a box's constraint on a column can only enlarge the region (an
    over-approximation, DESIGN.md invariant 1). Why it is needed: values of one column must be
    mutually comparable, or every later comparison of regions on it fails.
    """
    changed = False
    boxes = []
    for box in region.boxes:
        kept = {}
        for col, values in box.constraints:
            if _fits(values, column_types.get(col)):
                kept[col] = values
            else:
                changed = True
        boxes.append(Box.of(kept))
    if not changed:
        return region
    note = ("a recorded region held values of another type than its column; that constraint "
            "was dropped (over-approximated)")
    return Region.of(boxes, (*region.notes, note))


def _fits(values: ColumnSet, ctype: str | None) -> bool:
    allowed = _PYTHON_TYPES.get(ctype or "")
    if allowed is None:
        return True
    for iv in values.intervals:
        for v in (iv.lo, iv.hi):
            if v is None:
                continue
            if isinstance(v, bool) and ctype != "bool":
                return False
            if ctype == "date" and isinstance(v, datetime):
                return False
            if not isinstance(v, allowed) and not (ctype == "float" and _numeric(v)):
                return False
    return True


def _numeric(v: Value) -> bool:
    from decimal import Decimal
    from fractions import Fraction

    return isinstance(v, (Fraction, Decimal))
