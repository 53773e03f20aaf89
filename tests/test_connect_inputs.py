"""pp.connect, register and privplan.dbapi.connect recognise what they were given: URLs by
scheme, Spark objects and words, an engine= keyword, globs of files, DuckDB relations, a file
another DuckDB connection of this process holds, a CSV without a header row, a privplan://
URL. Each refusal says what it is and what to pass, and writes no ledger; each accepted form
answers like the data it stands for (noise off)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan import dbapi
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.testing import noise_disabled

POLICY = {"tables": {"sales": {"columns": {"amount": {"type": "int", "lower": 0, "upper": 100},
                                           "region": {"type": "str",
                                                      "public_values": ["n", "s"]}}}}}
QUERY = "SELECT region, COUNT(*) AS n, SUM(amount) AS a FROM sales GROUP BY region ORDER BY region"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("connect") / "d.duckdb", rows=300)


def _answer(database: Any = ":memory:", data: Any = None) -> list[list[Any]]:
    with pp.connect(database, policy=POLICY, budget=pp.PureDP(10)) as s, noise_disabled():
        if data is not None:
            s.register("sales", data)
        return s.sql(QUERY, epsilon=1).df.values.tolist()


def _refused(database: Any, tmp_path: Path, match: str, **kw: Any) -> str:
    """The refusal's message; the ledger path given is never created."""
    ledger = tmp_path / "never.sqlite"
    with pytest.raises(pp.PolicyError, match=match) as caught:
        pp.connect(database, policy=POLICY, budget=pp.PureDP(1), ledger=ledger, **kw)
    assert not ledger.exists()
    return str(caught.value)


# ----------------------------------------------------------------------------- pp.connect


@pytest.mark.parametrize(("url", "said"), [
    ("postgresq://ann@db.example:5432/shop", "did you mean postgresql://"),
    ("postgressql://ann@db.example/shop", "did you mean postgresql://"),
    ("pg://ann@db.example/shop", "did you mean postgresql://"),
    ("mysql://ann@db.example/shop", "'mysql' is not supported; supported are postgresql://"),
    ("postgresql+psycopg://ann@db.example/shop", "drop the driver"),
    ("privplan:///d.duckdb?policy=p.yaml", "privplan.dbapi.connect"),
    ("spark://master:7077", ".master('spark://master:7077').getOrCreate()"),
    ("https://example.org/sales.parquet", "'https' is not supported"),
])
def test_a_url_is_recognised_by_its_scheme(url: str, said: str, tmp_path: Path) -> None:
    message = _refused(url, tmp_path, "URL")
    assert said in message
    assert "Accepted:" in message or url.startswith("privplan:")


def test_a_urls_password_is_not_shown(tmp_path: Path) -> None:
    message = _refused("postgresq://ann:s3cret@db.example/shop", tmp_path, "postgresq")
    assert "s3cret" not in message and "ann:***@db.example" in message


def test_the_word_spark_and_a_builder_say_how_to_pass_a_session(tmp_path: Path) -> None:
    assert "SparkSession.builder.getOrCreate()" in _refused("spark", tmp_path, "not a SparkSession")
    pyspark_sql = pytest.importorskip("pyspark.sql")
    builder = pyspark_sql.SparkSession.builder  # (a builder starts no JVM)
    message = _refused(builder, tmp_path, r"SparkSession.builder\), not a SparkSession")
    assert "call .getOrCreate()" in message


def test_objects_that_are_no_database_are_named(tmp_path: Path) -> None:
    frame = pd.DataFrame({"amount": [1], "region": ["n"]})
    assert "s.register('visits', data)" in _refused(frame, tmp_path, "pandas.DataFrame")
    assert "Accepted:" in _refused(42, tmp_path, "builtins.int")
    assert "did you mean ':memory:'" in _refused("memory", tmp_path, "neither a file")


def test_a_missing_file_lists_every_kind_of_database(tmp_path: Path) -> None:
    message = _refused(tmp_path / "nope.duckdb", tmp_path, "does not exist")
    assert "postgresql:// URL" in message and "SparkSession" in message


def test_there_is_no_engine_keyword(demo_db: Path) -> None:
    with pytest.raises(TypeError, match=r"takes no engine= keyword.*SparkSession.builder"):
        pp.connect(demo_db, policy=POLICY, budget=pp.PureDP(1), engine="spark")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"pp.connect\('postgresql://user@host"):
        pp.connect(demo_db, policy=POLICY, budget=pp.PureDP(1), engine="postgres")  # type: ignore[arg-type]


