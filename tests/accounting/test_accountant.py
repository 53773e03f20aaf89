"""The incremental accountant: after every admission its total equals ``compose`` from scratch.

The solver itself is checked against brute force (test_solver_bruteforce.py); here random
sessions exercise what only the incremental path does: new values that re-cut old atoms, new
columns, switching from exact-integer to tolerance arithmetic, a column turning unorderable
(full rebuild), several tables, preview without side effects.
"""

from __future__ import annotations

import random
from dataclasses import replace
from fractions import Fraction
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privplan.accounting.accountant import Accountant
from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.accounting.model import MechanismSpec, Partition, TableModel, UnitModel
from privplan.accounting.solver import compose, records
from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet, Interval
from privplan.errors import PolicyError

TABLES = {
    "rows": TableModel("add_remove"),
    "pairs": TableModel("replace"),
    "units": TableModel("add_remove", UnitModel(2, frozenset({"u"}))),
}
VALUES = {"a": list(range(0, 40, 3)), "b": ["x", "y", "z", "w"], "u": [1, 2, 3], "c": [0.5, 1.5]}


@st.composite
def column_set(draw: st.DrawFn, col: str) -> ColumnSet:
    vals = VALUES[col]
    kind = draw(st.sampled_from(["points", "range", "not", "null"]))
    if kind == "points":
        return ColumnSet.points(draw(st.lists(st.sampled_from(vals), min_size=1, max_size=3)))
    if kind == "range":
        lo, hi = sorted(draw(st.lists(st.sampled_from(vals), min_size=2, max_size=2)))
        return ColumnSet.of([Interval(lo, hi, draw(st.booleans()), draw(st.booleans()))])
    if kind == "not":
        return ColumnSet.points([draw(st.sampled_from(vals))], null=True).complement()
    return ColumnSet.only_null()


@st.composite
def mechanism(draw: st.DrawFn, i: int, kind: type, tables: list[str]) -> MechanismSpec:
    cols = draw(st.lists(st.sampled_from(sorted(VALUES)), max_size=3, unique=True))
    boxes = [Box.of({c: draw(column_set(c)) for c in cols})]
    if draw(st.integers(0, 4)) == 0:
        boxes.append(Box.of({"b": draw(column_set("b"))}))
    region = Region.of(boxes)
    if region.is_empty():
        region = Region.full()
    awkward = draw(st.integers(0, 9)) == 0
    num = (
        Fraction(draw(st.integers(1, 10**9)), 100000007)
        if awkward
        else Fraction(draw(st.integers(1, 8)), 8)
    )
    cost = (
        ApproxDP(num, Fraction(draw(st.integers(0, 3)), 10**6)) if kind is ApproxDP else kind(num)
    )
    part = draw(
        st.sampled_from(
            [
                None,
                None,
                Partition(("b",), ("b",)),
                Partition(("e",), None),
                Partition(("u",), ("u",), 1),
            ]
        )
    )
    return MechanismSpec(f"m{i}", draw(st.sampled_from(tables)), region, cost, part)


@st.composite
def sessions(draw: st.DrawFn) -> tuple[type, list[list[MechanismSpec]]]:
    kind = draw(st.sampled_from([PureDP, ApproxDP, ZCDP, GDP]))
    tables = draw(st.lists(st.sampled_from(sorted(TABLES)), min_size=1, max_size=3, unique=True))
    batches, i = [], 0
    for _ in range(draw(st.integers(1, 6))):
        batch = []
        for _ in range(draw(st.integers(1, 3))):
            batch.append(draw(mechanism(i, kind, tables)))
            i += 1
        batches.append(batch)
    return kind, batches


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_incremental_total_equals_compose_from_scratch(session) -> None:
    kind, batches = session
    acc = Accountant(TABLES, kind, exact_limit=10**7)  # no search limit: both paths exact
    admitted: list[MechanismSpec] = []
    for batch in batches:
        before = acc.total
        preview = acc.preview(batch)
        assert acc.total == before  # preview changes nothing
        total = acc.admit(batch)
        admitted += batch
        scratch = compose(admitted, TABLES, kind, exact_limit=10**7)
        assert total.cost == scratch.cost, (total, scratch)
        assert total.exact == scratch.exact
        assert preview.cost == total.cost
        assert before.cost <= total.cost  # totals never decrease
        assert set(total.witness) <= {m.id for m in admitted}
    assert acc.mechanisms() and set(acc.mechanisms()) == set(admitted)


