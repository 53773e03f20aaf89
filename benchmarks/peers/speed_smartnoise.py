"""SmartNoise SQL speed adapter (``pip install smartnoise-sql duckdb``) for ``vs_peers.py``.

SmartNoise rewrites a query into an exact subquery, runs it on a database through one of its
readers, and adds noise to the rows in Python. Two backends (the job's ``options.backend``):

* ``duckdb``: the subquery runs on DuckDB, on the very file plain DuckDB reads (attached read
  only as ``bench``), through SmartNoise's PostgreSQL reader (``engine="postgres"``: the SQL it
  emits for PostgreSQL runs on DuckDB as is) over a four-line DB-API shim (DuckDB's Python
  connection cannot be iterated and has no transaction to commit). Load: attaching the file.
  DuckDB refuses the ``ORDER BY RANDOM()`` window of SmartNoise's ``max_ids`` sampling, so the
  shim draws that random number in a column below the window (:func:`random_below_window`).
* ``sqlite``: SmartNoise's SQLite reader (``engine="sqlite"``), the engine its ``from_df``
  (pandas) reader runs on. ``from_df`` copies the frame into a new in-memory SQLite database
  each time it is called; here that database is made once, at load (the CSV export read with
  pandas, written by ``DataFrame.to_sql``), and every query gets a reader over it.

Configuration (as in ``run_smartnoise.py``): the metadata declares ``age`` [0, 100] and
``cost`` [0, 20000] (clamped; ``cost`` nullable), ``department`` as a string, and
``censor_dims: false`` (the group keys are public: no thresholding, no δ). Row level:
``row_privacy: true``; user level: ``patient_id`` is the ``private_id`` with ``max_ids: 10``
(at most 10 rows per patient, sampled). Each query gets ``Privacy(epsilon=ε / k, delta=0)``
where k is SmartNoise's own ``get_privacy_cost`` at ε = 1 (3 for COUNT(*) with AVG: a noisy
count, and AVG's noisy sum and count, each charged ε), so the whole query spends ε. ``k`` is
asked once at load. Timed per query: making the private reader (metadata parsing) and
``execute`` (parse, rewrite, run the subquery, fetch, noise) to a list of rows; ``parts.engine``
is the time in the database (execute and fetch).

    python benchmarks/peers/speed_smartnoise.py job.json   # (driven by vs_peers.py)
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

import snsql
from _speed import Job, Loaded, Query, budget_note, serve, versions
from snsql import Privacy

SCHEMA = "bench"


def random_below_window(sql: str) -> str:
    """SmartNoise's ``max_ids`` sampling orders each unit's rows by ``RANDOM()`` in a window,
    which DuckDB refuses ("ORDER BY window expressions cannot be volatile"): draw the random
    number in a column of the window's input and order by that column (the same sampling)."""
    window = "ORDER BY RANDOM ( ) ) AS row_num FROM ("
    if window not in sql:
        return sql
    if sql.count(window) != 1 or sql.count(") AS clamped") != 1:
        raise ValueError(f"unexpected SmartNoise sampling SQL: {sql[:300]}")
    sql = sql.replace(window, "ORDER BY _sn_random ) AS row_num FROM ( SELECT *, RANDOM() AS "
                              "_sn_random FROM (")
    return sql.replace(") AS clamped", ") AS _sn_rows ) AS clamped")


class Cursor:
    """The DB-API subset SmartNoise's readers use, over a DuckDB or SQLite cursor; counts the
    time spent in the engine (execute and fetch)."""

    def __init__(self, owner: Connection) -> None:
        self.owner, self.cur, self.description = owner, owner.con.cursor(), None
        self.rows: list[Any] = []

    def execute(self, sql: str) -> None:
        start = time.perf_counter()
        self.cur.execute(self.owner.transform(sql))
        self.description = self.cur.description
        self.rows = self.cur.fetchall()
        self.owner.engine_s += time.perf_counter() - start

    def __iter__(self) -> Any:
        return iter(self.rows)


