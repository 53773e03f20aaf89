"""Cancelling, timing out and limiting: a real server (tests/server/conftest.py) and real
clients (psycopg's ``cancel_safe()`` sends libpq's CancelRequest — its blocking ``cancel()``
holds the GIL while it waits for the server to close, which would stall a server running in the
test's own process; asyncpg; raw sockets).

The slow queries run on a database of their own: a private ``events`` table (20M rows) and two
public tables. A join with a public table makes privplan read the public table before the
charge (the join's stability and key region, :mod:`privplan.planning.public_joins`): over
``lookup_big`` (4M rows) that takes about a second of DuckDB work *before* the charge, so a
cancel sent a quarter of a second after the query lands there. A join with ``lookup`` (2M rows)
has a shorter pre-charge phase and a run of about a second *after* the charge: the test waits
until the ledger file shows the charge, then cancels."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import asyncpg
import duckdb
import psycopg
import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path
from privplan.ledger.store import SQLiteLedger
from privplan.ledger.verify import verify_ledger
from privplan.server import Server, serve
from tests.server.conftest import PASSWORDS, Data
from tests.server.test_describe import SHAPES, _body
from tests.server.test_fuzz import _authenticated, _msg
from tests.server.test_protocol import _talk

PRE_CHARGE_SLOW = "SELECT COUNT(*) AS n FROM events JOIN lookup_big ON events.k = lookup_big.key"
POST_CHARGE_SLOW = "SELECT COUNT(*) AS n FROM events JOIN lookup ON events.k = lookup.key"
BIG_POLICY = {"tables": {
    "events": {"privacy_unit": "row", "columns": {"id": {"type": "int"}, "k": {"type": "int"}}},
    "lookup": {"public": True}, "lookup_big": {"public": True}}}


@dataclass
class Started:
    server: Server
    ledger: Path
    host: str = "127.0.0.1"

    @property
    def port(self) -> int:
        return self.server.address[1]

    def dsn(self, user: str = "alice", **extra: str) -> str:
        more = "".join(f" {k}={v}" for k, v in extra.items())
        return f"host=127.0.0.1 port={self.port} user={user} dbname=x sslmode=disable{more}"

    def connect(self, user: str = "alice", **extra: str) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn(user, **extra), password=PASSWORDS[user],
                               autocommit=True, connect_timeout=10)

    def ledger_state(self) -> tuple[Fraction, list[Fraction]]:
        """The ledger's recorded total ε and each entry's marginal ε (it must verify)."""
        result = verify_ledger(self.ledger)
        assert result.ok, str(result)
        store = SQLiteLedger(self.ledger)
        try:
            total = store.recorded_total()
            entries = store.entries()
        finally:
            store.close()
        return (Fraction(0) if total is None else Fraction(total.epsilon),
                [Fraction(e.marginal.epsilon) for e in entries])

    def entries(self) -> int:
        store = SQLiteLedger(self.ledger)
        try:
            return len(store.entries())
        finally:
            store.close()


@pytest.fixture(scope="module")
def big(data: Data) -> Path:
    path = data.folder / "big.duckdb"
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TABLE events AS SELECT range AS id, (range * 7919) % 2000000 AS k "
                    "FROM range(20000000)")
        con.execute("CREATE TABLE lookup AS SELECT range AS key FROM range(2000000)")
        con.execute("CREATE TABLE lookup_big AS SELECT range AS key FROM range(4000000)")
    finally:
        con.close()
    return path


def _start(database: Path, policy: Any, ledger: Path, users: Path, **kw: Any) -> Started:
    server = serve(database, policy=policy, ledger=ledger, users=users, budget=pp.PureDP(100),
                   listen=("127.0.0.1", 0), startup_timeout=5.0, **kw)
    return Started(server, ledger)


@pytest.fixture()
def slow(big: Path, data: Data, tmp_path: Path) -> Iterator[Started]:
    """A server over the big database, a fresh ledger (ε = 100 in total)."""
    started = _start(big, BIG_POLICY, tmp_path / "big.ledger.sqlite", data.users)
    try:
        yield started
    finally:
        started.server.close()


@pytest.fixture()
def demo(data: Data, tmp_path: Path) -> Iterator[Started]:
    """A server over the demo database (2,000 visits), a fresh ledger (ε = 100 in total)."""
    started = _start(data.database, demo_policy_path(), tmp_path / "demo.ledger.sqlite",
                     data.users)
    try:
        yield started
    finally:
        started.server.close()


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


class _InThread:
    """One query on its own thread: its rows, or the exception it raised, and when it ended."""

    def __init__(self, con: psycopg.Connection[Any], sql: str) -> None:
        self.rows: list[Any] | None = None
        self.error: BaseException | None = None
        self.ended = 0.0
        self.thread = threading.Thread(target=self._run, args=(con, sql))
        self.thread.start()

    def _run(self, con: psycopg.Connection[Any], sql: str) -> None:
        try:
            self.rows = con.execute(sql).fetchall()
        except BaseException as err:  # noqa: BLE001 - inspected by the test
            self.error = err
        self.ended = time.monotonic()

    def join(self) -> None:
        self.thread.join(60)
        assert not self.thread.is_alive()


# -- CancelRequest ------------------------------------------------------------------------------
def test_a_query_cancelled_before_its_charge_spends_nothing(slow: Started) -> None:
    with slow.connect() as con:
        con.execute("SET privplan.epsilon = 0.5")
        pid = con.info.backend_pid
        started = time.monotonic()
        query = _InThread(con, PRE_CHARGE_SLOW)
        _wait_for(lambda: slow.server.registry.running(pid), "running")
        time.sleep(0.15)  # (in the reads of lookup_big: about a second before the charge)
        con.cancel_safe(timeout=10)
        query.join()
        assert isinstance(query.error, psycopg.errors.QueryCanceled), query.error
        assert query.error.sqlstate == "57014"
        assert "canceling statement due to user request" in str(query.error)
        assert query.ended - started < 1.0  # (stopped, not run to its end)
        time.sleep(0.3)
        assert slow.ledger_state() == (Fraction(0), [])  # nothing spent
        # the connection goes on, and its next query is charged as usual
        assert con.execute("SELECT COUNT(*) AS n FROM events WHERE id < 10").fetchone()
        assert slow.ledger_state() == (Fraction(1, 2), [Fraction(1, 2)])


def test_a_query_cancelled_after_its_charge_keeps_the_charge_and_releases_nothing(
        slow: Started) -> None:
    with slow.connect() as con:
        con.execute("SET privplan.epsilon = 0.25")
        query = _InThread(con, POST_CHARGE_SLOW)
        deadline = time.monotonic() + 30
        while slow.entries() == 0:  # (the ledger entry is committed: the run has begun)
            assert time.monotonic() < deadline and query.thread.is_alive(), query.error
            time.sleep(0.005)
        charged = time.monotonic()
        con.cancel_safe(timeout=10)
        query.join()
        assert isinstance(query.error, psycopg.errors.QueryCanceled), (query.rows, query.error)
        assert query.rows is None  # nothing released
        assert query.ended - charged < 1.0
        total, entries = slow.ledger_state()
        assert entries == [Fraction(1, 4)] and total == sum(entries)  # the charge stays
        # the session is intact: the same query, not cancelled, is answered and charged
        row = con.execute(POST_CHARGE_SLOW).fetchone()
        assert row is not None and abs(row[0] - 20_000_000) < 1000
        total, entries = slow.ledger_state()
        assert entries == [Fraction(1, 4)] * 2 and total == sum(entries)


def test_psql_ctrl_c_cancels_the_running_statement(slow: Started) -> None:
    """psql sends a CancelRequest on SIGINT (Ctrl-C), from its own signal handler."""
    proc = subprocess.Popen(
        ["psql", slow.dsn(), "-X", "-A", "-t", "-c", "SET privplan.epsilon = 0.5", "-c",
         PRE_CHARGE_SLOW], env=dict(os.environ, PGPASSWORD=PASSWORDS["alice"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: any(slow.server.registry.running(pid) for pid in range(1, 5)),
                  "psql's statement running")
        time.sleep(0.15)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "canceling statement due to user request" in err, (out, err)
    assert slow.ledger_state() == (Fraction(0), [])


def test_a_cancel_request_with_a_wrong_key_does_nothing_and_says_nothing(
        slow: Started) -> None:
    with slow.connect() as con:
        con.execute("SET privplan.epsilon = 0.125")
        pid = con.info.backend_pid
        query = _InThread(con, POST_CHARGE_SLOW)
        _wait_for(lambda: slow.server.registry.running(pid), "running")
        for target, key in ((pid, b"\0\0\0\0"), (pid, b"\xff\xff\xff\xff"), (pid + 1000, b"1234")):
            with socket.create_connection(("127.0.0.1", slow.port), timeout=10) as sock:
                sock.sendall(struct.pack("!iii", 16, 80877102, target) + key)
                assert sock.recv(100) == b""  # closed without a word
        query.join()
        assert query.error is None and query.rows is not None  # answered
        assert slow.ledger_state()[1] == [Fraction(1, 8)]


def test_a_cancel_with_no_statement_running_is_ignored(demo: Started) -> None:
    with demo.connect() as con:
        con.cancel_safe(timeout=10)
        time.sleep(0.1)
        con.execute("SET privplan.epsilon = 0.125")
        assert con.execute("SELECT COUNT(*) AS n FROM visits").fetchone()
        assert demo.ledger_state()[1] == [Fraction(1, 8)]


# -- statement_timeout --------------------------------------------------------------------------
def test_set_statement_timeout_cancels_a_slow_statement(slow: Started) -> None:
    with slow.connect() as con:
        con.execute("SET privplan.epsilon = 0.5")
        con.execute("SET statement_timeout = '300ms'")
        assert con.execute("SHOW statement_timeout").fetchone() == ("300ms",)
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled,
                           match="canceling statement due to statement timeout"):
            con.execute(PRE_CHARGE_SLOW)
        assert time.monotonic() - started < 1.5
        assert slow.ledger_state() == (Fraction(0), [])  # (stopped before the charge)
        # a timeout that lands after the charge, or never: the ledger holds what was charged
        con.execute("SET statement_timeout = '1.1s'")
        try:
            con.execute(POST_CHARGE_SLOW)
        except psycopg.errors.QueryCanceled:
            pass
        total, entries = slow.ledger_state()
        assert entries in ([], [Fraction(1, 2)]) and total == sum(entries)
        con.execute("SET statement_timeout = 0")
        assert con.execute("SHOW statement_timeout").fetchone() == ("0",)
        assert con.execute("SELECT COUNT(*) AS n FROM events WHERE id < 10").fetchone()


def test_statement_timeout_from_the_startup_packet_and_the_server_default(
        big: Path, data: Data, tmp_path: Path) -> None:
    started = _start(big, BIG_POLICY, tmp_path / "default.ledger.sqlite", data.users,
                     statement_timeout=0.3)
    try:
        with started.connect() as con:
            assert con.execute("SHOW statement_timeout").fetchone() == ("300ms",)
            con.execute("SET privplan.epsilon = 0.5")
            with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
                con.execute(PRE_CHARGE_SLOW)
            con.execute("SET statement_timeout = '1min'")
            assert con.execute("SHOW statement_timeout").fetchone() == ("1min",)
            con.execute("RESET statement_timeout")  # (back to the server's default)
            assert con.execute("SHOW statement_timeout").fetchone() == ("300ms",)
        with started.connect(options="'-c statement_timeout=250 -c privplan.epsilon=0.5'") as con:
            assert con.execute("SHOW statement_timeout").fetchone() == ("250ms",)
            with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
                con.execute(PRE_CHARGE_SLOW)
        with started.connect(options="'-c statement_timeout=0'") as con:
            con.execute("SET privplan.epsilon = 0.5")
            assert con.execute(PRE_CHARGE_SLOW).fetchone()  # no timeout: answered
        with pytest.raises(psycopg.OperationalError, match="statement_timeout"):
            started.connect(options="'-c statement_timeout=soon'")
        total, entries = started.ledger_state()
        assert entries == [Fraction(1, 2)] and total == sum(entries)
    finally:
        started.server.close()


# -- connections per analyst ----------------------------------------------------------------------
def test_connections_per_analyst_are_limited_and_released_however_they_end(
        data: Data, tmp_path: Path) -> None:
    started = _start(data.database, demo_policy_path(), tmp_path / "per_user.ledger.sqlite",
                     data.users, max_connections_per_user=2)
    registry = started.server.registry
    try:
        first, second = started.connect(), started.connect()
        with pytest.raises(psycopg.OperationalError,
                           match='too many connections for role "alice"'):
            started.connect()

        async def third_by_asyncpg() -> None:
            await asyncpg.connect(host="127.0.0.1", port=started.port, user="alice",
                                  password=PASSWORDS["alice"], database="x", ssl=False)

        with pytest.raises(asyncpg.exceptions.TooManyConnectionsError) as info:
            asyncio.run(third_by_asyncpg())
        assert info.value.sqlstate == "53300"
        with started.connect("bob") as other:  # (another analyst's own count)
            assert other.execute("SELECT 1").fetchone() == (1,)
        first.close()  # a Terminate
        _wait_for(lambda: registry.connections("alice") == 1, "released on Terminate")
        third = started.connect()
        second.close()
        # a connection dropped without a word (authenticated, then its socket closed)
        sock = _authenticated(started)  # (as bob)
        _wait_for(lambda: registry.connections("bob") == 1, "counted")
        sock.close()
        _wait_for(lambda: registry.connections("bob") == 0, "released on a dropped socket")
        # refused after admission (a bad startup setting): counted, then released
        with pytest.raises(psycopg.OperationalError, match="privplan.epsilon"):
            started.connect(options="'-c privplan.epsilon=-1'")
        _wait_for(lambda: registry.connections("alice") == 1, "released after a FATAL")
        with started.connect() as fourth:
            assert fourth.execute("SELECT 1").fetchone() == (1,)
        third.close()
        _wait_for(lambda: registry.connections("alice") == 0, "all released")
        assert registry.connections("bob") == 0
        # a wrong password is refused as such, before the limit is counted
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(started.dsn(), password="wrong", connect_timeout=10)
    finally:
        started.server.close()


# -- intervals ------------------------------------------------------------------------------------
def test_intervals_are_extra_columns_when_asked_for(demo: Started, data: Data,
                                                   tmp_path: Path) -> None:
    sql = ("SELECT hospital, COUNT(*) AS n, AVG(age) AS a FROM visits GROUP BY hospital "
           "ORDER BY hospital")
    session = pp.Session(str(data.database), policy=demo_policy_path(), budget=pp.PureDP(1),
                         ledger=SQLiteLedger(tmp_path / "library.ledger.sqlite"))
    try:  # (the library's own half-width of COUNT's 95% interval, for the same query)
        halfwidth = session.sql(sql, epsilon=0.5).accuracy["n"].halfwidth
    finally:
        session.close()
    assert halfwidth is not None
    with demo.connect() as con:
        con.execute("SET privplan.epsilon = 0.5")
        assert con.execute("SHOW privplan.intervals").fetchone() == ("off",)
        cur = con.execute("SELECT COUNT(*) AS n FROM visits")
        assert [d.name for d in cur.description] == ["n"]  # off by default
        con.execute("SET privplan.intervals = on")
        assert con.execute("SHOW privplan.intervals").fetchone() == ("on",)
        cur = con.execute(sql)
        assert [d.name for d in cur.description] == [
            "hospital", "n", "n_low", "n_high", "a", "a_low", "a_high"]
        rows = cur.fetchall()
        assert [r[0] for r in rows] == ["A", "B", "C", "D"]
        for _, n, n_low, n_high, a, a_low, a_high in rows:
            assert n_low < n < n_high and a_low < a < a_high
            assert math.isclose(n_high - n, halfwidth, rel_tol=1e-9)
            assert math.isclose(n - n_low, halfwidth, rel_tol=1e-9)
        con.execute("SET privplan.intervals = off")
        cur = con.execute("SELECT COUNT(*) AS n FROM visits")
        assert [d.name for d in cur.description] == ["n"]


def test_intervals_from_the_startup_packet_described_as_executed_by_asyncpg(
        demo: Started) -> None:
    async def main() -> Any:
        con = await asyncpg.connect(host="127.0.0.1", port=demo.port, user="alice",
                                    password=PASSWORDS["alice"], database="x", ssl=False,
                                    server_settings={"privplan.intervals": "on",
                                                     "privplan.epsilon": "0.25"})
        try:
            statement = await con.prepare("SELECT sex, COUNT(*) AS n, SUM(cost) AS s "
                                          "FROM visits GROUP BY sex ORDER BY sex")
            described = [(a.name, a.type.name) for a in statement.get_attributes()]
            return described, await statement.fetch()
        finally:
            await con.close()

    described, rows = asyncio.run(main())
    assert described == [("sex", "text"), ("n", "int8"), ("n_low", "float8"),
                         ("n_high", "float8"), ("s", "float8"), ("s_low", "float8"),
                         ("s_high", "float8")]
    assert [list(r.keys()) for r in rows] == [[n for n, _ in described]] * 2
    assert all(r["n_low"] < r["n"] < r["n_high"] and r["s_low"] < r["s_high"] for r in rows)


NESTED = [("SELECT AVG(n) AS mean FROM (SELECT hospital, COUNT(*) AS n FROM visits GROUP BY "
           "hospital)")]


SHAPES_AND_NESTED = SHAPES + NESTED
# (per shape, the columns that get an interval: those the library's Result.intervals has — none
# for a column computed from aggregates (COUNT(*) + 1, COUNT(*) > 10), for MEDIAN, or for an
# outer query over a DP subquery)
WITH_INTERVALS = [["n"], ["n", "s", "a"], ["COUNT(*)"], ["a"], [], ["p"], ["n"], ["n"], [], []]


@pytest.mark.parametrize("sql", SHAPES_AND_NESTED)
def test_describe_reports_the_interval_columns_execute_sends(demo: Started, sql: str) -> None:
    """With intervals on, Describe (which plans, charging nothing) gives the RowDescription the
    simple query and the extended Execute send, for every shape test_describe.py checks (GROUP
    BY, derived AVG, ORDER BY/LIMIT, HAVING, COUNT(DISTINCT), UNION ALL, MEDIAN, an outer
    query over a DP subquery: it has no intervals)."""
    with _authenticated(demo) as sock:
        _talk(sock, _msg(b"Q", b"SET privplan.epsilon = 0.01; SET privplan.intervals = on\0"))
        before = demo.ledger_state()
        out = _talk(sock, _msg(b"P", b"st\0" + sql.encode() + b"\0\0\0")
                    + _msg(b"D", b"Sst\0") + _msg(b"S", b""))
        assert [k for k, _ in out] == [b"1", b"t", b"T", b"Z"], out
        described = _body(out, b"T")[0]
        assert demo.ledger_state() == before  # nothing charged by Describe
        answered = _talk(sock, _msg(b"Q", sql.encode() + b"\0"))
        assert _body(answered, b"T") == [described]
        out = _talk(sock, _msg(b"B", b"\0st\0" + b"\0" * 6) + _msg(b"D", b"P\0")
                    + _msg(b"E", b"\0\0\0\0\0") + _msg(b"S", b""))
        assert _body(out, b"T") == [described]
        width = struct.unpack("!h", described[:2])[0]
        assert all(struct.unpack("!h", r[:2])[0] == width for r in _body(out, b"D"))
        names = _field_names(described)
        with_interval = [n for n in names if f"{n}_low" in names and f"{n}_high" in names]
        assert with_interval == WITH_INTERVALS[SHAPES_AND_NESTED.index(sql)], names


def _field_names(description: bytes) -> list[str]:
    """The column names of a RowDescription body."""
    (count,), pos, names = struct.unpack("!h", description[:2]), 2, []
    for _ in range(count):
        end = description.index(b"\0", pos)
        names.append(description[pos:end].decode())
        pos = end + 1 + 18
    return names


def test_an_interval_the_library_did_not_compute_is_sent_null_as_described(
        demo: Started, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library computes no per-row interval of a derived aggregate (AVG) beyond
    ``MAX_INTERVAL_ROWS`` rows, which a Describe's one stand-in row cannot foresee: lowered to
    1 here, the 4-group answer lacks ``a_low``/``a_high``, and the Execute sends them NULL in
    the columns its Describe announced (the simple protocol, undescribed, omits them)."""
    monkeypatch.setattr("privplan.assemble.MAX_INTERVAL_ROWS", 1)
    sql = b"SELECT hospital, AVG(age) AS a FROM visits GROUP BY hospital ORDER BY hospital"
    with _authenticated(demo) as sock:
        _talk(sock, _msg(b"Q", b"SET privplan.epsilon = 0.01; SET privplan.intervals = on\0"))
        out = _talk(sock, _msg(b"P", b"st\0" + sql + b"\0\0\0") + _msg(b"D", b"Sst\0")
                    + _msg(b"B", b"\0st\0" + b"\0" * 6) + _msg(b"E", b"\0\0\0\0\0")
                    + _msg(b"S", b""))
        assert _field_names(_body(out, b"T")[0]) == ["hospital", "a", "a_low", "a_high"]
        rows = _body(out, b"D")
        assert len(rows) == 4
        for row in rows:  # (4 columns; the last two NULL: length -1)
            assert struct.unpack("!h", row[:2])[0] == 4
            assert row.endswith(struct.pack("!ii", -1, -1))
        simple = _talk(sock, _msg(b"Q", sql + b"\0"))
        assert _field_names(_body(simple, b"T")[0]) == ["hospital", "a"]


