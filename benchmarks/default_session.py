"""A default DuckDB session without ``privplan prepare``, against plain DuckDB, at 10M rows.

Issue 38's acceptance row "DuckDB default session without ``privplan prepare``, 10M rows:
<= 1.3x plain (grouped COUNT, SUM+AVG, filtered COUNT)". A default session on a DuckDB file it
opened itself copies a row-level table with its SUM grids from the session's second query over
it (:mod:`privplan.session.copies`); before, it clamped every row in every statement.

For each size (``--rows``), on the cached demo ``visits`` file (:func:`overhead.cached_database`),
each shape is timed in one interleaved run, rotating the order each round:

* **plain**: the SQL on a plain read-only DuckDB connection to the same file (``fetchall``);
* **default**: ``session.sql`` in one long-lived default session (``pp.connect(path)``), after
  two untimed queries (the first reads the table inline, the second makes the copy);
* **never**: the same in a session opened with ``prepare=False`` (the previous default: every
  statement clamps every row).

Also reported, outside the rounds: **copy**, the default session's second query (the one that
makes the copy), and **1st**, its first. Medians; never asserts on wall time.

Run: ``python benchmarks/default_session.py [--rows 10000000] [--repeat 5] [--out PATH]``;
writes ``benchmarks/results/default_session.json``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import duckdb

import privplan as pp
from privplan.demo.data import demo_policy_path

HERE = Path(__file__).resolve().parent
from _common import machine_info, ms, timed, write_json
from overhead import cached_database

SHAPES = {
    "grouped COUNT": "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital",
    "SUM+AVG": "SELECT SUM(length_of_stay) AS s, AVG(cost) AS a FROM visits",
    "filtered COUNT": "SELECT COUNT(*) AS n FROM visits WHERE age >= 65 AND insured",
}


def _session(db: Path, prepare: bool | None) -> Any:
    return pp.connect(db, policy=demo_policy_path(), budget=pp.PureDP(1e9), prepare=prepare)


def measure(db: Path, name: str, sql: str, repeat: int) -> dict[str, Any]:
    plain = duckdb.connect(str(db), read_only=True)
    default, never = _session(db, None), _session(db, False)
    first, _ = timed(lambda: default.sql(sql, epsilon=1))
    copy, _ = timed(lambda: default.sql(sql, epsilon=1))
    never.sql(sql, epsilon=1)
    plain.execute(sql).fetchall()
    runs: dict[str, Any] = {
        "plain": lambda: plain.execute(sql).fetchall(),
        "default": lambda: default.sql(sql, epsilon=1),
        "never": lambda: never.sql(sql, epsilon=1)}
    times: dict[str, list[float]] = {k: [] for k in runs}
    order = list(runs)
    for i in range(repeat):
        for key in order[i % 3:] + order[:i % 3]:
            times[key].append(timed(runs[key])[0])
    default.close()
    never.close()
    plain.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"shape": name, "sql": sql, "first_s": first, "copy_s": copy,
            **{f"{k}_median_s": v for k, v in med.items()},
            "default_ratio": med["default"] / med["plain"],
            "never_ratio": med["never"] / med["plain"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000_000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data-dir", type=Path, default=HERE / ".data")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "default_session.json")
    args = ap.parse_args(argv)
    results = []
    print(f"{'rows':>11}  {'shape':<15} {'plain':>9} {'default':>8} {'never':>7} "
          f"{'1st':>9} {'copy':>9}")
    for rows in args.rows:
        db, _ = cached_database(rows, args.data_dir)
        for name, sql in SHAPES.items():
            r = {"rows": rows, **measure(db, name, sql, args.repeat)}
            results.append(r)
            print(f"{rows:>11,}  {name:<15} {ms(r['plain_median_s']):>9} "
                  f"{r['default_ratio']:>8.2f} {r['never_ratio']:>7.2f} "
                  f"{ms(r['first_s']):>9} {ms(r['copy_s']):>9}", flush=True)
    write_json(args.out, {"machine": machine_info(), "repeat": args.repeat,
                          "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
