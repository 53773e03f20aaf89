"""What the caller passed as ``database`` to ``pp.connect`` (or ``privplan.dbapi.connect``),
recognised before anything is opened.

Why here, and first: the engine follows the kind of ``database`` (a path, a URL, a
connection, a SparkSession: :func:`privplan.engines.open.open_engine`), and anything that is
not recognised used to be read as the path of a DuckDB file — so a mistyped URL, the word
"spark" or a ``SparkSession.builder`` all ended in "database file … does not exist", which
names none of them. Each is recognised here and refused with what it is and what to pass
instead, before the ledger is opened (nothing is written for a call that cannot work).

Nothing here imports pyspark, psycopg or SQLAlchemy: objects are recognised by the module and
name of their type, so an install without them recognises them just the same. A URL is shown
with its password replaced by ``***``: an error message may be logged or shared.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb

from privplan.errors import PolicyError

__all__ = ["KINDS", "check_database", "refuse_engine_keyword"]

KINDS = ("a DuckDB file path, ':memory:' or an open duckdb connection (the embedded DuckDB "
         "engine); a CSV or Parquet file or glob such as 'sales*.parquet' (for a policy with "
         "one private table); a postgresql:// URL or a psycopg connection (PostgreSQL); or a "
         "pyspark SparkSession (Spark)")
"""The accepted kinds of ``database``, as every message here lists them."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_POSTGRES = ("postgresql", "postgres")
_PG_EXAMPLE = "postgresql://user@host:5432/dbname"
_SPARK_EXAMPLE = ("from pyspark.sql import SparkSession; "
                  "pp.connect(SparkSession.builder.getOrCreate(), policy=..., budget=...)")
# schemes people write for PostgreSQL, and databases privplan has no engine for
_PG_ALIASES = ("pg", "psql", "pgsql", "postgis", "postgressql", "postgre", "postgesql")
_OTHER_DATABASES = ("mysql", "mariadb", "sqlite", "sqlite3", "mssql", "sqlserver", "oracle",
                    "snowflake", "bigquery", "redshift", "clickhouse", "trino", "presto",
                    "jdbc", "odbc", "mongodb")


