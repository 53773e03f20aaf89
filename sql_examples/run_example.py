"""Run one annotated example file by hand: print each query's plan, costs and (noisy) answer.

    python sql_examples/run_example.py sql_examples/02_group_by_public_keys.sql
    python sql_examples/run_example.py sql_examples/14_partition_selection.sql --rows 200000
    python sql_examples/run_example.py sql_examples/p02_pums_group_by_sex.sql --noise-off

The demo database (deterministic) is written to a temporary directory unless --demo-db names an
existing file. --noise-off uses privplan.testing.noise_disabled (TESTS ONLY: exact answers).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import example_format as fmt

import privplan as pp


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("file", type=Path)
    ap.add_argument("--demo-db", type=Path, help="an existing demo DuckDB file")
    ap.add_argument("--rows", type=int, default=20_000, help="rows of a freshly written demo db")
    ap.add_argument("--noise-off", action="store_true", help="exact answers (testing only)")
    args = ap.parse_args(argv)

    example = fmt.parse_file(args.file)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.demo_db
        if example.dataset in ("demo", "patients") and db is None:
            from privplan.demo.data import write_demo_database

            db = write_demo_database(Path(tmp) / "demo.duckdb", rows=args.rows)
        sess = fmt.open_session(example, db)
        print(f"# {example.name}: {example.dataset}, session budget "
              f"{example.session_budget.describe()}, neighbourhood {example.neighbourhood}\n")
        quiet = contextlib.nullcontext()
        if args.noise_off:
            from privplan.testing import noise_disabled

            quiet = noise_disabled()
        with sess, quiet:
            for q in example.queries:
                print(f"## {q.index}. {q.title}\n{q.sql}\n")
                print(f"why: {q.headers['why']}\n")
                budget = q.budget_kwargs()
                if q.expects_error:
                    try:
                        sess.sql(q.sql, **budget)
                    except pp.PrivplanError as err:
                        print(f"refused ({type(err).__name__}): {err}")
                    else:
                        print("!! expected an error, but the query was answered")
                    print(f"expected: {q.headers['expect-error']}\n")
                    continue
                print(sess.explain(q.sql, **budget))
                res = sess.sql(q.sql, **budget)
                print(f"\n{res.df.to_string()}\n")
                print(f"query cost {res.query_cost.describe()} (expected "
                      f"{q.headers['expect-query-cost']}); added to the session "
                      f"{res.cost.describe()} (expected {q.headers['expect-marginal']}); "
                      f"session total {sess.spent().describe()}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
