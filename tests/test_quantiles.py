"""Quantiles (MEDIAN, PERCENTILE_CONT/_DISC, QUANTILE_CONT/_DISC, APPROX_QUANTILE, MIN, MAX):
with noise off the answer is a q-quantile *as DuckDB counts the rows*; with noise on, answers
follow the exact exponential-mechanism pmf of DuckDB's own histogram; costs and refusals."""

from __future__ import annotations

import math
import sqlite3
from fractions import Fraction
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.errors import PolicyError, UnsupportedQueryError
from privplan.testing import noise_disabled, seeded_noise
from tests.mechanisms._stats import P_MIN, chi2_counts


def _policy(k: int = 1, neighbourhood: str = "add_remove", groups: int = 3) -> pp.Policy:
    table: dict = {
        "privacy_unit": "row" if k == 1 else "pid", "neighbourhood": neighbourhood,
        "columns": {
            "pid": {"type": "int"},
            "g": {"type": "int", "public_values": list(range(groups))},
            "x": {"type": "int", "lower": 0, "upper": 40},
            "y": {"type": "float", "lower": -5, "upper": 5},
            "s": {"type": "str"},
            "free": {"type": "int"},
        },
    }
    if k > 1:
        table["max_rows_per_unit"] = k
    return pp.Policy.from_dict({"tables": {"t": table}})


