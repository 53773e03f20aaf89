"""The pandas accessor ``df.dp`` vs plain DuckDB on the same registered DataFrame.

The frame is :func:`privplan.demo.data.generate_visits` (10M rows by default, ~10-20 s to
generate; it is generated once per run and held in memory). The data owner's
``frame.dp.configure(...)`` is timed once. Then, for each workload, the script warms up once
and times ``--repeat`` repetitions that alternate the DP answer through ``df.dp`` with the same
SQL on a plain DuckDB connection holding the same frame (``duckdb.connect().register("df",
frame)``, zero-copy, ``.execute(sql).df()``), swapping which goes first on every repetition. It
reports the median of each, the ratio DP/plain, and the median time the DP path spent inside
the engine statement (the rest is planning, accounting, ledger, noise and post-processing).

All DP repetitions charge one ``PureDP(1e9)`` budget, so nothing is refused; the ledger grows
by one entry per query (a few dozen in all, which the accountant admits in milliseconds).

Run: ``python benchmarks/pandas_accessor.py [--rows 10000000] [--repeat 5] [--quick]
[--out PATH]``. Prints a table and writes ``benchmarks/results/pandas_accessor.json``. Never
asserts on wall time; the target (reported only) is a ratio <= 2 at 10M rows.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from _common import machine_info, ms, timed, write_json

import privplan as pp
import privplan.pandas  # registers df.dp
from privplan.demo.data import DEFAULT_SEED, DEPARTMENTS, HOSPITALS, generate_visits

HERE = Path(__file__).resolve().parent
DEFAULT_ROWS = 10_000_000
QUICK_ROWS = 100_000
EPSILON = 1.0
TARGET_RATIO = 2.0

# name -> (how df.dp answers it, the plain SQL it is compared with)
WORKLOADS: dict[str, tuple[Callable[[pd.DataFrame], pd.DataFrame], str]] = {
    "count_by_hospital (df.dp.count)": (
        lambda df: df.dp.count(by="hospital", epsilon=EPSILON),
        'SELECT "hospital", COUNT(*) AS "count" FROM "df" GROUP BY "hospital"',
    ),
    "grouped_count_sum_avg (df.dp.sql)": (
        lambda df: df.dp.sql(
            "SELECT hospital, department, COUNT(*) AS n, SUM(length_of_stay) AS stay, "
            "AVG(cost) AS avg_cost FROM df GROUP BY hospital, department", epsilon=EPSILON),
        ("SELECT hospital, department, COUNT(*) AS n, SUM(length_of_stay) AS stay, "
         "AVG(cost) AS avg_cost FROM df GROUP BY hospital, department"),
    ),
    "where_mean_by_hospital (df.dp.where.mean)": (
        lambda df: df.dp.where("age >= 65").mean("cost", by="hospital", epsilon=EPSILON),
        ('SELECT "hospital", AVG("cost") AS "cost" FROM "df" WHERE (age >= 65) '
         'GROUP BY "hospital"'),
    ),
}


def configure(frame: pd.DataFrame) -> None:
    frame.dp.configure(
        bounds={"age": (0, 100), "cost": (0, 20_000), "length_of_stay": (0, 30)},
        public_values={"hospital": list(HOSPITALS), "department": list(DEPARTMENTS),
                       "sex": ["F", "M"]},
        budget=pp.PureDP(1e9),
    )


class EngineTimer:
    """Accumulates the time the DP session spends inside its engine statements."""

    def __init__(self, engine: Any) -> None:
        self.seconds = 0.0
        run = engine.run

        @functools.wraps(run)
        def timed(sql: str) -> Any:
            start = time.perf_counter()
            try:
                return run(sql)
            finally:
                self.seconds += time.perf_counter() - start

        engine.run = timed




def measure(frame: pd.DataFrame, plain: duckdb.DuckDBPyConnection, timer: EngineTimer,
            name: str, ask: Callable[[pd.DataFrame], pd.DataFrame], sql: str,
            repeat: int) -> dict[str, Any]:
    def dp_once() -> tuple[float, float, int]:
        timer.seconds = 0.0
        seconds, out = timed(lambda: ask(frame))
        return seconds, timer.seconds, len(out)

    def plain_once() -> tuple[float, int]:
        seconds, out = timed(lambda: plain.execute(sql).df())
        return seconds, len(out)

    dp_once()  # warm-up (imports, sqlglot caches, DuckDB buffers)
    plain_once()
    dp_times: list[float] = []
    engine_times: list[float] = []
    plain_times: list[float] = []
    dp_rows = plain_rows = 0
    for i in range(repeat):
        for which in (("dp", "plain") if i % 2 == 0 else ("plain", "dp")):
            if which == "dp":
                s, e, dp_rows = dp_once()
                dp_times.append(s)
                engine_times.append(e)
            else:
                s, plain_rows = plain_once()
                plain_times.append(s)
    dp_med = statistics.median(dp_times)
    plain_med = statistics.median(plain_times)
    return {
        "workload": name,
        "plain_sql": sql,
        "rows": len(frame),
        "repeat": repeat,
        "dp_median_s": dp_med,
        "plain_median_s": plain_med,
        "ratio": dp_med / plain_med if plain_med > 0 else None,
        "dp_engine_median_s": statistics.median(engine_times),
        "dp_times_s": dp_times,
        "plain_times_s": plain_times,
        "dp_output_rows": dp_rows,
        "plain_output_rows": plain_rows,
    }



def print_table(results: list[dict[str, Any]]) -> None:
    width = max(len(r["workload"]) for r in results)
    head = (f"{'rows':>10}  {'workload':<{width}}  {'df.dp ms':>9}  {'plain ms':>9}  "
            f"{'ratio':>6}  {'engine ms':>9}")
    print(head)
    print("-" * len(head))
    for r in results:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        print(f"{r['rows']:>10,}  {r['workload']:<{width}}  {ms(r['dp_median_s']):>9}  "
              f"{ms(r['plain_median_s']):>9}  {ratio:>6}  {ms(r['dp_engine_median_s']):>9}")
    print(f"\nmedians over repetitions; 'engine' is the part of the df.dp time spent in the "
          f"engine statement; target (not asserted): ratio <= {TARGET_RATIO} at 10M rows")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=None, help=f"default {DEFAULT_ROWS:,}")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows")
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "pandas_accessor.json")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    rows = args.rows if args.rows is not None else (QUICK_ROWS if args.quick else DEFAULT_ROWS)

    print(f"generating {rows:,} rows ...", flush=True)
    gen_s, frame = timed(lambda: generate_visits(rows))
    configure_s, _ = timed(lambda: configure(frame))
    timer = EngineTimer(frame.dp.session.engine)
    plain = duckdb.connect(":memory:")
    plain.register("df", frame)  # zero-copy, the same frame the DP session reads
    results = []
    try:
        for name, (ask, sql) in WORKLOADS.items():
            r = measure(frame, plain, timer, name, ask, sql, args.repeat)
            results.append(r)
            print(f"  {name}: df.dp {ms(r['dp_median_s'])} ms, plain "
                  f"{ms(r['plain_median_s'])} ms", flush=True)
    finally:
        plain.close()
    print()
    print_table(results)
    print(f"generation {gen_s:.1f} s; df.dp.configure {configure_s * 1000:.1f} ms; "
          f"spent {frame.dp.spent().describe()}")

    out = {
        "benchmark": "pandas_accessor",
        "description": "df.dp answer time / plain DuckDB time on the same registered DataFrame",
        "rows": rows,
        "seed": DEFAULT_SEED,
        "repeat": args.repeat,
        "epsilon": EPSILON,
        "target_ratio_at_10m": TARGET_RATIO,
        "generation_s": gen_s,
        "configure_s": configure_s,
        "results": results,
        "machine": machine_info(),
        "argv": sys.argv[1:] if argv is None else argv,
    }
    write_json(args.out, out)


if __name__ == "__main__":
    main()
