"""The region arrangement: which mechanisms of one table a single neighbouring change can affect
together (:func:`co_affected_sets`).

The general composition theorem (CSF'24 Thm IV.11) charges the worst neighbouring change, and
costs only grow with the set of mechanisms it affects, so only *maximal* co-affected sets matter.
Every column a region constrains is cut into atoms; an atom's coverage class is the set of region
boxes holding it, and the maximal cells are found among products of the classes maximal within
their column. Replace neighbourhoods pair cells, units of several rows read only the unit-level
columns, and too many cells merge a column — each of these is conservative (a superset of what a
change can affect: it may over-charge, never under-charge).

Privacy: each co-affected set contains every mechanism one neighbouring change can affect together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import product
from typing import Any

import numpy as np

from privplan.accounting.allocation.interface import Event
from privplan.accounting.model import (
    MechanismSpec,
    TableModel,
    unit_group_rows,
    unit_multiplier,
)
from privplan.accounting.solver.atoms import (
    Axis,
    Unorderable,
    sorted_atom_values,
    widen_to_limit,
)
from privplan.analysis.regions import Region

DEFAULT_CELL_LIMIT = 50_000
"""Products of coverage classes searched per table before columns are merged (conservatively)."""

_MAX_PAIRS = 200_000  # replace: pairs of maximal cells considered before falling back


def _axes(regions: Sequence[Region], only: frozenset[str] | None) -> dict[str, Axis]:
    """An axis per constrained column; a column whose values cannot be ordered is left out
    (its constraints are dropped: regions only grow, which can only over-charge)."""
    values: dict[str, set[Any]] = {}
    for region in regions:
        for box in region.boxes:
            for col, cs in box.constraints:
                if only is not None and col not in only:
                    continue
                vals = values.setdefault(col, set())
                for iv in cs.intervals:
                    if iv.lo is not None:
                        vals.add(iv.lo)
                    if iv.hi is not None:
                        vals.add(iv.hi)
    axes = {}
    for col, vals in values.items():
        try:
            axes[col] = Axis(sorted_atom_values(vals))
        except Unorderable:
            continue
    return axes


def _rows(regions: Sequence[Region], axes: Mapping[str, Axis]
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Boxes of atom ranges (lo, hi per column) with the index of their region; widened?"""
    cols = sorted(axes)
    lows: list[tuple[int, ...]] = []
    highs: list[tuple[int, ...]] = []
    owner: list[int] = []
    wide = False
    for r, region in enumerate(regions):
        for box in region.boxes:
            per_col: list[list[tuple[int, int]]] = []
            for c in cols:
                cs = box.get(c)
                axis = axes[c]
                per_col.append([(0, axis.size - 1)] if cs.is_full() else axis.ranges(cs))
            if any(not rs for rs in per_col):
                continue
            wide = widen_to_limit(per_col) or wide
            for combo in product(*per_col):
                lows.append(tuple(a for a, _ in combo))
                highs.append(tuple(b for _, b in combo))
                owner.append(r)
    d = len(cols)
    lo = np.array(lows, dtype=np.int64).reshape(len(lows), d)
    hi = np.array(highs, dtype=np.int64).reshape(len(highs), d)
    return lo, hi, np.array(owner, dtype=np.int64), wide


def _bitset(flags: np.ndarray) -> int:
    """A boolean vector as a Python int (bit i = flags[i])."""
    if not flags.any():
        return 0
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def _dominant(values: Sequence[int]) -> list[int]:
    """The values (bit sets) that are not strict subsets of another one, deduplicated."""
    uniq = sorted(set(values), key=lambda v: -v.bit_count())
    kept: list[int] = []
    for v in uniq:
        if not any(v & ~k == 0 for k in kept):
            kept.append(v)
    return kept


