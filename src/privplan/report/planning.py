"""Planning a report: per-query budgets that minimise the objective, checked by the accountant.

:func:`plan_report` plans every query from its text and the policy (nothing is read from the
data), asks :func:`privplan.accounting.allocation.allocate` for the budget split (disjoint
queries each get the whole budget, overlapping ones share it), meets each ``target_error`` with
the smallest budget share that reaches it, and then verifies the budgets with the session's real
accountant, scaling them down by a tiny factor if rounding pushed the total over the budget.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from privplan.accounting.allocation import (
    Demand,
    advanced_total,
    allocate,
    noise_exponent,
)
from privplan.accounting.allocation.pld import pld_total
from privplan.accounting.solver import compose
from privplan.errors import BudgetExceededError, InternalError, PolicyError, PrivplanError
from privplan.explain import explain_planned
from privplan.planning.costs import PlannedQuery
from privplan.report.expected_errors import _targets, column_errors
from privplan.report.plan import PlannedReportQuery, ReportPlan
from privplan.report.spec import ReportQuery, ReportSpec, budget_dict

_VERIFY_STEPS = 40  # scale-downs tried if the real accountant disagrees with the model
REPORT_EXACT_LIMIT = 1_000_000
"""Search nodes the report session's accountant may use per admission (the interactive default
is much smaller). A report is a batch job: a larger search only makes the composed cost tighter
(the solver's answer is a proven upper bound whatever the limit)."""
_SHRINK = Fraction(1, 10**8)


def open_session(spec: ReportSpec, *, ledger: Any = None, budget: Any = None) -> Any:
    """A session on the spec's database and policy (tables registered) with ``ledger``."""
    from privplan.ledger.store import open_ledger
    from privplan.session.session import connect

    policy = spec.load_policy()
    led = open_ledger(ledger)
    try:
        _check_ledger_budget(spec, led, budget or spec.budget)
    except BaseException:
        led.close()
        raise
    sess = connect(spec.database, policy=policy, budget=budget or spec.budget, ledger=led,
                   exact_limit=REPORT_EXACT_LIMIT)
    try:
        for name, path in spec.register.items():
            sess.register(name, path)
    except BaseException:
        sess.close()
        raise
    return sess


LEDGER_FIXED = ("a ledger keeps the budget it was created with (what it spent counts against "
                "it), so its budget cannot be raised")
NEW_LEDGER = ("for a new release period, run the report against a new ledger (`ledger:` in the "
              "spec, or `privplan report run --ledger NEW.ledger.sqlite`)")


def _check_ledger_budget(spec: ReportSpec, ledger: Any, budget: Any) -> None:
    """The spec's budget is the one its existing ledger was created with, said in the spec's
    words before the session binds the ledger (which refuses it in the Python API's)."""
    stored = getattr(ledger, "stored_budget", lambda: None)()  # (an in-memory one: None)
    if stored is None or stored == budget:
        return
    from privplan.errors import LedgerError

    raise LedgerError(
        f"report spec `budget:` {_flow(budget)} differs from {stored.describe()}, the "
        f"budget the ledger {getattr(ledger, 'path', '')} was created with. Nothing was "
        f"charged. Why: {LEDGER_FIXED}. Fix: set `budget:` back to {_flow(stored)}, or, "
        f"{NEW_LEDGER}.")


def _flow(budget: Any) -> str:
    """A budget as the spec writes it: ``{epsilon: 1, delta: 1e-06}``."""
    return "{" + ", ".join(f"{k}: {float(Fraction(v)):g}"
                           for k, v in budget_dict(budget).items()) + "}"


def _plan_query(sess: Any, q: ReportQuery, budget: Any) -> PlannedQuery:
    """Plan one report query with every check ``sess.sql`` runs before its charge, so a report
    whose query would fail without looking at the data is refused before any query is run."""
    try:
        return sess.plan(q.sql, {"budget": budget})[0]
    except PrivplanError as err:
        raise type(err)(f"report query `{q.name}`: {err}") from None


def plan_report(spec: ReportSpec, *, session: Any = None, ledger: Any = None) -> ReportPlan:
    """Plan ``spec`` (nothing is spent). Uses ``session`` if given, else opens one with
    ``ledger`` (default: the spec's ledger if that file exists, else an in-memory one)."""
    if session is not None:
        return _plan_in(session, spec)
    if ledger is None and (spec.ledger or spec.source) and spec.ledger_path().exists():
        ledger = str(spec.ledger_path())
    with open_session(spec, ledger=ledger) as sess:
        return _plan_in(sess, spec)


def _plan_in(sess: Any, spec: ReportSpec) -> ReportPlan:
    if type(sess.budget) is not type(spec.budget):
        raise PolicyError("the session's budget is of another privacy definition than the report's")
    before = sess.spent()
    history_entries = sess.ledger.entries()
    history = list(sess.accountant.mechanisms())
    kind = type(spec.budget)
    p = noise_exponent(kind)
    tables = {t.name: t.table_model() for t in sess.policy.private_tables()}

    demands, targets_ref = _demands(sess, spec, p)
    # (planning registers the models of virtual tables: private joins, per-unit tables)
    tables = {**tables, **sess.table_models()}
    try:
        alloc = allocate(demands, tables, spec.budget,
                         objective=spec.objective,  # type: ignore[arg-type]
                         history=history, composition=spec.composition,  # type: ignore[arg-type]
                         delta_prime=spec.delta_prime)
    except BudgetExceededError as err:
        if not history:
            raise
        raise BudgetExceededError(f"report '{spec.name}': {err} Nothing was charged. Note: "
                                  f"{LEDGER_FIXED}; {NEW_LEDGER}.") from None

    # -- plan at the allocated budgets and verify with the session's real accountant ----------
    budgets = list(alloc.budgets)
    notes: list[str] = []
    for step in range(_VERIFY_STEPS + 1):
        planned = [_plan_query(sess, q, b) for q, b in zip(spec.queries, budgets)]
        per_query = [[replace(m.spec, id=f"{q.name}:{m.spec.id}") for m in pq.measures]
                     for q, pq in zip(spec.queries, planned)]
        specs = [m for ms in per_query for m in ms]
        # what the session's accountant will say, admission after admission, during the run
        acc, refused = copy.copy(sess.accountant), None
        for q, ms in zip(spec.queries, per_query):
            projected = acc.admit(list(ms))
            if spec.composition == "basic" and not projected.cost <= spec.budget:
                refused = q.name
                break
        basic = compose(specs, tables, kind, exact_limit=REPORT_EXACT_LIMIT) if history \
            else projected
        if spec.composition == "advanced":
            assert alloc.delta_prime is not None
            report_total = advanced_total(specs, tables, alloc.delta_prime)
            got = report_total.cost
        elif spec.composition == "pld":
            report_total = pld_total(specs, tables, spec.budget.exact_delta)
            got = report_total.cost
        else:
            report_total = basic
            got = projected.cost
        if refused is None and got <= spec.budget:
            break
        if step == _VERIFY_STEPS:
            raise InternalError("the report's budgets could not be fitted to the budget with the "
                                "session's accountant")
        over = max(Fraction(g) / Fraction(c) for g, c in zip(got.weights(), spec.budget.weights())
                   if c > 0)
        factor = min(1 / over, Fraction(1)) * (1 - _SHRINK * 2**step)
        budgets = [_scaled(b, factor) for b in budgets]
        if step == 0:
            notes.append("budgets were scaled down so that the session's accountant confirms the "
                         "total is within the budget"
                         + ("" if projected.exact else
                            " (its composition solver returned a proven upper bound: it reached "
                            "its search limit)"))
    queries = _planned_queries(sess, spec, budgets, planned, targets_ref, p)
    missed = [q.query.name for q in queries if q.targets_met is False]
    if missed:
        notes.append(f"the noise of {', '.join(missed)} is slightly above the target error: "
                     "the budgets had to be rounded or scaled down to fit the accountant")
    return ReportPlan(spec=spec, allocation=alloc, queries=queries, report_total=report_total,
                      basic_total=basic, total_before=before, projected=projected,
                      history=tuple(history_entries), notes=notes)


_Targets = dict[str, tuple[float, float]]  # column -> (std at the reference budget, target)


def _demands(sess: Any, spec: ReportSpec, p: float) -> tuple[list[Demand], list[_Targets]]:
    """Every query at the whole budget: its mechanisms per unit budget (its demand on the
    allocation) and the reference errors of its target columns."""
    demands, targets_ref = [], []
    for q in spec.queries:
        ref = _plan_query(sess, q, spec.budget)
        errors = _targets(q, column_errors(ref))
        kappa = 1.0
        if errors:
            kappa = _required_fraction(sess, q, spec.budget, errors) ** (2 * p)
        targets_ref.append(errors)
        demands.append(Demand(name=q.name, mechanisms=tuple(m.spec for m in ref.measures),
                              reference=spec.budget, weight=q.weight, kappa=kappa,
                              required=bool(errors)))
    return demands, targets_ref


def _planned_queries(sess: Any, spec: ReportSpec, budgets: Sequence[Any],
                     planned: Sequence[PlannedQuery], targets_ref: Sequence[_Targets],
                     p: float) -> list[PlannedReportQuery]:
    """Each query at its verified budget: its share, expected errors and relative variance."""
    w_total = Fraction(spec.budget.weights()[0])
    queries = []
    for q, b, pq, ref_targets in zip(spec.queries, budgets, planned, targets_ref):
        col_errors = column_errors(pq)
        frac = float(Fraction(b.weights()[0]) / w_total)
        by_col = {e.column.lower(): e for e in col_errors}
        targets = {c: ((by_col[c].std or 0.0), t) for c, (_, t) in ref_targets.items()}
        expl = explain_planned(pq, sess.accountant.total, sess.accountant.total, spec.budget)
        queries.append(PlannedReportQuery(
            query=q, budget=b, fraction=frac,
            relative_variance=(max((s / t) ** 2 for s, t in targets.values()) if targets
                               else max(frac, 1e-300) ** (-2 * p)),
            planned=pq, explanation=expl, errors=col_errors, targets=targets))
    return queries

def _scaled(b: Any, factor: Fraction) -> Any:
    """``b`` with its additive weights (ε, δ; ρ; μ²) multiplied by ``factor`` (rounded down)."""
    from privplan.accounting.allocation import round_down

    # (GDP: μ = sqrt(μ²·factor) rounded down, then short; the others' parameters are weights)
    return type(b).from_weights_down(tuple(w * factor for w in b.weights())).map_parameters(
        round_down)


def _required_fraction(sess: Any, q: ReportQuery, budget: Any,
                       targets: Mapping[str, tuple[float, float]]) -> float:
    """The smallest fraction f of the budget's weight at which every target column's noise std
    (of the real, discrete noise) is at most its target; a small margin is added for rounding."""
    def met(f: float) -> bool:
        pq = _plan_query(sess, q, _scaled(budget, Fraction(f)))
        stds = {e.column.lower(): e.std for e in column_errors(pq)}
        return all((stds.get(c) or 0.0) <= t for c, (_, t) in targets.items())

    if not met(1.0):
        worst = max(targets.items(), key=lambda kv: kv[1][0] / kv[1][1])
        raise BudgetExceededError(
            f"report query `{q.name}`: its target error {worst[1][1]:g} on '{worst[0]}' cannot be "
            f"met even with the whole budget {budget.describe()} (noise std {worst[1][0]:.4g}). "
            "Loosen its `target_error`, or give the report a larger `budget:` with a new "
            "ledger (a ledger keeps the budget it was created with).")
    p = noise_exponent(type(budget))
    guess = max(max((s / t) ** (1 / p) for s, t in targets.values()), 1e-12)
    lo, hi = guess / 2, 1.0
    if met(lo):
        return min(1.0, lo * (1 + 1e-6))
    for _ in range(40):
        if hi / lo < 1 + 1e-7:
            break
        mid = math.sqrt(lo * hi)
        if met(mid):
            hi = mid
        else:
            lo = mid
    return min(1.0, hi * (1 + 1e-6))