def test_a_column_turning_unorderable_rebuilds_conservatively() -> None:
    acc = Accountant({"t": TableModel()}, PureDP)
    acc.admit([MechanismSpec("a", "t", Region.column("x", ColumnSet.points([1])), PureDP(1))])
    acc.admit([MechanismSpec("b", "t", Region.column("x", ColumnSet.points([2])), PureDP(1))])
    assert acc.total.cost == PureDP(1) and acc.total.exact
    # 'one' cannot be ordered with ints: x's constraints are dropped, regions grow to full
    out = acc.admit(
        [MechanismSpec("c", "t", Region.column("x", ColumnSet.points(["one"])), PureDP(1))]
    )
    assert out.cost == PureDP(3) and not out.exact
    assert out == compose(list(acc.mechanisms()), {"t": TableModel()}, PureDP)


def test_disjoint_queries_over_a_session_cost_the_max() -> None:
    # The headline case, one query at a time: WHERE grp = 'g0' ... 'g199', 0.5 each.
    acc = Accountant({"t": TableModel()}, PureDP)
    for g in range(200):
        region = Region.column("grp", ColumnSet.points([f"g{g:03d}"]))
        acc.admit([MechanismSpec(f"q{g}", "t", region, PureDP(0.5))])
    assert acc.total.cost == PureDP(0.5) and acc.total.exact
    rep = Accountant({"t": TableModel("replace")}, PureDP)
    for g in range(50):
        region = Region.column("grp", ColumnSet.points([f"g{g:03d}"]))
        rep.admit([MechanismSpec(f"q{g}", "t", region, PureDP(0.5))])
    assert rep.total.cost == PureDP(1) and rep.total.exact


def test_long_random_session_matches_compose() -> None:
    rng = random.Random(3)
    acc = Accountant(TABLES, PureDP)
    admitted = []
    for i in range(120):
        lo = rng.randrange(0, 100)
        region = Region.box(
            a=ColumnSet.interval(lo, lo + rng.randrange(1, 30)),
            b=ColumnSet.points([rng.choice("pqrst")]),
        )
        part = Partition(("b",), ("b",)) if rng.random() < 0.2 else None
        m = MechanismSpec(
            f"q{i}",
            rng.choice(["rows", "pairs"]),
            region,
            PureDP(Fraction(rng.randrange(1, 5), 4)),
            part,
        )
        acc.admit([m])
        admitted.append(m)
        if i % 20 == 19:
            assert acc.total.cost == compose(admitted, TABLES, PureDP).cost


def test_errors_leave_the_accountant_unchanged() -> None:
    acc = Accountant({"t": TableModel()}, PureDP)
    acc.admit([MechanismSpec("a", "t", Region.full(), PureDP(1))])
    with pytest.raises(TypeError):
        acc.admit([MechanismSpec("b", "t", Region.full(), ZCDP(1))])
    with pytest.raises(PolicyError):
        acc.preview([MechanismSpec("b", "nope", Region.full(), PureDP(1))])
    assert acc.total.cost == PureDP(1) and len(acc.mechanisms()) == 1
    assert Accountant({}, GDP).total.cost == GDP.zero()


def test_long_point_sets_give_the_same_atoms_as_short_ones() -> None:
    """Many points (a long IN list, a large public domain) find their atoms through a dict
    made once per axis; it must give the bisection's atoms, for every kind of value."""
    import datetime as dt
    from decimal import Decimal

    from privplan.accounting.solver.atoms import Axis

    for values in ([*range(-50, 150)], [f"k{i}" for i in range(200)],
                   [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(200)],
                   [i / 7 for i in range(200)]):
        axis = Axis(sorted(values))
        picks = values[::2]
        long = ColumnSet.points(picks)
        short = [axis.ranges(ColumnSet.points(picks[i:i + 10])) for i in range(0, 100, 10)]
        assert len(long.intervals) >= 64
        assert axis.ranges(long) == sorted(r for part in short for r in part)
    # equal values of other types find the same atom (1 == 1.0 == Decimal(1))
    axis = Axis(list(range(100)))
    assert axis.ranges(ColumnSet.points([float(i) for i in range(80)])) == \
        axis.ranges(ColumnSet.points([Decimal(i) for i in range(80)])) == \
        axis.ranges(ColumnSet.points(list(range(80))))


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.integers(2, 5))
def test_a_session_asking_again_composes_as_without_merging(session, times: int) -> None:
    """A dashboard: the same batches admitted again and again. The incremental single-record
    search merges equal rows (``records._distinct_rows``, here from the first row on); every
    total must equal ``compose`` from scratch with no merging at all."""
    kind, batches = session
    acc = Accountant(TABLES, kind, exact_limit=10**7)
    admitted: list[MechanismSpec] = []
    for round_ in range(times):
        for batch in batches:
            batch = [replace(m, id=f"{m.id}.r{round_}") for m in batch]
            with mock.patch.object(records, "_MERGE_FROM", 0):
                total = acc.admit(batch)
            admitted += batch
            with mock.patch.object(records, "_MERGE_FROM", 10**9):
                scratch = compose(admitted, TABLES, kind, exact_limit=10**7)
            assert total.cost == scratch.cost, (total, scratch)
            assert total.exact == scratch.exact
