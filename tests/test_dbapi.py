"""PEP 249 connection (privplan.dbapi): answers equal plain DuckDB with noise off, budgets are
charged per execute and tracked across cursors, errors map to the DB-API hierarchy, parameters
are bound as literals (no injection), and pandas.read_sql works."""

from __future__ import annotations

import datetime as dt
import math
import warnings
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan import dbapi
from privplan.dbapi import errors as dbapi_errors
from privplan.dbapi import free as dbapi_free
from privplan.demo.data import DEPARTMENTS, demo_policy_path, write_demo_database
from privplan.testing import noise_disabled


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("dbapi") / "demo.duckdb", rows=5000)


@pytest.fixture
def con(demo_db: Path):
    c = dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(3), epsilon=0.5)
    yield c
    c.close()


def plain(demo_db: Path, sql: str, params: list | None = None) -> list[tuple]:
    c = duckdb.connect(str(demo_db), read_only=True)
    try:
        return c.execute(sql, params or []).fetchall()
    finally:
        c.close()


def read_sql(sql: str, con: dbapi.Connection, **kw) -> pd.DataFrame:
    """pandas.read_sql on a non-SQLAlchemy DBAPI2 connection warns (UserWarning); the suite
    turns warnings into errors, so ignore exactly that one."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="pandas only supports SQLAlchemy",
                                category=UserWarning)
        return pd.read_sql(sql, con, **kw)


# ------------------------------------------------------------------------- module


def test_module_globals() -> None:
    assert dbapi.apilevel == "2.0"
    assert dbapi.threadsafety == 1
    assert dbapi.paramstyle == "qmark"


def test_exception_hierarchy() -> None:
    assert issubclass(dbapi.Warning, Exception)
    assert issubclass(dbapi.Error, Exception)
    assert not issubclass(dbapi.Warning, dbapi.Error)
    assert issubclass(dbapi.InterfaceError, dbapi.Error)
    assert issubclass(dbapi.DatabaseError, dbapi.Error)
    for cls in (dbapi.DataError, dbapi.OperationalError, dbapi.IntegrityError,
                dbapi.InternalError, dbapi.ProgrammingError, dbapi.NotSupportedError):
        assert issubclass(cls, dbapi.DatabaseError)
    assert issubclass(dbapi.BudgetExceeded, dbapi.OperationalError)
    assert dbapi.Connection.ProgrammingError is dbapi.ProgrammingError


@pytest.mark.parametrize("err,cls", [
    (pp.ParseError("p"), dbapi.ProgrammingError),
    (pp.UnsupportedQueryError("u"), dbapi.ProgrammingError),
    (pp.PolicyError("x"), dbapi.ProgrammingError),
    (pp.BudgetExceededError("b"), dbapi.BudgetExceeded),
    (pp.LedgerError("l"), dbapi.OperationalError),
    (pp.errors.ExecutionError("e"), dbapi.OperationalError),
    (pp.InternalError("i"), dbapi.InternalError),
    (pp.PrivplanError("other"), dbapi.DatabaseError),
])
def test_translate(err: pp.PrivplanError, cls: type) -> None:
    out = dbapi_errors._translate(err)
    assert type(out) is cls
    assert out.privplan_error is err
    assert str(out) == str(err)


def test_type_objects() -> None:
    assert dbapi.STRING == "VARCHAR"
    assert dbapi.NUMBER == "BIGINT" and dbapi.NUMBER == "DOUBLE"
    assert dbapi.DATETIME == "DATE" and dbapi.DATETIME == "TIMESTAMP"
    assert dbapi.STRING != "BIGINT" and dbapi.NUMBER != "VARCHAR"
    assert dbapi.BOOLEAN == "BOOLEAN"
    assert dbapi.Date(2024, 1, 2) == dt.date(2024, 1, 2)
    assert isinstance(dbapi.TimestampFromTicks(0), dt.datetime)
    assert isinstance(dbapi.DateFromTicks(0), dt.date)
    assert isinstance(dbapi.TimeFromTicks(0), dt.time)
    assert dbapi.Binary(bytearray(b"ab")) == b"ab"


# ------------------------------------------------------------------------- answers


def test_fetch_methods_equal_plain_duckdb(con: dbapi.Connection, demo_db: Path) -> None:
    sql = ("SELECT hospital, COUNT(*) AS n, SUM(age) AS s FROM visits "
           "GROUP BY hospital ORDER BY hospital")
    want = plain(demo_db, sql)
    cur = con.cursor()
    assert cur.description is None and cur.rowcount == -1 and cur.arraysize == 1
    with noise_disabled():
        assert cur.execute(sql) is cur
    assert cur.rowcount == 4
    assert [d[0] for d in cur.description] == ["hospital", "n", "s"]
    assert all(len(d) == 7 for d in cur.description)
    assert cur.description[0][1] == dbapi.STRING
    assert cur.description[1][1] == dbapi.NUMBER and cur.description[2][1] == dbapi.NUMBER
    first = cur.fetchone()
    assert first == want[0]
    assert all(type(v) in (str, int) for v in first)  # Python values, not numpy
    assert cur.fetchmany() == want[1:2]          # arraysize = 1
    assert cur.fetchmany(5) == want[2:]
    assert cur.fetchone() is None and cur.fetchall() == [] and cur.fetchmany(3) == []
    with noise_disabled():
        cur.execute(sql)
    assert list(cur) == want
    with noise_disabled():
        cur.execute(sql)
    cur.arraysize = 3
    assert cur.fetchmany() == want[:3]
    assert cur.fetchall() == want[3:]


def test_avg_and_filters_equal_plain(con: dbapi.Connection, demo_db: Path) -> None:
    sql = ("SELECT sex, AVG(age) AS a, COUNT(*) FILTER (WHERE insured) AS i FROM visits "
           "WHERE age >= 18 GROUP BY sex ORDER BY sex")
    want = plain(demo_db, sql)
    with noise_disabled():
        got = con.cursor().execute(sql).fetchall()
    assert [r[0] for r in got] == [r[0] for r in want]
    for g, w in zip(got, want):
        assert g[1] == pytest.approx(w[1], rel=1e-9) and g[2] == w[2]


def test_noisy_answers_are_not_exact_values_but_close(con: dbapi.Connection,
                                                      demo_db: Path) -> None:
    """Without the test hook answers are noisy (this does not compare exactly)."""
    got = con.cursor().execute("SELECT COUNT(*) AS n FROM visits").fetchone()[0]
    assert isinstance(got, int)
    assert abs(got - 5000) < 200  # discrete Laplace, scale 2: |noise| < 200 w.p. ~1 - e^-100


def test_cost_and_budget_tracking_across_cursors(con: dbapi.Connection) -> None:
    a, b = con.cursor(), con.cursor()
    a.execute("SELECT COUNT(*) FROM visits WHERE hospital = 'A'")
    assert a.cost == pp.PureDP(0.5)
    assert a.result.cost == a.cost and a.result.accuracy
    # disjoint region: parallel composition, costs nothing extra — also across cursors
    b.execute("SELECT COUNT(*) FROM visits WHERE hospital = 'B'")
    assert b.cost == pp.PureDP(0)
    assert con.spent() == pp.PureDP(0.5)
    # per-query override of the connection default
    b.execute("SELECT COUNT(*) FROM visits", epsilon=0.25)
    assert b.cost == pp.PureDP(0.25)
    assert con.spent() == pp.PureDP(0.75) and con.remaining() == pp.PureDP(2.25)
    assert con.session.spent() == con.spent()


def test_budget_exceeded_is_operational_and_spends_nothing(con: dbapi.Connection) -> None:
    cur = con.cursor()
    cur.execute("SELECT COUNT(*) FROM visits", epsilon=2.5)
    with pytest.raises(dbapi.BudgetExceeded) as info:
        cur.execute("SELECT SUM(age) FROM visits", epsilon=1)
    assert isinstance(info.value, dbapi.OperationalError)
    assert isinstance(info.value.privplan_error, pp.BudgetExceededError)
    assert info.value.__cause__ is info.value.privplan_error
    assert "Nothing was spent" in str(info.value)
    assert con.spent() == pp.PureDP(2.5)
    assert cur.description is None and cur.rowcount == -1 and cur.cost is None
    with pytest.raises(dbapi.ProgrammingError, match="execute"):
        cur.fetchall()  # the failed execute left no result behind


def test_shared_ledger_between_connections(demo_db: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    kw = {"policy": demo_policy_path(), "budget": pp.PureDP(1), "ledger": ledger,
          "epsilon": 0.75}
    with dbapi.connect(demo_db, **kw) as c1, dbapi.connect(demo_db, **kw) as c2:
        c1.cursor().execute("SELECT COUNT(*) FROM visits")
        assert c2.spent() == pp.PureDP(0.75)
        with pytest.raises(dbapi.BudgetExceeded):
            c2.cursor().execute("SELECT SUM(age) FROM visits")


def test_approx_dp_defaults_and_override(demo_db: Path) -> None:
    with dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.ApproxDP(2, 1e-6),
                       epsilon=0.5, delta=1e-7) as c:
        cur = c.cursor()
        cur.execute("SELECT COUNT(*) FROM visits")
        assert type(cur.cost) is pp.ApproxDP  # (a count uses Laplace noise: δ may stay 0)
        assert cur.cost.epsilon == 0.5 and cur.cost.delta <= 1e-7
        cur.execute("SELECT SUM(age) FROM visits", epsilon=0.25)  # replaces the defaults
        assert cur.cost == pp.ApproxDP(0.25, 0)
        cur.execute("SELECT SUM(age) FROM visits WHERE age > 3",
                    budget=pp.ApproxDP(0.25, 1e-8))
        assert cur.cost.epsilon == 0.25 and cur.cost.delta <= 1e-8


def test_no_budget_anywhere_is_a_programming_error(demo_db: Path) -> None:
    with dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(1)) as c:
        with pytest.raises(dbapi.ProgrammingError, match="epsilon="):
            c.cursor().execute("SELECT COUNT(*) FROM visits")
        assert c.spent() == pp.PureDP(0)
        assert c.cursor().execute("SELECT COUNT(*) FROM visits", epsilon=0.1).cost == \
            pp.PureDP(0.1)


@pytest.mark.parametrize("kw", [{"rho": 0.1}, {"epsilon": -1}, {"epsilon": "x"},
                                {"epsilon": 0}])
def test_bad_default_budget_fails_at_connect(demo_db: Path, kw: dict) -> None:
    with pytest.raises(dbapi.ProgrammingError):
        dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(1), **kw)


def test_bad_per_query_budget(con: dbapi.Connection) -> None:
    cur = con.cursor()
    with pytest.raises(dbapi.ProgrammingError, match="only one"):
        cur.execute("SELECT COUNT(*) FROM visits", epsilon=0.1, rho=0.1)
    with pytest.raises(dbapi.ProgrammingError):
        cur.execute("SELECT COUNT(*) FROM visits", epsilon=float("nan"))
    assert con.spent() == pp.PureDP(0)


# ------------------------------------------------------------------------- errors


@pytest.mark.parametrize("sql,source", [
    ("SELEC COUNT(*) FROM visits", pp.ParseError),
    ("SELECT * FROM visits", pp.UnsupportedQueryError),
    ("SELECT COUNT(*) FROM nowhere", pp.PolicyError),
    ("SELECT COUNT(*) FROM visits; DROP TABLE visits", pp.UnsupportedQueryError),
])
def test_query_errors_are_programming_errors(con: dbapi.Connection, sql: str,
                                             source: type) -> None:
    with pytest.raises(dbapi.ProgrammingError) as info:
        con.cursor().execute(sql)
    assert isinstance(info.value.privplan_error, source)
    assert info.value.__cause__ is info.value.privplan_error
    assert con.spent() == pp.PureDP(0)


def test_ledger_errors_are_operational(demo_db: Path, tmp_path: Path) -> None:
    with pytest.raises(dbapi.OperationalError) as info:
        dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(1), ledger=tmp_path)
    assert isinstance(info.value.privplan_error, pp.LedgerError)
    ledger = tmp_path / "l.sqlite"
    dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(1), ledger=ledger).close()
    with pytest.raises(dbapi.OperationalError, match="budget"):
        dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(2), ledger=ledger)


def test_missing_database_is_a_dbapi_error(tmp_path: Path) -> None:
    with pytest.raises(dbapi.Error):
        dbapi.connect(tmp_path / "missing.duckdb", policy=demo_policy_path(),
                      budget=pp.PureDP(1))


# ------------------------------------------------------------------------- transactions etc.


def test_commit_rollback_close_and_context_manager(demo_db: Path) -> None:
    c = dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(1), epsilon=0.5)
    cur = c.cursor()
    cur.execute("SELECT COUNT(*) FROM visits")
    c.commit()  # no-op
    with pytest.raises(dbapi.NotSupportedError, match="un-spent"):
        c.rollback()
    assert c.spent() == pp.PureDP(0.5)  # nothing was rolled back
    with c as same:
        assert same is c
    assert c.closed
    c.close()  # twice is fine
    for call in (c.cursor, c.commit, c.rollback, c.spent, cur.fetchall,
                 lambda: cur.execute("SELECT COUNT(*) FROM visits")):
        with pytest.raises(dbapi.ProgrammingError, match="closed"):
            call()


def test_cursor_close_and_fetch_before_execute(con: dbapi.Connection) -> None:
    cur = con.cursor()
    with pytest.raises(dbapi.ProgrammingError, match="execute"):
        cur.fetchone()
    with con.cursor() as other:
        other.execute("SELECT COUNT(*) FROM visits")
    with pytest.raises(dbapi.ProgrammingError, match="closed"):
        other.fetchone()
    cur.setinputsizes([None])
    cur.setoutputsize(10)
    with pytest.raises(dbapi.ProgrammingError):
        con.cursor().execute("SELECT COUNT(*) FROM visits").fetchmany(-1)


def test_executemany_is_refused_and_spends_nothing(con: dbapi.Connection) -> None:
    with pytest.raises(dbapi.NotSupportedError, match="execute\\(\\) once per"):
        con.cursor().executemany("SELECT COUNT(*) FROM visits WHERE hospital = ?",
                                 [["A"], ["B"]])
    assert con.spent() == pp.PureDP(0)


# ------------------------------------------------------------------------- parameters


def test_qmark_parameters_equal_plain(con: dbapi.Connection, demo_db: Path) -> None:
    sql = ("SELECT department, COUNT(*) AS n FROM visits WHERE age >= ? AND sex = ? "
           "AND visit_date < ? AND cost <= ? GROUP BY department ORDER BY department")
    params = [65, "F", dt.date(2024, 1, 1), Decimal("5000.5")]
    want = plain(demo_db, sql, params)
    with noise_disabled():
        got = con.cursor().execute(sql, params).fetchall()
    # keys come from the public domain: a department with no matching row is released as 0
    assert dict(got) == {**{d: 0 for d in DEPARTMENTS}, **dict(want)}


def test_named_parameters(con: dbapi.Connection, demo_db: Path) -> None:
    sql = "SELECT COUNT(*) AS n FROM visits WHERE age BETWEEN :lo AND :hi AND hospital = :h"
    want = plain(demo_db, "SELECT COUNT(*) AS n FROM visits WHERE age BETWEEN 10 AND 40 "
                          "AND hospital = 'C'")
    with noise_disabled():
        got = con.cursor().execute(sql, {"lo": 10, "hi": 40, "h": "C"}).fetchall()
    assert got == want
    with pytest.raises(dbapi.ProgrammingError, match=":hi"):
        con.cursor().execute(sql, {"lo": 10, "h": "C"})


def test_string_with_quote_is_a_literal_not_sql(con: dbapi.Connection) -> None:
    cur = con.cursor()
    for evil in ["O'Brien", "A' OR '1'='1", "A'; DROP TABLE visits; --", "x' /*", "?", ":a"]:
        sql = dbapi.bind_parameters("SELECT COUNT(*) FROM visits WHERE hospital = ?", [evil])
        escaped = evil.replace("'", "''")
        assert sql == f"SELECT COUNT(*) FROM visits WHERE hospital = '{escaped}'"
        with noise_disabled():
            assert cur.execute("SELECT COUNT(*) AS n FROM visits WHERE hospital = ?",
                               [evil]).fetchall() == [(0,)]


def test_placeholders_in_strings_and_comments_are_not_placeholders(con: dbapi.Connection,
                                                                   demo_db: Path) -> None:
    sql = "SELECT COUNT(*) AS n FROM visits WHERE hospital <> '?' /* ? */ AND age > ? -- ?\n"
    assert dbapi.bind_parameters(sql, [50]) == sql.replace("age > ?", "age > 50")
    want = plain(demo_db, "SELECT COUNT(*) FROM visits WHERE age > 50")
    with noise_disabled():
        assert con.cursor().execute(sql, [50]).fetchall() == want


def test_negative_numbers_cannot_form_comments() -> None:
    assert dbapi.bind_parameters("SELECT COUNT(*) FROM t WHERE x-?>0", [-1]) == \
        "SELECT COUNT(*) FROM t WHERE x- (-1)>0"
    assert dbapi.bind_parameters("SELECT ?, ?, ?", [None, True, 1.5]) == \
        "SELECT NULL, TRUE, 1.5"


@pytest.mark.parametrize("params,cls", [
    ([1, 2], dbapi.ProgrammingError),            # too many
    ([], dbapi.ProgrammingError),                # too few
    (None, dbapi.ProgrammingError),              # placeholder but no parameters
    ("A", dbapi.ProgrammingError),               # a string is not a parameter sequence
    ({"h": "A"}, dbapi.ProgrammingError),        # mapping with a ? placeholder
    ([float("nan")], dbapi.DataError),
    ([math.inf], dbapi.DataError),
    ([b"A"], dbapi.NotSupportedError),
    ([object()], dbapi.ProgrammingError),
    (["a\x00b"], dbapi.DataError),
])
def test_bad_parameters(con: dbapi.Connection, params: object, cls: type) -> None:
    with pytest.raises(cls):
        con.cursor().execute("SELECT COUNT(*) FROM visits WHERE hospital = ?", params)
    assert con.spent() == pp.PureDP(0)


def test_parameters_without_placeholders(con: dbapi.Connection) -> None:
    with pytest.raises(dbapi.ProgrammingError):
        con.cursor().execute("SELECT COUNT(*) FROM visits", [1])
    with pytest.raises(dbapi.ProgrammingError, match="no :name"):
        con.cursor().execute("SELECT COUNT(*) FROM visits", {"a": 1})
    with pytest.raises(dbapi.ProgrammingError, match="\\$"):
        con.cursor().execute("SELECT COUNT(*) FROM visits WHERE age > $1", [1])


# ------------------------------------------------------------------------- pandas


def test_read_sql_round_trip(con: dbapi.Connection, demo_db: Path) -> None:
    sql = ("SELECT hospital, COUNT(*) AS n, AVG(age) AS a FROM visits WHERE insured = ? "
           "GROUP BY hospital ORDER BY hospital")
    c = duckdb.connect(str(demo_db), read_only=True)
    want = c.execute(sql, [True]).df()
    c.close()
    with noise_disabled():
        got = read_sql(sql, con, params=[True])
    assert list(got.columns) == ["hospital", "n", "a"]
    assert got["hospital"].tolist() == want["hospital"].tolist()
    assert got["n"].tolist() == want["n"].tolist()
    assert got["a"].to_numpy() == pytest.approx(want["a"].to_numpy(), rel=1e-9)
    assert con.spent() == pp.PureDP(0.5)


def test_read_sql_over_budget_raises_budget_exceeded(con: dbapi.Connection) -> None:
    con.cursor().execute("SELECT COUNT(*) FROM visits", epsilon=2.75)
    with pytest.raises(dbapi.BudgetExceeded):
        read_sql("SELECT SUM(age) AS s FROM visits", con)
    assert con.spent() == pp.PureDP(2.75)


# ------------------------------------------------------------------------- BigQuery syntax


def test_bigquery_syntax_through_a_cursor(con: dbapi.Connection, demo_db: Path) -> None:
    """The clause carries the budget: the connection default (0.5) is not used."""
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.25, delta=1e-5) "
           "hospital, COUNT(*) AS n FROM visits WHERE age < ? GROUP BY hospital "
           "ORDER BY hospital")
    want = plain(demo_db, "SELECT hospital, COUNT(*) AS n FROM visits WHERE age < 18 "
                          "GROUP BY hospital ORDER BY hospital")
    cur = con.cursor()
    with noise_disabled():
        assert cur.execute(sql, [18]).fetchall() == want
    assert cur.cost == pp.PureDP(0.25)  # pure ε-DP answers meet the asked (ε, δ)
    with pytest.raises(dbapi.ProgrammingError, match="twice"):
        cur.execute(sql, [18], epsilon=0.1)
    with pytest.raises(dbapi.ProgrammingError) as info:
        cur.execute(sql.replace("delta=1e-5", "privacy_unit_column=patient_id"), [18])
    assert isinstance(info.value.privplan_error, pp.PolicyError)
    assert con.spent() == pp.PureDP(0.25)


# ------------------------------------------------------------------------- free statements


@pytest.fixture
def session_sql_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements that reach Session.sql (the only way to private rows), recorded."""
    calls: list[str] = []
    original = pp.Session.sql

    def spy(self: pp.Session, sql: str, **kw: object) -> object:
        calls.append(sql)
        return original(self, sql, **kw)

    monkeypatch.setattr(pp.Session, "sql", spy)
    return calls


