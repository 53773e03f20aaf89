"""Split a query's budget over its mechanisms so that their *composed* cost equals the budget.

The split is done through the composition theorem itself: every measure gets a weight, the
solver computes the composed weight S of the query's mechanisms (regions, partitions,
neighbourhood, unit model), and each mechanism receives ``budget · weight / S``. Because every
composition rule is linear in the additive weights (ε, δ, ρ, μ²), the composed cost of the
scaled mechanisms is exactly the budget: two FILTER aggregates over disjoint regions each get the
whole ε; a GROUP BY under replace gives each group half (a record may move between two groups).

Noise is then calibrated to each share, and the mechanism is charged what its noise actually
costs (never more than the share, never less than the truth).

Privacy: each mechanism is charged what its noise costs, and the query composes within its budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext
from fractions import Fraction
from typing import Any, NamedTuple

from privplan.accounting.definitions import ApproxDP, PrivacyValue
from privplan.accounting.model import Growth, MechanismSpec, Partition, TableModel
from privplan.accounting.solver import Composition, compose
from privplan.errors import InternalError, UnsupportedQueryError
from privplan.mechanisms import noise as noiselib
from privplan.mechanisms.exponential import ExponentialMechanism
from privplan.sql.per_unit import charge_on_base
from privplan.sql.plan import CorePlan, Measure, QueryPlan

SELECTION_DELTA_SHARE = Fraction(1)  # all of δ goes to partition selection (counts use δ = 0)


@dataclass(frozen=True)
class PlannedMeasure:
    """A measure with its calibrated noise and what it is charged."""

    measure: Measure
    core: int
    noise: Any  # DiscreteLaplace | DiscreteGaussian | RoundedGaussian | ExponentialMechanism
    spec: MechanismSpec
    threshold: int | None = None  # partition selection: release groups with noisy count ≥ this

    @property
    def cost(self) -> Any:
        return self.spec.cost


def count_or_sum_noise(use: Any, by_id: Mapping[str, PlannedMeasure]
                       ) -> tuple[PlannedMeasure, float]:
    """The one noisy measure behind a COUNT or SUM output (``use``, an
    :class:`~privplan.sql.plan.AggregateUse`) and the factor from its noise to the output's
    units (the grid step times a literal multiplier: ``SUM(CASE WHEN p THEN 3 ...)``)."""
    mid = use.count if use.sum is None else use.sum
    assert mid is not None  # (a count or sum use names its measure)
    p = by_id[mid]
    return p, abs(float(p.measure.scale) * float(use.multiplier))


@dataclass(frozen=True)
class PlannedQuery:
    query_id: str
    plan: QueryPlan
    measures: tuple[PlannedMeasure, ...]
    composition: Composition  # the query's own composed cost (≤ its budget)

    def for_core(self, index: int) -> list[PlannedMeasure]:
        return [m for m in self.measures if m.core == index]


def _partition(core: CorePlan, table_policy: Any) -> Partition | None:
    if not core.keys:
        return None
    cols = tuple(k.column for k in core.keys)
    groups = (core.max_groups_per_unit if core.unit is not None
              else table_policy.max_groups_per_unit)
    rows = table_policy.max_rows_per_group_per_unit
    if core.max_rows_per_query is not None:  # at most m rows: in m groups, m in any one
        m = core.max_rows_per_query
        groups, rows = min(groups or m, m), min(rows or m, m)
    return Partition(
        keys=tuple(k.sql for k in core.keys),
        key_columns=cols if all(c is not None for c in cols) else None,  # type: ignore[arg-type]
        max_groups_per_unit=groups,
        max_rows_per_group=rows,
    )


def growth_of(m: Measure, kind: type[PrivacyValue]) -> Growth:
    """How the cost of a measure grows with a unit's rows in one group's input.

    A per-row measure (a count or sum on a table with units of several rows) is calibrated to
    one row; r rows move it by r times that sensitivity, and additive noise then loses r times
    the privacy (pure ε; the ε of Laplace noise under (ε, δ), where counts use δ = 0) or r²
    times (ρ of the discrete Gaussian; μ² of the rounded Gaussian under GDP, μ = rΔ/σ; μ² of
    Laplace noise under GDP, since μ = pure_to_gdp(ε) is concave in ε, so μ(r·ε) <= r·μ(ε)). A quantile's rank utility moves by r times its
    one-row sensitivity too, and the exponential mechanism's loss is r·ε (pure), (r·ε)²/8 (ρ)
    or pure_to_gdp(r·ε): the same growths. Distinct-unit counts and partition selection move
    by at most one per unit whatever its rows: flat.
    """
    if not m.per_row:
        return "flat"
    return "linear" if kind.weight_power == 1 else "square"


class _Item(NamedTuple):
    """One mechanism to allocate: its measure, core, partition, table and region, and the
    weight of its provisional cost (1; a measure of a derived table accounted in base rows,
    :func:`~privplan.sql.per_unit.charge_on_base`, keeps the budget share it had there)."""

    core: int
    measure: Measure
    partition: Partition | None
    table: str
    region: Any
    weight: Fraction = Fraction(1)


def _items(plan: QueryPlan, budget: Any, policy: Any, tables: dict[str, TableModel]
           ) -> list[_Item]:
    """The query's mechanisms, and in ``tables`` the model of each table they read."""
    kind: Any = type(budget)
    items: list[_Item] = []
    for ci, core in enumerate(plan.cores):
        tp = core.table_policy if core.table_policy is not None else policy.table(core.table)
        tables[tp.name] = tp.table_model()
        part = _partition(core, tp)
        for m in core.measures:
            base = charge_on_base(core, m, part, lambda x: growth_of(x, kind))
            if base is None:
                items.append(_Item(ci, m, part, core.table, m.region))
            else:  # a SUM of a per-unit SUM or COUNT: in base rows, on the base table
                tables[base.table.name] = base.table.table_model()
                items.append(_Item(ci, base.measure, base.partition, base.table.name,
                                   base.region, base.weight))
        if core.selection is not None:
            delta = budget.delta_or_none()
            if delta == 0:
                key = next(k for k in core.keys if k.public_domain is None)
                raise UnsupportedQueryError(
                    f"GROUP BY {key.sql}: its values are not public, so groups are released "
                    f"through DP partition selection, which needs δ > 0: pass delta= with "
                    f"epsilon= (e.g. delta=1e-6), or declare `public_values` for the key column.")
            if delta is None:
                key = next(k for k in core.keys if k.public_domain is None)
                raise UnsupportedQueryError(
                    f"GROUP BY {key.sql}: its values are not public, so groups can only be "
                    f"released through DP partition selection, which needs an (ε, δ) budget; "
                    f"this query's budget is {kind.__name__}. Declare `public_values` for the "
                    f"key column in the policy, group by a CASE with literal results, or ask it "
                    f"in a session with an (ε, δ) budget (pp.ApproxDP, additive composition) and "
                    f"pass epsilon= and delta=."
                )
            items.append(_Item(ci, core.selection, part, core.table, core.selection.region))
    return items


