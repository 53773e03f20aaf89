"""Qrlew adapter (``pip install pyqrlew duckdb``): Qrlew rewrites each SQL query into a DP SQL
query, which is run on DuckDB (its default output dialect, PostgreSQL, runs there as is).

Configuration: the ``Dataset`` is read (schema and table size) from a SQLite copy of the data
through SQLAlchemy, with ``with_range`` bounds for ``age`` [0, 100] and ``cost`` [0, 5000]
and ``with_possible_values`` for the public keys (hospital, department, age_band); no
synthetic data. Qrlew only has the Gaussian mechanism, so every query gets (ε_q, δ_q) with
δ = 1e-6 for the workload, split like ε. ``rewrite_with_differential_privacy`` charges each
aggregate of a query the query's whole (ε, δ) (AVG is a SUM and a COUNT: two Gaussian
events), so a query with k events is rewritten at (ε_q / k, δ_q / k) and its events add up to
(ε_q, δ_q) by sequential composition. Qrlew clamps noisy counts to [0, table size] (it reads
the exact row count as public).

Row level: privacy unit ``("visits", [], "_PRIVACY_UNIT_ROW_")``. User level: privacy unit
``("visits", [], "patient_id")`` with ``max_multiplicity=10`` (at most 10 rows per patient).

    python benchmarks/peers/run_qrlew.py job.json
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import pyqrlew as qrl
import sqlalchemy as sa
from _spec import (
    NotExpressible,
    Query,
    Release,
    Workload,
    emit,
    query_sql,
    read_job,
    run_all,
    versions,
)

PUBLIC = ("hospital", "department", "age_band")


def dataset(job: dict[str, Any], df: pd.DataFrame) -> qrl.Dataset:
    """Qrlew's Dataset: schema and size from SQLite, bounds and public values declared."""
    engine = sa.create_engine("sqlite:///:memory:")
    df.to_sql(job["table"], engine, index=False)
    ds = qrl.Dataset.from_database("bench", engine)
    for col, (lo, hi) in job["bounds"].items():
        ds = ds.with_range(None, job["table"], col, float(lo), float(hi))
    for col in PUBLIC:
        ds = ds.with_possible_values(None, job["table"], col, sorted(df[col].unique()))
    return ds


def gaussian_events(event: dict[str, Any]) -> list[float]:
    """The noise multipliers of the Gaussian events in a dp_accounting event (as a dict)."""
    kind = event["class_name"]
    if kind == "GaussianDpEvent":
        return [float(event["noise_multiplier"])]
    if kind == "ComposedDpEvent":
        return [m for e in event["events"] for m in gaussian_events(e)]
    if kind == "NoOpDpEvent":
        return []
    raise NotExpressible(f"unexpected Qrlew DP event {kind}")


def make_run(job: dict[str, Any], notes: dict[str, list[str]]):
    """Qrlew's ``run(workload)``: rewrite each query (cached) and run it on DuckDB."""
    df = pd.read_csv(job["data"])
    ds = dataset(job, df)
    con = duckdb.connect()
    con.register("frame", df)
    con.execute(f"CREATE TABLE {job['table']} AS SELECT * FROM frame")
    rewritten: dict[tuple[str, str], str] = {}

    def rewrite(w: Workload, q: Query) -> str:
        unit = "_PRIVACY_UNIT_ROW_" if w["unit"] == "row" else "patient_id"
        relation = ds.relation(query_sql(q, job["table"]))
        extra = {} if w["unit"] == "row" else {"max_multiplicity": float(w["max_rows_per_unit"])}
        k = 1
        for _ in range(2):
            budget = {"epsilon": q["epsilon"] / k, "delta": q["delta"] / k}
            dp = relation.rewrite_with_differential_privacy(ds, [(job["table"], [], unit)],
                                                            budget, **extra)
            events = gaussian_events(dp.dp_event().to_dict())
            if not events:
                raise NotExpressible("Qrlew released the query without noise (no DP event)")
            if len(events) == k:
                break
            k = len(events)
        notes.setdefault(w["id"], []).append(
            f"{q['name']}: ε={budget['epsilon']:g}, δ={budget['delta']:g} per event, "
            f"{k} Gaussian event(s), noise multipliers {[round(m, 2) for m in events]}")
        return dp.relation().to_query()

    def run(w: Workload) -> Release:
        out: Release = {}
        for q in w["queries"]:
            key = (w["id"], q["name"])
            if key not in rewritten:
                rewritten[key] = rewrite(w, q)
            frame = con.execute(rewritten[key]).df()
            if q["group_by"]:
                out[q["name"]] = {str(k): float(v) for k, v in
                                  zip(frame[q["group_by"]], frame["v"])}
            else:
                out[q["name"]] = {"": float(frame["v"].iloc[0])}
        return out

    return run


def main() -> None:
    job = read_job()
    notes: dict[str, list[str]] = {}
    results, na = run_all(job, {"qrlew": make_run(job, notes)})
    units = {w["id"]: ("row" if w["unit"] == "row" else
                       f"patient_id, max_multiplicity={w['max_rows_per_unit']}")
             for w in job["workloads"]}
    emit({"versions": versions("pyqrlew", "duckdb", "sqlalchemy"),
          "notes": {wid: f"privacy unit {units[wid]}; " + "; ".join(n)
                    for wid, n in notes.items()},
          "results": results, "na": na})


if __name__ == "__main__":
    main()