@pytest.mark.parametrize("sql,params,names,row", [
    ("SELECT 1", None, ["1"], (1,)),
    ("SELECT 1 AS x", None, ["x"], (1,)),
    ("SELECT 'a'", None, ["'a'"], ("a",)),
    ("select 1;", None, ["1"], (1,)),
    ("SELECT 1 AS x, -2.5 AS d, 'it''s' AS s, NULL AS n, TRUE AS b, 1e3 AS f", None,
     ["x", "d", "s", "n", "b", "f"], (1, Decimal("-2.5"), "it's", None, True, 1000.0)),
    ("SELECT ? AS v, ? AS w", [7, "O'Brien"], ["v", "w"], (7, "O'Brien")),
])
def test_constant_selects_are_free_and_read_no_table(
        demo_db: Path, session_sql_calls: list[str], sql: str, params: list | None,
        names: list[str], row: tuple) -> None:
    """A health check must work without a default budget, and cost nothing."""
    with dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(1)) as c:
        cur = c.cursor().execute(sql, params)
        assert [d[0] for d in cur.description] == names
        got = cur.fetchall()
        assert got == [row] and [type(v) for v in got[0]] == [type(v) for v in row]
        assert cur.rowcount == 1 and cur.cost == pp.PureDP(0) and cur.result.cost == cur.cost
        assert c.spent() == pp.PureDP(0)
        assert c.session.ledger.entries() == ()
    assert session_sql_calls == []


