"""The frontend half of the PostgreSQL v3 wire protocol, sans I/O: bytes in, typed messages out.

Decision (issue 37): the project's own codec, not ``pygwire``. pygwire (PyPI) is a 0.2.0 beta
with one release line and no known dependents; the project adds a dependency only when it is
the well-kept standard, and a server's parser is the part a hostile client talks to first. The
protocol subset a server needs is small and fully specified (PostgreSQL's "Message Formats"
chapter), so it is written here, with strict validation, and tested against hand-built bytes
and the real clients (psql, psycopg). The backend messages are built in
:mod:`privplan.server.messages`.

:class:`FrontendReader` is fed the bytes a client sent, in pieces of any size, and returns the
complete messages as dataclasses. Everything malformed is one error, :class:`ProtocolViolation`:
a length below the minimum or above the configured cap (default 1 MiB; checked on the header,
before the body is buffered, so a client cannot make the server hold more than the cap), a
string without its NUL, bad UTF-8, a count that overruns the message, bytes left over, an
unknown message type. Authentication payloads (``'p'``) are returned raw
(:class:`AuthPayload`): what they hold depends on the exchange, and
:func:`parse_sasl_initial` reads the first one.

Privacy: this module reads only what the client sent and never touches data, the ledger or a
session; its errors quote no client bytes beyond a message type, so logs of malformed input
hold nothing a client did not choose to send.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_MESSAGE", "PROTOCOL_3_0", "AuthPayload", "Bind", "CancelRequest", "Close",
    "Describe", "Execute", "Flush", "FrontendMessage", "FrontendReader", "GSSENCRequest",
    "Parse", "ProtocolViolation", "Query", "SASLInitialResponse", "SSLRequest", "StartupMessage",
    "Sync", "Terminate", "parse_sasl_initial",
]

DEFAULT_MAX_MESSAGE = 1 << 20
PROTOCOL_3_0 = 196608  # 3 << 16
_SSL_CODE = 80877103
_GSSENC_CODE = 80877104
_CANCEL_CODE = 80877102
_MAX_STARTUP = 10_000  # PostgreSQL's own cap on a startup packet


class ProtocolViolation(Exception):
    """The client's bytes do not follow the protocol (SQLSTATE 08P01 when it is answered)."""


@dataclass(frozen=True)
class StartupMessage:
    version: int
    params: dict[str, str]


@dataclass(frozen=True)
class SSLRequest:
    pass


@dataclass(frozen=True)
class GSSENCRequest:
    pass


@dataclass(frozen=True)
class CancelRequest:
    process_id: int
    secret: bytes


@dataclass(frozen=True)
class Query:
    sql: str


@dataclass(frozen=True)
class Parse:
    name: str
    sql: str
    param_types: tuple[int, ...]


@dataclass(frozen=True)
class Bind:
    portal: str
    statement: str
    param_formats: tuple[int, ...]
    params: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]


@dataclass(frozen=True)
class Describe:
    kind: str  # 'S' statement or 'P' portal
    name: str


@dataclass(frozen=True)
class Execute:
    portal: str
    max_rows: int


@dataclass(frozen=True)
class Close:
    kind: str
    name: str


@dataclass(frozen=True)
class Sync:
    pass


@dataclass(frozen=True)
class Flush:
    pass


@dataclass(frozen=True)
class Terminate:
    pass


@dataclass(frozen=True)
class AuthPayload:
    """A ``'p'`` message: a password, a SASLInitialResponse or a SASLResponse (the exchange
    in progress says which)."""

    data: bytes


@dataclass(frozen=True)
class SASLInitialResponse:
    mechanism: str
    response: bytes | None


FrontendMessage = (StartupMessage | SSLRequest | GSSENCRequest | CancelRequest | Query | Parse
                   | Bind | Describe | Execute | Close | Sync | Flush | Terminate | AuthPayload)