def _maximal_masks(lo: np.ndarray, hi: np.ndarray, owner: np.ndarray, sizes: np.ndarray,
                   limit: int) -> tuple[list[int], bool]:
    """Maximal sets (bit masks over owners) of boxes sharing a cell, and whether exact.

    Per column, every atom has a *coverage class*: the set of boxes containing it. A cell is one
    atom per column and the boxes holding it are the AND of its classes. Replacing a class by a
    superset class of the same column can only add boxes, so the maximal cells are among the
    products of the classes that are maximal within their column: those products are searched
    depth first (AND of bit sets, empty prefixes cut). If there are more than ``limit`` products,
    the column with most classes is *merged* (its constraints are ignored: every region grows
    to the whole column, which can only over-charge) until there are few enough; the result is
    then a conservative superset and ``exact`` is False.
    """
    n_rows, d = lo.shape
    if n_rows == 0:
        return [], True
    classes: list[list[int]] = []
    for c in range(d):
        atoms = np.arange(int(sizes[c]))[:, None]
        cover = (atoms >= lo[None, :, c]) & (atoms <= hi[None, :, c])
        classes.append(_dominant([_bitset(row) for row in cover]))
    exact = True
    while math.prod(len(k) for k in classes) > limit:
        c = max(range(d), key=lambda i: len(classes[i]))
        merged = 0
        for v in classes[c]:
            merged |= v
        classes[c] = [merged]
        exact = False
    order = sorted(range(d), key=lambda i: len(classes[i]))
    seq = [classes[c] for c in order if classes[c] != [(1 << n_rows) - 1]]
    leaves: set[int] = set()

    def dfs(level: int, acc: int) -> None:
        if level == len(seq):
            leaves.add(acc)
            return
        for v in seq[level]:
            nxt = acc & v
            if nxt:
                dfs(level + 1, nxt)

    dfs(0, (1 << n_rows) - 1)
    one_row_each = len(set(owner.tolist())) == n_rows and bool(np.all(owner == np.arange(n_rows)))
    masks: set[int] = set()
    for rows in leaves:
        if one_row_each:
            masks.add(rows)
            continue
        m = 0
        for r in _bits(rows):
            m |= 1 << int(owner[r])
        masks.add(m)
    return _dominant_np(list(masks)), exact


def _dominant_np(masks: list[int]) -> list[int]:
    """Maximal masks (vectorised for many masks)."""
    if len(masks) <= 64:
        return _dominant(masks)
    width = max(m.bit_length() for m in masks)
    nbytes = (width + 7) // 8
    M = np.unpackbits(np.frombuffer(b"".join(m.to_bytes(nbytes, "little") for m in masks),
                                    dtype=np.uint8).reshape(len(masks), nbytes),
                      axis=1, bitorder="little")[:, :width].astype(bool)
    order = np.argsort(-M.sum(axis=1), kind="stable")
    kept: list[int] = []
    kept_rows = np.zeros((0, width), dtype=bool)
    for i in order.tolist():
        row = M[i]
        if len(kept_rows) and np.any(np.all(kept_rows[:, row], axis=1)):
            continue
        kept.append(masks[i])
        kept_rows = np.vstack((kept_rows, row[None, :]))
    return kept


def _bits(mask: int) -> list[int]:
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def _multiplicity(spec: MechanismSpec, model: TableModel) -> int:
    """The most one unit can make a mechanism pay, in one-group costs (add/remove): the
    solver's own rule, :func:`~privplan.accounting.model.unit_multiplier`."""
    k = model.unit.max_rows
    p = spec.partition
    if k == 1:
        return 1
    same = (p is not None and p.key_columns is not None
            and set(p.key_columns) <= set(model.unit.unit_level_columns))
    return unit_multiplier(
        spec.growth, k, partitioned=p is not None, same_group=same,
        max_groups=p.max_groups_per_unit if p is not None else None,
        max_rows_per_group=p.max_rows_per_group if p is not None else None)


