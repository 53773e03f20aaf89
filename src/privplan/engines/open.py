"""Which engine a session runs on, from what the caller passed to ``pp.connect``."""

from __future__ import annotations

from typing import Any

from privplan.engines.base import Engine
from privplan.engines.recognise import check_database


def open_engine(database: Any) -> Engine:
    """The engine for ``database``:

    * a ``postgresql://`` / ``postgres://`` URL or an open psycopg connection: PostgreSQL
      (:mod:`privplan.engines.postgres_engine`; the ``postgres`` extra);
    * a ``pyspark.sql.SparkSession``: Spark (:mod:`privplan.engines.spark_engine`; the
      ``spark`` extra), on the tables and views of its catalog;
    * anything else (a DuckDB file, ':memory:', a duckdb connection): the embedded DuckDB
      engine.

    The drivers are imported only here, when asked for, so ``import privplan`` needs neither.
    Anything else that no engine opens (a mistyped URL, the word "spark", a Spark builder, a
    path that does not exist) is refused first, saying what it is
    (:func:`privplan.engines.recognise.check_database`).
    """
    check_database(database)
    if isinstance(database, str) and database.startswith(("postgresql://", "postgres://")):
        from privplan.engines.postgres_engine import PostgresEngine

        return PostgresEngine(database)
    module = type(database).__module__
    if module.startswith("psycopg") and type(database).__name__.endswith("Connection"):
        from privplan.engines.postgres_engine import PostgresEngine

        return PostgresEngine(database)
    if module.startswith("pyspark") and type(database).__name__ == "SparkSession":
        from privplan.engines.spark_engine import SparkEngine

        return SparkEngine(database)
    from privplan.engines.duckdb_engine import DuckDBEngine

    return DuckDBEngine(database)