def test_a_late_cancel_or_timer_never_reaches_the_next_statement() -> None:
    """StatementControl over a real DuckDB connection: a cancel with no statement running, or
    a timer of a statement that has ended, neither flags nor interrupts the next one; a cancel
    of a running DuckDB statement interrupts it (from another thread) and returns once it ends."""
    from privplan.server.cancel import StatementCancelled, StatementControl

    con = duckdb.connect()
    control = StatementControl(con.interrupt)
    control.cancel("user")  # (idle: nothing)
    timer = control.begin(0.05)
    control.end(timer)  # (ended before its timer fired)
    time.sleep(0.15)
    timer = control.begin(0)
    try:
        assert con.execute("SELECT COUNT(*) FROM range(20000000)").fetchone() == (20000000,)
        control.check()  # (not flagged)
        assert control.reason is None
    finally:
        control.end(timer)
    timer = control.begin(0.2)
    try:
        started = time.monotonic()
        with pytest.raises(duckdb.InterruptException):
            con.execute("SELECT COUNT(*) FROM range(100000000000) WHERE range % 7 = 1")
        assert time.monotonic() - started < 5
        assert control.reason == "timeout"
        with pytest.raises(StatementCancelled, match="statement timeout"):
            control.check()
    finally:
        control.end(timer)
    assert con.execute("SELECT 1").fetchone() == (1,)
