"""User-level privacy: contribution bounding in the rewrite, sensitivities that hold for every
neighbour (remove one unit), unit-level columns, distinct-unit counts, PUMS with private ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled

PUMS = Path(__file__).resolve().parent / "fixtures" / "pums"  # copies of the shared PUMS sample


def _policy(k: int = 3, m: int | None = None, neighbourhood: str = "add_remove") -> pp.Policy:
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
]


def _answer(df: pd.DataFrame, policy: pp.Policy, sql: str) -> tuple[np.ndarray, list[float]]:
    sess = pp.connect(":memory:", policy=policy, budget=pp.PureDP(100))
    sess.register("t", df)
    with noise_disabled():
        res = sess.sql(sql, epsilon=1)
    sens = [m.sensitivity for m in res.explanation.mechanisms]
    sess.close()
    return res.df["v"].to_numpy(dtype=float), sens


@pytest.mark.slow
@pytest.mark.parametrize("m", [None, 1, 2])
@pytest.mark.parametrize("sql", QUERIES)
def test_every_neighbour_changes_each_value_within_its_sensitivity(sql: str, m: int | None) -> None:
    """Oracle over all neighbours: remove every row of one unit, re-run without noise."""
    policy = _policy(k=3, m=m)
    df = _data()
    full, sens = _answer(df, policy, sql)
    assert len(sens) == 1
    for pid in df["pid"].unique():
        without, _ = _answer(df[df.pid != pid], policy, sql)
        assert np.all(np.abs(full - without) <= sens[0]), (pid, full, without, sens)


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
    # grp is row level: a unit with 3 rows can be in 'a' and in 'b' — the two queries add
    sess2 = pp.connect(":memory:", policy=_policy(k=3), budget=pp.PureDP(10))
    sess2.register("t", _data())
    sess2.sql("SELECT COUNT(*) FROM t WHERE grp = 'a'", epsilon=1)
    assert sess2.sql("SELECT COUNT(*) FROM t WHERE grp = 'b'", epsilon=1).cost == pp.PureDP(1)


def test_group_by_charges_the_groups_a_unit_can_reach() -> None:
    """k = 3 rows per unit over 3 public groups: a unit can touch all 3 groups, so each group
    gets ε/3; with max_groups_per_unit = 1 each group gets the whole ε."""
    for m, per_group in ((None, pp.PureDP("1/3")), (1, pp.PureDP(1)), (2, pp.PureDP("1/2"))):
        sess = pp.connect(":memory:", policy=_policy(k=3, m=m), budget=pp.PureDP(10))
        sess.register("t", _data())
        plan = sess.explain("SELECT grp, COUNT(*) FROM t GROUP BY grp", epsilon=1)
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
    """Answers read the session's bounded copy, whose SUM-grid columns were clamped once when
    it was made (from canonical unit-level values). The statement bound before the charge
    bounds and clamps every row inline instead; run on the same data, both must give the very
    same exact aggregates."""
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
        sess.sql(sql, epsilon=1)
        (inline,), ((stored, got),) = bound, ran
        assert "SUM(__grid_" not in inline and "SUM(__grid_" in stored, sql
        want = real_run(inline)
        sess.close()
        keys = [c for c in want.columns if c.startswith("__k")]
        if keys:
            want = want.sort_values(keys).reset_index(drop=True)
            got = got.sort_values(keys).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_exact=True, obj=sql)
