"""SmartNoise SQL adapter (``pip install smartnoise-sql``): runs the job's queries as SQL over
a pandas DataFrame with ``snsql.from_df``.

Configuration: the table's metadata declares the bounds of ``age`` and ``cost`` (clamped),
``nullable: false``, and ``censor_dims: false`` (group keys are public, so no thresholding and
no δ is needed; SmartNoise then releases the keys present in the data, which here are all of
them). Row level: ``row_privacy: true``. User level: ``patient_id`` is the ``private_id`` and
``max_ids: 10`` (at most 10 rows per patient, sampled; counts and sums are calibrated to 10
rows). Each query gets ``Privacy(epsilon=ε_q / k, delta=0)`` where ``k`` is what SmartNoise's
own ``get_privacy_cost`` reports for ε = 1 (2 for AVG, which is a noisy SUM and a noisy COUNT
each charged ε), so the query's total is exactly ε_q.

    python benchmarks/peers/run_smartnoise.py job.json
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import snsql
from _spec import Query, Release, Workload, emit, query_sql, read_job, run_all, versions
from snsql import Privacy

SCHEMA = "bench"


def metadata(job: dict[str, Any], w: Workload) -> dict[str, Any]:
    """SmartNoise metadata for the visits table, at the workload's privacy unit."""
    table: dict[str, Any] = {"censor_dims": False, "rows": job["rows"]}
    cols: dict[str, Any] = {
        "patient_id": {"type": "int"},
        "hospital": {"type": "string", "nullable": False},
        "department": {"type": "string", "nullable": False},
        "age_band": {"type": "string", "nullable": False},
    }
    for name, (lo, hi) in job["bounds"].items():
        cols[name] = {"type": "int" if name == "age" else "float", "lower": lo, "upper": hi,
                      "nullable": False}
    if w["unit"] == "row":
        table["row_privacy"] = True
    else:
        table["row_privacy"] = False
        table["max_ids"] = w["max_rows_per_unit"]
        cols["patient_id"] = {"type": "int", "private_id": True}
    return {"Collection": {SCHEMA: {job["table"]: {**table, **cols}}}}


def main() -> None:
    job = read_job()
    df = pd.read_csv(job["data"])
    cost_factor: dict[str, float] = {}

    def run(w: Workload) -> Release:
        meta = metadata(job, w)
        out: Release = {}
        for q in w["queries"]:
            sql = query_sql(q, f"{SCHEMA}.{job['table']}")
            if sql not in cost_factor:  # what SmartNoise charges for this query at ε = 1
                probe = snsql.from_df(df, privacy=Privacy(epsilon=1.0, delta=0.0), metadata=meta)
                cost_factor[sql] = float(probe.get_privacy_cost(sql)[0])
            eps = q["epsilon"] / cost_factor[sql]
            reader = snsql.from_df(df, privacy=Privacy(epsilon=eps, delta=0.0), metadata=meta)
            assert abs(float(reader.get_privacy_cost(sql)[0]) - q["epsilon"]) < 1e-9
            out[q["name"]] = released(reader.execute_df(sql), q)
        return out

    results, na = run_all(job, {"smartnoise": run})
    notes = {w["id"]: describe(job, w, cost_factor) for w in job["workloads"]}
    emit({"versions": versions("smartnoise-sql", "opendp", "pandas"), "notes": notes,
          "results": results, "na": na})


def released(frame: pd.DataFrame, q: Query) -> dict[str, float]:
    """{key: value} from SmartNoise's answer frame."""
    if q.get("group_by"):
        return {str(k): float(v) for k, v in zip(frame[q["group_by"]], frame["v"])}
    return {"": float(frame["v"].iloc[0])}


def describe(job: dict[str, Any], w: Workload, cost_factor: dict[str, float]) -> str:
    """How the workload was configured, for the results file."""
    unit = ("row_privacy: true" if w["unit"] == "row"
            else f"private_id patient_id, max_ids: {w['max_rows_per_unit']}")
    parts = []
    for q in w["queries"]:
        sql = query_sql(q, f"{SCHEMA}.{job['table']}")
        k = cost_factor.get(sql, 1.0)
        parts.append(f"{sql} @ Privacy(epsilon={q['epsilon'] / k:g}, delta=0)"
                     f" [SmartNoise cost at ε=1: {k:g}]")
    return f"{unit}; censor_dims: false; " + "; ".join(parts)


if __name__ == "__main__":
    main()
