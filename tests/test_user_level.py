"""User-level privacy: contribution bounding in the rewrite, sensitivities that hold for every
neighbour (remove one unit), unit-level columns, distinct-unit counts, PUMS with private ids."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled

PUMS = Path(__file__).resolve().parent / "fixtures" / "pums"  # copies of the shared PUMS sample


def _policy(k: int = 3, m: int | None = None, neighbourhood: str = "add_remove",
            c: int | None = None) -> pp.Policy:
    table: dict = {
        "privacy_unit": "pid", "max_rows_per_unit": k, "neighbourhood": neighbourhood,
        "columns": {
            "pid": {"type": "int"},
            "grp": {"type": "str", "public_values": ["a", "b", "c"]},
            "age": {"type": "int", "lower": 0, "upper": 100, "unit_level": True},
            "x": {"type": "int", "lower": -5, "upper": 10},
        },
    }
    if m is not None:
        table["max_groups_per_unit"] = m
    if c is not None:
        table["max_rows_per_group_per_unit"] = c
    return pp.Policy.from_dict({"tables": {"t": table}})


def _data(seed: int = 7, units: int = 12) -> pd.DataFrame:
    rng = np.random.Generator(np.random.PCG64(seed))
    rows = []
    for pid in range(units):
        n = int(rng.integers(1, 7)) if pid else 40  # unit 0 is a heavy contributor
        age = int(rng.integers(0, 101))
        for _ in range(n):
            # the data breaks "age is unit level" on purpose for one unit
            a = age if pid != 3 else int(rng.integers(0, 101))
            rows.append((pid, "abc"[int(rng.integers(0, 3))], a, int(rng.integers(-20, 30))))
    return pd.DataFrame(rows, columns=["pid", "grp", "age", "x"])


QUERIES = [
    "SELECT grp, COUNT(*) AS v FROM t GROUP BY grp",
    "SELECT grp, SUM(x) AS v FROM t GROUP BY grp",
    "SELECT COUNT(DISTINCT pid) AS v FROM t WHERE age < 50",
    "SELECT SUM(x) AS v FROM t WHERE grp = 'a'",
    "SELECT grp, COUNT(*) FILTER (WHERE x > 0) AS v FROM t GROUP BY grp",
    "SELECT grp, COUNT(DISTINCT x) AS v FROM t GROUP BY grp",
    "SELECT grp, SUM(2 * x - 3) AS v FROM t GROUP BY grp",
]


def _answer(df: pd.DataFrame, policy: pp.Policy, sql: str) -> tuple[np.ndarray, list[float]]:
    sess = pp.connect(":memory:", policy=policy, budget=pp.PureDP(100))
    sess.register("t", df)
    with noise_disabled():
        res = sess.sql(sql, epsilon=1)
    sens = [m.sensitivity for m in res.explanation.mechanisms]
    sess.close()
    return res.df["v"].to_numpy(dtype=float), sens


def _explained(policy: pp.Policy, df: pd.DataFrame, sql: str, budget: Any, **kw: Any
               ) -> tuple[Any, Any]:
    """The explanation of a one-mechanism query, and its mechanism."""
    with pp.connect(":memory:", policy=policy, budget=budget) as sess:
        sess.register("t", df)
        plan = sess.explain(sql, **kw)
    (mech,) = plan.mechanisms
    return plan, mech


@pytest.mark.invariant(1)
@pytest.mark.slow
@pytest.mark.parametrize("c", [None, 2])
@pytest.mark.parametrize("m", [None, 1, 2])
@pytest.mark.parametrize("sql", QUERIES)
def test_every_neighbour_loses_at_most_what_the_query_was_charged(
        sql: str, m: int | None, c: int | None) -> None:
    """Oracle over all neighbours: remove every row of one unit, re-run without noise, and add
    up the privacy loss of the actual shifts — Σ_g |Δ_g|·ε/Δ for Laplace noise calibrated to
    sensitivity Δ at cost ε. It never exceeds the query's composed cost, whatever the
    accountant's model of how a unit's rows spread (the engine is the judge)."""
    policy, df = _policy(k=3, m=m, c=c), _data()
    plan, mech = _explained(policy, df, sql, pp.PureDP(100), epsilon=1)
    per_unit = Fraction(mech.cost.epsilon) / Fraction(mech.sensitivity_in_units)
    full, _ = _answer(df, policy, sql)
    worst = Fraction(0)
    for pid in df["pid"].unique():
        without, _ = _answer(df[df.pid != pid], policy, sql)
        shift = sum(Fraction(abs(a - b)).limit_denominator(10**6) for a, b in zip(full, without))
        worst = max(worst, shift * per_unit)
    assert worst <= plan.query_cost.epsilon + 1e-9, (worst, plan.query_cost)
    assert worst > 0


def _worst_gaussian_mu(df: pd.DataFrame, policy: pp.Policy, sql: str, mech: Any) -> float:
    """The largest μ any real neighbour's shifts reach for a Gaussian release ``mech``: remove
    each unit, re-run without noise, μ_g = |Δ_g|·μ/Δ per group, composed as sqrt(Σ μ_g²)
    (Dong–Roth–Su Cor. 3.3). The engine is the judge of the shifts."""
    per_unit = float(mech.cost.mu) / float(mech.sensitivity_in_units)
    full, _ = _answer(df, policy, sql)
    worst = 0.0
    for pid in df["pid"].unique():
        without, _ = _answer(df[df.pid != pid], policy, sql)
        worst = max(worst, math.sqrt(sum(((a - b) * per_unit) ** 2
                                         for a, b in zip(full, without))))
    return worst


@pytest.mark.invariant(1)
@pytest.mark.slow
@pytest.mark.parametrize(("m", "c"), [(None, None), (2, None), (None, 2), (2, 2)])
@pytest.mark.parametrize("sql", QUERIES[:3])
def test_every_neighbour_loses_at_most_the_charged_mu(sql: str, m: int | None,
                                                      c: int | None) -> None:
    """The same oracle under μ-GDP, where counts and sums get rounded Gaussian noise: a shift
    of |Δ_g| in group g costs μ_g = |Δ_g|·μ/Δ, and independent Gaussian releases compose as
    sqrt(Σ μ_g²) (Dong–Roth–Su Cor. 3.3). That never exceeds the query's composed μ."""
    policy, df = _policy(k=3, m=m, c=c), _data()
    plan, mech = _explained(policy, df, sql, pp.GDP(100), mu=1)
    assert mech.noise.startswith("rounded Gaussian"), mech.noise
    worst = _worst_gaussian_mu(df, policy, sql, mech)
    assert worst <= float(plan.query_cost.mu) + 1e-9, (worst, plan.query_cost)
    assert worst > 0


