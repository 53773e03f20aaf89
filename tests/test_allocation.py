"""Budget allocation for reports (privplan.accounting.allocation): hand-computable cases, the
optimum against the equal split, and the composed cost checked with the solver."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from privplan.accounting.allocation import (
    Demand,
    advanced_total,
    allocate,
    co_affected_sets,
    round_down,
)
from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.accounting.model import MechanismSpec, Partition, TableModel, UnitModel
from privplan.accounting.solver import compose
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet
from privplan.errors import BudgetExceededError, PolicyError

T = {"t": TableModel()}


def unit(kind: type) -> object:
    """A budget of 1 in the allocated weight (δ = 0: plain counts use Laplace noise)."""
    return ApproxDP(1, 0) if kind is ApproxDP else kind.from_weights((Fraction(1),))


def q(name: str, *regions: Region, kind: type = PureDP, table: str = "t",
      partition: Partition | None = None, **kw: object) -> Demand:
    """A query whose mechanisms (one per region) split its reference budget equally."""
    ref = unit(kind)
    share = kind.from_weights(tuple(w / len(regions) for w in ref.weights()))
    mechs = tuple(MechanismSpec(f"{name}.m{i}", table, r, share, partition)
                  for i, r in enumerate(regions))
    return Demand(name, mechs, ref, **kw)  # type: ignore[arg-type]


def grp(v: str) -> Region:
    return Region.column("g", ColumnSet.points([v]))


def age(lo: int, hi: int) -> Region:
    return Region.column("age", ColumnSet.interval(lo, hi))


def eps(a: object) -> list[float]:
    return [float(b.weights()[0]) for b in a.budgets]  # type: ignore[attr-defined]


def modelled(demands: list[Demand], budgets: tuple[object, ...]) -> list[MechanismSpec]:
    """The mechanisms at the allocated budgets, rebuilt independently of the allocator."""
    out = []
    for d, b in zip(demands, budgets):
        f = [Fraction(t) / Fraction(r) if r else Fraction(0)
             for t, r in zip(b.weights(), d.reference.weights())]  # type: ignore[attr-defined]
        for m in d.mechanisms:
            out.append(MechanismSpec(f"{d.name}/{m.id}", m.table, m.region,
                                     type(b).from_weights(tuple(Fraction(w) * x for w, x in
                                                                zip(m.cost.weights(), f))),
                                     m.partition))
    return out


@pytest.mark.parametrize("objective", ["max", "weighted_sum"])
def test_three_disjoint_queries_each_get_the_whole_budget(objective: str) -> None:
    demands = [q("a", grp("a")), q("b", grp("b")), q("c", grp("c"))]
    a = allocate(demands, T, PureDP(1), objective=objective)
    assert a.budgets == (PureDP(1), PureDP(1), PureDP(1))
    assert a.composed.cost == PureDP(1)
    assert a.sequential == PureDP(3)  # what sequential composition would charge for this noise
    assert a.model_exact
    assert set(a.structure.disjoint) == {("a", "b"), ("a", "c"), ("b", "c")}
    assert a.structure.overlapping == ()
    assert len(a.structure.components) == 3


@pytest.mark.parametrize("objective", ["max", "weighted_sum"])
def test_two_fully_overlapping_queries_get_half_each(objective: str) -> None:
    a = allocate([q("a", Region.full()), q("b", Region.full())], T, PureDP(1),
                 objective=objective)
    assert eps(a) == pytest.approx([0.5, 0.5], abs=1e-4)
    assert a.composed.cost <= PureDP(1)
    assert a.structure.overlapping == (("a", "b"),)
    assert a.structure.groups == (("a", "b"),)


@pytest.mark.parametrize(("kind", "objective", "ratio"), [
    (PureDP, "weighted_sum", 2.0),  # min 8/x² + 1/y², x + y = 1: x/y = 8^(1/3)
    (PureDP, "max", math.sqrt(8)),  # 8/x² = 1/y²: x/y = sqrt(8)
    (ZCDP, "weighted_sum", math.sqrt(8)),  # min 8/x + 1/y: x/y = sqrt(8)
    (ZCDP, "max", 8.0),  # 8/x = 1/y
])
def test_weights_shift_budget(kind: type, objective: str, ratio: float) -> None:
    a = allocate([q("heavy", Region.full(), kind=kind, weight=8.0),
                  q("light", Region.full(), kind=kind)], T, unit(kind), objective=objective)
    x, y = eps(a)
    assert x / y == pytest.approx(ratio, rel=1e-4)
    assert x + y == pytest.approx(1.0, abs=1e-4)
    assert a.composed.cost <= unit(kind)


def test_mixed_structure_hand_computed() -> None:
    # "all" overlaps "young" and "old", which are disjoint: cells {all, young}, {all, old}
    demands = [q("all", Region.full()), q("young", age(0, 17)), q("old", age(65, 100))]
    a = allocate(demands, T, PureDP(1), objective="weighted_sum")
    c = 2 ** (1 / 3)  # min 1/x² + 2/y², x + y = 1  =>  y/x = 2^(1/3)
    assert eps(a) == pytest.approx([1 / (1 + c), c / (1 + c), c / (1 + c)], rel=1e-4)
    assert a.objective_value == pytest.approx((1 + c) ** 3, rel=1e-3)
    assert a.structure.groups == (("all", "young"), ("all", "old"))
    assert a.structure.disjoint == (("young", "old"),)
    m = allocate(demands, T, PureDP(1), objective="max")
    assert eps(m) == pytest.approx([0.5, 0.5, 0.5], abs=1e-4)


def test_gdp_composes_in_mu_squared() -> None:
    demands = [q("all", Region.full(), kind=GDP), q("young", age(0, 17), kind=GDP),
               q("old", age(65, 100), kind=GDP)]
    a = allocate(demands, T, GDP(1), objective="max")
    assert [float(b.mu) for b in a.budgets] == pytest.approx([math.sqrt(0.5)] * 3, rel=1e-4)
    assert a.composed.cost <= GDP(1)


def test_replace_neighbourhood_makes_disjoint_queries_add_up() -> None:
    # a record moving from young to old affects young, old and all: everything adds up
    demands = [q("all", Region.full()), q("young", age(0, 17)), q("old", age(65, 100))]
    tables = {"t": TableModel("replace")}
    a = allocate(demands, tables, PureDP(1))
    assert eps(a) == pytest.approx([1 / 3] * 3, abs=1e-4)
    assert compose(modelled(demands, a.budgets), tables, PureDP).cost <= PureDP(1)
    assert a.structure.disjoint == ()


def test_replace_group_by_pays_two_groups() -> None:
    part = Partition(keys=("g",), key_columns=("g",))
    demands = [q("by_g", Region.full(), partition=part), q("a", grp("a"))]
    tables = {"t": TableModel("replace")}
    a = allocate(demands, tables, PureDP(1), objective="max")
    assert compose(modelled(demands, a.budgets), tables, PureDP).cost <= PureDP(1)
    assert a.composed.cost <= PureDP(1)


def test_units_of_several_rows_overlap_on_non_unit_level_columns() -> None:
    tables = {"t": TableModel("add_remove", UnitModel(3, frozenset({"age"})))}
    demands = [q("young", age(0, 17)), q("old", age(65, 100)), q("a", grp("a")), q("b", grp("b"))]
    a = allocate(demands, tables, PureDP(1), objective="max")
    s = a.structure
    assert ("young", "old") in s.disjoint  # age is constant per unit
    assert ("a", "b") in s.overlapping  # one unit may have rows in both groups
    assert compose(modelled(demands, a.budgets), tables, PureDP).cost <= PureDP(1)
    assert a.composed.cost == compose(modelled(demands, a.budgets), tables, PureDP).cost


def _random_workload(seed: int, n: int) -> list[Demand]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        regions = []
        for _ in range(rng.choice([1, 1, 2])):
            cons = {}
            if rng.random() < 0.7:
                lo = rng.randrange(0, 90)
                cons["age"] = ColumnSet.interval(lo, lo + rng.randrange(5, 40))
            if rng.random() < 0.6:
                cons["g"] = ColumnSet.points(rng.sample("abcd", rng.randrange(1, 3)))
            if rng.random() < 0.3:
                cons["flag"] = ColumnSet.points([rng.random() < 0.5])
            regions.append(Region.box(**cons))
        out.append(q(f"q{i}", *regions, weight=rng.choice([1.0, 1.0, 2.0, 5.0])))
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("objective", ["max", "weighted_sum"])
def test_optimum_beats_equal_split_at_no_higher_cost(seed: int, objective: str) -> None:
    demands = _random_workload(seed, 12)
    a = allocate(demands, T, PureDP(1), objective=objective)
    real = compose(modelled(demands, a.budgets), T, PureDP)
    assert real.cost == a.composed.cost  # the allocator's exact total is the solver's
    assert real.cost <= PureDP(1)
    eq = a.equal_split
    assert eq.composed <= PureDP(1)
    assert real.cost.epsilon <= 1.0 and eq.sequential == PureDP(1) or eq.sequential <= PureDP(1)
    assert a.objective_value <= eq.objective_value * (1 + 1e-9)
    assert a.objective_value <= a.uniform.objective_value * (1 + 1e-9)
    # and privplan charges (much) less than sequential composition for the same noise
    assert real.cost <= a.sequential


def test_history_is_respected_and_an_exhausted_ledger_refuses() -> None:
    history = [MechanismSpec("old.m", "t", age(0, 17), PureDP("0.75"))]
    demands = [q("young", age(0, 17)), q("old", age(65, 100))]
    a = allocate(demands, T, PureDP(1), history=history)
    assert eps(a) == pytest.approx([0.25, 1.0], abs=1e-4)
    assert compose(history + modelled(demands, a.budgets), T, PureDP).cost <= PureDP(1)
    spent = [MechanismSpec("all.m", "t", Region.full(), PureDP(1))]
    with pytest.raises(BudgetExceededError, match="no budget is left"):
        allocate(demands, T, PureDP(1), history=spent)


def test_targets_are_hard_lower_bounds() -> None:
    # kappa = (std at the whole budget / target)^2: young needs at least 0.8 of the budget
    demands = [q("all", Region.full()), q("young", age(0, 17), kappa=0.64, required=True)]
    a = allocate(demands, T, PureDP(1), objective="weighted_sum")
    assert eps(a)[1] >= 0.8 * (1 - 1e-4)
    assert sum(eps(a)) == pytest.approx(1.0, abs=1e-4)
    demands.append(q("also", Region.full(), kappa=0.64, required=True))
    with pytest.raises(BudgetExceededError, match="target errors cannot all be met"):
        allocate(demands, T, PureDP(1))


def test_approx_dp_splits_delta_over_selecting_queries() -> None:
    sel = MechanismSpec("s.sel", "t", Region.full(), ApproxDP(Fraction(1, 2), Fraction(1, 2)))
    cnt = MechanismSpec("s.cnt", "t", Region.full(), ApproxDP(Fraction(1, 2), 0))
    demands = [Demand("s", (sel, cnt), ApproxDP(1, Fraction(1, 2))),
               q("c", Region.full(), kind=ApproxDP)]
    budget = ApproxDP(1, Fraction(1, 10**6))
    a = allocate(demands, T, budget)
    assert a.budgets[0].delta > 0 and a.budgets[1].delta == 0
    assert compose(modelled(demands, a.budgets), T, ApproxDP).cost <= budget
    with pytest.raises(PolicyError, match="needs δ > 0"):
        allocate(demands, T, ApproxDP(1, 0))


def test_advanced_composition_allows_more_epsilon_on_many_overlapping_queries() -> None:
    # k mechanisms of ε each: ½kε² + ε·sqrt(2k ln(1/δ')) <= 2 beats kε <= 2 for k >> 2 ln(1/δ')
    k = 100
    demands = [q(f"q{i}", Region.full(), kind=ApproxDP) for i in range(k)]
    budget = ApproxDP(2, Fraction(1, 10**6))
    basic = allocate(demands, T, budget)
    adv = allocate(demands, T, budget, composition="advanced")
    assert eps(basic) == pytest.approx([2 / k] * k, rel=1e-4)
    e = (-math.sqrt(2 * k * math.log(1e6)) + math.sqrt(2 * k * math.log(1e6) + 4 * k)) / k
    assert eps(adv) == pytest.approx([e] * k, rel=1e-4)  # ≈ 0.0343, 1.7 times 2/k
    assert adv.objective_value < basic.objective_value
    # the claimed total is recomputed from the mechanisms alone, and fits the budget
    total = advanced_total(modelled(demands, adv.budgets), T, adv.delta_prime)
    assert total.cost == adv.composed.cost and total.cost <= budget
    assert adv.basic.cost.epsilon > 2  # summing would exceed the budget
    with pytest.raises(PolicyError, match="fresh|new ledger"):
        allocate(demands, T, budget, composition="advanced",
                 history=[MechanismSpec("h", "t", Region.full(), ApproxDP("0.1", 0))])
    with pytest.raises(PolicyError):
        allocate([q("a", Region.full())], T, PureDP(1), composition="advanced")


def test_advanced_total_uses_the_worst_affected_set_only() -> None:
    # 40 mechanisms on disjoint groups: any record affects one, so the total is one ε
    specs = [MechanismSpec(f"m{i}", "t", grp(str(i)), ApproxDP("0.1", 0)) for i in range(40)]
    total = advanced_total(specs, T, Fraction(1, 10**6))
    assert total.cost == ApproxDP("0.1", 0)
    overlapping = [MechanismSpec(f"m{i}", "t", Region.full(), ApproxDP("0.1", 0))
                   for i in range(400)]
    adv = advanced_total(overlapping, T, Fraction(1, 10**6))
    assert adv.cost.epsilon < 40 and adv.cost.delta == pytest.approx(1e-6)


def test_co_affected_sets_small_and_conservative_when_limited() -> None:
    specs = [MechanismSpec("a", "t", age(0, 17), PureDP(1)),
             MechanismSpec("b", "t", age(10, 30), PureDP(1)),
             MechanismSpec("c", "t", age(40, 50), PureDP(1)),
             MechanismSpec("d", "t", grp("x"), PureDP(1))]
    events, exact = co_affected_sets(specs, TableModel())
    sets = {frozenset(e.mechanisms) for e in events}
    assert exact and sets == {frozenset({0, 1, 3}), frozenset({2, 3})}
    events, exact = co_affected_sets(specs, TableModel(), limit=1)
    assert not exact  # columns merged: every event is a superset of a real cell
    assert all(any(s <= frozenset(e.mechanisms) for e in events) for s in sets)


def test_validation_errors() -> None:
    with pytest.raises(PolicyError):
        allocate([], T, PureDP(1))
    with pytest.raises(PolicyError, match="objective"):
        allocate([q("a", Region.full())], T, PureDP(1), objective="min")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="unique"):
        allocate([q("a", Region.full()), q("a", grp("x"))], T, PureDP(1))
    with pytest.raises(TypeError):
        allocate([q("a", Region.full(), kind=ZCDP)], T, PureDP(1))


def test_round_down() -> None:
    assert round_down(0.1234567891234) == Fraction("0.12345")
    assert round_down(0.1234567891234, digits=9) == Fraction("0.123456789")
    assert round_down(Fraction(2, 3)) <= Fraction(2, 3)
    assert round_down(0) == 0 and round_down(-1.0) == 0


def test_advanced_total_takes_a_units_rows_in_one_group_as_one_mechanism() -> None:
    # a unit of 100 rows, all in one group: that group's Laplace count moves by 100, which costs
    # 100·ε = 1.0; composing 100 copies of ε = 0.01 would say 0.57 (an under-charge)
    model = {"t": TableModel(unit=UnitModel(max_rows=100))}
    part = Partition(("g",), ("g",), max_groups_per_unit=1, max_rows_per_group=100)
    spec = MechanismSpec("m", "t", Region.full(), ApproxDP("0.01", 0), part, growth="linear")
    total = advanced_total([spec], model, Fraction(1, 10**6))
    assert total.cost.exact_epsilon == 1
    # spread over at most 10 groups of 10 rows: ten mechanisms of 0.1 each
    part10 = Partition(("g",), ("g",), max_groups_per_unit=10, max_rows_per_group=10)
    spec10 = MechanismSpec("m", "t", Region.full(), ApproxDP("0.01", 0), part10,
                           growth="linear")
    from privplan.accounting.conversions import advanced_composition
    expect = advanced_composition([Fraction(1, 10)] * 10, [Fraction(0)] * 10,
                                  Fraction(1, 10**6))
    assert advanced_total([spec10], model, Fraction(1, 10**6)).cost == expect
    # flat growth (a distinct-unit count per group) keeps one mechanism per group
    flat = MechanismSpec("f", "t", Region.full(), ApproxDP("0.01", 0), part10)
    flat_expect = advanced_composition([Fraction(1, 100)] * 10, [Fraction(0)] * 10,
                                       Fraction(1, 10**6))
    assert advanced_total([flat], model, Fraction(1, 10**6)).cost == flat_expect


def test_group_multipliers_sum_to_what_the_event_pays() -> None:
    from privplan.accounting.allocation.arrangement import group_multipliers
    model = TableModel(unit=UnitModel(max_rows=25))
    part = Partition(("g",), ("g",), max_groups_per_unit=3, max_rows_per_group=10)
    spec = MechanismSpec("m", "t", Region.full(), ApproxDP("0.01", 0), part, growth="linear")
    assert group_multipliers(spec, model, 25) == [10, 10, 5]
    assert group_multipliers(spec, model, 50) == [20, 20, 10]
    with pytest.raises(ValueError):
        group_multipliers(spec, model, 7)
