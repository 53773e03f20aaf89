"""PipelineDP adapter (``pip install pipeline-dp``): ``DPEngine`` on the ``LocalBackend``.

Configuration: one ``NaiveBudgetAccountant(total_epsilon=ε_total, total_delta=0)`` per
workload and repetition; each query is one ``aggregate`` with ``budget_weight`` = its ε
(sequential composition), ``NoiseKind.LAPLACE``, and ``public_partitions`` = the public keys
(a query without GROUP BY aggregates one public partition). WHERE filters are applied to the
rows before aggregating (a row-level transformation). Values are clamped to
``min_value=0, max_value=5000``. AVG is ``Metrics.MEAN`` (PipelineDP splits the query's
budget between a noisy count and a noisy sum of values minus the middle of the bounds).

Row level: the privacy id is the row number, ``max_partitions_contributed=1,
max_contributions_per_partition=1``. User level: the privacy id is ``patient_id`` and
``max_contributions=10`` (at most 10 rows per patient in total, sampled): sensitivity 10 for
a count, 10 x 5000 for a sum.

    python benchmarks/peers/run_pipelinedp.py job.json
"""

from __future__ import annotations

import operator
from typing import Any

import pandas as pd
import pipeline_dp
from _spec import Query, Release, Workload, emit, read_job, run_all, versions

METRICS = {"count": pipeline_dp.Metrics.COUNT, "sum": pipeline_dp.Metrics.SUM,
           "avg": pipeline_dp.Metrics.MEAN}
FIELDS = {"count": "count", "sum": "sum", "avg": "mean"}
OPS = {">=": operator.ge, "<": operator.lt, "=": operator.eq}


def params(q: Query, w: Workload, lo: float, hi: float) -> pipeline_dp.AggregateParams:
    """AggregateParams for one query at the workload's privacy unit."""
    bounds: dict[str, Any] = (
        {"max_partitions_contributed": 1, "max_contributions_per_partition": 1}
        if w["unit"] == "row" else {"max_contributions": w["max_rows_per_unit"]})
    values = {} if q["agg"] == "count" else {"min_value": lo, "max_value": hi}
    return pipeline_dp.AggregateParams(metrics=[METRICS[q["agg"]]],
                                       noise_kind=pipeline_dp.NoiseKind.LAPLACE,
                                       budget_weight=q["epsilon"], **bounds, **values)


def make_run(job: dict[str, Any]):
    """PipelineDP's ``run(workload)``: one accountant of the workload's budget per repetition."""
    df = pd.read_csv(job["data"])
    rows = [dict(r, _row=i) for i, r in enumerate(df.to_dict("records"))]
    lo, hi = (float(b) for b in job["bounds"]["cost"])

    def run(w: Workload) -> Release:
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=w["epsilon"], total_delta=0)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
        pid = "_row" if w["unit"] == "row" else "patient_id"
        pending = []
        for q in w["queries"]:
            data = [r for r in rows if all(OPS[op](r[c], v) for c, op, v in q["where"])]
            group = q["group_by"]
            extractors = pipeline_dp.DataExtractors(
                privacy_id_extractor=lambda r, pid=pid: r[pid],
                partition_extractor=(lambda r, g=group: r[g]) if group else (lambda r: ""),
                value_extractor=lambda r, c=q["column"]: r[c] if c else 0)
            result = engine.aggregate(data, params(q, w, lo, hi), extractors,
                                      public_partitions=q["keys"] if group else [""])
            pending.append((q, result))
        accountant.compute_budgets()
        return {q["name"]: {str(k): float(getattr(m, FIELDS[q["agg"]])) for k, m in result}
                for q, result in pending}

    return run


def notes(job: dict[str, Any]) -> dict[str, str]:
    """How each workload was configured, for the results file."""
    out = {}
    for w in job["workloads"]:
        unit = ("privacy id = row, max_partitions_contributed=1, "
                "max_contributions_per_partition=1" if w["unit"] == "row" else
                f"privacy id = patient_id, max_contributions={w['max_rows_per_unit']}")
        split = ", ".join(f"{q['name']}: {METRICS[q['agg']].name} weight {q['epsilon']:g}"
                          for q in w["queries"])
        out[w["id"]] = (f"NaiveBudgetAccountant(ε={w['epsilon']:g}, δ=0), LAPLACE, public "
                        f"partitions; {unit}; {split}")
    return out


def main() -> None:
    job = read_job()
    results, na = run_all(job, {"pipelinedp": make_run(job)})
    emit({"versions": versions("pipeline-dp", "python-dp", "pandas"), "notes": notes(job),
          "results": results, "na": na})


if __name__ == "__main__":
    main()
