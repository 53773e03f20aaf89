"""The SQLAlchemy dialect (privplan.sqlalchemy_dialect) on real parts: the demo DuckDB file, the
demo policy and a SQLite ledger file. read_sql through an engine answers as the DB-API cursor
does and is charged once; health checks and the inspector are free and read no table; bad URL
parameters fail when the engine is created, naming the parameter, with nothing spent."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
import sqlalchemy as sa
import yaml

import privplan as pp
from privplan import dbapi
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.session.session import Session
from privplan.sqlalchemy_dialect import PrivplanDialect
from privplan.testing import noise_disabled

# the sqlalchemy.dialects entry point, for a checkout installed without it
sa.dialects.registry.register("privplan", "privplan.sqlalchemy_dialect", "PrivplanDialect")

POLICY_TYPES = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR", "bool": "BOOLEAN",
                "date": "DATE", "timestamp": "TIMESTAMP"}
GROUPED = ("SELECT hospital, COUNT(*) AS n, AVG(age) AS a FROM visits "
           "GROUP BY hospital ORDER BY hospital")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("sa") / "demo.duckdb", rows=5000)


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite"


def url(db: Path | str, ledger: Path, *, policy: Path | str | None = None,
        **params: Any) -> str:
    query = {"policy": policy or demo_policy_path(), "ledger": ledger,
             "budget_epsilon": 3, "epsilon": 0.5, **params}
    text = "&".join(f"{k}={v}" for k, v in query.items() if v is not None)
    return f"privplan:///{db}?{text}"


@pytest.fixture
def engine(demo_db: Path, ledger: Path):
    e = sa.create_engine(url(demo_db, ledger))
    yield e
    e.dispose()


def entries(ledger: Path) -> list[str]:
    """The SQL of every charge in the ledger file, read with sqlite3 (not through privplan)."""
    if not ledger.exists():
        return []
    con = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute("SELECT sql FROM entries ORDER BY seq")]
    finally:
        con.close()


def spent(demo_db: Path, ledger: Path) -> pp.PureDP:
    with dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(3),
                       ledger=ledger) as c:
        return c.spent()


def read_sql(sql: str, con: Any, **kw: Any) -> pd.DataFrame:
    """pandas.read_sql, failing on any warning (pandas warns for non-SQLAlchemy connections)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = pd.read_sql(sql, con, **kw)
    assert [str(w.message) for w in caught] == []
    return df


