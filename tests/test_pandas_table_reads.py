"""pandas' whole-table reads through privplan's DB-API and SQLAlchemy dialect (real pandas, real
SQLAlchemy): refused with what, why and the DP query to use instead, never the misleading
"table 'sqlite_master' is not in the policy", and nothing spent."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

import privplan as pp
from privplan import dbapi
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.testing import noise_disabled

sa.dialects.registry.register("privplan", "privplan.sqlalchemy_dialect", "PrivplanDialect")

FIX = 'pandas.read_sql("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital"'
WHY = "it would release every row, and privplan releases only differentially private aggregates"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("reads") / "demo.duckdb", rows=1000)


@pytest.mark.filterwarnings("ignore:pandas only supports SQLAlchemy:UserWarning")
def test_read_sql_table_over_the_dbapi(demo_db: Path) -> None:
    with dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(1),
                       epsilon=0.5) as con:
        with pytest.raises(dbapi.ProgrammingError) as caught:
            pd.read_sql_table("visits", con)
        message = str(caught.value)
        assert message.startswith("pandas.read_sql_table('visits', con)")
        assert "sqlite_master" in message and "not in the policy" not in message
        assert WHY in message and FIX + ", con)" in message
        with pytest.raises(dbapi.ProgrammingError, match=r"pandas\.read_sql\('visits', con\) "
                                                         r"passes the table name 'visits'"):
            pd.read_sql("visits", con)
        assert con.spent() == pp.PureDP(0)
        # the fix the message gives works, and is charged
        with noise_disabled():
            out = pd.read_sql("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital",
                              con)
        assert list(out["hospital"]) == ["A", "B", "C", "D"] and con.spent() == pp.PureDP(0.5)


def test_read_sql_table_through_sqlalchemy(demo_db: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    engine = sa.create_engine(f"privplan:///{demo_db}?policy={demo_policy_path()}"
                              f"&ledger={ledger}&budget_epsilon=3&epsilon=0.5")
    try:
        for read in (lambda: pd.read_sql_table("visits", engine),
                     lambda: pd.read_sql("visits", engine)):
            with pytest.raises(pd.errors.DatabaseError) as caught:  # (pandas wraps it)
                read()
            message = str(caught.value)
            assert "pandas.read_sql_table('visits', engine)" in message
            assert "releases no aggregate" not in message
            assert WHY in message and FIX + ", engine)" in message
    finally:
        engine.dispose()
    assert sqlite3.connect(ledger).execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0


def test_other_row_reads_keep_their_own_message(demo_db: Path) -> None:
    """Only the whole table is read_sql_table's: a few columns stay 'releases no aggregate'."""
    with dbapi.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(1),
                       epsilon=0.5) as con:
        with pytest.raises(dbapi.ProgrammingError, match="releases no aggregate"):
            con.cursor().execute("SELECT visits.age, visits.hospital FROM visits")
        assert con.spent() == pp.PureDP(0)
