"""Overhead of user-level contribution bounding: DP query time / plain DuckDB time, same run.

User-level privacy (privacy unit = patient, at most 10 visits kept per patient, chosen by a
window over the patient's rows) adds a partitioned window pass to every engine statement. This
script measures what that costs at 1M and 10M rows against the plain query on the same DuckDB
file, and against the row-level DP query. Target: ratio <= 2.5 at 10M rows.

The bounded rows are a deterministic function of the data and the policy, so a session makes
them once (on its first user-level query, after that query is charged) and reuses them; the
ratio is the steady state of a long-lived session, and the one-off cost of that first query is
reported beside it (``first_user_query_s``) so nothing is hidden. A *fresh* session (the CLI, a
DB-API connection per request) pays that first query every time; the last line per size times
a fresh session's first answer (connect + query) without and with the durable copies made by
``privplan prepare`` (target: <= 2x the plain query at 10M rows).

    python benchmarks/user_level.py [--rows 1000000 10000000] [--repeat 3] [--out PATH]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import duckdb
from _common import machine_info, write_json

import privplan as pp
from privplan.demo.data import write_demo_database
from privplan.engines.durable_copies import copies_path
from privplan.session.prepare import prepare_copies

HERE = Path(__file__).resolve().parent
POLICIES = HERE.parent / "src" / "privplan" / "demo"
WORKLOADS = {
    "grouped COUNT/SUM/AVG": "SELECT hospital, department, COUNT(*) AS n, "
    "SUM(length_of_stay) AS s, AVG(cost) AS c FROM visits GROUP BY hospital, department",
    "filtered SUM": "SELECT SUM(cost) AS s FROM visits WHERE age >= 65 AND insured",
}


def _db(rows: int) -> Path:
    cache = HERE / ".data"
    cache.mkdir(exist_ok=True)
    path = cache / f"user_level_{rows}.duckdb"
    if not path.exists():
        write_demo_database(path, rows=rows)
    return path


def _time(fn, repeat: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "user_level.json")
    args = ap.parse_args()
    results = []
    print(f"{'rows':>11} {'workload':<24} {'plain s':>8} {'row-level':>10} {'user-level':>11} "
          f"{'ratio user/plain':>17}")
    for rows in args.rows:
        db = _db(rows)
        plain = duckdb.connect(str(db), read_only=True)
        sessions = {
            level: pp.connect(db, policy=pp.Policy.from_yaml(POLICIES / name),
                              budget=pp.PureDP(1e9))
            for level, name in (("row", "policy.yaml"), ("user", "policy_patients.yaml"))
        }
        t0 = time.perf_counter()
        sessions["user"].sql(next(iter(WORKLOADS.values())), epsilon=1.0)
        first_user = time.perf_counter() - t0
        print(f"{rows:>11,} first user-level query (makes the bounded copy): {first_user:.3f} s")
        for label, sql in WORKLOADS.items():
            # (each lambda runs within its iteration: default arguments say so to the linter)
            t_plain = _time(lambda q=sql, c=plain: c.execute(q).df(), args.repeat)
            t_row = _time(lambda q=sql, s=sessions: s["row"].sql(q, epsilon=1.0), args.repeat)
            t_user = _time(lambda q=sql, s=sessions: s["user"].sql(q, epsilon=1.0), args.repeat)
            ratio = t_user / t_plain
            print(f"{rows:>11,} {label:<24} {t_plain:>8.3f} {t_row:>10.3f} {t_user:>11.3f} "
                  f"{ratio:>17.2f}")
            results.append({"rows": rows, "workload": label, "plain_s": t_plain,
                            "row_level_s": t_row, "user_level_s": t_user,
                            "ratio_user_over_plain": ratio,
                            "first_user_query_s": first_user,
                            "ratio_row_over_plain": t_row / t_plain})
        for s in sessions.values():
            s.close()
        results.append(fresh_sessions(db, rows, plain, args.repeat))
        plain.close()
    write_json(args.out, {"benchmark": "user_level", "machine": machine_info(),
                          "results": results})


def fresh_sessions(db: Path, rows: int, plain: duckdb.DuckDBPyConnection, repeat: int
                   ) -> dict[str, object]:
    """A fresh session's first user-level answer (connect + one query, as the CLI or a DB-API
    connection per request does), without and with the durable copies of ``privplan prepare``,
    next to the plain query; the copies are removed afterwards."""
    sql = next(iter(WORKLOADS.values()))
    policy = pp.Policy.from_yaml(POLICIES / "policy_patients.yaml")

    def fresh() -> None:
        with pp.connect(db, policy=policy, budget=pp.PureDP(1e9)) as sess:
            sess.sql(sql, epsilon=1.0)

    t_plain = _time(lambda: plain.execute(sql).df(), repeat)
    t_without = _time(fresh, repeat)
    t0 = time.perf_counter()
    prepare_copies(db, policy)
    t_prepare = time.perf_counter() - t0
    try:
        t_with = _time(fresh, repeat)
    finally:
        copies_path(db).unlink()
    print(f"{rows:>11,} fresh session, first user-level answer: plain {t_plain:.3f} s, "
          f"without copies {t_without:.3f} s ({t_without / t_plain:.1f}x), with durable "
          f"copies {t_with:.3f} s ({t_with / t_plain:.2f}x); privplan prepare {t_prepare:.2f} s")
    return {"rows": rows, "workload": "fresh session, first user-level answer", "plain_s": t_plain,
            "fresh_without_copies_s": t_without, "fresh_with_copies_s": t_with,
            "ratio_without_over_plain": t_without / t_plain,
            "ratio_with_over_plain": t_with / t_plain, "prepare_s": t_prepare}


if __name__ == "__main__":
    main()