def group_multipliers(spec: MechanismSpec, model: TableModel, paid: int) -> list[int]:
    """How an event's ``paid`` one-row costs of ``spec`` fall into *separate mechanisms*: one
    entry per group (per released value) it changes, holding how many one-row costs that group
    pays. The entries sum to ``paid``.

    Why it matters: a composition theorem stronger than the sum (advanced, PLD) is valid for
    *independent* mechanisms; r rows of one unit in one group are not r mechanisms but one at
    r times the sensitivity, which costs r·ε (group privacy) and must enter the composition as
    a single term — composing r copies of ε would under-charge (advanced composition of 100
    copies of 0.01 is 0.57, the one mechanism at shift 100 costs 1.0).

    Flat growth and one row per unit: every cost is its own group. Linear or square growth
    with units of k > 1 rows: the arrangement behind
    :func:`~privplan.accounting.model.unit_multiplier` — groups filled to the cap c, then the
    remainder; the most concentrated arrangement, which is the worst for every bound used here
    (each grows with Σ r_g² at a fixed Σ r_g). An event whose ``paid`` is twice a unit's
    (replace: one unit removed, another added) may put both units in the same groups: their
    entries are added pairwise, largest with largest (again the most concentrated).
    """
    k = model.unit.max_rows
    if spec.growth == "flat" or k == 1:
        return [1] * paid
    if spec.growth != "linear":
        raise ValueError(f"{spec.id!r}: per-group costs are split for flat and linear growth "
                         "only (the (ε, δ) costs these bounds compose)")
    p = spec.partition
    same = (p is not None and p.key_columns is not None
            and set(p.key_columns) <= set(model.unit.unit_level_columns))
    one = list(unit_group_rows(
        spec.growth, k, partitioned=p is not None, same_group=same,
        max_groups=p.max_groups_per_unit if p is not None else None,
        max_rows_per_group=p.max_rows_per_group if p is not None else None))
    total = sum(one)
    if paid == total:
        return one
    if paid == 2 * total:
        return [2 * r for r in one]
    raise ValueError(f"an event pays {paid} one-row costs of {spec.id!r}; a unit pays {total}")


def co_affected_sets(
    mechanisms: Sequence[MechanismSpec], model: TableModel, *, limit: int = DEFAULT_CELL_LIMIT,
) -> tuple[list[Event], bool]:
    """The maximal sets of ``mechanisms`` (all on one table) one neighbouring change can affect.

    Returns the events and whether they are exact (add/remove, one row per unit, no fallback and
    no widened region); otherwise every event is a superset of what a change can affect — never
    smaller. Mechanisms with an empty region are in no event.
    """
    if not mechanisms:
        return [], True
    table = mechanisms[0].table
    k = model.unit.max_rows
    replace_nb = model.neighbourhood == "replace"
    only = frozenset(model.unit.unit_level_columns) if k > 1 else None
    regions = [m.region for m in mechanisms]
    axes = _axes(regions, only)
    lo, hi, owner, wide = _rows(regions, axes)
    sizes = np.array([axes[c].size for c in sorted(axes)], dtype=np.int64)
    masks, complete = _maximal_masks(lo, hi, owner, sizes, limit)
    mult = [_multiplicity(m, model) for m in mechanisms]
    part = [m.partition is not None for m in mechanisms]
    exact = k == 1 and not replace_nb and not wide and complete
    base = "record" if k == 1 else "unit"
    present = sorted(set(owner.tolist()))
    if replace_nb and len(masks) * (len(masks) + 1) // 2 > _MAX_PAIRS:
        every = {i: mult[i] * (2 if part[i] or k > 1 else 1) for i in present}
        return ([Event(table, every, "everything")] if every else []), False
    singles = [_bits(m) for m in masks]
    if not replace_nb:
        return [Event(table, {i: mult[i] for i in s}, base) for s in singles], exact
    events = []
    for a in range(len(masks)):
        for b in range(a, len(masks)):
            both = masks[a] & masks[b]
            ev: dict[int, int] = {}
            for i in _bits(masks[a] | masks[b]):
                if k == 1:
                    ev[i] = 2 if (both >> i) & 1 and part[i] else 1
                else:  # remove a unit, add another: each side pays its own
                    ev[i] = mult[i] * (((masks[a] >> i) & 1) + ((masks[b] >> i) & 1))
            events.append(Event(table, ev, "pair" if k == 1 else "unit pair"))
    return events, False
