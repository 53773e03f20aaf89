"""The DuckDB engine runs the relation bind() made for a statement before the charge, unless
the engine's generation moved since (``DuckDBEngine.run``): the same frame as executing the
text, the statement parsed and bound once; after a change the session can see (a table
registered again) the text is executed afresh and reads the new rows."""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

import privplan as pp
from privplan.engines.duckdb_engine import DuckDBEngine
from privplan.testing import noise_disabled


class _Counting:
    """A DuckDB connection counting the statements executed from their text."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con, self.executed = con, []

    def execute(self, text: str, *args: Any) -> Any:
        self.executed.append(text)
        return self._con.execute(text, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def test_run_reads_the_relation_bind_made_unless_the_engine_moved() -> None:
    engine = DuckDBEngine(":memory:")
    sql = 'SELECT COUNT(*) AS c, SUM("v") AS s, MIN("w") AS w FROM "bound"'
    try:
        engine.register("bound", pd.DataFrame({"v": [1, 2, 3], "w": ["b", "a", "c"]}))
        expected = engine.run(sql)  # (never bound: executed from its text)
        counting = _Counting(engine.con)
        engine.con = counting  # type: ignore[assignment]
        assert engine.bind(sql) == [("c", "BIGINT"), ("s", "HUGEINT"), ("w", "VARCHAR")]
        got = engine.run(sql)
        assert counting.executed == []  # (the bound relation ran)
        pd.testing.assert_frame_equal(got, expected)  # (same values, same dtypes)
        engine.bind(sql)
        engine.con = counting._con  # type: ignore[assignment]
        engine.register("bound", pd.DataFrame({"v": [10, 20], "w": ["z", "y"]}))  # (moves)
        engine.con = counting  # type: ignore[assignment]
        assert engine.run(sql).values.tolist() == [[2, 30, "y"]]
        assert counting.executed == [sql]  # (executed afresh: the generation moved)
        engine.run(sql)
        assert counting.executed == [sql, sql]  # (a relation runs once: run again, executed)
    finally:
        engine.con = getattr(engine.con, "_con", engine.con)  # type: ignore[assignment]
        engine.close()


def test_answers_are_the_text_executed_answers() -> None:
    """A caller's connection (bound again before every charge): each answer, noise off, equals
    the plain query's, a session's relations run where they were bound."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i % 3 AS g, i AS x FROM range(100) r(i)")
    policy = {"tables": {"t": {"privacy_unit": "row", "columns": {
        "g": {"type": "int", "public_values": [0, 1, 2]},
        "x": {"type": "int", "lower": 0, "upper": 99}}}}}
    with pp.connect(con, policy=policy, budget=pp.PureDP(10)) as sess, noise_disabled():
        for _ in range(2):  # (the second: the plan cache's reuse binds again, then runs)
            got = sess.sql("SELECT g, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY g ORDER BY g",
                           epsilon=1).df
            want = con.execute("SELECT g, COUNT(*), SUM(x) FROM t GROUP BY g ORDER BY g").fetchall()
            assert [tuple(r) for r in got.itertuples(index=False)] == [
                (g, n, float(s)) for g, n, s in want]
    con.close()