@pytest.mark.slow
@pytest.mark.parametrize(("m", "c"), [(None, None), (2, 2)])
@pytest.mark.parametrize("sql", QUERIES[:2])
def test_a_pld_session_query_keeps_its_own_epsilon_delta_for_every_neighbour(
        sql: str, m: int | None, c: int | None) -> None:
    """A query asked with epsilon=0.5, delta=1e-7 in a PLD session gets the Gaussian
    calibrated to that (ε, δ) through Gaussian DP: for every real neighbour (a unit removed,
    the query re-run without noise) the actual shifts give μ = sqrt(Σ (Δ_g/σ)²), and the GDP
    curve at that μ stays within δ at ε (the engine is the judge of the shifts)."""
    from privplan.accounting.conversions import gdp_delta

    policy, df = _policy(k=3, m=m, c=c), _data()
    with pp.connect(":memory:", policy=policy, budget=pp.ApproxDP(100, 1e-6),
                    composition="pld") as sess:
        sess.register("t", df)
        plan = sess.explain(sql, epsilon=0.5, delta=1e-7)
    (mech,) = plan.mechanisms
    assert mech.noise.startswith("rounded Gaussian"), mech.noise
    worst = _worst_gaussian_mu(df, policy, sql, mech)
    assert 0 < worst <= float(plan.query_cost.mu) + 1e-9, (worst, plan.query_cost)
    assert gdp_delta(worst, 0.5) <= 1e-7


def test_a_heavy_unit_contributes_at_most_max_rows() -> None:
    df = _data()
    assert (df.pid == 0).sum() == 40
    values, _ = _answer(df, _policy(k=3), "SELECT COUNT(*) AS v FROM t WHERE pid = 0")
    assert values[0] == 3
    values, _ = _answer(df, _policy(k=3), "SELECT SUM(x) AS v FROM t WHERE pid = 0")
    assert values[0] <= 3 * 10