class _Body:
    """A cursor over one message body; every read checks the bounds."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation(f"{self.what} message is shorter than its contents say")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack("!h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack("!i", self._take(4))[0])

    def byte(self) -> str:
        return self._take(1).decode("latin-1")

    def cstring(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise ProtocolViolation(f"{self.what} message has a string without its NUL "
                                    "terminator")
        raw = self._take(end - self.pos)
        self.pos += 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolViolation(f"{self.what} message has a string that is not UTF-8 "
                                    "(the server's encoding)") from None

    def count(self) -> int:
        n = self.int16()
        if n < 0:
            raise ProtocolViolation(f"{self.what} message has a negative count")
        return n

    def rest(self) -> bytes:
        return self._take(len(self.data) - self.pos)

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolViolation(f"{self.what} message has {len(self.data) - self.pos} "
                                    "bytes after its contents")


def _startup(body: bytes) -> FrontendMessage:
    b = _Body(body, "startup")
    code = b.int32()
    if code == _SSL_CODE:
        b.done()
        return SSLRequest()
    if code == _GSSENC_CODE:
        b.done()
        return GSSENCRequest()
    if code == _CANCEL_CODE:
        pid = b.int32()
        secret = b.rest()
        if not 4 <= len(secret) <= 256:
            raise ProtocolViolation("cancel request with a secret key of a bad length")
        return CancelRequest(pid, secret)
    if code >> 16 != 3:
        raise ProtocolViolation(f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: "
                                "this server speaks 3.x")
    params: dict[str, str] = {}
    while True:
        key = b.cstring()
        if not key:
            break
        if key in params:
            raise ProtocolViolation(f"startup parameter {key!r} given twice")
        params[key] = b.cstring()
    b.done()
    return StartupMessage(code, params)


def _parse(b: _Body) -> Parse:
    name, sql = b.cstring(), b.cstring()
    types = tuple(b.int32() for _ in range(b.count()))
    return Parse(name, sql, types)


def _bind(b: _Body) -> Bind:
    portal, statement = b.cstring(), b.cstring()
    formats = tuple(b.int16() for _ in range(b.count()))
    params: list[bytes | None] = []
    for _ in range(b.count()):
        n = b.int32()
        if n < -1:
            raise ProtocolViolation("Bind message has a parameter of negative length")
        params.append(None if n == -1 else b._take(n))
    results = tuple(b.int16() for _ in range(b.count()))
    if any(f not in (0, 1) for f in (*formats, *results)):
        raise ProtocolViolation("Bind message has a format code other than 0 (text) or 1 "
                                "(binary)")
    return Bind(portal, statement, formats, tuple(params), results)


def _kind_name(b: _Body, make: type[Describe | Close]) -> Describe | Close:
    kind = b.byte()
    if kind not in ("S", "P"):
        raise ProtocolViolation(f"{b.what} message must name 'S' (statement) or 'P' (portal)")
    return make(kind, b.cstring())


def _regular(kind: bytes, body: bytes) -> FrontendMessage:
    names = {b"Q": "Query", b"P": "Parse", b"B": "Bind", b"D": "Describe", b"E": "Execute",
             b"C": "Close", b"S": "Sync", b"H": "Flush", b"X": "Terminate", b"p": "password"}
    if kind not in names:
        raise ProtocolViolation(f"unknown frontend message type {kind!r}")
    b = _Body(body, names[kind])
    out: FrontendMessage
    if kind == b"Q":
        out = Query(b.cstring())
    elif kind == b"P":
        out = _parse(b)
    elif kind == b"B":
        out = _bind(b)
    elif kind in (b"D", b"C"):
        out = _kind_name(b, Describe if kind == b"D" else Close)
    elif kind == b"E":
        out = Execute(b.cstring(), b.int32())
    elif kind == b"p":
        out = AuthPayload(b.rest())
    else:
        out = Sync() if kind == b"S" else Flush() if kind == b"H" else Terminate()
    b.done()
    return out


class FrontendReader:
    """Incremental reader of a client's byte stream (see the module docstring).

    It starts in the startup phase (messages without a type byte); a StartupMessage moves it
    to the regular phase; an SSLRequest or GSSENCRequest keeps it in the startup phase, and
    bytes the client sent after one of them, before the server answered, are a violation
    (they would be read as if they had come over TLS).
    """

    def __init__(self, max_message: int = DEFAULT_MAX_MESSAGE) -> None:
        if max_message < 1024:
            raise ValueError("max_message must be at least 1024 bytes")
        self.max_message = max_message
        self.startup = True
        self._buf = bytearray()
        self._broken = False

    @property
    def pending(self) -> int:
        """How many bytes are buffered and not yet part of a complete message."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[FrontendMessage]:
        """The complete messages ``data`` finishes, in order."""
        if self._broken:
            raise ProtocolViolation("the stream was already malformed")
        self._buf += data
        out: list[FrontendMessage] = []
        try:
            while True:
                message = self._next()
                if message is None:
                    return out
                out.append(message)
                if isinstance(message, (SSLRequest, GSSENCRequest)) and self._buf:
                    raise ProtocolViolation("data sent after an encryption request, before "
                                            "the server's answer")
                if isinstance(message, CancelRequest):
                    return out
        except ProtocolViolation:
            self._broken = True
            raise

    def _next(self) -> FrontendMessage | None:
        header = 4 if self.startup else 5
        if len(self._buf) < header:
            return None
        kind = b"" if self.startup else bytes(self._buf[:1])
        length = int(struct.unpack("!i", self._buf[header - 4:header])[0])
        cap = _MAX_STARTUP if self.startup else self.max_message
        if length < 4 or (self.startup and length < 8):
            raise ProtocolViolation(f"invalid message length {length}")
        if length > cap:
            raise ProtocolViolation(f"message of {length} bytes is over the server's limit "
                                    f"of {cap} bytes")
        total = length + header - 4
        if len(self._buf) < total:
            return None
        body = bytes(self._buf[header:total])
        del self._buf[:total]
        if self.startup:
            message = _startup(body)
            if isinstance(message, StartupMessage):
                self.startup = False
            return message
        return _regular(kind, body)


def parse_sasl_initial(payload: AuthPayload) -> SASLInitialResponse:
    """Read a SASLInitialResponse: the mechanism, then the client-first message (or none)."""
    b = _Body(payload.data, "SASLInitialResponse")
    mechanism = b.cstring()
    n = b.int32()
    if n < -1:
        raise ProtocolViolation("SASLInitialResponse with a negative length")
    response = None if n == -1 else b._take(n)
    b.done()
    return SASLInitialResponse(mechanism, response)
