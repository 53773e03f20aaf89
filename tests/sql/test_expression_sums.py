"""SUM/AVG/VAR over arithmetic expressions of bounded columns (issue: SQL coverage).

The oracle is DuckDB over the same rows with each column clamped to its declared bounds
(what privplan computes, noise off); the bounds are the interval-arithmetic ones, checked
against every combination of the columns' end points."""

from __future__ import annotations

import itertools
from fractions import Fraction

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.policy import Policy
from privplan.sql.expression_bounds import NotBoundable, bound_expression
from privplan.sql.parse import parse_statement
from privplan.testing import noise_disabled

POLICY = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
    "a": {"type": "str", "public_values": ["x", "y"]},
    "p": {"type": "float", "lower": -2, "upper": 10},
    "q": {"type": "int", "lower": 1, "upper": 5},
    "s": {"type": "str"}}}}})
# (DuckDB's GREATEST/LEAST skip NULLs, so NULL is kept explicitly)
CLAMPED = ("(SELECT a, CASE WHEN p IS NOT NULL THEN LEAST(GREATEST(CAST(p AS DOUBLE), -2), 10) "
           "END AS p, CASE WHEN q IS NOT NULL THEN LEAST(GREATEST(CAST(q AS DOUBLE), 1), 5) "
           "END AS q FROM t) AS t")


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    p = rng.uniform(-4, 12, 400).round(2)
    p[::23] = np.nan
    q = pd.array(rng.integers(-1, 8, 400), dtype="Int64")
    q[5::31] = pd.NA
    return pd.DataFrame({"a": rng.choice(["x", "y"], 400), "p": p, "q": q, "s": "u"})


@pytest.mark.parametrize("agg", ["SUM(p * q)", "SUM(p - 2 * q)", "AVG(p * q + 1)",
                                 "AVG(-(p) / 4)", "VAR_POP((p + q) / 2)", "SUM(q * q - p)"])
def test_noise_free_equals_duckdb_over_clamped_columns(agg: str) -> None:
    df = _data()
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", df)
    sql = f"SELECT a, {agg} AS v FROM t GROUP BY a ORDER BY a"
    with noise_disabled():
        got = s.sql(sql, epsilon=1).df["v"].to_numpy(dtype=float)
    con = duckdb.connect()
    con.register("t", df)
    want = con.execute(sql.replace("FROM t", f"FROM {CLAMPED}")).df()["v"].to_numpy(float)
    # SUM values are rounded to the expression's grid (a step of at most 1e-5 here)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-2)


@pytest.mark.parametrize("text", ["p * q", "p - 2 * q", "(p + q) / 2", "-(p) * q - q",
                                  "q * q - p", "p * p", "3 - p / -4"])
def test_bounds_hold_every_combination_of_end_points(text: str) -> None:
    """The interval holds the expression at every corner of the box (and, being the
    interval of +, -, * and / of intervals, everywhere inside it)."""
    cols = Policy.from_dict(POLICY.to_dict()).table("t").columns
    b = bound_expression(parse_statement(f"SELECT {text}").expressions[0], cols)
    for pv, qv in itertools.product([-2, 0, 4, 10], [1, 3, 5]):
        value = eval(text, {"p": Fraction(pv), "q": Fraction(qv)})
        assert b.lower <= value <= b.upper, (text, pv, qv, value, b)


@pytest.mark.parametrize(("text", "why"), [
    ("p * s", "no declared numeric bounds"), ("p / q", "non-zero number only"),
    ("p / 0", "non-zero number only"), ("abs(p)", r"is not \+, -, \* or /")])
def test_what_interval_arithmetic_does_not_cover_is_refused(text: str, why: str) -> None:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", _data())
    with pytest.raises(pp.UnsupportedQueryError, match=why):
        s.sql(f"SELECT SUM({text}) FROM t", epsilon=1)
    assert s.spent() == pp.PureDP(0)
    with pytest.raises(NotBoundable):
        bound_expression(parse_statement(f"SELECT {text}").expressions[0],
                         POLICY.table("t").columns)


def test_sensitivity_is_the_expression_range() -> None:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", _data())
    (m,) = s.explain("SELECT SUM(p * q) FROM t", epsilon=1).mechanisms
    assert m.sensitivity_in_units == pytest.approx(50)  # p*q in [-10, 50]: max |.| = 50