def _shown(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return parts._replace(netloc=netloc).geturl()
    except ValueError:  # (an unparsable URL: its scheme only)
        match = _SCHEME.match(url)
        return f"{match[1]}://…" if match else "<a URL>"


def _url(database: str, scheme: str) -> None:
    """Refuse a URL of a scheme privplan cannot open (a PostgreSQL URL passes)."""
    lower = scheme.lower()
    if lower in _POSTGRES:
        return
    shown = _shown(database)
    where = f"the database argument ({shown!r})"
    if lower == "privplan":
        raise PolicyError(
            f"{where} is a privplan:// URL, which is the form SQLAlchemy's create_engine and "
            "privplan.dbapi.connect take. Why: pp.connect takes the database itself and the "
            "rest as keywords. Fix: pp.connect('data.duckdb', policy='policy.yaml', "
            "budget=pp.PureDP(3), ledger='ledger.sqlite'), or "
            f"privplan.dbapi.connect({shown!r}).")
    if lower.startswith(_POSTGRES) and "+" in lower:
        fix = (f"drop the driver: write {lower.split('+')[0]}://… (privplan connects with "
               "psycopg itself)")
        what = f"a SQLAlchemy-style URL ({scheme}://)"
    elif lower in ("file", "duckdb"):
        fix = "pass the path itself, e.g. pp.connect('/data/visits.duckdb', ...)"
        what = f"a {lower}:// URL"
    elif lower in _PG_ALIASES or difflib.get_close_matches(lower, _POSTGRES, n=1, cutoff=0.6):
        fix = f"did you mean postgresql://? Write e.g. {_PG_EXAMPLE}"
        what = f"a URL of the unknown scheme '{scheme}'"
    elif lower in _OTHER_DATABASES or lower.startswith(_OTHER_DATABASES):
        fix = (f"'{scheme}' is not supported; supported are postgresql:// (or postgres://) "
               f"URLs, or export the data to a DuckDB, CSV or Parquet file and pass its path")
        what = f"a {scheme}:// URL"
    elif lower == "spark":
        fix = ("a Spark master URL goes to the SparkSession: pp.connect(SparkSession.builder"
               f".master({shown!r}).getOrCreate(), policy=..., budget=...)")
        what = "a Spark master URL"
    else:
        fix = (f"'{scheme}' is not supported; supported are postgresql:// (or postgres://) "
               "URLs and local paths (download the file and pass its path)")
        what = f"a {scheme}:// URL"
    raise PolicyError(
        f"{where} is {what}, which privplan cannot open. Why: the engine follows what you "
        f"pass, and the only URLs it opens are postgresql:// and postgres:// (PostgreSQL). "
        f"Fix: {fix}. Accepted: {KINDS}.")


def _word(database: str) -> None:
    """Refuse a bare word that names an engine rather than a database (if no such file)."""
    word = database.strip().lower()
    if Path(database).exists():
        return
    if word in ("spark", "pyspark", "sparksession", "spark session"):
        raise PolicyError(
            f"the database argument is the string {database!r}, not a SparkSession. Why: the "
            "engine follows what you pass, and a string is a path or a URL. Fix: pass the "
            f"SparkSession object itself: {_SPARK_EXAMPLE}.")
    if word in ("postgres", "postgresql", "pg", "psql"):
        raise PolicyError(
            f"the database argument is the word {database!r}, not a PostgreSQL URL. Why: the "
            "engine follows what you pass, and a plain string is read as a file path. Fix: "
            f"pass a URL such as pp.connect('{_PG_EXAMPLE}', ...) or a psycopg connection.")
    if word in ("memory", "memory:", ":memory", "in-memory", "duckdb"):
        raise PolicyError(
            f"the database argument {database!r} is neither a file nor ':memory:'. Why: a "
            "plain string is read as a file path. Fix: did you mean ':memory:' (an empty "
            "in-memory DuckDB database, e.g. to register() DataFrames), or a DuckDB file path?")


def _object(database: Any) -> None:
    """Refuse an object of a kind ``open_engine`` would misread as a path."""
    kind, module = type(database).__name__, type(database).__module__
    top = module.split(".")[0]
    got = f"the database argument is a {module}.{kind}"
    if top == "pyspark":
        if kind == "SparkSession":
            return
        if kind == "Builder":
            raise PolicyError(
                f"{got} (SparkSession.builder), not a SparkSession. Why: a builder only "
                "describes a session; privplan needs the session to read its tables. Fix: "
                "call .getOrCreate(): pp.connect(SparkSession.builder.getOrCreate(), "
                "policy=..., budget=...).")
        if kind == "SparkContext":
            fix = "pass SparkSession.builder.getOrCreate() (or SparkSession(sc))"
        elif kind == "DataFrame":
            fix = ("make it a view and pass its session: df.createOrReplaceTempView('visits'); "
                   "pp.connect(df.sparkSession, policy=..., budget=...)")
        else:
            fix = f"pass a SparkSession: {_SPARK_EXAMPLE}"
        raise PolicyError(f"{got}, not a SparkSession. Why: a Spark session is where privplan "
                          f"reads the policy's tables. Fix: {fix}.")
    if top == "psycopg" and kind.endswith("Connection"):
        return
    if top == "psycopg2":
        fix = ("privplan's PostgreSQL engine uses psycopg 3: pass a postgresql:// URL, or a "
               "psycopg.connect(...) connection")
    elif top == "sqlalchemy":
        fix = "pass the database URL or path itself (privplan opens its own connection)"
    elif kind in ("DataFrame", "LazyFrame", "Table", "RecordBatchReader", "DuckDBPyRelation"):
        fix = ("a data frame or table is registered, not connected to: "
               "s = pp.connect(':memory:', policy=..., budget=...); s.register('visits', "
               "data) (or, for pandas, df.dp)")
    elif kind == "Session" and top == "privplan":
        fix = "this is already a session: query it with .sql(...)"
    else:
        fix = "pass one of the kinds below"
    raise PolicyError(f"{got}, which privplan cannot open as a database. Why: the engine "
                      f"follows what you pass. Fix: {fix}. Accepted: {KINDS}.")


def check_database(database: Any) -> None:
    """Raise a :class:`PolicyError` (what it is, why it cannot be opened, what to pass
    instead) for a ``database`` that no engine opens; return for one that may open. A path
    that does not exist is refused here too (before the ledger is touched)."""
    if isinstance(database, duckdb.DuckDBPyConnection):
        return
    if isinstance(database, str):
        match = _SCHEME.match(database)
        if match is not None:
            _url(database, match[1])
            return
        _word(database)
    elif not isinstance(database, os.PathLike):
        _object(database)
        return
    path = Path(os.fspath(database))
    if str(database) != ":memory:" and not path.exists():
        raise PolicyError(missing_file(path))


def missing_file(path: Path) -> str:
    """The message for a database path that does not exist."""
    where = "" if path.is_absolute() else f" (relative to the working directory {Path.cwd()})"
    return (f"database file '{path}' does not exist{where}. Why: a string that is not a URL "
            "is read as the path of a database file. Fix: Pass an existing DuckDB file (check "
            f"the path), or another kind of database: {KINDS}.")


def refuse_engine_keyword(engine: Any, function: str = "pp.connect") -> None:
    """The ``engine=`` keyword does not exist: raise a TypeError saying that the engine follows
    ``database``, with the call for the engine that was asked for."""
    if engine is None:
        return
    asked = str(engine).strip().lower()
    if "spark" in asked:
        example = f"{function}(SparkSession.builder.getOrCreate(), policy=..., budget=...)"
    elif asked.startswith(("postgres", "pg", "psql")):
        example = f"{function}('{_PG_EXAMPLE}', policy=..., budget=...)"
    else:
        example = f"{function}('data.duckdb', policy=..., budget=...)"
    raise TypeError(
        f"{function}() takes no engine= keyword (got engine={engine!r}). Why: the engine "
        "follows what you pass as the database: a path or ':memory:' runs on DuckDB, a "
        "postgresql:// URL or psycopg connection on PostgreSQL, a SparkSession on Spark. "
        f"Fix: drop engine= and pass the database of that engine, e.g. {example}.")
