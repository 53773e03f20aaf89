"""The backend half of the PostgreSQL v3 wire protocol: each message the server sends, as bytes.

Builders only (sans I/O); the frontend half, and why the codec is the project's own, are in
:mod:`privplan.server.wire`. Results are sent in text format only.

Privacy: these functions encode what they are given and nothing else; what may be sent (a
charged answer, a free answer, an error's message) is decided by the callers, never here.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Field", "authentication_ok", "authentication_sasl", "authentication_sasl_continue",
    "authentication_sasl_final", "backend_key_data", "bind_complete", "close_complete",
    "command_complete", "data_row", "empty_query_response", "error_response", "no_data",
    "notice_response", "parameter_description", "parameter_status", "parse_complete",
    "portal_suspended", "ready_for_query", "row_description",
]


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _cstr(text: str) -> bytes:
    raw = text.encode("utf-8")
    if b"\x00" in raw:
        raw = raw.replace(b"\x00", b"?")  # a NUL would end the field early
    return raw + b"\x00"


def authentication_ok() -> bytes:
    return _message(b"R", struct.pack("!i", 0))


def authentication_sasl(mechanisms: Sequence[str]) -> bytes:
    return _message(b"R", struct.pack("!i", 10) + b"".join(_cstr(m) for m in mechanisms)
                    + b"\x00")


def authentication_sasl_continue(data: bytes) -> bytes:
    return _message(b"R", struct.pack("!i", 11) + data)


def authentication_sasl_final(data: bytes) -> bytes:
    return _message(b"R", struct.pack("!i", 12) + data)


def parameter_status(name: str, value: str) -> bytes:
    return _message(b"S", _cstr(name) + _cstr(value))


def backend_key_data(process_id: int, secret: int) -> bytes:
    return _message(b"K", struct.pack("!iI", process_id, secret))


def ready_for_query(status: str = "I") -> bytes:
    return _message(b"Z", status.encode("ascii"))


@dataclass(frozen=True)
class Field:
    """One column of a RowDescription: its name and PostgreSQL type (OID, size, modifier)."""

    name: str
    type_oid: int
    type_size: int = -1
    type_modifier: int = -1
    format: int = 0  # (0 text, 1 binary: the values' format in the DataRows)


def row_description(fields: Sequence[Field]) -> bytes:
    body = struct.pack("!h", len(fields))
    for f in fields:
        body += _cstr(f.name) + struct.pack("!ihihih", 0, 0, f.type_oid, f.type_size,
                                            f.type_modifier, f.format)
    return _message(b"T", body)


def data_row(values: Sequence[str | bytes | None]) -> bytes:
    body = struct.pack("!h", len(values))
    for v in values:
        if v is None:
            body += struct.pack("!i", -1)
        else:
            raw = v.encode("utf-8") if isinstance(v, str) else v
            body += struct.pack("!i", len(raw)) + raw
    return _message(b"D", body)


def command_complete(tag: str) -> bytes:
    return _message(b"C", _cstr(tag))


def empty_query_response() -> bytes:
    return _message(b"I")


def _fields(severity: str, code: str, message: str, detail: str | None,
            hint: str | None) -> bytes:
    body = b"S" + _cstr(severity) + b"V" + _cstr(severity) + b"C" + _cstr(code)
    body += b"M" + _cstr(message)
    if detail:
        body += b"D" + _cstr(detail)
    if hint:
        body += b"H" + _cstr(hint)
    return body + b"\x00"


def error_response(code: str, message: str, *, severity: str = "ERROR",
                   detail: str | None = None, hint: str | None = None) -> bytes:
    return _message(b"E", _fields(severity, code, message, detail, hint))


def notice_response(message: str, *, code: str = "00000", severity: str = "NOTICE",
                    detail: str | None = None, hint: str | None = None) -> bytes:
    return _message(b"N", _fields(severity, code, message, detail, hint))


def parse_complete() -> bytes:
    return _message(b"1")


def bind_complete() -> bytes:
    return _message(b"2")


def close_complete() -> bytes:
    return _message(b"3")


def no_data() -> bytes:
    return _message(b"n")


def portal_suspended() -> bytes:
    return _message(b"s")


def parameter_description(type_oids: Sequence[int]) -> bytes:
    return _message(b"t", struct.pack("!h", len(type_oids))
                    + b"".join(struct.pack("!I", o) for o in type_oids))
