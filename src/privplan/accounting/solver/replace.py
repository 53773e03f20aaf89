"""Replace with one row per unit (bounded DP): the heaviest pair of records x -> x'. The pair
affects every mechanism holding x or x'; a GROUP BY holding both pays two groups unless their
keys must agree (CSF'24 Thm IV.11, Cor IV.13).

Privacy: the heaviest replace pair is found or bounded above; a GROUP BY may pay two groups.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from privplan.accounting.solver.atoms import _NEG_INF, Cell, Cell2, _Best, _Scale
from privplan.accounting.solver.instance import _Instance
from privplan.accounting.solver.records import _with_open
from privplan.accounting.solver.search import _bb, _Budget, _meeting, _rep
from privplan.errors import InternalError


def _max_pair(
    inst: _Instance,
    j: int,
    domains: Sequence[Cell2] | None,
    single: _Best,
    prev: _Best | None,
    budget: _Budget,
) -> _Best:
    """max over ordered pairs x != x' (x in the domains) of the weight of replacing x by x'.

    Replace (bounded DP) with one row per unit: the change affects {i : x in R_i or x' in R_i};
    a GROUP BY holding both pays two groups (c_g + c_h, Cor IV.13) unless x, x' must share the
    key (:meth:`_Instance.forced_same`); x' may lie in x's own cell (cells hold many records).
    So V(a, b) = w(a) + w(b) - S(a, b), S = plain mechanisms both hit + GROUP BYs both hit
    with a forced common key. Since S >= F (plain mechanisms over the whole domain) and
    w <= W* (the add/remove maximum), a pair beating ``best`` has both cells heavier than
    tau = best - W* + F: the search enumerates those cells (:func:`_bb` with threshold tau,
    rising as ``best`` does) and evaluates each new one against all earlier ones at once.
    With ``domains`` (incremental), one cell of the pair must lie in them: those cells are
    enumerated first, then partners anywhere. One cell per search leaf suffices: moving a
    cell within its leaf to an open atom only unpins keys, which never lowers V.
    """
    # (one function on purpose: the search's nodes are closures over shared bounds and
    # counters on the hot path; split up, every node would pass and return them)
    sc = inst.scales[j]
    if prev is None:
        prev = _Best(Fraction(0), True)
    if not inst.mechs or not inst.wf[:, j].any():
        return prev
    # V(a, b) <= w(a) + w(b) - F <= 2 W* - F: a bound that holds whatever is searched
    cap = 2 * single.value - sum(
        (inst.mechs[i].wx[j] for i in np.flatnonzero((inst.part == 0) & inst.full).tolist()),
        Fraction(0),
    )
    cap_note = "the search limit was reached; bounded by twice the heaviest record"
    if prev.value >= cap:  # already at the cap (totals never decrease): nothing to search
        return _Best(cap, prev.exact and prev.value == cap, prev.cells, prev.bound_note or cap_note)
    wf = inst.wf[:, j]
    w_star = sc.to_float(single.value) + (0.0 if sc.denom is not None else sc.tol)
    plain_full = float(wf[(inst.part == 0) & inst.full].sum())
    best0 = max(sc.to_float(prev.value), 0.0)
    pairs = _PairTable(inst, wf, sc, best0, w_star, plain_full, budget)
    everything = np.ones(len(inst.axes), dtype=bool)
    w_rows = wf[inst.row_mech]
    full_lo, full_hi = inst.full_box()
    opened = _NEG_INF

    plain = inst.part == 0
    full_plain = plain & inst.full

    # Partner bounds: every record of a search node hits the plain mechanisms C covering the
    # whole node, so its partner adds at most PB(C) = max_b sum{c_i : i not in C, b in R_i}.
    # C is cut down to a few heavy mechanisms (those of the heaviest record) so that PB is
    # computed (a max-cell search without C) for few sets; any subset of C gives a valid bound.
    tracked = full_plain.copy()
    if single.cells:
        heavy = np.flatnonzero(inst.hit_mask(single.cells[0]) & plain)
        tracked[heavy[np.argsort(-wf[heavy], kind="stable")][:_TRACKED]] = True
    partner_cache: dict[bytes, float] = {}

    def partner_bound(cert_tags: np.ndarray) -> float:
        dropped = np.zeros(len(inst.mechs), dtype=bool)
        dropped[cert_tags] = True
        dropped &= tracked
        dropped |= full_plain  # certain everywhere
        key = np.packbits(dropped).tobytes()
        if key not in partner_cache:
            if not (dropped & ~full_plain).any():
                partner_cache[key] = w_star - plain_full
            else:
                partner_cache[key] = _max_weight_bound(
                    inst, wf, sc, ~dropped[inst.row_mech], budget
                )
        return partner_cache[key]

    def a_floor(cert_tags: np.ndarray) -> float:  # w(a) + PB(C) must beat best
        return sc.above(pairs.best - partner_bound(cert_tags))

    def enumerate_cells(
        lo: np.ndarray,
        hi: np.ndarray,
        tags: np.ndarray,
        box: tuple[np.ndarray, np.ndarray],
        thr: Callable[[], float],
        floor: Callable[[np.ndarray], float],
        partner: float,
        keep: bool,
        pair: bool,
    ) -> None:
        """Cells above thr() and floor(); pair each with the table; a cut adds partner."""
        nonlocal opened

        def leaf(v: float, lb: np.ndarray, hb: np.ndarray) -> None:
            pairs.add(v, _rep(lb, hb), keep=keep, pair=pair)

        o = _bb(lo, hi, wf[tags], box[0], box[1], everything, thr, leaf, budget, tags, floor)
        if o != _NEG_INF:
            opened = max(opened, o + partner - plain_full)

    def tau() -> float:  # no pair with a cell this light beats best (partner <= W* - F)
        return sc.above(pairs.best - w_star + plain_full)

    rm = inst.row_mech
    if domains is None:
        if single.cells:  # a good first pair: the heaviest record and its best partner
            pairs.seed(single.cells[0], w_rows)
        # 1. heavy cells (> (best + F) / 2), every pair among them
        enumerate_cells(
            inst.lo,
            inst.hi,
            rm,
            (full_lo, full_hi),
            lambda: max(tau(), sc.above((pairs.best + plain_full) / 2)),
            a_floor,
            w_star,
            keep=True,
            pair=True,
        )
        # 2. lighter cells: a pair beating best needs a heavy partner, already in the table
        if pairs.size:
            enumerate_cells(
                inst.lo,
                inst.hi,
                rm,
                (full_lo, full_hi),
                tau,
                a_floor,
                w_star,
                keep=False,
                pair=True,
            )
    else:
        # 1. cells in the new regions heavy enough to be in a better pair
        for dom in domains:
            m, lo, hi, box = _meeting(inst, dom)
            enumerate_cells(
                lo, hi, rm[m], (box[0], box[1]), tau, a_floor, w_star, keep=True, pair=True
            )  # pairs inside them count: best rises
        # 2. their partners anywhere (pairs inside the new regions included); a partner in a
        # node whose covering plain mechanisms are C adds to a at most w(a) - (a's part of C)
        if pairs.size:
            top = pairs.max_weight()

            def b_floor(cert_tags: np.ndarray) -> float:
                common = np.zeros(len(inst.mechs), dtype=bool)
                common[cert_tags] = True
                common &= plain
                return sc.above(pairs.best - pairs.max_minus(common))

            enumerate_cells(
                inst.lo,
                inst.hi,
                rm,
                (full_lo, full_hi),
                lambda: sc.above(pairs.best - top + plain_full),
                b_floor,
                top,
                keep=False,
                pair=True,
            )
    opened = max(opened, pairs.opened)
    out = prev
    done: set[tuple[Cell, Cell]] = set()
    for v, a, b in pairs.cands:
        if not sc.keep(v, pairs.best) or (a, b) in done:
            continue
        done.add((a, b))
        value = _pair_value(inst, j, a, b)
        if sc.denom is not None and value != sc.exact(v):
            raise InternalError(f"pair search value {v} disagrees with exact {value}")
        if value > out.value:  # W* only prunes: an over-estimate of it costs time, not truth
            out = _Best(value, True, (a, b))
    out = _with_open(out, sc, opened)
    if cap < out.value:
        out = _Best(cap, False, out.cells, cap_note)
    return out


_TRACKED = 8  # heavy mechanisms whose coverage the replace search uses in partner bounds


def _max_weight_bound(
    inst: _Instance, wf: np.ndarray, sc: _Scale, rows: np.ndarray, budget: _Budget
) -> float:
    """An upper bound (float, safe in both scales) on the heaviest cell of the given rows."""
    best = [0.0]

    def leaf(v: float, lb: np.ndarray, hb: np.ndarray) -> None:
        best[0] = max(best[0], v)

    lo_box, hi_box = inst.full_box()
    everything = np.ones(len(inst.axes), dtype=bool)
    o = _bb(
        inst.lo[rows],
        inst.hi[rows],
        wf[inst.row_mech[rows]],
        lo_box,
        hi_box,
        everything,
        lambda: sc.above(best[0]),
        leaf,
        budget,
    )
    return max(best[0], o) + (0.0 if sc.denom is not None else sc.tol)


class _PairTable:
    """Heavy cells found so far, and the best replace pair among them (vectorised).

    For a new cell x against kept cells b: V = w(x) + w(b) - S(x, b), where S sums the plain
    mechanisms x hits that b hits too, and the GROUP BYs x hits with a pinned key that b hits
    with the same key atoms.
    """

    def __init__(
        self,
        inst: _Instance,
        wf: np.ndarray,
        sc: _Scale,
        best: float,
        w_star: float,
        plain_full: float,
        budget: _Budget,
    ) -> None:
        self.inst, self.wf, self.sc, self.best = inst, wf, sc, best
        self.w_star, self.plain_full = w_star, plain_full
        self.budget = budget
        self.cells: list[Cell] = []
        d, m = len(inst.axes), len(inst.mechs)
        self._cells = np.zeros((16, d), dtype=np.int64)
        self._weights = np.zeros(16, dtype=np.float64)
        self._hits = np.zeros((16, m), dtype=bool)
        self.cands: list[tuple[float, Cell, Cell]] = []
        self.opened = _NEG_INF

    @property
    def size(self) -> int:
        return len(self.cells)

    def max_weight(self) -> float:
        return float(self._weights[: self.size].max())

    def max_minus(self, common: np.ndarray) -> float:
        """max over kept cells a of w(a) - sum{c_i : i in ``common``, a hits i}."""
        n = self.size
        ids = np.flatnonzero(common)
        ws = self._weights[:n]
        if ids.size:
            ws = ws - self._hits[:n][:, ids].astype(np.float64) @ self.wf[ids]
        return float(ws.max())

    def _append(self, x: Cell, v: float, hx: np.ndarray) -> None:
        n = self.size
        if n == len(self._weights):  # grow by doubling: appends stay O(1) amortised
            self._cells = np.vstack((self._cells, np.zeros_like(self._cells)))
            self._weights = np.concatenate((self._weights, np.zeros_like(self._weights)))
            self._hits = np.vstack((self._hits, np.zeros_like(self._hits)))
        self._cells[n], self._weights[n], self._hits[n] = x, v, hx
        self.cells.append(x)

    def seed(self, a: Cell, w_rows: np.ndarray) -> None:
        """Start from a real pair: a and the heaviest cell among the mechanisms a misses."""
        inst, sc = self.inst, self.sc
        ha = inst.hit_mask(a)
        rows = ~ha[inst.row_mech]
        lo_box, hi_box = inst.full_box()
        found: list[tuple[float, Cell]] = [(0.0, a)]

        def leaf(v: float, lb: np.ndarray, hb: np.ndarray) -> None:
            if v > found[-1][0]:
                found.append((v, _rep(lb, hb)))

        everything = np.ones(len(inst.axes), dtype=bool)
        _bb(
            inst.lo[rows],
            inst.hi[rows],
            w_rows[rows],
            lo_box,
            hi_box,
            everything,
            lambda: sc.above(found[-1][0]),
            leaf,
            self.budget,
        )
        b = found[-1][1]
        hb = inst.hit_mask(b)
        value = 0.0
        for i in np.flatnonzero(ha | hb).tolist():
            twice = ha[i] and hb[i] and inst.part[i] and not inst.forced_same(i, a, b)
            value += float(self.wf[i]) * (2 if twice else 1)
        self.best = max(self.best, value)
        self.cands.append((value, a, b))

    def _pinned(self, x: Cell, hx: np.ndarray) -> dict[tuple[int, ...], list[int]]:
        """GROUP BYs x hits whose key atoms x pins, by key columns."""
        out: dict[tuple[int, ...], list[int]] = {}
        for i in np.flatnonzero(hx & (self.inst.part == 1)).tolist():
            keys = self.inst.mechs[i].keys
            if all(x[k] % 2 == 0 for k in keys):
                out.setdefault(keys, []).append(i)
        return out

    def add(self, v: float, x: Cell, *, keep: bool, pair: bool) -> None:
        inst, sc = self.inst, self.sc
        # each evaluation scans the kept cells: charge the budget for that work
        cost = 1 + (self.size * len(self.inst.mechs)) // 131072
        if self.budget.left < cost:
            self.budget.left = 0
            self.opened = max(self.opened, v + self.w_star - self.plain_full)
            return
        self.budget.left -= cost
        hx = inst.hit_mask(x)
        if keep:  # x's own cell holds a second record: (x, x) is a pair, and x joins the table
            self._append(x, v, hx)
        if pair and self.cells:
            n = self.size
            cells, ws, hits = self._cells[:n], self._weights[:n], self._hits[:n]
            near = ws > sc.above(self.best - v + self.plain_full) - (
                1.0 if sc.denom is not None else 0.0
            )  # partners that may beat best: w(b) > best - w(x) + F (ties kept)
            cells, ws, hits = cells[near], ws[near], hits[near]
            idx = np.flatnonzero(near)
            shared = np.zeros(len(ws), dtype=np.float64)
            plain = np.flatnonzero(hx & (inst.part == 0))
            if plain.size:
                shared += hits[:, plain].astype(np.float64) @ self.wf[plain]
            for keys, ids in self._pinned(x, hx).items():
                same = np.all(cells[:, keys] == np.array([x[k] for k in keys]), axis=1)
                shared += same * (hits[:, ids].astype(np.float64) @ self.wf[ids])
            vals = v + ws - shared
            if vals.size:
                r = int(np.argmax(vals))
                if sc.keep(float(vals[r]), self.best):
                    self.best = max(self.best, float(vals[r]))
                    if sc.denom is not None:  # exact sums: the argmax is the one candidate
                        self.cands.append((float(vals[r]), x, self.cells[int(idx[r])]))
                    else:
                        for q in np.flatnonzero(vals >= self.best - sc.tol).tolist():
                            self.cands.append((float(vals[q]), x, self.cells[int(idx[q])]))


def _pair_value(inst: _Instance, j: int, a: Cell, b: Cell) -> Fraction:
    """Exact weight of replacing a record of cell a by one of cell b (Cor IV.13)."""
    ha, hb = inst.hit_mask(a), inst.hit_mask(b)
    total = Fraction(0)
    for i in np.flatnonzero(ha | hb).tolist():
        c = inst.mechs[i].wx[j]
        twice = ha[i] and hb[i] and inst.part[i] != 0 and not inst.forced_same(i, a, b)
        total += 2 * c if twice else c
    return total
