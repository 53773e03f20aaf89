"""Prepared sessions (``connect(..., prepare=True)``): row-level tables are read from a session
copy whose bounded numeric columns were clamped to their SUM grids once.

Oracle: every supported query of ``sql_examples/`` (demo data and PUMS, all neighbourhoods and
budget kinds of the examples) answered in a prepared session and in a default one, with the
same seeded noise, gives identical frames, intervals and costs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from example_answers import answer_examples
from test_sql_examples import fmt  # the example-file format shared with the runner

import privplan as pp
from privplan.demo.data import write_demo_database
from privplan.testing import noise_disabled


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("prepared") / "demo.duckdb", rows=5_000)


def _reads_copy(statement: str) -> bool:
    """A session's own copy, or the process's (``privplan.engines.shared_copies``)."""
    return "__privplan_work_" in statement or "__privplan_shared_" in statement


@pytest.mark.parametrize("path", fmt.example_files(), ids=lambda p: p.name)
def test_prepared_session_answers_like_a_default_one(path: Path, demo_db: Path) -> None:
    example = fmt.parse_file(path)
    prepared, ran_prepared = answer_examples(example, demo_db, prepare=True)
    default, ran = answer_examples(example, demo_db)
    assert all(map(_reads_copy, ran_prepared)), "prepared: reads the copy"
    if example.dataset != "patients":  # (user level: every session reads a bounded copy)
        assert not any(map(_reads_copy, ran)), "default: never copies row level"
    for a, b in zip(prepared, default, strict=True):
        pd.testing.assert_frame_equal(a.df, b.df, check_exact=True, obj=path.name)
        pd.testing.assert_frame_equal(a.intervals, b.intervals, check_exact=True, obj=path.name)
        assert a.cost == b.cost and a.query_cost == b.query_cost


def test_prepared_sums_read_the_stored_grid_and_register_refreshes_the_copy() -> None:
    policy = pp.Policy.from_dict({"tables": {"t": {"columns": {
        "g": {"type": "str", "public_values": ["a", "b"]},
        "v": {"type": "float", "lower": 0, "upper": 10, "resolution": 0.5},
    }}}})
    sess = pp.connect(":memory:", policy=policy, budget=pp.PureDP(100), prepare=True)
    ran: list[str] = []
    real = sess.engine.run
    sess.engine.run = lambda st: ran.append(st) or real(st)  # type: ignore[method-assign]
    sql = "SELECT g, SUM(v) AS s FROM t GROUP BY g"
    sess.register("t", pd.DataFrame({"g": ["a", "a", "b", "b"], "v": [1.2, 99.0, None, -3.0]}))
    with noise_disabled():
        first = sess.sql(sql, epsilon=1).df
        # clamped on the 0.5 grid: 1.2 -> 1.0, 99 -> 10, NULL skipped, -3 -> 0
        assert first["s"].tolist() == [11.0, 0.0]
        assert "SUM(__grid_v)" in ran[-1]
        sess.register("t", pd.DataFrame({"g": ["a", "b"], "v": [2.0, 4.4]}))
        assert sess.sql(sql, epsilon=1).df["s"].tolist() == [2.0, 4.5]  # a fresh copy
    sess.close()