def test_unit_level_columns_are_enforced_canonically() -> None:
    """Unit 3's age varies across its rows; the rewrite uses one value per unit, so the unit
    is counted in exactly one of two disjoint age regions."""
    df = _data()
    lo, _ = _answer(df, _policy(), "SELECT COUNT(DISTINCT pid) AS v FROM t WHERE age < 50")
    hi, _ = _answer(df, _policy(), "SELECT COUNT(DISTINCT pid) AS v FROM t WHERE age >= 50")
    assert lo[0] + hi[0] == df.pid.nunique()


def test_unit_level_filters_compose_in_parallel_row_level_ones_do_not() -> None:
    sess = pp.connect(":memory:", policy=_policy(k=3), budget=pp.PureDP(10))
    sess.register("t", _data())
    assert sess.sql("SELECT COUNT(*) FROM t WHERE age < 50", epsilon=1).cost == pp.PureDP(1)
    assert sess.sql("SELECT COUNT(*) FROM t WHERE age >= 50", epsilon=1).cost == pp.PureDP(0)
    # grp is row level: a unit with 3 rows can be in 'a' and in 'b'. Distinct-unit counts
    # (flat: one per unit whatever its rows) then add up...
    sess2 = pp.connect(":memory:", policy=_policy(k=3), budget=pp.PureDP(10))
    sess2.register("t", _data())
    sess2.sql("SELECT COUNT(DISTINCT pid) FROM t WHERE grp = 'a'", epsilon=1)
    assert sess2.sql("SELECT COUNT(DISTINCT pid) FROM t WHERE grp = 'b'",
                     epsilon=1).cost == pp.PureDP(1)
    # ... while row counts are calibrated per row: the unit's 3 rows split between the two
    # filters move the counts by 3 in all, exactly what the first query was charged for
    sess3 = pp.connect(":memory:", policy=_policy(k=3), budget=pp.PureDP(10))
    sess3.register("t", _data())
    sess3.sql("SELECT COUNT(*) FROM t WHERE grp = 'a'", epsilon=1)
    assert sess3.sql("SELECT COUNT(*) FROM t WHERE grp = 'b'", epsilon=1).cost == pp.PureDP(0)
    assert sess3.sql("SELECT COUNT(DISTINCT pid) FROM t WHERE grp = 'b'",
                     epsilon=1).cost == pp.PureDP(1)


def test_group_by_charges_the_rows_a_unit_can_add() -> None:
    """k = 3 rows per unit over 3 public groups: the histogram's L1 sensitivity is 3 rows
    whatever max_groups_per_unit says, so each count gets discrete Laplace noise of scale 3/ε
    (one row costs ε/3), not 3·3/ε (3 groups x 3 rows, the old per-group calibration)."""
    for m in (None, 1, 2):
        sess = pp.connect(":memory:", policy=_policy(k=3, m=m), budget=pp.PureDP(10))
        sess.register("t", _data())
        plan = sess.explain("SELECT grp, COUNT(*) FROM t GROUP BY grp", epsilon=1)
        assert plan.mechanisms[0].cost == pp.PureDP("1/3"), m
        assert plan.mechanisms[0].sensitivity == 1
        assert plan.mechanisms[0].noise == "discrete Laplace, scale 3", plan.mechanisms[0].noise
        assert plan.query_cost == pp.PureDP(1)


@pytest.mark.parametrize(("m", "c", "laplace_scale", "gaussian_var"), [
    (None, None, 10, 100 / 1),  # k = 10 rows in one group: L1 = L2 = 10
    (3, None, 10, 100 / 1),     # three groups do not help: one group can hold all ten rows
    (3, 2, 6, 12 / 1),          # m·c = 6 rows in all; L2² = m·c² = 12
    (None, 2, 6, 12 / 1),       # only 3 public groups: 3 x 2 rows (the solver sees the domain)
])
def test_group_by_noise_follows_the_contribution_bounds(
        m: int | None, c: int | None, laplace_scale: int, gaussian_var: float) -> None:
    """The issue's acceptance: with k rows per unit a user-level GROUP BY COUNT gets scale
    k/ε (pure DP), m·c/ε with both bounds, and a Gaussian of variance L2²/(2ρ) with
    L2² = Σ_g c² over the groups a unit can fill — what the peers' L0/Linf bounds give."""
    sql = "SELECT grp, COUNT(*) FROM t GROUP BY grp"
    sess = pp.connect(":memory:", policy=_policy(k=10, m=m, c=c), budget=pp.PureDP(10))
    sess.register("t", _data())
    lap = sess.explain(sql, epsilon=1).mechanisms[0]
    assert lap.noise == f"discrete Laplace, scale {laplace_scale}"
    zc = pp.connect(":memory:", policy=_policy(k=10, m=m, c=c), budget=pp.ZCDP(10))
    zc.register("t", _data())
    gauss = zc.explain(sql, rho=0.5).mechanisms[0]  # variance L2²/(2ρ) = L2²
    assert gauss.noise.startswith(f"discrete Gaussian, sigma^2 {gaussian_var:g} "), gauss.noise
    gdp = pp.connect(":memory:", policy=_policy(k=10, m=m, c=c), budget=pp.GDP(10))
    gdp.register("t", _data())
    rounded = gdp.explain(sql, mu=1).mechanisms[0]  # σ = L2/μ: Gaussian, not Laplace
    assert rounded.noise == f"rounded Gaussian, sigma {math.sqrt(gaussian_var):.6g}", rounded.noise


