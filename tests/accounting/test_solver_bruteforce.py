"""The solver against a brute-force oracle on small finite domains (the key acceptance test).

The oracle enumerates every record of a finite domain — every named value, the values between
and around them, NULL, a column no predicate names (``z``) and a padding column (``pad``) so
that each solver cell really holds >= k records — and decides membership with the regions' own
``contains`` (true three-valued semantics, no atoms). Group keys are the actual values of the
key columns; opaque keys give every record its own group. It then maximises exactly:

* add/remove, one row: every record;
* replace, one row: every ordered pair x != x';
* units of k rows: every set of <= k records agreeing on the unit-level columns.

Exact mode must equal the oracle; bound mode (``exact_limit`` tiny) must be >= it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from fractions import Fraction
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.accounting.model import MechanismSpec, Partition, TableModel, UnitModel
from privplan.accounting.solver import atoms, compose, records, search, units
from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet, Interval

pytestmark = pytest.mark.invariant(1)

# -- the finite domain -------------------------------------------------------------------------

NAMED = {"a": [0, 10], "b": ["m", "t"], "c": [0, 10]}  # the only values predicates use


def column_domain(col: str, k: int) -> list[object]:
    """Named values, >= k values in every open gap around them, and NULL."""
    if col == "b":
        below, between, above = ["a", "b", "c"], ["n", "o", "p"], ["u", "v", "w"]
        vals = [*below[:k], "m", *between[:k], "t", *above[:k]]
    elif col == "z":
        vals = list(range(1, k + 1))
    elif col == "pad":
        return list(range(k))  # never NULL, never named: just more records per cell
    else:
        vals = [*range(-k, 0), 0, *range(1, k + 1), 10, *range(11, 11 + k)]
    return [*vals, None]


# -- strategies --------------------------------------------------------------------------------


@st.composite
def column_sets(draw: st.DrawFn, col: str) -> ColumnSet:
    named = NAMED[col]
    kind = draw(st.sampled_from(["points", "interval", "not_points", "null", "not_null", "union"]))
    if kind == "points":
        return ColumnSet.points(
            draw(st.lists(st.sampled_from(named), min_size=1, max_size=2)), null=draw(st.booleans())
        )
    if kind == "interval":
        lo = draw(st.sampled_from([None, *named]))
        hi = draw(st.sampled_from([None, *named]))
        iv = Interval(lo, hi, draw(st.booleans()), draw(st.booleans()))
        if iv.is_empty():
            return ColumnSet.points([named[0]])
        return ColumnSet.of([iv], null=draw(st.booleans()))
    if kind == "not_points":  # x <> v (3VL: excludes NULL)
        return ColumnSet.points([draw(st.sampled_from(named))], null=True).complement()
    if kind == "null":
        return ColumnSet.only_null()
    if kind == "not_null":
        return ColumnSet.not_null()
    a = draw(column_sets(col))
    b = draw(column_sets(col))
    return a.union(b)


@st.composite
def regions(draw: st.DrawFn, cols: list[str]) -> Region:
    if draw(st.integers(0, 9)) == 0:
        return Region.full()
    boxes = []
    for _ in range(draw(st.integers(1, 2))):
        chosen = draw(st.lists(st.sampled_from(cols), min_size=1, max_size=len(cols), unique=True))
        boxes.append(Box.of({c: draw(column_sets(c)) for c in chosen}))
    return Region.of(boxes)


AWKWARD = (100000007, 100000037)  # prime denominators: forces the tolerance (non-integer) path


@st.composite
def costs(draw: st.DrawFn, kind: type, awkward: bool) -> object:
    def num() -> Fraction:
        if awkward and draw(st.booleans()):
            p = draw(st.sampled_from(AWKWARD))
            return Fraction(draw(st.integers(1, 3 * p)), p)
        return Fraction(draw(st.sampled_from([1, 2, 3, 4, 6])), 4)

    if kind is ApproxDP:
        delta = Fraction(draw(st.sampled_from([0, 1, 2, 5])), 10**6)
        return ApproxDP(num(), delta)
    return kind(num())


@st.composite
def partitions(draw: st.DrawFn, cols: list[str]) -> Partition | None:
    choice = draw(st.sampled_from(["none", "none", "col", "z", "two", "opaque"]))
    m = draw(st.sampled_from([None, None, 1, 2]))
    if choice == "none":
        return None
    if choice == "opaque":
        return Partition(("expr",), None, m)
    if choice == "z":
        return Partition(("z",), ("z",), m)
    if choice == "two" and len(cols) > 1:
        keys = tuple(draw(st.lists(st.sampled_from(cols), min_size=2, max_size=2, unique=True)))
        return Partition(keys, keys, m)
    key = draw(st.sampled_from(cols))
    return Partition((key,), (key,), m)


@dataclass
class Case:
    cols: list[str]
    model: TableModel
    mechs: list[MechanismSpec]
    kind: type


@st.composite
def cases(draw: st.DrawFn, unit: bool, neighbourhood: str | None = None) -> Case:
    kind = draw(st.sampled_from([PureDP, ApproxDP, ZCDP, GDP]))
    awkward = draw(st.integers(0, 4)) == 0
    if unit:
        cols = ["a", "b"]
        k = draw(st.sampled_from([2, 2, 3]))
        ul = frozenset(draw(st.lists(st.sampled_from(["a", "b", "z"]), max_size=1)))
    else:
        cols = draw(st.sampled_from([["a", "b"], ["a", "b", "c"], ["b", "c"]]))
        k, ul = 1, frozenset()
    nb = neighbourhood or draw(st.sampled_from(["add_remove", "replace"]))
    model = TableModel(nb, UnitModel(k, ul))
    n = draw(st.integers(1, 4 if unit else 5))
    mechs = [
        MechanismSpec(
            f"q{i}", "t", draw(regions(cols)), draw(costs(kind, awkward)), draw(partitions(cols))
        )
        for i in range(n)
    ]
    return Case(cols, model, mechs, kind)


# -- the oracle --------------------------------------------------------------------------------


class Records:
    """Every record of the finite domain as flat arrays over the grid of column values."""

    def __init__(self, case: Case) -> None:
        k = max(2, case.model.unit.max_rows)
        self.cols = [*case.cols, "z", "pad"]
        self.domains = [column_domain(c, k) for c in self.cols]
        shape = tuple(len(d) for d in self.domains)
        self.n = math.prod(shape)
        self.index = np.indices(shape).reshape(len(shape), -1)  # value index per column, record
        hits = []
        for m in case.mechs:
            grid = np.zeros(shape, dtype=bool)
            for box in m.region.boxes:
                masks = [
                    np.array([box.get(c).contains(v) for v in dom])
                    for c, dom in zip(self.cols, self.domains)
                ]
                grid |= _outer(masks)
            hits.append(grid.reshape(-1))
        self.hits = np.array(hits)  # (mechanisms, records)

    def key(self, p: Partition) -> np.ndarray:
        """Group id of every record: its key values, or its own id for opaque keys."""
        if p.key_columns is None:
            return np.arange(self.n)
        ids = np.zeros(self.n, dtype=np.int64)
        for c in p.key_columns:
            ci = self.cols.index(c)
            ids = ids * len(self.domains[ci]) + self.index[ci]
        return ids


def _outer(masks: list[np.ndarray]) -> np.ndarray:
    out = masks[0]
    for m in masks[1:]:
        out = np.multiply.outer(out, m)
    return out


def scaled(case: Case) -> tuple[list[np.ndarray], list[int]]:
    """Per weight coordinate: integer weights (common denominator) and that denominator."""
    ws = [m.cost.weights() for m in case.mechs]
    out, dens = [], []
    for j in range(len(ws[0])):
        den = math.lcm(*(w[j].denominator for w in ws))
        out.append(np.array([int(w[j] * den) for w in ws], dtype=object))
        dens.append(den)
    return out, dens


MAX_UNITS = 400_000  # sets of records the unit oracle may enumerate


class TooBig(Exception):
    """The oracle would enumerate too many units: the example is rejected, not failed."""


def oracle(case: Case) -> tuple[Fraction, ...]:
    """Exact componentwise max over neighbouring pairs, by enumeration."""
    rec = Records(case)
    weights, dens = scaled(case)
    parts = [m.partition for m in case.mechs]
    nb, k = case.model.neighbourhood, case.model.unit.max_rows
    if k == 1 and nb == "add_remove":
        h = np.unique(rec.hits.T, axis=0)  # distinct hit patterns of records
        return tuple(Fraction(max(0, *(h.astype(object) @ c)), d) for c, d in zip(weights, dens))
    if k == 1:
        uniq, counts = _signatures(rec, parts, [])
        return tuple(
            Fraction(_max_replace(c, uniq, counts, parts), d) for c, d in zip(weights, dens)
        )
    ul = sorted(case.model.unit.unit_level_columns)
    uniq, counts = _signatures(rec, parts, [rec.index[rec.cols.index(u)] for u in ul])
    return tuple(Fraction(_max_unit(c, uniq, counts, parts, k), d) for c, d in zip(weights, dens))


def _signatures(
    rec: Records, parts: list[Partition | None], extra: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct records up to what matters: hits, group keys where hit, unit-level values.

    Columns: one per mechanism (hit), one per column-keyed partition (key id or -1), extra.
    Records with one signature are interchangeable except for opaque keys (distinct records,
    distinct groups), which the counts account for.
    """
    feats = [rec.hits.astype(np.int64)]
    for i, p in enumerate(parts):
        if p is not None and p.key_columns is not None:
            feats.append(np.where(rec.hits[i], rec.key(p), -1)[None, :])
    feats += [e[None, :] for e in extra]
    uniq, counts = np.unique(np.vstack(feats).T, axis=0, return_counts=True)
    return uniq, counts


