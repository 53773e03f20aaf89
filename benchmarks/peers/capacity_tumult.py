"""Tumult Analytics adapter for ``benchmarks/session_capacity.py``: how many grouped COUNTs a
``Session`` admits at a fixed noise level, evaluated one by one until it refuses.

Job: as for ``capacity_opendp.py``. Prints ``{"versions", "notes", "results": {wid: {"tumult":
{...}, "tumult_partition": {...}}}}``.

Configuration (local Spark, the job's tiny table, ``AddOneRow()``; public keys through
``KeySet.from_dict``):

* Gaussian: Tumult allows Gaussian noise only under zCDP, so the session gets
  ``RhoZCDPBudget(ρ)`` with ρ the largest value that Tumult's own zCDP → (ε, δ) rule
  (``RhoZCDPToApproxDP``, Bun–Steinke: ρ + 2·sqrt(ρ·ln(1/δ)) = ε) maps to (1, 1e-6); each query
  is ``count(mechanism=CountMechanism.GAUSSIAN)`` at ``RhoZCDPBudget(1/(2σ²))`` (discrete
  Gaussian of variance σ²).
* Laplace: ``PureDPBudget(1)``, each query ``count(mechanism=CountMechanism.LAPLACE)`` at
  ``PureDPBudget(1/scale)`` (geometric noise of that scale).
* Slices: ``.filter("x BETWEEN 10k AND 10k+9")``; separately evaluated queries compose
  sequentially, so slices cost as much as whole-table queries (``tumult``).
* ``tumult_partition`` (half-disjoint workloads): Tumult's parallel composition across queries
  is ``Session.partition_and_create``, which must be told the slices in advance and stops its
  partitions when the parent session is used again, so the alternating order cannot be kept.
  The best a user who knows the workload can do: evaluate the whole-table queries on the parent,
  keeping one query's budget in reserve, until the next would eat the reserve; then spend the
  reserve once on ``partition_and_create`` over a slice column (``x // 10``) with as many slices
  as whole-table queries were admitted, and evaluate one query in each partition session.

    python benchmarks/peers/capacity_tumult.py job.json
"""

from __future__ import annotations

import math
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from typing import Any

import pandas as pd
from _spec import emit, read_job, versions
from pyspark.sql import SparkSession
from tmlt.analytics import (
    AddOneRow,
    CountMechanism,
    KeySet,
    PureDPBudget,
    QueryBuilder,
    RhoZCDPBudget,
    Session,
)


def bun_steinke_rho(epsilon: float, delta: float) -> float:
    """ρ solving ρ + 2·sqrt(ρ·ln(1/δ)) = ε (Tumult's RhoZCDPToApproxDP rule), rounded down."""
    log_inv = math.log(1 / delta)
    root = math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)
    return root * root * (1 - 1e-9)


def query(table: str, keys: list[str], gaussian: bool, where: str | None = None) -> Any:
    qb = QueryBuilder(table)
    if where:
        qb = qb.filter(where)
    mech = CountMechanism.GAUSSIAN if gaussian else CountMechanism.LAPLACE
    return qb.groupby(KeySet.from_dict({"g": keys})).count(name="n", mechanism=mech)


def budgets(job: dict[str, Any], gaussian: bool) -> tuple[Any, Any, str]:
    if gaussian:
        rho = bun_steinke_rho(job["epsilon"], job["delta"])
        per = 1 / (2 * job["sigma"] ** 2)
        return (RhoZCDPBudget(rho), RhoZCDPBudget(per),
                (f"RhoZCDPBudget({rho:.6g}) session, RhoZCDPBudget({per:.6g}) per query, "
                 "CountMechanism.GAUSSIAN"))
    per = 1 / job["laplace_scale"]
    return (PureDPBudget(job["epsilon"]), PureDPBudget(per),
            (f"PureDPBudget({job['epsilon']:g}) session, PureDPBudget({per:g}) per query, "
             "CountMechanism.LAPLACE"))


