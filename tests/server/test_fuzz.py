"""A protocol fuzz: a thousand (and, slower, ten thousand) random, mutated and truncated byte
streams, before and after authentication. The server answers each with well-formed messages
(never an internal error or a traceback), logs no unexpected exception, charges nothing, and
still serves a real client."""

from __future__ import annotations

import logging
import random
import socket
import struct
import time

import psycopg
import pytest

from tests.server.conftest import PASSWORDS, Running
from tests.server.test_scram import Client

SEED = 20261128


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _startup(user: str) -> bytes:
    body = struct.pack("!i", 196608) + b"user\0" + user.encode() + b"\0database\0demo\0\0"
    return struct.pack("!i", len(body) + 4) + body


def _read_messages(data: bytes) -> list[tuple[bytes, bytes]]:
    """The backend messages of ``data`` (asserting they are well formed)."""
    out, pos = [], 0
    while pos < len(data):
        if data[pos:pos + 1] in (b"S", b"N") and pos == 0 and len(data) == 1:
            return [(data, b"")]
        kind = data[pos:pos + 1]
        (length,) = struct.unpack("!i", data[pos + 1:pos + 5])
        assert 4 <= length <= len(data) - pos - 1, (kind, length)
        out.append((kind, data[pos + 5:pos + 1 + length]))
        pos += 1 + length
    return out


def _codes(messages: list[tuple[bytes, bytes]]) -> list[str]:
    codes = []
    for kind, body in messages:
        if kind == b"E":
            fields = {f[:1]: f[1:].decode() for f in body.split(b"\0") if f}
            codes.append(fields[b"C"])
    return codes


def _exchange(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _recv_until(sock: socket.socket, kind: bytes) -> list[tuple[bytes, bytes]]:
    buf = b""
    while True:
        buf += sock.recv(65536)
        try:
            messages = _read_messages(buf)
        except (AssertionError, struct.error):
            continue
        if messages and messages[-1][0] in (kind, b"E"):
            return messages


def _authenticated(running: Running) -> socket.socket:
    sock = socket.create_connection((running.host, running.port), timeout=20)
    client = Client(PASSWORDS["bob"])
    sock.sendall(_startup("bob"))
    _recv_until(sock, b"R")
    first = client.first()
    sock.sendall(_msg(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first))
    ((kind, body),) = _recv_until(sock, b"R")
    assert kind == b"R"
    sock.sendall(_msg(b"p", client.final(body[4:])))
    assert _recv_until(sock, b"Z")[-1][0] == b"Z"
    return sock


def _regular(rng: random.Random) -> bytes:
    """Valid frontend messages, in a random order."""
    pool = [
        _msg(b"Q", b"SELECT COUNT(*) FROM visits\0"),
        _msg(b"Q", b"SELECT 1; SHOW privplan.spent\0"),
        _msg(b"P", b"s\0SELECT COUNT(*) FROM visits WHERE age > $1\0" + struct.pack("!hi", 1, 20)),
        _msg(b"B", b"\0s\0" + struct.pack("!hhih", 0, 1, 2, 0)[:6] + struct.pack("!i", 2)
             + b"65" + struct.pack("!h", 0)),
        _msg(b"D", b"P\0"), _msg(b"D", b"Ss\0"), _msg(b"E", b"\0" + struct.pack("!i", 0)),
        _msg(b"C", b"Ss\0"), _msg(b"H", b""), _msg(b"S", b""),
    ]
    return b"".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))


def _sasl(rng: random.Random) -> bytes:
    """A startup and a SCRAM exchange with a random (or mutated) final message."""
    first = Client("guess").first()
    stream = (_startup(rng.choice(["bob", "mallory"]))
              + _msg(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first)
              + _msg(b"p", rng.choice([b"", b"c=biws,r=x,p=" + rng.randbytes(8),
                                       rng.randbytes(rng.randint(0, 40))])))
    return stream if rng.random() < 0.5 else _mutate(rng, stream)


def _mutate(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        what = rng.randrange(5)
        if what == 0 and data:  # truncate
            del data[rng.randrange(len(data)):]
        elif what == 1 and data:  # flip bytes
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif what == 2:  # insert random bytes
            at = rng.randrange(len(data) + 1)
            data[at:at] = rng.randbytes(rng.randint(1, 16))
        elif what == 3 and len(data) >= 5:  # a random length field
            at = rng.randrange(len(data) - 3)
            data[at:at + 4] = struct.pack("!i", rng.choice([-1, 0, 3, 2**31 - 1, 1 << 21,
                                                            rng.randrange(1 << 16)]))
        else:
            data += rng.randbytes(rng.randint(0, 32))
    return bytes(data)


ALLOWED = {"08P01", "28P01", "28000", "42601", "0A000", "26000", "34000", "42P03", "42P05",
           "22023", "22P02", "42704", "42501", "57P05"}


def _stream(running: Running, rng: random.Random, i: int) -> tuple[socket.socket, bytes]:
    """The ``i``-th stream's socket and bytes: every fourth after authentication (the query path
    gets the garbage), else random bytes, a mutated startup, or a broken SCRAM exchange; every
    eighth after authentication is a valid frontend stream cut at a random position."""
    if i % 4 == 0:
        sock = _authenticated(running)
        regular = _regular(rng)
        return sock, (regular[:rng.randrange(len(regular) + 1)] if i % 8 == 0
                      else _mutate(rng, regular))
    sock = socket.create_connection((running.host, running.port), timeout=20)
    return sock, (rng.randbytes(rng.randint(0, 64)) if i % 4 == 1
                  else _mutate(rng, _startup("bob") + _regular(rng)) if i % 4 == 2
                  else _sasl(rng))


def _fuzz(running: Running, caplog: pytest.LogCaptureFixture, streams: int, seed: int) -> None:
    rng = random.Random(seed)
    before = running.spent()
    seen: set[str] = set()
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="privplan.server"):
        for i in range(streams):
            sock, stream = _stream(running, rng, i)
            with sock:
                reply = _exchange(sock, stream)
            assert b"Traceback" not in reply
            if reply in (b"S", b"N"):
                continue
            codes = _codes(_read_messages(reply))
            assert set(codes) <= ALLOWED, codes
            seen.update(codes)
    assert not [r for r in caplog.records if r.name.startswith("privplan.server")]
    assert {"08P01", "28P01", "42P05"} <= seen  # (it reached the codec, SCRAM and queries)
    print(f"fuzz: {streams} streams in {time.monotonic() - started:.1f} s; error codes seen",
          sorted(seen))
    assert running.spent() == before
    with psycopg.connect(running.dsn(), password=PASSWORDS["alice"], autocommit=True) as con:
        con.execute("SET privplan.epsilon = 0.125")
        assert con.execute("SELECT COUNT(*) AS n FROM visits").fetchone() is not None
    assert running.spent() == (before or 0) + 0.125


@pytest.mark.slow
def test_the_server_survives_a_protocol_fuzz(running: Running,
                                             caplog: pytest.LogCaptureFixture) -> None:
    _fuzz(running, caplog, 1000, SEED)


@pytest.mark.slow
def test_the_server_survives_ten_thousand_fuzzed_streams(
        running: Running, caplog: pytest.LogCaptureFixture) -> None:
    """The issue's figure: 10,000 streams (another seed than the thousand above)."""
    _fuzz(running, caplog, 10_000, SEED + 1)
