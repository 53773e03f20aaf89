"""PLD accounting for an (ε, δ) session: ``connect(..., budget=ApproxDP(ε, δ), composition="pld")``.

The session composes its releases by their exact privacy-loss distributions instead of adding
ε and δ: it holds the budget as the largest μ whose Gaussian-DP curve passes through (ε, δ)
(:func:`~privplan.accounting.gdp_budget.approx_to_gdp`) and charges the worst neighbouring pair
Σ μ_i² over the mechanisms it affects (the general composition theorem, with Gaussian-DP as the
composed definition). For Gaussian noise this *is* the PLD composition (Gaussian PLDs compose
exactly), and it is valid although queries and their budgets are chosen after earlier answers
(Smith & Thakurta 2022: a Gaussian-DP privacy filter) — which a general PLD accountant is not.
See :mod:`privplan.accounting.gdp_budget` for the theorem and the references.

Each query names the noise it may add: ``mu=`` (Gaussian, σ = Δ/μ), or ``epsilon=`` with
``delta=`` > 0, its own (ε, δ) — the Gaussian calibrated exactly to it (the analytic Gaussian
mechanism: the largest μ whose curve passes through the query's (ε, δ)). A query's ``epsilon=``
without δ is refused: no Gaussian release is (ε, 0)-DP, and a Laplace release enters a GDP
composition only through its looser μ(ε) bound — an additive session suits such queries better.
Private GROUP BY keys need partition selection, an (ε, δ) mechanism without a μ: refused too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from privplan.accounting.definitions import GDP, ApproxDP, PrivacyValue, same_kind
from privplan.accounting.model import MechanismSpec
from privplan.errors import PolicyError
from privplan.planning.query_budget import query_budget

__all__ = ["COMPOSITIONS", "PLDAccounting", "pld_accounting"]

COMPOSITIONS = ("additive", "pld")


@dataclass(frozen=True)
class PLDAccounting:
    """An (ε, δ) session's budget held as μ-GDP (``mu``), and its (ε, δ) reading."""

    target: ApproxDP
    mu: GDP

    @property
    def delta(self) -> Any:
        return self.target.exact_delta

    def as_approx(self, total: GDP) -> ApproxDP:
        """The (ε, δ) at the session's δ that a composed μ implies (exact Gaussian PLD)."""
        from privplan.accounting.conversions import gdp_to_approx  # (scipy: a PLD session's)

        return gdp_to_approx(total, self.delta)

    def query_budget(self, given: Mapping[str, Any]) -> GDP:
        """A query's keywords as the μ its noise is calibrated to (see the module docstring)."""
        budget, eps, delta = given.get("budget"), given.get("epsilon"), given.get("delta")
        # an (ε, δ) as the value states it (ε-DP is (ε, 0): refused below, with what to pass)
        approx = budget.stated_as(ApproxDP) if isinstance(budget, PrivacyValue) else None
        if approx is not None:
            if len([v for v in given.values() if v is not None]) > 1:
                raise PolicyError("pass budget= alone, or epsilon= with delta=, or mu=")
            eps, delta = approx.exact_epsilon, approx.exact_delta
        elif eps is None:
            return query_budget(GDP, **given)  # mu= or budget=GDP(...), checked as usual
        # (ε, δ) of the query itself: the numbers are checked by the usual route first
        value = query_budget(ApproxDP, epsilon=eps, delta=delta if delta is not None else 0)
        if value.exact_delta <= 0:
            raise PolicyError(
                f"this session uses PLD accounting (Gaussian noise): give the query its own "
                f"(ε, δ) with delta > 0, e.g. epsilon={value.epsilon:g}, delta=1e-8, or mu=. "
                "No Gaussian release is (ε, 0)-DP; for pure-ε queries open a session with "
                "composition='additive'.")
        if value.exact_delta >= 1:
            raise PolicyError(f"delta={delta!r} must be below 1")
        from privplan.accounting.gdp_budget import approx_to_gdp  # (scipy: a PLD session's)

        try:
            return approx_to_gdp(value.exact_epsilon, value.exact_delta)
        except ValueError as err:
            raise PolicyError(f"invalid query budget: {err}. Why: a budget that is not a "
                              "finite positive number bounds nothing. Fix: pass a positive "
                              "number, e.g. epsilon=0.5.") from None

    def describe(self, total: GDP) -> str:
        """A composed μ with its (ε, δ) reading, e.g. for error messages."""
        approx = self.as_approx(total)
        return f"μ = {float(total.exact_mu):.4g} ≈ (ε = {approx.epsilon:.4g}, δ = {approx.delta:.3g})"

    def note(self, projected: GDP, worst: Sequence[MechanismSpec] | None = None) -> str:
        """The explanation's line: the PLD total, and with ``worst`` (the mechanisms the worst
        neighbouring pair affects) what additive accounting would charge for the same noise —
        each of them at its own (ε_i, δ/n), summed; at least that, as a pair paying several
        groups of one mechanism counts it once here."""
        text = (f"PLD accounting: composed {self.describe(projected)} of the budget "
                f"(ε = {self.target.epsilon:g}, δ = {self.target.delta:g})")
        if worst is None:
            return text + "."
        from privplan.accounting.gdp_budget import sequential_approx  # (scipy)

        additive = sequential_approx([cast(GDP, m.cost).exact_mu for m in worst
                                      if same_kind(m.cost, self.mu)], self.delta)
        return (f"{text}; additive (ε, δ) accounting of the releases the worst pair affects "
                f"(each at δ/n, summed) would charge at least ε = {additive.epsilon:.4g}.")


def pld_accounting(budget: Any, composition: str) -> PLDAccounting | None:
    """The session's PLD accounting for ``composition="pld"`` (None for additive), with a
    clear error for any other value or a budget it cannot hold."""
    if composition not in COMPOSITIONS:
        raise PolicyError(f"composition={composition!r}: use 'additive' (the default) or 'pld'")
    if composition == "additive":
        return None
    delta = budget.delta_or_none() if isinstance(budget, PrivacyValue) else None
    if delta is None or not 0 < delta < 1:
        raise PolicyError(
            "composition='pld' is for (ε, δ) budgets with 0 < δ < 1: pass "
            "budget=pp.ApproxDP(epsilon, delta); a GDP or zCDP budget already composes "
            f"Gaussian noise exactly (got {budget!r}).")
    from privplan.accounting.gdp_budget import approx_to_gdp  # (scipy: only PLD sessions load it)

    try:
        mu = approx_to_gdp(budget.exact_epsilon, budget.exact_delta)
    except ValueError as err:
        raise PolicyError(f"composition='pld' cannot hold the budget {budget.describe()}: "
                          f"{err}. Use a smaller ε (an ε this large protects nothing).") from None
    return PLDAccounting(budget, mu)
