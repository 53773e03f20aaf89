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
