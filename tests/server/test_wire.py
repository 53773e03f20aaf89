"""The codec against byte strings built by hand from PostgreSQL's "Message Formats" chapter
(protocol 3.0), malformed and truncated ones included."""

from __future__ import annotations

import struct

import pytest

import privplan.server.messages as m
from privplan.server import wire as w


def startup(params: dict[str, str], version: int = w.PROTOCOL_3_0) -> bytes:
    body = struct.pack("!i", version) + b"".join(
        k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items()) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def regular(*messages: bytes) -> w.FrontendReader:
    r = w.FrontendReader()
    assert r.feed(startup({"user": "u"})) == [w.StartupMessage(w.PROTOCOL_3_0, {"user": "u"})]
    return r


def test_startup_packet_with_its_parameters() -> None:
    r = w.FrontendReader()
    raw = startup({"user": "alice", "database": "db", "application_name": "psql"})
    assert raw[:8] == struct.pack("!ii", len(raw), 196608)
    assert r.feed(raw) == [w.StartupMessage(196608, {"user": "alice", "database": "db",
                                                     "application_name": "psql"})]
    assert not r.startup


def test_ssl_gssenc_and_cancel_requests() -> None:
    r = w.FrontendReader()
    assert r.feed(b"\x00\x00\x00\x08\x04\xd2\x16\x2f") == [w.SSLRequest()]  # 80877103
    assert r.startup
    assert r.feed(b"\x00\x00\x00\x08\x04\xd2\x16\x30") == [w.GSSENCRequest()]  # 80877104
    cancel = struct.pack("!iiii", 16, 80877102, 42, 7)
    assert w.FrontendReader().feed(cancel) == [w.CancelRequest(42, struct.pack("!i", 7))]


def test_bytes_after_an_ssl_request_are_refused() -> None:
    # (they would be read as if they had come over TLS: CVE-2021-23214's class of bug)
    with pytest.raises(w.ProtocolViolation, match="after an encryption request"):
        w.FrontendReader().feed(b"\x00\x00\x00\x08\x04\xd2\x16\x2f" + startup({"user": "u"}))


def test_messages_fed_one_byte_at_a_time() -> None:
    stream = startup({"user": "u"}) + msg(b"Q", b"SELECT 1\0") + msg(b"X", b"")
    r = w.FrontendReader()
    out = [x for i in range(len(stream)) for x in r.feed(stream[i:i + 1])]
    assert out == [w.StartupMessage(196608, {"user": "u"}), w.Query("SELECT 1"), w.Terminate()]
    assert r.pending == 0


def test_the_extended_query_messages() -> None:
    r = regular()
    parse = msg(b"P", b"s1\0SELECT $1\0" + struct.pack("!hi", 1, 20))
    bind = msg(b"B", b"p1\0s1\0" + struct.pack("!hh", 1, 0) + struct.pack("!h", 2)
               + struct.pack("!i", 2) + b"65" + struct.pack("!i", -1) + struct.pack("!hh", 1, 0))
    describe = msg(b"D", b"P" + b"p1\0")
    execute = msg(b"E", b"p1\0" + struct.pack("!i", 10))
    close = msg(b"C", b"S" + b"s1\0")
    assert r.feed(parse + bind + describe + execute + close + msg(b"H", b"") + msg(b"S", b"")) == [
        w.Parse("s1", "SELECT $1", (20,)),
        w.Bind("p1", "s1", (0,), (b"65", None), (0,)),
        w.Describe("P", "p1"), w.Execute("p1", 10), w.Close("S", "s1"), w.Flush(), w.Sync()]


def test_sasl_initial_response() -> None:
    r = regular()
    payload = b"SCRAM-SHA-256\0" + struct.pack("!i", 9) + b"n,,n=,r=x"
    (auth,) = r.feed(msg(b"p", payload))
    assert w.parse_sasl_initial(auth) == w.SASLInitialResponse("SCRAM-SHA-256", b"n,,n=,r=x")
    with pytest.raises(w.ProtocolViolation):
        w.parse_sasl_initial(w.AuthPayload(b"SCRAM-SHA-256\0" + struct.pack("!i", 50) + b"n"))
    with pytest.raises(w.ProtocolViolation):
        w.parse_sasl_initial(w.AuthPayload(b"SCRAM-SHA-256"))


@pytest.mark.parametrize(("stream", "why"), [
    (struct.pack("!i", 3), "invalid message length"),
    (struct.pack("!ii", 8, 2 << 16), "unsupported frontend protocol"),
    (struct.pack("!i", 20_000) + b"x" * 8, "over the server's limit"),
    (struct.pack("!ii", 12, 196608) + b"user", "without its NUL"),
    (struct.pack("!ii", 13, 196608) + b"u\0\xff\0\0", "not UTF-8"),
    (struct.pack("!ii", 10, 196608) + b"\0x", "bytes after"),
    (struct.pack("!iii", 12, 80877102, 1), "bad length"),
])
def test_malformed_startup_packets(stream: bytes, why: str) -> None:
    with pytest.raises(w.ProtocolViolation, match=why):
        w.FrontendReader().feed(stream)