def _frame(seed: int, rows: int = 60, groups: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.integers(-5, 50, rows).astype(float)  # some outside the bounds [0, 40]
    x[rng.random(rows) < 0.1] = np.nan
    return pd.DataFrame({
        "pid": np.arange(rows) // 2, "g": rng.integers(0, groups, rows),
        "x": pd.array(x, dtype="Int64"), "y": rng.normal(0, 3, rows),
        "s": rng.choice(["a", "b"], rows), "free": rng.integers(0, 9, rows)})


def _session(frame: pd.DataFrame, policy: pp.Policy | None = None,
             budget: object = None) -> pp.Session:
    sess = pp.connect(policy=policy or _policy(), budget=budget or pp.PureDP(1000))
    sess.register("t", frame)
    return sess


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("q", ["0", "0.1", "0.5", "0.9", "1"])
def test_noise_off_answer_is_a_quantile_as_the_engine_counts(seed: int, q: str) -> None:
    frame = _frame(seed)
    with _session(frame) as sess, noise_disabled():
        got = sess.sql(f"SELECT g, QUANTILE_DISC(x, {q}) AS v FROM t GROUP BY g", epsilon=1).df
    con = duckdb.connect()
    con.register("t", frame)
    for g, v in zip(got["g"], got["v"]):
        below, at_most, n = con.execute(
            "SELECT count(*) FILTER (WHERE c < ?), count(*) FILTER (WHERE c <= ?), count(c) "
            "FROM (SELECT LEAST(GREATEST(x, 0), 40) AS c FROM t WHERE g = ? AND x IS NOT NULL)",
            [int(v), int(v), int(g)]).fetchone()
        qn = Fraction(q) * n
        assert below <= qn <= at_most, (g, v, below, qn, at_most)
        assert 0 <= v <= 40
    assert got["g"].tolist() == [0, 1, 2]  # the public group without rows is released too


def test_spellings_agree_and_min_max_are_the_ends(tmp_path: Path) -> None:
    frame = _frame(1)
    spellings = ["MEDIAN(x)", "QUANTILE_CONT(x, 0.5)", "PERCENTILE_DISC(0.5) WITHIN GROUP "
                 "(ORDER BY x)", "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY x)",
                 "APPROX_QUANTILE(x, 0.5)"]
    with _session(frame) as sess, noise_disabled():
        values = {s: sess.sql(f"SELECT {s} AS v FROM t", epsilon=1).df["v"][0]
                  for s in spellings}
        ends = sess.sql("SELECT MIN(x) AS lo, MAX(x) AS hi FROM t", epsilon=1).df
    assert len(set(values.values())) == 1, values
    clamped = frame["x"].dropna().clip(0, 40)
    assert ends["hi"][0] == clamped.max()
    assert ends["lo"][0] == 0  # every value in [lower bound, min] is an exact 0-quantile


def test_float_column_answers_on_its_grid_of_candidates() -> None:
    frame = _frame(2, rows=200)
    with _session(frame) as sess:
        with noise_disabled():
            res = sess.sql("SELECT MEDIAN(y) AS m FROM t", epsilon=1)
        plan = sess.explain("SELECT MEDIAN(y) AS m FROM t", epsilon=1)
    # bounds [-5, 5] on a grid of 0.02 (at most 1,000 candidates): 501 values
    (mech,) = plan.mechanisms
    assert mech.grid == (-250, 250) and float(mech.step) == 0.02
    cells = np.round(frame["y"].clip(-5, 5) / 0.02).astype(int)
    m = res.df["m"][0] / 0.02
    assert abs(m - round(m)) < 1e-9
    below, at_most = int((cells < round(m)).sum()), int((cells <= round(m)).sum())
    assert below <= len(cells) / 2 <= at_most
    assert "rows of rank" in res.accuracy["m"].method
    assert res.accuracy["m"].std is None and "m_low" not in res.with_intervals()


@pytest.mark.statistical
def test_answers_follow_the_exponential_mechanism_of_the_engines_histogram() -> None:
    groups, eps = 400, Fraction(1, 2)
    rows = [3, 3, 4, 7, 7, 7, 9, 12, 20]  # the same rows in every group: i.i.d. draws
    frame = pd.DataFrame({"pid": range(groups * len(rows)),
                          "g": np.repeat(np.arange(groups), len(rows)),
                          "x": np.tile(rows, groups), "y": 0.0, "s": "a", "free": 0})
    policy = _policy(groups=groups)
    draws = []
    with _session(frame, policy, pp.PureDP(100)) as sess:
        for seed in range(5):
            with seeded_noise(seed):
                draws += sess.sql("SELECT g, MEDIAN(x) AS m FROM t GROUP BY g",
                                  epsilon=eps).df["m"].tolist()
    # the exact pmf over the candidates 0..40, from the definition (q = 1/2, Δ = 1 scaled)
    values = np.arange(41)
    below = np.array([sum(r < v for r in rows) for v in values])
    at_most = np.array([sum(r <= v for r in rows) for v in values])
    u = np.maximum(0, np.maximum(2 * below - len(rows), len(rows) - 2 * at_most))
    weights = np.exp(-float(eps) * u / 2)
    assert chi2_counts(np.bincount(draws, minlength=41), weights / weights.sum()) > P_MIN


def test_costs_in_every_definition_and_for_units() -> None:
    frame = _frame(3)
    with _session(frame, budget=pp.ZCDP(1)) as sess:
        res = sess.sql("SELECT MEDIAN(x) FROM t", rho=Fraction(1, 8))
        assert res.cost == pp.ZCDP(Fraction(1, 8))  # ε = sqrt(8ρ) = 1, ρ = ε²/8
        assert sess.explain("SELECT MEDIAN(x) FROM t", rho=Fraction(1, 8)).mechanisms[
            0].noise == "exponential mechanism, ε 1"
    with _session(frame, budget=pp.GDP(2)) as sess:
        assert sess.sql("SELECT MEDIAN(x) FROM t", mu=1).cost <= pp.GDP(1)
    with _session(frame, budget=pp.ApproxDP(2, 1e-6)) as sess:
        res = sess.sql("SELECT s, MEDIAN(x) AS m FROM t GROUP BY s", epsilon=1, delta=1e-6)
        assert set(res.df["s"]) <= {"a", "b"}  # keys through partition selection
        assert res.cost <= pp.ApproxDP(1, 1e-6)
    # a unit of 3 rows moves the rank utility 3 times as far: the mechanism gets ε/3
    with _session(frame, _policy(k=3)) as sess:
        plan = sess.explain("SELECT MEDIAN(x) FROM t", epsilon=Fraction(9, 10))
        assert plan.mechanisms[0].noise == "exponential mechanism, ε 0.3"
        assert plan.query_cost == pp.PureDP(Fraction(9, 10))
    # replace neighbours: the rank sensitivity is b, not max(a, b - a)
    with _session(frame, _policy(neighbourhood="replace")) as sess:
        assert sess.explain("SELECT MEDIAN(x) FROM t", epsilon=1).mechanisms[0].sensitivity == 2
    with _session(frame) as sess:
        assert sess.explain("SELECT MEDIAN(x) FROM t", epsilon=1).mechanisms[0].sensitivity == 1


@pytest.mark.parametrize("sql, error, fragment", [
    ("SELECT MEDIAN(s) FROM t", UnsupportedQueryError, "str column"),
    ("SELECT MEDIAN(free) FROM t", PolicyError, "bounds"),
    ("SELECT QUANTILE_CONT(x, 1.5) FROM t", UnsupportedQueryError, "between 0 and 1"),
    ("SELECT QUANTILE_CONT(x, [0.1, 0.5]) FROM t", UnsupportedQueryError, "one number"),
    ("SELECT QUANTILE_CONT(x, free) FROM t", UnsupportedQueryError, "one number"),
    ("SELECT MEDIAN(x + 1) FROM t", UnsupportedQueryError, "one numeric column"),
    ("SELECT MEDIAN(DISTINCT x) FROM t", UnsupportedQueryError, "one numeric column"),
    ("SELECT MEDIAN(SUM(x)) FROM t", UnsupportedQueryError, "nest"),
    ("SELECT MODE(x) FROM t", UnsupportedQueryError, "MEDIAN, PERCENTILE_CONT"),
])
def test_refusals_say_why_and_spend_nothing(sql: str, error: type, fragment: str,
                                            tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    sess = pp.connect(policy=_policy(), budget=pp.PureDP(3), ledger=ledger)
    sess.register("t", _frame(4))
    with sess, pytest.raises(error, match=fragment):
        sess.sql(sql, epsilon=1)
    assert sqlite3.connect(ledger).execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0


def test_rank_error_in_explain_matches_the_bound() -> None:
    with _session(_frame(5)) as sess:
        plan = sess.explain("SELECT QUANTILE_CONT(x, 0.9) FROM t", epsilon=1)
    (mech,) = plan.mechanisms
    # Δ = max(9, 1) = 9 in tenths of a row; 41 candidates; t = 2Δ/ε·ln(41/0.05), in rows
    assert mech.rank_error_95 == pytest.approx(2 * 9 * math.log(41 / 0.05) / 10)
    assert "rows of rank" in str(plan) and plan.to_dict()["mechanisms"][0]["rank_error_95"] == mech.rank_error_95
