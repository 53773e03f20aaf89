"""Engines that go away: never charged for a query that cannot run, a clear error, recovery
where privplan owns the connection.

PostgreSQL (a server of this module's own, since these tests terminate its backends and stop
it): a backend terminated from another connection, and the server stopped and started again.
A connection privplan opened is opened again and the statement run once more (nothing was
returned: nothing is released twice); a connection the caller gave is not privplan's to
replace, so every later query is EngineUnavailableError before the charge (never "the
connection is inside a transaction"). A connection lost while the charged statement runs is
the fixed ExecutionError of any failure after the charge.

Spark: a session stopped, and one whose JVM was killed, in a subprocess with its own local
Spark (the suite's SparkSession is shared by every test of the process): EngineUnavailableError
before the charge for a cached plan and a new one alike, and ``close()`` still works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import privplan as pp
from privplan.engines.base import RUN_FAILED
from privplan.errors import EngineUnavailableError, ExecutionError
from tests.servers import need, postgres_server

psycopg = need("psycopg")

POLICY = {"tables": {
    "t": {"columns": {"id": {"type": "int", "lower": 0, "upper": 1000}}},
    "big": {"columns": {"id": {"type": "int"}, "s": {"type": "str"}}},
}}
Q1 = "SELECT COUNT(*) AS c, SUM(id) AS s FROM t"
Q2 = "SELECT COUNT(*) AS c FROM t WHERE id > 10"
SLOW = "SELECT COUNT(DISTINCT s) AS c FROM big"
BIG_ROWS = 3_000_000


@pytest.fixture(scope="module")
def server() -> Iterator[postgres_server.PostgresServer]:
    server = postgres_server.start_or_skip()
    with psycopg.connect(server.url, autocommit=True) as con:
        con.execute("CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 100) g")
        con.execute("CREATE TABLE big AS SELECT g AS id, md5(g::text) AS s "
                    f"FROM generate_series(1, {BIG_ROWS}) g")
        con.execute("ANALYZE")
    yield server
    server.stop()


def _terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("SELECT pg_terminate_backend(%s)", (pid,))
    deadline = time.monotonic() + 10
    with psycopg.connect(url, autocommit=True) as con:  # (gone once the server says so)
        while con.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                          (pid,)).fetchone() != (0,) and time.monotonic() < deadline:
            time.sleep(0.01)


def _backend(sess: pp.Session) -> int:
    return int(sess.engine._con.info.backend_pid)  # type: ignore[attr-defined]


def test_terminated_backend_is_replaced_on_a_connection_privplan_opened(
        server: postgres_server.PostgresServer) -> None:
    with pp.connect(server.url, policy=POLICY, budget=pp.PureDP(10)) as sess:
        sess.sql(Q1, epsilon=1)
        first = _backend(sess)
        _terminate(server.url, first)
        again = sess.sql(Q1, epsilon=1)  # (a cached plan: bound again, on a new connection)
        assert list(again.df.columns) == ["c", "s"] and len(again.df) == 1
        assert _backend(sess) != first
        assert sess.spent() == pp.PureDP(2)
        _terminate(server.url, _backend(sess))
        sess.sql(Q2, epsilon=1)  # (a new plan)
        assert sess.spent() == pp.PureDP(3)


@pytest.mark.invariant(8)
def test_a_given_connection_that_broke_is_refused_before_the_charge(
        server: postgres_server.PostgresServer) -> None:
    con = psycopg.connect(server.url, autocommit=True)
    try:
        with pp.connect(con, policy=POLICY, budget=pp.PureDP(10)) as sess:
            sess.sql(Q1, epsilon=1)
            _terminate(server.url, con.info.backend_pid)
            for sql in (Q1, Q1, Q2):  # (a cached plan, again, and a new one)
                with pytest.raises(EngineUnavailableError, match="went away") as info:
                    sess.sql(sql, epsilon=1)
                assert "new connection" in str(info.value)
                assert sess.spent() == pp.PureDP(1)
    finally:
        con.close()


def test_server_stopped_then_started_again(server: postgres_server.PostgresServer) -> None:
    with pp.connect(server.url, policy=POLICY, budget=pp.PureDP(10)) as sess:
        sess.sql(Q1, epsilon=1)
        server.pause()
        try:
            for sql in (Q1, Q2, Q1):
                with pytest.raises(EngineUnavailableError, match="went away") as info:
                    sess.sql(sql, epsilon=1)
                assert "connects again" in str(info.value)
                assert sess.spent() == pp.PureDP(1)
            with pytest.raises(EngineUnavailableError):
                sess.explain(Q2, epsilon=1)
        finally:
            server.resume()
        sess.sql(Q1, epsilon=1)
        sess.sql(Q2, epsilon=1)
        assert sess.spent() == pp.PureDP(3)


def _terminate_while_running(url: str, pid: int, done: threading.Event,
                             fired: list[str]) -> None:
    """Terminate backend ``pid`` once it runs something other than a bind (the statement)."""
    with psycopg.connect(url, autocommit=True) as con:
        while not done.is_set():
            row = con.execute("SELECT state, query FROM pg_stat_activity WHERE pid = %s",
                              (pid,)).fetchone()
            if row and row[0] == "active" and "__bind" not in row[1] and "big" in row[1]:
                con.execute("SELECT pg_terminate_backend(%s)", (pid,))
                fired.append(row[1])
                return
            time.sleep(0.005)


@pytest.mark.slow
@pytest.mark.parametrize("given", [False, True])
def test_connection_lost_while_the_charged_statement_runs(
        server: postgres_server.PostgresServer, given: bool) -> None:
    con = psycopg.connect(server.url, autocommit=True) if given else None
    try:
        database: Any = con if given else server.url
        with pp.connect(database, policy=POLICY, budget=pp.ApproxDP(10, 1e-6)) as sess:
            sess.explain(SLOW, epsilon=1)  # (planned and bound: the pid runs the statement next)
            done, fired, pid = threading.Event(), [], _backend(sess)
            killer = threading.Thread(target=_terminate_while_running,
                                      args=(server.url, pid, done, fired))
            killer.start()
            try:
                if given:  # (no new connection: the charged query fails, withheld)
                    with pytest.raises(ExecutionError) as info:
                        sess.sql(SLOW, epsilon=1)
                    assert str(info.value) == RUN_FAILED
                    assert sess.spent() == pp.ApproxDP(1, 0)
                    with pytest.raises(EngineUnavailableError):
                        sess.sql(SLOW, epsilon=1)
                    assert sess.spent() == pp.ApproxDP(1, 0)
                else:  # (a new connection, the statement run once more: answered)
                    sess.sql(SLOW, epsilon=1)
                    assert sess.spent() == pp.ApproxDP(1, 0)
                    assert _backend(sess) != pid
            finally:
                done.set()
                killer.join()
            assert fired, "the statement ended before it could be interrupted"
    finally:
        if con is not None:
            con.close()


# -- Spark ---------------------------------------------------------------------------------------
SPARK_SCRIPT = r'''
import json, os, signal, sys, time
import pandas as pd
import privplan as pp
from tests.servers.spark_session import local_session

policy = {"tables": {"t": {"columns": {"id": {"type": "int", "lower": 0, "upper": 1000}}}}}
out = {}

def ask(sess, sql):
    try:
        sess.sql(sql, epsilon=1)
        return ["ok", str(sess.spent())]
    except Exception as err:
        return [type(err).__name__, str(err), str(sess.spent()), repr(err.__cause__)]

def session(spark):
    spark.createDataFrame(pd.DataFrame({"id": list(range(100))})).createOrReplaceTempView("t")
    return pp.connect(spark, policy=policy, budget=pp.PureDP(10))

spark = local_session()
sess = session(spark)
out["first"] = ask(sess, "SELECT COUNT(*) AS c FROM t")
spark.stop()
out["stopped"] = [ask(sess, "SELECT COUNT(*) AS c FROM t"),
                  ask(sess, "SELECT COUNT(*) AS c FROM t WHERE id > 3")]
sess.close()

spark = local_session()
sess = session(spark)
out["second"] = ask(sess, "SELECT COUNT(*) AS c FROM t")
os.kill(spark.sparkContext._gateway.proc.pid, signal.SIGKILL)
spark.sparkContext._gateway.proc.wait()
out["killed"] = [ask(sess, "SELECT COUNT(*) AS c FROM t"),
                 ask(sess, "SELECT COUNT(*) AS c FROM t WHERE id > 3")]
try:
    sess.close()
    out["closed"] = "ok"
except Exception as err:
    out["closed"] = type(err).__name__
print("RESULT " + json.dumps(out))
'''


@pytest.mark.invariant(8)
@pytest.mark.slow
def test_spark_stopped_or_killed_is_refused_before_the_charge(spark: Any) -> None:
    """(``spark``: only so that the test runs where Spark does; the script makes its own.)"""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    done = subprocess.run([sys.executable, "-c", SPARK_SCRIPT], capture_output=True, text=True,
                          env=env, timeout=600, cwd=root, check=False)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-4000:]
    out = json.loads(lines[-1].removeprefix("RESULT "))
    assert out["first"] == ["ok", "PureDP(epsilon=1.0)"]
    assert out["second"] == ["ok", "PureDP(epsilon=1.0)"]
    for kind in ("stopped", "killed"):
        for outcome in out[kind]:
            name, message, spent, cause = outcome
            assert name == "EngineUnavailableError", outcome
            assert "Spark session is gone" in message and "Nothing was charged" in message
            assert spent == "PureDP(epsilon=1.0)", outcome  # (nothing charged)
            assert cause == "None"
    assert out["closed"] == "ok"
