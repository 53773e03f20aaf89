"""The two-level form of a quantile's per-group histogram (:mod:`privplan.engines.histograms`)
judged by DuckDB itself: the statements a session really sends (user-level bounding, public and
private keys, WHERE and FILTER, several quantiles next to other aggregates) are run as they are
and split into the two-level form rendered for DuckDB; both must give the same frame. (The
PostgreSQL and Spark renderings of the same form are checked against DuckDB in
``test_postgres_engine.py``, ``test_spark_engine.py`` and ``test_same_answers.py``.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import sqlglot

import privplan as pp
from privplan.engines.histograms import split_histograms


def _policy(m: int | None) -> pp.Policy:
    table: dict[str, Any] = {
        "privacy_unit": "pid", "max_rows_per_unit": 3,
        "columns": {
            "pid": {"type": "int"},
            "grp": {"type": "str", "public_values": ["a", "b", "c"]},
            "tag": {"type": "str"},
            "x": {"type": "int", "lower": -5, "upper": 10},
            "y": {"type": "float", "lower": -2.5, "upper": 7.25},
        },
    }
    if m is not None:
        table["max_groups_per_unit"] = m
    return pp.Policy.from_dict({"tables": {"t": table}})


def _data() -> pd.DataFrame:
    rng = np.random.Generator(np.random.PCG64(3))
    n = 400
    y = rng.normal(2, 5, n).round(2)
    y[::9] = np.nan
    x = rng.integers(-8, 14, n).astype(object)
    x[::11] = None
    grp = rng.choice(np.array(["a", "b", "c", "d", None], dtype=object), n)
    return pd.DataFrame({"pid": rng.integers(0, 60, n), "grp": grp,
                         "tag": rng.choice(np.array(["p", "q"], dtype=object), n),
                         "x": pd.array(x, dtype="Int64"), "y": y})


QUERIES = [
    "SELECT MEDIAN(y) AS m FROM t",
    "SELECT MEDIAN(y) AS m FROM t WHERE x > 100",
    "SELECT grp, MEDIAN(x) AS m, COUNT(*) AS n FROM t GROUP BY grp",
    ("SELECT grp, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY y) AS p, SUM(x) AS s, "
     "MEDIAN(x) FILTER (WHERE tag = 'p') AS mp FROM t WHERE y > 0 GROUP BY grp"),
    "SELECT tag, MAX(x) AS hi, MIN(y) AS lo FROM t GROUP BY tag",
]


@pytest.mark.parametrize("m", [None, 2])
@pytest.mark.parametrize("sql", QUERIES)
def test_two_level_histograms_equal_duckdbs(sql: str, m: int | None) -> None:
    sess = pp.connect(":memory:", policy=_policy(m), budget=pp.ApproxDP(100, 1e-3))
    sess.register("t", _data())
    ran: list[tuple[str, pd.DataFrame]] = []
    real_run = sess.engine.run

    def run(st: str) -> pd.DataFrame:
        ran.append((st, real_run(st)))
        return ran[-1][1]

    sess.engine.run = run  # type: ignore[method-assign]
    sess.sql(sql, epsilon=1, delta=1e-5)  # (a private key is released by partition selection)
    ((statement, want),) = ran
    assert "histogram(" in statement
    split = split_histograms(sqlglot.parse_one(statement, read="duckdb"), "duckdb")
    got = real_run(split.sql(dialect="duckdb"))
    sess.close()
    keys = [c for c in want.columns if c.startswith("__k")]
    assert list(got.columns) == list(want.columns)
    if keys:
        want = want.sort_values(keys, na_position="last").reset_index(drop=True)
        got = got.sort_values(keys, na_position="last").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    maps = [v for c in want.columns if c not in keys for v in want[c] if isinstance(v, dict)]
    assert maps or "x > 100" in sql  # (a histogram with rows was compared)


def test_statement_without_histograms_is_unchanged() -> None:
    tree = sqlglot.parse_one("SELECT k, COUNT(*) AS n FROM t GROUP BY k", read="duckdb")
    assert split_histograms(tree, "duckdb") is tree
