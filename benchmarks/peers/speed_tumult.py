"""Tumult Analytics speed adapter (``pip install tmlt.analytics``; needs Java 17) for
``vs_peers.py``: a local Spark session (``local[2]``, 2 shuffle partitions, 4 GB driver).

Load: Spark started, the Parquet export read and ``.cache()``d (counted once, so it is in
memory), every query run once over a 1,000-row sample of it (the JVM and Spark's code
generation warm up; a fresh Spark's first query otherwise takes 2-3x longer), and one
long-lived ``Session.from_dataframe`` per privacy unit with ``PureDPBudget(10^6)`` (like
privplan's long-lived sessions).

Configuration (as in ``run_tumult.py``): one aggregation per Tumult query, so COUNT(*) with
AVG(cost) is two evaluations, ``.count()`` and ``.average("cost", 0, 20000)``, at ε/2 each
(sequential composition; Tumult's average is itself a noisy sum and a noisy count); a filtered
SUM is ``.filter("age >= 65").sum("cost", 0, 20000)`` at ε. Group keys public:
``groupby(KeySet.from_dict({"department": keys}))``. NULL costs: Tumult drops them from a sum
or average by default. Row level: ``protected_change=AddOneRow()``; user level:
``AddRowsWithID("patient_id")`` and ``.enforce(MaxRowsPerID(10))`` (at most 10 rows per
patient, sampled).

Timed per query: building the queries and ``session.evaluate(...)`` of each, ``toPandas()``.

    python benchmarks/peers/speed_tumult.py job.json   # (driven by vs_peers.py)
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's workers need this venv
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from typing import Any

from _spec import where_sql
from _speed import Job, Loaded, Query, budget_note, serve, versions
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

SESSION_EPSILON = 1e6
WARM_UP_ROWS = 1_000


def spark_session() -> SparkSession:
    spark = (SparkSession.builder.master("local[2]").appName("privplan-vs-peers")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def tumult_queries(job: Job, q: Query) -> list[Any]:
    """One Tumult query per aggregate of ``q`` (Tumult has one aggregation per query)."""
    lo, hi = (float(b) for b in job["bounds"]["cost"])
    out = []
    for fn, col, name in q["aggs"]:
        qb = QueryBuilder(job["table"])
        if q["unit"] != "row":
            qb = qb.enforce(MaxRowsPerID(q["max_rows_per_unit"]))
        if q["where"]:
            qb = qb.filter(where_sql(q["where"]).removeprefix(" WHERE "))
        if q["group_by"]:
            qb = qb.groupby(KeySet.from_dict({q["group_by"]: job["keys"][q["group_by"]]}))
        if fn == "count":
            out.append(qb.count(name=name))
        elif fn == "sum":
            out.append(qb.sum(col, lo, hi, name=name))
        else:
            out.append(qb.average(col, lo, hi, name=name))
    return out


def sessions_over(job: Job, frame: Any) -> dict[str, Session]:
    """A long-lived Tumult session over ``frame`` per privacy unit the job uses."""
    out = {}
    for unit in {q["unit"] for q in job["queries"]}:
        change = AddOneRow() if unit == "row" else AddRowsWithID(unit)
        out[unit] = Session.from_dataframe(privacy_budget=PureDPBudget(SESSION_EPSILON),
                                           source_id=job["table"], dataframe=frame,
                                           protected_change=change)
    return out


def warm_up(job: Job, frame: Any) -> None:
    """Every query once over a 1,000-row sample: the JVM and Spark's code generation warm up
    without a pass over the data (else the first query of a fresh Spark takes 2-3x longer)."""
    sample = frame.limit(WARM_UP_ROWS).cache()
    sample.count()
    sessions = sessions_over(job, sample)
    for q in job["queries"]:
        for t in tumult_queries(job, q):
            sessions[q["unit"]].evaluate(t, PureDPBudget(q["epsilon"])).toPandas()
    sample.unpersist()


def load(job: Job) -> Loaded:
    spark = spark_session()
    frame = spark.read.parquet(os.path.abspath(job["data"]["parquet"])).cache()
    frame.count()
    warm_up(job, frame)
    sessions = sessions_over(job, frame)
    runners, notes = {}, {}
    for q in job["queries"]:
        share = q["epsilon"] / len(q["aggs"])

        def run(q: Query = q, session: Session = sessions[q["unit"]], share: float = share
                ) -> int:
            frames = [session.evaluate(t, PureDPBudget(share)).toPandas()
                      for t in tumult_queries(job, q)]
            return max(len(f) for f in frames)  # (one frame per aggregate, same keys)

        runners[q["id"]] = run
        unit = ("AddOneRow()" if q["unit"] == "row" else
                f"AddRowsWithID('{q['unit']}'), enforce(MaxRowsPerID({q['max_rows_per_unit']}))")
        aggs = ", ".join(f"{fn}({col or ''}) @ PureDPBudget({share:g})"
                         for fn, col, _ in q["aggs"])
        notes[q["id"]] = (f"{budget_note(q)}; Session(PureDPBudget({SESSION_EPSILON:g}), "
                          f"{unit}); {aggs}")
    return Loaded(runners, versions("tmlt.analytics", "tmlt.core", "pyspark"), notes)


if __name__ == "__main__":
    serve(load)
