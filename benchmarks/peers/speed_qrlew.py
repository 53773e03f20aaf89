"""Qrlew speed adapter (``pip install pyqrlew duckdb``) for ``vs_peers.py``.

Qrlew rewrites a SQL query into a DP SQL query (noise drawn in SQL by ``RANDOM()``), which is
run here on DuckDB, on the very file plain DuckDB reads (attached read only, ``USE``d, so the
rewritten query's ``visits`` is that table). Its default output dialect (PostgreSQL) runs on
DuckDB as is.

Configuration (as in ``run_qrlew.py``): the ``Dataset`` has the columns the queries read, with
``with_range`` bounds for ``age`` [0, 100] and ``cost`` [0, 20000] and ``with_possible_values``
for the public ``department`` keys. Qrlew reads a dataset's schema and size through SQLAlchemy
(``SELECT count(*)`` per table); rather than copy millions of rows into a database it can read,
the adapter lets it read a one-row SQLite table of the same columns and declares the true row
count in the size statistics (the only thing the table's rows contribute; Qrlew treats the
size as public and clamps noisy counts to [0, size]). Qrlew only has the Gaussian mechanism:
each query gets (ε, δ = 1e-6); ``rewrite_with_differential_privacy`` charges each aggregate of
a query the whole (ε, δ), so a query with k Gaussian events (3 for COUNT(*) with AVG) is
rewritten at (ε / k, δ / k), which adds up to (ε, δ) (k is found at load). Row level: privacy
unit ``("visits", [], "_PRIVACY_UNIT_ROW_")``; user level: ``("visits", [], "patient_id")``
with ``max_multiplicity=10``.

Timed per query: the rewrite (parse, rewrite, render the SQL: ``parts.rewrite``) and running
the rewritten query on DuckDB to a list of rows (``parts.engine``). Qrlew has no cache of
rewritten queries; a user could keep one (its SQL draws fresh noise each run), which would cost
about ``parts.engine``.

    python benchmarks/peers/speed_qrlew.py job.json   # (driven by vs_peers.py)
"""

from __future__ import annotations

import json
import time
from typing import Any

import duckdb
import pyqrlew as qrl
import sqlalchemy as sa
from _speed import Job, Loaded, NotExpressible, Query, budget_note, serve, versions

SQL_TYPES = {"patient_id": "INTEGER", "department": "TEXT", "age": "INTEGER", "cost": "REAL"}
ONE_ROW = "(1, 'cardiology', 1, 1.0)"


def _declare_size(node: Any, rows: int) -> None:
    """Replace every size statistic of the one-row table by ``rows`` (in place)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "size":
                if value != "1":
                    raise ValueError(f"unexpected Qrlew size statistic {value!r}")
                node[key] = str(rows)
            else:
                _declare_size(value, rows)
    elif isinstance(node, list):
        for value in node:
            _declare_size(value, rows)


def dataset(job: Job) -> qrl.Dataset:
    """Qrlew's Dataset of ``visits``: schema from a one-row SQLite table, the true row count,
    bounds and public keys declared."""
    table = job["table"]
    engine = sa.create_engine("sqlite:///:memory:")
    with engine.begin() as con:
        columns = ", ".join(f"{c} {t}" for c, t in SQL_TYPES.items())
        con.execute(sa.text(f"CREATE TABLE {table} ({columns})"))
        con.execute(sa.text(f"INSERT INTO {table} VALUES {ONE_ROW}"))
    probe = qrl.Dataset.from_database("bench", engine)
    size = json.loads(probe.size)
    _declare_size(size, job["rows"])
    spec = next(line.removeprefix("Dataset: ") for line in str(probe).splitlines()
                if line.startswith("Dataset: "))
    ds = qrl.Dataset.from_str(spec, probe.schema, json.dumps(size))
    for col, (lo, hi) in job["bounds"].items():
        ds = ds.with_range(None, table, col, float(lo), float(hi))
    for col, keys in job["keys"].items():
        ds = ds.with_possible_values(None, table, col, keys)
    return ds


def gaussian_events(event: dict[str, Any]) -> int:
    """How many Gaussian events a dp_accounting event (as a dict) composes."""
    kind = event["class_name"]
    if kind == "GaussianDpEvent":
        return 1
    if kind == "ComposedDpEvent":
        return sum(gaussian_events(e) for e in event["events"])
    if kind == "NoOpDpEvent":
        return 0
    raise NotExpressible(f"unexpected Qrlew DP event {kind}")


def rewriter(job: Job, ds: qrl.Dataset, q: Query) -> tuple[Any, int]:
    """A function rewriting ``q`` at its share of (ε, δ) per Gaussian event, and the count of
    events (found by rewriting once at the whole budget)."""
    table = job["table"]
    unit = "_PRIVACY_UNIT_ROW_" if q["unit"] == "row" else q["unit"]
    extra = {} if q["unit"] == "row" else {"max_multiplicity": float(q["max_rows_per_unit"])}

    def rewrite(k: int) -> Any:
        budget = {"epsilon": q["epsilon"] / k, "delta": q["delta"] / k}
        return ds.relation(q["sql"]).rewrite_with_differential_privacy(
            ds, [(table, [], unit)], budget, **extra)

    k = gaussian_events(rewrite(1).dp_event().to_dict())
    if k == 0:
        raise NotExpressible("Qrlew released the query without noise (no DP event)")
    return rewrite, k


def load(job: Job) -> Loaded:
    con = duckdb.connect()
    con.execute(f"ATTACH '{job['data']['duckdb']}' AS bench (READ_ONLY)")
    con.execute("USE bench")
    ds = dataset(job)
    runners, notes, na = {}, {}, {}
    for q in job["queries"]:
        try:
            rewrite, k = rewriter(job, ds, q)
        except NotExpressible as e:
            na[q["id"]] = str(e)
            continue

        def run(rewrite: Any = rewrite, k: int = k) -> tuple[int, dict[str, float]]:
            start = time.perf_counter()
            sql = rewrite(k).relation().to_query()
            middle = time.perf_counter()
            rows = con.execute(sql).fetchall()
            return len(rows), {"rewrite": middle - start, "engine": time.perf_counter() - middle}

        runners[q["id"]] = run
        unit = ("row" if q["unit"] == "row" else
                f"{q['unit']}, max_multiplicity={q['max_rows_per_unit']}")
        notes[q["id"]] = (f"{budget_note(q)} (Gaussian: δ = {q['delta']:g}); privacy unit {unit};"
                          f" {k} Gaussian event(s) at ε={q['epsilon'] / k:g}, "
                          f"δ={q['delta'] / k:g} each; rewritten SQL run on DuckDB")
    return Loaded(runners, versions("pyqrlew", "duckdb", "sqlalchemy"), notes, na)


if __name__ == "__main__":
    serve(load)
