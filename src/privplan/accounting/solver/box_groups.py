"""Which rows of an instance have equal boxes: one id per distinct box, kept as the instance
grows, so the single-record search can merge equal rows (:func:`~privplan.accounting.solver.
records._distinct_rows`) without sorting every row of the history on every query.

Why ids stay valid when an instance is extended: old rows are remapped column by column
through strictly increasing atom maps (new boundary values split atoms, never merge them), and
a new column spans all its atoms in every old row; so two old rows have equal boxes after the
extension exactly when they had before. Only the lookup from a box to its id is in the old
coordinates, and it is rebuilt (from one row per id) when atoms moved or columns were added.
"""

from __future__ import annotations

import numpy as np


class BoxGroups:
    """Per row, the id of its box (equal ids exactly for equal boxes), and the lookup from a
    box's bytes to its id in the current coordinates. Immutable once made: extending an
    instance (a preview, then the admission, extend the same one) makes a new object."""

    __slots__ = ("first", "ids", "lookup")

    def __init__(self, ids: np.ndarray, first: list[int], lookup: dict[bytes, int]) -> None:
        self.ids, self.first, self.lookup = ids, first, lookup

    @classmethod
    def of(cls, lo: np.ndarray, hi: np.ndarray) -> BoxGroups:
        """The groups of the rows ``lo``/``hi`` (rows x columns), from scratch."""
        return cls(np.zeros(0, dtype=np.int64), [], {}).extended(lo, hi, moved=False)

    def extended(self, lo: np.ndarray, hi: np.ndarray, *, moved: bool) -> BoxGroups:
        """The groups after rows were appended to ``lo``/``hi`` (the first ``len(self.ids)``
        rows are the old ones, in new coordinates); ``moved``: atoms or columns changed."""
        old = len(self.ids)
        first = list(self.first)
        if moved:
            lookup = {_key(lo, hi, row): g for g, row in enumerate(first)}
        else:
            lookup = dict(self.lookup)
        new = np.empty(lo.shape[0] - old, dtype=np.int64)
        for i, row in enumerate(range(old, lo.shape[0])):
            key = _key(lo, hi, row)
            g = lookup.get(key)
            if g is None:
                g = lookup[key] = len(first)
                first.append(row)
            new[i] = g
        return BoxGroups(np.concatenate((self.ids, new)), first, lookup)


def _key(lo: np.ndarray, hi: np.ndarray, row: int) -> bytes:
    return lo[row].tobytes() + hi[row].tobytes()


def box_groups(inst: object) -> BoxGroups:
    """The instance's :class:`BoxGroups`, made from scratch on first use when the instance
    was not extended from one that had them (a new or restored instance)."""
    groups: BoxGroups | None = getattr(inst, "box_groups", None)
    if groups is None:
        groups = BoxGroups.of(inst.lo, inst.hi)  # type: ignore[attr-defined]
        inst.box_groups = groups  # type: ignore[attr-defined]
    return groups


def extended_groups(parent: object, lo: np.ndarray, hi: np.ndarray, *, moved: bool
                    ) -> BoxGroups | None:
    """The groups of an instance extended from ``parent``: carried forward when the parent
    had them, else None (made on first use)."""
    groups: BoxGroups | None = getattr(parent, "box_groups", None)
    return None if groups is None else groups.extended(lo, hi, moved=moved)