def test_rows_per_group_bound_is_enforced_by_the_engine() -> None:
    """max_rows_per_group_per_unit = 2: each unit adds at most 2 rows to any group, and at
    most 3 groups; the noise-free answer equals the bound computed directly from the data."""
    df = _data(units=30)
    for m in (None, 1, 2):
        values, keys = _answer_keys(df, _policy(k=40, m=m, c=2),
                                    "SELECT grp, COUNT(*) AS v FROM t GROUP BY grp ORDER BY grp")
        per = df.groupby(["pid", "grp"]).size().clip(upper=2).reset_index(name="n")
        if m is not None:  # which m groups are kept is the engine's choice: check the totals
            kept = per.groupby("pid").n.apply(lambda s: sorted(s, reverse=True))
            assert sum(values) <= sum(sum(v[:m]) for v in kept)
            assert sum(values) >= sum(sum(sorted(v)[:m]) for v in kept)
            continue
        want = per.groupby("grp").n.sum()
        assert dict(zip(keys, values)) == {g: int(want.get(g, 0)) for g in keys}


def _answer_keys(df: pd.DataFrame, policy: pp.Policy, sql: str) -> tuple[list[int], list[str]]:
    sess = pp.connect(":memory:", policy=policy, budget=pp.PureDP(100))
    sess.register("t", df)
    with noise_disabled():
        res = sess.sql(sql, epsilon=1)
    return [int(v) for v in res.df["v"]], list(res.df["grp"])


def test_rows_per_group_bound_is_checked_in_the_policy() -> None:
    for bad in (0, -1, "2"):
        with pytest.raises(pp.PolicyError, match="max_rows_per_group_per_unit"):
            _policy(k=10, c=bad)  # type: ignore[arg-type]
    with pytest.raises(pp.PolicyError, match="privacy unit is a row"):
        pp.Policy.from_dict({"tables": {"t": {
            "privacy_unit": "row", "max_rows_per_group_per_unit": 2,
            "columns": {"x": {"type": "int"}}}}})
    assert _policy(k=3, c=5).table("t").max_rows_per_group_per_unit is None  # k binds first
    assert _policy(k=10, c=2).to_dict()["tables"]["t"]["max_rows_per_group_per_unit"] == 2


def test_distinct_unit_counts_charge_the_groups_a_unit_can_reach() -> None:
    """COUNT(DISTINCT pid) moves by one per group a unit touches: with k = 3 each group gets
    ε/3, with max_groups_per_unit = m each gets ε/m."""
    for m, per_group in ((None, pp.PureDP("1/3")), (1, pp.PureDP(1)), (2, pp.PureDP("1/2"))):
        sess = pp.connect(":memory:", policy=_policy(k=3, m=m), budget=pp.PureDP(10))
        sess.register("t", _data())
        plan = sess.explain("SELECT grp, COUNT(DISTINCT pid) FROM t GROUP BY grp", epsilon=1)
        assert plan.mechanisms[0].cost == per_group, m
        assert plan.query_cost == pp.PureDP(1)


def test_group_by_the_privacy_unit_is_refused() -> None:
    sess = pp.connect(":memory:", policy=_policy(), budget=pp.ApproxDP(10, 1e-5))
    sess.register("t", _data())
    with pytest.raises(pp.UnsupportedQueryError, match="privacy unit 'pid'"):
        sess.sql("SELECT pid, COUNT(*) FROM t GROUP BY pid", epsilon=1, delta=1e-6)
    assert sess.spent() == pp.ApproxDP(0, 0)


