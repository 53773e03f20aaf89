"""Add/remove with one row per unit: the heaviest record. A record affects the mechanisms
whose region holds it, and one group of each GROUP BY (CSF'24 Thms IV.6, IV.12).

Privacy: the heaviest add/remove record is found or bounded above, one group per GROUP BY.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from privplan.accounting.solver.atoms import _NEG_INF, Cell, Cell2, _Best, _Scale
from privplan.accounting.solver.box_groups import box_groups
from privplan.accounting.solver.instance import _Instance
from privplan.accounting.solver.search import _bb, _Budget, _meeting, _rep, _rows_around
from privplan.errors import InternalError


def _max_cell(
    inst: _Instance, j: int, domains: Sequence[Cell2], prev: _Best | None, budget: _Budget,
    new_from: int | None = None,
) -> _Best:
    """max over records x in the domains of sum{c_i : x in R_i}, with the previous best.

    Add/remove with one row per unit: adding or removing x changes exactly the mechanisms whose
    region holds x (CSF'24 Thm IV.11); a GROUP BY changes one group (Thm IV.12), so it counts
    once. Exact unless the budget ran out (then a proven bound, exact=False). ``new_from``: the
    first new mechanism when ``prev`` is the best before they were added (see
    :func:`_still_the_max`).
    """
    sc = inst.scales[j]
    if prev is None:
        prev = _Best(Fraction(0), True)
    if not inst.mechs or not inst.wf[:, j].any():
        return prev
    if new_from is not None and (kept := _still_the_max(inst, j, prev, new_from)) is not None:
        return kept
    best = [sc.to_float(prev.value)]
    cands: list[tuple[float, Cell]] = []

    def thr() -> float:
        return sc.above(best[0])

    def leaf(v: float, lo_box: np.ndarray, hi_box: np.ndarray) -> None:
        best[0] = max(best[0], v)
        cands.append((v, _rep(lo_box, hi_box)))

    w_rows = inst.wf[inst.row_mech, j]
    everything = np.ones(len(inst.axes), dtype=bool)
    opened = _NEG_INF
    within = _rows_around(inst, domains)
    if sc.denom is not None:
        within, w_rows = _distinct_rows(inst, w_rows, within)
    for dom in domains:
        m, lo, hi, box = _meeting(inst, dom, within)
        opened = max(opened, _bb(lo, hi, w_rows[m], box[0], box[1], everything, thr, leaf, budget))
    out = prev
    seen: set[bytes] = set()
    for v, cell in cands:
        if not sc.keep(v, best[0]):
            continue
        hits = inst.hit_mask(cell)
        key = hits.tobytes()
        if key in seen:
            continue
        seen.add(key)
        value = _hit_sum(inst, j, hits)
        if sc.denom is not None and value != sc.exact(v):
            raise InternalError(f"max-cell search value {v} disagrees with exact {value}")
        if value > out.value:  # above the old best (even a bound): exact unless cut below
            out = _Best(value, True, (cell,))
    return _with_open(out, sc, opened)


def _still_the_max(inst: _Instance, j: int, prev: _Best, new_from: int) -> _Best | None:
    """The previous best cell, with its new value, when no search can find more; else None.

    Why it is then exact: a record's new value is its old value plus the weights of the new
    mechanisms whose regions hold it, so no record exceeds (previous max) + (all the new
    weights). A cell whose new value, computed exactly from every mechanism, equals that bound
    is the new max. Weights are exact (integers on an exact scale, else Fractions). It is the
    usual case of a session asking the same question again (a dashboard): its worst record is
    in every new region, and the search is skipped."""
    if not prev.exact or prev.bound_note or len(prev.cells) != 1:
        return None
    cell = prev.cells[0]
    if len(cell) != len(inst.axes):
        return None
    new = np.zeros(len(inst.mechs), dtype=bool)
    new[new_from:] = True
    value = _hit_sum(inst, j, inst.hit_mask(cell))
    if value != prev.value + _hit_sum(inst, j, new):
        return None  # (a new mechanism with a weight misses it, or it is not the old max)
    return _Best(value, True, (cell,))


_MERGE_FROM = 64  # rows from which equal rows are merged before the search


def _distinct_rows(inst: _Instance, w_rows: np.ndarray, within: np.ndarray | None
                   ) -> tuple[np.ndarray | None, np.ndarray]:
    """The rows to search (``within``, or every row) with equal boxes merged: one row of each
    group of equal boxes (the first), carrying the group's summed weight. Returns their indices
    (ascending) and the weights per row (only the chosen rows' are read).

    Why the search finds the same cells and values: a cell's value is the sum of the weights of
    the rows holding it, and a row holding a cell holds it whatever else it holds, so equal boxes
    can be added up first. Only on an exact scale: the weights are integers below 2**53 held in
    floats, so the sums are exact in any order. Why: a session that asks the same question again
    and again adds one row per answer with the same box, and the search over them grew with the
    history (a dashboard); merged, it stays the size of the distinct regions asked about."""
    idx = np.arange(len(inst.lo), dtype=np.int64) if within is None else within
    if len(idx) < _MERGE_FROM:
        return within, w_rows
    groups = box_groups(inst)  # (equal boxes, equal ids: kept as the instance grows)
    if within is None:
        # every row: each group's first row is known, and the sums are one bincount (no sort
        # of the history, which grows by the rows of every answer)
        if len(groups.first) == len(idx):
            return within, w_rows
        reps = np.array(groups.first, dtype=np.int64)  # ascending: ids follow first rows
        merged = w_rows.copy()
        merged[reps] = np.bincount(groups.ids, weights=w_rows, minlength=len(reps))
        return reps, merged
    # (np.unique's return_index is each group's first row in ``idx``'s ascending order)
    _, first, inverse = np.unique(groups.ids[idx], return_index=True, return_inverse=True)
    if len(first) == len(idx):
        return within, w_rows
    reps = idx[first]
    merged = w_rows.copy()
    merged[reps] = np.bincount(inverse.reshape(-1), weights=w_rows[idx], minlength=len(first))
    return np.sort(reps), merged


def _hit_sum(inst: _Instance, j: int, hits: np.ndarray) -> Fraction:
    """The exact sum of coordinate ``j`` of the weights of the mechanisms ``hits`` marks.

    On an exact scale the search weights are the integers weight x ``denom`` held in floats,
    and every sum of them stays below 2**53 (:func:`~privplan.accounting.solver.atoms.
    _make_scale`), so their float sum is exact in any order: one numpy sum instead of a
    Fraction addition per mechanism, which grew with the session's history. Otherwise the
    Fractions themselves are added."""
    sc = inst.scales[j]
    if sc.denom is not None:
        return Fraction(int(inst.wf[hits, j].sum()), sc.denom)
    return sum((inst.mechs[i].wx[j] for i in np.flatnonzero(hits)), Fraction(0))


def _with_open(best: _Best, sc: _Scale, opened: float) -> _Best:
    """Raise ``best`` to the bound of the nodes the search budget cut off, if any."""
    if opened == _NEG_INF:
        return best
    bound = sc.upper(opened)
    note = "the search limit was reached"
    if bound > best.value:
        return _Best(bound, False, best.cells, note)
    return best
