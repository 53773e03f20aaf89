"""A bool GROUP BY key's public domain is {False, True}, plus NULL only when the column can hold
NULL by its schema (the policy's `nullable`, the engine's NOT NULL, the frame's dtype) — never
because of what the rows hold (issue: the first hour; a phantom `<NA>` group for the demo's
`insured`, pure noise on a group that cannot exist)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.testing import noise_disabled


def _keys(out: pd.DataFrame, column: str) -> list[Any]:
    return sorted(((None if pd.isna(v) else bool(v)) for v in out[column]),
                  key=lambda v: (v is not None, v))


def _frame_keys(flag: Any, case: int = 0) -> list[Any]:
    # (distinct rows per frame: df.dp recognises a frame configured before by its content)
    frame = pd.DataFrame({"flag": flag, "x": np.arange(len(flag)) % 5, "case": case})
    frame.dp.configure(bounds={"x": (0, 5)}, budget=pp.PureDP(1))
    with noise_disabled():
        out = frame.dp.count(by="flag", epsilon=0.5)
    assert frame.dp.spent() == pp.PureDP(0.5)
    return _keys(out, "flag")


def test_numpy_bool_frame_has_no_null_group() -> None:
    assert _frame_keys(np.array([True, False, True] * 20), case=3) == [False, True]


@pytest.mark.invariant(2)
def test_pandas_boolean_keeps_its_null_group_with_or_without_na() -> None:
    """The 'boolean' dtype can hold NA, so NULL is in the domain whether or not the rows hold
    one (a domain that followed the rows would tell whether a NULL is there)."""
    without = pd.array([True, False, True] * 20, dtype="boolean")
    with_na = pd.array([True, None, False] * 20, dtype="boolean")
    assert _frame_keys(without, case=2) == [None, False, True]
    assert _frame_keys(with_na, case=1) == [None, False, True]


def _duckdb_keys(tmp_path: Path, policy_col: dict[str, Any], rows: str) -> dict[str, list[Any]]:
    db = tmp_path / "b.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t (strict BOOLEAN NOT NULL, loose BOOLEAN, text_flag VARCHAR "
                "NOT NULL)")
    con.execute(f"INSERT INTO t VALUES {rows}")
    con.close()
    policy = {"tables": {"t": {"columns": {
        "strict": dict(policy_col), "loose": dict(policy_col),
        "text_flag": {"type": "bool"}}}}}
    session = pp.connect(db, policy=policy, budget=pp.PureDP(10))
    try:
        with noise_disabled():
            return {c: _keys(session.sql(f"SELECT {c}, COUNT(*) AS n FROM t GROUP BY {c}",
                                         epsilon=1).df, c)
                    for c in ("strict", "loose", "text_flag")}
    finally:
        session.close()


@pytest.mark.invariant(2)
@pytest.mark.parametrize("rows", ["(true, true, 'true'), (false, false, 'false')",
                                  "(true, NULL, 'true'), (false, false, 'false')"])
def test_duckdb_not_null_schema_drops_the_null_group(tmp_path: Path, rows: str) -> None:
    keys = _duckdb_keys(tmp_path, {"type": "bool"}, rows)
    assert keys["strict"] == [False, True], "BOOLEAN NOT NULL: no NULL group"
    assert keys["loose"] == [None, False, True], "nullable BOOLEAN: NULL group, NULLs or not"
    # a VARCHAR NOT NULL read as bool goes through TRY_CAST, which can make NULL: kept
    assert keys["text_flag"] == [None, False, True]


def test_policy_nullable_false_drops_the_null_group(tmp_path: Path) -> None:
    keys = _duckdb_keys(tmp_path, {"type": "bool", "nullable": False},
                        "(true, true, 'true'), (false, false, 'false')")
    assert keys["strict"] == keys["loose"] == [False, True]


def test_demo_frame_has_no_phantom_group_and_agrees_with_sql(tmp_path: Path) -> None:
    """The review's case: ``df.dp.sum("cost", by=["hospital", "insured"])`` over the demo's
    visits as a frame (a numpy bool column: it cannot hold NA) has two groups per hospital, no
    ``<NA>`` group of pure noise, and the same numbers as SQL over the demo database with noise
    off. The database's column is a nullable BOOLEAN, so SQL keeps its NULL group (the schema
    allows it; sql_examples/02 shows it), whatever the rows hold."""
    db = write_demo_database(tmp_path / "demo.duckdb", rows=2_000)
    session = pp.connect(db, policy=demo_policy_path(), budget=pp.PureDP(10))
    with noise_disabled():
        via_sql = session.sql("SELECT hospital, insured, SUM(cost) AS cost FROM visits "
                              "GROUP BY hospital, insured", epsilon=1).df
    session.close()
    frame = duckdb.connect(str(db), read_only=True).sql("SELECT * FROM visits").df()
    assert frame["insured"].dtype == np.bool_
    frame.dp.configure(policy=demo_policy_path(), table="visits", budget=pp.PureDP(10))
    with noise_disabled():
        via_frame = frame.dp.sum("cost", by=["hospital", "insured"], epsilon=1)
    assert not via_frame["insured"].isna().any() and len(via_frame) == 8
    assert via_sql["insured"].isna().sum() == 4 and len(via_sql) == 12
    pd.testing.assert_frame_equal(
        via_frame[["hospital", "insured", "cost"]].sort_values(["hospital", "insured"])
        .reset_index(drop=True),
        via_sql[via_sql["insured"].notna()].sort_values(["hospital", "insured"])
        .reset_index(drop=True), check_dtype=False)
