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


@pytest.mark.statistical
@pytest.mark.parametrize("func", ["MIN", "MAX"])
def test_min_and_max_follow_the_monotone_mechanism_of_the_engines_histogram(func: str) -> None:
    """Under add/remove MIN and MAX pick with exp(-ε·U/Δ) (no factor 2): U = rows below the
    cell (MIN) or above it (MAX)."""
    groups, eps = 400, Fraction(1, 2)
    rows = [3, 3, 4, 7, 9, 12, 20]
    frame = pd.DataFrame({"pid": range(groups * len(rows)),
                          "g": np.repeat(np.arange(groups), len(rows)),
                          "x": np.tile(rows, groups), "y": 0.0, "s": "a", "free": 0})
    draws = []
    with _session(frame, _policy(groups=groups), pp.PureDP(100)) as sess:
        for seed in range(4):
            with seeded_noise(seed):
                draws += sess.sql(f"SELECT g, {func}(x) AS m FROM t GROUP BY g",
                                  epsilon=eps).df["m"].tolist()
    values = np.arange(41)
    u = np.array([sum(r < v for r in rows) if func == "MIN" else sum(r > v for r in rows)
                  for v in values])
    weights = np.exp(-float(eps) * u)
    assert chi2_counts(np.bincount(draws, minlength=41), weights / weights.sum()) > P_MIN


def test_min_and_max_state_half_the_rank_error_under_add_remove_only() -> None:
    """The same ε is charged; the mechanism is twice as sharp, so its stated rank error is
    half that of the same query under replace (where the factor 2 stays)."""
    errors = {}
    for neighbourhood in ("add_remove", "replace"):
        with _session(_frame(5), _policy(neighbourhood=neighbourhood)) as sess:
            for sql in ("SELECT MIN(x) FROM t", "SELECT MAX(x) FROM t",
                        "SELECT QUANTILE_DISC(x, 0) FROM t"):
                plan = sess.explain(sql, epsilon=1)
                assert plan.query_cost == pp.PureDP(1)
                (mech,) = plan.mechanisms
                assert ("monotone" in mech.noise) == (neighbourhood == "add_remove")
                errors[neighbourhood, sql] = mech.rank_error_95
            median = sess.explain("SELECT MEDIAN(x) FROM t", epsilon=1).mechanisms[0]
            assert "monotone" not in median.noise
    for sql in ("SELECT MIN(x) FROM t", "SELECT MAX(x) FROM t"):
        assert errors["add_remove", sql] == pytest.approx(math.log(41 / 0.05))  # Δ/ε·ln(...)
        assert errors["replace", sql] == pytest.approx(2 * math.log(41 / 0.05))


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


# ----------------------------------------------------- refused before the charge, or answered


