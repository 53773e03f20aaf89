"""OpenDP speed adapter (``pip install "opendp[polars]"``) for ``vs_peers.py``: the Polars
front end, ``dp.Context``.

Load: the Parquet export read into memory (``pl.read_parquet(...).lazy()``), and one
long-lived ``Context.compositor`` per privacy unit without a split (OpenDP then builds a
privacy filter; ``privacy_loss=dp.loss_of(epsilon=10^6)``, like privplan's long-lived
sessions), each query asked with ``ctx.query(epsilon=ε)``. Margins: ``max_length`` = the
table's row count, with and without the ``department`` grouping (OpenDP needs a bound on the
number of rows for its float sums).

Configuration (as in ``run_opendp.py``): group keys public through ``.with_keys(...)``;
counts ``dp.len()`` (integer Laplace), sums ``pl.col("cost").fill_null(0.0).dp.sum((0,
20000))`` (float Laplace; OpenDP has no NULL-skipping sum, so a NULL cost counts as 0), AVG
``.dp.mean((0, 20000))`` (a noisy sum and a noisy length). The expressions of one query share
its ε. WHERE: ``.filter(...)`` on the rows. Row level: ``dp.unit_of(contributions=1)``; user
level: ``dp.unit_of(contributions=1, identifier="patient_id")`` and ``.truncate_per_group(10)``
(at most 10 rows per patient, sampled).

Timed per query: building the query, ``release()`` (OpenDP builds and checks the measurement,
calibrating the noise) and ``collect()`` (Polars runs it) to a DataFrame; ``parts`` splits
``release`` and ``collect``.

    python benchmarks/peers/speed_opendp.py job.json   # (driven by vs_peers.py)
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import opendp.prelude as dp
import polars as pl
from _speed import Job, Loaded, Query, budget_note, serve, versions

dp.enable_features("contrib")
warnings.simplefilter("ignore", FutureWarning)  # dp.len()'s default "signed" is changing

SESSION_EPSILON = 1e6
OPS = {">=": lambda c, v: c >= v, "<": lambda c, v: c < v, "=": lambda c, v: c == v}


def condition(where: list[list[Any]]) -> pl.Expr | None:
    """A Polars filter for ``[column, op, value]`` conditions (AND)."""
    expr = None
    for col, op, val in where:
        e = OPS[op](pl.col(col), val)
        expr = e if expr is None else expr & e
    return expr


def aggregates(q: Query, bounds: tuple[float, float]) -> list[pl.Expr]:
    """The query's OpenDP aggregate expressions, named as in its SQL."""
    out = []
    for fn, col, name in q["aggs"]:
        if fn == "count":
            out.append(dp.len().alias(name))
            continue
        value = pl.col(col).fill_null(0.0)
        out.append((value.dp.sum(bounds) if fn == "sum" else value.dp.mean(bounds)).alias(name))
    return out


def contexts(job: Job, data: pl.LazyFrame) -> dict[str, Any]:
    """A long-lived compositor per privacy unit the job uses."""
    rows = job["rows"]
    margins = [dp.polars.Margin(by=[], max_length=rows)] + [
        dp.polars.Margin(by=[col], max_length=rows) for col in job["keys"]]
    out = {}
    for unit in {q["unit"] for q in job["queries"]}:
        privacy_unit = (dp.unit_of(contributions=1) if unit == "row"
                        else dp.unit_of(contributions=1, identifier=unit))
        out[unit] = dp.Context.compositor(data=data, privacy_unit=privacy_unit,
                                          privacy_loss=dp.loss_of(epsilon=SESSION_EPSILON),
                                          margins=margins)
    return out


def runner(job: Job, ctx: Any, q: Query) -> Any:
    """One timed run of ``q``: query, release, collect."""
    lo, hi = (float(b) for b in job["bounds"]["cost"])
    group = q["group_by"]
    keys = pl.DataFrame({group: job["keys"][group]}) if group else None

    def run() -> tuple[int, dict[str, float]]:
        start = time.perf_counter()
        query = ctx.query(epsilon=q["epsilon"])
        if q["unit"] != "row":
            query = query.truncate_per_group(q["max_rows_per_unit"])
        cond = condition(q["where"])
        if cond is not None:
            query = query.filter(cond)
        aggs = aggregates(q, (lo, hi))
        query = (query.group_by(group).agg(*aggs).with_keys(keys) if group
                 else query.select(*aggs))
        released = query.release()
        middle = time.perf_counter()
        frame = released.collect()
        return frame.height, {"release": middle - start, "collect": time.perf_counter() - middle}

    return run


def load(job: Job) -> Loaded:
    data = pl.read_parquet(job["data"]["parquet"]).lazy()
    ctxs = contexts(job, data)
    runners, notes = {}, {}
    for q in job["queries"]:
        runners[q["id"]] = runner(job, ctxs[q["unit"]], q)
        unit = ("unit_of(contributions=1)" if q["unit"] == "row" else
                f"unit_of(contributions=1, identifier='{q['unit']}'), "
                f"truncate_per_group({q['max_rows_per_unit']})")
        aggs = ", ".join(f"{fn}({col or '*'})" for fn, col, _ in q["aggs"])
        notes[q["id"]] = (f"{budget_note(q)}; Context.compositor(ε={SESSION_EPSILON:g}, no "
                          f"split), ctx.query(epsilon={q['epsilon']:g}); {unit}; {aggs}; "
                          "NULL cost as 0")
    return Loaded(runners, versions("opendp", "polars"), notes)


if __name__ == "__main__":
    serve(load)