@pytest.fixture
def forbid_session_sql(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any DP query (the only way a statement reaches private rows) fails the test."""
    def refuse(self: Session, sql: str, **kw: Any) -> Any:
        raise AssertionError(f"Session.sql ran: {sql}")

    monkeypatch.setattr(Session, "sql", refuse)


# ------------------------------------------------------------------------- answers, charges


def test_read_sql_answers_like_the_dbapi_cursor(engine: Any, demo_db: Path,
                                                tmp_path: Path) -> None:
    with noise_disabled():
        got = read_sql(GROUPED, engine)
        with dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(3),
                           epsilon=0.5) as con:
            cur = con.cursor().execute(GROUPED)
            want_rows, want_desc = cur.fetchall(), cur.description
    assert list(got.columns) == [d[0] for d in want_desc] == ["hospital", "n", "a"]
    assert list(got.itertuples(index=False, name=None)) == want_rows
    plain = duckdb.connect(str(demo_db), read_only=True)
    try:
        exact = plain.execute(GROUPED).fetchall()
    finally:
        plain.close()
    assert [r[:2] for r in want_rows] == [r[:2] for r in exact]


def test_each_read_is_charged_exactly_once(engine: Any, demo_db: Path, ledger: Path) -> None:
    sql = "SELECT COUNT(*) AS n FROM visits WHERE age >= ?"
    df = read_sql(sql, engine, params=(65,))
    assert list(df.columns) == ["n"] and len(df) == 1
    assert entries(ledger) == ["SELECT COUNT(*) AS n FROM visits WHERE age >= 65"]
    read_sql(GROUPED, engine)
    assert entries(ledger) == ["SELECT COUNT(*) AS n FROM visits WHERE age >= 65", GROUPED]
    df = read_sql(sa.text("SELECT SUM(age) AS s FROM visits WHERE sex = :s"), engine,
                  params={"s": "F"})
    assert list(df.columns) == ["s"] and len(df) == 1
    assert entries(ledger)[2:] == ["SELECT SUM(age) AS s FROM visits WHERE sex = 'F'"]
    engine.dispose()
    assert spent(demo_db, ledger) == pp.PureDP(1.5)  # 0.5 each (the regions overlap)


def test_text_and_core_statements_are_dp_queries(engine: Any, ledger: Path) -> None:
    table = sa.Table("visits", sa.MetaData(), autoload_with=engine)  # free: the policy
    assert entries(ledger) == []
    with engine.connect() as c:
        n = c.execute(sa.text("SELECT COUNT(*) AS n FROM visits WHERE hospital = :h"),
                      {"h": "A"}).scalar_one()
        rows = c.execute(sa.select(table.c.sex, sa.func.count().label("n"))
                         .group_by(table.c.sex).order_by(table.c.sex)).all()
    assert isinstance(n, int)
    assert [r[0] for r in rows] == ["F", "M"]
    assert [" ".join(sql.split()) for sql in entries(ledger)] == [
        "SELECT COUNT(*) AS n FROM visits WHERE hospital = 'A'",
        "SELECT visits.sex, count(*) AS n FROM visits GROUP BY visits.sex ORDER BY visits.sex",
    ]


def test_pooled_connections_share_one_budget(demo_db: Path, ledger: Path) -> None:
    """Each pooled connection is its own session; the ledger file composes them."""
    e = sa.create_engine(url(demo_db, ledger, budget_epsilon=1))
    try:
        with e.connect() as c1, e.connect() as c2:
            assert c1.connection.dbapi_connection is not c2.connection.dbapi_connection
            c1.exec_driver_sql("SELECT COUNT(*) FROM visits").all()
            c2.exec_driver_sql("SELECT COUNT(*) FROM visits").all()
            with pytest.raises(sa.exc.OperationalError) as info:
                c1.exec_driver_sql("SELECT SUM(age) FROM visits").all()
        assert isinstance(info.value.orig, dbapi.BudgetExceeded)
        assert "Nothing was spent" in str(info.value)
    finally:
        e.dispose()
    assert len(entries(ledger)) == 2


def test_rollback_and_transactions_are_no_ops_that_unspend_nothing(engine: Any,
                                                                   ledger: Path) -> None:
    with engine.connect() as c:
        assert c.get_isolation_level() == "AUTOCOMMIT"
        c.exec_driver_sql("SELECT COUNT(*) FROM visits").all()
        c.rollback()  # the pool's reset on return does the same
        c.commit()
    with pytest.raises(RuntimeError, match="after the query"), engine.begin() as c:
        c.exec_driver_sql("SELECT SUM(age) FROM visits").all()
        raise RuntimeError("after the query")  # the transaction is rolled back
    assert entries(ledger) == ["SELECT COUNT(*) FROM visits", "SELECT SUM(age) FROM visits"]
    assert engine.dialect.server_version_info == tuple(int(p) for p in
                                                       pp.__version__.split("."))
    assert engine.dialect.default_schema_name == "main"
    with pytest.raises(sa.exc.ArgumentError, match="AUTOCOMMIT"), engine.connect() as c:
        c.execution_options(isolation_level="SERIALIZABLE")


def test_dbapi_errors_arrive_wrapped(engine: Any, ledger: Path) -> None:
    with pytest.raises(pd.errors.DatabaseError, match="SELECT \\* refused") as info:
        read_sql("SELECT * FROM visits", engine)
    cause = info.value.__cause__
    assert isinstance(cause, sa.exc.ProgrammingError)
    assert isinstance(cause.orig, dbapi.ProgrammingError)
    assert isinstance(cause.orig.privplan_error, pp.UnsupportedQueryError)
    with engine.connect() as c, pytest.raises(sa.exc.NotSupportedError, match="executemany"):
        c.exec_driver_sql("SELECT COUNT(*) FROM visits WHERE age > ?", [(1,), (2,)])
    assert entries(ledger) == []


# ------------------------------------------------------------------------- free statements


@pytest.mark.usefixtures("forbid_session_sql")
def test_select_1_and_pre_ping_are_free(demo_db: Path, ledger: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pings: list[bool] = []
    original = PrivplanDialect.do_ping

    def spy(self: PrivplanDialect, dbapi_connection: Any) -> bool:
        pings.append(original(self, dbapi_connection))
        return pings[-1]

    monkeypatch.setattr(PrivplanDialect, "do_ping", spy)
    e = sa.create_engine(url(demo_db, ledger), pool_pre_ping=True)
    try:
        for _ in range(3):
            with e.connect() as c:
                assert c.execute(sa.text("SELECT 1")).all() == [(1,)]
                assert c.exec_driver_sql("SELECT 1 AS x, 'a'").all() == [(1, "a")]
                assert c.connection.dbapi_connection.spent() == pp.PureDP(0)
        assert read_sql("SELECT 1 AS one", e).to_dict("list") == {"one": [1]}
    finally:
        e.dispose()
    assert pings == [True, True, True]  # every checkout but the first (a new connection)
    assert entries(ledger) == []


def test_pre_ping_replaces_a_closed_connection(demo_db: Path, ledger: Path) -> None:
    e = sa.create_engine(url(demo_db, ledger), pool_pre_ping=True, pool_size=1)
    try:
        with e.connect() as c:
            first = c.connection.dbapi_connection
            first.close()  # as if it had died in the pool
        with e.connect() as c:
            assert c.connection.dbapi_connection is not first
            assert c.exec_driver_sql("SELECT COUNT(*) FROM visits").all()
    finally:
        e.dispose()
    assert entries(ledger) == ["SELECT COUNT(*) FROM visits"]


@pytest.mark.usefixtures("forbid_session_sql")
def test_information_schema_through_read_sql(engine: Any, ledger: Path) -> None:
    df = read_sql("SELECT table_name, column_name, data_type FROM information_schema.columns "
                  "WHERE table_name = 'visits' ORDER BY ordinal_position", engine)
    declared = yaml.safe_load(demo_policy_path().read_text())["tables"]["visits"]["columns"]
    assert df["column_name"].tolist() == list(declared)
    assert df["data_type"].tolist() == [POLICY_TYPES[c["type"]] for c in declared.values()]
    assert entries(ledger) == []


# ------------------------------------------------------------------------- inspector


@pytest.mark.usefixtures("forbid_session_sql")
def test_inspector_shows_the_policy(engine: Any, demo_db: Path, ledger: Path) -> None:
    policy = yaml.safe_load(demo_policy_path().read_text())["tables"]
    insp = sa.inspect(engine)
    assert insp.get_schema_names() == ["main"]
    assert insp.get_table_names() == list(policy) == ["visits", "hospitals"]
    assert insp.get_table_names(schema="main") == ["visits", "hospitals"]
    assert insp.get_table_names(schema="other") == []
    assert insp.get_view_names() == [] and insp.get_materialized_view_names() == []
    assert insp.has_table("visits") and insp.has_table("VISITS") and insp.has_table("hospitals")
    assert not insp.has_table("patients") and not insp.has_table("visits", schema="other")
    assert not insp.has_table("SELECT COUNT(*) FROM visits")  # what pandas asks first
    columns = insp.get_columns("visits")
    assert [c["name"] for c in columns] == list(policy["visits"]["columns"])
    for col, (name, declared) in zip(columns, policy["visits"]["columns"].items(), strict=True):
        assert type(col["type"]).__name__ == POLICY_TYPES[declared["type"]], name
        assert col["nullable"] is declared.get("nullable", True)
    sa_types = {c["name"]: c["type"] for c in columns}
    assert isinstance(sa_types["age"], sa.Integer) and isinstance(sa_types["cost"], sa.Float)
    assert isinstance(sa_types["visit_date"], sa.Date)
    assert isinstance(sa_types["insured"], sa.Boolean)
    assert isinstance(sa_types["hospital"], sa.String)
    # a public table the policy lists without columns: the columns the database has
    plain = duckdb.connect(str(demo_db), read_only=True)
    try:
        described = plain.execute("DESCRIBE hospitals").fetchall()
    finally:
        plain.close()
    assert [(c["name"], str(c["type"])) for c in insp.get_columns("hospitals")] == \
        [(r[0], r[1]) for r in described]
    assert insp.get_pk_constraint("visits") == {"constrained_columns": [], "name": None}
    assert insp.get_foreign_keys("visits") == []
    assert insp.get_indexes("visits") == []
    assert insp.get_unique_constraints("visits") == []
    assert insp.get_check_constraints("visits") == []
    with pytest.raises(sa.exc.NoSuchTableError):
        insp.get_columns("patients")
    meta = sa.MetaData()
    meta.reflect(engine)
    assert sorted(meta.tables) == ["hospitals", "visits"]
    assert list(meta.tables["visits"].c.keys()) == list(policy["visits"]["columns"])
    assert entries(ledger) == []


@pytest.mark.usefixtures("forbid_session_sql")
def test_inspector_schemas_and_not_null_from_the_policy(demo_db: Path, ledger: Path,
                                                        tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "tables:\n"
        "  visits:\n"
        "    privacy_unit: patient_id\n"
        "    max_rows_per_unit: 5\n"
        "    columns:\n"
        "      patient_id: {type: int, nullable: false}\n"
        "      visit_date: {type: date}\n"
        "      cost: {type: float, lower: 0, upper: 20000}\n"
        "  events:\n"
        "    schema: audit\n"
        "    columns:\n"
        "      at: {type: timestamp, nullable: false}\n"
        "      kind: {type: str}\n")
    e = sa.create_engine(url(demo_db, ledger, policy=policy))
    try:
        insp = sa.inspect(e)
        assert insp.get_schema_names() == ["main", "audit"]
        assert insp.get_table_names() == ["visits"]
        assert insp.get_table_names(schema="audit") == ["events"]
        assert insp.has_table("events", schema="audit") and not insp.has_table("events")
        got = [(c["name"], type(c["type"]).__name__, c["nullable"])
               for c in insp.get_columns("events", schema="audit")]
        assert got == [("at", "TIMESTAMP", False), ("kind", "VARCHAR", True)]
        got = [(c["name"], c["nullable"]) for c in insp.get_columns("visits")]
        assert got == [("patient_id", False), ("visit_date", True), ("cost", True)]
    finally:
        e.dispose()
    assert entries(ledger) == []


# ------------------------------------------------------------------------- the URL


@pytest.mark.parametrize("change,expected", [
    ({"epsilom": 0.5}, r"epsilom: is not a parameter privplan knows\. Fix: did you mean epsilon"),
    ({"ledger": None}, r"ledger: is missing\. Fix: add ledger=<the path of a SQLite ledger"),
    ({"policy": None}, r"policy: is missing\. Fix: add policy="),
    ({"budget_epsilon": None}, r"total budget is missing\. Fix: give exactly one: budget_eps"),
    ({"budget_rho": 1}, r"budget_epsilon and budget_rho"),
    ({"budget_epsilon": "abc"}, (r"budget_epsilon='abc': is not a positive finite number\. "
                                 r"Fix: write a number such as budget_epsilon=0\.5")),
    ({"budget_epsilon": -3}, r"budget_epsilon='-3': is not a positive finite number"),
    ({"epsilon": "nan"}, r"epsilon='nan': is not a positive finite number"),
    ({"epsilon": None, "rho": 0.1}, r"rho=0\.1: not a per-query budget for a PureDP session"),
    ({"budget_epsilon": None, "budget_rho": 1, "budget_delta": 1e-6},
     r"budget_delta: goes with budget_epsilon, not budget_rho"),
    ({"policy": "missing.yaml"}, r"policy='missing\.yaml': the policy cannot be read"),
])
def test_bad_url_parameter_fails_at_create_engine(demo_db: Path, ledger: Path,
                                                  change: dict[str, Any],
                                                  expected: str) -> None:
    params: dict[str, Any] = {"policy": demo_policy_path(), "budget_epsilon": 3,
                              "epsilon": 0.5, "ledger": ledger}
    params.update(change)
    text = "&".join(f"{k}={v}" for k, v in params.items() if v is not None)
    with pytest.raises(sa.exc.ArgumentError, match=expected) as info:
        sa.create_engine(f"privplan:///{demo_db}?{text}")
    assert "privplan URL parameter" in str(info.value)
    assert not ledger.exists()  # nothing opened, nothing spent


def test_repeated_parameter_and_host_are_refused(demo_db: Path, ledger: Path) -> None:
    with pytest.raises(sa.exc.ArgumentError, match="epsilon: is given 2 times"):
        sa.create_engine(url(demo_db, ledger) + "&epsilon=0.25")
    with pytest.raises(sa.exc.ArgumentError, match="privplan:///relative"):
        sa.create_engine(url(demo_db, ledger).replace("privplan:///", "privplan://host/"))
    assert not ledger.exists()


def test_url_budgets_are_exact_and_typed(demo_db: Path, ledger: Path) -> None:
    e = sa.create_engine(url(demo_db, ledger, budget_epsilon=2, budget_delta="1e-6",
                             epsilon=0.1, delta="1e-8"))
    try:
        with e.connect() as c:
            con = c.connection.dbapi_connection
            assert con.session.budget == pp.ApproxDP(2, "1e-6")
            cur = con.cursor().execute("SELECT COUNT(*) FROM visits")
            assert cur.cost.epsilon == pp.ApproxDP("0.1", 0).epsilon  # exactly one tenth
    finally:
        e.dispose()
    e = sa.create_engine(url(demo_db, ledger, budget_epsilon=None, epsilon=None,
                             budget_rho="0.5", rho="0.125"))
    try:  # the ledger was bound to the ApproxDP total: another definition is refused
        with pytest.raises(sa.exc.OperationalError, match="budget"), e.connect():
            pass
    finally:
        e.dispose()


def test_importing_privplan_does_not_import_sqlalchemy() -> None:
    out = subprocess.run(
        [sys.executable, "-c",
         "import sys, privplan, privplan.dbapi; print('sqlalchemy' in sys.modules)"],
        capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    assert out == "False"


def test_intervals_in_the_url(demo_db: Path, ledger: Path) -> None:
    e = sa.create_engine(url(demo_db, ledger, intervals="true"))
    try:
        df = read_sql("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital", e)
    finally:
        e.dispose()
    assert list(df.columns) == ["hospital", "n", "n_low", "n_high"]
    assert ((df["n_low"] < df["n"]) & (df["n"] < df["n_high"])).all()
    assert len(entries(ledger)) == 1
    with pytest.raises(sa.exc.ArgumentError, match="intervals=yes.*true or false"):
        sa.create_engine(url(demo_db, ledger, intervals="yes"))


def test_composition_pld_in_the_url(demo_db: Path, ledger: Path) -> None:
    """composition=pld: an (ε, δ) total composed by exact Gaussian PLDs; the per-query default
    is checked the PLD way (mu=, or epsilon with delta > 0) before anything is opened."""
    e = sa.create_engine(url(demo_db, ledger, budget_epsilon=1, budget_delta=1e-6,
                             epsilon=None, mu=0.05, composition="pld"))
    try:
        with e.connect() as c:
            c.exec_driver_sql("SELECT COUNT(*) FROM visits").all()
            sess = c.connection.dbapi_connection.session
            assert sess.pld is not None and sess.spent() == pp.GDP(0.05)
    finally:
        e.dispose()
    for bad in ({"composition": "PLD"}, {"composition": "pld"}):  # PureDP total / no delta
        with pytest.raises(sa.exc.ArgumentError, match="composition"):
            sa.create_engine(url(demo_db, ledger, **bad)).connect()
    with pytest.raises(sa.exc.ArgumentError, match="delta > 0"):
        sa.create_engine(url(demo_db, ledger, budget_epsilon=1, budget_delta=1e-6, epsilon=0.5,
                             composition="pld")).connect()
