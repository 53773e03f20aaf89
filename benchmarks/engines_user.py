"""The user-level rows of ``benchmarks/engines.py`` (DuckDB and PostgreSQL): plain, a fresh
session's first answer, a long-lived session's later answers, and on PostgreSQL a session that
inlines the bounded rows (see that script's doc)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import yaml
from _common import timed

import privplan as pp
from privplan.demo.data import demo_policy_path

EPSILON = 1.0

USER_QUERIES: dict[str, str] = {
    "user_grouped_count": "SELECT department, COUNT(*) AS n FROM visits GROUP BY department",
    "user_sum_avg": ("SELECT hospital, SUM(length_of_stay) AS s, AVG(cost) AS c FROM visits "
                     "GROUP BY hospital"),
}
USER_LEVEL_ENGINES = ("duckdb", "postgres")


def user_policy() -> dict[str, Any]:
    """The demo's user-level policy, its ``visits`` table alone (privacy unit ``patient_id``,
    at most 10 rows per patient)."""
    spec = yaml.safe_load((demo_policy_path().parent / "policy_patients.yaml").read_text())
    return {"tables": {"visits": spec["tables"]["visits"]}}


def measure_user(backend: Any, rows: int, name: str, sql: str, repeat: int
                 ) -> dict[str, Any]:
    """User level: plain, a fresh session's first answer, a long-lived session's later ones
    (its copy made), and on PostgreSQL a session that inlines the bounded rows (see the module
    doc), interleaved in rotating order after one untimed warm-up of each."""
    budget = pp.PureDP(1e9)

    def fresh() -> Any:
        return pp.connect(backend.target(), policy=user_policy(), budget=budget)

    long_lived = fresh()
    inline = fresh() if backend.name == "postgres" else None
    if inline is not None:
        inline.engine._copies.disabled = True  # (as before copies)

    def plain() -> float:
        return timed(lambda: backend.run_native(sql))[0]

    def first() -> float:
        def answer() -> Any:
            with fresh() as sess:
                return sess.sql(sql, epsilon=EPSILON)
        return timed(answer)[0]

    def later() -> float:
        return timed(lambda: long_lived.sql(sql, epsilon=EPSILON))[0]

    runs: dict[str, Callable[[], float]] = {"plain": plain, "first": first, "later": later}
    if inline is not None:
        runs["inline"] = lambda: timed(lambda: inline.sql(sql, epsilon=EPSILON))[0]
    times: dict[str, list[float]] = {k: [] for k in runs}
    try:
        for fn in runs.values():  # warm-up (the long-lived session's copy is made here)
            fn()
        # (and its next query plans again over the copy: the engine's generation moved)
        later()
        order = list(runs)
        for i in range(repeat):
            k = i % len(order)
            for key in order[k:] + order[:k]:
                times[key].append(runs[key]())
    finally:
        long_lived.close()
        if inline is not None:
            inline.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    out: dict[str, Any] = {"engine": backend.name, "rows": rows, "query": name, "sql": sql,
                           "repeat": repeat, "level": "user"}
    for key in runs:
        out[f"{key}_median_s"] = med[key]
        out[f"{key}_times_s"] = times[key]
        if key != "plain":
            out[f"{key}_over_plain"] = med[key] / med["plain"] if med["plain"] > 0 else None
    return out


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_user_table(results: list[dict[str, Any]]) -> None:
    if not results:
        return
    head = (f"{'engine':<9} {'rows':>11} {'user-level query':<20} {'plain s':>9} "
            f"{'first s':>9} {'later s':>9} {'inline s':>9} {'first/pl.':>9} "
            f"{'later/pl.':>9} {'inline/pl.':>10}")
    print(head)
    print("-" * len(head))
    for r in results:
        inline = r.get("inline_median_s")
        print(f"{r['engine']:<9} {r['rows']:>11,} {r['query']:<20} {r['plain_median_s']:>9.3f} "
              f"{r['first_median_s']:>9.3f} {r['later_median_s']:>9.3f} "
              f"{'-' if inline is None else f'{inline:.3f}':>9} "
              f"{_ratio(r['first_over_plain']):>9} {_ratio(r['later_over_plain']):>9} "
              f"{_ratio(r.get('inline_over_plain')):>10}")
    print("(medians; first = a fresh session's first answer, which makes the bounded copy; "
          "later = a long-lived session's answer over its copy; inline = a PostgreSQL "
          "session that makes no copy, as before; target later/plain <= 2 on PostgreSQL)")
