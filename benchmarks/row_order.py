"""Cost of the per-unit row order: the user-level copy statement (the bounded rows of the demo
``visits`` table, at most 10 per patient) with the md5-of-text order that preceded the integer
key, and with the current order (:mod:`privplan.rewrite.row_order`).

Both statements are the session's copy statement (:func:`privplan.rewrite.engine_sql.bounded_source`)
and differ only in the ORDER BY of their windows. They run interleaved (A B A B ...) on the same
connection, as ``CREATE OR REPLACE TEMP TABLE ... AS``; the medians are reported, and each
variant's kept rows are checked to be a bounded copy (the same row count).

    python benchmarks/row_order.py [--rows 1000000] [--repeat 5] [--threads 2] [--out PATH]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import duckdb
from _common import machine_info, write_json

import privplan as pp
from privplan.demo.data import write_demo_database
from privplan.rewrite import engine_sql
from privplan.rewrite.row_order import row_key

HERE = Path(__file__).resolve().parent
POLICY = HERE.parent / "src" / "privplan" / "demo" / "policy_patients.yaml"


def md5_order(columns: Sequence[str], types: Sequence[str | None], salt: str) -> str:
    """The order before issue 38: md5 of the int/str/bool values' text, then every column."""
    texts = [f"CAST({c} AS VARCHAR)" if t != "str" else c
             for c, t in zip(columns, types) if t in ("int", "str", "bool")]
    order = [f"md5(concat_ws('|', '{salt}', {', '.join(texts)}))"] if texts else []
    return ", ".join(order + [f"{c} NULLS FIRST" for c in columns])


def copy_statement(before: bool) -> str:
    """The session's copy statement; ``before``: as it was with the md5 order (the windows'
    ORDER BY the md5 expression itself, no key column)."""
    table = pp.Policy.from_yaml(POLICY).table("visits")
    core = SimpleNamespace(columns=tuple(table.columns), unit=table.privacy_unit,
                           table_sql="visits",
                           unit_level_columns=tuple(sorted(table.unit_level_columns())),
                           max_rows_per_unit=int(table.max_rows_per_unit), table_policy=table)
    select = engine_sql.bounded_source(core)  # type: ignore[arg-type]
    if before:
        cols = [engine_sql._ident(c) for c in core.columns]
        types = engine_sql._policy_types(core)  # type: ignore[arg-type]
        key = row_key(cols, types, "privplan-row")
        keyed = f"(SELECT *, {key} AS {engine_sql.ORDER_KEY} FROM visits) AS __ordered"
        assert keyed in select
        order = md5_order(cols, types, "privplan-row")
        md5 = order[:order.index(f", {cols[0]} NULLS FIRST")]
        select = select.replace(keyed, "visits").replace(engine_sql.ORDER_KEY, md5)
    return "CREATE OR REPLACE TEMP TABLE __copy AS SELECT * FROM " + select + " AS __b"


def _db(rows: int) -> Path:
    cache = HERE / ".data"
    cache.mkdir(exist_ok=True)
    path = cache / f"user_level_{rows}.duckdb"
    if not path.exists():
        write_demo_database(path, rows=rows)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "row_order.json")
    args = ap.parse_args()
    variants = {"md5 text (before)": copy_statement(before=True),
                "integer key (now)": copy_statement(before=False)}
    results = []
    for rows in args.rows:
        con = duckdb.connect(str(_db(rows)), read_only=True)
        con.execute(f"SET threads = {int(args.threads)}")
        samples: dict[str, list[float]] = {k: [] for k in variants}
        counts = {}
        for name, sql in variants.items():  # (warm-up, and the kept rows' count)
            con.execute(sql)
            counts[name] = con.execute("SELECT count(*) FROM __copy").fetchone()
        assert len(set(counts.values())) == 1, counts
        for _ in range(args.repeat):
            for name, sql in variants.items():
                t0 = time.perf_counter()
                con.execute(sql)
                samples[name].append(time.perf_counter() - t0)
        con.close()
        base = statistics.median(samples["md5 text (before)"])
        for name, s in samples.items():
            m = statistics.median(s)
            print(f"{rows:>11,} {name:<20} median {m:.3f} s ({m / base:.2f}x) "
                  f"[{', '.join(f'{x:.2f}' for x in s)}]")
            results.append({"rows": rows, "variant": name, "median_s": m, "samples_s": s,
                            "threads": args.threads, "kept_rows": counts[name][0]})
    write_json(args.out, {"benchmark": "row_order", "machine": machine_info(),
                          "results": results})


if __name__ == "__main__":
    main()