def plan_costs(
    plan: QueryPlan, budget: Any, policy: Any, *, query_id: str = "q"
) -> PlannedQuery:
    """Allocate ``budget`` over the query's measures and calibrate their noise."""
    kind: Any = type(budget)  # (a PrivacyValue subclass; kind-specific methods used)
    tables: dict[str, TableModel] = {}
    items = _items(plan, budget, policy, tables)

    def provisional(m: Measure, w: Fraction) -> Any:
        return kind.unit_cost(spends_delta=m.kind == "select_count", weight=w)

    specs = [
        MechanismSpec(id=f"{query_id}.{m.id}", table=table, region=region,
                      cost=provisional(m, w), partition=part, label=m.label,
                      growth=growth_of(m, kind))
        for ci, m, part, table, region, w in items
    ]
    base = compose(specs, tables, kind).cost.weights()
    target = budget.weights()
    # b = 0: no record can affect any mechanism on this coordinate (e.g. every region is
    # empty), so any share composes to 0; give each the whole budget there
    factors = [Fraction(t) / Fraction(b) if b > 0 else Fraction(t) for t, b in zip(target, base)]

    planned: list[PlannedMeasure] = []
    for (ci, m, part, *_), spec in zip(items, specs):
        cost: Any = spec.cost
        share = kind.from_weights(tuple(w * f for w, f in zip(cost.weights(), factors)))
        if m.kind == "select_count":
            noise, threshold, cost = _selection(m, share, plan.cores[ci].min_units_per_group)
        elif m.kind == "quantile":  # the exponential mechanism: its ε is the whole share
            share = share.without_delta()
            noise = ExponentialMechanism.calibrate(share, monotone=m.monotone)
            cost, threshold = noise.cost(kind), None
        else:
            share = share.without_delta()
            if not _positive(share):
                raise InternalError(f"zero budget share for {m.label}")  # pragma: no cover
            noise = noiselib.calibrate(m.sensitivity, share)
            cost = noise.cost(m.sensitivity, kind, delta=0)  # (spends no δ)
            threshold = None
        final = MechanismSpec(id=spec.id, table=spec.table, region=spec.region, cost=cost,
                              partition=part, label=m.label, growth=spec.growth)
        planned.append(PlannedMeasure(m, ci, noise, final, threshold))

    total = compose([p.spec for p in planned], tables, kind)
    if not total.cost <= budget:
        raise InternalError(
            f"allocation composed to {total.cost!r}, above the query budget {budget!r}"
        )
    return PlannedQuery(query_id, plan, tuple(planned), total)


