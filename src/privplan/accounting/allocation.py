"""Budget allocation for a planned batch of queries (a report), under the general composition theorem.

A report runs the same queries every period, with parameters fixed before any answer is seen.
Giving query q the budget b_q scales every mechanism of q linearly (the planner splits a query's
budget over its own mechanisms through the composition theorem, :mod:`privplan.planner`), so with
u_i the cost of mechanism i per unit of its query's budget, the composed cost is

    cost(b) = max over neighbouring changes e of  Σ_q b_q · a_q(e)   (+ what the ledger already holds)

with a_q(e) = Σ_{i of q affected by e} v_i(e) · u_i (v_i = how many groups of i the change pays,
CSF'24 Thms IV.11, IV.12, Cor. IV.13, Example IV.5), capped by q's own composed unit cost (a change
never costs q more than q alone can cost: that is what the planner calibrated to). Only *maximal*
sets of co-affected mechanisms matter (coefficients grow with the set), so one linear constraint
per cell of the region arrangement is enough:

* add/remove, one row per unit: the cells of the arrangement of all regions. Every column a
  region constrains is cut into atoms (NULL, each end point, the open gaps between them, as the
  solver does); each atom's *coverage class* is the set of region boxes containing it; a cell is
  one atom per column and holds the AND of its classes. Only classes maximal within their column
  can form a maximal cell, so the maximal cells are found among products of those
  (:func:`co_affected_sets`). Exact — the linear model *is* the composed cost, which is then
  computed from the cells in exact fractions (no solver call needed).
* replace: a change moves a record between two cells, so the events are pairs of maximal cells
  (a GROUP BY holding both pays two groups); conservative where the solver knows the two records
  must share a group key (the cap above mostly repairs that).
* units of k > 1 rows: a unit stays inside one cell of the unit-level columns; it may meet every
  mechanism meeting that cell, as much as :func:`~privplan.accounting.model.unit_multiplier`
  allows (a flat GROUP BY min(m, k) groups; a cost growing with rows k or more). Conservative.
* several private tables: table maxima add (one person may be in every table): an epigraph
  variable per table.
* more than ``cell_limit`` products: the column with most classes is merged (its constraints are
  ignored, so regions only grow) until few enough remain — conservative, never optimistic.

Variance: a query's noise std scales as 1/b (Laplace, pure DP / the ε of (ε, δ)) or 1/sqrt(b)
(Gaussian, ρ; for μ-GDP in the weight μ²). With κ_q the query's relative variance at the whole
budget (1, or (std / target_error)² when a target is given) and w_q its weight, the relative
variance is r_q = κ_q (B / b_q)^{2p}, p = 1 or 1/2. Objectives:

* ``max``: minimise max_q w_q r_q — a linear program (maximise s with b_q ≥ s·(w_q κ_q)^{1/2p});
  ties are then broken by the weighted sum, so leftover budget (e.g. in disjoint cells) is used;
* ``weighted_sum``: minimise Σ_q w_q r_q — convex (Σ c/b^{2p} over a polyhedron), SLSQP started
  from the max-min point (feasible).

Targets are hard: b_q ≥ B κ_q^{1/2p}; if the constraints cannot hold, BudgetExceededError says
how much budget they need. The optimum is never worse than the best *uniform* allocation (it is
kept as a safety net), and so never worse than the equal split B/n of sequential composition.

Fitting: the fractions are turned into exact budgets (rounded down to 5 significant digits,
which keeps the charged costs on a small-denominator grid the solver composes exactly), composed
with the ledger's history — from the cells when they are exact, else with
:func:`~privplan.accounting.solver.compose` — and scaled to fit: down if rounding pushed over, up
when a conservative model left budget unused (the cost is homogeneous in the budgets without a
history: one step; else a short bisection). The caller must still verify with its real
accountant (report.py simulates the session's admissions).

(ε, δ) reports (:class:`ApproxDP`): counts and sums use Laplace noise, so ε is allocated as above;
δ is only needed by partition selection and is split evenly over the queries that select
(as much as every cell allows). Option ``composition="advanced"``: since a report's parameters are
fixed in advance, any valid composition theorem may be applied to the *worst affected set*
(CSF'24 §VI; GCE) — :func:`advanced_total` uses
ε' = min{Σε, ½Σε² + sqrt(2 ln(1/δ')Σε²)} (:func:`~privplan.accounting.conversions.
advanced_composition`) per maximal co-affected set, with δ' set aside from the δ budget. The
allocation then solves the basic and the advanced model (a convex quadratic constraint per cell)
and improves the better one by re-choosing, per cell, the branch that binds less. This is *not*
what a session's adaptive accountant does (it sums), so it is only allowed on a fresh ledger;
the audit file records both figures.

This module is pure: no engine, no pandas, no duckdb.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from itertools import product
from typing import Any, Literal

import numpy as np
from scipy import optimize

from privplan.accounting.conversions import advanced_composition
from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP, sqrt_fraction
from privplan.accounting.model import MechanismSpec, TableModel, unit_multiplier
from privplan.accounting.solver import Composition, compose
from privplan.accounting.solver.atoms import (
    Axis,
    Unorderable,
    sorted_atom_values,
    widen_to_limit,
)
from privplan.analysis.regions import Region
from privplan.errors import BudgetExceededError, InternalError, PolicyError

__all__ = [
    "DEFAULT_CELL_LIMIT",
    "Allocation",
    "Baseline",
    "Demand",
    "Event",
    "Structure",
    "advanced_total",
    "allocate",
    "co_affected_sets",
    "noise_exponent",
    "round_down",
]

Objective = Literal["max", "weighted_sum"]
CompositionRule = Literal["basic", "advanced"]

DEFAULT_CELL_LIMIT = 50_000
"""Products of coverage classes searched per table before columns are merged (conservatively)."""

_MAX_PAIRS = 200_000  # replace: pairs of maximal cells considered before falling back
_DIGITS = 5  # significant digits of an allocated budget (rounded down). Few digits keep the
# charged costs on a common small-denominator grid: a share k/(10^d·S) calibrates to noise
# without rounding (k < 2^19) and the solver then composes in exact integers (its fast path).
_TINY = 1e-12
_MIN_FRACTION = 1e-6  # a query allotted less than this share of the budget: the ledger is spent


# ============================================================================== inputs / outputs


@dataclass(frozen=True)
class Demand:
    """One query of a batch, as the allocator sees it.

    ``mechanisms`` are the query's mechanisms as charged when it is planned at the budget
    ``reference`` (any positive value of the report's kind; the report uses the whole budget).
    ``kappa`` is the query's relative variance at the whole report budget: 1 without a target,
    (std at the whole budget / target error)² with one; ``required`` makes the target hard.
    """

    name: str
    mechanisms: tuple[MechanismSpec, ...]
    reference: Any
    weight: float = 1.0
    kappa: float = 1.0
    required: bool = False

    @property
    def needs_delta(self) -> bool:
        return any(isinstance(m.cost, ApproxDP) and m.cost.exact_delta > 0 for m in self.mechanisms)


@dataclass(frozen=True)
class Event:
    """A maximal set of mechanisms one neighbouring change can affect (in one table).

    ``mechanisms`` maps a mechanism's index (in the list given to :func:`co_affected_sets`) to how
    many of its groups the change pays. ``kind`` is "record", "pair" (replace), "unit",
    "unit pair" or "everything" (fallback).
    """

    table: str
    mechanisms: Mapping[int, int]
    kind: str


@dataclass(frozen=True)
class Structure:
    """Which queries a single neighbouring change can affect together.

    ``groups``: maximal sets of co-affected queries (cells of the arrangement); ``overlapping`` /
    ``disjoint``: pairs of query names (disjoint = no change affects both, so they compose by max);
    ``components``: connected groups of the overlap graph.
    """

    names: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]
    overlapping: tuple[tuple[str, str], ...]
    disjoint: tuple[tuple[str, str], ...]
    components: tuple[tuple[str, ...], ...]
    exact: bool
    notes: tuple[str, ...] = ()

    def overlaps_of(self, name: str) -> tuple[str, ...]:
        return tuple(b if a == name else a for a, b in self.overlapping if name in (a, b))

    def disjoint_from(self, name: str) -> tuple[str, ...]:
        return tuple(b if a == name else a for a, b in self.disjoint if name in (a, b))

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [list(g) for g in self.groups],
                "overlapping_pairs": [list(p) for p in self.overlapping],
                "disjoint_pairs": [list(p) for p in self.disjoint],
                "components": [list(c) for c in self.components],
                "exact": self.exact, "notes": list(self.notes)}


@dataclass(frozen=True)
class Baseline:
    """A reference allocation: its fractions, budgets, objective and composed total."""

    name: str
    fractions: tuple[float, ...]
    budgets: tuple[Any, ...]
    objective_value: float
    composed: Any
    sequential: Any


@dataclass(frozen=True)
class Allocation:
    """Per-query budgets for a batch, and why.

    ``fractions[q]`` is b_q / B in the allocated weight (ε, ρ or μ²); ``budgets[q]`` the exact
    privacy value to run query q with; ``composed`` the modelled composed cost of the batch with
    the history (:class:`Composition`; for ``composition="advanced"`` the advanced total);
    ``basic`` the same by the general theorem with sums (equal to ``composed`` for "basic");
    ``sequential`` what sequential composition would charge for the same noise (Σ b_q).
    """

    kind: type
    budget: Any
    objective: str
    composition: str
    names: tuple[str, ...]
    fractions: tuple[float, ...]
    budgets: tuple[Any, ...]
    relative_variance: tuple[float, ...]
    objective_value: float
    composed: Composition
    basic: Composition
    sequential: Any
    equal_split: Baseline
    uniform: Baseline
    structure: Structure
    model_exact: bool
    delta_prime: Fraction | None = None
    notes: tuple[str, ...] = field(default=())

    def budget_of(self, name: str) -> Any:
        return self.budgets[self.names.index(name)]


def noise_exponent(kind: type) -> float:
    """p with noise std ∝ b^-p in the allocated weight: 1 for ε (Laplace), 1/2 for ρ and μ²."""
    return 1.0 if kind in (PureDP, ApproxDP) else 0.5


def round_down(x: float | Fraction, digits: int = _DIGITS) -> Fraction:
    """x rounded *down* to ``digits`` significant digits, as an exact Fraction (>= 0)."""
    if x <= 0:
        return Fraction(0)
    d = Decimal(x.numerator) / Decimal(x.denominator) if isinstance(x, Fraction) else Decimal(
        repr(float(x)))
    with localcontext(prec=digits, rounding=ROUND_FLOOR):
        return Fraction(+d)


# ============================================================================== the arrangement


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


# ============================================================================== the linear model


@dataclass
class _Table:
    """One table's mechanisms (the demands' first, then the history's) and their events."""

    name: str
    model: TableModel
    specs: list[MechanismSpec]
    owners: list[int | None]  # the demand each mechanism belongs to (None: history)
    events: list[Event]
    exact: bool


def _arrangement(demands: Sequence[Demand], history: Sequence[MechanismSpec],
                 tables: Mapping[str, TableModel], limit: int) -> tuple[list[_Table], list[str]]:
    by_table: dict[str, tuple[list[MechanismSpec], list[int | None]]] = {}
    for q, d in enumerate(demands):
        for m in d.mechanisms:
            specs, owners = by_table.setdefault(m.table, ([], []))
            specs.append(m)
            owners.append(q)
    for m in history:
        specs, owners = by_table.setdefault(m.table, ([], []))
        specs.append(m)
        owners.append(None)
    out, notes = [], []
    for name, (specs, owners) in by_table.items():
        if name not in tables:
            raise PolicyError(f"table {name!r} has no neighbourhood/unit model in the policy")
        tm = tables[name]
        events, exact = co_affected_sets(specs, tm, limit=limit)
        if not exact:
            if events and events[0].kind == "everything":
                notes.append(f"{name}: too many cells to pair up under replace; every query on "
                             "it is first treated as overlapping every other, then the budgets "
                             "are scaled to the exact composed cost")
            elif tm.neighbourhood == "replace":
                notes.append(f"{name}: replace neighbourhood: pairs of cells, conservative where "
                             "two records must share a group (budgets then scaled to the exact "
                             "composed cost)")
            elif tm.unit.max_rows > 1:
                notes.append(f"{name}: units of up to {tm.unit.max_rows} rows: cells of the "
                             "unit-level columns, conservative (budgets then scaled to the exact "
                             "composed cost)")
            else:
                notes.append(f"{name}: the region arrangement has too many cells; some columns' "
                             "constraints were ignored, so more queries count as overlapping "
                             "than do (budgets then scaled to the exact composed cost)")
        out.append(_Table(name, tm, specs, owners, events, exact))
    return out, notes


@dataclass
class _Model:
    """Constraint rows per table: Σ_q A[r, q] x_q + h[r] <= t_table, Σ t <= 1 (normalised)."""

    tables: list[str]
    A: list[np.ndarray]  # per table: (rows, n)
    h: list[np.ndarray]  # per table: (rows,)
    events: list[list[Event]]
    exact: bool


def _prune(A: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop duplicate rows, and dominated rows (another row is >= everywhere) when there are
    not too many to compare; returns the kept indices (in order)."""
    if len(A) <= 1:
        return A, h, np.arange(len(A))
    M = np.hstack((A, h[:, None]))
    _, first = np.unique(M, axis=0, return_index=True)
    idx = np.sort(first)
    if len(idx) <= 1500:
        order = idx[np.argsort(-M[idx].sum(axis=1), kind="stable")]
        kept: list[int] = []
        K = np.zeros((0, M.shape[1]))
        for r in order.tolist():
            if len(K) and np.any(np.all(K >= M[r] - 1e-15, axis=1)):
                continue
            kept.append(r)
            K = np.vstack((K, M[r][None, :]))
        idx = np.array(sorted(kept))
    return A[idx], h[idx], idx


def _unit_weight(d: Demand, m: MechanismSpec, j: int) -> Fraction:
    """Mechanism m's weight j per unit of its query's budget weight j."""
    ref = Fraction(d.reference.weights()[j])
    return Fraction(m.cost.weights()[j]) / ref if ref > 0 else Fraction(0)


def _build_model(arr: Sequence[_Table], demands: Sequence[Demand], kind: type,
                 budget_w: Fraction, j: int, *, prune: bool = True) -> _Model:
    """The linear model of coordinate j (fractions of the budget's weight ``budget_w``)."""
    n = len(demands)
    model = _Model([], [], [], [], all(t.exact for t in arr))
    for t in arr:
        units = [_unit_weight(demands[q], m, j) if q is not None
                 else Fraction(m.cost.weights()[j]) for m, q in zip(t.specs, t.owners)]
        raw_rows = np.zeros((len(t.events), n))
        hist = np.zeros(len(t.events))
        for r, ev in enumerate(t.events):
            for i, v in ev.mechanisms.items():
                q = t.owners[i]
                if q is None:
                    hist[r] += float(v * units[i])
                else:
                    raw_rows[r, q] += float(v * units[i])
        hist /= float(budget_w)
        # caps: a change never costs a query more than the query alone can cost
        if t.exact:
            caps = raw_rows.max(axis=0) if len(raw_rows) else np.zeros(n)
            h_cap = float(hist.max()) if len(hist) else 0.0
        else:
            caps = np.zeros(n)
            for q in sorted({q for q in t.owners if q is not None}):
                own = [m for m, o in zip(t.specs, t.owners) if o == q]
                w = Fraction(compose(own, {t.name: t.model}, kind).cost.weights()[j])
                ref = Fraction(demands[q].reference.weights()[j])
                caps[q] = float(w / ref) if ref > 0 else 0.0
            hs = [m for m, o in zip(t.specs, t.owners) if o is None]
            h_cap = (float(Fraction(compose(hs, {t.name: t.model}, kind).cost.weights()[j])
                           / budget_w) if hs else 0.0)
        A = np.minimum(raw_rows, caps[None, :])
        h = np.minimum(hist, h_cap)
        if prune:
            A, h, kept = _prune(A, h)
        else:
            kept = np.arange(len(A))
        model.tables.append(t.name)
        model.A.append(A)
        model.h.append(h)
        model.events.append([t.events[i] for i in kept.tolist()])
    return model


_EXACT_RULE = ("general composition theorem: max over the cells of the region arrangement of the "
               "sum of the mechanisms one record affects (CSF'24 Thm IV.11; a GROUP BY pays one "
               "group, Thm IV.12)")


def _exact_total(arr: Sequence[_Table], costs: Sequence[Sequence[Any]], kind: type
                 ) -> Composition:
    """The composed cost from exact events (add/remove, one row per unit): per table the max
    over cells of the summed weights, per coordinate; tables add. ``costs[t][i]`` is the cost of
    mechanism i of table t."""
    q = len(kind.zero().weights())
    totals = [Fraction(0)] * q
    witness: list[str] = []
    for t, cs in zip(arr, costs):
        if not t.events:
            continue
        ws = [c.weights() for c in cs]
        approx = np.array([[sum(float(ws[i][j]) * v for i, v in ev.mechanisms.items())
                            for j in range(q)] for ev in t.events])
        for j in range(q):
            col = approx[:, j]
            top = float(col.max())
            best, arg = Fraction(0), -1
            for r in np.flatnonzero(col >= top - 1e-9 * max(top, 1e-300)).tolist():
                val = sum((Fraction(ws[i][j]) * v for i, v in t.events[r].mechanisms.items()),
                          Fraction(0))
                if val > best or arg < 0:
                    best, arg = val, r
            totals[j] += best
            if j == 0 and arg >= 0:
                witness += [t.specs[i].id for i in t.events[arg].mechanisms]
    if not witness and not any(totals):
        return Composition(kind.zero(), (), "nothing released", True, "no mechanisms")
    rule = _EXACT_RULE + ("; summed over tables" if len(arr) > 1 else "")
    return Composition(kind.from_weights(tuple(totals)), tuple(witness),
                       f"the worst cell affects {len(witness)} mechanism(s)", True, rule)


# ============================================================================== structure


def _structure(demands: Sequence[Demand], model: _Model, model_notes: Sequence[str]
               ) -> Structure:
    names = [d.name for d in demands]
    n = len(names)
    groups: list[frozenset[int]] = []
    for A in model.A:
        for row in A:
            g = frozenset(np.flatnonzero(row > 0).tolist())
            if g:
                groups.append(g)
    maximal: list[frozenset[int]] = []
    for g in sorted(set(groups), key=lambda s: (-len(s), sorted(s))):
        if not any(g <= m for m in maximal):
            maximal.append(g)
    over = np.zeros((n, n), dtype=bool)
    for g in maximal:
        ids = sorted(g)
        for a in ids:
            for b in ids:
                over[a, b] = True
    # one person may be in every private table: queries on different tables always add up
    tables_of = [{m.table for m in d.mechanisms if not m.region.is_empty()} for d in demands]
    notes = []
    for a in range(n):
        for b in range(a + 1, n):
            if not over[a, b] and any(t1 != t2 for t1 in tables_of[a] for t2 in tables_of[b]):
                over[a, b] = over[b, a] = True
                if not notes:
                    notes.append("queries on different private tables always add up: one "
                                 "person may be in every private table")
    overlapping, disjoint = [], []
    for a in range(n):
        for b in range(a + 1, n):
            (overlapping if over[a, b] else disjoint).append((names[a], names[b]))
    # connected components of the overlap graph
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a in range(n):
        for b in range(a + 1, n):
            if over[a, b]:
                parent[find(a)] = find(b)
    comps: dict[int, list[str]] = {}
    for i in range(n):
        comps.setdefault(find(i), []).append(names[i])
    if not model.exact:
        notes.append("the overlap structure is conservative (" + "; ".join(model_notes) + ")")
    return Structure(
        names=tuple(names),
        groups=tuple(tuple(names[i] for i in sorted(g)) for g in maximal),
        overlapping=tuple(overlapping), disjoint=tuple(disjoint),
        components=tuple(tuple(c) for c in comps.values()),
        exact=model.exact, notes=tuple(notes))


# ============================================================================== optimisation


def _ub_rows(model: _Model, n: int, extra: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A_ub z <= b_ub over z = (x_1..x_n, t_1..t_T, extra...)."""
    T = len(model.tables)
    rows, rhs = [], []
    for ti, (A, h) in enumerate(zip(model.A, model.h)):
        for r in range(len(A)):
            row = np.zeros(n + T + extra)
            row[:n] = A[r]
            row[n + ti] = -1.0
            rows.append(row)
            rhs.append(-h[r])
    row = np.zeros(n + T + extra)
    row[n:n + T] = 1.0
    rows.append(row)
    rhs.append(1.0)
    return np.array(rows), np.array(rhs)


def _feasible_scale(model: _Model, x: np.ndarray) -> float:
    """Largest t <= 1/max(x) (capped at 1e6) with the model's constraints holding at t·x."""
    def total(t: float) -> float:
        return sum(float(np.max(A @ (t * x) + h)) if len(A) else 0.0
                   for A, h in zip(model.A, model.h))
    hi = 1.0 / max(float(x.max()), _TINY)
    if total(hi) <= 1.0 + 1e-12:
        return hi
    lo = 0.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if total(mid) <= 1.0:
            lo = mid
        else:
            hi = mid
    return lo


def _lp_max(model: _Model, c: np.ndarray, lb: np.ndarray) -> tuple[np.ndarray, float]:
    """maximise s subject to x_q >= s c_q, the cell constraints, lb <= x <= 1."""
    n, T = len(c), len(model.tables)
    A_ub, b_ub = _ub_rows(model, n, extra=1)
    link = np.zeros((n, n + T + 1))
    link[np.arange(n), np.arange(n)] = -1.0
    link[:, -1] = c
    A_ub = np.vstack((A_ub, link))
    b_ub = np.concatenate((b_ub, np.zeros(n)))
    obj = np.zeros(n + T + 1)
    obj[-1] = -1.0
    bounds = [(float(lb[q]), 1.0) for q in range(n)] + [(None, None)] * T + [(0.0, None)]
    res = optimize.linprog(obj, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status == 2:
        raise _Infeasible
    if res.status != 0:
        raise InternalError(f"allocation LP failed: {res.message}")
    return np.clip(res.x[:n], lb, 1.0), float(res.x[-1])


class _Infeasible(Exception):
    pass


def _needed_factor(model: _Model, lb: np.ndarray) -> float:
    """min λ with the lower bounds feasible when the budget is multiplied by λ (history fixed)."""
    n, T = len(lb), len(model.tables)
    A_ub, b_ub = _ub_rows(model, n, extra=1)
    A_ub[-1, -1] = -1.0  # Σ t <= λ
    b_ub[-1] = 0.0
    obj = np.zeros(n + T + 1)
    obj[-1] = 1.0
    bounds = [(float(lb[q]), None) for q in range(n)] + [(None, None)] * T + [(0.0, None)]
    res = optimize.linprog(obj, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    return float(res.x[-1]) if res.status == 0 else math.inf


def _objective(x: np.ndarray, u: np.ndarray, p: float, which: str) -> float:
    r = u * np.power(np.maximum(x, _TINY), -2 * p)
    return float(r.max() if which == "max" else r.sum())


def _slsqp(model: _Model, u: np.ndarray, p: float, lb: np.ndarray, x0: np.ndarray,
           quad: list[tuple[np.ndarray, float]] | None = None) -> np.ndarray | None:
    """minimise Σ u_q x_q^{-2p} over the cells (linear) and optional quadratic cells
    (Σ s_q x_q² <= r²). Returns None if SLSQP fails to return a feasible improvement."""
    n, T = len(u), len(model.tables)
    A_ub, b_ub = _ub_rows(model, n)
    z0 = np.concatenate((x0, [float(np.max(A @ x0 + h)) if len(A) else 0.0
                              for A, h in zip(model.A, model.h)]))
    f0 = float(np.sum(u * np.power(np.maximum(x0, _TINY), -2 * p))) or 1.0

    def fun(z: np.ndarray) -> float:
        x = np.maximum(z[:n], _TINY)
        return float(np.sum(u * x ** (-2 * p))) / f0

    def jac(z: np.ndarray) -> np.ndarray:
        x = np.maximum(z[:n], _TINY)
        g = np.zeros_like(z)
        g[:n] = -2 * p * u * x ** (-2 * p - 1) / f0
        return g

    cons: list[dict[str, Any]] = [{
        "type": "ineq", "fun": lambda z: b_ub - A_ub @ z, "jac": lambda z: -A_ub}]
    if quad:
        S = np.array([s for s, _ in quad])
        r2 = np.array([r for _, r in quad])
        cons.append({"type": "ineq",
                     "fun": lambda z: r2 - S @ (z[:n] ** 2),
                     "jac": lambda z: np.hstack((-2 * S * z[:n], np.zeros((len(S), T))))})
    bounds = [(max(float(lb[q]), 1e-9), 1.0) for q in range(n)] + [(None, None)] * T
    try:
        res = optimize.minimize(fun, z0, jac=jac, bounds=bounds, constraints=cons,
                                method="SLSQP", options={"maxiter": 500, "ftol": 1e-12})
    except (ValueError, np.linalg.LinAlgError):
        return None
    x = np.clip(res.x[:n], lb, 1.0)
    return x


def _quad_ok(quad: list[tuple[np.ndarray, float]] | None, x: np.ndarray) -> float:
    """Largest t <= 1 with every quadratic cell holding at t·x."""
    if not quad:
        return 1.0
    worst = max(float(s @ (x ** 2)) / r for s, r in quad if r > 0)
    return 1.0 if worst <= 1.0 else 1.0 / math.sqrt(worst)


def _optimise(model: _Model, u: np.ndarray, p: float, lb: np.ndarray, objective: str,
              quad: list[tuple[np.ndarray, float]] | None = None) -> np.ndarray:
    """The fractions x minimising the objective over the model (and the quadratic cells)."""
    n = len(u)
    c = np.power(u, 1 / (2 * p))
    c = c / c.max()
    x_max, s = _lp_max(model, c, lb)  # raises _Infeasible when the targets cannot hold
    if quad:
        x_max = x_max * _quad_ok(quad, x_max)
    lb2 = lb.copy()
    if objective == "max":
        lb2 = np.maximum(lb, s * c * (1 - 1e-9) * _quad_ok(quad, x_max))
    x = _slsqp(model, u, p, lb2, x_max, quad)
    candidates = [x_max]
    if x is not None:
        t = min(_feasible_scale(model, x), 1.0 / max(float(x.max()), _TINY))
        x = np.minimum(x * min(t, 1.0), 1.0) if t < 1.0 else x
        x = x * _quad_ok(quad, x)
        if np.all(x >= lb * (1 - 1e-9)):
            candidates.append(x)
    # never worse than the best uniform allocation
    ones = np.ones(n)
    t = _feasible_scale(model, ones)
    uni = np.minimum(ones * t, 1.0)
    uni = uni * _quad_ok(quad, uni)
    if np.all(uni >= lb):
        candidates.append(uni)

    def key(z: np.ndarray) -> tuple[float, float]:
        if objective == "max":
            return (round(_objective(z, u, p, "max"), 9), _objective(z, u, p, "weighted_sum"))
        return (_objective(z, u, p, "weighted_sum"), 0.0)

    return min(candidates, key=key)


# ============================================================================== budgets


def _budget_values(kind: type, budget: Any, fractions: np.ndarray, deltas: Sequence[Fraction],
                   factor: float = 1.0) -> list[Any]:
    """Exact privacy values (rounded down) for fractions of the budget's allocated weight."""
    w = Fraction(budget.weights()[0])
    out = []
    for q, x in enumerate(fractions):
        share = round_down(float(x) * factor * float(w)) if x < 1 or factor != 1 else w
        share = min(share, w)
        if kind is PureDP:
            out.append(PureDP(share))
        elif kind is ZCDP:
            out.append(ZCDP(share))
        elif kind is GDP:
            out.append(GDP(round_down(sqrt_fraction(share, round_up=False))))
        else:
            out.append(ApproxDP(share, deltas[q]))
    return out


def _modelled(demands: Sequence[Demand], budgets: Sequence[Any]) -> list[MechanismSpec]:
    """The mechanisms each query would be charged at its budget (linear in the budget)."""
    out = []
    for q, (d, b) in enumerate(zip(demands, budgets)):
        ref = d.reference.weights()
        tgt = b.weights()
        factors = [Fraction(t) / Fraction(r) if r > 0 else Fraction(0) for t, r in zip(tgt, ref)]
        for m in d.mechanisms:
            cost = type(b).from_weights(tuple(Fraction(w) * f
                                              for w, f in zip(m.cost.weights(), factors)))
            out.append(replace(m, id=f"{d.name}#{q}:{m.id}", cost=cost))
    return out


def _sum(values: Sequence[Any], kind: type) -> Any:
    total = kind.zero()
    for v in values:
        total = total + v
    return total


# ============================================================================== advanced


def advanced_total(
    mechanisms: Sequence[MechanismSpec], tables: Mapping[str, TableModel], delta_prime: Any,
    *, limit: int = DEFAULT_CELL_LIMIT,
) -> Composition:
    """The composed (ε, δ) cost of a *non-adaptive* batch with advanced composition applied to
    every maximal co-affected set (CSF'24 §VI; Kairouz–Oh–Viswanath heterogeneous bound via
    :func:`~privplan.accounting.conversions.advanced_composition`).

    Per table: max over the events of :func:`co_affected_sets` (componentwise); a GROUP BY the
    change pays v groups counts as v mechanisms. Tables add (basic composition of the table
    bounds). Every event is a superset of what a change affects and the bound only grows with the
    set, so the result is never below the truth for a batch whose parameters were fixed in advance.
    """
    if not mechanisms:
        return Composition(ApproxDP.zero(), (), "nothing released", True, "no mechanisms")
    for m in mechanisms:
        if not isinstance(m.cost, ApproxDP):
            raise TypeError(f"advanced composition is for ApproxDP costs; {m.id!r} costs "
                            f"{type(m.cost).__name__}")
    by_table: dict[str, list[MechanismSpec]] = {}
    for m in mechanisms:
        by_table.setdefault(m.table, []).append(m)
    eps_total, delta_total = Fraction(0), Fraction(0)
    witness: list[str] = []
    details, all_exact = [], True
    for name, specs in by_table.items():
        if name not in tables:
            raise PolicyError(f"table {name!r} has no neighbourhood/unit model in the policy")
        events, exact = co_affected_sets(specs, tables[name], limit=limit)
        all_exact &= exact
        best_e, best_d, best_ids = Fraction(0), Fraction(0), ()
        for ev in events:
            eps, dls = [], []
            for i, v in ev.mechanisms.items():
                eps += [specs[i].cost.exact_epsilon] * v
                dls += [specs[i].cost.exact_delta] * v
            c = advanced_composition(eps, dls, delta_prime)
            if c.exact_epsilon > best_e:
                best_e, best_ids = c.exact_epsilon, tuple(specs[i].id for i in ev.mechanisms)
            best_d = max(best_d, c.exact_delta)
        eps_total += best_e
        delta_total += best_d
        witness += list(best_ids)
        details.append(f"in {name}: the worst change affects {len(best_ids)} mechanism(s)")
    rule = ("advanced composition (Kairouz–Oh–Viswanath, heterogeneous) inside every maximal "
            f"co-affected set, δ' = {float(Fraction(delta_prime)):.3g}; parameters fixed before "
            "any answer (planned batch); general composition theorem across sets (CSF'24 Thm IV.11)")
    if len(by_table) > 1:
        rule += "; summed over tables"
    return Composition(ApproxDP.from_weights((eps_total, delta_total)), tuple(witness),
                       "; ".join(details), all_exact, rule)


def _advanced_quads(model: _Model, arr: Sequence[_Table], demands: Sequence[Demand],
                    budget: ApproxDP, delta_prime: Fraction) -> list[tuple[np.ndarray, float]]:
    """Per event, Σ_q s_q x_q² <= r² with s_q = Σ v_i u_i² (ε per unit budget), the advanced
    branch ½EΣε² + sqrt(2 ln(1/δ') Σε²) <= E written in the fractions x (ε_i = x_q E u_i)."""
    n = len(demands)
    E = float(budget.exact_epsilon)
    L = -math.log(float(delta_prime))
    r = (-math.sqrt(2 * L) + math.sqrt(2 * L + 2 * E)) / E  # ½E r² + sqrt(2L) r = 1
    quads = []
    for t, events in zip(arr, model.events):
        units = [float(_unit_weight(demands[q], m, 0)) if q is not None else 0.0
                 for m, q in zip(t.specs, t.owners)]
        for ev in events:
            s = np.zeros(n)
            for i, v in ev.mechanisms.items():
                q = t.owners[i]
                if q is not None:
                    s[q] += v * units[i] ** 2
            quads.append((s, r * r))
    return quads


# ============================================================================== the entry point


def allocate(
    demands: Sequence[Demand],
    tables: Mapping[str, TableModel],
    budget: Any,
    *,
    objective: Objective = "weighted_sum",
    history: Sequence[MechanismSpec] = (),
    composition: CompositionRule = "basic",
    delta_prime: Any = None,
    cell_limit: int = DEFAULT_CELL_LIMIT,
) -> Allocation:
    """Per-query budgets minimising ``objective`` with the composed cost (with ``history``)
    within ``budget``. See the module docstring for the model."""
    kind = type(budget)
    if kind not in (PureDP, ApproxDP, ZCDP, GDP):
        raise PolicyError(f"the report budget must be a privacy value, got {budget!r}")
    if objective not in ("max", "weighted_sum"):
        raise PolicyError(f"objective must be 'max' or 'weighted_sum', got {objective!r}")
    if composition not in ("basic", "advanced"):
        raise PolicyError(f"composition must be 'basic' or 'advanced', got {composition!r}")
    if composition == "advanced" and kind is not ApproxDP:
        raise PolicyError("advanced composition is for (ε, δ) budgets: give epsilon and delta")
    if composition == "advanced" and history:
        raise PolicyError(
            "advanced composition applies to a batch planned in advance; this ledger already "
            "holds adaptive charges. Use a new ledger for the report, or composition: basic.")
    if not demands:
        raise PolicyError("the report has no queries")
    names = [d.name for d in demands]
    if len(set(names)) != len(names):
        raise PolicyError("report query names must be unique")
    for d in demands:
        if type(d.reference) is not kind:
            raise TypeError(f"query {d.name!r} was planned with {type(d.reference).__name__}, "
                            f"the report budget is {kind.__name__}")
        if not d.reference.weights()[0] > 0:
            raise PolicyError(f"query {d.name!r}: its reference budget must be positive")
        if not (d.weight > 0 and math.isfinite(d.weight)):
            raise PolicyError(f"query {d.name!r}: weight must be a positive number")
    n = len(demands)
    p = noise_exponent(kind)
    budget_w = Fraction(budget.weights()[0])
    if budget_w <= 0:
        raise PolicyError("the report budget must be positive")
    history = list(history)
    arr, notes = _arrangement(demands, history, tables, cell_limit)
    exact = all(t.exact for t in arr)

    # -- δ for partition selection ------------------------------------------------------------
    dprime: Fraction | None = None
    deltas = [Fraction(0)] * n
    if kind is ApproxDP:
        total_delta = budget.exact_delta
        needs = [d.needs_delta for d in demands]
        if composition == "advanced":
            dprime = (Fraction(delta_prime) if delta_prime is not None
                      else (total_delta / 2 if any(needs) else total_delta))
            if not (0 < dprime < 1 and dprime <= total_delta):
                raise PolicyError("advanced composition needs 0 < δ' <= the report's δ "
                                  f"(got δ' = {float(dprime):.3g}, δ = {float(total_delta):.3g})")
        if any(needs):
            avail = total_delta - (dprime or 0)
            if avail <= 0:
                bad = [d.name for d in demands if d.needs_delta]
                raise PolicyError(
                    f"queries {', '.join(bad)} release groups through partition selection, which "
                    "needs δ > 0; the report's budget leaves none. Give a larger delta.")
            dmodel = _build_model(arr, demands, kind, total_delta, 1)
            sel = np.array([1.0 if nd else 0.0 for nd in needs])
            y = min(_feasible_scale(dmodel, sel) * float(avail / total_delta), 1.0)
            for q in range(n):
                if needs[q]:
                    deltas[q] = round_down(y * float(total_delta))
                    if deltas[q] <= 0:
                        raise BudgetExceededError(
                            f"query {demands[q].name!r} needs δ for partition selection but the "
                            "ledger has no δ left")

    # -- the linear model and the structure ----------------------------------------------------
    model = _build_model(arr, demands, kind, budget_w, 0, prune=composition == "basic")
    structure = _structure(demands, model, notes)

    # -- targets (hard) and weights ------------------------------------------------------------
    kappa = np.array([max(float(d.kappa), 0.0) for d in demands])
    u = np.array([float(d.weight) for d in demands]) * np.where(kappa > 0, kappa, 1.0)
    lb = np.array([float(d.kappa) ** (1 / (2 * p)) if d.required else 0.0 for d in demands])
    if np.any(lb > 1.0 + 1e-12):
        bad = [d.name for d, b in zip(demands, lb) if b > 1.0 + 1e-12]
        raise BudgetExceededError(
            f"the target error of {', '.join(bad)} cannot be met even with the whole budget "
            f"{budget.describe()}: loosen the target or raise the budget")
    lb = np.minimum(lb, 1.0)

    try:
        x = _optimise(model, u, p, lb, objective)
        if composition == "advanced":
            assert dprime is not None
            quad = _advanced_quads(model, arr, demands, budget, dprime)
            x_adv = _optimise(_empty_like(model), u, p, lb, objective, quad)
            x = _better_advanced(model, quad, u, p, lb, objective, x, x_adv)
    except _Infeasible:
        lam = _needed_factor(model, lb)
        raise BudgetExceededError(
            "the queries' target errors cannot all be met within the budget "
            f"{budget.describe()}: they need about {lam:.3g} times as much "
            "(with what the ledger already holds). Loosen a target or raise the budget.") from None

    starved = [d.name for d, xq in zip(demands, x) if xq < _MIN_FRACTION]
    if starved:
        raise BudgetExceededError(
            f"no budget is left for {', '.join(starved[:5])}"
            + (f" and {len(starved) - 5} more" if len(starved) > 5 else "")
            + f": what the ledger already holds uses up the budget {budget.describe()} for every "
            "record these queries read. Use a new ledger (a new period) or a larger budget.")

    # -- fit: exact budgets, composed with the history, scaled to the budget -------------------
    def evaluate(budgets: Sequence[Any], rule: str) -> Composition:
        if rule == "advanced":
            assert dprime is not None
            return advanced_total(_modelled(demands, budgets), tables, dprime)
        if exact:
            return _exact_total(arr, _table_costs(arr, demands, budgets), kind)
        return compose(history + _modelled(demands, budgets), tables, kind)

    fit_budgets, composed = _fit(evaluate, kind, budget, x, deltas, exact, composition, history)
    w_alloc = np.array([float(Fraction(b.weights()[0]) / budget_w) for b in fit_budgets])
    basic = composed if composition == "basic" else evaluate(fit_budgets, "basic")
    sequential = _sum(fit_budgets, kind)

    # -- baselines ------------------------------------------------------------------------------
    # what the history already holds (its composed weight) is not available to the equal split
    spent = (float(Fraction(evaluate([kind.zero()] * n, "basic").cost.weights()[0]) / budget_w)
             if history else 0.0)
    eq = np.full(n, max(1.0 - spent, 0.0) / n)
    eq_budgets = _budget_values(kind, budget, eq, deltas)
    equal = Baseline("equal split of what is left (sequential composition)", tuple(eq.tolist()),
                     tuple(eq_budgets),
                     _objective(eq, u, p, objective), evaluate(eq_budgets, "basic").cost,
                     _sum(eq_budgets, kind))
    t_uni = _feasible_scale(model, np.ones(n))
    uni = np.minimum(np.ones(n) * t_uni, 1.0)
    uni_budgets = _budget_values(kind, budget, uni, deltas)
    uniform = Baseline("uniform (largest equal budget under the general theorem, by the model)",
                       tuple(uni.tolist()), tuple(uni_budgets), _objective(uni, u, p, objective),
                       evaluate(uni_budgets, "basic").cost, _sum(uni_budgets, kind))

    rel = tuple((kq if kq > 0 else 1.0) * max(xq, _TINY) ** (-2 * p)
                for kq, xq in zip(kappa.tolist(), w_alloc.tolist()))
    return Allocation(
        kind=kind, budget=budget, objective=objective, composition=composition,
        names=tuple(names), fractions=tuple(w_alloc.tolist()), budgets=tuple(fit_budgets),
        relative_variance=rel, objective_value=_objective(w_alloc, u, p, objective),
        composed=composed, basic=basic, sequential=sequential, equal_split=equal,
        uniform=uniform, structure=structure, model_exact=exact, delta_prime=dprime,
        notes=tuple(notes))


def _table_costs(arr: Sequence[_Table], demands: Sequence[Demand], budgets: Sequence[Any]
                 ) -> list[list[Any]]:
    """Per table, the cost of each mechanism at the budgets (history: as charged)."""
    factors = []
    for d, b in zip(demands, budgets):
        ref = d.reference.weights()
        factors.append([Fraction(t) / Fraction(r) if r > 0 else Fraction(0)
                        for t, r in zip(b.weights(), ref)])
    out = []
    for t in arr:
        costs = []
        for m, q in zip(t.specs, t.owners):
            if q is None:
                costs.append(m.cost)
            else:
                costs.append(type(m.cost).from_weights(
                    tuple(Fraction(w) * f for w, f in zip(m.cost.weights(), factors[q]))))
        out.append(costs)
    return out


def _empty_like(model: _Model) -> _Model:
    """The model without linear cells (only Σ t <= 1 remains): for the advanced-only problem."""
    n = model.A[0].shape[1] if model.A else 0
    return _Model(model.tables, [np.zeros((0, n)) for _ in model.A],
                  [np.zeros(0) for _ in model.h], model.events, model.exact)


def _better_advanced(model: _Model, quad: list[tuple[np.ndarray, float]], u: np.ndarray, p: float,
                     lb: np.ndarray, objective: str, x_basic: np.ndarray,
                     x_adv: np.ndarray) -> np.ndarray:
    """Per cell the true constraint is "basic OR advanced holds". Start from the better of the
    two solutions and re-solve with, per cell, the branch that binds less there (the feasible set
    of that choice is convex and holds the current point), a few times."""
    rows = [(ti, r) for ti, A in enumerate(model.A) for r in range(len(A))]

    def score(z: np.ndarray) -> float:
        return _objective(z, u, p, objective)

    x = x_basic if score(x_basic) <= score(x_adv) else x_adv
    for _ in range(4):
        lin_keep: list[tuple[int, int]] = []
        quad_keep = []
        for k, (ti, r) in enumerate(rows):
            lin = float(model.A[ti][r] @ x + model.h[ti][r])
            s, r2 = quad[k]
            adv = math.sqrt(float(s @ (x ** 2)) / r2) if r2 > 0 else math.inf
            if lin <= adv:
                lin_keep.append((ti, r))
            else:
                quad_keep.append(quad[k])
        sub = _Model(model.tables,
                     [model.A[ti][[r for t2, r in lin_keep if t2 == ti]]
                      for ti in range(len(model.A))],
                     [model.h[ti][[r for t2, r in lin_keep if t2 == ti]]
                      for ti in range(len(model.h))],
                     model.events, model.exact)
        try:
            x_new = _optimise(sub, u, p, lb, objective, quad_keep or None)
        except _Infeasible:
            break
        if score(x_new) >= score(x) * (1 - 1e-9):
            break
        x = x_new
    return x


def _fit(evaluate: Any, kind: type, budget: Any, x: np.ndarray, deltas: Sequence[Fraction],
         exact: bool, composition: str, history: Sequence[MechanismSpec]
         ) -> tuple[list[Any], Composition]:
    """Exact budgets for fractions t·x, with t as large as the composed cost allows (never above
    the budget): down if rounding pushed over, up when the model was conservative (the cost is
    homogeneous in the budgets without history: one step; otherwise a short bisection)."""
    dl = list(deltas)

    def total(t: float) -> tuple[list[Any], Composition]:
        budgets = _budget_values(kind, budget, np.minimum(x * t, 1.0), dl)
        return budgets, evaluate(budgets, composition)

    def ratio(c: Composition) -> float:
        got, cap = Fraction(c.cost.weights()[0]), Fraction(budget.weights()[0])
        return float(got / cap)

    t = 1.0
    budgets, comp = total(t)
    t_hi = 1.0 / max(float(x.max()), _TINY)
    grow = (not exact or composition == "advanced") and ratio(comp) < 1 - 1e-7 and t_hi > 1 + 1e-9
    if grow:
        if not history and composition == "basic":
            t2 = min(t_hi, t / max(ratio(comp), 1e-12))
            b2, c2 = total(t2)
            if c2.cost <= budget:
                t, budgets, comp = t2, b2, c2
        else:
            lo, hi = t, t_hi
            b2, c2 = total(hi)
            if c2.cost <= budget:
                t, budgets, comp = hi, b2, c2
            else:
                for _ in range(12):
                    mid = (lo + hi) / 2
                    b2, c2 = total(mid)
                    if c2.cost <= budget:
                        lo, t, budgets, comp = mid, mid, b2, c2
                    else:
                        hi = mid
    shrink = 1e-9
    for _ in range(80):
        if comp.cost <= budget:
            return budgets, comp
        got, cap = comp.cost.weights(), budget.weights()
        if got[0] > cap[0]:
            t = t / float(Fraction(got[0]) / Fraction(cap[0])) * (1 - shrink)
        if len(got) > 1 and got[1] > cap[1]:  # δ (partition selection) over: shrink it too
            f = Fraction(cap[1]) / Fraction(got[1]) * Fraction(1 - shrink)
            dl = [round_down(d * f) for d in dl]
        shrink *= 2
        budgets, comp = total(t)
    raise InternalError("allocation: the composed cost could not be fitted to the budget")