def _msg(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"


def sequential(spark_df: Any, job: dict[str, Any], w: dict[str, Any]) -> dict[str, Any]:
    gaussian = w["noise"] == "gaussian"
    total, per, config = budgets(job, gaussian)
    sess = Session.from_dataframe(privacy_budget=total, source_id="t", dataframe=spark_df,
                                  protected_change=AddOneRow())
    n, refusal = 0, None
    for i in range(job["cap"]):
        where = None
        if w["disjoint"] and i % 2:
            k = i // 2
            where = f"x BETWEEN {10 * k} AND {10 * k + 9}"
        try:
            sess.evaluate(query("t", job["keys"], gaussian, where), per).collect()
        except Exception as e:  # noqa: BLE001 - the refusal (insufficient budget) included
            refusal = _msg(e)
            break
        n += 1
    return {"admitted": n, "capped": refusal is None, "refusal": refusal,
            "method": "Session.evaluate asked until refusal",
            "spent_remaining": str(sess.remaining_privacy_budget),
            "config": config + ("; slices composed sequentially (separate evaluate calls)"
                                if w["disjoint"] else "")}


def partitioned(spark_df: Any, job: dict[str, Any], w: dict[str, Any]) -> dict[str, Any]:
    gaussian = w["noise"] == "gaussian"
    total, per, config = budgets(job, gaussian)
    sess = Session.from_dataframe(privacy_budget=total, source_id="t", dataframe=spark_df,
                                  protected_change=AddOneRow())
    full, refusal = 0, None
    q = query("t", job["keys"], gaussian)
    # whole-table queries while one query's budget remains in reserve for the partition
    while full < job["cap"] // 2:
        remaining = sess.remaining_privacy_budget.value
        reserve = 2 * per.value.to_float(round_up=True) * (1 - 1e-9)  # float sums of budgets
        if remaining.to_float(round_up=False) < reserve:
            break
        try:
            sess.evaluate(q, per).collect()
        except Exception as e:  # noqa: BLE001
            refusal = _msg(e)
            break
        full += 1
    if full == 0:
        return {"admitted": 0, "refusal": refusal, "method": "parent refused at once",
                "config": config}
    splits = {f"s{k}": k for k in range(full)}
    try:
        children = sess.partition_and_create("t", per, column="slice", splits=splits)
    except Exception as e:  # noqa: BLE001
        return {"admitted": full, "refusal": f"partition_and_create: {_msg(e)}",
                "method": "partition refused", "config": config}
    slices = 0
    for k in range(full):
        child = children[f"s{k}"]
        try:
            child.evaluate(query(f"s{k}", job["keys"], gaussian), per).collect()
        except Exception as e:  # noqa: BLE001
            refusal = _msg(e)
            break
        slices += 1
    return {"admitted": full + slices, "capped": False, "refusal": refusal,
            "whole_table_queries": full, "slice_queries": slices,
            "method": "whole-table queries on the parent (one query's budget kept in reserve), "
                      "then partition_and_create over the slices and one query per partition; "
                      "reordered: Tumult cannot interleave parent and partition queries",
            "config": config + f"; partition_and_create('t', {per}, column='slice' (x // 10), "
                               f"{full} splits)"}


def main() -> None:
    job = read_job()
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = pd.read_csv(job["data"])
    df["slice"] = df["x"] // 10
    sdf = spark.createDataFrame(df).cache()
    results: dict[str, Any] = {}
    for w in job["workloads"]:
        results[w["id"]] = {"tumult": sequential(sdf, job, w)}
        print(f"  tumult: {w['id']} {results[w['id']]['tumult']['admitted']}", file=sys.stderr,
              flush=True)
        if w["disjoint"]:
            results[w["id"]]["tumult_partition"] = partitioned(sdf, job, w)
    emit({"versions": versions("tmlt.analytics", "tmlt.core", "pyspark"),
          "notes": {"rho_total": bun_steinke_rho(job["epsilon"], job["delta"]),
                    "rho_rule": "Bun–Steinke (Tumult's RhoZCDPToApproxDP) for (1, 1e-6)"},
          "results": results})


if __name__ == "__main__":
    main()