def _key_columns(uniq: np.ndarray, parts: list[Partition | None]) -> list[np.ndarray | None]:
    """Per mechanism: the key id per signature (column-keyed partitions), else None."""
    out: list[np.ndarray | None] = []
    col = len(parts)
    for p in parts:
        if p is not None and p.key_columns is not None:
            out.append(uniq[:, col])
            col += 1
        else:
            out.append(None)
    return out


def _max_replace(
    c: np.ndarray, uniq: np.ndarray, counts: np.ndarray, parts: list[Partition | None]
) -> int:
    """max over ordered pairs of distinct records (x, x') of the replace weight."""
    keys = _key_columns(uniq, parts)
    total = np.zeros((len(uniq), len(uniq)), dtype=object)
    for i, p in enumerate(parts):
        h = uniq[:, i].astype(bool)
        either = h[:, None] | h[None, :]
        both = h[:, None] & h[None, :]
        if p is None:
            twice = np.zeros_like(both)
        elif keys[i] is None:
            twice = both  # opaque: two distinct records may always get different keys
        else:
            twice = both & (keys[i][:, None] != keys[i][None, :])
        total = total + (either.astype(np.int64) + twice.astype(np.int64)).astype(object) * c[i]
    single = counts < 2  # x' must differ from x: a signature pairs with itself only if >= 2
    total[np.diag_indices(len(uniq))] = np.where(single, 0, total.diagonal())
    return max(0, int(total.max()))