def _one_column(values: list, column: dict, budget: object = None,
                sql_type: str = "DOUBLE") -> pp.Session:
    """A DuckDB table t(x) of ``values`` under a policy bounding x as ``column``."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t(x {sql_type})")
    if values:
        con.executemany("INSERT INTO t VALUES (?)", [[v] for v in values])
    return pp.connect(con, policy={"tables": {"t": {"columns": {"x": column}}}},
                      budget=budget or pp.ApproxDP(100, Fraction(1, 1000)))


def _refused_free(sess: pp.Session, sql: str, error: type, fragment: str, **budget: object
                  ) -> None:
    """``explain`` and ``sql`` refuse ``sql`` alike, and nothing is spent."""
    before = sess.spent()
    for call in (sess.explain, sess.sql):
        with pytest.raises(error, match=fragment):
            call(sql, **budget)
    assert sess.spent() == before


INT_AGE = {"type": "int", "lower": 0, "upper": 100}


@pytest.mark.parametrize("rows", [2, 11])
@pytest.mark.parametrize("q", ["0.999999999999999999", "1e-300", "0.1234567891"])
@pytest.mark.parametrize("where", ["", " WHERE x < 9 OR x = 37"])
def test_a_quantile_finer_than_nine_decimals_is_refused_free(rows: int, q: str,
                                                            where: str) -> None:
    """The reviewers' repro: q = 0.999999999999999999 overflowed int64 after the charge for
    regions of 10 rows or more (an answer otherwise: a bit about the data). Now refused
    before the charge, whatever the rows."""
    sess = _one_column(list(range(rows)), INT_AGE, pp.PureDP(100), "INTEGER")
    _refused_free(sess, f"SELECT QUANTILE_CONT(x, {q}) AS q FROM t{where}",
                  UnsupportedQueryError, "at most 9 decimal places", epsilon=1)


def test_a_quantile_with_nine_decimals_is_answered_and_charged() -> None:
    sess = _one_column([5] * 11 + [37], INT_AGE, pp.PureDP(100), "INTEGER")
    sql = "SELECT QUANTILE_CONT(x, 0.999999999) AS q FROM t"
    assert sess.explain(sql, epsilon=1).mechanisms[0].sensitivity == 999_999_999
    with noise_disabled():
        assert sess.sql(sql, epsilon=1).df["q"][0] == 37
    assert sess.spent() == pp.PureDP(1)
    with seeded_noise(1):
        assert 0 <= sess.sql(sql, epsilon=1).df["q"][0] <= 100
    assert sess.spent() == pp.PureDP(2)


PER_ROW = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) "
           "{agg}(x{q}, contribution_bounds_per_row => ({lo}, {hi})) AS m FROM t")


def test_a_per_row_window_narrower_than_its_floats_gets_a_grid_of_doubles() -> None:
    """BigQuery's (40.0, 40.0000000000001) on a float column bounded [0, 100]: the grid of
    1,000 cells would be narrower than the doubles there (and its integers beyond what the
    engine's double arithmetic holds: a row clamped to the top raised IndexError after the
    charge). The step is now the doubles' spacing, rounded up to 1e-14: 11 cells."""
    sql = PER_ROW.format(agg="PERCENTILE_CONT", q=", 0.5", lo="40.0", hi="40.0000000000001")
    sess = _one_column([50.0] * 7 + [30.0] * 2, {"type": "float", "lower": 0, "upper": 100})
    (mech,) = sess.explain(sql).mechanisms
    assert mech.grid == (4 * 10**15, 4 * 10**15 + 10) and mech.step == Fraction(1, 10**14)
    with noise_disabled():
        assert sess.sql(sql).df["m"][0] == 40.0000000000001  # the rows clamped to the top
    with seeded_noise(3):
        assert 40.0 <= sess.sql(sql).df["m"][0] <= 40.0000000000001
    assert sess.spent() == pp.ApproxDP(2, 0)


def test_policy_bounds_where_doubles_are_integers() -> None:
    """Bounds (2^52, 2^52 + 3): the step is 1 (the doubles' spacing), 4 cells."""
    top = 2.0**52 + 3
    sess = _one_column([top] * 5 + [2.0**60], {"type": "float", "lower": 2**52, "upper": top})
    (mech,) = sess.explain("SELECT MEDIAN(x) AS m FROM t", epsilon=1).mechanisms
    assert mech.grid == (2**52, 2**52 + 3) and mech.step == 1
    with noise_disabled():
        assert sess.sql("SELECT MEDIAN(x) AS m FROM t", epsilon=1).df["m"][0] == top
    assert sess.spent() == pp.ApproxDP(1, 0)


def test_subnormal_bounds_are_refused_free() -> None:
    sess = _one_column([1.0], {"type": "float", "lower": 0, "upper": 5e-324})
    _refused_free(sess, "SELECT MEDIAN(x) FROM t", UnsupportedQueryError,
                  r"MEDIAN\(x\) refused: its bounds \[0.0, 5e-324\] hold a subnormal", epsilon=1)
    _refused_free(sess, "SELECT SUM(x) FROM t", UnsupportedQueryError,
                  "column 'x'.*beyond the range of a double", epsilon=1)


@pytest.mark.parametrize("agg, q, lo, hi", [
    ("VAR_POP", "", "0", "1e-310"),
    ("STDDEV_POP", "", "5e-324", "1e-320"),
    ("PERCENTILE_CONT", ", 0.5", "0", "5e-324"),
])
def test_subnormal_per_row_windows_are_refused_free(agg: str, q: str, lo: str, hi: str) -> None:
    """These ran (and were charged) and then failed in the engine or in privplan."""
    sess = _one_column([50.0] * 5, {"type": "float", "lower": 0, "upper": 100})
    _refused_free(sess, PER_ROW.format(agg=agg, q=q, lo=lo, hi=hi), UnsupportedQueryError,
                  "subnormal|beyond the range of a double")


