"""Tumult Analytics adapter (``pip install tmlt.analytics``; needs Java 17): a local Spark
session, one ``tmlt.analytics.Session`` per workload and repetition.

Configuration: ``Session.from_dataframe(privacy_budget=PureDPBudget(ε_total), ...)``; each
query is evaluated with ``PureDPBudget(ε_q)`` (sequential composition; the last query of a
workload takes what remains, so float rounding cannot refuse it). Group keys are public:
``groupby(KeySet.from_dict({col: keys}))``. WHERE filters: ``.filter("<Spark SQL>")``.
Counts: ``.count()`` (geometric noise); sums: ``.sum("cost", 0, 5000)`` (Laplace); AVG:
``.average("cost", 0, 5000)`` (a noisy sum of ``cost - 2500`` and a noisy count, half the
budget each). Row level: ``protected_change=AddOneRow()``. User level:
``AddRowsWithID("patient_id")`` and ``.enforce(MaxRowsPerID(10))`` (at most 10 rows per
patient, sampled): sensitivity 10 for a count, 10 x 5000 for a sum.

    python benchmarks/peers/run_tumult.py job.json
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's workers need this venv
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from typing import Any

import pandas as pd
from _spec import Query, Release, Workload, emit, read_job, run_all, versions, where_sql
from pyspark.sql import SparkSession
from tmlt.analytics import (
    AddOneRow,
    AddRowsWithID,
    KeySet,
    MaxRowsPerID,
    PureDPBudget,
    QueryBuilder,
    Session,
)


def build(q: Query, w: Workload, table: str, lo: float, hi: float) -> Any:
    """The Tumult query for ``q`` at the workload's privacy unit."""
    qb = QueryBuilder(table)
    if w["unit"] == "patient":
        qb = qb.enforce(MaxRowsPerID(w["max_rows_per_unit"]))
    if q["where"]:
        qb = qb.filter(where_sql(q["where"]).removeprefix(" WHERE "))
    if q["group_by"]:
        qb = qb.groupby(KeySet.from_dict({q["group_by"]: q["keys"]}))
    if q["agg"] == "count":
        return qb.count(name="v")
    if q["agg"] == "sum":
        return qb.sum(q["column"], lo, hi, name="v")
    return qb.average(q["column"], lo, hi, name="v")


def make_run(job: dict[str, Any]):
    """Tumult's ``run(workload)``: a fresh Session of the workload's budget per repetition."""
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sdf = spark.createDataFrame(pd.read_csv(job["data"])).cache()
    lo, hi = (float(b) for b in job["bounds"]["cost"])

    def run(w: Workload) -> Release:
        change = AddOneRow() if w["unit"] == "row" else AddRowsWithID("patient_id")
        session = Session.from_dataframe(privacy_budget=PureDPBudget(w["epsilon"]),
                                         source_id=job["table"], dataframe=sdf,
                                         protected_change=change)
        out: Release = {}
        for i, q in enumerate(w["queries"]):
            last = i == len(w["queries"]) - 1
            budget = session.remaining_privacy_budget if last else PureDPBudget(q["epsilon"])
            frame = session.evaluate(build(q, w, job["table"], lo, hi), budget).toPandas()
            if q["group_by"]:
                out[q["name"]] = {str(k): float(v) for k, v in
                                  zip(frame[q["group_by"]], frame["v"])}
            else:
                out[q["name"]] = {"": float(frame["v"].iloc[0])}
        return out

    return run


def notes(job: dict[str, Any]) -> dict[str, str]:
    """How each workload was configured, for the results file."""
    out = {}
    for w in job["workloads"]:
        unit = ("AddOneRow()" if w["unit"] == "row" else
                f"AddRowsWithID('patient_id'), enforce(MaxRowsPerID({w['max_rows_per_unit']}))")
        split = ", ".join(f"{q['name']}: PureDPBudget({q['epsilon']:g})" for q in w["queries"])
        out[w["id"]] = f"Session(PureDPBudget({w['epsilon']:g}), {unit}); {split}"
    return out


def main() -> None:
    job = read_job()
    results, na = run_all(job, {"tumult": make_run(job)})
    emit({"versions": versions("tmlt.analytics", "tmlt.core", "pyspark"), "notes": notes(job),
          "results": results, "na": na})


if __name__ == "__main__":
    main()
