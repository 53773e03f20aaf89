"""A default session computes grid values in its statement; a prepared one reads them stored.

The two must sum the same integers (noise off: the same answers), also where the grid is
tricky: values out of bounds, infinities, NULLs, a FILTER (a centred sum is ``SUM(g - c)`` in
one, ``SUM(g) - c * COUNT(g)`` in the other). And a default DuckDB session says once, in an
INFO log, that it computes grids per statement (a query without a grid does not trigger it).
"""

from __future__ import annotations

import logging
import math

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled

POLICY = {"tables": {"t": {"privacy_unit": "row", "columns": {
    "g": {"type": "str", "public_values": ["a", "b"]},
    "x": {"type": "float", "lower": -10, "upper": 30, "resolution": 0.5},
    "n": {"type": "int", "lower": 0, "upper": 7}}}}}

QUERIES = [
    "SELECT g, AVG(x) AS v FROM t GROUP BY g ORDER BY g",
    "SELECT g, AVG(n) AS v FROM t GROUP BY g ORDER BY g",
    "SELECT g, VAR_POP(x) AS v FROM t GROUP BY g ORDER BY g",
    "SELECT g, AVG(x) FILTER (WHERE n > 2) AS v FROM t GROUP BY g ORDER BY g",
    "SELECT g, SUM(x) AS v FROM t GROUP BY g ORDER BY g",
]


def _rows() -> pd.DataFrame:
    xs = [-1e308, -11.0, -10.25, -0.75, 0.25, 1.25, 2.75, 29.75, 30.25, 1e300, math.inf,
          -math.inf, math.nan, None, 7.5, 12.0]
    ns = [None, -3, 0, 1, 2, 3, 4, 7, 8, 2**40, 5, 6, 3, 4, None, 1]
    return pd.DataFrame({"g": ["a", "b"] * (len(xs) // 2), "x": xs,
                         "n": pd.array(ns, dtype="Int64")})


def _session(prepare: bool | None) -> pp.Session:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(1e6), prepare=prepare)
    s.register("t", _rows())
    return s


def _on_grid() -> duckdb.DuckDBPyConnection:
    """The rows with x and n put on their grids by an independent spelling (round half to
    even of 2x, then clamped; NaN above every number; NULL stays NULL), in plain DuckDB."""
    con = duckdb.connect()
    con.register("raw", _rows())
    con.execute("""CREATE TABLE t AS SELECT g, n AS n_raw,
        CASE WHEN x IS NULL THEN NULL WHEN isnan(x) THEN 30
             ELSE least(greatest(round_even(x * 2, 0), -20), 60) / 2 END AS x,
        CASE WHEN n IS NULL THEN NULL ELSE least(greatest(n, 0), 7) END AS n FROM raw""")
    return con


@pytest.mark.parametrize("sql", QUERIES)
def test_default_and_prepared_sessions_answer_as_the_grid_values(sql: str) -> None:
    with noise_disabled():
        default = _session(False).sql(sql, epsilon=1).df
        prepared = _session(True).sql(sql, epsilon=1).df
    pd.testing.assert_frame_equal(default, prepared)
    want = _on_grid().execute(sql.replace("n > 2", "n_raw > 2")).df()["v"].to_numpy(float)
    np.testing.assert_allclose(default["v"].to_numpy(float), want, rtol=1e-12)


def test_a_default_session_says_once_that_it_computes_grids(
        caplog: pytest.LogCaptureFixture) -> None:
    note = "onto its SUM grid in each statement"
    s = _session(None)  # (the default; a registered DataFrame is never copied on its own)
    with caplog.at_level(logging.INFO, logger="privplan"):
        s.sql("SELECT COUNT(*) FROM t", epsilon=1)
        assert note not in caplog.text  # (a COUNT computes no grid)
        s.sql("SELECT AVG(x) FROM t", epsilon=1)
        s.sql("SELECT SUM(n) FROM t", epsilon=1)
    assert caplog.text.count(note) == 1
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="privplan"):
        _session(True).sql("SELECT AVG(x) FROM t", epsilon=1)
    assert note not in caplog.text
