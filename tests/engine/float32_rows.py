"""A FLOAT (REAL) column compared with a decimal constant, on DuckDB and on a remote engine.

Found by the remote disjointness oracle's harness: ``f = 0.1`` on a 32-bit float column compared
in float32 on DuckDB (the constant rounded to the column's type: the float32 0.1 matched) and in
double on PostgreSQL and Spark (no match). The typed view reads such a column as a DOUBLE on
every engine (:mod:`privplan.planning.typed_view`), so both count alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pandas as pd

import privplan as pp
from privplan.testing import noise_disabled

POLICY = {"tables": {"real_t": {"privacy_unit": "row", "neighbourhood": "add_remove",
                                "columns": {"f": {"type": "float"}}}}}
QUERY = "SELECT COUNT(*) AS n FROM real_t WHERE f = 0.1 OR f = 1e0"


def float32_counts(remote: Any, load: Callable[[str, pd.DataFrame, dict[str, str]], None],
                   stored: str) -> list[int]:
    """QUERY's exact count (noise off) over the rows (float32 0.1, 1.0) in a ``stored``
    column, on an in-memory DuckDB and on ``remote`` (loaded by ``load``)."""
    frame = pd.DataFrame({"f": [float(np.float32(0.1)), 1.0]}, dtype=object)
    load("real_t", frame, {"f": stored})
    con = duckdb.connect(":memory:")
    con.execute(f"CREATE TABLE real_t (f {stored})")
    con.execute("INSERT INTO real_t VALUES (0.1), (1.0)")
    counts = []
    try:
        for database in (con, remote):
            with pp.connect(database, policy=POLICY, budget=pp.PureDP(10)) as sess, (
                    noise_disabled()):
                got = sess.sql(QUERY, epsilon=1.0)
                counts.append(int(got.df["n"].iloc[0]))
    finally:
        con.close()
    return counts