def _max_unit(
    c: np.ndarray,
    uniq: np.ndarray,
    counts: np.ndarray,
    parts: list[Partition | None],
    k: int,
) -> int:
    """max over sets of <= k distinct records sharing the unit-level values of their weight."""
    keys = _key_columns(uniq, parts)
    n_feat = len(parts) + sum(1 for key in keys if key is not None)
    classes = [tuple(r) for r in uniq[:, n_feat:]]
    sizes = [classes.count(klass) for klass in set(classes)]
    if sum(math.comb(n + k, k) for n in sizes) > MAX_UNITS:
        raise TooBig
    best = 0
    for klass in set(classes):
        members = np.array([s for s in range(len(uniq)) if classes[s] == klass])
        none = len(uniq)  # a dummy "no record" signature: sets smaller than k
        combos = np.array(
            list(itertools.combinations_with_replacement([*members.tolist(), none], k)),
            dtype=np.int64,
        )
        ext_counts = np.append(counts, k)
        ok = np.ones(len(combos), dtype=bool)
        for r in range(k):  # a signature used r times needs r distinct records
            mult = sum((combos[:, r] == combos[:, q]).astype(np.int64) for q in range(k))
            ok &= mult <= ext_counts[combos[:, r]]
        combos = combos[ok]
        total = np.zeros(len(combos), dtype=object)
        for i, p in enumerate(parts):
            h = np.append(uniq[:, i].astype(bool), False)[combos]  # (combos, k)
            if p is None:
                groups = h.any(axis=1).astype(np.int64)
            elif keys[i] is None:
                groups = h.sum(axis=1)  # opaque: every record its own group
            else:
                g = np.where(h, np.append(keys[i], -1)[combos], -1)
                groups = np.zeros(len(combos), dtype=np.int64)
                for r in range(k):
                    new = g[:, r] != -1
                    for q in range(r):
                        new &= g[:, r] != g[:, q]
                    groups += new
            if p is not None and p.max_groups_per_unit is not None:
                groups = np.minimum(groups, p.max_groups_per_unit)
            total = total + groups.astype(object) * c[i]
        best = max(best, int(total.max()))
    return best


