"""Data in, the way DuckDB takes it: CSV and Parquet files as the database, Arrow tables and
Polars frames through register(). Oracle: with noise off, every form answers what the DuckDB
file answers (and what plain SQL over it says)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import privplan as pp
from privplan.cli import main
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.testing import noise_disabled

POLICY = pp.Policy.from_yaml(demo_policy_path())
QUERY = ("SELECT hospital, COUNT(*) AS n, SUM(cost) AS c, AVG(age) AS a FROM visits "
         "WHERE insured GROUP BY hospital ORDER BY hospital")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("data_in")
    db = write_demo_database(d / "d.duckdb", rows=3_000)
    con = duckdb.connect(str(db))
    con.execute(f"COPY visits TO '{d / 'visits.csv'}' (HEADER)")
    con.execute(f"COPY visits TO '{d / 'visits.parquet'}' (FORMAT parquet)")
    con.close()
    return {"duckdb": db, "csv": d / "visits.csv", "parquet": d / "visits.parquet"}


def _answer(database: object, register: object = None) -> list[list[object]]:
    with pp.connect(database, policy=POLICY, budget=pp.PureDP(10)) as s, noise_disabled():
        if register is not None:
            s.register("visits", register)
        return s.sql(QUERY, epsilon=1).df.round(6).values.tolist()


def _frame(files: dict[str, Path]) -> pd.DataFrame:
    con = duckdb.connect(str(files["duckdb"]), read_only=True)
    df = con.sql("SELECT * FROM visits").df()
    con.close()
    return df


def test_files_answer_like_the_database(files: dict[str, Path]) -> None:
    want = _answer(files["duckdb"])
    con = duckdb.connect(str(files["duckdb"]), read_only=True)
    plain = con.sql("SELECT hospital, COUNT(*), SUM(LEAST(GREATEST(cost, 0), 20000)) FROM "
                    "visits WHERE insured GROUP BY hospital ORDER BY hospital").fetchall()
    con.close()
    assert [(h, n) for h, n, _, _ in want] == [(h, n) for h, n, _ in plain]
    assert _answer(files["csv"]) == want
    assert _answer(files["parquet"]) == want


@pytest.mark.parametrize("form", ["arrow", "batches", "polars", "lazy"])
def test_arrow_and_polars_register(files: dict[str, Path], form: str) -> None:
    df = _frame(files)
    table = pa.Table.from_pandas(df, preserve_index=False)
    data = {"arrow": lambda: table,
            "batches": lambda: pa.RecordBatchReader.from_batches(table.schema,
                                                                 table.to_batches()),
            "polars": lambda: pl.from_arrow(table),
            "lazy": lambda: pl.from_arrow(table).lazy()}[form]()
    assert _answer(":memory:", data) == _answer(files["duckdb"])


def test_csv_values_are_read_in_the_policy_types(tmp_path: Path) -> None:
    """Every CSV column is read as text and converted to its policy type: a value that does not
    convert is NULL (as in any column stored in another type), never a sniffed type or an
    error that depends on the data."""
    (tmp_path / "t.csv").write_text("x,s\n1,a\n2,b\nnot a number,c\n4,d\n")
    policy = {"tables": {"t": {"columns": {"x": {"type": "int", "lower": 0, "upper": 10},
                                           "s": {"type": "str"}}}}}
    with pp.connect(tmp_path / "t.csv", policy=policy, budget=pp.PureDP(10)) as s, \
            noise_disabled():
        row = s.sql("SELECT COUNT(*) AS n, COUNT(x) AS nx, SUM(x) AS sx FROM t",
                    epsilon=1).df.iloc[0]
    assert (row["n"], row["nx"], row["sx"]) == (4, 3, 7)


def test_a_file_for_a_policy_of_several_tables_is_refused(files: dict[str, Path]) -> None:
    policy = pp.Policy.from_yaml(Path(demo_policy_path()).parent / "policy_patients.yaml")
    two = policy.to_dict()
    two["tables"]["other"] = {"columns": {"x": {"type": "int"}}}
    with pytest.raises(pp.PolicyError, match=r"one table, but the policy declares 2 private "
                                             r"tables \(visits, other\).*register\(\)"):
        pp.connect(files["csv"], policy=two, budget=pp.PureDP(1))


def test_files_that_are_not_databases_are_named(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("hello")
    with pytest.raises(pp.PolicyError, match="cannot be opened as a DuckDB database"):
        pp.connect(tmp_path / "notes.db", policy=POLICY, budget=pp.PureDP(1))
    with pytest.raises(pp.PolicyError, match="does not exist"):
        pp.connect(tmp_path / "missing.csv", policy=POLICY, budget=pp.PureDP(1))
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(pp.PolicyError, match="could not read it as Parquet"):
        pp.connect(tmp_path / "bad.parquet", policy=POLICY, budget=pp.PureDP(1))
    with pytest.raises(pp.PolicyError, match="takes a pandas or Polars DataFrame"), \
            pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(1)) as s:
        s.register("visits", [1, 2, 3])


def test_the_cli_takes_a_csv_database(files: dict[str, Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture) -> None:
    assert main(["query", "SELECT COUNT(*) AS n FROM visits", "--database", str(files["csv"]),
                 "--policy", str(demo_policy_path()), "--total", "1", "--epsilon", "1",
                 "--ledger", str(tmp_path / "l.sqlite"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost"] == "ε=1"


def test_a_callers_connection_stays_open_and_clean_after_close(tmp_path: Path) -> None:
    """A session over a connection the caller passed in leaves it open (it is theirs), without
    the tables the session registered on it; a session that opened its own closes it."""
    policy = {"tables": {name: {"columns": {"x": {"type": "int", "lower": 0, "upper": 9}}}
                         for name in ("t", "u")}}
    csv = tmp_path / "t.csv"
    csv.write_text("x\n1\n2\n")
    con = duckdb.connect()
    con.execute("CREATE TABLE mine AS SELECT 42 AS answer")
    with pp.connect(con, policy=policy, budget=pp.PureDP(1)) as sess:
        sess.register("t", pd.DataFrame({"x": [1, 2, 3]}))
        sess.register("u", csv)
        sess.sql("SELECT COUNT(*) FROM t", epsilon=0.5)
    assert con.execute("SELECT answer FROM mine").fetchall() == [(42,)]
    assert con.execute("SELECT current_setting('python_enable_replacements')"
                       ).fetchone()[0] is True  # the caller's setting, restored
    names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables")
             .fetchall()}
    assert "t" not in names and "u" not in names
    own = pp.connect(":memory:", policy=policy, budget=pp.PureDP(1))
    engine_con = own.engine.con
    own.close()
    with pytest.raises(duckdb.ConnectionException):
        engine_con.execute("SELECT 1")
