"""Budget efficiency of planned reports: what privplan charges vs sequential composition, and the
error at a fixed total budget with privplan's optimised allocation vs an equal split.

Workloads (counts and sums per stratum x age band, with disjoint and overlapping filters):

* ``pums_mixed``   — PUMS sample (``benchmarks/data/PUMS.csv`` + ``PUMS.yaml``, SmartNoise
  metadata, table ``PUMS.PUMS``). The sample has no state column, so the race group plays the
  state: COUNT and SUM(income) per race x age band (disjoint cells), per race, per age band,
  married per sex, and the grand total (overlapping).
* ``demo_mixed``   — the demo hospital data (``privplan.demo.data``), hospital as the state:
  COUNT and SUM(cost) per hospital x age band, per hospital, per age band, per department,
  insured, and the grand total.
* ``demo_disjoint`` — only the hospital x age band cells (every pair disjoint).

For each workload, at a total budget ε = 1:

1. *Same noise*: privplan's optimised per-query budgets, composed with the general composition
   theorem (what privplan charges), against the sum of the same budgets (what sequential
   composition — SmartNoise, Tumult, PipelineDP, Qrlew, BigQuery — charges for that noise). Also
   for the equal split ε/n: what privplan would charge for it.
2. *Fixed total*: mean relative error |noisy − true| / max(|true|, 1) over every released value,
   over ``--repeat`` runs, for (a) privplan's optimised allocation, (b) the equal split ε/n under
   sequential composition, (c) the largest equal budget privplan's composition allows (no
   optimisation). The expected relative noise std (data-independent std / |true|) is reported
   too. Every run goes through a real session (in-memory ledger, budget ε = 1), and the
   session's ``spent()`` is checked to be within the budget.

Run from the repository root: ``python benchmarks/budget_efficiency.py [--repeat 5]
[--rows 200000] [--quick] [--out PATH]``. Prints a table and writes
``benchmarks/results/budget_efficiency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb

import privplan as pp
from privplan.accounting.solver import compose
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.report import (
    REPORT_EXACT_LIMIT,
    ReportSpec,
    column_errors,
    open_session,
    plan_report,
)
from privplan.report.planning import _plan_query

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
BUDGET = 1.0

AGE_BANDS_PUMS = [(18, 29, "18_29"), (30, 44, "30_44"), (45, 64, "45_64"), (65, 120, "65_up")]
RACES = ["1", "2", "3", "4"]
AGE_BANDS_DEMO = [(0, 17, "0_17"), (18, 34, "18_34"), (35, 49, "35_49"), (50, 64, "50_64"),
                  (65, 100, "65_up")]
HOSPITALS = ["A", "B", "C", "D"]
DEPARTMENTS = ["cardiology", "emergency", "oncology", "orthopedics", "pediatrics"]


# ============================================================================== workloads


def pums_queries() -> list[dict[str, str]]:
    t = "PUMS.PUMS"
    qs = []
    for r in RACES:
        for lo, hi, band in AGE_BANDS_PUMS:
            qs.append({"name": f"race{r}_age{band}",
                       "sql": f"SELECT COUNT(*) AS n, SUM(income) AS income FROM {t} "
                              f"WHERE race = '{r}' AND age BETWEEN {lo} AND {hi}"})
    for r in RACES:
        qs.append({"name": f"race{r}", "sql": f"SELECT COUNT(*) AS n, SUM(income) AS income "
                                              f"FROM {t} WHERE race = '{r}'"})
    for lo, hi, band in AGE_BANDS_PUMS:
        qs.append({"name": f"age{band}", "sql": f"SELECT COUNT(*) AS n FROM {t} "
                                                f"WHERE age BETWEEN {lo} AND {hi}"})
    for s in ("0", "1"):
        qs.append({"name": f"married_sex{s}", "sql": f"SELECT COUNT(*) AS n FROM {t} "
                                                     f"WHERE sex = '{s}' AND married = '1'"})
    qs.append({"name": "total", "sql": f"SELECT COUNT(*) AS n, SUM(income) AS income FROM {t}"})
    return qs


def demo_cells() -> list[dict[str, str]]:
    return [{"name": f"{h}_age{band}",
             "sql": "SELECT COUNT(*) AS n, SUM(cost) AS cost FROM visits "
                    f"WHERE hospital = '{h}' AND age BETWEEN {lo} AND {hi}"}
            for h in HOSPITALS for lo, hi, band in AGE_BANDS_DEMO]


def demo_queries() -> list[dict[str, str]]:
    qs = demo_cells()
    for h in HOSPITALS:
        qs.append({"name": f"hospital_{h}", "sql": "SELECT COUNT(*) AS n, SUM(cost) AS cost "
                                                   f"FROM visits WHERE hospital = '{h}'"})
    for lo, hi, band in AGE_BANDS_DEMO:
        qs.append({"name": f"age{band}", "sql": "SELECT COUNT(*) AS n FROM visits "
                                                f"WHERE age BETWEEN {lo} AND {hi}"})
    for d in DEPARTMENTS:
        qs.append({"name": f"dept_{d}", "sql": "SELECT COUNT(*) AS n FROM visits "
                                               f"WHERE department = '{d}'"})
    qs.append({"name": "insured", "sql": "SELECT COUNT(*) AS n FROM visits WHERE insured"})
    qs.append({"name": "total", "sql": "SELECT COUNT(*) AS n, SUM(cost) AS cost FROM visits"})
    return qs


def workloads(demo_db: Path) -> list[tuple[str, dict[str, Any], Any]]:
    """(name, spec dict, a function returning a plain DuckDB connection for the truth)."""
    pums = {"database": ":memory:", "register": {"PUMS": str(DATA / "PUMS.csv")},
            "policy": str(DATA / "PUMS.yaml"), "policy_format": "smartnoise",
            "budget": {"epsilon": BUDGET}, "objective": "weighted_sum",
            "queries": pums_queries()}
    demo = {"database": str(demo_db), "policy": str(demo_policy_path()),
            "budget": {"epsilon": BUDGET}, "objective": "weighted_sum"}

    def pums_truth() -> duckdb.DuckDBPyConnection:
        con = duckdb.connect()
        con.execute("CREATE SCHEMA PUMS")
        path = str(DATA / "PUMS.csv").replace("'", "''")
        con.execute("CREATE VIEW PUMS.PUMS AS SELECT age, CAST(sex AS VARCHAR) AS sex, "
                    "CAST(educ AS VARCHAR) AS educ, CAST(race AS VARCHAR) AS race, income, "
                    f"CAST(married AS VARCHAR) AS married FROM read_csv_auto('{path}')")
        return con

    def demo_truth() -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(demo_db), read_only=True)

    return [("pums_mixed", pums, pums_truth),
            ("demo_mixed", {**demo, "queries": demo_queries()}, demo_truth),
            ("demo_disjoint", {**demo, "queries": demo_cells()}, demo_truth)]


# ============================================================================== measuring


CLAMPED = {"SUM(income)": "SUM(LEAST(GREATEST(income, 0), 500000))",
           "SUM(cost)": "SUM(LEAST(GREATEST(cost, 0), 20000))"}


def truths(con: duckdb.DuckDBPyConnection, spec: ReportSpec) -> dict[str, dict[str, float]]:
    """The exact answers privplan estimates: sums of values clamped to the policy's bounds (the
    clamping bias is the same for every allocation, so it is left out of the comparison)."""
    out = {}
    for q in spec.queries:
        sql = q.sql
        for raw, clamped in CLAMPED.items():
            sql = sql.replace(raw, clamped)
        df = con.execute(sql).df()
        out[q.name] = {c: float(df[c].iloc[0]) if df[c].iloc[0] is not None else 0.0
                       for c in df.columns}
    return out


def expected_rel_std(sess: Any, spec: ReportSpec, budgets: list[Any],
                     truth: dict[str, dict[str, float]]) -> float:
    vals = []
    for q, b in zip(spec.queries, budgets):
        for e in column_errors(_plan_query(sess, q, b)):
            if e.std is not None:
                vals.append(e.std / max(abs(truth[q.name][e.column]), 1.0))
    return statistics.fmean(vals)


def composed(sess: Any, spec: ReportSpec, budgets: list[Any]) -> Any:
    tables = {t.name: t.table_model() for t in sess.policy.private_tables()}
    specs = [m.spec for q, b in zip(spec.queries, budgets)
             for m in _plan_query(sess, q, b).measures]
    specs = [s.__class__(id=f"{i}:{s.id}", table=s.table, region=s.region, cost=s.cost,
                         partition=s.partition, label=s.label) for i, s in enumerate(specs)]
    return compose(specs, tables, type(spec.budget), exact_limit=REPORT_EXACT_LIMIT)


def run_once(spec: ReportSpec, budgets: list[Any], truth: dict[str, dict[str, float]]
             ) -> tuple[list[float], Any]:
    """One release of every query through a real session; relative errors and spent()."""
    errs = []
    with open_session(spec) as sess:
        for q, b in zip(spec.queries, budgets):
            res = sess.sql(q.sql, budget=b)
            for col, true in truth[q.name].items():
                noisy = float(res.df[col].iloc[0])
                errs.append(abs(noisy - true) / max(abs(true), 1.0))
        spent = sess.spent()
    if not spent <= spec.budget:
        raise AssertionError(f"spent {spent} exceeds the budget")
    return errs, spent


def measure(name: str, data: dict[str, Any], truth_con: Any, repeat: int) -> dict[str, Any]:
    spec = ReportSpec.from_dict(data, default_name=name)
    n = len(spec.queries)
    t0 = time.perf_counter()
    plan = plan_report(spec)
    plan_s = time.perf_counter() - t0
    a = plan.allocation
    truth = truths(truth_con(), spec)
    opt = [q.budget for q in plan.queries]
    eq = [pp.PureDP(Fraction(BUDGET) / n)] * n
    uni = list(a.uniform.budgets)
    s = a.structure
    out: dict[str, Any] = {
        "workload": name, "queries": n,
        "pairs": len(s.disjoint) + len(s.overlapping), "disjoint_pairs": len(s.disjoint),
        "cells": len(s.groups), "plan_s": round(plan_s, 3), "budget_epsilon": BUDGET,
        "model_exact": a.model_exact,
    }
    with open_session(spec) as sess:
        out["same_noise"] = {
            "optimised": {"privplan": plan.report_total.cost.epsilon,
                          "sequential": sum(b.epsilon for b in opt)},
            "equal_split": {"privplan": composed(sess, spec, eq).cost.epsilon,
                            "sequential": sum(b.epsilon for b in eq)},
        }
        allocations = {"optimised": opt, "equal_split_sequential": eq,
                       "uniform_general_theorem": uni}
        out["allocations"] = {}
        for key, budgets in allocations.items():
            out["allocations"][key] = {
                "epsilon_per_query": {"min": min(b.epsilon for b in budgets),
                                      "max": max(b.epsilon for b in budgets),
                                      "mean": statistics.fmean(b.epsilon for b in budgets)},
                "expected_rel_std": expected_rel_std(sess, spec, budgets, truth),
            }
    for key, budgets in allocations.items():
        errs, spents = [], []
        for _ in range(repeat):
            e, spent = run_once(spec, budgets, truth)
            errs.extend(e)
            spents.append(spent.epsilon)
        out["allocations"][key]["mean_rel_error"] = statistics.fmean(errs)
        out["allocations"][key]["median_rel_error"] = statistics.median(errs)
        out["allocations"][key]["spent_epsilon"] = max(spents)
    out["objective"] = {"optimised": a.objective_value, "equal_split": a.equal_split.objective_value,
                        "uniform": a.uniform.objective_value}
    return out


# ============================================================================== main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="releases per allocation")
    ap.add_argument("--rows", type=int, default=200_000, help="demo visits to generate")
    ap.add_argument("--quick", action="store_true", help="--repeat 1 --rows 20000")
    ap.add_argument("--out", default=str(HERE / "results" / "budget_efficiency.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.repeat, args.rows = 1, 20_000
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        db = write_demo_database(Path(tmp) / "demo.duckdb", rows=args.rows)
        for name, data, truth in workloads(db):
            t0 = time.perf_counter()
            r = measure(name, data, truth, args.repeat)
            r["total_s"] = round(time.perf_counter() - t0, 2)
            results.append(r)
            print(f"  {name}: done in {r['total_s']} s", file=sys.stderr)
    print_table(results, args)
    payload = {
        "benchmark": "budget_efficiency", "budget": {"epsilon": BUDGET}, "repeat": args.repeat,
        "demo_rows": args.rows, "pums_rows": 1000,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "duckdb": duckdb.__version__},
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


def print_table(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\nBudget efficiency at a total ε = {BUDGET} (demo rows {args.rows}, PUMS 1000 rows, "
          f"{args.repeat} release(s) per allocation)\n")
    print("Same noise — what is charged:")
    print(f"  {'workload':<14} {'queries':>7} {'disjoint pairs':>15} {'privplan':>9} "
          f"{'sequential':>11} {'saving':>7}   {'equal split ε/n: privplan charges':>34}")
    for r in results:
        o, e = r["same_noise"]["optimised"], r["same_noise"]["equal_split"]
        print(f"  {r['workload']:<14} {r['queries']:>7} "
              f"{r['disjoint_pairs']:>7}/{r['pairs']:<7} {o['privplan']:>9.4g} "
              f"{o['sequential']:>11.4g} {o['sequential'] / o['privplan']:>6.2f}x   "
              f"{e['privplan']:>20.4g} (of {e['sequential']:.4g})")
    print("\nFixed total ε — mean relative error |noisy - true| / max(|true|, 1):")
    print("  (optimised: privplan's allocation; equal: ε/n each, sequential composition;"
          " uniform: the largest equal budget the general theorem allows)")
    print(f"  {'workload':<14} {'':>6} {'optimised':>10} {'equal':>10} {'uniform':>10} "
          f"{'equal/optimised':>16}")
    for r in results:
        al = r["allocations"]
        o, e, u = (al["optimised"], al["equal_split_sequential"],
                   al["uniform_general_theorem"])
        for label, key in (("mean", "mean_rel_error"), ("median", "median_rel_error"),
                           ("E std", "expected_rel_std")):
            name = r["workload"] if label == "mean" else ""
            print(f"  {name:<14} {label:>6} {o[key]:>10.4g} {e[key]:>10.4g} {u[key]:>10.4g} "
                  f"{e[key] / o[key]:>15.2f}x")
    print("  (mean / median over every released value and release; E std: expected noise "
          "std / |true|, data-independent noise over the true value)")


if __name__ == "__main__":
    sys.exit(main())
