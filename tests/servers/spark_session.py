"""A real, small Spark for the engine tests: one local SparkSession per test process.

``spark`` (session-scoped) is ``local[2]`` with the UI off, two shuffle partitions and a small
driver, and Spark 4's defaults otherwise (ANSI mode on); it is stopped when the test session
ends. Without pyspark or Java the tests that use it are skipped locally and fail on CI (where
the test extra and a JDK are installed, so a missing one is a broken setup, not a choice).

``load_frame(spark, name, frame, types)`` makes the temporary view ``name`` from a pandas
frame with the Spark types that hold the DuckDB types ``types`` (column -> DuckDB type name),
the values copied exactly: ``None`` / ``pd.NA`` / ``NaT`` is NULL and a float NaN stays NaN
(so hold a float column with both as ``object``), ±inf, -0.0, any unicode, dates and
timestamps as they are. ``arrow_table`` is the same rows as an Arrow table, to register the
same data in DuckDB. A ``VARCHAR COLLATE NOCASE`` / ``NOCASE.NOACCENT`` / ``en_us`` column is
a Spark string of the collation of the same effect (:data:`SPARK_COLLATIONS`); Spark has no
infinite dates or timestamps and none outside years 1..9999 (DuckDB's ``fetchall`` gives those as
strings or clamped values): a frame must not hold them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

from tests.servers import missing, need

_ARROW = {"TINYINT": "int8", "SMALLINT": "int16", "INTEGER": "int32", "BIGINT": "int64",
          "FLOAT": "float32", "DOUBLE": "float64", "BOOLEAN": "bool_", "VARCHAR": "string",
          "DATE": "date32"}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    need("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        missing("pyspark", "no Java runtime on PATH or in JAVA_HOME",
                "install a JDK 17 or later (apt-get install openjdk-17-jre-headless)")
    session = local_session()
    yield session
    session.stop()


def local_session() -> Any:
    """The tests' local Spark (see the module doc); the caller stops it."""
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("privplan-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "512m")
               .config("spark.sql.session.timeZone", "UTC")
               # (tables the tests create live in a temporary directory, not the checkout)
               .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="privplan-spark-"))
               .getOrCreate())
    session.sparkContext.setLogLevel("OFF")
    return session


# a DuckDB collation -> the Spark collation of the same effect (Spark 4's collated strings)
SPARK_COLLATIONS = {"NOCASE": "UTF8_LCASE", "NOCASE.NOACCENT": "UNICODE_CI_AI",
                    "EN_US": "UNICODE"}


def _collation(duck_type: str) -> str | None:
    """The Spark collation of a ``VARCHAR COLLATE <name>`` column (None: not collated)."""
    if not duck_type.upper().startswith("VARCHAR COLLATE "):
        return None
    return SPARK_COLLATIONS[duck_type.upper().removeprefix("VARCHAR COLLATE ")]


def _arrow_type(duck_type: str) -> Any:
    import pyarrow as pa

    if _collation(duck_type) is not None:
        return pa.string()
    if duck_type in _ARROW:
        return getattr(pa, _ARROW[duck_type])()
    if duck_type == "TIMESTAMP":
        return pa.timestamp("us")
    if duck_type == "TIMESTAMP WITH TIME ZONE":
        return pa.timestamp("us", tz="UTC")
    if duck_type.startswith("DECIMAL("):
        precision, scale = duck_type[len("DECIMAL("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    raise ValueError(f"no Arrow type for {duck_type}")


def _null(value: Any) -> bool:
    return value is None or value is pd.NA or value is pd.NaT  # (a float NaN is a value)


def _value(value: Any, duck_type: str) -> Any:
    if _null(value):
        return None
    if isinstance(value, str) and duck_type.startswith(("DATE", "TIMESTAMP")):
        # (load_frame's PostgreSQL twin takes DuckDB's text of ±infinity and years outside
        # 1..9999; Spark's dates and timestamps hold neither)
        raise ValueError(f"Spark cannot hold the {duck_type} value {value!r}")
    if duck_type.startswith("TIMESTAMP") and isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


def arrow_table(frame: pd.DataFrame, types: dict[str, str]) -> Any:
    """``frame``'s rows as an Arrow table of the DuckDB types ``types`` (values exact)."""
    import pyarrow as pa

    arrays = {c: pa.array([_value(v, types[c]) for v in frame[c].tolist()],
                          type=_arrow_type(types[c]), from_pandas=False) for c in frame.columns}
    return pa.table(arrays)


def spark_type(duck_type: str) -> Any:
    """The Spark type holding a DuckDB column of ``duck_type``."""
    from pyspark.sql import types as T

    simple = {"TINYINT": T.ByteType, "SMALLINT": T.ShortType, "INTEGER": T.IntegerType,
              "BIGINT": T.LongType, "FLOAT": T.FloatType, "DOUBLE": T.DoubleType,
              "BOOLEAN": T.BooleanType, "VARCHAR": T.StringType, "DATE": T.DateType,
              "TIMESTAMP": T.TimestampNTZType, "TIMESTAMP WITH TIME ZONE": T.TimestampType}
    if duck_type in simple:
        return simple[duck_type]()
    if duck_type.startswith("DECIMAL("):
        precision, scale = duck_type[len("DECIMAL("):-1].split(",")
        return T.DecimalType(int(precision), int(scale))
    collation = _collation(duck_type)
    if collation is not None:
        return T.StringType(collation)
    raise ValueError(f"no Spark type for {duck_type}")


def load_frame(spark: Any, name: str, frame: pd.DataFrame, types: dict[str, str]) -> None:
    """The temporary view ``name`` holding ``frame``'s rows in the Spark types of ``types``."""
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(c, spark_type(types[c]), True) for c in frame.columns])
    spark.createDataFrame(arrow_table(frame, types), schema=schema).createOrReplaceTempView(name)
