"""With noise switched off (test-only hook), DP answers equal the plain SQL on clamped data."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled

CASES = [
    # (privplan query, plain SQL oracle over clamped data)
    ("SELECT COUNT(*) AS n FROM visits", "SELECT COUNT(*) AS n FROM visits"),
    ("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital",
     "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital"),
    ("SELECT department, SUM(length_of_stay) AS s FROM visits WHERE age < 18 "
     "GROUP BY department ORDER BY department",
     "SELECT department, SUM(LEAST(GREATEST(length_of_stay, 0), 30)) AS s FROM visits "
     "WHERE age < 18 GROUP BY department ORDER BY department"),
    ("SELECT sex, AVG(age) AS a FROM visits GROUP BY sex ORDER BY sex",
     "SELECT sex, AVG(age) AS a FROM visits GROUP BY sex ORDER BY sex"),
    ("SELECT COUNT(*) FILTER (WHERE insured) AS i, COUNT(*) FILTER (WHERE NOT insured) AS u "
     "FROM visits",
     "SELECT COUNT(*) FILTER (WHERE insured) AS i, COUNT(*) FILTER (WHERE NOT insured) AS u "
     "FROM visits"),
    ("SELECT SUM(CASE WHEN sex = 'F' THEN length_of_stay ELSE 0 END) AS f FROM visits",
     "SELECT SUM(CASE WHEN sex = 'F' THEN LEAST(length_of_stay, 30) ELSE 0 END) AS f "
     "FROM visits"),
    ("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital HAVING COUNT(*) > 5000 "
     "ORDER BY n DESC LIMIT 2",
     "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital HAVING COUNT(*) > 5000 "
     "ORDER BY n DESC LIMIT 2"),
    ("SELECT hospital, VAR_POP(age) AS v, STDDEV_SAMP(age) AS s FROM visits "
     "GROUP BY hospital ORDER BY hospital",
     "SELECT hospital, VAR_POP(age) AS v, STDDEV_SAMP(age) AS s FROM visits "
     "GROUP BY hospital ORDER BY hospital"),
    ("SELECT CASE WHEN age < 18 THEN 'child' ELSE 'adult' END AS band, COUNT(*) AS n "
     "FROM visits GROUP BY band ORDER BY band",
     "SELECT CASE WHEN age < 18 THEN 'child' ELSE 'adult' END AS band, COUNT(*) AS n "
     "FROM visits GROUP BY band ORDER BY band"),
    ("SELECT COUNT(*) AS n FROM visits WHERE hospital = 'A' UNION ALL "
     "SELECT COUNT(*) AS n FROM visits WHERE hospital = 'B'",
     "SELECT COUNT(*) AS n FROM visits WHERE hospital = 'A' UNION ALL "
     "SELECT COUNT(*) AS n FROM visits WHERE hospital = 'B'"),
    ("SELECT hospital, SUM(cost) / COUNT(*) AS per_visit FROM visits GROUP BY hospital "
     "ORDER BY hospital",
     "SELECT hospital, SUM(LEAST(GREATEST(cost, 0), 20000)) / COUNT(*) AS per_visit "
     "FROM visits GROUP BY hospital ORDER BY hospital"),
]


@pytest.mark.parametrize("query,oracle", CASES)
def test_noise_off_equals_plain_sql(session: pp.Session, demo_db, query: str, oracle: str) -> None:
    with noise_disabled():
        got = session.sql(query, epsilon=1.0).df
    con = duckdb.connect(str(demo_db), read_only=True)
    want = con.execute(oracle).df()
    con.close()
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for col in want.columns:
        g, w = got[col].to_numpy(), want[col].to_numpy()
        if np.issubdtype(np.asarray(w).dtype, np.number):
            # float sums are taken on the integer grid (resolution 0.01 for cost): tolerate that
            np.testing.assert_allclose(g.astype(float), w.astype(float), rtol=1e-9, atol=0.5)
        else:
            assert list(g) == list(w)


def test_public_domain_keys_appear_even_when_empty(session: pp.Session) -> None:
    with noise_disabled():
        df = session.sql("SELECT hospital, COUNT(*) AS n FROM visits WHERE hospital = 'A' "
                         "GROUP BY hospital ORDER BY hospital", epsilon=1.0).df
    assert list(df["hospital"]) == ["A", "B", "C", "D"]
    assert (df.loc[df.hospital != "A", "n"] == 0).all()
    assert df.loc[df.hospital == "A", "n"].iloc[0] > 0


def test_noise_is_added_by_default(session: pp.Session) -> None:
    a = session.sql("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital",
                    epsilon=0.1).df
    b = session.sql("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital",
                    epsilon=0.1).df
    assert not a["n"].equals(b["n"]), "two noisy answers should (almost surely) differ"
    assert isinstance(a, pd.DataFrame)


def test_nulls_stay_out_of_sums_with_a_nonzero_lower_bound() -> None:
    """Regression: a clamp must keep NULL as NULL (DuckDB's GREATEST(NULL, 5) is 5), or NULL rows
    would count toward SUM — outside the region the accountant was told (an under-charge)."""
    policy = pp.Policy.from_dict({"tables": {"t": {"columns": {
        "x": {"type": "int", "lower": 5, "upper": 100},
        "y": {"type": "float", "lower": -3.5, "upper": 7.25}}}}})
    df = pd.DataFrame({"x": [None, None, 10, 2, 500], "y": [None, 1.0, None, -10.0, 3.333]},
                      dtype="float64").astype({"x": "Int64"})
    sess = pp.connect(":memory:", policy=policy, budget=pp.PureDP(10))
    sess.register("t", df)
    with noise_disabled():
        res = sess.sql("SELECT SUM(x) AS sx, AVG(x) AS ax, SUM(y) AS sy, VAR_POP(y) AS vy, "
                       "COUNT(*) FILTER (WHERE x IS NULL) AS nulls FROM t", epsilon=1).df
    assert res["sx"].iloc[0] == 10 + 5 + 100
    assert res["ax"].iloc[0] == pytest.approx(115 / 3)
    assert res["sy"].iloc[0] == pytest.approx(1.0 - 3.5 + 3.333, abs=1e-6)
    ys = np.array([1.0, -3.5, 3.333])
    assert res["vy"].iloc[0] == pytest.approx(ys.var(), abs=0.05)
    assert res["nulls"].iloc[0] == 2
