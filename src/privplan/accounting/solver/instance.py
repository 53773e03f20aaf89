"""One table's mechanisms as disjoint boxes of atom-index ranges (:class:`_Instance`):
built from the regions (extending atoms when new values appear), and evaluated per cell
(which mechanisms' regions hold the records of a cell, which keys must agree).

Privacy: a cell's mechanisms are exactly those whose regions can hold its records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from itertools import chain, product
from typing import Any

import numpy as np

from privplan.accounting.model import (
    GROWTHS,
    MechanismSpec,
)
from privplan.accounting.solver.atoms import (
    Axis,
    Cell,
    Cell2,
    Unorderable,
    _disjoint,
    _extend_scale,
    _Mech,
    _Mechs,
    _Scale,
    sorted_atom_values,
    widen_to_limit,
)
from privplan.accounting.solver.box_groups import BoxGroups, extended_groups
from privplan.accounting.solver.first_extension import first_extension, remember_first
from privplan.analysis.regions import Region
from privplan.analysis.sets import Value


class _Instance:
    """One table's mechanisms as disjoint boxes of atom-index ranges (immutable)."""

    columns: tuple[str, ...]
    col_index: dict[str, int]
    axes: tuple[Axis, ...]
    poisoned: frozenset[str]
    mechs: _Mechs
    part: np.ndarray
    full: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    row_mech: np.ndarray
    scales: tuple[_Scale, ...]
    wf: np.ndarray  # (mechanisms, coordinates) search weights
    narrow: np.ndarray  # per column: how many rows constrain it (orders row filtering)
    cell_maps: tuple[tuple[np.ndarray | None, ...], int]  # from the instance this extended
    headroom: int  # largest multiple of the total weight a search value can reach
    widened: bool
    notes: tuple[str, ...]
    box_groups: BoxGroups | None  # rows with equal boxes (made on first use)

    @classmethod
    def empty(cls, q: int, headroom: int, poisoned: frozenset[str] = frozenset()) -> _Instance:
        inst = object.__new__(cls)
        inst.headroom = headroom
        inst.columns, inst.col_index, inst.axes, inst.poisoned = (), {}, (), poisoned
        inst.mechs = _Mechs.empty()
        inst.part = np.zeros(0, dtype=np.int8)
        inst.full = np.zeros(0, dtype=bool)
        inst.lo = np.zeros((0, 0), dtype=np.int64)
        inst.hi = np.zeros((0, 0), dtype=np.int64)
        inst.row_mech = np.zeros(0, dtype=np.int64)
        inst.scales = tuple(_Scale(1, 0, 0.0) for _ in range(q))
        inst.wf = np.zeros((0, q), dtype=np.float64)
        inst.narrow = np.zeros(0, dtype=np.int64)
        inst.widened, inst.notes = False, ()
        inst.cell_maps = ((), 0)
        inst.box_groups = None
        return inst

    def remap(self, cell: Cell) -> Cell:
        """A cell of the instance this one extended, in this one's atoms (same old hits).

        Old columns map through the atom maps of the extension; new columns, which no old
        region constrains, get their first open atom.
        """
        maps, added = self.cell_maps
        moved = tuple(int(m[a]) if m is not None else a for a, m in zip(cell, maps))
        return moved + (1,) * added

    @property
    def sizes(self) -> np.ndarray:
        return np.array([a.size for a in self.axes], dtype=np.int64)

    def full_box(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(len(self.axes), dtype=np.int64), self.sizes - 1

    def full_box_tuple(self) -> Cell2:
        return tuple((0, a.size - 1) for a in self.axes)

    # -- building ------------------------------------------------------------------------------
    def extend(self, specs: Sequence[MechanismSpec]) -> tuple[_Instance, bool, list[Cell2]]:
        """A new instance with ``specs`` added, whether old rows changed, and the new rows.

        Old rows change only when a column becomes unorderable: its constraints are dropped
        everywhere (regions grow), so the caller must search from scratch.
        """
        poisoned = self.poisoned
        while True:
            try:
                inst, new_rows = self._extend(specs, poisoned)
            except _UnorderableColumn as bad:
                poisoned = poisoned | {bad.column}
                continue
            return inst, poisoned != self.poisoned and bool(self.mechs), new_rows

    def specs(self) -> list[MechanismSpec]:
        return self.mechs.specs()

    def _extend(
        self, specs: Sequence[MechanismSpec], poisoned: frozenset[str]
    ) -> tuple[_Instance, list[Cell2]]:
        if poisoned != self.poisoned:
            return _Instance.empty(len(self.scales), self.headroom, poisoned)._extend(
                [*self.specs(), *specs], poisoned
            )
        first = first_extension(specs, poisoned) if not self.columns else None
        if first is not None:  # (the first extension of an empty instance, made before)
            columns, axes, remaps, cell_maps, new_tops = first.axes
        else:
            new_values = _boundary_values(specs, poisoned)
            columns, axes, remaps, cell_maps, new_tops = self._merged_axes(new_values)
        inst = object.__new__(_Instance)
        inst.headroom = self.headroom
        inst.columns = tuple(columns)
        inst.col_index = {c: i for i, c in enumerate(columns)}
        inst.axes = tuple(axes)
        inst.poisoned = poisoned
        inst.cell_maps = (tuple(cell_maps), len(columns) - len(self.columns))
        notes = list(self.notes)
        widened = self.widened
        new_rows: list[Cell2] = []
        new_row_mech: list[int] = []
        added: list[_Mech] = []
        region_rows: dict[int, tuple[list[Cell2], bool]] = (
            dict(first.region_rows) if first is not None else {})
        for m in specs:
            idx = len(self.mechs) + len(added)
            got = region_rows.get(id(m.region))
            if got is None:
                got = region_rows[id(m.region)] = inst._rows_of(m.region)
            rows, wide = got
            if wide:
                widened = True
                notes.append(f"{m.id}: long IN-lists were replaced by their range")
            if poisoned and any(c in poisoned for b in m.region.boxes for c in b.columns):
                widened = True
                notes.append(f"{m.id}: constraints on unorderable columns were dropped")
            new_rows.extend(rows)
            new_row_mech.extend([idx] * len(rows))
            added.append(inst._mech_of(m, rows))
        d = len(columns)
        narrow = np.concatenate((self.narrow, np.zeros(len(new_tops), dtype=np.int64)))
        arr = np.zeros((0, d, 2), dtype=np.int64)
        if new_rows:
            flat = chain.from_iterable(chain.from_iterable(new_rows))
            arr = np.fromiter(flat, dtype=np.int64, count=2 * d * len(new_rows))
            arr = arr.reshape(len(new_rows), d, 2)
            narrow = narrow + ((arr[:, :, 0] > 0) | (arr[:, :, 1] < inst.sizes - 1)).sum(axis=0)
        inst.lo, inst.hi = lo, _ = self._grown(arr, remaps, new_tops)
        inst.box_groups = extended_groups(self, inst.lo, inst.hi,
                                          moved=bool(remaps or new_tops))
        inst.narrow = narrow
        inst.row_mech = np.concatenate((self.row_mech, np.array(new_row_mech, dtype=np.int64)))
        inst.mechs = mechs = self.mechs.plus(added, specs)
        inst.part = np.concatenate((self.part, np.array([m.part for m in added], dtype=np.int8)))
        inst.full = np.concatenate((self.full, np.array([m.full for m in added], dtype=bool)))
        inst.widened, inst.notes = widened, tuple(dict.fromkeys(notes))
        scales, cols = self._extended_scales(mechs, added, lo.shape[0])
        inst.scales = tuple(scales)
        inst.wf = np.stack(cols, axis=1) if cols else np.zeros((len(mechs), 0))
        if not self.columns and first is None:
            remember_first(specs, poisoned, (columns, axes, remaps, cell_maps, new_tops),
                           region_rows)
        return inst, new_rows

    def _merged_axes(
        self, new_values: dict[str, list[Value]]
    ) -> tuple[list[str], list[Axis], list[tuple[int, np.ndarray, np.ndarray]],
               list[np.ndarray | None], list[int]]:
        """The columns and atom axes with ``new_values`` merged in: old columns whose atoms
        moved (``remaps``, ``cell_maps``) and the last atom of each new column."""
        columns = list(self.columns)
        axes = list(self.axes)
        remaps: list[tuple[int, np.ndarray, np.ndarray]] = []  # old columns whose atoms moved
        cell_maps: list[np.ndarray | None] = [None] * len(columns)
        new_tops: list[int] = []  # last atom of each new column
        for col, vals in new_values.items():
            if col in self.col_index:
                c = self.col_index[col]
                try:
                    merged = axes[c].merged(vals)
                except Unorderable:
                    raise _UnorderableColumn(col) from None
                if merged is not None:
                    axes[c], map_lo, map_hi = merged
                    remaps.append((c, map_lo, map_hi))
                    cell_maps[c] = map_lo  # an old gap's first new atom is a gap too
            else:
                try:
                    axis = Axis(sorted_atom_values(vals))
                except Unorderable:
                    raise _UnorderableColumn(col) from None
                columns.append(col)
                axes.append(axis)
                new_tops.append(axis.size - 1)
        return columns, axes, remaps, cell_maps, new_tops

    def _extended_scales(
        self, mechs: Any, added: list[_Mech], n_rows: int
    ) -> tuple[list[Any], list[np.ndarray]]:
        """Each weight scale with the added mechanisms' weights appended (rescaled in place
        of a rebuild when exact, :func:`_extend_scale`)."""
        scales, cols = [], []
        for j, sc in enumerate(self.scales):

            def column(j: int = j) -> list[Fraction]:
                return [m.wx[j] for m in mechs]

            s, w = _extend_scale(
                sc,
                self.wf[:, j],
                column,
                [m.wx[j] for m in added],
                n_rows,
                self.headroom,
            )
            scales.append(s)
            cols.append(w)
        return scales, cols

    def _grown(self, arr: np.ndarray, remaps: Sequence[tuple[int, np.ndarray, np.ndarray]],
               new_tops: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``lo``/``hi`` of the extended instance, made in one allocation: the old rows with
        their moved atoms remapped and the new columns spanning all their atoms (no old region
        constrains them), then the new rows ``arr``. The old instance keeps its own arrays."""
        if not remaps and not new_tops and not arr.shape[0]:
            return self.lo, self.hi
        n, d_old = self.lo.shape
        d = d_old + len(new_tops)
        out = []
        for old, side, fill in ((self.lo, 0, np.zeros(len(new_tops), dtype=np.int64)),
                                (self.hi, 1, np.array(new_tops, dtype=np.int64))):
            a = np.empty((n + arr.shape[0], d), dtype=np.int64)
            a[:n, :d_old] = old
            for c, map_lo, map_hi in remaps:
                a[:n, c] = (map_lo if side == 0 else map_hi)[old[:, c]]
            a[:n, d_old:] = fill
            a[n:] = arr[:, :, side]
            out.append(a)
        return out[0], out[1]

    def _rows_of(self, region: Region) -> tuple[list[Cell2], bool]:
        """Disjoint atom-index boxes whose union is the region (or a superset: flag True)."""
        rows: list[Cell2] = []
        wide = False
        free = [[(0, axis.size - 1)] for axis in self.axes]
        for box in region.boxes:
            per_col = list(free)  # a column the box does not constrain (or unorderable): all
            seen: set[int] = set()
            for col, cs in box.constraints:
                c = self.col_index.get(col)
                if c is None or c in seen:  # unorderable column; or a repeat (the first counts)
                    continue
                seen.add(c)
                if not cs.is_full():
                    per_col[c] = self.axes[c].ranges(cs)
            if any(not rs for rs in per_col):
                continue
            wide = widen_to_limit(per_col) or wide
            rows.extend(product(*per_col))
        if len(region.boxes) > 1:
            rows = _disjoint(rows)
        return rows, wide

    def _mech_of(self, m: MechanismSpec, rows: list[Cell2]) -> _Mech:
        full_row = self.full_box_tuple()
        full = any(r == full_row for r in rows)
        p = m.partition
        growth = GROWTHS.index(m.growth)
        wx = tuple(m.cost.weights())
        if p is None:
            return _Mech(m.id, wx, 0, (), None, full, growth)
        cap = p.max_rows_per_group
        if p.key_columns is None or any(c in self.poisoned for c in p.key_columns):
            return _Mech(m.id, wx, 2, (), p.max_groups_per_unit, full, growth, cap)
        keys = tuple(sorted({self.col_index[c] for c in p.key_columns}))
        return _Mech(m.id, wx, 1, keys, p.max_groups_per_unit, full, growth, cap)

    # -- evaluation ----------------------------------------------------------------------------
    def _order(self, cols: Iterable[int]) -> list[int]:
        """Columns to filter rows on, most often constrained first (rows drop out soonest)."""
        return sorted(cols, key=lambda c: -int(self.narrow[c]))

    def rows_meeting(self, lo_box: np.ndarray, hi_box: np.ndarray,
                     within: np.ndarray | None = None) -> np.ndarray | None:
        """Indices (ascending) of the rows meeting a box; None when it is the whole domain.

        Only the columns the box constrains are tested, one at a time on the rows still in,
        starting with the column most rows constrain: the same rows as testing every column
        of every row, in a fraction of the work when the box is narrow.
        """
        top = self.sizes - 1
        cols = [c for c in range(len(self.axes)) if lo_box[c] > 0 or hi_box[c] < top[c]]
        if not cols:
            return within
        idx: np.ndarray | None = within  # (rows known to contain every row meeting the box)
        for c in self._order(cols):
            a, b = int(lo_box[c]), int(hi_box[c])
            if idx is None:
                idx = np.flatnonzero((self.lo[:, c] <= b) & (self.hi[:, c] >= a))
            else:
                idx = idx[(self.lo[idx, c] <= b) & (self.hi[idx, c] >= a)]
            if not idx.size:
                break
        assert idx is not None
        return idx

    def hit_mask(self, cell: Cell) -> np.ndarray:
        """Which mechanisms' regions hold the records of ``cell`` (bool per mechanism)."""
        out = np.zeros(len(self.mechs), dtype=bool)
        if len(self.mechs):
            c = np.asarray(cell, dtype=np.int64)
            rows = self.rows_meeting(c, c)
            out[self.row_mech if rows is None else self.row_mech[rows]] = True
        return out

    def forced_same(self, i: int, a: Cell, b: Cell) -> bool:
        """Must records in cells a and b fall in the same group of partition i (Cor IV.13)?

        Only when the keys are columns, a and b share the atom of every key column, and each of
        those atoms is a single value (even index). Opaque keys can always differ.
        """
        m = self.mechs[i]
        if m.part != 1:
            return False
        return all(a[k] == b[k] and a[k] % 2 == 0 for k in m.keys)


class _UnorderableColumn(Exception):
    def __init__(self, column: str) -> None:
        super().__init__(column)
        self.column = column

def _boundary_values(
    specs: Sequence[MechanismSpec], poisoned: frozenset[str]
) -> dict[str, list[Value]]:
    """Per column, the interval ends the specs' regions use (the atoms' new boundaries), and
    an empty list for a GROUP BY key column the regions do not constrain."""
    new_values: dict[str, list[Value]] = {}
    seen_regions: set[int] = set()  # specs of one query often share one region object
    for m in specs:
        if id(m.region) not in seen_regions:
            seen_regions.add(id(m.region))
            for box in m.region.boxes:
                for col, cs in box.constraints:
                    if col in poisoned:
                        continue
                    vals = new_values.setdefault(col, [])
                    points = cs.finite_values() if len(cs.intervals) >= 64 else None
                    if points is not None:  # (a long IN list or public domain)
                        vals.extend(points)
                        continue
                    for iv in cs.intervals:
                        if iv.lo is not None:
                            vals.append(iv.lo)
                        if iv.hi is not None:
                            vals.append(iv.hi)
        if m.partition is not None and m.partition.key_columns is not None:
            for col in m.partition.key_columns:
                if col not in poisoned:
                    new_values.setdefault(col, [])
    return new_values
