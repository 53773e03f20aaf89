"""Units of up to k rows: the heaviest set of <= k records sharing the unit-level values.

A unit pays, per mechanism, its one-group cost times φ summed over the groups it meets:
once per group for flat costs (CSF'24 Example IV.5), r or r² times for r of its rows in a
group for per-row costs (:mod:`privplan.accounting.model`), within the bounds of m groups and
c rows per group. Closed forms where they are exact, else a greedy unit against a proven
bound per slab of unit-level values, and an exact search on small slabs.

Privacy: the heaviest unit of at most k rows (m groups, c rows each) is found or bounded from above.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from privplan.accounting.model import (
    GROWTHS,
    growth_factor,
    row_multiplier,
    unit_multiplier,
)
from privplan.accounting.solver.atoms import _NEG_INF, Cell, Cell2, _Best
from privplan.accounting.solver.instance import _Instance
from privplan.accounting.solver.records import _max_cell, _with_open
from privplan.accounting.solver.search import _bb, _Budget, _meeting, _rep
from privplan.errors import InternalError


def _mult(inst: _Instance, k: int, ucols: frozenset[int]) -> np.ndarray:
    """The most one unit of <= k rows can make mechanism i pay, in one-group costs
    (:func:`~privplan.accounting.model.unit_multiplier`; flat: the groups it can touch)."""
    out = np.ones(len(inst.mechs), dtype=np.float64)
    for i, m in enumerate(inst.mechs):
        out[i] = unit_multiplier(
            GROWTHS[m.growth], k, partitioned=bool(m.part),
            same_group=m.part == 1 and set(m.keys) <= ucols,  # every row has the same key
            max_groups=m.max_groups, max_rows_per_group=m.row_cap)
    return out


def _rows_factor(inst: _Instance, k: int, mechs: Iterable[int]) -> int:
    """The largest per-row factor R among ``mechs``: a unit of k rows pays at most k·R times
    its heaviest record (:func:`~privplan.accounting.model.row_multiplier`)."""
    out = 1
    for i in mechs:
        m = inst.mechs[i]
        out = max(out, row_multiplier(GROWTHS[m.growth], k, partitioned=bool(m.part),
                                      max_rows_per_group=m.row_cap))
    return out


def _additive_power(inst: _Instance, k: int) -> int | None:
    """p when every mechanism's cost is one-row cost x r^p for r rows, whatever the groups
    (the same linear or square growth everywhere, no cap on a unit's rows per group), else None.

    Then a unit's weight is at most Σ_i w_i·n_i·k^(p-1) <= k^p x its heaviest record's weight
    (n_i = its rows in R_i; r² <= k·r), and k copies of the heaviest record reach it: they
    share every key, since a cell's records can share any value its atoms allow.
    """
    growths = set()
    for m in inst.mechs:
        if m.growth == 0 or (m.part and m.row_cap is not None and m.row_cap < k):
            return None
        growths.add(m.growth)
    return growths.pop() if len(growths) == 1 else None


def _max_unit(
    inst: _Instance,
    j: int,
    k: int,
    ucols: frozenset[int],
    domains: Sequence[Cell2] | None,
    single: _Best,
    prev: _Best | None,
    budget: _Budget,
    bound_budget: _Budget,
) -> _Best:
    """max over units S (<= k records sharing the unit-level values) of S's weight.

    Add/remove of a unit changes every mechanism a row of S is in; a GROUP BY pays
    c_i * min(m, #groups of S in R_i) (Example IV.5). Units live in *slabs* (one atom per
    unit-level column); per slab the proven bound is min(A, k * B): A = sum of c_i * mult_i over
    the mechanisms meeting the slab (a unit affects no other, nor more groups), B = heaviest
    record of the slab (each row adds at most its own weight). A greedy unit that reaches the
    bound proves it exact; small slabs are searched exactly (:meth:`_UnitCells.search`). With
    ``domains`` only the slabs they meet are searched (others keep ``prev``): a slab's units
    change only if a new region meets it.
    """
    sc = inst.scales[j]
    best = prev if prev is not None else _Best(Fraction(0), True)
    if not inst.mechs or not inst.wf[:, j].any():
        return best
    power = _additive_power(inst, k)
    if power is not None:  # closed form: k copies of the heaviest record
        note = f"{k}^{power} x the heaviest record ({single.bound_note})" if single.bound_note \
            else ""
        return _Best(single.value * k**power, single.exact, single.cells[:1] * k, note)
    mult = _mult(inst, k, ucols)
    state = {"best": best}
    if not ucols:  # one slab: every record; its heaviest record is the add/remove maximum
        full_lo, full_hi = inst.full_box()
        return _unit_slab(
            inst, j, k, ucols, mult, full_lo, full_hi, best, single, budget, bound_budget
        )
    eligible = np.zeros(len(inst.axes), dtype=bool)
    eligible[list(ucols)] = True
    w_slab = (inst.wf[:, j] * mult)[inst.row_mech]

    def thr() -> float:
        return sc.above(sc.to_float(state["best"].value))

    def slab(v: float, lo_box: np.ndarray, hi_box: np.ndarray) -> None:
        state["best"] = _unit_slab(
            inst, j, k, ucols, mult, lo_box, hi_box, state["best"], None, budget, bound_budget
        )

    for dom in domains if domains is not None else [inst.full_box_tuple()]:
        box = tuple(
            (lo, hi) if c in ucols else (0, inst.axes[c].size - 1) for c, (lo, hi) in enumerate(dom)
        )
        m, lo, hi, arr = _meeting(inst, box)
        opened = _bb(lo, hi, w_slab[m], arr[0], arr[1], eligible, thr, slab, bound_budget)
        if opened != _NEG_INF:  # slabs not visited: bounded by their A
            state["best"] = _with_open(state["best"], sc, opened)
    return state["best"]


def _unit_slab(
    inst: _Instance,
    j: int,
    k: int,
    ucols: frozenset[int],
    mult: np.ndarray,
    lo_box: np.ndarray,
    hi_box: np.ndarray,
    best: _Best,
    heaviest: _Best | None,
    budget: _Budget,
    bound_budget: _Budget,
) -> _Best:
    """The best unit of one slab if it beats ``best`` (exact, or its proven bound)."""
    box = tuple(zip(lo_box.tolist(), hi_box.tolist()))
    m, lo, hi, _ = _meeting(inst, box)
    in_slab = np.unique(inst.row_mech[m]).tolist()
    a_exact = sum((inst.mechs[i].wx[j] * int(mult[i]) for i in in_slab), Fraction(0))
    if a_exact <= best.value:
        return best
    if heaviest is None:
        heaviest = _max_cell(inst, j, [box], None, bound_budget)
    per_row = k * _rows_factor(inst, k, in_slab)
    bound = min(a_exact, per_row * heaviest.value)
    if bound <= best.value:
        return best
    note = (
        f"min(sum over the mechanisms a unit can meet, {per_row} x the heaviest record); "
        "the exact search limit was reached"
    )
    fallback = _Best(bound, False, (_rep(lo_box, hi_box),), note)
    if budget.left <= 0:
        return fallback
    # every cell of the slab with weight, while they stay few enough to search
    sc = inst.scales[j]
    wf = inst.wf[:, j]
    cells: list[Cell] = []
    not_unit = np.ones(len(inst.axes), dtype=bool)
    not_unit[list(ucols)] = False
    floor = 0.5 if sc.denom is not None else float(wf[wf > 0].min()) / 2
    limit = _Budget(min(budget.left, 64 + budget.left // 64))  # cells and nodes: small slabs only

    def collect(v: float, lb: np.ndarray, hb: np.ndarray) -> None:
        cells.append(_rep(lb, hb))
        if len(cells) > limit.left:
            limit.left = 0

    opened = _bb(
        lo, hi, wf[inst.row_mech[m]], lo_box, hi_box, not_unit, lambda: floor, collect, limit
    )
    budget.left -= len(cells)
    if opened != _NEG_INF or limit.left <= 0:
        return fallback
    growing = any(inst.mechs[i].growth for i in in_slab)
    table: _UnitCells | _GrowthCells = (
        _GrowthCells(inst, j, ucols, cells) if growing else _UnitCells(inst, j, ucols, cells))
    found: tuple[Fraction, tuple[Cell, ...]] | None = table.greedy(k)
    if found is not None and found[0] < bound:
        found = table.search(k, bound, found, budget)
    if found is None:
        return fallback
    value, chosen = found
    if value <= best.value:
        return best
    if isinstance(table, _GrowthCells) and not table.realizable(
            [table.cells.index(c) for c in chosen]):
        return _Best(value, False, chosen, "mechanisms split free group keys differently; "
                     "each split was taken at its worst")
    return _Best(value, True, chosen)  # proven this slab's maximum, above every earlier one


class _UnitCells:
    """The weighted cells of one slab, for the max-coverage search over units of <= k rows.

    A cell stands for as many records as needed; a record's group in a partition is the
    cell's key atoms, or a group of its own (id -1) when its key can differ from every other
    row's (opaque keys, or an open atom on a key column that is not unit-level).
    """

    def __init__(self, inst: _Instance, j: int, ucols: frozenset[int], cells: list[Cell]) -> None:
        self.inst, self.j, self.cells = inst, j, cells
        self.sc = inst.scales[j]
        self.wf = inst.wf[:, j]
        self.hits = np.array([inst.hit_mask(c) for c in cells], dtype=bool).reshape(
            len(cells), len(inst.mechs)
        )
        self.plain = inst.part == 0
        self.parts = np.flatnonzero(inst.part != 0)
        self.groups = np.full((len(cells), len(inst.mechs)), -1, dtype=np.int64)
        for i in self.parts.tolist():
            keys: dict[Any, int] = {}
            for r, cell in enumerate(cells):
                g = _group_id(inst, i, cell, ucols)
                if g is not None:
                    self.groups[r, i] = keys.setdefault(g, len(keys))
        cap = [m.max_groups for m in inst.mechs]
        self.cap = np.array([c if c is not None else 1 << 30 for c in cap], dtype=np.int64)

    def value(self, chosen: Sequence[int], *, exact: bool) -> Any:
        """Weight of a unit with one row in each chosen cell (repeats are distinct rows)."""
        hits = self.hits[list(chosen)]
        touched = hits.any(axis=0)
        count = np.zeros(len(self.inst.mechs), dtype=np.int64)
        for i in self.parts.tolist():
            rows = hits[:, i]
            g = self.groups[list(chosen), i][rows]
            count[i] = min(
                int(np.count_nonzero(g == -1)) + len(set(g[g >= 0].tolist())), int(self.cap[i])
            )
        mult = np.where(self.plain, touched.astype(np.int64), count)
        ids = np.flatnonzero(mult).tolist()
        if exact:
            return sum((self.inst.mechs[i].wx[self.j] * int(mult[i]) for i in ids), Fraction(0))
        return float(self.wf[ids] @ mult[ids]) if ids else 0.0

    def greedy(self, k: int) -> tuple[Fraction, tuple[Cell, ...]]:
        """Add the row of largest gain, k times: a lower bound, exact if it meets the upper one.

        Gains are vectorised over cells: a plain mechanism not yet touched, and a partition
        below its cap whose group for that row is not taken yet (own groups never are).
        """
        parts = self.parts
        hits_p = self.hits[:, parts]
        groups_p = self.groups[:, parts]
        used = np.zeros(hits_p.shape, dtype=bool)  # the row's group is already in the unit
        count = np.zeros(len(parts), dtype=np.int64)
        open_plain = self.plain.copy()
        chosen: list[int] = []
        for _ in range(k):
            gain = self.hits[:, open_plain].astype(np.float64) @ self.wf[open_plain]
            if parts.size:
                room = (count < self.cap[parts]).astype(np.float64) * self.wf[parts]
                gain += (hits_p & ~used).astype(np.float64) @ room
            r = int(np.argmax(gain)) if gain.size else 0
            if not gain.size or gain[r] <= 0:
                break
            chosen.append(r)
            open_plain &= ~self.hits[r]
            new = hits_p[r] & ~used[r]
            count += new
            g = groups_p[r]
            used |= (groups_p == g) & (g >= 0) & hits_p[r]
        return self.value(chosen, exact=True), tuple(self.cells[r] for r in chosen)

    def search(
        self,
        k: int,
        bound: Fraction,
        start: tuple[Fraction, tuple[Cell, ...]],
        budget: _Budget,
    ) -> tuple[Fraction, tuple[Cell, ...]] | None:
        """Exact branch and bound over multisets of <= k cells; None if the budget ran out.

        The unit weight is a coverage function with concave caps, so submodular: r more rows
        add at most the r largest current marginal gains, where a cell counts once at its
        gain and then, for further copies (distinct rows of the same cell), only its gain in
        partitions where each row is a group of its own. Cells are added in index order
        (multisets, not sequences); the search stops when a unit reaches ``bound``.
        """
        # (one function on purpose: the search's nodes are closures over shared bounds and
        # counters on the hot path; split up, every node would pass and return them)
        sc = self.sc
        exact_ints = sc.denom is not None  # then reaching the bound in floats is exact
        bound_f = sc.to_float(bound)
        parts = self.parts
        hits, hits_p, groups_p = self.hits, self.hits[:, parts], self.groups[:, parts]
        own_p = groups_p == -1
        w_parts, cap_parts = self.wf[parts], self.cap[parts]
        top = [sc.to_float(start[0])]
        cands: list[tuple[float, tuple[int, ...]]] = []
        cut = [False]

        def node(
            last: int,
            chosen: list[int],
            cur: float,
            open_plain: np.ndarray,
            used: np.ndarray,
            count: np.ndarray,
        ) -> None:
            left = k - len(chosen)
            room = (count < cap_parts).astype(np.float64) * w_parts
            gain = hits[last:, open_plain].astype(np.float64) @ self.wf[open_plain]
            again = np.zeros_like(gain)
            if parts.size:
                gain += (hits_p[last:] & ~used[last:]).astype(np.float64) @ room
                again = (hits_p[last:] & own_p[last:]).astype(np.float64) @ room
            items = np.sort(np.concatenate((gain, np.repeat(again, left - 1))))[::-1]
            if cur + float(items[:left].sum()) < sc.above(top[0]):
                return
            rest = float(items[: left - 1].sum())  # what rows after the next can add
            for idx in np.argsort(-gain, kind="stable").tolist():
                if cut[0] or (exact_ints and top[0] >= bound_f):
                    return
                v = cur + float(gain[idx])
                if gain[idx] <= 0 or v + rest < sc.above(top[0]):
                    return  # sorted by gain: no later cell does better
                if not budget.take():
                    cut[0] = True
                    return
                c = last + idx
                nxt = [*chosen, c]
                if sc.keep(v, top[0]):
                    top[0] = max(top[0], v)
                    cands.append((v, tuple(nxt)))
                if left > 1:
                    g = groups_p[c]
                    node(
                        c,
                        nxt,
                        v,
                        open_plain & ~hits[c],
                        used | ((groups_p == g) & (g >= 0) & hits_p[c]),
                        count + (hits_p[c] & ~used[c]),
                    )

        node(
            0,
            [],
            0.0,
            self.plain.copy(),
            np.zeros(hits_p.shape, dtype=bool),
            np.zeros(len(parts), dtype=np.int64),
        )
        out = start
        for v, idxs in cands:
            if sc.keep(v, top[0]):
                value = self.value(idxs, exact=True)
                if sc.denom is not None and value != sc.exact(v):
                    raise InternalError(f"unit search value {v} disagrees with exact {value}")
                if value > out[0]:
                    out = (value, tuple(self.cells[r] for r in idxs))
        if cut[0] and out[0] < bound:
            return None  # unfinished, and not at the bound: no proof it is the maximum
        return out


class _GrowthCells:
    """The weighted cells of one slab, when some cost grows with a unit's rows in a group.

    A unit is a multiset of cells (one entry per row). Mechanism i pays w_i · Σ φ_i(r_g) over
    the (at most m) groups it gives most, with r_g capped at the rows a unit may keep per group
    (:func:`~privplan.accounting.model.growth_factor`). A row whose key is fixed by its cell
    is in that cell's group; rows whose key may take values no other cell's can (an open atom
    of a non-unit-level key column, or opaque keys) form a *pool* per key-atom tuple, which the
    adversary splits into groups as it likes: singletons for flat costs (more groups), groups
    filled to the cap for linear and square ones (φ(r)/r does not decrease, so the filled
    split majorises every other). Each mechanism's split is chosen on its own, which can only
    over-charge. Exact search by branch and bound with the bound Σ_i w_i·Ψ_i(n_i + rows left)
    (Ψ_i: the most n rows can make i pay, :func:`unit_multiplier`), which holds for any split.
    """

    _BIG = 1 << 30

    def __init__(self, inst: _Instance, j: int, ucols: frozenset[int], cells: list[Cell]) -> None:
        self.inst, self.j, self.cells = inst, j, cells
        self.sc = inst.scales[j]
        self.wf = inst.wf[:, j]
        n = len(inst.mechs)
        self.hits = np.array([inst.hit_mask(c) for c in cells], dtype=bool).reshape(len(cells), n)
        self.active = [i for i in np.flatnonzero(self.hits.any(axis=0)).tolist()
                       if self.wf[i] > 0 or inst.mechs[i].wx[j] > 0]
        self.groups = np.zeros((len(cells), n), dtype=np.int64)  # >= 0 fixed, < 0 pools
        self.mechs = {i: inst.mechs[i] for i in self.active}
        for i in self.active:
            m = self.mechs[i]
            if not m.part:
                continue
            ids: dict[Any, int] = {}
            for r, cell in enumerate(cells):
                g = _group_id(inst, i, cell, ucols)
                if g is None:  # free: pooled with the rows of the same key atoms
                    pool = ("pool", tuple(cell[c] for c in m.keys)) if m.part == 1 else ("pool",)
                    self.groups[r, i] = -2 - ids.setdefault(pool, len(ids))
                else:
                    self.groups[r, i] = ids.setdefault(("fixed", g), len(ids))

    def _mult_of(self, i: int, counts: Mapping[int, int], chunk: int | None = 0) -> int:
        """What mechanism i pays (in one-group costs) for a unit with ``counts`` rows per
        group id (pools: negative ids), its pools split the worst way for i (``chunk`` 0),
        or into groups of ``chunk`` rows (None: one row each)."""
        m = self.mechs[i]
        growth = GROWTHS[m.growth]
        if not m.part:
            return growth_factor(growth, sum(counts.values()))
        cap = m.row_cap if m.row_cap is not None else self._BIG
        if chunk == 0:
            chunk = None if growth == "flat" else cap
        sizes: list[int] = []
        for gid, r in counts.items():
            if gid >= 0:
                sizes.append(min(r, cap))
            elif chunk is None:
                sizes.extend([1] * r)
            else:
                full, rest = divmod(r, chunk)
                sizes.extend([min(chunk, cap)] * full + ([min(rest, cap)] if rest else []))
        values = sorted((growth_factor(growth, x) for x in sizes), reverse=True)
        return sum(values[: m.max_groups] if m.max_groups is not None else values)

    def realizable(self, chosen: Sequence[int]) -> bool:
        """Can one choice of key values split every pool as :meth:`_mult_of` assumes?

        Yes when one split serves every mechanism with >= 2 of the unit's rows in a pool: one
        row per group (every free key value distinct) or all in one group (one value per free
        key column) for any keys, or groups of c rows when those mechanisms share their key
        columns. Otherwise the value is only an upper bound.
        """
        pooled = {i: c for i, c in self._counts(chosen).items()
                  if self.mechs[i].part and any(g < 0 and r >= 2 for g, r in c.items())}
        if not pooled:
            return True
        wanted = {i: self._mult_of(i, c) for i, c in pooled.items()}
        chunks: set[int | None] = {None, self._BIG}
        if len({(self.mechs[i].part, self.mechs[i].keys) for i in pooled}) == 1:
            chunks |= {self.mechs[i].row_cap for i in pooled if self.mechs[i].row_cap}
        return any(all(self._mult_of(i, c, chunk) == wanted[i] for i, c in pooled.items())
                   for chunk in chunks)

    def _counts(self, chosen: Sequence[int]) -> dict[int, dict[int, int]]:
        out: dict[int, dict[int, int]] = {i: {} for i in self.active}
        for r in chosen:
            for i in np.flatnonzero(self.hits[r]).tolist():
                if i in out:
                    g = int(self.groups[r, i])
                    out[i][g] = out[i].get(g, 0) + 1
        return out

    def value(self, chosen: Sequence[int], *, exact: bool) -> Any:
        """Weight of a unit with one row in each chosen cell (repeats are distinct rows)."""
        mult = {i: self._mult_of(i, c) for i, c in self._counts(chosen).items() if c}
        if exact:
            return sum((self.inst.mechs[i].wx[self.j] * v for i, v in mult.items()), Fraction(0))
        return float(sum(float(self.wf[i]) * v for i, v in mult.items()))

    def _gains(self, counts: dict[int, dict[int, int]], mults: dict[int, int],
               first: int = 0) -> np.ndarray:
        """The weight one more row in each cell (from index ``first``) adds to the unit."""
        gain = np.zeros(len(self.cells) - first)
        hits, groups = self.hits[first:], self.groups[first:]
        for i in self.active:
            col = hits[:, i]
            if not col.any():
                continue
            gids = groups[:, i]
            for g in np.unique(gids[col]).tolist():
                after = dict(counts[i])
                after[g] = after.get(g, 0) + 1
                delta = self._mult_of(i, after) - mults[i]
                if delta:
                    gain[col & (gids == g)] += float(self.wf[i]) * delta
        return gain

    def _add(self, counts: dict[int, dict[int, int]], mults: dict[int, int],
             r: int) -> tuple[dict[int, dict[int, int]], dict[int, int]]:
        counts = dict(counts)
        mults = dict(mults)
        for i in np.flatnonzero(self.hits[r]).tolist():
            if i in counts:
                g = int(self.groups[r, i])
                counts[i] = {**counts[i], g: counts[i].get(g, 0) + 1}
                mults[i] = self._mult_of(i, counts[i])
        return counts, mults

    def greedy(self, k: int) -> tuple[Fraction, tuple[Cell, ...]]:
        """Add the row of largest gain, k times: a unit, so a lower bound on the maximum."""
        counts: dict[int, dict[int, int]] = {i: {} for i in self.active}
        mults = {i: 0 for i in self.active}
        chosen: list[int] = []
        for _ in range(k):
            gain = self._gains(counts, mults)
            if not gain.size or gain.max() <= 0:
                break
            r = int(np.argmax(gain))
            chosen.append(r)
            counts, mults = self._add(counts, mults, r)
        return self.value(chosen, exact=True), tuple(self.cells[r] for r in chosen)

    def _ceiling(self, k: int, counts: dict[int, dict[int, int]], mults: dict[int, int],
                 first: int, left: int) -> float:
        """An upper bound on any unit extending the current one with ``left`` rows taken from
        cells ``first``...: mechanism i can at most reach Ψ_i(its rows + left)."""
        reach: np.ndarray = np.asarray(self.hits[first:].any(axis=0))
        total = 0.0
        for i in self.active:
            if not reach[i] or left == 0:
                total += float(self.wf[i]) * mults[i]
                continue
            m = self.mechs[i]
            n = min(k, sum(counts[i].values()) + left)
            total += float(self.wf[i]) * unit_multiplier(
                GROWTHS[m.growth], n, partitioned=bool(m.part), max_groups=m.max_groups,
                max_rows_per_group=m.row_cap)
        return total

    def search(
        self,
        k: int,
        bound: Fraction,
        start: tuple[Fraction, tuple[Cell, ...]],
        budget: _Budget,
    ) -> tuple[Fraction, tuple[Cell, ...]] | None:
        """Exact branch and bound over multisets of <= k cells; None if the budget ran out."""
        sc = self.sc
        top = [sc.to_float(start[0])]
        bound_f = sc.to_float(bound)
        cands: list[tuple[float, tuple[int, ...]]] = []
        cut = [False]
        exact_ints = sc.denom is not None

        def node(first: int, chosen: list[int], cur: float,
                 counts: dict[int, dict[int, int]], mults: dict[int, int]) -> None:
            left = k - len(chosen)
            if left == 0 or self._ceiling(k, counts, mults, first, left) < sc.above(top[0]):
                return
            gain = self._gains(counts, mults, first)
            for idx in np.argsort(-gain, kind="stable").tolist():
                if cut[0] or (exact_ints and top[0] >= bound_f):
                    return
                if not budget.take():
                    cut[0] = True
                    return
                c = first + idx
                nxt = [*chosen, c]
                v = cur + float(gain[idx])
                if sc.keep(v, top[0]):
                    top[0] = max(top[0], v)
                    cands.append((v, tuple(nxt)))
                node(c, nxt, v, *self._add(counts, mults, c))

        node(0, [], 0.0, {i: {} for i in self.active}, {i: 0 for i in self.active})
        out = start
        for v, idxs in cands:
            if sc.keep(v, top[0]):
                value = self.value(idxs, exact=True)
                if value > out[0]:
                    out = (value, tuple(self.cells[r] for r in idxs))
        if cut[0] and out[0] < bound:
            return None  # unfinished, and not at the bound: no proof it is the maximum
        return out


def _group_id(inst: _Instance, i: int, cell: Cell, ucols: frozenset[int]) -> Any:
    """Group of a record of ``cell`` in partition i, or None for a group no other row shares.

    Keys of rows in an open atom of a non-unit-level key column can all differ (chosen so);
    opaque keys can always differ; otherwise the key is fixed by the cell's atoms (a
    unit-level column holds one value for the whole unit, whatever its atom).
    """
    m = inst.mechs[i]
    if m.part == 2 or any(cell[c] % 2 == 1 and c not in ucols for c in m.keys):
        return None
    return tuple(cell[c] for c in m.keys)
