"""Advanced composition inside every maximal co-affected set (option ``composition="advanced"``).

A report's parameters are fixed before any answer is seen, so any valid composition theorem may
be applied to the worst affected set (CSF'24 §VI): :func:`advanced_total` uses the heterogeneous
Kairouz–Oh–Viswanath bound (:func:`~privplan.accounting.conversions.advanced_composition`) per
maximal co-affected set, with δ' set aside. In the optimisation each cell's advanced branch is a
convex quadratic constraint (:func:`_advanced_quads`); the true constraint per cell is "basic OR
advanced", which :func:`_better_advanced` approaches by re-choosing the less binding branch. This
is not what an adaptive session accountant does (it sums), so it is only allowed on a fresh ledger.

Privacy: advanced composition is used per maximal co-affected set of a fixed batch, new ledger only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import cast

import numpy as np

from privplan.accounting.allocation.arrangement import DEFAULT_CELL_LIMIT, group_multipliers
from privplan.accounting.allocation.interface import Demand, Event
from privplan.accounting.allocation.linear_model import _Model, _Table, _unit_weight
from privplan.accounting.allocation.optimisation import _Infeasible, _objective, _optimise
from privplan.accounting.allocation.worst_sets import worst_set_total
from privplan.accounting.conversions import advanced_composition
from privplan.accounting.definitions import ApproxDP, Number
from privplan.accounting.model import MechanismSpec, TableModel
from privplan.accounting.solver import Composition


def advanced_total(
    mechanisms: Sequence[MechanismSpec], tables: Mapping[str, TableModel], delta_prime: Number,
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
    d_prime = Fraction(delta_prime)

    def event_cost(ev: Event, specs: Sequence[MechanismSpec], model: TableModel
                   ) -> tuple[Fraction, Fraction]:
        eps: list[Fraction] = []
        dls: list[Fraction] = []
        for i, v in ev.mechanisms.items():
            cost = cast(ApproxDP, specs[i].cost)  # (worst_set_total checked every cost)
            # one term per group changed: r rows of a unit in one group are one mechanism
            # at r times the sensitivity, (rε, r·e^((r-1)ε)·δ) by group privacy
            for r in group_multipliers(specs[i], model, v):
                eps.append(r * cost.exact_epsilon)
                dls.append(_group_delta(cost, r))
        c = advanced_composition(eps, dls, d_prime)
        return c.exact_epsilon, c.exact_delta

    rule = ("advanced composition (Kairouz–Oh–Viswanath, heterogeneous) inside every maximal "
            f"co-affected set, δ' = {float(d_prime):.3g}; parameters fixed before any answer "
            "(planned batch); general composition theorem across sets (CSF'24 Thm IV.11)")
    return worst_set_total(mechanisms, tables, theorem="advanced composition", rule=rule,
                           event_cost=event_cost, limit=limit)


def _group_delta(cost: ApproxDP, r: int) -> Fraction:
    """δ of r rows in one group by group privacy, r·e^((r-1)ε)·δ, rounded up (0 when δ = 0)."""
    if r == 1 or cost.exact_delta == 0:
        return cost.exact_delta
    grow = Fraction(math.exp(float((r - 1) * cost.exact_epsilon)) * (1 + 1e-12))
    return r * grow * cost.exact_delta


def _advanced_quads(model: _Model, arr: Sequence[_Table], demands: Sequence[Demand],
                    budget: ApproxDP, delta_prime: Fraction) -> list[tuple[np.ndarray, float]]:
    """Per event, Σ_q s_q x_q² <= r² with s_q = Σ_i Σ_g r_g² u_i² (ε per unit budget; r_g the
    one-row costs group g of mechanism i pays, :func:`group_multipliers`), the advanced
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
                    squares = sum(g * g for g in group_multipliers(t.specs[i], t.model, v))
                    s[q] += squares * units[i] ** 2
            quads.append((s, r * r))
    return quads


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
