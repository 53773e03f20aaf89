"""``sess.sql(q, params=...)`` / ``sess.explain(q, params=...)``: DuckDB's placeholders (``?``,
``$1``, ``$name``) bound as SQL literals before planning, so a query with parameters answers,
costs and is cached as the query with the literals written in; a parameter is always one value,
never SQL; a mismatch is a clear error that spends nothing."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

import privplan as pp
from privplan import dbapi
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.sql.params import ParameterError, Style, bind_params
from privplan.testing import noise_disabled

STYLE = Style(call="sess.sql(q, params={})", named="$")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("params") / "demo.duckdb", rows=3000)


@pytest.fixture
def sess(demo_db: Path):
    s = pp.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(10))
    yield s
    s.close()


def exact(demo_db: Path, sql: str) -> list[tuple]:
    c = duckdb.connect(str(demo_db), read_only=True)
    try:
        return c.execute(sql).fetchall()
    finally:
        c.close()


def rows(result: pp.Result) -> list[tuple]:
    return [tuple(r) for r in result.df.itertuples(index=False)]


GROUPED = ("SELECT hospital, COUNT(*) AS n, SUM(cost) AS c FROM visits "
           "WHERE age > {age} AND hospital <> {h} GROUP BY hospital ORDER BY hospital")


@pytest.mark.parametrize("sql,params", [
    (GROUPED.format(age="?", h="?"), [40, "B"]),
    (GROUPED.format(age="$1", h="$2"), [40, "B"]),
    (GROUPED.format(age="$age", h="$h"), {"age": 40, "h": "B"}),
    (GROUPED.format(age="$1", h="$2"), (40, "B")),
])
def test_params_answer_and_cost_as_the_literals_do(sess: pp.Session, demo_db: Path, sql: str,
                                                  params: object) -> None:
    literal = GROUPED.format(age="40", h="'B'")
    with noise_disabled():
        bound = sess.sql(sql, params=params, epsilon=1)
        written = sess.sql(literal, epsilon=1)
    assert rows(bound) == rows(written)
    counts = {r[0]: r[1] for r in exact(demo_db, literal)}  # (public keys: B answers 0)
    assert {r[0]: r[1] for r in rows(bound)} == {h: counts.get(h, 0) for h in "ABCD"}
    assert bound.query_cost == written.query_cost == pp.PureDP(1)
    assert str(sess.explain(sql, params=params, epsilon=1)).split("\n", 1)[1] == \
        str(sess.explain(literal, epsilon=1)).split("\n", 1)[1]


def test_the_duckdb_users_call_works(sess: pp.Session, demo_db: Path) -> None:
    """What a DuckDB user writes: con.sql("... WHERE age > ?", params=[30])."""
    with noise_disabled():
        got = sess.sql("SELECT COUNT(*) AS n FROM visits WHERE age > ?", params=[30],
                       epsilon=0.5)
    assert rows(got) == exact(demo_db, "SELECT COUNT(*) FROM visits WHERE age > 30")
    assert got.cost == pp.PureDP(0.5)
    assert sess.spent() == pp.PureDP(0.5)


@pytest.mark.parametrize("value,literal", [
    (None, "NULL"), (True, "TRUE"), (41, "41"), (41.5, "41.5"), (Decimal("41.25"), "41.25"),
    (-3, "(-3)"), ("O'Brien", "'O''Brien'"),
    (dt.date(2024, 3, 1), "CAST('2024-03-01' AS DATE)"),
])
def test_each_type_is_one_literal(value: object, literal: str) -> None:
    assert bind_params("SELECT COUNT(*) FROM t WHERE x = ?", [value], STYLE) == \
        f"SELECT COUNT(*) FROM t WHERE x = {literal}"


def test_a_datetime_parameter(sess: pp.Session, demo_db: Path) -> None:
    sql = "SELECT COUNT(*) AS n FROM visits WHERE visit_date >= $since"
    with noise_disabled():
        got = sess.sql(sql, params={"since": dt.date(2024, 1, 1)}, epsilon=0.5)
    assert rows(got) == exact(demo_db, "SELECT COUNT(*) FROM visits "
                                       "WHERE visit_date >= DATE '2024-01-01'")


@pytest.mark.parametrize("evil", ["A' OR '1'='1", "B'; DROP TABLE visits; --", "x' /* ",
                                  "-- C", "?", "$1", "' UNION SELECT patient_id FROM visits --"])
def test_an_injection_attempt_is_a_value(sess: pp.Session, demo_db: Path, evil: str) -> None:
    sql = "SELECT COUNT(*) AS n FROM visits WHERE hospital = ?"
    bound = bind_params(sql, [evil], STYLE)
    assert bound == sql.replace("?", "'" + evil.replace("'", "''") + "'")
    with noise_disabled():
        assert rows(sess.sql(sql, params=[evil], epsilon=0.1)) == [(0,)]
    assert exact(demo_db, "SELECT COUNT(*) FROM visits")[0][0] == 3000  # nothing dropped


@pytest.mark.parametrize("sql,params,words", [
    ("SELECT COUNT(*) FROM visits WHERE age > ?", [1, 2],
     ["1 ? placeholder", "2 parameter(s)", "params=[30]"]),
    ("SELECT COUNT(*) FROM visits WHERE age > ?", [], ["1 ? placeholder", "0 parameter(s)"]),
    ("SELECT COUNT(*) FROM visits WHERE age > ?", None, ["no parameters were given", "params="]),
    ("SELECT COUNT(*) FROM visits", [30], ["no placeholder", "1 parameter(s)"]),
    ("SELECT COUNT(*) FROM visits WHERE age > $a", {"b": 1}, ["$a", "['b']", "Add 'a'"]),
    ("SELECT COUNT(*) FROM visits WHERE age > $a", {"a": 1, "c": 2}, ["['c']", "drop them"]),
    ("SELECT COUNT(*) FROM visits WHERE age > $a", [1], ["a mapping", "params={'a': 30}"]),
    ("SELECT COUNT(*) FROM visits WHERE age > $2", [1], ["$2 has no value", "$1 to $1"]),
    ("SELECT COUNT(*) FROM visits WHERE age > ?", {"a": 1}, ["uses ? placeholders"]),
    ("SELECT COUNT(*) FROM visits WHERE age > %s", [1], ["%s", "'qmark'", "Write ?"]),
    ("SELECT COUNT(*) FROM visits WHERE age > $a", None, ["placeholder $a", "params={'a': 30}"]),
    ("SELECT COUNT(*) FROM visits WHERE age > $1 AND age < ?", [1, 2], ["mixes ? and $1"]),
    ("SELECT COUNT(*) FROM visits WHERE age > ?", [math.nan], ["not a finite number"]),
    ("SELECT COUNT(*) FROM visits WHERE age > ?", [math.inf], ["not a finite number"]),
    ("SELECT COUNT(*) FROM visits WHERE age > ?", [Decimal("NaN")], ["not a finite number"]),
    ("SELECT COUNT(*) FROM visits WHERE age > ?", [b"x"], ["binary parameters"]),
    ("SELECT COUNT(*) FROM visits WHERE age > ?", [[1]], ["type list is not supported"]),
    ("SELECT COUNT(*) FROM visits WHERE age > ?", "30", ["a sequence", "got str"]),
])
def test_a_mismatch_is_a_clear_error_and_spends_nothing(sess: pp.Session, sql: str,
                                                        params: object,
                                                        words: list[str]) -> None:
    for call in (sess.sql, sess.explain):
        with pytest.raises(ParameterError) as err:
            call(sql, params=params, epsilon=1)
        for w in words:
            assert w in str(err.value), (w, str(err.value))
    assert isinstance(err.value, pp.PrivplanError)
    assert sess.spent() == pp.PureDP(0)
    assert len(sess.budget_history()) == 0


def test_explain_names_explain_in_its_fix(sess: pp.Session) -> None:
    with pytest.raises(ParameterError, match=r"sess\.explain\(q, params="):
        sess.explain("SELECT COUNT(*) FROM visits WHERE age > ?", epsilon=1)


def test_placeholders_in_strings_and_comments_are_not_placeholders() -> None:
    sql = "SELECT COUNT(*) FROM t WHERE h <> '?' /* $1 ? */ AND age > $1 -- ?\n"
    assert bind_params(sql, [50], STYLE) == sql.replace("age > $1", "age > 50")


def test_the_ledger_records_the_bound_query(sess: pp.Session) -> None:
    """Parameters are public values: the ledger keeps the statement that was answered."""
    with noise_disabled():
        sess.sql("SELECT COUNT(*) AS n FROM visits WHERE age > ?", params=[61], epsilon=0.5)
    assert "age > 61" in sess.budget_history().iloc[0].to_string()


def test_a_named_or_numbered_placeholder_may_repeat() -> None:
    assert bind_params("SELECT 1 WHERE a > $1 AND b < $1", [5], STYLE) == \
        "SELECT 1 WHERE a > 5 AND b < 5"
    assert bind_params("SELECT 1 WHERE a = $h OR b = $h", {"h": "x'y"}, STYLE) == \
        "SELECT 1 WHERE a = 'x''y' OR b = 'x''y'"


@pytest.mark.parametrize("sql,params,words", [
    ("SELECT COUNT(*) FROM t WHERE age > %s", [30], ["%s placeholders", "paramstyle is 'qmark'",
                                                     "Write ? where the query has %s"]),
    ("SELECT COUNT(*) FROM t WHERE age > %(age)s", {"age": 30},
     ["%(age)s placeholders", "pyformat", "Write :age where the query has %(age)s",
      "cursor.execute(sql, {'age': 30})"]),
    ("SELECT COUNT(*) FROM t WHERE age > $1", [30], ["$ parameter", "paramstyle qmark"]),
])
def test_the_dbapi_names_its_paramstyle(sql: str, params: object, words: list[str]) -> None:
    assert dbapi.paramstyle == "qmark"
    with pytest.raises(dbapi.ProgrammingError) as err:
        dbapi.bind_parameters(sql, params)  # type: ignore[arg-type]
    for w in words:
        assert w in str(err.value), (w, str(err.value))
    assert isinstance(err.value.privplan_error, ParameterError)


def test_a_modulo_is_not_taken_for_a_placeholder() -> None:
    """``age % 7`` or ``x %s`` without parameters is SQL, left alone."""
    for sql in ["SELECT COUNT(*) FROM t WHERE age % 7 = 0", "SELECT COUNT(*) FROM t WHERE a %s"]:
        assert bind_params(sql, None, STYLE) == sql
        assert dbapi.bind_parameters(sql, None) == sql