class Connection:
    """A connection as SmartNoise's readers expect one, over DuckDB's (which cannot be iterated
    and has no transaction to commit) or SQLite's; ``transform`` adapts SmartNoise's SQL."""

    def __init__(self, con: Any, transform: Callable[[str], str] = lambda sql: sql) -> None:
        self.con, self.transform, self.engine_s = con, transform, 0.0

    def cursor(self) -> Cursor:
        return Cursor(self)

    def commit(self) -> None:  # (read-only queries: nothing to commit)
        pass

    def rollback(self) -> None:
        pass


def metadata(job: Job, q: Query) -> dict[str, Any]:
    """SmartNoise metadata for the ``visits`` table at the query's privacy unit."""
    table: dict[str, Any] = {"censor_dims": False, "rows": job["rows"],
                             "patient_id": {"type": "int"},
                             "department": {"type": "string", "nullable": False}}
    for col, (lo, hi) in job["bounds"].items():
        table[col] = {"type": "int" if col == "age" else "float", "lower": lo, "upper": hi,
                      "nullable": col == "cost"}
    if q["unit"] == "row":
        table["row_privacy"] = True
    else:
        table.update(row_privacy=False, max_ids=q["max_rows_per_unit"])
        table[q["unit"]] = {"type": "int", "private_id": True}
    return {"Collection": {SCHEMA: {job["table"]: table}}}


def connect(job: Job) -> tuple[Connection, str]:
    """(connection, SmartNoise engine name) for the job's backend; the data loaded."""
    backend = job["options"].get("backend", "duckdb")
    if backend == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.execute(f"ATTACH '{job['data']['duckdb']}' AS {SCHEMA} (READ_ONLY)")
        return Connection(con, random_below_window), "postgres"
    import pandas as pd

    columns = ["patient_id", "department", "age", "cost"]
    frame = pd.read_csv(job["data"]["csv"], usecols=columns)
    con = sqlite3.connect(":memory:")
    con.execute(f"ATTACH DATABASE ':memory:' AS {SCHEMA}")
    frame.to_sql(job["table"], con, index=False)  # (pandas writes to the main schema)
    con.execute(f"CREATE TABLE {SCHEMA}.{job['table']} AS SELECT * FROM main.{job['table']}")
    con.execute(f"DROP TABLE main.{job['table']}")
    return Connection(con), "sqlite"


def load(job: Job) -> Loaded:
    con, engine = connect(job)
    runners, notes = {}, {}
    for q in job["queries"]:
        meta = metadata(job, q)
        sql = q["sql"].replace(f"FROM {job['table']}", f"FROM {SCHEMA}.{job['table']}")
        probe = snsql.from_connection(con, engine=engine, privacy=Privacy(epsilon=1.0, delta=0.0),
                                      metadata=meta)
        k = float(probe.get_privacy_cost(sql)[0])  # what SmartNoise charges at ε = 1
        privacy = Privacy(epsilon=q["epsilon"] / k, delta=0.0)

        def run(sql: str = sql, meta: dict[str, Any] = meta, privacy: Privacy = privacy
                ) -> tuple[int, dict[str, float]]:
            con.engine_s = 0.0
            reader = snsql.from_connection(con, engine=engine, privacy=privacy, metadata=meta)
            released = len(reader.execute(sql)) - 1  # (the first row is the header)
            return released, {"engine": con.engine_s}

        runners[q["id"]] = run
        unit = ("row_privacy: true" if q["unit"] == "row" else
                f"private_id {q['unit']}, max_ids: {q['max_rows_per_unit']}")
        notes[q["id"]] = (f"{budget_note(q)}; engine={engine} on {job['options'].get('backend')}"
                          f"; {unit}; censor_dims: false; Privacy(epsilon={q['epsilon'] / k:g}, "
                          f"delta=0) [SmartNoise cost at ε=1: {k:g}]")
    return Loaded(runners, versions("smartnoise-sql", "opendp", "duckdb", "pandas"), notes)


if __name__ == "__main__":
    serve(load)
