"""What the allocator takes and returns: a query's demand, the events and structure of the
region arrangement, the allocation with its baselines, and two small rules shared by every step.

A :class:`Demand` is one query of a report as planned at a reference budget; an :class:`Event` is
a maximal set of mechanisms one neighbouring change can affect (the general composition theorem,
CSF'24 Thm IV.11, charges the worst one); :class:`Structure` says which queries can be affected
together; :class:`Allocation` holds the exact per-query budgets and the composed cost they were
fitted to. :func:`noise_exponent` is how a query's noise scales with its budget (Laplace 1/b,
Gaussian 1/sqrt(b)); :func:`round_down` keeps allocated budgets on a small-denominator grid, so
rounding can only lower a charge, never raise it.

Privacy: round_down keeps budgets at or below the exact fractions: rounding never adds cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from typing import Any, Literal

from privplan.accounting.definitions import PrivacyValue
from privplan.accounting.model import MechanismSpec
from privplan.accounting.solver import Composition

Objective = Literal["max", "weighted_sum"]
CompositionRule = Literal["basic", "advanced", "pld"]

_DIGITS = 5  # significant digits of an allocated budget (rounded down). Few digits keep the
# charged costs on a common small-denominator grid: a share k/(10^d·S) calibrates to noise
# without rounding (k < 2^19) and the solver then composes in exact integers (its fast path).


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
    reference: PrivacyValue
    weight: float = 1.0
    kappa: float = 1.0
    required: bool = False

    @property
    def needs_delta(self) -> bool:
        return any((m.cost.delta_or_none() or 0) > 0 for m in self.mechanisms)


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
    budgets: tuple[PrivacyValue, ...]
    objective_value: float
    composed: PrivacyValue
    sequential: PrivacyValue


@dataclass(frozen=True)
class Allocation:
    """Per-query budgets for a batch, and why.

    ``fractions[q]`` is b_q / B in the allocated weight (ε, ρ or μ²); ``budgets[q]`` the exact
    privacy value to run query q with; ``composed`` the modelled composed cost of the batch with
    the history (:class:`Composition`; for ``composition="advanced"`` the advanced total);
    ``basic`` the same by the general theorem with sums (equal to ``composed`` for "basic");
    ``sequential`` what sequential composition would charge for the same noise (Σ b_q).
    """

    kind: type[PrivacyValue]
    budget: PrivacyValue
    objective: str
    composition: str
    names: tuple[str, ...]
    fractions: tuple[float, ...]
    budgets: tuple[PrivacyValue, ...]
    relative_variance: tuple[float, ...]
    objective_value: float
    composed: Composition
    basic: Composition
    sequential: PrivacyValue
    equal_split: Baseline
    uniform: Baseline
    structure: Structure
    model_exact: bool
    delta_prime: Fraction | None = None
    notes: tuple[str, ...] = field(default=())

    def budget_of(self, name: str) -> PrivacyValue:
        return self.budgets[self.names.index(name)]


def noise_exponent(kind: type[PrivacyValue]) -> float:
    """p with noise std ∝ b^-p in the allocated weight: 1 for ε (Laplace), 1/2 for ρ and μ²."""
    return 1.0 / kind.weight_power


def round_down(x: float | Fraction, digits: int = _DIGITS) -> Fraction:
    """x rounded *down* to ``digits`` significant digits, as an exact Fraction (>= 0)."""
    if x <= 0:
        return Fraction(0)
    d = Decimal(x.numerator) / Decimal(x.denominator) if isinstance(x, Fraction) else Decimal(
        repr(float(x)))
    with localcontext(prec=digits, rounding=ROUND_FLOOR):
        return Fraction(+d)