def test_a_sum_grid_the_engine_cannot_scale_is_refused_free_and_on_load() -> None:
    sess = _one_column([1e-306], {"type": "float", "lower": 0, "upper": 1e-305})
    _refused_free(sess, "SELECT AVG(x) FROM t", UnsupportedQueryError,
                  r"scale values by about 1e311", epsilon=1)
    with noise_disabled():  # the quantile's grid is coarser: 1e-308 steps
        assert 0 <= sess.sql("SELECT MAX(x) AS m FROM t", epsilon=1).df["m"][0] <= 1e-305
    with pytest.raises(PolicyError, match="finite double"):
        _one_column([0.0], {"type": "float", "lower": 0, "upper": 1e-316,
                            "resolution": 1e-320})


def _random_bounds(rng: np.random.Generator) -> tuple[float, float]:
    """Float bounds of every kind: any magnitude (subnormal to 1e308), windows a few doubles
    wide, relatively narrow or wide, spanning 0 or not."""
    v = float(rng.uniform(1, 10) * 10.0 ** int(rng.integers(-330, 308)))
    v = -v if rng.random() < 0.3 else v
    shape = rng.integers(4)
    if shape == 0:  # a few doubles wide
        w = v
        for _ in range(int(rng.integers(0, 2000))):
            w = math.nextafter(w, math.inf)
        return v, w
    if shape == 1:  # relatively narrow
        return v, v + abs(v) * 10.0 ** -int(rng.integers(1, 17))
    if shape == 2:  # across 0
        return -abs(v) * float(rng.random()), abs(v)
    return min(v, 0.0), max(v, 0.0)


def _edges(lower: float, upper: float, rng: np.random.Generator) -> list[float]:
    out = [lower, upper, 0.0, -0.0, math.inf, -math.inf, 5e-324, -5e-324,
           1.7976931348623157e308, -1.7976931348623157e308, 2.0**53, 2.0**63, -(2.0**63)]
    for end in (lower, upper):
        for direction in (math.inf, -math.inf):
            x = end
            for _ in range(3):
                x = math.nextafter(x, direction)
                out.append(x)
    out += rng.uniform(lower, upper, 20).tolist() if math.isfinite(upper - lower) else []
    return out


@pytest.mark.parametrize("seed", range(3))
def test_every_cell_the_engine_computes_lies_on_the_grid(seed: int) -> None:
    """For random float bounds, the quantile's grid and the SUM's are either refused before
    the charge, or DuckDB (the judge) puts every value — bounds, their neighbouring doubles,
    infinities, NaN, extremes — in a cell within [lo, hi] (so the histogram's keys index the
    candidates), with at most 1,000 quantile cells."""
    from privplan.rewrite.engine_sql import grid_expression

    rng = np.random.default_rng(seed)
    judge = duckdb.connect()
    answered = 0
    for _ in range(40):
        lower, upper = _random_bounds(rng)
        try:
            sess = _one_column([], {"type": "float", "lower": lower, "upper": upper})
        except PolicyError:
            continue
        judge.register("edges", pd.DataFrame({"x": _edges(lower, upper, rng)}))
        # (pandas' NaN is read as NULL: NaN itself is added as DuckDB's)
        judge.execute("CREATE OR REPLACE TABLE v AS SELECT x FROM edges WHERE x IS NOT NULL "
                      "UNION ALL SELECT 'nan'::DOUBLE")
        for agg, most in (("MEDIAN", 1000), ("SUM", 1 << 23)):
            try:
                (mech,) = sess.explain(f"SELECT {agg}(x) FROM t", epsilon=1).mechanisms
            except (UnsupportedQueryError, PolicyError):
                continue
            lo, hi = mech.grid
            assert hi - lo + 1 <= most and max(abs(lo), abs(hi)) <= 2**53, (lower, upper)
            sql = grid_expression("x", Fraction(mech.step), lo, hi, "float")
            cells = [c for (c,) in judge.execute(f"SELECT {sql} FROM v").fetchall()]
            assert len(cells) > 20 and all(lo <= c <= hi for c in cells), (agg, lower, upper)
            answered += 1
        assert sess.spent() == pp.ApproxDP(0, 0)
    assert answered > 20
