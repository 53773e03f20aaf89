"""The composition solver on the paper's examples (CSF'24), with exact expected values."""

from __future__ import annotations

from fractions import Fraction

import pytest

from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.accounting.model import MechanismSpec, Partition, TableModel, UnitModel
from privplan.accounting.solver import compose
from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet
from privplan.errors import PolicyError

ADD = {"t": TableModel("add_remove")}
REPLACE = {"t": TableModel("replace")}


def where(col: str, *values: object) -> Region:
    return Region.column(col, ColumnSet.points(values))


def mech(
    id: str, region: Region, cost: object, partition: Partition | None = None, table: str = "t"
) -> MechanismSpec:
    return MechanismSpec(id, table, region, cost, partition)


def group_by(*cols: str, m: int | None = None) -> Partition:
    return Partition(cols, cols, m)


# -- Theorem IV.3: every region is the whole domain -> plain sequential composition ------------


@pytest.mark.parametrize("tables", [ADD, REPLACE])
def test_theorem_iv3_full_regions_sum(tables: dict[str, TableModel]) -> None:
    ms = [mech(f"q{i}", Region.full(), PureDP(Fraction(i, 4))) for i in range(1, 5)]
    out = compose(ms, tables, PureDP)
    assert out.cost == PureDP(Fraction(10, 4))
    assert out.exact and set(out.witness) == {"q1", "q2", "q3", "q4"}
    if tables is ADD:
        assert "Thm IV.3" in out.rule


# -- disjoint filters: parallel under add/remove, pairs under replace ----------------------------


def test_disjoint_filters_add_remove_cost_the_max() -> None:
    # The peers' failure case: WHERE grp='a' then WHERE grp='b', 0.5 each -> 0.5, not 1.0.
    ms = [mech("qa", where("grp", "a"), PureDP(0.5)), mech("qb", where("grp", "b"), PureDP(0.5))]
    out = compose(ms, ADD, PureDP)
    assert out.cost.exact_epsilon == Fraction(1, 2)
    assert out.exact
    assert len(out.witness) == 1 and "Thm IV.11" in out.rule
    assert "grp = " in out.witness_detail


def test_counterexample_max_is_wrong_under_replace() -> None:
    # Two disjoint filters of eps 1: a record moving from one to the other changes both.
    ms = [mech("qa", where("grp", "a"), PureDP(1)), mech("qb", where("grp", "b"), PureDP(1))]
    assert compose(ms, ADD, PureDP).cost == PureDP(1)
    out = compose(ms, REPLACE, PureDP)
    assert out.cost == PureDP(2)
    assert set(out.witness) == {"qa", "qb"} and out.exact


def test_example_iv14_replace_pays_the_two_largest() -> None:
    # Cor IV.13 / Example IV.14: k disjoint filters under replace cost max_{i != j} eps_i + eps_j.
    eps = [Fraction(1), Fraction(2), Fraction(3), Fraction(5)]
    ms = [mech(f"q{g}", where("grp", g), PureDP(e)) for g, e in zip("abcd", eps)]
    assert compose(ms, REPLACE, PureDP).cost.exact_epsilon == 8
    assert compose(ms, ADD, PureDP).cost.exact_epsilon == 5


# -- GROUP BY (Theorem IV.6/IV.12, Corollary IV.13) --------------------------------------------


def test_group_by_pays_one_group_add_remove_two_under_replace() -> None:
    ms = [mech("g", Region.full(), PureDP(1), group_by("grp"))]
    assert compose(ms, ADD, PureDP).cost == PureDP(1)
    out = compose(ms, REPLACE, PureDP)
    assert out.cost == PureDP(2)
    assert "Cor IV.13" in out.rule and "two groups" in out.witness_detail


def test_group_by_with_pinned_key_pays_one_group_under_replace() -> None:
    # WHERE grp = 'a' GROUP BY grp: both records of a pair inside the region have key 'a'.
    ms = [mech("g", where("grp", "a"), PureDP(1), group_by("grp"))]
    assert compose(ms, REPLACE, PureDP).cost == PureDP(1)
    # ...but an opaque key (an expression) may differ even there.
    opaque = [mech("g", where("grp", "a"), PureDP(1), Partition(("f(x)",), None))]
    assert compose(opaque, REPLACE, PureDP).cost == PureDP(2)
    # ...and two named values can be different groups.
    two = [mech("g", where("grp", "a", "b"), PureDP(1), group_by("grp"))]
    assert compose(two, REPLACE, PureDP).cost == PureDP(2)


def test_zcdp_partition_under_replace_costs_two_rho() -> None:
    ms = [mech("g", Region.full(), ZCDP(Fraction(1, 8)), group_by("grp"))]
    assert compose(ms, ADD, ZCDP).cost.exact_rho == Fraction(1, 8)
    assert compose(ms, REPLACE, ZCDP).cost.exact_rho == Fraction(1, 4)


