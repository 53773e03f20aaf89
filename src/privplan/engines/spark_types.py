"""Spark's data types and DuckDB's: the names the Spark engine reports and converts through.

The Spark engine describes Spark tables in DuckDB's type names (:func:`duckdb_type`), casts
rows arriving as Arrow to the DuckDB types of a statement (:func:`castable`), and stores frames
it registers in the Spark types holding their DuckDB types (:func:`spark_type`, :data:`WIDER`).
pyspark is imported only inside :func:`spark_type` (as by the engine itself).
"""

from __future__ import annotations

from typing import Any

import duckdb

from privplan.engines.shadow import quote as _quote
from privplan.errors import PolicyError

# Spark's simple types, by class name -> the DuckDB type name (see SparkEngine.columns)
_SIMPLE = {
    "ByteType": "TINYINT", "ShortType": "SMALLINT", "IntegerType": "INTEGER",
    "LongType": "BIGINT", "FloatType": "FLOAT", "DoubleType": "DOUBLE",
    "BooleanType": "BOOLEAN", "DateType": "DATE", "BinaryType": "BLOB",
    "TimestampType": "TIMESTAMP WITH TIME ZONE", "TimestampNTZType": "TIMESTAMP",
    "NullType": "NULL",
}


def duckdb_type(data_type: Any) -> str:
    """The DuckDB name of a Spark data type.

    ``TIMESTAMP`` is an instant in Spark (``TIMESTAMP WITH TIME ZONE`` in DuckDB) and
    ``TIMESTAMP_NTZ`` a wall-clock time (DuckDB's ``TIMESTAMP``). A string with a collation
    other than Spark's default (``UTF8_BINARY``, DuckDB's byte order) is named
    ``VARCHAR COLLATE <name>``, which no DuckDB type is, so the session can refuse it rather
    than compare its values by DuckDB's rules; so is a ``CHAR(n)``, whose values Spark pads
    with spaces and compares padded. Types DuckDB has no name for are Spark's
    ``simpleString`` upper-cased."""
    kind = type(data_type).__name__
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind == "DecimalType":
        return f"DECIMAL({data_type.precision},{data_type.scale})"
    if kind == "CharType":  # (padded, and compared padded: no DuckDB type)
        return f"CHAR({data_type.length})"
    if kind in ("StringType", "VarcharType"):
        collation = getattr(data_type, "collation", None) or "UTF8_BINARY"
        return "VARCHAR" if collation.upper() == "UTF8_BINARY" else f"VARCHAR COLLATE {collation}"
    if kind == "ArrayType":
        return f"{duckdb_type(data_type.elementType)}[]"
    if kind == "MapType":
        return f"MAP({duckdb_type(data_type.keyType)}, {duckdb_type(data_type.valueType)})"
    if kind == "StructType":
        fields = ", ".join(f"{_quote(f.name)} {duckdb_type(f.dataType)}" for f in data_type.fields)
        return f"STRUCT({fields})"
    return str(data_type.simpleString()).upper()


def field_type(field: Any) -> str:
    """The DuckDB name of a column's type, as :func:`duckdb_type`; a ``CHAR(n)`` column (a
    string in Spark's schema, its declared type kept in the field's metadata, through views
    and subqueries) is ``CHAR(n)``: Spark pads its values with spaces and compares them padded
    (``v = 'a'`` and ``v = 'a '`` both hold for the stored 'a'), so the session refuses it."""
    declared = str((getattr(field, "metadata", None) or {}).get("__CHAR_VARCHAR_TYPE_STRING", ""))
    if declared.lower().startswith("char("):
        return declared.upper()
    return duckdb_type(field.dataType)


def castable(duck_type: str) -> str | None:
    """``duck_type`` as a CAST target on the converting connection (a collated string is read
    as VARCHAR); None where DuckDB has no such type (the Arrow column is taken as it comes)."""
    if duck_type.startswith("VARCHAR COLLATE "):
        return "VARCHAR"
    try:
        duckdb.sqltype(duck_type)
    except (duckdb.Error, ValueError, TypeError):
        return None
    return duck_type


def spark_type(duck_type: str) -> Any:
    """The Spark type holding a DuckDB column of ``duck_type`` (as ``SparkEngine.register``
    stores a frame); PolicyError for a type Spark cannot hold."""
    from pyspark.sql import types as T

    simple = {"TINYINT": T.ByteType, "SMALLINT": T.ShortType, "INTEGER": T.IntegerType,
              "BIGINT": T.LongType, "FLOAT": T.FloatType, "DOUBLE": T.DoubleType,
              "BOOLEAN": T.BooleanType, "DATE": T.DateType, "VARCHAR": T.StringType,
              "BLOB": T.BinaryType, "TIMESTAMP": T.TimestampNTZType,
              "TIMESTAMP WITH TIME ZONE": T.TimestampType}
    if duck_type in simple:
        return simple[duck_type]()
    if duck_type.startswith("DECIMAL("):
        precision, scale = duck_type[len("DECIMAL("):-1].split(",")
        return T.DecimalType(int(precision), int(scale))
    raise PolicyError(f"Spark has no column type for DuckDB's {duck_type}")


# DuckDB types a frame's column may take that Spark stores as a wider type (the values are
# kept; a nanosecond timestamp keeps microseconds, Spark's resolution)
WIDER = {"UTINYINT": "SMALLINT", "USMALLINT": "INTEGER", "UINTEGER": "BIGINT",
          "UBIGINT": "DECIMAL(20,0)", "HUGEINT": "DECIMAL(38,0)", "TIMESTAMP_NS": "TIMESTAMP",
          "TIMESTAMP_MS": "TIMESTAMP", "TIMESTAMP_S": "TIMESTAMP"}