def weights_of(value: object) -> tuple[Fraction, ...]:
    return tuple(value.weights())  # type: ignore[attr-defined]


# -- the tests ---------------------------------------------------------------------------------

SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(case: Case, limit: int = 1) -> None:
    """Exact mode equals the oracle; a small search limit (a cut search) stays above it."""
    try:
        truth = oracle(case)
    except TooBig:
        assume(False)
        raise
    tables = {"t": case.model}
    exact = compose(case.mechs, tables, case.kind, exact_limit=10**7)
    bound = compose(case.mechs, tables, case.kind, exact_limit=limit)
    # (both read the atoms the first remembered: solver/first_extension.py)
    again = compose(case.mechs, tables, case.kind, exact_limit=10**7)
    assert (again.cost, again.exact, again.witness) == (exact.cost, exact.exact, exact.witness)
    replace_units = case.model.neighbourhood == "replace" and case.model.unit.max_rows > 1
    got = weights_of(exact.cost)
    low = weights_of(bound.cost)
    want = truth
    if case.kind is GDP:  # mu = sqrt(weight) rounded up: compare mu
        want = weights_of(case.kind.from_weights(truth))
    if replace_units:
        assert not exact.exact
        assert all(g >= w for g, w in zip(got, want)), (got, want)
    else:
        assert exact.exact, exact
        assert got == want, (got, want, exact)
    assert all(b >= w for b, w in zip(low, want)), (low, want)
    assert set(exact.witness) <= {m.id for m in case.mechs}


@pytest.mark.slow
@SETTINGS
@given(cases(unit=False, neighbourhood="add_remove"), st.integers(0, 12))
def test_row_add_remove_matches_brute_force(case: Case, limit: int) -> None:
    check(case, limit)


@pytest.mark.slow
@SETTINGS
@given(cases(unit=False, neighbourhood="replace"), st.integers(0, 40))
def test_row_replace_matches_brute_force(case: Case, limit: int) -> None:
    check(case, limit)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(unit=True), st.integers(0, 30))
def test_units_match_brute_force(case: Case, limit: int) -> None:
    if case.model.neighbourhood == "replace":
        case.model = TableModel("add_remove", case.model.unit)
        check(case, limit)
        add_remove = compose(case.mechs, {"t": case.model}, case.kind, exact_limit=10**7)
        case.model = TableModel("replace", case.model.unit)
        rep = compose(case.mechs, {"t": case.model}, case.kind, exact_limit=10**7)
        assert (
            weights_of(rep.cost) == tuple(2 * w for w in weights_of(add_remove.cost))
            or case.kind is GDP
        )
        return
    check(case, limit)

    # again without the greedy shortcut, so the exact multiset search decides every slab
    def no_greedy(self: object, k: int) -> tuple[Fraction, tuple[object, ...]]:
        return Fraction(0), ()

    with mock.patch.object(units._UnitCells, "greedy", no_greedy):
        check(case, limit)


# -- the exact unit search on its own ------------------------------------------------------------


@dataclass
class _FakeMech:
    wx: tuple[Fraction, ...]
    max_groups: int | None


