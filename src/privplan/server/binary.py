"""Result values in PostgreSQL's binary format, for clients that ask for it in Bind (asyncpg
asks for binary for every type it has a binary codec for).

A value is converted from the text form :func:`privplan.server.formats.text_value` gave it
(so the text and binary answers are one and the same value) by the column's type OID: int8,
float8, numeric, bool, text, bytea, date, time, timestamp and timestamptz — every OID
:data:`privplan.server.formats.OIDS` sends.

Privacy: formatting only, applied to answers already released (noisy, charged) or free.
"""

from __future__ import annotations

import datetime as _dt
import struct
from collections.abc import Sequence
from decimal import Decimal

from privplan.server.sqlstate import ClientError

__all__ = ["binary_value", "result_formats"]

_EPOCH = _dt.datetime(2000, 1, 1)
_EPOCH_DATE = _EPOCH.date()
_NUMERIC_NAN = 0xC000
_NUMERIC_PINF, _NUMERIC_NINF = 0xD000, 0xF000


def result_formats(codes: Sequence[int], columns: int) -> tuple[int, ...]:
    """The format code (0 text, 1 binary) of each of ``columns`` result columns from a Bind's
    codes: none (all text), one for all, or one per column."""
    if any(c not in (0, 1) for c in codes):
        raise ClientError("22023", "a result format code must be 0 (text) or 1 (binary)")
    if not codes:
        return (0,) * columns
    if len(codes) == 1:
        return (codes[0],) * columns
    if len(codes) != columns:
        raise ClientError("08P01", f"Bind has {len(codes)} result formats for {columns} "
                          "result columns")
    return tuple(codes)


def binary_value(text: str, oid: int) -> bytes:
    """The binary form of the value whose text form is ``text``, of type ``oid``."""
    if oid == 20:
        return struct.pack("!q", int(text))
    if oid == 701:
        return struct.pack("!d", float(text))
    if oid == 16:
        return b"\x01" if text == "t" else b"\x00"
    if oid == 17:
        return bytes.fromhex(text[2:])
    if oid == 1700:
        return _numeric(Decimal(text))
    if oid == 1082:
        return struct.pack("!i", (_dt.date.fromisoformat(text) - _EPOCH_DATE).days)
    if oid == 1083:
        t = _dt.time.fromisoformat(text)
        return struct.pack("!q", ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000
                           + t.microsecond)
    if oid in (1114, 1184):
        stamp = _dt.datetime.fromisoformat(text)
        if stamp.tzinfo is not None:
            stamp = stamp.astimezone(_dt.UTC).replace(tzinfo=None)
        delta = stamp - _EPOCH
        return struct.pack("!q", (delta.days * 86400 + delta.seconds) * 1_000_000
                           + delta.microseconds)
    return text.encode("utf-8")


def _numeric(value: Decimal) -> bytes:
    """PostgreSQL's binary numeric: digit count, weight, sign, display scale, then base-10000
    digits (the exact decimal, no rounding)."""
    if value.is_nan():
        return struct.pack("!hhHh", 0, 0, _NUMERIC_NAN, 0)
    if value.is_infinite():
        return struct.pack("!hhHh", 0, 0, _NUMERIC_NINF if value < 0 else _NUMERIC_PINF, 0)
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    text = ("".join(map(str, digits)) + "0" * max(0, exponent)).rjust(scale + 1, "0")
    whole, frac = (text[:len(text) - scale], text[len(text) - scale:]) if scale else (text, "")
    whole = whole.lstrip("0")
    whole = "0" * (-len(whole) % 4) + whole
    frac = frac + "0" * (-len(frac) % 4)
    groups = [int(whole[i:i + 4]) for i in range(0, len(whole), 4)]
    weight = len(groups) - 1
    groups += [int(frac[i:i + 4]) for i in range(0, len(frac), 4)]
    while groups and groups[0] == 0:  # (leading zero groups: the weight goes down)
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f"!hhHh{len(groups)}H", len(groups), weight,
                       0x4000 if sign else 0, scale, *groups)
