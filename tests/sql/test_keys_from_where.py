"""Group keys named by the query (Tumult's KeySet, in SQL; issue: SQL coverage).

`WHERE b IN ('p', 'q') ... GROUP BY b`: the released keys are the listed values, fixed by the
query text, so they need no partition selection (no δ) and are zero-filled like a public
domain."""

from __future__ import annotations

import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled

POLICY = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
    "b": {"type": "str"}, "d": {"type": "date"},
    "x": {"type": "int", "lower": 0, "upper": 10}}}}})
DATA = pd.DataFrame({"b": ["p", "q", "r", "p"], "x": [1, 2, 3, 4],
                     "d": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-01",
                                          "2024-01-03"]).date})


def _session() -> pp.Session:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", DATA)
    return s


@pytest.mark.parametrize(("sql", "want"), [
    ("SELECT b, COUNT(*) AS n FROM t WHERE b IN ('p', 'zz') GROUP BY b ORDER BY b",
     {"b": ["p", "zz"], "n": [2, 0]}),
    ("SELECT b, SUM(x) AS n FROM t WHERE b = 'q' OR (b = 'r' AND x > 1) GROUP BY b ORDER BY b",
     {"b": ["q", "r"], "n": [2, 3]}),
    ("SELECT d, COUNT(*) AS n FROM t WHERE d IN (DATE '2024-01-01', DATE '2024-01-05') "
     "GROUP BY d ORDER BY d", {"d": [pd.Timestamp("2024-01-01").date(),
                                     pd.Timestamp("2024-01-05").date()], "n": [2, 0]}),
    # integers: the region keeps IN (1, 2, 3) as the interval [1, 3]; its integers are listed
    ("SELECT x, COUNT(*) AS n FROM t WHERE x IN (1, 2, 3, 7) GROUP BY x ORDER BY x",
     {"x": [1, 2, 3, 7], "n": [1, 1, 1, 0]}),
    ("SELECT x, COUNT(*) AS n FROM t WHERE x > 1.5 AND x < 4 GROUP BY x ORDER BY x",
     {"x": [2, 3], "n": [1, 1]}),
    ("SELECT x, COUNT(*) AS n FROM t WHERE x BETWEEN 3 AND 5 AND x <> 4 GROUP BY x ORDER BY x",
     {"x": [3, 5], "n": [1, 0]}),
])
def test_listed_keys_are_released_zero_filled_under_pure_dp(sql: str, want: dict) -> None:
    s = _session()
    with noise_disabled():
        r = s.sql(sql, epsilon=1)
    got = r.df.to_dict("list")
    if "d" in got:
        got["d"] = [pd.Timestamp(v).date() for v in got["d"]]
    assert got == want
    assert r.cost == pp.PureDP(1)
    assert not any("partition selection" in m.label for m in r.explanation.mechanisms)


def test_disjoint_key_lists_compose_in_parallel() -> None:
    s = _session()
    s.sql("SELECT b, COUNT(*) FROM t WHERE b IN ('p', 'q') GROUP BY b", epsilon=1)
    assert s.sql("SELECT b, COUNT(*) FROM t WHERE b IN ('r') GROUP BY b",
                 epsilon=1).cost == pp.PureDP(0)


def test_keys_not_all_listed_still_need_partition_selection() -> None:
    s = _session()
    with pytest.raises(pp.UnsupportedQueryError, match="partition selection"):
        s.sql("SELECT b, COUNT(*) FROM t WHERE b IN ('p') OR x > 1 GROUP BY b", epsilon=1)
    assert s.spent() == pp.PureDP(0)


@pytest.mark.parametrize("where", ["x > 1", "x IN (1, 2) OR x > 5",
                                   "x >= 0 AND x <= 200000"])  # unbounded, or too many
def test_integer_ranges_without_a_short_list_need_partition_selection(where: str) -> None:
    s = _session()
    with pytest.raises(pp.UnsupportedQueryError, match="partition selection"):
        s.sql(f"SELECT x, COUNT(*) FROM t WHERE {where} GROUP BY x", epsilon=1)
    assert s.spent() == pp.PureDP(0)


def test_a_computed_key_listed_by_where_is_released_zero_filled() -> None:
    """`WHERE x % 3 IN (0, 2) ... GROUP BY x % 3`: rows with another key fail WHERE, so the
    released keys are the listed literals (no partition selection), as DuckDB groups them."""
    s = _session()
    with noise_disabled():
        r = s.sql("SELECT x % 3 AS k, COUNT(*) AS n FROM t WHERE x % 3 IN (0, 2, 5) "
                  "GROUP BY x % 3 ORDER BY k", epsilon=1)
    assert r.df.to_dict("list") == {"k": [0, 2, 5], "n": [1, 1, 0]}  # x = 3; x = 2; none
    assert r.cost == pp.PureDP(1)


def test_current_date_is_one_public_constant_and_not_analysed() -> None:
    """CURRENT_DATE is allowed (the day the statement runs is public); a predicate on it is
    not folded into a region, so its mechanism keeps the conservative whole domain."""
    s = _session()
    with noise_disabled():
        r = s.sql("SELECT COUNT(*) AS n FROM t WHERE d < current_date AND b = 'p'", epsilon=1)
    assert r.df["n"].tolist() == [2]
    (m,) = r.explanation.mechanisms
    assert m.region == "b = 'p'"
    assert any("CURRENT_DATE" in n for n in m.notes)
    with pytest.raises(pp.UnsupportedQueryError, match="non-deterministic"):
        s.sql("SELECT COUNT(*) FROM t WHERE d < now()", epsilon=1)
