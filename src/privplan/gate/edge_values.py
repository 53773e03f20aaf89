"""Edge values of every storage type: what the gate's stand-in rows hold.

A stand-in row must be a row the engine *could* hold in a column of that storage type, and the
set of them must reach every value at which an expression over the column can fail: NULL, the
empty and odd strings, every integer width's extremes, ±0.0, NaN, ±inf, denormals, numbers
beyond double range, dates and timestamps at ±infinity, BC and the ends of every range. The
candidates below are *texts*; each engine converts them into its own storage type with its own
conversion (a text that does not convert is dropped, a value reached twice is kept once), so
the rows are exactly what that engine can store, typed as it stores them
(:meth:`~privplan.engines.duckdb_engine.DuckDBEngine.stand_in_values`).

The list is the union over all types on purpose: a text of one family may be a valid, odd value
of another (``'1e400'`` is a NUMERIC, ``'infinity'`` a DATE, ``' 1'`` a string that some
conversions read as 1 and others refuse). Extremes that no common text reaches (every DECIMAL
precision's largest value) are added per type (:func:`extra_texts`).

Privacy: the stand-ins must reach every value an expression over a storage type can fail on.
"""

from __future__ import annotations

import re

__all__ = ["CANDIDATES", "LONG_STRING", "extra_texts"]

LONG_STRING = "a" * 10_000
"""A long string (a function whose cost or failure depends on a length meets it)."""

_NUMBERS = (
    "0", "1", "-1", "2", "-0", "01", " 1", "1 ", "+1", "0.5", "-0.5", "1.5", "-2.5",
    "127", "-128", "128", "255", "256", "32767", "-32768", "65535", "2147483647",
    "-2147483648", "4294967295", "9007199254740991", "9007199254740993",
    "9223372036854775807", "-9223372036854775808", "9223372036854775808",
    "18446744073709551615", "170141183460469231731687303715884105727",
    "-170141183460469231731687303715884105728", "340282366920938463463374607431768211455",
    "99999999999999999999999999999999999999", "-99999999999999999999999999999999999999",
    "123456789012345678901234567.8901234567", "0.0000000001", "1e-10",
)
_FLOATS = (
    "NaN", "-NaN", "inf", "-inf", "Infinity", "-Infinity", "-0.0", "1e308", "-1e308",
    "1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "-5e-324",
    "2.2250738585072014e-308", "1e-300", "3.4028235e38", "-3.4028235e38", "1.4e-45",
    "1e400", "-1e400", "1e-400", "-1e-400",
)
_STRINGS = (
    "", " ", "x", "abc", "ABC", "a", "A", "a ", "true", "false", "t", "f", "yes", "no", "NULL",
    "null", "é", "e\u0301", "ß", "\u65e5\u672c\u8a9e", "\U0001F600", "%", "_", "\\", "'",
    '"', "a,b,c", "\u202e", "\ufffd", "\t", "\n", "SECRET", LONG_STRING,
)
_DATES = (
    "2020-01-01", "2000-02-29", "1970-01-01", "0001-01-01", "9999-12-31", "1677-09-21",
    "2262-04-12", "294247-01-10", "294247-01-11", "5877642-06-24", "5881580-07-10",
    "5877641-06-25 (BC)", "290309-12-22 (BC)", "0044-03-15 (BC)", "4713-01-01 BC",
    "5874897-12-31", "294276-12-31", "infinity", "-infinity",
)
_TIMESTAMPS = (
    "2020-01-01 00:00:00", "1970-01-01 00:00:00", "0001-01-01 00:00:00",
    "9999-12-31 23:59:59.999999", "294247-01-10 04:00:54.775806",
    "290309-12-22 (BC) 00:00:00", "2262-04-11 23:47:16.854775807",
    "1677-09-21 00:12:43.145224192", "2020-03-08 02:30:00", "2000-02-29 23:59:59.999999",
    "2020-01-01 00:00:00+14", "2020-01-01 00:00:00-12", "294276-12-31 23:59:59.999999",
    "4713-01-01 00:00:00 BC",
)
_OTHERS = (
    "00:00:00", "23:59:59.999999", "24:00:00", "1 day", "-1 day", "178000000 years",
    "-178000000 years", "2147483647 months", "1 microsecond",
    "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "[]", "[1, 2]", "[NULL]", "{}", "\\xFF", "\\x80\\x81", "\\x00",
)

CANDIDATES: tuple[str | None, ...] = (
    None, *_NUMBERS, *_FLOATS, *_STRINGS, *_DATES, *_TIMESTAMPS, *_OTHERS)
"""Every text tried for every storage type (None: NULL)."""

_DECIMAL = re.compile(r"^(DECIMAL|NUMERIC)\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def extra_texts(storage_type: str) -> tuple[str, ...]:
    """Values of ``storage_type`` that no candidate reaches: a DECIMAL(p, s)'s largest and
    smallest values and its smallest step, both signs."""
    found = _DECIMAL.match(storage_type.strip().upper())
    if found is None:
        return ()
    p, s = int(found.group(2)), int(found.group(3))
    whole = "9" * (p - s) or "0"
    largest = whole + ("." + "9" * s if s else "")
    step = ("0." + "0" * (s - 1) + "1") if s else "1"
    return (largest, "-" + largest, step, "-" + step)
