"""Spark's one-aggregation statement (:func:`privplan.rewrite.statement.one_aggregation`): a
grouped query over a public key domain runs as one GROUP BY over the private rows and the
domain's rows, with the same exact answers as DuckDB's joined statement over the same rows
(edge keys: NULL, case and accents, NaN; empty groups), as many exchanges as the plain query,
and a per-key count that still sees a key the domain holds twice."""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.errors import InternalError
from privplan.planning.engine_semantics import check_one_row_per_key
from privplan.rewrite.engine_sql import DUPLICATES
from privplan.rewrite.statement import SOURCE
from privplan.testing import noise_disabled
from tests.servers.spark_session import arrow_table, load_frame

pytest.importorskip("pyarrow")

NAN = float("nan")
TYPES = {"k": "VARCHAR", "b": "BOOLEAN", "x": "DOUBLE", "n": "BIGINT"}
ROWS = [("a", True, 1.5, 3), ("A", False, NAN, 4), ("é", None, -0.0, None), (None, True, 2.25, 7),
        ("zz", False, float("inf"), 1), ("a", None, None, 100), ("A", True, -3.0, 0)]
POLICY = {"tables": {"t": {"columns": {
    "k": {"type": "str", "public_values": ["a", "A", "é", "b"]},
    "b": {"type": "bool"},
    "x": {"type": "float", "lower": -5, "upper": 5},
    "n": {"type": "int", "lower": 0, "upper": 50},
}}}}
QUERIES = [
    "SELECT k, COUNT(*) AS c, SUM(x) AS s, AVG(n) AS a FROM t GROUP BY k",
    "SELECT b, COUNT(x) AS c, SUM(n) AS s FROM t WHERE x > 0 OR n > 3 GROUP BY b",
    "SELECT k, b, COUNT(*) FILTER (WHERE n > 2) AS c, VARIANCE(x) AS v FROM t GROUP BY k, b",
]


@pytest.fixture(scope="module")
def sessions(spark: Any) -> Any:
    """(Spark session, DuckDB session, the Spark statements run) over the same rows."""
    frame = pd.DataFrame(ROWS, columns=list(TYPES), dtype=object)
    load_frame(spark, "t", frame, TYPES)
    con = duckdb.connect(":memory:")
    con.register("t_arrow", arrow_table(frame, TYPES))
    con.execute('CREATE TABLE "t" AS SELECT * FROM t_arrow')
    con.unregister("t_arrow")
    on_spark = pp.connect(spark, policy=POLICY, budget=pp.PureDP(1e6))
    on_duckdb = pp.connect(con, policy=POLICY, budget=pp.PureDP(1e6))
    seen: list[str] = []
    real = on_spark.engine.run
    on_spark.engine.run = lambda sql: (seen.append(sql), real(sql))[1]
    yield on_spark, on_duckdb, seen
    on_spark.close()
    on_duckdb.close()
    con.close()


def _rows(frame: pd.DataFrame) -> list[tuple[str, ...]]:
    return sorted(tuple(repr(v) for v in row) for row in frame.itertuples(index=False))


@pytest.mark.parametrize("query", QUERIES)
def test_same_exact_answers_as_duckdb(query: str, sessions: Any) -> None:
    on_spark, on_duckdb, seen = sessions
    seen.clear()
    with noise_disabled():
        got = on_spark.sql(query, epsilon=1).df
        want = on_duckdb.sql(query, epsilon=1).df
    assert any(SOURCE in sql for sql in seen), seen  # (the one aggregation ran)
    assert list(got.dtypes) == list(want.dtypes)
    assert _rows(got) == _rows(want)


def _exchanges(spark: Any, sql: str) -> int:
    return spark.sql(sql)._jdf.queryExecution().executedPlan().toString().count("Exchange")


def test_as_many_exchanges_as_the_plain_query(sessions: Any, spark: Any) -> None:
    from privplan.engines.render import render

    on_spark, _, seen = sessions
    seen.clear()
    query = QUERIES[0]
    on_spark.sql(query, epsilon=1)
    (statement,) = seen
    assert _exchanges(spark, render(statement, "spark")) == _exchanges(spark, query) == 1


def test_a_key_the_domain_holds_twice_is_counted(sessions: Any) -> None:
    """The count is the domain's rows per group with the engine's equality: a domain that
    held 'a' twice (which typing public domains rules out) gives a count of 2, and the session's
    check refuses the answer before any noise."""
    on_spark, _, seen = sessions
    seen.clear()
    on_spark.sql(QUERIES[0], epsilon=1)
    (statement,) = seen
    assert "'b'" in statement
    frame = on_spark.engine.run(statement.replace("'b'", "'a'"))
    counts = dict(zip(frame["__k0"], frame[DUPLICATES], strict=True))
    assert counts == {"a": 2, "A": 1, "é": 1}
    with pytest.raises(InternalError):
        check_one_row_per_key(None, frame)  # type: ignore[arg-type]  # (reads the frame only)