@pytest.mark.parametrize("name", ["PUMS_pid", "PUMS_dup"])
def test_pums_with_private_ids_end_to_end(name: str) -> None:
    policy = pp.Policy.from_smartnoise_yaml(PUMS / f"{name}.yaml")
    sess = pp.connect(":memory:", policy=policy, budget=pp.ApproxDP(10, 1e-5))
    sess.register("PUMS", PUMS / f"{name}.csv")
    with noise_disabled():
        res = sess.sql("SELECT married, COUNT(DISTINCT pid) AS persons, COUNT(*) AS n, "
                       "AVG(income) AS income FROM PUMS.PUMS GROUP BY married",
                       epsilon=1, delta=1e-6)
    plain = duckdb.sql(
        f"SELECT COUNT(DISTINCT pid) FROM read_csv_auto('{PUMS / (name + '.csv')}')"
    ).fetchall()[0][0]
    assert int(res.df["persons"].sum()) == plain  # every person, once
    # max_ids = 1: one row per person survives the bounding
    assert res.df["n"].tolist() == res.df["persons"].tolist()
    assert res.cost == pp.ApproxDP(1, 1e-6)


def _float_policy(m: int | None) -> pp.Policy:
    table: dict = {
        "privacy_unit": "pid", "max_rows_per_unit": 4,
        "columns": {
            "pid": {"type": "int"},
            "grp": {"type": "str", "public_values": ["a", "b", "c"]},
            "age": {"type": "int", "lower": 0, "upper": 100, "unit_level": True},
            "x": {"type": "int", "lower": -5, "upper": 10},
            "y": {"type": "float", "lower": -2.5, "upper": 7.25, "resolution": 0.01},
        },
    }
    if m is not None:
        table["max_groups_per_unit"] = m
    return pp.Policy.from_dict({"tables": {"t": table}})


@pytest.mark.parametrize("m", [None, 2])
def test_sums_over_the_bounded_copy_equal_clamping_inline(m: int | None) -> None:
    """From the session's second query, answers read its bounded copy, whose SUM-grid columns
    were clamped once when it was made (from canonical unit-level values). The statement bound
    before the charge (which the first query runs) bounds and clamps every row inline instead;
    run on the same data, both must give the very same exact aggregates."""
    df = _data(seed=11, units=30)
    rng = np.random.Generator(np.random.PCG64(5))
    y = rng.normal(2, 6, len(df)).round(3)
    y[::7] = np.nan  # NULLs stay out of sums and counts
    y[::11] = 1e300  # far outside the bounds: clamped, never overflowing
    df["y"] = y
    queries = [
        "SELECT grp, SUM(x) AS a, SUM(y) AS b, AVG(y) AS c, VAR_POP(y) AS d FROM t GROUP BY grp",
        "SELECT SUM(y) FILTER (WHERE x > 0) AS a, SUM(age) AS b FROM t WHERE age < 60",
        "SELECT grp, AVG(x) AS a, COUNT(y) AS b FROM t GROUP BY grp",
    ]
    for sql in queries:
        sess = pp.connect(":memory:", policy=_float_policy(m), budget=pp.PureDP(100))
        sess.register("t", df)
        bound: list[str] = []
        ran: list[tuple[str, pd.DataFrame]] = []
        real_bind, real_run = sess.engine.bind, sess.engine.run

        def bind(st: str, bound: list[str] = bound, real_bind: Any = real_bind) -> None:
            bound.append(st)
            real_bind(st)

        def run(st: str, ran: list[Any] = ran, real_run: Any = real_run) -> pd.DataFrame:
            ran.append((st, real_run(st)))
            return ran[-1][1]

        sess.engine.bind, sess.engine.run = bind, run  # type: ignore[method-assign]
        sess.sql(sql, epsilon=1)  # (reads the bounded rows inline: no copy yet)
        sess.sql(sql, epsilon=1)  # (makes the copy after its charge, and reads it)
        inline = bound[0]
        assert set(bound) == {inline}
        (first, _), (stored, got) = ran
        assert first == inline, sql
        # the stored grid column is summed (AVG sums it centred: SUM((__grid_x - c)))
        summed = r"SUM\(\(?__grid_"
        assert not re.search(summed, inline) and re.search(summed, stored), sql
        want = real_run(inline)
        sess.close()
        keys = [c for c in want.columns if c.startswith("__k")]
        if keys:
            want = want.sort_values(keys).reset_index(drop=True)
            got = got.sort_values(keys).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_exact=True, obj=sql)