def test_a_file_another_connection_holds_says_to_pass_that_connection(demo_db: Path,
                                                                       tmp_path: Path) -> None:
    policy = demo_policy_path()
    con = duckdb.connect(str(demo_db))  # read-write: privplan would open it read only
    try:
        ledger = tmp_path / "l.sqlite"
        with pytest.raises(pp.PolicyError, match=r"already open in this process by another "
                                                 r"DuckDB connection.*connect\(con, "):
            pp.connect(demo_db, policy=policy, budget=pp.PureDP(1), ledger=ledger)
        assert not ledger.exists()
        with pp.connect(con, policy=policy, budget=pp.PureDP(1)) as s:  # the fix works
            assert s.sql("SELECT COUNT(*) AS n FROM visits", epsilon=1).df.shape == (1, 1)
    finally:
        con.close()


# ----------------------------------------------------------------------------- register


@pytest.fixture
def parts(tmp_path: Path) -> Path:
    (tmp_path / "sales1.csv").write_text("amount,region\n10,n\n20,s\n")
    (tmp_path / "sales2.csv").write_text("amount,region\n30,n\n")
    for i, rows in enumerate(((10, "n"), (20, "s")), start=1):
        duckdb.sql(f"COPY (SELECT {rows[0]} AS amount, '{rows[1]}' AS region) TO "
                   f"'{tmp_path / f'sales{i}.parquet'}' (FORMAT parquet)")
    return tmp_path


def test_a_glob_reads_every_matching_file_as_one_table(parts: Path) -> None:
    frame = pd.DataFrame({"amount": [10, 20, 30], "region": ["n", "s", "n"]})
    want = _answer(data=frame)
    assert _answer(data=str(parts / "sales*.csv")) == want
    assert _answer(str(parts / "sales*.csv")) == want  # (as the database: one private table)
    assert _answer(data=parts / "*.parquet") == _answer(data=frame.iloc[:2])


def test_a_glob_that_matches_nothing_names_the_pattern_and_directory(parts: Path) -> None:
    with pp.connect(policy=POLICY, budget=pp.PureDP(1)) as s:
        with pytest.raises(pp.PolicyError, match=r"no file matches the pattern '.*nope\*\.csv' "
                                                 r"\(the directory '.*' holds 2 \.csv file"):
            s.register("sales", str(parts / "nope*.csv"))
        with pytest.raises(pp.PolicyError, match="the directory '.*missing' does not exist"):
            s.register("sales", str(parts / "missing" / "*.csv"))
        with pytest.raises(pp.PolicyError, match=r"is a directory.*pass a glob"):
            s.register("sales", parts)


def test_files_of_a_glob_must_have_the_same_columns(parts: Path) -> None:
    (parts / "sales3.csv").write_text("amount,region,extra\n1,n,x\n")
    with pp.connect(policy=POLICY, budget=pp.PureDP(1)) as s, \
            pytest.raises(pp.PolicyError, match=r"do not all have the same columns: "
                                                r"'.*sales3.csv' differs"):
        s.register("sales", str(parts / "sales*.csv"))
    duckdb.sql(f"COPY (SELECT 5::BIGINT AS amount, 'n' AS region) TO "
               f"'{parts / 'sales3.parquet'}' (FORMAT parquet)")
    with pp.connect(policy=POLICY, budget=pp.PureDP(1)) as s, \
            pytest.raises(pp.PolicyError, match="do not all have the same types"):
        s.register("sales", str(parts / "sales*.parquet"))


def test_a_glob_of_files_with_invalid_text_is_refused_at_registration(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    for i, raw in enumerate((b"n", b"\xff")):
        table = pa.table({"amount": pa.array([i], pa.int64()),
                          "region": pa.array([raw], pa.binary()).view(pa.string())})
        pq.write_table(table, tmp_path / f"p{i}.parquet")
    with pp.connect(policy=POLICY, budget=pp.PureDP(1)) as s:
        with pytest.raises(pp.PolicyError, match="not valid UTF-8"):
            s.register("sales", str(tmp_path / "p*.parquet"))
        with pytest.raises(pp.PolicyError, match="no such table|has no such table"):
            s.sql("SELECT COUNT(*) FROM sales", epsilon=1)  # (nothing stays registered)


def test_a_duckdb_relation_is_registered_once(parts: Path) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (10, 'n'), (20, 's'), (30, 'n')) "
                "AS v(amount, region)")
    relation = con.sql("SELECT * FROM t")
    with pp.connect(policy=POLICY, budget=pp.PureDP(10)) as s, noise_disabled():
        s.register("sales", relation)
        con.execute("INSERT INTO t VALUES (99, 's')")  # (after registration: not seen)
        got = s.sql(QUERY, epsilon=1).df.values.tolist()
    assert got == _answer(data=pd.DataFrame({"amount": [10, 20, 30],
                                             "region": ["n", "s", "n"]}))
    con.close()
    with pp.connect(policy=POLICY, budget=pp.PureDP(1)) as s, \
            pytest.raises(pp.PolicyError, match=r"relation could not be read.*relation.arrow\(\)"):
        s.register("sales", relation)


