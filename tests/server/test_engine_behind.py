"""A PostgreSQL database behind ``privplan serve`` (``--database postgresql://...``): the same
protocol, budgets and catalog answers as over a DuckDB file, the rows read by PostgreSQL.

Oracle: PostgreSQL's own plain answer. At ε = 10⁶ per query the discrete Laplace noise of a
count is 0 with probability 1 − 2e^(−10⁶)-ish (its scale is 10⁻⁶), so the served counts equal
the plain ones exactly; and each answer's charge is read back from the ledger file.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import duckdb
import psycopg
import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger.store import SQLiteLedger
from privplan.server import serve
from privplan.server.users import add_user, make_user
from tests.servers.postgres_server import load_frame

GROUPED = "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital"


@pytest.fixture(scope="module")
def served_url(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A database of its own on the throw-away server, with the demo's tables."""
    parts = urlsplit(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("CREATE DATABASE served")
    url = urlunsplit(parts._replace(path="/served"))
    db = write_demo_database(tmp_path_factory.mktemp("behind") / "d.duckdb", rows=3000)
    with duckdb.connect(str(db), read_only=True) as con:
        for table in ("visits", "hospitals"):
            frame = con.sql(f"SELECT * FROM {table}").df()
            types = {r[0]: r[1] for r in con.sql(f"DESCRIBE {table}").fetchall()}
            load_frame(url, table, frame, types)
    return url


@pytest.fixture
def server(served_url: str, tmp_path: Path) -> Iterator[tuple[object, Path]]:
    users = tmp_path / "users.json"
    add_user(users, make_user("ann", "pw-ann", {"epsilon": 1e7}))
    ledger = tmp_path / "total.ledger.sqlite"
    running = serve(served_url, policy=demo_policy_path(), ledger=ledger, users=users,
                    budget=pp.PureDP(1e7), listen=("127.0.0.1", 0))
    try:
        yield running, ledger
    finally:
        running.close()


def test_a_postgresql_database_behind_the_server_answers_as_postgresql_counts(
        served_url: str, server: tuple[object, Path]) -> None:
    running, ledger = server
    host, port = running.address  # type: ignore[attr-defined]
    with psycopg.connect(served_url) as plain:
        want = plain.execute(GROUPED).fetchall()
    notices: list[str] = []
    with psycopg.connect(host=host, port=port, user="ann", password="pw-ann", dbname="d",
                         sslmode="disable", autocommit=True) as con:
        con.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        assert {"visits", "hospitals"} <= tables
        con.execute("SET privplan.epsilon = 1000000")
        got = con.execute(GROUPED).fetchall()
        (older,) = con.execute("SELECT COUNT(*) AS n FROM visits WHERE age > %s",
                               [65]).fetchone() or (None,)
    assert got == [(h, int(n)) for h, n in want]
    with psycopg.connect(served_url) as plain:
        assert older == plain.execute("SELECT COUNT(*) FROM visits WHERE age > 65").fetchone()[0]
    assert [n for n in notices if "cost" in n] == ["privplan: this answer cost ε=1e+06; spent ε=1e+06 of ε=1e+07",
                       "privplan: this answer cost ε=1e+06; spent ε=2e+06 of ε=1e+07"]
    store = SQLiteLedger(ledger)
    try:
        recorded = store.recorded_total()
        assert recorded is not None and Fraction(recorded.epsilon) == 2 * 10**6
    finally:
        store.close()


@pytest.mark.slow
def test_a_spark_session_behind_the_server_answers_concurrent_analysts_as_spark_counts(
        spark: object, tmp_path: Path) -> None:
    """From Python, ``serve(spark_session, ...)``: every connection's Session opens its own
    engine over the one SparkSession, whose settings privplan pins per statement. Two
    connections race; the user's own settings (ANSI off, another time zone) are back after."""
    import threading

    from tests.servers.spark_session import load_frame as spark_frame

    db = write_demo_database(tmp_path / "d.duckdb", rows=2000)
    with duckdb.connect(str(db), read_only=True) as con:
        for table in ("visits", "hospitals"):
            frame = con.sql(f"SELECT * FROM {table}").df()
            types = {r[0]: r[1] for r in con.sql(f"DESCRIBE {table}").fetchall()}
            spark_frame(spark, table, frame, types)
    conf = spark.conf  # type: ignore[attr-defined]
    saved = {k: conf.get(k, None) for k in ("spark.sql.ansi.enabled",
                                            "spark.sql.session.timeZone")}
    conf.set("spark.sql.ansi.enabled", "false")
    conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    users = tmp_path / "users.json"
    add_user(users, make_user("ann", "pw-ann", {"epsilon": 1e8}))
    want = [(r[0], r[1]) for r in spark.sql(GROUPED).collect()]  # type: ignore[attr-defined]
    running = serve(spark, policy=demo_policy_path(), ledger=tmp_path / "total.sqlite",
                    users=users, budget=pp.PureDP(1e8), listen=("127.0.0.1", 0))
    got: list[object] = []
    try:
        host, port = running.address

        def ask() -> None:
            with psycopg.connect(host=host, port=port, user="ann", password="pw-ann",
                                 dbname="d", sslmode="disable", autocommit=True) as con:
                con.execute("SET privplan.epsilon = 1000000")
                for _ in range(3):
                    got.append(con.execute(GROUPED).fetchall())

        threads = [threading.Thread(target=ask) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    finally:
        running.close()
        after = {k: conf.get(k, None) for k in ("spark.sql.ansi.enabled",
                                                "spark.sql.session.timeZone")}
        for k, v in saved.items():
            conf.unset(k) if v is None else conf.set(k, v)
    assert after == {"spark.sql.ansi.enabled": "false",
                     "spark.sql.session.timeZone": "Asia/Kolkata"}
    assert got == [want] * 6
