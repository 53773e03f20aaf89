"""DuckDB's type names as the totality check reads them: families, and how DuckDB types a
literal.

The engine answers with type names (``DECIMAL(9,2)``, ``UBIGINT``, ...); the check reasons about
their *families* (int, decimal, float, str, ...), the rank of integer widths and the scale of a
decimal, and types numeric literals itself exactly as DuckDB does, so that most predicates need
no round trip to the engine. A wrong family here would let a failing conversion through, so
anything unknown is the family ``other``, which the check refuses.
"""

from __future__ import annotations

from typing import Literal

Family = Literal["int", "float", "decimal", "str", "bool", "date", "timestamp", "interval",
                 "null", "other"]

_INT_RANK = {"TINYINT": 1, "SMALLINT": 2, "INTEGER": 3, "BIGINT": 4, "HUGEINT": 5,
             "UTINYINT": 1, "USMALLINT": 2, "UINTEGER": 3, "UBIGINT": 4, "UHUGEINT": 5}
_SIMPLE: dict[str, Family] = {
    "DOUBLE": "float", "FLOAT": "float", "REAL": "float", "VARCHAR": "str", "BOOLEAN": "bool",
    "DATE": "date", "TIMESTAMP": "timestamp", "INTERVAL": "interval", '"NULL"': "null",
    "NULL": "null"}
_SAMPLE = {"int": "0", "float": "CAST(0 AS DOUBLE)", "decimal": "CAST(0 AS DECIMAL(18,3))",
           "str": "'abc'", "bool": "FALSE", "date": "DATE '2000-01-01'",
           "timestamp": "TIMESTAMP '2000-01-01 00:00:00'", "interval": "INTERVAL 1 DAY",
           "null": "NULL"}


def family(engine_type: str) -> Family:
    """The family of a DuckDB type name (``DECIMAL(9,2)`` → decimal, ``INTEGER`` → int)."""
    t = engine_type.upper().strip()
    if t in _INT_RANK:
        return "int"
    if t.startswith(("DECIMAL", "NUMERIC")):
        return "decimal"
    if t.startswith("VARCHAR"):
        return "str"
    return _SIMPLE.get(t, "other")


def _decimal_scale(engine_type: str) -> int:
    """The scale s of ``DECIMAL(p,s)`` (0 for an integer type)."""
    t = engine_type.upper().replace(" ", "")
    if t.startswith("DECIMAL(") and "," in t:
        return int(t.split(",")[1].rstrip(")"))
    return 3 if t == "DECIMAL" else 0


def _number_type(text: str) -> str:
    """DuckDB's type of a numeric literal (its family, integer width and decimal scale)."""
    if "e" in text.lower() or text.lower() in ("inf", "nan"):
        return "DOUBLE"
    if "." in text:
        digits = sum(ch.isdigit() for ch in text)
        if digits > 38:
            return "DOUBLE"
        scale = len(text.partition(".")[2])
        return f"DECIMAL({max(digits, scale, 1)},{scale})"
    digits = sum(ch.isdigit() for ch in text)
    if digits > 39:  # beyond HUGEINT (and beyond what int() converts quickly)
        return "BIGNUM"
    try:
        v = abs(int(text))
    except ValueError:
        return "DOUBLE"
    if v < 2**31:
        return "INTEGER"
    if v < 2**63:
        return "BIGINT"
    return "HUGEINT" if v < 2**127 else "BIGNUM"
