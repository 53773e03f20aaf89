"""The entry point, :func:`allocate`: per-query budgets for a report within one budget.

It checks the request, builds the region arrangement and the linear model (general composition
theorem, CSF'24 Thm IV.11), splits δ over the queries that select partitions, solves for the
fractions (optionally with advanced composition, CSF'24 §VI), fits exact budgets to the budget
with the ledger's history, and reports the equal-split and uniform baselines beside the result.
The caller must still verify with its real accountant.

Privacy: budgets returned compose within the budget with the ledger's history; it charges nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import cast

import numpy as np

from privplan.accounting.allocation.advanced import (
    _advanced_quads,
    _better_advanced,
    _empty_like,
    advanced_total,
)
from privplan.accounting.allocation.arrangement import DEFAULT_CELL_LIMIT
from privplan.accounting.allocation.budgets import (
    Evaluator,
    _budget_values,
    _fit,
    _modelled,
    _sum,
    _table_costs,
)
from privplan.accounting.allocation.interface import (
    Allocation,
    Baseline,
    CompositionRule,
    Demand,
    Objective,
    noise_exponent,
    round_down,
)
from privplan.accounting.allocation.linear_model import (
    _arrangement,
    _build_model,
    _exact_total,
    _Model,
    _Table,
)
from privplan.accounting.allocation.optimisation import (
    _TINY,
    _feasible_scale,
    _Infeasible,
    _needed_factor,
    _objective,
    _optimise,
)
from privplan.accounting.allocation.pld import pld_total
from privplan.accounting.allocation.structure import _structure
from privplan.accounting.definitions import KINDS, ApproxDP, Number, PrivacyValue
from privplan.accounting.model import MechanismSpec, TableModel
from privplan.accounting.solver import Composition, compose
from privplan.errors import BudgetExceededError, PolicyError

_MIN_FRACTION = 1e-6  # a query allotted less than this share of the budget: the ledger is spent


def allocate(
    demands: Sequence[Demand],
    tables: Mapping[str, TableModel],
    budget: PrivacyValue,
    *,
    objective: Objective = "weighted_sum",
    history: Sequence[MechanismSpec] = (),
    composition: CompositionRule = "basic",
    delta_prime: Number | None = None,
    cell_limit: int = DEFAULT_CELL_LIMIT,
) -> Allocation:
    """Per-query budgets minimising ``objective`` with the composed cost (with ``history``)
    within ``budget``. See the package docstring for the model."""
    kind = type(budget)
    _check_request(demands, budget, objective, composition, history)
    names = [d.name for d in demands]
    n = len(demands)
    p = noise_exponent(kind)
    budget_w = Fraction(budget.weights()[0])
    history = list(history)
    arr, notes = _arrangement(demands, history, tables, cell_limit)
    exact = all(t.exact for t in arr)

    # -- δ for partition selection ------------------------------------------------------------
    dprime: Fraction | None = None
    deltas = [Fraction(0)] * n
    if budget.delta_or_none() is not None:
        dprime, deltas = _partition_deltas(arr, demands, cast(ApproxDP, budget), composition,
                                           delta_prime)

    # -- the linear model, the structure, the fractions ------------------------------------------
    model = _build_model(arr, demands, kind, budget_w, 0, prune=composition == "basic")
    structure = _structure(demands, model, notes)
    kappa, u, lb = _targets(demands, p, budget)
    x = _solve(model, arr, demands, budget, u, p, lb, objective, composition, dprime)
    _check_starved(demands, x, budget)

    # -- fit: exact budgets, composed with the history, scaled to the budget -------------------
    evaluate = _evaluator(demands, tables, kind, arr, history, exact, dprime,
                          budget.delta_or_none())
    fit_budgets, composed = _fit(evaluate, kind, budget, x, deltas, exact, composition, history)
    w_alloc = np.array([float(Fraction(b.weights()[0]) / budget_w) for b in fit_budgets])
    basic = composed if composition == "basic" else evaluate(fit_budgets, "basic")
    sequential = _sum(fit_budgets, kind)
    equal, uniform = _baselines(evaluate, model, budget, deltas, u, p, objective, bool(history))

    rel = tuple((kq if kq > 0 else 1.0) * max(xq, _TINY) ** (-2 * p)
                for kq, xq in zip(kappa.tolist(), w_alloc.tolist()))
    return Allocation(
        kind=kind, budget=budget, objective=objective, composition=composition,
        names=tuple(names), fractions=tuple(w_alloc.tolist()), budgets=tuple(fit_budgets),
        relative_variance=rel, objective_value=_objective(w_alloc, u, p, objective),
        composed=composed, basic=basic, sequential=sequential, equal_split=equal,
        uniform=uniform, structure=structure, model_exact=exact, delta_prime=dprime,
        notes=tuple(notes))


def _check_request(demands: Sequence[Demand], budget: PrivacyValue, objective: str,
                   composition: str, history: Sequence[MechanismSpec]) -> None:
    """Refuse a request the allocator cannot serve (in this order: the first problem is named)."""
    kind = type(budget)
    if kind not in KINDS:
        raise PolicyError(f"the report budget must be a privacy value, got {budget!r}")
    if objective not in ("max", "weighted_sum"):
        raise PolicyError(f"objective must be 'max' or 'weighted_sum', got {objective!r}")
    if composition not in ("basic", "advanced", "pld"):
        raise PolicyError(f"composition must be 'basic', 'advanced' or 'pld', got {composition!r}")
    if composition in ("advanced", "pld") and budget.delta_or_none() is None:
        raise PolicyError(f"{composition} composition is for (ε, δ) budgets: give epsilon and "
                          "delta")
    if composition in ("advanced", "pld") and history:
        raise PolicyError(
            f"{composition} composition applies to a batch planned in advance; this ledger already "
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
    if Fraction(budget.weights()[0]) <= 0:
        raise PolicyError("the report budget must be positive")


def _partition_deltas(arr: Sequence[_Table], demands: Sequence[Demand], budget: ApproxDP,
                      composition: str, delta_prime: Number | None
                      ) -> tuple[Fraction | None, list[Fraction]]:
    """δ' set aside for advanced composition (or None), and each query's δ for partition
    selection: what is left of the budget's δ, split evenly over the queries that select (as
    much as every cell allows)."""
    n = len(demands)
    dprime: Fraction | None = None
    deltas = [Fraction(0)] * n
    total_delta = budget.exact_delta
    needs = [d.needs_delta for d in demands]
    if composition == "advanced":
        dprime = (Fraction(delta_prime) if delta_prime is not None
                  else (total_delta / 2 if any(needs) else total_delta))
        if not (0 < dprime < 1 and dprime <= total_delta):
            raise PolicyError("advanced composition needs 0 < δ' <= the report's δ "
                              f"(got δ' = {float(dprime):.3g}, δ = {float(total_delta):.3g})")
    if any(needs):
        # pld: half of δ is left to the composition of the ε parts (as for advanced's δ')
        avail = total_delta / 2 if composition == "pld" else total_delta - (dprime or 0)
        if avail <= 0:
            bad = [d.name for d in demands if d.needs_delta]
            raise PolicyError(
                f"queries {', '.join(bad)} release groups through partition selection, which "
                "needs δ > 0; the report's budget leaves none. Give a larger delta.")
        dmodel = _build_model(arr, demands, type(budget), total_delta, 1)
        sel = np.array([1.0 if nd else 0.0 for nd in needs])
        y = min(_feasible_scale(dmodel, sel) * float(avail / total_delta), 1.0)
        for q in range(n):
            if needs[q]:
                deltas[q] = round_down(y * float(total_delta))
                if deltas[q] <= 0:
                    raise BudgetExceededError(
                        f"query {demands[q].name!r} needs δ for partition selection but the "
                        "ledger has no δ left")
    return dprime, deltas


def _targets(demands: Sequence[Demand], p: float, budget: PrivacyValue
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """κ (relative variance at the whole budget), the objective's weights u = w·κ, and the hard
    lower bounds of the fractions the required targets impose."""
    kappa = np.array([max(float(d.kappa), 0.0) for d in demands])
    u = np.array([float(d.weight) for d in demands]) * np.where(kappa > 0, kappa, 1.0)
    lb = np.array([float(d.kappa) ** (1 / (2 * p)) if d.required else 0.0 for d in demands])
    if np.any(lb > 1.0 + 1e-12):
        bad = [d.name for d, b in zip(demands, lb) if b > 1.0 + 1e-12]
        raise BudgetExceededError(
            f"the target error of {', '.join(bad)} cannot be met even with the whole budget "
            f"{budget.describe()}: loosen the target or raise the budget")
    return kappa, u, np.minimum(lb, 1.0)


def _solve(model: _Model, arr: Sequence[_Table], demands: Sequence[Demand],
           budget: PrivacyValue, u: np.ndarray, p: float, lb: np.ndarray, objective: str,
           composition: str, dprime: Fraction | None) -> np.ndarray:
    """The fractions of the budget (basic model; for "advanced" the better of both models)."""
    try:
        x = _optimise(model, u, p, lb, objective)
        if composition == "advanced":
            assert dprime is not None
            quad = _advanced_quads(model, arr, demands, cast(ApproxDP, budget), dprime)
            x_adv = _optimise(_empty_like(model), u, p, lb, objective, quad)
            x = _better_advanced(model, quad, u, p, lb, objective, x, x_adv)
    except _Infeasible:
        lam = _needed_factor(model, lb)
        raise BudgetExceededError(
            "the queries' target errors cannot all be met within the budget "
            f"{budget.describe()}: they need about {lam:.3g} times as much "
            "(with what the ledger already holds). Loosen a target or raise the budget.") from None
    return x


def _check_starved(demands: Sequence[Demand], x: np.ndarray, budget: PrivacyValue) -> None:
    starved = [d.name for d, xq in zip(demands, x) if xq < _MIN_FRACTION]
    if starved:
        raise BudgetExceededError(
            f"no budget is left for {', '.join(starved[:5])}"
            + (f" and {len(starved) - 5} more" if len(starved) > 5 else "")
            + f": what the ledger already holds uses up the budget {budget.describe()} for every "
            "record these queries read. Use a new ledger (a new period): a ledger's budget is fixed "
            "when it is created.")


def _evaluator(demands: Sequence[Demand], tables: Mapping[str, TableModel],
               kind: type[PrivacyValue], arr: Sequence[_Table], history: list[MechanismSpec],
               exact: bool, dprime: Fraction | None, delta: Fraction | None = None
               ) -> Evaluator:
    """The composed cost of the batch (with the history) at given budgets, by a rule: advanced
    composition, the exact cells, or the solver."""
    def evaluate(budgets: Sequence[PrivacyValue], rule: str) -> Composition:
        if rule == "pld":
            assert delta is not None
            return pld_total(_modelled(demands, budgets), tables, delta)
        if rule == "advanced":
            assert dprime is not None
            return advanced_total(_modelled(demands, budgets), tables, dprime)
        if exact:
            return _exact_total(arr, _table_costs(arr, demands, budgets), kind)
        return compose(history + _modelled(demands, budgets), tables, kind)

    return evaluate


def _baselines(evaluate: Evaluator, model: _Model, budget: PrivacyValue,
               deltas: Sequence[Fraction], u: np.ndarray, p: float, objective: str,
               has_history: bool) -> tuple[Baseline, Baseline]:
    """The equal split of what is left (sequential composition) and the best uniform allocation
    by the model, for comparison."""
    kind = type(budget)
    n = len(u)
    budget_w = Fraction(budget.weights()[0])
    # what the history already holds (its composed weight) is not available to the equal split
    spent = (float(Fraction(evaluate([kind.zero()] * n, "basic").cost.weights()[0]) / budget_w)
             if has_history else 0.0)
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
    return equal, uniform