def test_constant_select_type_codes(con: dbapi.Connection) -> None:
    cur = con.cursor().execute("SELECT 1, 1.5, 'a', TRUE, 2e0")
    codes = [d[1] for d in cur.description]
    assert codes[0] == dbapi.NUMBER and codes[1] == dbapi.NUMBER and codes[4] == dbapi.NUMBER
    assert codes[2] == dbapi.STRING and codes[3] == dbapi.BOOLEAN


@pytest.mark.parametrize("sql", [
    "SELECT abs(1)", "SELECT CAST(1 AS INT)", "SELECT (SELECT 1)", "SELECT 1 WHERE TRUE",
    "SELECT 1 LIMIT 1", "SELECT DISTINCT 1", "WITH t AS (SELECT 1) SELECT 1",
    "SELECT 1; SELECT 2", "SELECT 1 UNION ALL SELECT 2", "SELECT random()",
    "SELECT current_date", "SELECT x", "SELECT 1 + 1", "SELECT (1)", "SELECT 1 FROM visits",
    "SELECT -'a'",
])
def test_other_statements_without_a_table_still_go_to_the_session(
        con: dbapi.Connection, session_sql_calls: list[str], sql: str) -> None:
    """Only literal select lists are answered here; anything else is the Session's to judge
    (and it refuses all of these), spending nothing."""
    with pytest.raises(dbapi.ProgrammingError) as info:
        con.cursor().execute(sql)
    assert isinstance(info.value.privplan_error, (pp.UnsupportedQueryError, pp.ParseError))
    assert session_sql_calls == [sql]
    assert con.spent() == pp.PureDP(0)


