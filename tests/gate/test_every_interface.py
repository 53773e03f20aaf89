"""Every interface that answers a query crosses the pre-charge gate before anything is charged.

The gate (:func:`privplan.gate.admit`) is made to refuse everything — a spy around the real
one, which records the call and raises — and each interface is asked a query it answers
normally: ``Session.sql`` and ``explain``, a nested SELECT, a per-unit subquery, a BigQuery
clause, ``df.dp``, DB-API, SQLAlchemy, a batch report and the CLI. Each must refuse, having
called the gate, with the durable ledger unchanged. A new interface that reached the charge by a
path of its own would answer here (and fail this test). With the real gate each answers
(:func:`test_each_interface_answers_through_the_real_gate`), so the refusal above is the gate's.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import sqlalchemy as sa

import privplan as pp
import privplan.session.session as session_module
from privplan import dbapi
from privplan.cli import main as cli
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.errors import PrivplanError, UnsupportedQueryError
from privplan.ledger import open_ledger
from privplan.report import ReportSpec, run_report

pytestmark = pytest.mark.invariant(8)

sa.dialects.registry.register("privplan", "privplan.sqlalchemy_dialect", "PrivplanDialect")

QUERY = "SELECT COUNT(*) AS n FROM visits WHERE age >= 65"
REPORT = """name: gate
database: demo.duckdb
policy: policy.yaml
budget: {epsilon: 1.0}
queries:
  - name: seniors
    sql: SELECT COUNT(*) AS n FROM visits WHERE age >= 65
"""


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("gate") / "demo.duckdb", rows=2000)


def _session(db: Path, ledger: Path, policy: Path | None = None) -> pp.Session:
    return pp.connect(db, policy=policy or demo_policy_path(), budget=pp.PureDP(5),
                      ledger=ledger)


def _sql(db: Path, ledger: Path, sql: str, policy: Path | None = None) -> Any:
    with _session(db, ledger, policy) as sess:
        if "DIFFERENTIAL_PRIVACY" in sql:
            return sess.sql(sql)  # (the clause carries the budget)
        return sess.sql(sql, epsilon=0.5)


def _explain(db: Path, ledger: Path) -> Any:
    with _session(db, ledger) as sess:
        return sess.explain(QUERY, epsilon=0.5)


def _dataframe(db: Path, ledger: Path) -> Any:
    frame = pd.DataFrame({"age": [30, 70, 80], "cost": [1.0, 2.0, 3.0]})
    frame.dp.configure(budget=pp.PureDP(5), bounds={"age": (0, 100), "cost": (0, 10)},
                       ledger=ledger)
    return frame.dp.sql("SELECT COUNT(*) AS n FROM df WHERE age >= 65", epsilon=0.5)


def _dbapi(db: Path, ledger: Path) -> Any:
    with dbapi.connect(db, policy=demo_policy_path(), budget=pp.PureDP(5), epsilon=0.5,
                       ledger=ledger) as con:
        cur = con.cursor()
        cur.execute(QUERY)
        return cur.fetchall()


def _sqlalchemy(db: Path, ledger: Path) -> Any:
    engine = sa.create_engine(f"privplan:///{db}?policy={demo_policy_path()}&ledger={ledger}"
                              "&budget_epsilon=5&epsilon=0.5")
    try:
        with engine.connect() as con:
            return con.execute(sa.text(QUERY)).fetchall()
    finally:
        engine.dispose()


def _report(db: Path, ledger: Path) -> Any:
    work = ledger.parent / "report"
    work.mkdir(exist_ok=True)
    (work / "demo.duckdb").unlink(missing_ok=True)
    (work / "demo.duckdb").symlink_to(db)
    shutil.copy(demo_policy_path(), work / "policy.yaml")
    (work / "gate.yaml").write_text(REPORT)
    return run_report(ReportSpec.load(work / "gate.yaml"), work / "out", ledger=ledger)


def _cli(db: Path, ledger: Path) -> Any:
    code = cli(["query", QUERY, "--database", str(db), "--policy", str(demo_policy_path()),
                "--ledger", str(ledger), "--total", "5", "--epsilon", "0.5"])
    if code != 0:
        raise UnsupportedQueryError(f"the CLI exited with {code}")
    return code


INTERFACES: dict[str, Callable[[Path, Path], Any]] = {
    "Session.sql": lambda db, ledger: _sql(db, ledger, QUERY),
    "Session.explain": _explain,
    "nested SELECT": lambda db, ledger: _sql(
        db, ledger, "SELECT n * 2 AS twice FROM (SELECT COUNT(*) AS n FROM visits) AS s"),
    "WITH query": lambda db, ledger: _sql(
        db, ledger, "WITH s AS (SELECT COUNT(*) AS n FROM visits) SELECT n FROM s"),
    "per-unit subquery": lambda db, ledger: _sql(
        db, ledger, "SELECT AVG(c) AS a FROM (SELECT patient_id, COUNT(*) AS c FROM visits "
                    "GROUP BY patient_id) AS u", demo_policy_path().with_name(
                        "policy_patients.yaml")),
    "BigQuery clause": lambda db, ledger: _sql(
        db, ledger, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, delta=0) "
                    "COUNT(*) AS n FROM visits"),
    "df.dp": _dataframe,
    "DB-API": _dbapi,
    "SQLAlchemy": _sqlalchemy,
    "report": _report,
    "CLI": _cli,
}


@pytest.fixture
def refusing_gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The gate, made to refuse everything; yields the texts it was asked to admit."""
    asked: list[str] = []

    def admit(engine: Any, planned: Any, statements: Any, schemas: Any) -> Any:
        asked.append(planned.plan.sql)
        raise UnsupportedQueryError("refused by the test's gate")

    monkeypatch.setattr(session_module, "admit", admit)
    yield asked


def _spent(ledger: Path) -> Any:
    """What the durable ledger recorded (None: nothing yet)."""
    if not ledger.exists():
        return None
    book = open_ledger(ledger)
    try:
        return book.recorded_total()
    finally:
        book.close()


@pytest.mark.parametrize("interface", list(INTERFACES))
def test_each_interface_crosses_the_gate(interface: str, demo_db: Path, tmp_path: Path,
                                         refusing_gate: list[str]) -> None:
    ledger = tmp_path / "ledger.sqlite"
    with pytest.raises((PrivplanError, dbapi.Error, sa.exc.DBAPIError)):
        INTERFACES[interface](demo_db, ledger)
    assert refusing_gate, f"{interface} answered without asking the gate"
    assert _spent(ledger) in (None, pp.PureDP(0))


@pytest.mark.parametrize("interface", list(INTERFACES))
def test_each_interface_answers_through_the_real_gate(interface: str, demo_db: Path,
                                                      tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    INTERFACES[interface](demo_db, ledger)
    spent = _spent(ledger)
    assert (spent in (None, pp.PureDP(0))) == (interface == "Session.explain"), spent
