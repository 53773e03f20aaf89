"""The protocol details real clients rely on, spoken byte by byte over a socket (the extended
protocol's portals, errors skipped up to Sync) and the server's limits (message size, startup
and idle timeouts, connections), plus concurrent analysts charged exactly."""

from __future__ import annotations

import socket
import struct
import threading
from fractions import Fraction

import psycopg
import pytest

from tests.server.conftest import PASSWORDS, Data, Running
from tests.server.test_fuzz import _authenticated, _codes, _msg, _read_messages, _startup


def _talk(sock: socket.socket, data: bytes) -> list[tuple[bytes, bytes]]:
    """Send ``data`` and read up to the next ReadyForQuery (or a FATAL close)."""
    sock.sendall(data)
    buf = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return _read_messages(buf)
        buf += chunk
        try:
            messages = _read_messages(buf)
        except (AssertionError, struct.error):
            continue
        if messages and messages[-1][0] == b"Z":
            return messages


def _rows(messages: list[tuple[bytes, bytes]]) -> list[bytes]:
    return [body[6:] for kind, body in messages if kind == b"D"]


def test_execute_with_max_rows_suspends_the_portal(running: Running) -> None:
    with _authenticated(running) as sock:
        sql = b"SELECT table_name FROM information_schema.tables ORDER BY table_name\0"
        out = _talk(sock, _msg(b"P", b"\0" + sql + b"\0\0") + _msg(b"B", b"\0\0" + b"\0" * 6)
                    + _msg(b"D", b"P\0") + _msg(b"E", b"\0" + struct.pack("!i", 1))
                    + _msg(b"E", b"\0" + struct.pack("!i", 1))
                    + _msg(b"E", b"\0" + struct.pack("!i", 1)) + _msg(b"S", b""))
        kinds = [k for k, _ in out if k != b"N"]
        assert kinds == [b"1", b"2", b"T", b"D", b"s", b"D", b"C", b"C", b"Z"]
        assert _rows(out) == [b"hospitals", b"visits"]
        tags = [body for kind, body in out if kind == b"C"]
        assert tags == [b"SELECT 1\0", b"SELECT 0\0"]


def test_after_an_error_messages_are_skipped_up_to_sync(running: Running) -> None:
    with _authenticated(running) as sock:
        out = _talk(sock, _msg(b"B", b"\0nope\0" + b"\0" * 6) + _msg(b"E", b"\0\0\0\0\0")
                    + _msg(b"S", b""))
        assert [k for k, _ in out] == [b"E", b"Z"] and _codes(out) == ["26000"]
        out = _talk(sock, _msg(b"Q", b"SELECT 1 AS one\0"))  # the connection goes on
        assert [k for k, _ in out if k != b"N"] == [b"T", b"D", b"C", b"Z"]


def test_describe_statement_and_close(running: Running) -> None:
    with _authenticated(running) as sock:
        out = _talk(sock, _msg(b"P", b"st\0SELECT COUNT(*) FROM visits WHERE age > $1\0\0\0")
                    + _msg(b"D", b"Sst\0") + _msg(b"C", b"Sst\0")
                    + _msg(b"D", b"Sst\0") + _msg(b"S", b""))
        assert [k for k, _ in out] == [b"1", b"t", b"n", b"3", b"E", b"Z"]
        (desc,) = [body for kind, body in out if kind == b"t"]
        assert desc == struct.pack("!hI", 1, 20)  # (int8: compared with age, an int column)
        out = _talk(sock, _msg(b"Q", b"\0"))  # an empty query
        assert [k for k, _ in out] == [b"I", b"Z"]


def test_a_message_over_the_cap_ends_the_connection_not_the_server(data: Data) -> None:
    started = data.start("cap.ledger.sqlite", max_message=4096)
    try:
        with _authenticated(started) as sock:
            out = _talk(sock, b"Q" + struct.pack("!i", 10_000) + b"x" * 100)
            assert _codes(out) == ["08P01"]
            assert b"over the server's limit of 4096 bytes" in out[-1][1]
        with _authenticated(started) as sock:
            assert _codes(_talk(sock, _msg(b"Q", b"SELECT 1\0"))) == []
    finally:
        started.server.close()


