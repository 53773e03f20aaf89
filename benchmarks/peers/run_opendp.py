"""OpenDP adapter (``pip install "opendp[polars]"``): the Polars front end, ``dp.Context``.

Configuration: one ``Context.compositor`` per workload and repetition with
``privacy_loss=dp.loss_of(epsilon=ε_total)`` split over the queries by their budgets (pure ε,
sequential composition). Group keys are public through ``.with_keys(...)`` (a left join on
the key set; no key is treated as an invariant). Counts: ``dp.len()`` (integer Laplace);
sums: ``pl.col("cost").fill_null(0).dp.sum((0, 5000))`` (float Laplace; the ``max_length``
margin of 10^6 rows is only the bound OpenDP needs for float-sum rounding); AVG:
``.dp.mean((0, 5000))``, which OpenDP releases as a noisy sum and a noisy count, each with
half of the query's ε.

Row level: ``dp.unit_of(contributions=1)``. User level: ``dp.unit_of(contributions=1,
identifier="patient_id")`` and ``.truncate_per_group(10)`` (at most 10 rows per patient in
total, sampled): sensitivity 10 for a grouped count, 10 x 5000 for a grouped sum.

    python benchmarks/peers/run_opendp.py job.json
"""

from __future__ import annotations

import warnings
from typing import Any

import opendp.prelude as dp
import polars as pl
from _spec import Query, Release, Workload, emit, read_job, run_all, versions

dp.enable_features("contrib")
warnings.simplefilter("ignore", FutureWarning)  # dp.len()'s default "signed" is changing

MAX_LENGTH = 1_000_000


def condition(where: list[list[Any]]) -> pl.Expr | None:
    """A Polars filter for ``[column, op, value]`` conditions (AND)."""
    ops = {">=": lambda c, v: c >= v, "<": lambda c, v: c < v, "=": lambda c, v: c == v}
    expr = None
    for col, op, val in where:
        e = ops[op](pl.col(col), val)
        expr = e if expr is None else expr & e
    return expr


def aggregate(q: Query, lo: float, hi: float) -> pl.Expr:
    """The query's OpenDP aggregate expression."""
    if q["agg"] == "count":
        return dp.len().alias("v")
    col = pl.col(q["column"]).fill_null(0.0)
    fn = col.dp.sum((lo, hi)) if q["agg"] == "sum" else col.dp.mean((lo, hi))
    return fn.alias("v")


def make_run(job: dict[str, Any]):
    """OpenDP's ``run(workload)``: one compositor of the workload's budget per repetition."""
    data = pl.scan_csv(job["data"])
    lo, hi = (float(b) for b in job["bounds"]["cost"])
    margins = [dp.polars.Margin(by=[], max_length=MAX_LENGTH)] + [
        dp.polars.Margin(by=[c], max_length=MAX_LENGTH) for c in ("hospital", "age_band")]

    def run(w: Workload) -> Release:
        user = w["unit"] == "patient"
        unit = (dp.unit_of(contributions=1, identifier="patient_id") if user
                else dp.unit_of(contributions=1))
        ctx = dp.Context.compositor(data=data, privacy_unit=unit,
                                    privacy_loss=dp.loss_of(epsilon=w["epsilon"]),
                                    split_by_weights=[q["epsilon"] for q in w["queries"]],
                                    margins=margins)
        out: Release = {}
        for q in w["queries"]:
            query = ctx.query()
            if user:
                query = query.truncate_per_group(w["max_rows_per_unit"])
            cond = condition(q["where"])
            if cond is not None:
                query = query.filter(cond)
            if q["group_by"]:
                keys = pl.DataFrame({q["group_by"]: q["keys"]})
                frame = (query.group_by(q["group_by"]).agg(aggregate(q, lo, hi))
                         .with_keys(keys).release().collect())
                out[q["name"]] = {str(k): float(v) for k, v in
                                  zip(frame[q["group_by"]], frame["v"]) if v is not None}
            else:
                frame = query.select(aggregate(q, lo, hi)).release().collect()
                out[q["name"]] = {"": float(frame["v"][0])}
        return out

    return run


def notes(job: dict[str, Any]) -> dict[str, str]:
    """How each workload was configured, for the results file."""
    out = {}
    for w in job["workloads"]:
        split = ", ".join(f"{q['name']}: ε={q['epsilon']:g}" for q in w["queries"])
        unit = ("unit_of(contributions=1)" if w["unit"] == "row" else
                "unit_of(contributions=1, identifier='patient_id'), "
                f"truncate_per_group({w['max_rows_per_unit']})")
        out[w["id"]] = f"Context.compositor(ε={w['epsilon']:g}, {unit}); {split}"
    return out


def main() -> None:
    job = read_job()
    results, na = run_all(job, {"opendp": make_run(job)})
    emit({"versions": versions("opendp", "polars"), "notes": notes(job), "results": results,
          "na": na})


if __name__ == "__main__":
    main()