def test_describe_schema_is_the_policy(con: dbapi.Connection, demo_db: Path) -> None:
    import yaml

    declared = yaml.safe_load(demo_policy_path().read_text())["tables"]
    tables = con.describe_schema()
    assert [(t.name, t.schema, t.public) for t in tables] == \
        [("visits", "main", False), ("hospitals", "main", True)]
    types = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR", "bool": "BOOLEAN",
             "date": "DATE"}
    assert [(c.name, c.type, c.nullable) for c in tables[0].columns] == \
        [(n, types[c["type"]], c.get("nullable", True))
         for n, c in declared["visits"]["columns"].items()]
    # the public table lists no columns in the policy: the database's (public) columns
    assert [(c.name, c.type) for c in tables[1].columns] == \
        [(r[0], r[1]) for r in plain(demo_db, "DESCRIBE hospitals")]
    assert con.spent() == pp.PureDP(0)


def test_information_schema_is_answered_from_the_policy(
        con: dbapi.Connection, session_sql_calls: list[str]) -> None:
    cur = con.cursor()
    cur.execute("SELECT table_catalog, table_schema, table_name, table_type "
                "FROM information_schema.tables ORDER BY table_name")
    assert cur.fetchall() == [("demo", "main", "hospitals", "BASE TABLE"),
                              ("demo", "main", "visits", "BASE TABLE")]
    assert cur.cost == pp.PureDP(0)
    cur.execute("SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                "WHERE table_name = ? ORDER BY ordinal_position", ["visits"])
    want = [(c.name, c.type, "YES" if c.nullable else "NO")
            for c in con.describe_schema()[0].columns]
    assert cur.fetchall() == want and len(want) == 10
    assert [d[0] for d in cur.description] == ["column_name", "data_type", "is_nullable"]
    assert cur.description[0][1] == dbapi.STRING
    cur.execute("WITH t AS (SELECT table_name FROM information_schema.tables) "
                "SELECT COUNT(*) AS n FROM t")
    assert cur.fetchall() == [(2,)]
    assert session_sql_calls == [] and con.spent() == pp.PureDP(0)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM information_schema.tables, visits",
    "SELECT table_name FROM information_schema.tables WHERE table_name IN (SELECT 'a' FROM t)",
    "SELECT * FROM information_schema.tables, read_csv('data.csv')",
])
def test_information_schema_mixed_with_other_tables_is_refused(
        con: dbapi.Connection, session_sql_calls: list[str], sql: str) -> None:
    with pytest.raises(dbapi.ProgrammingError, match="only information_schema tables"):
        con.cursor().execute(sql)
    assert session_sql_calls == [] and con.spent() == pp.PureDP(0)


