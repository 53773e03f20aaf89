"""pld_total against brute force: every neighbouring pair of a tiny record domain, the mechanisms
it affects (regions evaluated on the records), their canonical PLDs composed; the max."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from privplan.accounting import pld
from privplan.accounting.allocation.pld import _partitions, pld_total
from privplan.accounting.definitions import ApproxDP
from privplan.accounting.model import (
    MechanismSpec,
    Partition,
    TableModel,
    UnitModel,
    unit_group_rows,
    unit_multiplier,
)
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet

DELTA = Fraction(1, 10**6)
VALUES = range(-1, 5)  # every atom of the regions below holds one of these
RECORDS = [{"a": a, "b": b} for a in VALUES for b in VALUES]
COSTS = [ApproxDP(Fraction(1, 20), 0), ApproxDP(Fraction(1, 10), 0),
         ApproxDP(Fraction(3, 10), Fraction(1, 10**8)), ApproxDP(Fraction(1, 50), 0)]


def _region(rng: random.Random) -> Region:
    cols = {}
    for c in rng.sample(["a", "b"], rng.randint(0, 2)):
        lo = rng.randint(0, 3)
        hi = rng.randint(lo, 3)
        cols[c] = ColumnSet.interval(lo, hi) if rng.random() < 0.7 else ColumnSet.points([lo])
    return Region.box(**cols) if cols else Region.full()


def _specs(seed: int) -> list[MechanismSpec]:
    rng = random.Random(seed)
    out = []
    for i in range(rng.randint(2, 7)):
        part = Partition(("a",), ("a",)) if rng.random() < 0.3 else None
        out.append(MechanismSpec(f"m{i}", "t", _region(rng), rng.choice(COSTS), part))
    return out


def _eps(costs: list[ApproxDP]) -> float:
    """min{PLD ε at δ, Σε when Σδ <= δ}, as pld_total decides per event."""
    if not costs:
        return 0.0
    counts: dict[tuple[Fraction, Fraction], int] = {}
    for c in costs:
        key = (c.exact_epsilon, c.exact_delta)
        counts[key] = counts.get(key, 0) + 1
    e = pld.compose_counts(counts).epsilon_for_delta(float(DELTA))
    se = float(sum(c.exact_epsilon for c in costs))
    sd = sum(c.exact_delta for c in costs)
    return min(e, se) if sd <= DELTA else e


def _brute_add_remove(specs: list[MechanismSpec]) -> float:
    return max(_eps([m.cost for m in specs if m.region.contains(x)])  # type: ignore[misc]
               for x in RECORDS)


def _brute_replace(specs: list[MechanismSpec]) -> float:
    worst = 0.0
    for x, y in itertools.combinations_with_replacement(RECORDS, 2):
        costs = []
        for m in specs:
            inx, iny = m.region.contains(x), m.region.contains(y)
            if m.partition is not None and inx and iny and x["a"] != y["a"]:
                costs += [m.cost, m.cost]  # two groups change
            elif inx or iny:
                costs.append(m.cost)
        worst = max(worst, _eps(costs))  # type: ignore[arg-type]
    return worst


@pytest.mark.parametrize("seed", range(12))
def test_add_remove_equals_brute_force(seed: int) -> None:
    specs = _specs(seed)
    got = float(pld_total(specs, {"t": TableModel()}, DELTA).cost.epsilon)
    want = _brute_add_remove(specs)
    assert got >= want - 1e-12  # never below the truth
    assert got == pytest.approx(want, abs=1e-9)  # and exact: the events are the records' sets


@pytest.mark.parametrize("seed", range(6))
def test_replace_never_below_brute_force(seed: int) -> None:
    specs = _specs(100 + seed)
    got = float(pld_total(specs, {"t": TableModel("replace")}, DELTA).cost.epsilon)
    want = _brute_replace(specs)
    assert got >= want - 1e-12
    basic = 2 * float(sum(m.cost.weights()[0] for m in specs))
    assert got <= basic


def test_disjoint_mechanisms_charge_the_worst_one_only() -> None:
    specs = [MechanismSpec(f"m{i}", "t", Region.column("a", ColumnSet.points([i])),
                           ApproxDP(Fraction(1, 10), 0)) for i in range(50)]
    total = pld_total(specs, {"t": TableModel()}, DELTA)
    # one mechanism: its canonical pair at δ = 1e-6 (just below 0.1)
    assert 0.09999 < total.cost.epsilon <= 0.1 and len(total.witness) == 1
    every = [MechanismSpec(f"m{i}", "t", Region.full(), ApproxDP(Fraction(1, 20), 0))
             for i in range(100)]
    total = pld_total(every, {"t": TableModel()}, DELTA)
    assert 2.2 < total.cost.epsilon < 2.22 and total.cost.delta == pytest.approx(1e-6)


# -- units of several rows --------------------------------------------------------------------------
@pytest.mark.invariant(1)
@pytest.mark.parametrize("k,m,c", [(4, 4, 4), (5, 2, 3), (6, 3, 2), (7, 7, 3), (3, 1, 3)])
def test_every_arrangement_is_charged_by_brute_force(k: int, m: int, c: int) -> None:
    # every arrangement of k rows into at most m groups of at most c: r rows in a group is one
    # mechanism of cost r·ε (group privacy). The filled-to-the-cap arrangement is NOT always the
    # worst under PLD composition: k = 7, c = 3 gives (3, 2, 2) > (3, 3, 1) (by 1.4e-8 at
    # δ = 1e-6, 1.5e-4 at δ = 1e-2), so pld_total takes the max over all of them
    e = Fraction(1, 10)
    rows = unit_group_rows("linear", k, partitioned=True, max_groups=m, max_rows_per_group=c)
    assert sum(rows) == unit_multiplier("linear", k, partitioned=True, max_groups=m,
                                        max_rows_per_group=c)

    def eps(parts: tuple[int, ...]) -> float:
        counts: dict[tuple[Fraction, Fraction], int] = {}
        for r in parts:
            counts[(r * e, Fraction(0))] = counts.get((r * e, Fraction(0)), 0) + 1
        return pld.compose_counts(counts).epsilon_for_delta(1e-6)

    worst = max(eps(p) for n in range(1, k + 1) for p in _partitions(n, c, m))
    assert eps(rows) <= worst + 1e-12
    spec = MechanismSpec("g", "t", Region.full(), ApproxDP(e, 0),
                         Partition(("a",), ("a",), max_groups_per_unit=m, max_rows_per_group=c),
                         growth="linear")
    model = TableModel(unit=UnitModel(max_rows=k))
    got = float(pld_total([spec], {"t": model}, DELTA).cost.epsilon)
    assert got >= worst - 1e-12
    assert got == pytest.approx(min(worst, float(sum(rows) * e)), abs=1e-12)


def test_rows_in_one_group_are_one_mechanism_not_copies() -> None:
    # a user-level COUNT without GROUP BY, k = 5 rows per unit: one Laplace at shift 5, whose
    # loss is ±5ε; five independent copies would under-charge
    e = Fraction(1, 10)
    spec = MechanismSpec("c", "t", Region.full(), ApproxDP(e, 0), growth="linear")
    model = TableModel(unit=UnitModel(max_rows=5))
    got = pld_total([spec], {"t": model}, DELTA).cost.epsilon
    copies = pld.from_epsilon_delta(e, 0).self_compose(5).epsilon_for_delta(1e-6)
    assert got == pytest.approx(0.5, abs=1e-5) and got > copies
    # partitioned, at most 2 rows per group and 2 groups: (2ε) ⊗ (2ε), not four copies of ε
    part = MechanismSpec("g", "t", Region.full(), ApproxDP(e, 0),
                         Partition(("a",), ("a",), max_groups_per_unit=2, max_rows_per_group=2),
                         growth="linear")
    got = pld_total([part], {"t": model}, DELTA).cost.epsilon
    two = pld.from_epsilon_delta(2 * e, 0).self_compose(2).epsilon_for_delta(1e-6)
    assert got == pytest.approx(min(two, 0.4), abs=1e-9)