def test_startup_and_idle_timeouts(data: Data) -> None:
    started = data.start("timeouts.ledger.sqlite", startup_timeout=0.5, idle_timeout=0.5)
    try:
        with socket.create_connection((started.host, started.port), timeout=10) as sock:
            sock.sendall(_startup("alice"))  # ... and never answers the SCRAM challenge
            out = _talk(sock, b"")
            assert _codes(out) == ["57P05"]
        with _authenticated(started) as sock:  # idle after authentication
            assert _codes(_talk(sock, b"")) == ["57P05"]
    finally:
        started.server.close()


def test_connections_beyond_the_limit_are_refused(data: Data) -> None:
    started = data.start("limit.ledger.sqlite", max_connections=1)
    try:
        with _authenticated(started), pytest.raises(psycopg.OperationalError,
                                                    match="too many connections"):
            psycopg.connect(started.dsn("alice", "disable"), password=PASSWORDS["alice"],
                            connect_timeout=10)
    finally:
        started.server.close()


@pytest.mark.slow
def test_concurrent_analysts_are_charged_exactly(data: Data) -> None:
    started = data.start("concurrent.ledger.sqlite")
    errors: list[BaseException] = []
    refused = [0]

    def analyst(user: str) -> None:
        try:
            with psycopg.connect(started.dsn(user), password=PASSWORDS[user],
                                 autocommit=True, connect_timeout=10) as con:
                con.execute("SET privplan.epsilon = 0.125")
                for _ in range(8):
                    try:
                        con.execute("SELECT COUNT(*) FROM visits WHERE age > %s", [30])
                    except psycopg.errors.InsufficientResources:
                        refused[0] += 1
        except BaseException as err:  # noqa: BLE001 - reported by the main thread below
            errors.append(err)

    try:
        threads = [threading.Thread(target=analyst, args=(u,)) for u in ("alice", "bob") * 2]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        admitted = 32 - refused[0]
        assert admitted == 24 and started.spent() == Fraction(3)  # ε = 3 is 24 × 0.125
    finally:
        started.server.close()


def test_the_startup_deadline_covers_the_whole_handshake(data: Data) -> None:
    """A client that trickles its startup packet a byte at a time (each byte well within the
    timeout) is still cut off at the deadline."""
    import time

    started = data.start("trickle.ledger.sqlite", startup_timeout=1.0)
    try:
        with socket.create_connection((started.host, started.port), timeout=10) as sock:
            t0 = time.monotonic()
            packet = _startup("alice")
            try:
                for byte in packet[:-1]:
                    sock.sendall(bytes([byte]))
                    time.sleep(0.05)
            except OSError:
                pass
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
            assert _codes(_read_messages(reply)) == ["57P05"]
            assert time.monotonic() - t0 < 5
    finally:
        started.server.close()


def test_a_replayed_scram_exchange_is_refused(running: Running) -> None:
    """The messages of a successful login, sent again on a new connection, do not log in (the
    server's nonce is new each time, so the recorded proof signs the wrong exchange)."""
    from tests.server.test_scram import Client

    client = Client(PASSWORDS["bob"])
    first = client.first()
    initial = _msg(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first)
    with socket.create_connection((running.host, running.port), timeout=20) as sock:
        _talk_until(sock, _startup("bob"), b"R")
        ((_, body),) = _talk_until(sock, initial, b"R")
        final = _msg(b"p", client.final(body[4:]))
        assert _talk(sock, final)[-1][0] == b"Z"  # the genuine login
    with socket.create_connection((running.host, running.port), timeout=20) as sock:
        _talk_until(sock, _startup("bob"), b"R")
        _talk_until(sock, initial, b"R")
        assert _codes(_talk(sock, final)) == ["28P01"]


def _talk_until(sock: socket.socket, data: bytes, kind: bytes) -> list[tuple[bytes, bytes]]:
    sock.sendall(data)
    buf = b""
    while True:
        buf += sock.recv(65536)
        try:
            messages = _read_messages(buf)
        except (AssertionError, struct.error):
            continue
        if messages and messages[-1][0] == kind:
            return messages