def test_example_vi25_gdp_partition_under_replace_is_sqrt2_mu() -> None:
    ms = [mech("g", Region.full(), GDP(1), group_by("grp"))]
    mu = compose(ms, REPLACE, GDP).cost.exact_mu
    assert mu * mu >= 2 and mu - Fraction(14142135623730951, 10**16) < Fraction(1, 10**15)
    assert mu < 2  # not 2 mu
    # two disjoint GDP filters under replace: sqrt(mu1^2 + mu2^2) = 5
    two = [mech("a", where("g", 1), GDP(3)), mech("b", where("g", 2), GDP(4))]
    assert compose(two, REPLACE, GDP).cost == GDP(5)


def test_example_vi8_three_partitions_under_replace() -> None:
    # A record is in 3 partitions, each (1, 1e-5) per group; replace moves it in all three.
    ms = [
        mech(f"p{c}", Region.full(), ApproxDP(1, Fraction(1, 10**5)), group_by(c))
        for c in ("x", "y", "z")
    ]
    out = compose(ms, REPLACE, ApproxDP)
    assert out.cost == ApproxDP(6, Fraction(6, 10**5))
    assert compose(ms, ADD, ApproxDP).cost == ApproxDP(3, Fraction(3, 10**5))


def test_approx_dp_takes_the_componentwise_max() -> None:
    # No single record reaches both maxima; the componentwise max is a valid upper bound.
    ms = [
        mech("a", where("g", 1), ApproxDP(1, 0)),
        mech("b", where("g", 2), ApproxDP(Fraction(1, 2), Fraction(1, 10**5))),
    ]
    assert compose(ms, ADD, ApproxDP).cost == ApproxDP(1, Fraction(1, 10**5))


# -- Example IV.5: a unit touches at most 3 partitions -> top-3 sum ----------------------------


def test_example_iv5_group_by_with_max_groups() -> None:
    tables = {"t": TableModel("add_remove", UnitModel(max_rows=10))}
    ms = [mech("g", Region.full(), PureDP(Fraction(1, 2)), group_by("hospital", m=3))]
    out = compose(ms, tables, PureDP)
    assert out.cost.exact_epsilon == Fraction(3, 2) and out.exact
    # no limit on groups: a unit of 10 rows can touch 10 groups
    ms = [mech("g", Region.full(), PureDP(Fraction(1, 2)), group_by("hospital"))]
    assert compose(ms, tables, PureDP).cost.exact_epsilon == 5


def test_example_iv5_disjoint_filters_with_three_rows_per_unit() -> None:
    tables = {"t": TableModel("add_remove", UnitModel(max_rows=3))}
    eps = [1, 2, 3, 4, 5]
    ms = [mech(f"q{h}", where("hospital", h), PureDP(e)) for h, e in zip("ABCDE", eps)]
    out = compose(ms, tables, PureDP)
    assert out.cost == PureDP(12) and out.exact  # 5 + 4 + 3
    assert set(out.witness) == {"qC", "qD", "qE"}


def test_unit_level_filters_split_units() -> None:
    # age is constant per unit: a unit is in one age bracket, so the brackets compose in parallel
    tables = {
        "t": TableModel("add_remove", UnitModel(max_rows=5, unit_level_columns=frozenset({"age"})))
    }
    ms = [
        mech("young", Region.column("age", ColumnSet.interval(0, 30, hi_closed=False)), PureDP(1)),
        mech("old", Region.column("age", ColumnSet.interval(30, None)), PureDP(1)),
    ]
    assert compose(ms, tables, PureDP).cost == PureDP(1)
    not_unit = {"t": TableModel("add_remove", UnitModel(max_rows=5))}
    assert compose(ms, not_unit, PureDP).cost == PureDP(2)


def test_units_under_replace_are_bounded_by_twice_add_remove() -> None:
    tables = {"t": TableModel("replace", UnitModel(max_rows=3))}
    ms = [mech(f"q{h}", where("hospital", h), PureDP(1)) for h in "ABCDE"]
    out = compose(ms, tables, PureDP)
    assert out.cost == PureDP(6) and not out.exact


# -- three-valued logic, several tables, errors, bounds ----------------------------------------


def test_null_is_its_own_atom() -> None:
    # WHERE x < 5 and WHERE x IS NULL are disjoint; WHERE x < 5 and x <> 3 overlap.
    lt5 = Region.column("x", ColumnSet.interval(None, 5, hi_closed=False))
    null = Region.column("x", ColumnSet.only_null())
    ne3 = Region.column("x", ColumnSet.points([3], null=True).complement())
    assert compose(
        [mech("a", lt5, PureDP(1)), mech("b", null, PureDP(1))], ADD, PureDP
    ).cost == PureDP(1)
    assert compose(
        [mech("a", lt5, PureDP(1)), mech("b", ne3, PureDP(1))], ADD, PureDP
    ).cost == PureDP(2)


