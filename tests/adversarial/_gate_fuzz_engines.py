"""The gate fuzz's datasets on PostgreSQL and Spark (the same base rows as DuckDB's, the
engine's own edge rows).

* **PostgreSQL**: one database per dataset (the pair's sessions are alive together), with the
  columns of ``ENGINE_COLUMNS['postgres']`` in PostgreSQL's own types, plus ``pn``, an
  unconstrained ``numeric`` read as float: its edge rows hold numbers beyond double range
  (``1e400``, ``1e-400``) and NaN, the class of a leak fixed in the renderer. Dates reach
  ±infinity and year 294276; the base rows are DuckDB's, read back and copied.
* **Spark**: one ``SparkSession.newSession()`` per dataset (its own temporary views, the same
  context), its tables read from Parquet files that pyarrow writes from DuckDB's rows, so a
  string column can hold bytes that are not UTF-8 (the ``badutf8`` edge row: a class of leak
  fixed in the typed view). Dates are kept within years 1..9999 (Spark's range).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import privplan as pp
from tests.adversarial._gate_fuzz_data import (
    BIG,
    ENGINE_COLUMNS,
    MAXD,
    TABLES,
    U_EDGES,
    DatasetSpec,
    duckdb_connection,
)

PG_TYPES = {"BIGINT": "bigint", "INTEGER": "integer", "DOUBLE": "double precision",
            "FLOAT": "real", "DECIMAL(18,3)": "numeric(18,3)", "VARCHAR": "text",
            "BOOLEAN": "boolean", "DATE": "date"}

# PostgreSQL's edge rows of q, in ENGINE_COLUMNS["postgres"]["q"] order (the last is pn)
PG_Q_EDGES = {
    "null": "(" + ", ".join(["NULL"] * 16) + ")",
    "37s": ("(37, 37, 37, 37, 37.0, 3.7e-301, 3.7e301, 37, 40.000000000000037, 0.37, 37.037,"
            " 'a', '37', TRUE, '2037-03-07', 37)"),
    "max": (f"({BIG}, {BIG}, 2147483647, {BIG}, {MAXD}, {MAXD}, {MAXD}, {MAXD}, {MAXD},"
            " '3.4028235e38', 999999999999999.999, 'b', repeat('z', 3000), TRUE, 'infinity',"
            " '1e400')"),
    "min": (f"({-BIG - 1}, {-BIG - 1}, -2147483648, {-BIG - 1}, -{MAXD}, -{MAXD}, -{MAXD},"
            f" -{MAXD}, -{MAXD}, '-3.4028235e38', -999999999999999.999, 'A', '', FALSE,"
            " '-infinity', '-1e400')"),
    "nan": ("(0, 0, 0, 0, 'NaN', 'Infinity', '-Infinity', 'NaN', 'Infinity', 'NaN', 0, 'é',"
            " 'e\u0301', NULL, '4713-01-01 BC', 'NaN')"),
    "tiny": ("(-1, 1, 4, -1, '5e-324', '-5e-324', '2.2250738585072014e-308', '-0', '-0',"
             " '1e-45', 0.001, 'é', '\U0001F600', FALSE, '0001-01-01', '1e-400')"),
    "outside": ("(101, 1000000000001, 6, 0, 1000000.5, 1.0000000000000001e-300, 1e308,"
                " 2.5000000000000004, 40.0000000000002, 1.0000001, 100.001, 'a ', 'x', TRUE,"
                " '294276-12-31', '1000000.5')"),
    "odd": ("(37, -37, 5, 37, -37.5, -3.7e-301, -3.7e301, 2.5, 40, 0.0, -37, '\u01c5',"
            " 'a%_\\', FALSE, '2000-02-29', '123456789012345678901234567890.123456789')"),
}
PG_U_EDGES = {k: v.replace("'inf'", "'Infinity'").replace("'nan'", "'NaN'")
              for k, v in U_EDGES.items()}
PG_EDGES = {"q": PG_Q_EDGES, "u": PG_U_EDGES}

_PG_MADE: dict[tuple[str, str], str] = {}


def _pg_name(spec: DatasetSpec) -> str:
    return "gfz_" + re.sub(r"[^a-z0-9]+", "_", spec.name.lower())


def pg_database(url: str, spec: DatasetSpec) -> str:
    """A database holding ``spec`` on the server of ``url`` (made once per test process)."""
    import psycopg

    key = (url, spec.name)
    if key in _PG_MADE:
        return _PG_MADE[key]
    name = _pg_name(spec)
    base, _, _ = url.rpartition("/")
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        con.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8'")
    target = f"{base}/{name}"
    duck = duckdb_connection(DatasetSpec(spec.base))
    with psycopg.connect(target, autocommit=True) as con:
        for table, cols in TABLES.items():
            names = ENGINE_COLUMNS["postgres"][table]
            types = [("numeric" if c == "pn" else PG_TYPES[cols[c][0]]) for c in names]
            con.execute(f"CREATE TABLE {table} (" + ", ".join(
                f'"{c}" {t}' for c, t in zip(names, types)) + ")")
            source = [("f" if c == "pn" else c) for c in names]  # (pn: f's value, as numeric)
            rows = duck.execute(f"SELECT {', '.join(source)} FROM {table}").fetchall()
            rows = [tuple(Decimal(repr(v)) if c == "pn" and v is not None else v
                          for c, v in zip(names, row)) for row in rows]
            if rows:
                with con.cursor() as cur:
                    cur.executemany(f"INSERT INTO {table} VALUES ("
                                    + ", ".join(["%s"] * len(names)) + ")", rows)
            if spec.extra is not None and spec.extra[0] == table:
                con.execute(f"INSERT INTO {table} VALUES {PG_EDGES[table][spec.extra[1]]}")
    duck.close()
    _PG_MADE[key] = target
    return target


def pg_maker(url: str, policy: pp.Policy) -> Callable[[DatasetSpec, Any], pp.Session]:
    def make(spec: DatasetSpec, budget: Any) -> pp.Session:
        return pp.connect(pg_database(url, spec), policy=policy, budget=budget)
    return make


# -- Spark -------------------------------------------------------------------------------------

SPARK_EDGES = {"q": ["null", "37s", "max", "min", "nan", "tiny", "outside", "odd", "badutf8"],
               "u": sorted(U_EDGES)}
_BAD = {"s": b"a\xfe", "g": b"\xff"}  # (the badutf8 row's strings: not UTF-8)
_DIR = Path(tempfile.mkdtemp(prefix="privplan-gate-fuzz-"))


def _spark_relation(spec: DatasetSpec, table: str) -> Any:
    """``table`` of ``spec`` as an Arrow table of Spark-holdable values."""
    import pyarrow as pa

    extra = spec.extra
    bad = extra == ("q", "badutf8")
    duck_spec = DatasetSpec(spec.base, ("q", "37s") if bad else extra)
    con = duckdb_connection(duck_spec)
    names = ENGINE_COLUMNS["spark"][table]
    items = [("CASE WHEN d > DATE '9999-12-31' THEN DATE '9999-12-31' WHEN d < DATE "
              "'0001-01-01' THEN DATE '0001-01-01' ELSE d END AS d") if c == "d" else f'"{c}"'
             for c in names]
    arrow = con.sql(f"SELECT {', '.join(items)} FROM {table}").to_arrow_table()
    con.close()
    if bad and table == "q":
        last = arrow.num_rows - 1
        for col, raw in _BAD.items():
            values = [v.encode() if v is not None else None
                      for v in arrow.column(col).to_pylist()]
            values[last] = raw
            i = arrow.schema.get_field_index(col)
            arrow = arrow.set_column(i, col, pa.array(values, pa.binary()).view(pa.string()))
    return arrow


def spark_maker(spark: Any, policy: pp.Policy) -> Callable[[DatasetSpec, Any], pp.Session]:
    import pyarrow.parquet as pq

    def make(spec: DatasetSpec, budget: Any) -> pp.Session:
        own = spark.newSession()
        for table in TABLES:
            path = _DIR / f"{_pg_name(spec)}_{table}.parquet"
            if not path.exists():
                pq.write_table(_spark_relation(spec, table), path)
            own.read.parquet(str(path)).createOrReplaceTempView(table)
        return pp.connect(own, policy=policy, budget=budget)
    return make
