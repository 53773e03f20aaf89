"""From fractions to exact budgets, and fitting them to the report's budget.

Fractions become exact privacy values, rounded *down* to a few significant digits
(:func:`~privplan.accounting.allocation.interface.round_down`); the mechanisms each query would be
charged at those budgets are composed (by the caller's rule) and :func:`_fit` scales the
fractions until the composed cost is within the budget: down if rounding pushed over, up when a
conservative model left budget unused. The cost of a query is linear in its budget (the planner
calibrates every mechanism of a query to it), which is what makes the rescaling valid.

Privacy: budgets are rounded down and rescaled until their composed cost fits the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction

import numpy as np

from privplan.accounting.allocation.interface import Demand, round_down
from privplan.accounting.allocation.linear_model import _Table
from privplan.accounting.allocation.optimisation import _TINY
from privplan.accounting.definitions import PrivacyValue
from privplan.accounting.model import MechanismSpec
from privplan.accounting.solver import Composition
from privplan.errors import InternalError

Evaluator = Callable[[Sequence[PrivacyValue], str], Composition]
"""The composed cost of the batch at some budgets, by a rule ("basic" or "advanced")."""


def _budget_values(kind: type[PrivacyValue], budget: PrivacyValue, fractions: np.ndarray,
                   deltas: Sequence[Fraction], factor: float = 1.0) -> list[PrivacyValue]:
    """Exact privacy values (rounded down) for fractions of the budget's allocated weight (the
    first: ε, ρ or μ²; a definition's other weight, δ, is ``deltas``)."""
    w = Fraction(budget.weights()[0])
    out: list[PrivacyValue] = []
    for q, x in enumerate(fractions):
        share = round_down(float(x) * factor * float(w)) if x < 1 or factor != 1 else w
        share = min(share, w)
        weights = (share, deltas[q])[:len(kind.keywords())]
        out.append(kind.from_weights_down(weights).rounded_roots(round_down))
    return out


def _modelled(demands: Sequence[Demand], budgets: Sequence[PrivacyValue]
              ) -> list[MechanismSpec]:
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


def _sum(values: Sequence[PrivacyValue], kind: type[PrivacyValue]) -> PrivacyValue:
    total = kind.zero()
    for v in values:
        total = total + v
    return total


def _table_costs(arr: Sequence[_Table], demands: Sequence[Demand],
                 budgets: Sequence[PrivacyValue]) -> list[list[PrivacyValue]]:
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


def _fit(evaluate: Evaluator, kind: type[PrivacyValue], budget: PrivacyValue, x: np.ndarray,
         deltas: Sequence[Fraction], exact: bool, composition: str,
         history: Sequence[MechanismSpec]) -> tuple[list[PrivacyValue], Composition]:
    """Exact budgets for fractions t·x, with t as large as the composed cost allows (never above
    the budget): down if rounding pushed over, up when the model was conservative (the cost is
    homogeneous in the budgets without history: one step; otherwise a short bisection)."""
    dl = list(deltas)

    def total(t: float) -> tuple[list[PrivacyValue], Composition]:
        budgets = _budget_values(kind, budget, np.minimum(x * t, 1.0), dl)
        return budgets, evaluate(budgets, composition)

    def ratio(c: Composition) -> float:
        got, cap = Fraction(c.cost.weights()[0]), Fraction(budget.weights()[0])
        return float(got / cap)

    t = 1.0
    budgets, comp = total(t)
    t_hi = 1.0 / max(float(x.max()), _TINY)
    grow = (not exact or composition in ("advanced", "pld")) and ratio(comp) < 1 - 1e-7 and t_hi > 1 + 1e-9
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