def _positive(cost: Any) -> bool:
    return any(w > 0 for w in cost.weights())


def _selection(m: Measure, share: Any, min_units: int = 1) -> tuple[Any, int, Any]:
    """Laplace thresholding for partition selection (per group an (ε, δ)-DP mechanism).

    A group's count has sensitivity Δ (rows one unit may add). With discrete Laplace noise of
    scale t = Δ/ε the released noisy count is ε-DP between non-empty inputs; a group that only
    exists because of one unit (count ≤ Δ) passes the threshold τ with probability
    P(Z ≥ τ − Δ) = p^(τ−Δ)/(1+p), p = e^(−1/t) — we pick τ so that this is ≤ δ. Empty groups are
    never produced, which is exactly the "output ⊥ on empty input" branch of the analysis.

    ``min_units`` = N (BigQuery's ``min_privacy_units_per_group``) raises τ by N - 1: the same
    test on the count minus N - 1 (a constant shift, so the same ε and δ; PipelineDP's
    pre-threshold). A group of fewer than N units then passes with probability at most δ
    (BigQuery drops it outright, from its exact unit count); groups of N or more are selected
    as groups of 1 or more were.
    """
    eps, delta = share.exact_epsilon, share.exact_delta
    if eps <= 0 or delta <= 0:
        raise InternalError("partition selection needs ε > 0 and δ > 0")
    noise = noiselib.DiscreteLaplace(Fraction(m.sensitivity) / eps)
    threshold = m.sensitivity + selection_margin(Fraction(eps) / m.sensitivity, Fraction(delta))
    return noise, threshold + (min_units - 1), ApproxDP(eps, delta)


_DIGITS = 60  # working precision of the tail bound (about 10^-55 relative error at most)
_SLACK = Decimal("1e-40")  # how much the computed tail is inflated to make it an upper bound


def selection_margin(rate: Fraction, delta: Fraction) -> int:
    """The smallest a >= 0 with P(Z >= a) = p^a / (1 + p) <= δ, for discrete Laplace noise Z
    with p = exp(-rate) (rate = ε/Δ): a group made by one unit alone (count <= Δ) passes the
    threshold Δ + a with probability at most δ.

    Why it is exact and safe: the tail is computed with Python's ``decimal`` at 60 digits, where
    ``exp`` is correctly rounded, so a handful of operations err by far less than 10^-50
    relative; the computed tail is inflated by 10^-40 before it is compared with δ, so the
    margin returned always satisfies the true inequality, and it is the smallest one unless the
    true tail lies within 10^-40 (relative) of δ, where it may be one larger.
    """
    if rate <= 0 or delta <= 0:
        raise InternalError("partition selection needs ε > 0 and δ > 0")
    with localcontext() as ctx:
        ctx.prec = _DIGITS
        r = Decimal(rate.numerator) / Decimal(rate.denominator)
        d = Decimal(delta.numerator) / Decimal(delta.denominator)
        p = (-r).exp()

        def fits(a: int) -> bool:
            tail = (-(r * a)).exp() / (1 + p)
            return tail * (1 + _SLACK) <= d

        # the solution of p^a / (1 + p) = δ as a first guess, then the exact smallest
        guess = (1 / (d * (1 + p))).ln() / r
        a = max(0, int(guess.to_integral_value(rounding=ROUND_CEILING)))
        while not fits(a):
            a += 1
        while a > 0 and fits(a - 1):
            a -= 1
        return a


def table_models(policy: Any, names: Sequence[str]) -> Mapping[str, TableModel]:
    return {n: policy.table(n).table_model() for n in names}