def test_boxes_over_two_columns() -> None:
    # (a < 5, b = 'x') and (a >= 5, b = 'x') are disjoint; (a < 5) meets both of (b='x'), (b='y')
    # only one at a time.
    a_lo = ColumnSet.interval(None, 5, hi_closed=False)
    a_hi = ColumnSet.interval(5, None)
    ms = [
        mech("q1", Region.box(a=a_lo, b=ColumnSet.points(["x"])), PureDP(1)),
        mech("q2", Region.box(a=a_hi, b=ColumnSet.points(["x"])), PureDP(1)),
        mech("q3", Region.column("a", a_lo), PureDP(2)),
        mech("q4", Region.column("b", ColumnSet.points(["y"])), PureDP(4)),
    ]
    out = compose(ms, ADD, PureDP)
    assert out.cost == PureDP(6)  # a < 5, b = 'y': q3 + q4
    assert set(out.witness) == {"q3", "q4"}


def test_region_union_counts_a_mechanism_once() -> None:
    both = Region.of(
        [Box.of({"a": ColumnSet.points([1, 2])}), Box.of({"a": ColumnSet.points([2, 3])})]
    )
    assert compose([mech("q", both, PureDP(1))], ADD, PureDP).cost == PureDP(1)


def test_several_tables_are_summed() -> None:
    tables = {"t": TableModel(), "u": TableModel("replace")}
    ms = [
        mech("a", where("g", 1), PureDP(1)),
        mech("b", where("g", 2), PureDP(1)),
        mech("c", where("g", 1), PureDP(1), table="u"),
        mech("d", where("g", 2), PureDP(1), table="u"),
    ]
    out = compose(ms, tables, PureDP)
    assert out.cost == PureDP(3)  # 1 (t, add/remove) + 2 (u, replace)
    assert "summed over tables" in out.rule and out.exact


def test_nothing_released_is_zero() -> None:
    out = compose([], ADD, ZCDP)
    assert out.cost == ZCDP.zero() and out.witness == () and out.exact
    empty = compose([mech("q", Region.empty(), ZCDP(1))], ADD, ZCDP)
    assert empty.cost == ZCDP.zero()


def test_mixed_kinds_and_unknown_tables_are_refused() -> None:
    with pytest.raises(TypeError, match="convert"):
        compose([mech("q", Region.full(), ZCDP(1))], ADD, PureDP)
    with pytest.raises(PolicyError, match="'nope'"):
        compose([mech("q", Region.full(), PureDP(1), table="nope")], ADD, PureDP)


def test_unorderable_column_is_dropped_conservatively() -> None:
    # 'x' = 1 and 'x' = 'one' cannot be ordered together: the constraints are dropped.
    ms = [mech("a", where("x", 1), PureDP(1)), mech("b", where("x", "one"), PureDP(1))]
    out = compose(ms, ADD, PureDP)
    assert out.cost == PureDP(2) and not out.exact
    assert "unorderable" in out.rule


def test_search_limit_gives_a_proven_bound() -> None:
    ms = [
        mech(
            f"q{i}",
            Region.box(a=ColumnSet.interval(i, i + 3), b=ColumnSet.interval(i % 4, 9)),
            PureDP(Fraction(1, i + 1)),
        )
        for i in range(12)
    ]
    exact = compose(ms, ADD, PureDP)
    assert exact.exact
    bounded = compose(ms, ADD, PureDP, exact_limit=0)
    assert not bounded.exact and bounded.cost.exact_epsilon >= exact.cost.exact_epsilon
    assert "upper bound" in bounded.rule
    rep = compose(ms, REPLACE, PureDP)
    rep_bounded = compose(ms, REPLACE, PureDP, exact_limit=2)
    assert rep_bounded.cost.exact_epsilon >= rep.cost.exact_epsilon


def test_awkward_weights_are_still_exact() -> None:
    # denominators whose lcm is too large for exact floats: near-ties are re-checked exactly
    p, q = 100000007, 100000037
    ms = [
        mech("a", where("g", 1), PureDP(Fraction(p - 1, p))),
        mech("b", where("g", 2), PureDP(Fraction(q - 1, q))),
        mech("c", Region.full(), PureDP(Fraction(1, p * q))),
    ]
    out = compose(ms, ADD, PureDP)
    assert out.cost.exact_epsilon == Fraction(q - 1, q) + Fraction(1, p * q) and out.exact
    rep = compose(ms, REPLACE, PureDP)
    assert rep.cost.exact_epsilon == Fraction(p - 1, p) + Fraction(q - 1, q) + Fraction(1, p * q)
