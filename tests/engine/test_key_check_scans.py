"""The key check must not make DuckDB read the private rows twice.

``COUNT(*) OVER (PARTITION BY keys)`` over a GROUP BY is rewritten by DuckDB's
``window_self_join`` optimizer into a second aggregation of the same input: the private table
scanned (or the user-level bounding run) twice. Statements without the public-domain join put
their groups in a MATERIALIZED CTE first (``engine_sql.engine_statement``).

Oracles, both from DuckDB itself: its plan of each statement the session runs scans the table
once, while the unfenced statement (the check as it was) scans it twice, so the test sees the
rewrite it defends against; and both statements return the same rows.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.rewrite.engine_sql import with_key_check

ROW_POLICY = {"tables": {"t": {"privacy_unit": "row", "columns": {
    "g": {"type": "str"}, "h": {"type": "str", "public_values": ["x", "y"]},
    "v": {"type": "int", "lower": 0, "upper": 10}}}}}
UNIT_POLICY = {"tables": {"t": {"privacy_unit": "pid", "max_rows_per_unit": 3, "columns": {
    "pid": {"type": "int"}, "g": {"type": "str"},
    "h": {"type": "str", "public_values": ["x", "y"]},
    "v": {"type": "int", "lower": 0, "upper": 10}}}}}


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 3000
    return pd.DataFrame({"pid": rng.integers(0, 400, n), "g": rng.choice(list("abcd"), n),
                         "h": rng.choice(["x", "y"], n), "v": rng.integers(0, 11, n)})


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DuckDB file holding the table (its scans are named in DuckDB's plans)."""
    path = tmp_path_factory.mktemp("scans") / "t.duckdb"
    con = duckdb.connect(str(path))
    frame = _data()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.close()
    return path


def _scans(con: object, sql: str) -> int:
    """How many times DuckDB's plan of ``sql`` scans the table ``t``."""
    plan = con.execute("EXPLAIN " + sql).fetchall()[0][1]  # type: ignore[attr-defined]
    return len(re.findall(r"Table: (?:\w+\.)*t\b", plan))


def _unfenced(stmt: str) -> str:
    """The same statement with the key check written as before (a subquery)."""
    match = re.fullmatch(r"WITH __released AS MATERIALIZED \((.*)\) (SELECT \*, COUNT\(\*\) "
                         r"OVER \(PARTITION BY ([^)]*)\) AS \S+ FROM )__released", stmt,
                         re.DOTALL)
    assert match, stmt[:200]
    return with_key_check(match.group(1), len(match.group(3).split(",")))


@pytest.mark.parametrize(("policy", "sql", "rewritten"), [
    (ROW_POLICY, "SELECT g, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY g", True),
    (ROW_POLICY, "SELECT g, h, AVG(v) AS a FROM t GROUP BY g, h", True),
    # (the bounding subquery, a window itself, is not rewritten; a session reading a
    # prepared copy of the bounded rows aggregates the copy directly, as above)
    (UNIT_POLICY, "SELECT g, COUNT(*) AS n FROM t GROUP BY g", False),
])
def test_selected_groups_read_the_table_once(policy: dict, sql: str, rewritten: bool,
                                             db: Path) -> None:
    sess = pp.connect(db, policy=pp.Policy.from_dict(policy), budget=pp.ApproxDP(10, 1e-3))
    try:
        _, statements = sess.plan(sql, {"epsilon": 1, "delta": 1e-6})
        con = sess.engine.con
        for stmt in statements:
            assert stmt.startswith("WITH __released AS MATERIALIZED"), stmt[:120]
            plain = _unfenced(stmt)
            assert _scans(con, stmt) == 1, con.execute("EXPLAIN " + stmt).fetchall()[0][1]
            if rewritten:
                assert _scans(con, plain) == 2  # (the rewrite is real: the test can fail)
            got = con.execute(stmt).df()
            keys = [c for c in got.columns if c.startswith("__k")]
            got = got.sort_values(keys, ignore_index=True)
            want = con.execute(plain).df().sort_values(keys, ignore_index=True)
            pd.testing.assert_frame_equal(got, want, check_exact=True)
    finally:
        sess.close()


def test_public_groups_keep_the_subquery(db: Path) -> None:
    """With the public-domain join on top DuckDB does not rewrite: no CTE, one scan."""
    sess = pp.connect(db, policy=pp.Policy.from_dict(ROW_POLICY), budget=pp.ApproxDP(10, 1e-3))
    try:
        _, statements = sess.plan("SELECT h, COUNT(*) AS n FROM t GROUP BY h", {"epsilon": 1})
        assert not statements[0].startswith("WITH")
        assert _scans(sess.engine.con, statements[0]) == 1
    finally:
        sess.close()
