"""The optimisation over the linear model: the fractions of the budget each query gets.

A query's relative variance at fraction x_q is u_q x_q^{-2p}. ``max`` is a linear programme
(maximise s with x_q ≥ s·c_q under the cell constraints); ``weighted_sum`` is convex and solved
by SLSQP from the max-min point. Optional quadratic cells carry the advanced-composition branch.
The result is never worse than the best uniform allocation (kept as a safety net). Pure numerics:
privacy is only in the constraints, which the model guarantees are conservative.

Privacy: pure numerics: the fractions meet the model's constraints, which hold the privacy argument.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize

from privplan.accounting.allocation.linear_model import _Model
from privplan.errors import InternalError

_TINY = 1e-12


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
