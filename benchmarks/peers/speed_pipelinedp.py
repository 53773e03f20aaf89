"""PipelineDP speed adapter (``pip install pipeline-dp pandas``) for ``vs_peers.py``:
``DPEngine`` on the ``LocalBackend`` (plain Python iterables, one process).

Load: the CSV export read with pandas, turned into a list of row tuples ``(row number,
patient_id, department, age, cost)`` (NULL cost as 0.0: PipelineDP has no NULL-skipping sum or
mean), which is the input PipelineDP's local backend iterates over.

Configuration (as in ``run_pipelinedp.py``): one ``NaiveBudgetAccountant(total_epsilon=ε,
total_delta=0)`` per query; one ``aggregate`` with all of the query's metrics (``COUNT`` and
``MEAN`` for COUNT(*) with AVG: PipelineDP splits the query's ε between them), ``NoiseKind.
LAPLACE``, ``public_partitions`` = the public keys (a query without GROUP BY aggregates one
public partition); values clamped to ``min_value=0, max_value=20000``; WHERE filters applied to
the rows before aggregating. Row level: the privacy id is the row number,
``max_partitions_contributed=1, max_contributions_per_partition=1``; user level: the privacy id
is ``patient_id`` and ``max_contributions=10`` (at most 10 rows per patient, sampled).

Timed per query: filtering the rows, building the accountant, engine and aggregation,
``compute_budgets()`` and iterating the lazy result to a list.

    python benchmarks/peers/speed_pipelinedp.py job.json   # (driven by vs_peers.py)
"""

from __future__ import annotations

import operator
from typing import Any

import pandas as pd
import pipeline_dp
from _speed import Job, Loaded, Query, budget_note, serve, versions

METRICS = {"count": pipeline_dp.Metrics.COUNT, "sum": pipeline_dp.Metrics.SUM,
           "avg": pipeline_dp.Metrics.MEAN}
OPS = {">=": operator.ge, "<": operator.lt, "=": operator.eq}
COLUMNS = ("patient_id", "department", "age", "cost")
ROW, PATIENT, DEPARTMENT, AGE, COST = range(5)  # positions in a row tuple
POSITION = {"patient_id": PATIENT, "department": DEPARTMENT, "age": AGE, "cost": COST}


def rows_of(path: str) -> list[tuple[Any, ...]]:
    """The export as row tuples (row number first), NULL cost as 0.0."""
    frame = pd.read_csv(path, usecols=list(COLUMNS))
    frame["cost"] = frame["cost"].fillna(0.0)
    return list(zip(range(len(frame)), *(frame[c].tolist() for c in COLUMNS), strict=True))


def params(q: Query, bounds: tuple[float, float]) -> pipeline_dp.AggregateParams:
    """AggregateParams for the query at its privacy unit."""
    contribution: dict[str, Any] = (
        {"max_partitions_contributed": 1, "max_contributions_per_partition": 1}
        if q["unit"] == "row" else {"max_contributions": q["max_rows_per_unit"]})
    metrics = [METRICS[fn] for fn, _, _ in q["aggs"]]
    values = ({} if metrics == [pipeline_dp.Metrics.COUNT]
              else {"min_value": bounds[0], "max_value": bounds[1]})
    return pipeline_dp.AggregateParams(metrics=metrics, noise_kind=pipeline_dp.NoiseKind.LAPLACE,
                                       **contribution, **values)


def runner(job: Job, rows: list[tuple[Any, ...]], q: Query) -> Any:
    """One timed run of ``q``: filter, aggregate, compute budgets, materialise."""
    bounds = tuple(float(b) for b in job["bounds"]["cost"])
    conds = [(POSITION[col], OPS[op], val) for col, op, val in q["where"]]
    pid = ROW if q["unit"] == "row" else POSITION[q["unit"]]
    group = q["group_by"]
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[pid],
        partition_extractor=(lambda r: r[DEPARTMENT]) if group else (lambda r: ""),
        value_extractor=lambda r: r[COST])
    partitions = job["keys"][group] if group else [""]
    aggregate = params(q, bounds)  # (immutable: made once)

    def run() -> int:
        data = [r for r in rows if all(op(r[i], v) for i, op, v in conds)] if conds else rows
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=q["epsilon"],
                                                       total_delta=0)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
        result = engine.aggregate(data, aggregate, extractors, public_partitions=partitions)
        accountant.compute_budgets()
        return len(list(result))

    return run


def load(job: Job) -> Loaded:
    rows = rows_of(job["data"]["csv"])
    runners, notes = {}, {}
    for q in job["queries"]:
        runners[q["id"]] = runner(job, rows, q)
        unit = ("privacy id = row number, max_partitions_contributed=1, "
                "max_contributions_per_partition=1" if q["unit"] == "row" else
                f"privacy id = {q['unit']}, max_contributions={q['max_rows_per_unit']}")
        metrics = "+".join(METRICS[fn].name for fn, _, _ in q["aggs"])
        notes[q["id"]] = (f"{budget_note(q)}; NaiveBudgetAccountant(ε={q['epsilon']:g}, δ=0), "
                          f"LAPLACE, public partitions; {unit}; {metrics}; NULL cost as 0")
    return Loaded(runners, versions("pipeline-dp", "python-dp", "pandas"), notes)


if __name__ == "__main__":
    serve(load)