@dataclass
class _FakeInst:
    mechs: list[_FakeMech]


@st.composite
def unit_tables(draw: st.DrawFn) -> tuple[units._UnitCells, int]:
    """Cells with random hits and groups (-1: a group of the row's own), caps that bind."""
    n_cells, n_mechs = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    table = object.__new__(units._UnitCells)
    part = np.array(draw(st.lists(st.sampled_from([0, 1, 1]), min_size=n_mechs, max_size=n_mechs)))
    caps = draw(st.lists(st.sampled_from([None, 1, 2, 3]), min_size=n_mechs, max_size=n_mechs))
    weights = draw(st.lists(st.integers(1, 5), min_size=n_mechs, max_size=n_mechs))
    table.inst = _FakeInst([_FakeMech((Fraction(w),), c) for w, c in zip(weights, caps)])
    table.j, table.cells = 0, [(r,) for r in range(n_cells)]
    table.sc = atoms._Scale(1, sum(weights), 0.0)
    table.wf = np.array(weights, dtype=np.float64)
    table.hits = np.array(
        draw(st.lists(st.booleans(), min_size=n_cells * n_mechs, max_size=n_cells * n_mechs))
    ).reshape(n_cells, n_mechs)
    table.groups = np.array(
        draw(st.lists(st.integers(-1, 2), min_size=n_cells * n_mechs, max_size=n_cells * n_mechs))
    ).reshape(n_cells, n_mechs)
    table.plain = part == 0
    table.parts = np.flatnonzero(part != 0)
    table.cap = np.array([c if c is not None else 1 << 30 for c in caps], dtype=np.int64)
    return table, draw(st.integers(1, 4))


@settings(max_examples=300, deadline=None)
@given(unit_tables())
def test_unit_search_matches_enumeration(args: tuple[units._UnitCells, int]) -> None:
    table, k = args
    truth = max(
        table.value(combo, exact=True)
        for size in range(k + 1)
        for combo in itertools.combinations_with_replacement(range(len(table.cells)), size)
    )
    found = table.search(k, Fraction(10**9), (Fraction(0), ()), search._Budget(10**6))
    assert found is not None and found[0] == truth
    greedy = table.greedy(k)
    assert greedy[0] <= truth and greedy[0] == table.value(
        [table.cells.index(c) for c in greedy[1]], exact=True
    )


def test_unit_search_counts_a_group_once() -> None:
    # rows A, B share group 0 of a GROUP BY capped at 2 groups; each also holds a plain
    # mechanism; C holds group 1. Best unit: all three rows, p + q + 2 groups.
    table = object.__new__(units._UnitCells)
    table.inst = _FakeInst(
        [_FakeMech((Fraction(w),), c) for w, c in [(1, None), (1, None), (5, 2)]]
    )
    table.j, table.cells = 0, [(0,), (1,), (2,)]
    table.sc = atoms._Scale(1, 7, 0.0)
    table.wf = np.array([1.0, 1.0, 5.0])
    table.hits = np.array([[1, 0, 1], [0, 1, 1], [0, 0, 1]], dtype=bool)
    table.groups = np.array([[-1, -1, 0], [-1, -1, 0], [-1, -1, 1]])
    table.plain = np.array([True, True, False])
    table.parts = np.array([2])
    table.cap = np.array([1 << 30, 1 << 30, 2])
    found = table.search(3, Fraction(10**9), (Fraction(0), ()), search._Budget(10**6))
    assert found is not None and found[0] == 12


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(unit=False, neighbourhood="add_remove"), st.integers(2, 4), st.integers(0, 12))
def test_repeated_mechanisms_merged_match_brute_force(case: Case, times: int, limit: int
                                                      ) -> None:
    """A session asking the same questions again (every mechanism ``times`` times, as a
    dashboard does): the single-record search merges equal rows before it searches
    (``records._distinct_rows``, here from the first row on); exact mode must still equal the
    oracle over all the repeated mechanisms, and a cut search stay above it."""
    case.mechs = [replace(m, id=f"{m.id}.r{i}") for i in range(times) for m in case.mechs]
    with mock.patch.object(records, "_MERGE_FROM", 0):
        check(case, limit)