def test_schema_sandbox_cannot_read_files(con: dbapi.Connection, demo_db: Path) -> None:
    """Below the statement check: the sandbox itself has file access disabled, so even a
    statement that named the database file could not read it."""
    for sql in (f"SELECT * FROM read_text('{demo_db}')", f"SELECT * FROM '{demo_db}'"):
        with pytest.raises(dbapi.ProgrammingError, match="disabled by configuration"):
            dbapi_free._schema_answer(con, sql)
    with pytest.raises(dbapi.ProgrammingError, match="information_schema query failed"):
        con.cursor().execute("SELECT no_such_column FROM information_schema.tables")
    assert con.spent() == pp.PureDP(0)


def test_intervals_switch_gives_the_answer_shape_of_every_other_surface(demo_db: Path,
                                                                       tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    with dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(3), epsilon=0.5,
                       ledger=ledger, intervals=True) as c:
        cur = c.cursor().execute("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital")
        assert [d[0] for d in cur.description] == ["hospital", "n", "n_low", "n_high"]
        rows = cur.fetchall()
        shown = cur.result.with_intervals()
        assert rows == list(shown.itertuples(index=False, name=None))
        assert all(lo < n < hi for _, n, lo, hi in rows)
        df = read_sql("SELECT COUNT(*) AS n FROM visits WHERE age < 18", c)
        assert list(df.columns) == ["n", "n_low", "n_high"]
        assert c.cursor().execute("SELECT 1 AS one").fetchall() == [(1,)]  # free: no interval
        assert len(c.session.ledger.entries()) == 2  # one charge per answer, intervals free
    with pytest.raises(dbapi.InterfaceError, match="True or False"):
        dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(3), intervals="yes")