@pytest.mark.parametrize(("stream", "why"), [
    (msg(b"Q", b"SELECT 1"), "without its NUL"),
    (msg(b"Q", b"SELECT \xff\0"), "not UTF-8"),
    (msg(b"Q", b"SELECT 1\0extra"), "bytes after"),
    (b"Q" + struct.pack("!i", 3), "invalid message length"),
    (b"Q" + struct.pack("!i", -5), "invalid message length"),
    (b"Q" + struct.pack("!i", (1 << 20) + 1), "over the server's limit"),
    (msg(b"?", b""), "unknown frontend message type"),
    (msg(b"P", b"\0SELECT 1\0" + struct.pack("!h", 3) + struct.pack("!i", 20)),
     "shorter than its contents"),
    (msg(b"P", b"\0SELECT 1\0" + struct.pack("!h", -1)), "negative count"),
    (msg(b"B", b"\0\0" + struct.pack("!hh", 0, 1) + struct.pack("!i", -2)), "negative length"),
    (msg(b"B", b"\0\0" + struct.pack("!hh", 0, 1) + struct.pack("!i", 100) + b"ab"),
     "shorter than its contents"),
    (msg(b"B", b"\0\0" + struct.pack("!hhh", 1, 7, 0) + struct.pack("!h", 0)), "format code"),
    (msg(b"D", b"X\0"), "'S' \\(statement\\) or 'P'"),
    (msg(b"E", b"\0" + b"\0\0"), "shorter than its contents"),
    (msg(b"S", b"x"), "bytes after"),
])
def test_malformed_regular_messages(stream: bytes, why: str) -> None:
    r = regular()
    with pytest.raises(w.ProtocolViolation, match=why):
        r.feed(stream)
    with pytest.raises(w.ProtocolViolation):  # a broken stream stays broken
        r.feed(msg(b"S", b""))


def test_the_size_cap_is_checked_before_the_body_arrives() -> None:
    r = w.FrontendReader(max_message=4096)
    r.feed(startup({"user": "u"}))
    with pytest.raises(w.ProtocolViolation, match="limit of 4096"):
        r.feed(b"Q" + struct.pack("!i", 4097))  # the header alone: nothing more is buffered
    ok = w.FrontendReader(max_message=4096)
    ok.feed(startup({"user": "u"}))
    assert ok.feed(msg(b"Q", b"x" * 4090 + b"\0")) == [w.Query("x" * 4090)]


def test_truncated_streams_wait_for_more() -> None:
    stream = msg(b"Q", b"SELECT 1\0")
    for cut in range(len(stream)):
        r = regular()
        assert r.feed(stream[:cut]) == []
        assert r.feed(stream[cut:]) == [w.Query("SELECT 1")]


def test_backend_messages_byte_for_byte() -> None:
    assert m.authentication_ok() == b"R\0\0\0\x08\0\0\0\0"
    assert m.authentication_sasl(["SCRAM-SHA-256"]) == (
        b"R\0\0\0\x17\0\0\0\x0aSCRAM-SHA-256\0\0")
    assert m.authentication_sasl_continue(b"r=a") == b"R\0\0\0\x0b\0\0\0\x0br=a"
    assert m.authentication_sasl_final(b"v=b") == b"R\0\0\0\x0b\0\0\0\x0cv=b"
    assert m.parameter_status("a", "b") == b"S\0\0\0\x08a\0b\0"
    assert m.backend_key_data(7, 9) == b"K\0\0\0\x0c\0\0\0\x07\0\0\0\x09"
    assert m.ready_for_query() == b"Z\0\0\0\x05I"
    assert m.row_description([m.Field("n", 20, 8)]) == (
        b"T\0\0\0\x1a\0\x01n\0" + struct.pack("!ihihih", 0, 0, 20, 8, -1, 0))
    assert m.data_row(["12", None]) == b"D\0\0\0\x10\0\x02\0\0\0\x0212\xff\xff\xff\xff"
    assert m.command_complete("SELECT 1") == b"C\0\0\0\x0dSELECT 1\0"
    assert m.empty_query_response() == b"I\0\0\0\x04"
    assert m.error_response("42601", "bad", hint="fix") == (
        b"E\0\0\0\x24SERROR\0VERROR\0C42601\0Mbad\0Hfix\0\0")
    assert m.notice_response("cost", detail="d")[:1] == b"N"
    assert b"Dd\0" in m.notice_response("cost", detail="d")
    assert [m.parse_complete(), m.bind_complete(), m.close_complete(), m.no_data(),
            m.portal_suspended()] == [b"1\0\0\0\x04", b"2\0\0\0\x04", b"3\0\0\0\x04",
                                      b"n\0\0\0\x04", b"s\0\0\0\x04"]
    assert m.parameter_description([20, 25]) == b"t\0\0\0\x0e\0\x02\0\0\0\x14\0\0\0\x19"
