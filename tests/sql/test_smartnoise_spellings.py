"""SmartNoise SQL spellings: VAR(x), STD(x) and SELECT TOP n (issue: SQL coverage)."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.sql.parse import parse_statement
from privplan.testing import noise_disabled

POLICY = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
    "a": {"type": "str", "public_values": ["x", "y", "z"]},
    "x": {"type": "int", "lower": 0, "upper": 10}}}}})
DATA = pd.DataFrame({"a": ["x", "y", "y", "z", "y"], "x": [1, 2, 5, 7, 3]})


def _answer(sql: str) -> pd.DataFrame:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", DATA)
    with noise_disabled():
        return s.sql(sql, epsilon=1).df


@pytest.mark.parametrize(("smartnoise", "duckdb_sql"), [
    ("SELECT VAR(x) FROM t", "SELECT VARIANCE(x) AS \"VAR(x)\" FROM t"),
    ("SELECT std(x) AS s FROM t", "SELECT STDDEV(x) AS s FROM t"),
    ("SELECT a, VAR(x) AS v, STD(x) AS s FROM t GROUP BY a ORDER BY a",
     "SELECT a, VARIANCE(x) AS v, STDDEV(x) AS s FROM t GROUP BY a ORDER BY a"),
    ("SELECT TOP 2 a, COUNT(*) AS n FROM t GROUP BY a ORDER BY n DESC, a",
     "SELECT a, COUNT(*) AS n FROM t GROUP BY a ORDER BY n DESC, a LIMIT 2"),
    ("SELECT TOP 1 a, COUNT(*) AS n FROM t WHERE a <> 'TOP 3' GROUP BY a ORDER BY a",
     "SELECT a, COUNT(*) AS n FROM t WHERE a <> 'TOP 3' GROUP BY a ORDER BY a LIMIT 1"),
])
def test_spellings_answer_what_duckdb_answers(smartnoise: str, duckdb_sql: str) -> None:
    con = duckdb.connect()
    con.register("t", DATA)
    want = con.execute(duckdb_sql).df()
    got = _answer(smartnoise)
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT TOP 2 a, COUNT(*) FROM t GROUP BY a LIMIT 1", "TOP or LIMIT"),
    ("SELECT TOP x a, COUNT(*) FROM t GROUP BY a", "whole number of rows"),
])
def test_bad_top_is_refused(sql: str, message: str) -> None:
    with pytest.raises(pp.UnsupportedQueryError, match=message):
        _answer(sql)


def test_top_keeps_error_positions() -> None:
    sql = "SELECT TOP 5 a FROM t WHERE (("
    with pytest.raises(pp.ParseError, match=f"line 1, column {len(sql)}:"):
        parse_statement(sql)  # the error is at the last '(' of the text as written


def test_var_is_only_rewritten_as_a_call_of_one_argument() -> None:
    tree = parse_statement("SELECT var FROM t")
    assert tree.sql() == "SELECT var FROM t"
