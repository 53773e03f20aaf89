"""Result's DuckDB-style accessors and the interval columns (issue: one answer shape)."""

from __future__ import annotations

import pandas as pd
import polars
import pyarrow as pa

import privplan as pp
from privplan.testing import noise_disabled

POLICY = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
    "a": {"type": "str", "public_values": ["x", "y"]},
    "x": {"type": "int", "lower": 0, "upper": 10}}}}})


def _result() -> pp.Result:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", pd.DataFrame({"a": ["x", "y", "y"] * 10, "x": [1, 2, 5] * 10}))
    with noise_disabled():
        return s.sql("SELECT a, COUNT(*) AS n, AVG(x) AS m FROM t GROUP BY a ORDER BY a",
                     epsilon=1)


def test_df_is_a_frame_and_a_call() -> None:
    r = _result()
    assert isinstance(r.df, pd.DataFrame) and r.df() is r.df
    assert type(r.df.head()) is pd.DataFrame  # operations give plain frames
    assert r.df.to_dict("list") == {"a": ["x", "y"], "n": [10, 20], "m": [1.0, 3.5]}


def test_fetch_arrow_polars() -> None:
    r = _result()
    assert r.fetchall() == [("x", 10, 1.0), ("y", 20, 3.5)]
    assert r.fetchone() == ("x", 10, 1.0)
    table = r.arrow()
    assert isinstance(table, pa.Table) and table.column_names == ["a", "n", "m"]
    assert table.to_pydict() == {"a": ["x", "y"], "n": [10, 20], "m": [1.0, 3.5]}
    frame = r.pl()
    assert isinstance(frame, polars.DataFrame) and frame["n"].to_list() == [10, 20]


def test_with_intervals_puts_each_interval_after_its_column() -> None:
    r = _result()
    out = r.with_intervals()
    assert list(out.columns) == ["a", "n", "n_low", "n_high", "m", "m_low", "m_high"]
    assert (out["n_low"] <= out["n"]).all() and (out["n"] <= out["n_high"]).all()
    half = r.accuracy["n"].halfwidth
    assert out["n_high"].tolist() == [v + half for v in out["n"].tolist()]