def test_data_registered_again_in_another_form_replaces_it(parts: Path) -> None:
    frame = pd.DataFrame({"amount": [7], "region": ["n"]})
    with pp.connect(policy=POLICY, budget=pp.PureDP(10)) as s, noise_disabled():
        s.register("sales", parts / "sales1.csv")
        s.register("sales", frame)  # (a file's view, then a frame: was an InternalError)
        assert s.sql(QUERY, epsilon=1).df.values.tolist() == [["n", 1, 7], ["s", 0, 0]]
        s.register("sales", parts / "sales2.csv")
        assert s.sql(QUERY, epsilon=1).df.values.tolist() == [["n", 1, 30], ["s", 0, 0]]
        for bad in ([1, 2], parts / "nope*.csv", parts):  # refused: the table stays as it was
            with pytest.raises(pp.PolicyError):
                s.register("sales", bad)
            assert s.sql(QUERY, epsilon=1).df.values.tolist() == [["n", 1, 30], ["s", 0, 0]]


def test_a_data_file_that_cannot_be_read_writes_no_ledger(tmp_path: Path) -> None:
    (tmp_path / "bad.parquet").write_text("not parquet")
    assert "could not read it as Parquet" in _refused(tmp_path / "bad.parquet", tmp_path,
                                                      "cannot register")


def test_a_csv_without_a_header_row_is_named_without_its_first_row(tmp_path: Path) -> None:
    """The first line of a CSV without a header is a row of private data, which DuckDB reports
    as the column names: the message says so and shows none of it."""
    (tmp_path / "sales.csv").write_text("4711,Zanzibar\n4712,Ulaanbaatar\n")
    with pp.connect(tmp_path / "sales.csv", policy=POLICY, budget=pp.PureDP(1)) as s, \
            pytest.raises(pp.PolicyError) as caught:
        s.sql("SELECT COUNT(*) FROM sales", epsilon=1)
    message = str(caught.value)
    assert "looks like data, not a header" in message
    assert "add a header line with the policy's column names (e.g. amount,region)" in message
    assert "4711" not in message and "Zanzibar" not in message
    # a header that names other columns: still none of its names shown (it could be data)
    (tmp_path / "other.csv").write_text("Mwangi,Okafor\nx,y\n")
    with pp.connect(tmp_path / "other.csv", policy=POLICY, budget=pp.PureDP(1)) as s, \
            pytest.raises(pp.PolicyError, match="does not name the policy's column") as caught:
        s.sql("SELECT COUNT(*) FROM sales", epsilon=1)
    assert "Mwangi" not in str(caught.value) and "2 column(s)" in str(caught.value)


# ----------------------------------------------------------------------------- dbapi.connect


def test_dbapi_takes_the_dialects_url(demo_db: Path, tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    ledger = tmp_path / "l.sqlite"
    url = (f"privplan:///{demo_db}?policy={demo_policy_path()}&ledger={ledger}"
           "&budget_epsilon=3&epsilon=0.5")
    with dbapi.connect(url) as con:
        cur = con.cursor()
        cur.execute("SELECT COUNT(*) AS n FROM visits")
        assert len(cur.fetchall()) == 1 and con.remaining() == pp.PureDP(2.5)
    assert sqlite3.connect(ledger).execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 1
    with pytest.raises(dbapi.ProgrammingError, match="URL parameter polcy: .*did you mean policy"):
        dbapi.connect(url.replace("policy=", "polcy="))
    with pytest.raises(dbapi.ProgrammingError, match=r"got a privplan:// URL and the keywords "
                                                     r"budget= too"):
        dbapi.connect(url, budget=pp.PureDP(1))


def test_dbapi_names_what_is_missing_or_wrong(demo_db: Path) -> None:
    with pytest.raises(TypeError, match=r"missing policy= and budget=.*privplan:///"):
        dbapi.connect(str(demo_db))
    with pytest.raises(TypeError, match="takes no engine= keyword"):
        dbapi.connect(str(demo_db), policy=POLICY, budget=pp.PureDP(1), engine="duckdb")  # type: ignore[arg-type]
    with pp.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(1)) as s, \
            pytest.raises(TypeError, match=r"dbapi.Connection\(session"):
        dbapi.connect(s)
    with pytest.raises(dbapi.ProgrammingError, match="did you mean postgresql://"):
        dbapi.connect("postgresq://a@b/c", policy=POLICY, budget=pp.PureDP(1))


def test_a_policy_source_csv_without_a_header_is_named_the_same_way(tmp_path: Path) -> None:
    csv = tmp_path / "sales.csv"
    csv.write_text("4711,Zanzibar\n")
    policy = {"tables": {"sales": {**POLICY["tables"]["sales"], "source": str(csv)}}}
    with pp.connect(policy=policy, budget=pp.PureDP(1)) as s, \
            pytest.raises(pp.PolicyError, match="does not name the policy's column") as caught:
        s.sql("SELECT COUNT(*) FROM sales", epsilon=1)
    assert "Zanzibar" not in str(caught.value) and "4711" not in str(caught.value)
