"""The outer-query check before the charge (assemble.check_outer_query), judged by DuckDB.

An outer query (HAVING, ORDER BY, expressions) runs first on stand-in answers of the engine
statement's types; it is refused with nothing spent only when it fails on every stand-in. A
text key holding digits compared with a number (SmartNoise's PUMS metadata types ``sex`` as a
string, and its tests write ``HAVING sex = 1``) converts for some answers, so it is answered
like DuckDB answers it; when the released keys themselves do not convert, the failure comes
after the charge, as a PostProcessingError about released values only.
"""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.errors import PostProcessingError, UnsupportedQueryError
from privplan.testing import noise_disabled

POLICY = {"tables": {"people": {"privacy_unit": "row", "columns": {
    "sex": {"type": "str", "public_values": ["1", "2"]},
    "code": {"type": "str", "public_values": ["M", "F"]},
    "age": {"type": "int", "lower": 0, "upper": 100}}}}}


@pytest.fixture()
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE people(sex VARCHAR, code VARCHAR, age INTEGER)")
    c.execute("INSERT INTO people VALUES ('1', 'M', 30), ('2', 'F', 40), ('1', 'F', 50), "
              "('2', 'M', 60), ('1', 'M', 70)")
    return c


def test_text_key_compared_with_a_number_is_answered_as_duckdb_does(
        con: duckdb.DuckDBPyConnection) -> None:
    sql = "SELECT sex, COUNT(*) AS n, SUM(age) AS s FROM people GROUP BY sex HAVING sex = 1"
    expected = con.execute(sql).df()
    with pp.connect(con, policy=POLICY, budget=pp.PureDP(10)) as sess, noise_disabled():
        got = sess.sql(sql, epsilon=1).df
    assert got["sex"].tolist() == expected["sex"].tolist() == ["1"]
    assert got["n"].tolist() == expected["n"].tolist()
    assert got["s"].tolist() == expected["s"].tolist()


def test_released_keys_that_do_not_convert_fail_after_the_charge(
        con: duckdb.DuckDBPyConnection) -> None:
    sql = "SELECT code, COUNT(*) AS n FROM people GROUP BY code HAVING code = 1"
    with pytest.raises(duckdb.ConversionException):
        con.execute(sql).df()  # DuckDB itself fails on these keys
    with pp.connect(con, policy=POLICY, budget=pp.PureDP(10)) as sess:
        cost = sess.explain(sql, epsilon=1).projected_total
        with pytest.raises(PostProcessingError):
            sess.sql(sql, epsilon=1)
        assert sess.spent() == cost  # charged: the failure depends on released keys


@pytest.mark.invariant(8)
def test_outer_query_failing_on_every_answer_spends_nothing(
        con: duckdb.DuckDBPyConnection) -> None:
    with pp.connect(con, policy=POLICY, budget=pp.PureDP(10)) as sess:
        with pytest.raises(UnsupportedQueryError, match="before anything was spent"):
            sess.sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex HAVING n < 'a'",
                     epsilon=1)
        assert sess.spent() == pp.PureDP(0)


@pytest.mark.parametrize("sql", [
    "SELECT DISTINCT COUNT(*) > 0 AS seen FROM people GROUP BY sex",
    "SELECT DISTINCT SUM(age) AS s FROM people",
    "SELECT DISTINCT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex",
])
def test_distinct_over_released_rows_is_post_processing(con: duckdb.DuckDBPyConnection,
                                                         sql: str) -> None:
    """DISTINCT over keys and noisy aggregates runs in the outer query, as DuckDB runs it."""
    want = con.execute(sql).df()
    with pp.connect(con, policy=POLICY, budget=pp.PureDP(10)) as sess, noise_disabled():
        got = sess.sql(sql, epsilon=1).df
    assert got.values.tolist() == want.values.tolist()


@pytest.mark.invariant(5)
@pytest.mark.parametrize("sql, fragment", [
    ("SELECT DISTINCT age FROM people", "SELECT DISTINCT refused"),
    ("SELECT DISTINCT age, COUNT(*) FROM people", "neither grouped nor aggregated"),
])
def test_distinct_of_raw_values_is_refused(con: duckdb.DuckDBPyConnection, sql: str,
                                           fragment: str) -> None:
    with pp.connect(con, policy=POLICY, budget=pp.PureDP(10)) as sess:
        with pytest.raises(UnsupportedQueryError, match=fragment):
            sess.sql(sql, epsilon=1)
        assert sess.spent() == pp.PureDP(0)


@pytest.mark.invariant(5)
@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_csv('/etc/hostname')",
    "SELECT * FROM glob('/*')",
    "SET enable_external_access = true",
])
def test_the_post_processing_connection_reads_nothing_but_the_noisy_tables(sql: str) -> None:
    """Defence in depth: whatever reaches the post-processing connection cannot read files or
    switch that back (the outer query is the user's SQL over noisy tables only)."""
    from privplan.engines.post_processor import post_process

    with pytest.raises(PostProcessingError):
        post_process(sql, {})
    assert post_process("SELECT COUNT(*) AS n FROM t", {"t": pd.DataFrame({"x": [1, 2]})}
                        )["n"].tolist() == [2]
