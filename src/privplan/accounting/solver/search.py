"""Branch and bound over the cells of the atom grid, with 1-D sweep bounds: the kernel
every neighbourhood search uses to find the heaviest cell (or prove a bound) without
enumerating the product of all atoms.

Privacy: branch and bound prunes with upper bounds only: the heaviest cell is found or bounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from privplan.accounting.solver.atoms import _NEG_INF, Cell, Cell2
from privplan.accounting.solver.instance import _Instance


class _Budget:
    """Search work left (nodes, weighted by their size); at zero, searches return bounds."""

    __slots__ = ("left",)

    def __init__(self, n: int) -> None:
        self.left = n

    def take(self, cost: int = 1) -> bool:
        if self.left <= 0:
            return False
        self.left -= cost
        return True


def _sparse(rows: int, atoms: int) -> bool:
    """Sweep only the atoms where one of ``rows`` rows starts or ends, not all ``atoms``?

    Both ways give the same floats (see :func:`_sweep`); this only picks the cheaper.
    """
    return 4 * rows + 64 < atoms


def _sweep(
    lo_c: np.ndarray, hi_c: np.ndarray, w: np.ndarray, lo_box: int, hi_box: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """1-D sweep on one column: the maximal runs of atoms of [lo_box, hi_box] covered by the
    same rows, as (starts, ends, weight of the rows covering the run).

    Rows must lie within the box on this column (the search keeps them so). The weight is a
    running sum of row starts minus row ends over the atoms, which changes only where a row
    starts or ends. When those atoms are few next to the column's, the sum runs over them
    alone: the atoms skipped add exact zeros, so the floats are the same either way.
    """
    size = hi_box - lo_box + 1
    a = lo_c - lo_box
    b = hi_c - lo_box + 1  # one past the row's last atom
    if not _sparse(a.size, size):
        diff = np.bincount(a, w, minlength=size + 1)
        diff -= np.bincount(b, w, minlength=size + 1)
        prof = np.cumsum(diff[:size])
        events = np.bincount(a, minlength=size + 1)[:size]
        events += np.bincount(b, minlength=size + 1)[:size]
        events[0] = 1
        starts = np.flatnonzero(events)
        weights = prof[starts]
    else:
        starts = np.unique(np.concatenate((a, b, np.zeros(1, dtype=a.dtype))))
        starts = starts[starts < size]
        n = starts.size
        diff = np.bincount(np.searchsorted(starts, a), w, minlength=n + 1)
        diff -= np.bincount(np.searchsorted(starts, b), w, minlength=n + 1)
        weights = np.cumsum(diff[:n])
    ends = np.append(starts[1:] - 1, size - 1)
    return starts + lo_box, ends + lo_box, weights


_GRID_LIMIT = 1 << 21  # cells of one 2-D sweep


def _child_maxima(
    lo: np.ndarray,
    hi: np.ndarray,
    w: np.ndarray,
    c: int,
    starts: np.ndarray,
    c2: int,
    lo_box: np.ndarray,
    hi_box: np.ndarray,
) -> np.ndarray:
    """For runs of column c (given by sorted-or-not starts), the 1-D maximum on column c2.

    A 2-D sweep (difference grid over run x atom) of the rows: each child's max on c2 is a
    valid bound for it (a cell weighs no more than its run on c2). Falls back to +inf (no
    tightening) when the grid would be too large. When few atoms of c2 start or end a row,
    the grid keeps only those: every other atom repeats its left neighbour's sums (exact
    zeros are added), or is 0 before the first, so the maxima are the same floats.
    """
    order = np.argsort(starts)
    s_sorted = starts[order]
    n_runs = len(starts)
    size = int(hi_box[c2] - lo_box[c2] + 1)
    if (n_runs + 1) * (size + 1) > _GRID_LIMIT:
        return np.full(n_runs, np.inf)
    r_lo = np.searchsorted(s_sorted, lo[:, c], side="left")
    r_hi = np.searchsorted(s_sorted, hi[:, c], side="right")  # exclusive
    keep = r_lo < r_hi
    r_lo, r_hi, ww = r_lo[keep], r_hi[keep], w[keep]
    a_lo = lo[keep, c2] - lo_box[c2]
    a_hi = hi[keep, c2] - lo_box[c2] + 1  # exclusive
    atoms, zero_lead = size, False  # grid columns whose maximum counts; a 0 column before them
    if _sparse(a_lo.size, size):
        pts = np.unique(np.concatenate((a_lo, a_hi)))
        zero_lead = not pts.size or bool(pts[0] > 0)
        a_lo, a_hi = np.searchsorted(pts, a_lo), np.searchsorted(pts, a_hi)
        atoms, size = int(np.searchsorted(pts, size)), pts.size
    width = size + 1
    grid = np.bincount(r_lo * width + a_lo, ww, minlength=(n_runs + 1) * width)
    grid -= np.bincount(r_lo * width + a_hi, ww, minlength=(n_runs + 1) * width)
    grid -= np.bincount(r_hi * width + a_lo, ww, minlength=(n_runs + 1) * width)
    grid += np.bincount(r_hi * width + a_hi, ww, minlength=(n_runs + 1) * width)
    grid = grid.reshape(n_runs + 1, width)
    np.cumsum(grid, axis=0, out=grid)
    np.cumsum(grid, axis=1, out=grid)
    maxima = grid[:n_runs, :atoms].max(axis=1) if atoms else np.zeros(n_runs)
    if zero_lead:
        maxima = np.maximum(maxima, 0.0)
    out = np.empty(n_runs)
    out[order] = maxima
    return out


def _rep(lo_box: np.ndarray, hi_box: np.ndarray) -> Cell:
    """One atom per column of a box, preferring an open (many-valued) atom where there is one."""
    return tuple(
        int(s) if s == e or s % 2 == 1 else int(s) + 1
        for s, e in zip(lo_box.tolist(), hi_box.tolist())
    )


Leaf = Callable[[float, np.ndarray, np.ndarray], None]


def _bb(
    lo: np.ndarray,
    hi: np.ndarray,
    w: np.ndarray,
    lo_box: np.ndarray,
    hi_box: np.ndarray,
    eligible: np.ndarray,
    thr: Callable[[], float],
    leaf: Leaf,
    budget: _Budget,
    tags: np.ndarray | None = None,
    floor: Callable[[np.ndarray], float] | None = None,
) -> float:
    """Branch and bound for the heaviest cells of weighted boxes inside one search box.

    ``lo``/``hi`` are rows inside the box (one per region piece, weight ``w``); rows of one
    mechanism are disjoint, so a cell's weight is the sum of the rows holding it. The search
    cuts ``eligible`` columns into runs; ``leaf(value, box)`` is called for every box uniform on
    the eligible columns whose value reaches ``thr()`` (read afresh, as the caller raises it).
    A node's bound is the smallest over columns of its 1-D sweep maximum: a cell's weight never
    exceeds the weight of its run on any column. With ``floor``, a node also needs
    ``floor(tags of the rows covering all of it)``: callers pass a threshold that only grows
    with that set (and depends on nothing else), so it holds for the whole subtree. Returns
    the largest bound of the nodes the budget cut off (-inf if none), a proven bound on what
    was not searched.

    A row covering a node covers its whole subtree, so a node hands its children only its
    partial rows and carries the covering ones as a count, their tags and their weight. That
    weight is their sum in row order, as summing the node's rows would give: a running total
    when the weights are integers (exact in any order), else summed again from the covering
    rows' indices in row order, so every float the search compares is the same.
    """
    # (one function on purpose: the search's nodes are closures over shared bounds and
    # counters on the hot path; split up, every node would pass and return them)
    exact_sums = bool(np.all(w == np.floor(w))) and float(np.abs(w).sum()) < 2.0**53
    w_all = w
    everywhere = bool(eligible.all())
    no_tags = np.zeros(0, dtype=np.int64)

    def node(
        lo: np.ndarray,
        hi: np.ndarray,
        w: np.ndarray,
        ridx: np.ndarray | None,  # row indices (float weights only)
        tags: np.ndarray | None,
        lo_box: np.ndarray,
        hi_box: np.ndarray,
        n_cov: int,  # rows covering the node, carried from above
        cov_sum: float,  # their weight (integer weights)
        cov_idx: np.ndarray,  # their indices, ascending (float weights)
        cov_tags: list[np.ndarray],
    ) -> float:
        # (long on purpose: one node of the search, see _bb; the hot path of the solver)
        partial = (lo > lo_box) | (hi < hi_box)
        if not everywhere:
            partial &= eligible
        prow = partial.any(axis=1)
        covering = ~prow
        if covering.any():
            n_cov += int(np.count_nonzero(covering))
            if ridx is None:
                cov_sum += float(w[covering].sum())
            else:
                cov_idx = np.sort(np.concatenate((cov_idx, ridx[covering])))
            if tags is not None:
                cov_tags = [*cov_tags, tags[covering]]
        cert = cov_sum if ridx is None else float(w_all[cov_idx].sum())
        extra = _NEG_INF
        if floor is not None and tags is not None:
            extra = floor(np.concatenate(cov_tags) if cov_tags else no_tags)

        def t() -> float:
            return max(thr(), extra)

        if not prow.any():
            if cert >= t():
                leaf(cert, lo_box, hi_box)
            return _NEG_INF
        lp, hp, wp = lo[prow], hi[prow], w[prow]
        rp = None if ridx is None else ridx[prow]
        tp = None if tags is None else tags[prow]
        cols = np.flatnonzero(partial[prow].any(axis=0)).tolist()
        threshold = t() - cert
        chosen: tuple[int, float, int, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        bound = math.inf
        for c in cols:
            runs = _sweep(lp[:, c], hp[:, c], wp, int(lo_box[c]), int(hi_box[c]))
            mx = float(runs[2].max())
            bound = min(bound, mx)
            if mx < threshold:
                return _NEG_INF
            width = int((runs[1] - runs[0] + 1)[runs[2] >= threshold].sum())  # branching, roughly
            if chosen is None or (width, mx) < (chosen[0], chosen[1]):
                chosen = (width, mx, c, runs)
        assert chosen is not None
        _, _, c, (st, en, va) = chosen
        bound += cert
        if not budget.take(1 + (n_cov + lp.shape[0]) // 2048):  # work grows with the rows swept
            return bound
        va = va + cert
        last = len(cols) == 1
        if not last:  # tighten every child's bound at once: its 1-D maxima on the other columns
            alive = np.flatnonzero(va >= t())
            if alive.size > 4:
                for c2 in cols:
                    if c2 != c:
                        va[alive] = np.minimum(
                            va[alive],
                            cert + _child_maxima(lp, hp, wp, c, st[alive], c2, lo_box, hi_box),
                        )
        order = np.argsort(-va, kind="stable").tolist()
        opened = _NEG_INF
        lc, hc = lp[:, c], hp[:, c]
        for r in order:
            v = float(va[r])
            if v < t():
                break
            lo2, hi2 = lo_box.copy(), hi_box.copy()
            lo2[c], hi2[c] = st[r], en[r]
            if last:
                leaf(v, lo2, hi2)
                continue
            if not budget.take():  # every call costs: most are pruned after their sweeps
                opened = max(opened, v)
                break
            m = (lc <= st[r]) & (hc >= st[r])  # the partial rows meeting the run (all of it)
            opened = max(
                opened,
                node(
                    lp[m],
                    hp[m],
                    wp[m],
                    None if rp is None else rp[m],
                    None if tp is None else tp[m],
                    lo2,
                    hi2,
                    n_cov,
                    cert,
                    cov_idx,
                    cov_tags,
                ),
            )
        return opened

    return node(
        lo,
        hi,
        w,
        None if exact_sums else np.arange(w.size),
        tags,
        lo_box,
        hi_box,
        0,
        0.0,
        np.zeros(0, dtype=np.int64),
        [],
    )


def _meeting(
    inst: _Instance, box: Cell2, within: np.ndarray | None = None
) -> tuple[np.ndarray | slice, np.ndarray, np.ndarray, np.ndarray]:
    """Rows meeting ``box`` (an index), clipped to it; and the box as arrays. ``within``: rows
    known to include every row meeting the box (those meeting a box around it)."""
    lo_box = np.array([b[0] for b in box], dtype=np.int64)
    hi_box = np.array([b[1] for b in box], dtype=np.int64)
    m = inst.rows_meeting(lo_box, hi_box, within)
    if m is None:  # the whole domain: every row, already inside it
        return slice(None), inst.lo, inst.hi, np.stack((lo_box, hi_box))
    lo = np.maximum(inst.lo[m], lo_box)
    hi = np.minimum(inst.hi[m], hi_box)
    return m, lo, hi, np.stack((lo_box, hi_box))


def _rows_around(inst: _Instance, domains: Sequence[Cell2]) -> np.ndarray | None:
    """For several domains (an admission of many regions), the rows meeting the box around
    them all: each domain's rows are then found among these, not among every row."""
    if len(domains) < 2:
        return None
    lo = np.array([min(d[c][0] for d in domains) for c in range(len(inst.axes))], dtype=np.int64)
    hi = np.array([max(d[c][1] for d in domains) for c in range(len(inst.axes))], dtype=np.int64)
    return inst.rows_meeting(lo, hi)
