"""Units whose costs grow with their rows in a group, against a brute-force oracle.

Issue "user-level GROUP BY is up to k x too noisy": a mechanism calibrated to one row pays
φ(r) = r (pure ε) or r² (ρ, μ²) times its cost for r of a unit's rows in one group, over at most
m groups with at most c rows each. The oracle enumerates every set of <= k distinct records of
a finite domain (the same domain as :mod:`test_solver_bruteforce`), takes the group keys from
the records' real values, and for opaque keys tries every way to split the rows into groups (a
key expression can send them anywhere). The solver must never be below it, and equal to it
whenever it says its answer is exact.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.accounting.model import (
    MechanismSpec,
    Partition,
    TableModel,
    UnitModel,
    growth_factor,
    unit_multiplier,
)
from privplan.accounting.solver import compose
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet
from tests.accounting.test_solver_bruteforce import (
    Case,
    Records,
    TooBig,
    _key_columns,
    _signatures,
    costs,
    regions,
    scaled,
    weights_of,
)

MAX_UNITS = 60_000


def _set_partitions(items: list[int]) -> list[list[list[int]]]:
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out = []
    for part in _set_partitions(rest):
        out.append([[first], *part])
        for i in range(len(part)):
            out.append([*part[:i], [first, *part[i]], *part[i + 1:]])
    return out


def _pays(spec: MechanismSpec, sizes: list[int]) -> int:
    """φ summed over the groups the rewrite keeps: at most c rows each, the m worst groups."""
    p = spec.partition
    cap = p.max_rows_per_group if p is not None and p.max_rows_per_group else 10**9
    values = sorted((growth_factor(spec.growth, min(s, cap)) for s in sizes), reverse=True)
    m = p.max_groups_per_unit if p is not None else None
    return sum(values[:m] if m is not None else values)


def oracle(case: Case) -> tuple[Fraction, ...]:
    rec = Records(case)
    weights, dens = scaled(case)
    parts = [m.partition for m in case.mechs]
    k = case.model.unit.max_rows
    ul = sorted(case.model.unit.unit_level_columns)
    uniq, counts = _signatures(rec, parts, [rec.index[rec.cols.index(u)] for u in ul])
    keys = _key_columns(uniq, parts)
    n_feat = len(parts) + sum(1 for key in keys if key is not None)
    classes: dict[tuple[int, ...], list[int]] = {}
    for s, row in enumerate(uniq):
        classes.setdefault(tuple(row[n_feat:]), []).append(s)
    if sum(math.comb(len(v) + k, k) for v in classes.values()) > MAX_UNITS:
        raise TooBig
    best = [0] * len(weights)
    for members in classes.values():
        for size in range(1, k + 1):
            for combo in itertools.combinations_with_replacement(members, size):
                if any(combo.count(s) > counts[s] for s in set(combo)):
                    continue  # a signature used r times needs r distinct records
                pays = []
                for i, spec in enumerate(case.mechs):
                    rows = [r for r, s in enumerate(combo) if uniq[s, i]]
                    if not rows:
                        pays.append(0)
                    elif spec.partition is None:
                        pays.append(growth_factor(spec.growth, len(rows)))
                    elif keys[i] is not None:
                        by_key: dict[int, int] = {}
                        for r in rows:
                            g = int(keys[i][combo[r]])
                            by_key[g] = by_key.get(g, 0) + 1
                        pays.append(_pays(spec, list(by_key.values())))
                    else:  # opaque keys: the worst split of the rows into groups
                        pays.append(max(_pays(spec, [len(b) for b in split])
                                        for split in _set_partitions(rows)))
                for j, c in enumerate(weights):
                    best[j] = max(best[j], sum(int(c[i]) * pays[i] for i in range(len(pays))))
    return tuple(Fraction(b, d) for b, d in zip(best, dens))


@st.composite
def growth_partitions(draw: st.DrawFn, cols: list[str]) -> Partition | None:
    choice = draw(st.sampled_from(["none", "col", "col", "z", "two", "opaque"]))
    m = draw(st.sampled_from([None, None, 1, 2]))
    c = draw(st.sampled_from([None, None, 1, 2]))
    if choice == "none":
        return None
    if choice == "opaque":
        return Partition(("expr",), None, m, c)
    if choice == "z":
        return Partition(("z",), ("z",), m, c)
    if choice == "two":
        return Partition(("a", "b"), ("a", "b"), m, c)
    key = draw(st.sampled_from(cols))
    return Partition((key,), (key,), m, c)


@st.composite
def growth_cases(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from([PureDP, ApproxDP, ZCDP, GDP]))
    cols = ["a", "b"]
    k = draw(st.sampled_from([2, 2, 3]))
    ul = frozenset(draw(st.lists(st.sampled_from(["a", "b", "z"]), max_size=1)))
    model = TableModel("add_remove", UnitModel(k, ul))
    uniform = draw(st.sampled_from(["linear", "square", None]))
    mechs = []
    for i in range(draw(st.integers(1, 4))):
        growth = uniform or draw(st.sampled_from(["flat", "linear", "square"]))
        mechs.append(MechanismSpec(f"q{i}", "t", draw(regions(cols)), draw(costs(kind, False)),
                                   draw(growth_partitions(cols)), growth=growth))
    return Case(cols, model, mechs, kind)


def check(case: Case, limit: int) -> bool:
    try:
        truth = oracle(case)
    except TooBig:
        assume(False)
        raise
    want = truth
    if case.kind is GDP:  # mu = sqrt(weight) rounded up: compare mu
        want = weights_of(case.kind.from_weights(truth))
    tables = {"t": case.model}
    exact = compose(case.mechs, tables, case.kind, exact_limit=10**7)
    got = weights_of(exact.cost)
    assert all(g >= w for g, w in zip(got, want)), (got, want)
    if exact.exact:
        assert got == want, (got, want, exact.witness_detail)
    bound = compose(case.mechs, tables, case.kind, exact_limit=limit)
    assert all(b >= w for b, w in zip(weights_of(bound.cost), want))
    return exact.exact


@pytest.mark.invariant(1)
@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(growth_cases(), st.integers(0, 30))
def test_growing_units_never_below_brute_force(case: Case, limit: int) -> None:
    check(case, limit)


@pytest.mark.invariant(1)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(growth_cases(), st.integers(0, 30))
def test_growing_units_never_below_brute_force_quick(case: Case, limit: int) -> None:
    check(case, limit)


def _group_by(k: int, growth: str, m: int | None = None, c: int | None = None,
              region: Region | None = None, kind: type = PureDP) -> tuple[Fraction, bool]:
    spec = MechanismSpec("q", "t", region or Region.full(), kind(1),
                         Partition(("h",), ("h",), m, c), growth=growth)
    out = compose([spec], {"t": TableModel("add_remove", UnitModel(k, frozenset({"pid"})))},
                  kind, exact_limit=10**6)
    return out.cost.weights()[0], out.exact


@pytest.mark.parametrize(("k", "m", "c", "linear", "square"), [
    (10, None, None, 10, 100),   # all k rows in one group
    (10, 3, None, 10, 100),      # m does not help: one group can hold them all
    (10, 3, 2, 6, 12),           # m groups of c rows: m·c and m·c²
    (10, None, 3, 10, 28),       # 3+3+3+1 rows: 10 and 9+9+9+1
    (10, 2, 3, 6, 18),
    (5, 1, 1, 1, 1),
])
def test_one_group_by_pays_what_the_contribution_bounds_allow(
        k: int, m: int | None, c: int | None, linear: int, square: int) -> None:
    assert _group_by(k, "linear", m, c) == (linear, True)
    assert _group_by(k, "square", m, c, kind=ZCDP) == (square, True)
    assert unit_multiplier("linear", k, partitioned=True, max_groups=m,
                           max_rows_per_group=c) == linear
    assert unit_multiplier("square", k, partitioned=True, max_groups=m,
                           max_rows_per_group=c) == square
    # flat (a distinct-unit count, a partition selection) pays once per group touched
    assert _group_by(k, "flat", m, c)[0] == min(k, m or k)


def test_linear_user_level_group_by_is_k_not_k_squared() -> None:
    # the example: 10 rows per unit, no max_groups: the histogram's L1 sensitivity is 10
    # rows, so one-row costs add up to 10 (scale 10/ε), not 10 groups x 10 rows (scale 100/ε)
    assert _group_by(10, "linear") == (10, True)
    assert _group_by(10, "flat") == (10, True)  # the old model, per group calibrated to k rows


def test_rows_in_disjoint_filters_add_up_once_each() -> None:
    # two FILTERs on disjoint values of h and a GROUP BY: a unit's 4 rows can all be in one
    # filter's region; linear costs pay per row, never more than k rows in all
    f1 = MechanismSpec("f1", "t", Region.column("h", ColumnSet.points(["a"])), PureDP(1),
                       growth="linear")
    f2 = MechanismSpec("f2", "t", Region.column("h", ColumnSet.points(["b"])), PureDP(1),
                       growth="linear")
    g = MechanismSpec("g", "t", Region.full(), PureDP(1), Partition(("h",), ("h",)),
                      growth="linear")
    out = compose([f1, f2, g], {"t": TableModel("add_remove", UnitModel(4, frozenset()))},
                  PureDP, exact_limit=10**6)
    assert out.cost == PureDP(8) and out.exact  # every row in f1 (or f2) and in g: 4 + 4


def test_mixed_flat_and_linear_group_by_spreads_rows() -> None:
    # a partition selection (flat, per group) and a count (linear, per row) of one GROUP BY: the
    # worst unit spreads its k rows over k groups: k·(w_sel + w_count)
    sel = MechanismSpec("s", "t", Region.full(), PureDP(Fraction(1, 2)),
                        Partition(("h",), ("h",)), growth="flat")
    cnt = MechanismSpec("c", "t", Region.full(), PureDP(1), Partition(("h",), ("h",)),
                        growth="linear")
    out = compose([sel, cnt], {"t": TableModel("add_remove", UnitModel(3, frozenset()))},
                  PureDP, exact_limit=10**6)
    assert out.cost == PureDP(Fraction(9, 2)) and out.exact


def test_set_partitions_oracle_helper() -> None:
    assert len(_set_partitions([0, 1, 2])) == 5  # Bell(3)
    assert len(_set_partitions([0, 1, 2, 3])) == 15  # Bell(4)


def test_square_growth_bounds_laplace_mu_under_gdp() -> None:
    # GDP sessions use Laplace noise with mu = pure_to_gdp(eps); r rows shift the count by r, so
    # the pair is (r·eps)-DP and its mu is pure_to_gdp(r·eps) <= r·mu (mu(eps) is concave):
    # the weight mu² grows at most like r², which square growth charges
    from privplan.accounting.conversions import pure_to_gdp
    for eps in [Fraction(1, 1000), Fraction(1, 10), Fraction(1, 2), Fraction(1), Fraction(3)]:
        mu1 = pure_to_gdp(PureDP(eps)).exact_mu
        for r in range(1, 40):
            assert pure_to_gdp(PureDP(eps * r)).exact_mu <= r * mu1
    _ = np  # numpy is used by the shared oracle helpers
