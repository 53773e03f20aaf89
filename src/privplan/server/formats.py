"""Answers in PostgreSQL's terms: a type OID per column and each value as PostgreSQL's text
format writes it; query parameters read from their text or binary form.

Privacy: formatting only, applied to answers already released (noisy, charged) or free; it
reads no private row.
"""

from __future__ import annotations

import datetime as _dt
import math
import struct
from decimal import Decimal
from typing import Any

from privplan.server.messages import Field
from privplan.server.sqlstate import ClientError

__all__ = ["OIDS", "Answer", "decode_param", "field", "text_value"]

OIDS = {"BOOLEAN": 16, "BLOB": 17, "BIGINT": 20, "VARCHAR": 25, "DOUBLE": 701,
        "DATE": 1082, "TIME": 1083, "TIMESTAMP": 1114, "TIMESTAMP WITH TIME ZONE": 1184,
        "DECIMAL": 1700, "NULL": 25}
_SIZES = {16: 1, 20: 8, 701: 8, 1082: 4, 1083: 8, 1114: 8, 1184: 8}


def field(name: str, type_code: str) -> Field:
    """The RowDescription field of a column of type ``type_code`` (privplan's DB-API codes;
    anything else is sent as text)."""
    oid = OIDS.get(type_code, 25)
    return Field(name, oid, _SIZES.get(oid, -1))


def text_value(v: Any) -> str | None:
    """``v`` in PostgreSQL's text format (None for NULL)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return repr(v)
    if isinstance(v, _dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, (_dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, Decimal):
        return str(v)
    return str(v)


_EPOCH = _dt.datetime(2000, 1, 1)
_BINARY_INTS = {21: "!h", 23: "!i", 20: "!q"}
_TEXTUAL = {0, 25, 1043, 18, 19, 705}


def decode_param(raw: bytes | None, oid: int, binary: bool, position: int) -> Any:
    """A Bind parameter as a Python value for privplan's binder (which renders it as one SQL
    literal). Text: integers and floats of a numeric OID are read as numbers, everything else
    stays a string. Binary: int2/int4/int8, float4/float8, bool and text."""
    if raw is None:
        return None
    where = f"parameter ${position}"
    try:
        if binary:
            return _binary(raw, oid, where)
        text = raw.decode("utf-8")
        if oid in (20, 21, 23):
            return int(text)
        if oid in (700, 701):
            return float(text)
        if oid == 1700:
            return Decimal(text)
        if oid == 16:
            return text.lower() in ("t", "true", "1", "on", "yes", "y")
        if oid == 1082:
            return _dt.date.fromisoformat(text)
        if oid == 1114:
            return _dt.datetime.fromisoformat(text)
        return text
    except (ValueError, UnicodeDecodeError, struct.error, ArithmeticError):
        raise ClientError("22P02", f"{where} is not a valid value of its type "
                          f"(type OID {oid})") from None


def _binary(raw: bytes, oid: int, where: str) -> Any:
    if oid in _BINARY_INTS:
        return int(struct.unpack(_BINARY_INTS[oid], raw)[0])
    if oid == 701:
        return float(struct.unpack("!d", raw)[0])
    if oid == 700:
        return float(struct.unpack("!f", raw)[0])
    if oid == 16 and len(raw) == 1:
        return raw != b"\x00"
    if oid == 1082:  # (days since 2000-01-01)
        return _EPOCH.date() + _dt.timedelta(days=struct.unpack("!i", raw)[0])
    if oid == 1114:  # (microseconds since 2000-01-01 00:00)
        return _EPOCH + _dt.timedelta(microseconds=struct.unpack("!q", raw)[0])
    if oid in _TEXTUAL:
        return raw.decode("utf-8")
    raise ClientError("0A000", f"{where}: binary format for type OID {oid} is not supported; "
                      "send it in text format")


class Answer:
    """What one statement returns: columns (None for a command without rows), rows in text
    format, the command tag, and notices sent before it."""

    def __init__(self, tag: str, fields: list[Field] | None = None,
                 rows: list[tuple[str | None, ...]] | None = None,
                 notices: list[str] | None = None) -> None:
        self.tag = tag
        self.fields = fields
        self.rows = rows or []
        self.notices = notices or []

    @classmethod
    def table(cls, columns: list[tuple[str, str]], rows: list[tuple[Any, ...]],
              notices: list[str] | None = None) -> Answer:
        """A SELECT's answer from (name, type code) columns and Python rows."""
        return cls(f"SELECT {len(rows)}", [field(n, t) for n, t in columns],
                   [tuple(text_value(v) for v in r) for r in rows], notices)
