"""Overhead of a DP query over plain DuckDB: DP time / plain time, measured in the same run.

For each database size and workload the script opens a DuckDB file holding the demo
``visits`` table (:func:`privplan.demo.data.write_demo_database`), warms up once, then times
``--repeat`` repetitions that alternate a DP answer (``session.sql(sql, epsilon=1)``) with the
same SQL on a plain read-only DuckDB connection to the same file (``.execute(sql).df()``),
swapping which goes first on every repetition. It reports the median of each and the ratio
DP/plain.

Every DP repetition uses a fresh session (``PureDP(1e9)`` budget, nothing is refused) opened
outside the timed region, so the accountant never composes against a ledger that grows with
the repetition count; one untimed ``session.explain`` first fills the per-session caches of the
table's column types and of the query's plan (as in a long-lived session: the timed explain and
sql reuse the plan, so ``plan`` and ``sqlgen`` are near zero: planning a new query text, a few
milliseconds, is in neither table). Then ``session.explain`` is timed (plan reuse +
accounting preview + explanation, spends nothing) and ``session.sql``. The DP time is split
into phases by wrapping the session's own objects (no change to ``src/``): planning
(``_plan``: parse, validate, plan, cost split), accounting (``preview`` + ``admit``), sqlgen
(building the engine statement), binding (``con.sql`` of it: parse and bind, no run), engine (running it, incl.
DuckDB -> pandas), noise (the rest of each core's run) and post (the remainder: explanation,
ledger, post-processing SQL, accuracy). If privplan's internals change the split is reported
as missing; the totals still work.

A default session is also timed on a second name of the file (a hard link) on which
``privplan prepare`` made the durable copies (``file`` in the table, ``prepared_file_ratio`` in
the JSON), one long-lived session per workload like the prepared one: it reads the stored SUM
grids instead of clamping every row; ``prepare_s`` is the one-off time ``prepare`` took (None
when its copies were there already).

Then the *fixed cost* per query (issue #19): at 1,000 rows, in one long-lived prepared session
(its copy made and the query planned before, as in a notebook or dashboard), ``--fixed-repeat``
DP answers interleaved with plain ones, per workload: DP time, plain time, and what privplan
adds around the engine (DP - engine time) split into plan (or the reuse of a cached plan), bind,
accounting, engine, noise and post (ledger, explanation, post-processing, accuracy). Printed as a
second table and written under ``fixed_cost`` in the results.

Generated databases are cached in ``benchmarks/.data/`` (``visits_<rows>.duckdb``, ignored by
git) and reused when the row count matches; generating 10M rows takes ~10 s.

Run: ``python benchmarks/overhead.py [--rows 1000000 10000000] [--repeat 5] [--quick]
[--in-list-sizes N ...] [--many-keys N ...] [--fixed-repeat N] [--out PATH] [--data-dir DIR]``.
Prints the tables and writes ``benchmarks/results/overhead.json``.
Never asserts on wall time; the target (reported only) is a ratio <= 1.5 at 10M rows.

Many public group keys (``--many-keys``, default 10k and 100k keys over 1M rows; ``--quick`` 1k
and 10k over 100k rows): connect, explain and answer time and memory of a GROUP BY over a text
key with that many public values, each in a fresh process (:mod:`many_keys`), in the JSON's
``many_keys``; target (reported only) under 1 s and 300 MB of privplan's own at 100k keys.

Long IN lists (``--in-list-sizes``, default 1k, 10k and 100k values; ``--quick`` 1k and 10k):
explain and answer time of ``SELECT COUNT(*) FROM visits WHERE age IN (<ints>)`` and of the same
with strings on ``hospital``, on the first database, in the JSON's ``in_lists``; target
(reported only) under 1 s at 100k values.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import many_keys
from _common import machine_info, ms, prepared_file, timed, write_json

import privplan as pp
from privplan.demo.data import DEFAULT_SEED, demo_policy_path, write_demo_database

HERE = Path(__file__).resolve().parent
DEFAULT_ROWS = [1_000_000, 10_000_000]
QUICK_ROWS = [100_000]
EPSILON = 1.0
TARGET_RATIO = 1.5

WORKLOADS: dict[str, str] = {
    "grouped_count_sum_avg": (
        "SELECT hospital, department, COUNT(*), SUM(length_of_stay), AVG(cost) "
        "FROM visits GROUP BY hospital, department"
    ),
    "filtered_sum": "SELECT SUM(cost) FROM visits WHERE age >= 65 AND insured",
    "case_band_grouped": (
        "SELECT CASE WHEN age < 18 THEN 'child' WHEN age < 65 THEN 'adult' ELSE 'senior' END "
        "AS band, COUNT(*) AS n, AVG(length_of_stay) AS avg_stay FROM visits GROUP BY band"
    ),
    "filter_pair": (
        "SELECT SUM(cost) FILTER (WHERE insured) AS insured_cost, "
        "SUM(cost) FILTER (WHERE NOT insured) AS uninsured_cost FROM visits"
    ),
}

PHASES = ("planning", "accounting", "sqlgen", "binding", "engine", "noise", "post")

# fixed cost per query: a long-lived prepared session over a small table, where the engine's
# work is about a millisecond and what privplan adds around it is what remains
FIXED_ROWS = 1_000
FIXED_REPEAT = 40
FIXED_WORKLOADS: dict[str, str] = {
    "grouped_count_sum_avg": (
        "SELECT hospital, COUNT(*) AS n, SUM(cost) AS s, AVG(cost) AS c FROM visits "
        "GROUP BY hospital"
    ),
    "filtered_sum": WORKLOADS["filtered_sum"],
    "case_band_grouped": WORKLOADS["case_band_grouped"],
    "ordered_top3": (
        "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY n DESC LIMIT 3"
    ),
}
FIXED_PHASES = ("plan", "bind", "accounting", "engine", "noise", "post")
LABELS = ("plan", "acct", "sqlgen", "bind", "engine", "noise", "post")  # table headers


# -- data ---------------------------------------------------------------------------------------
def _count_rows(path: Path) -> int | None:
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return None
    try:
        return int(con.execute("SELECT count(*) FROM visits").fetchone()[0])
    except duckdb.Error:
        return None
    finally:
        con.close()


def cached_database(rows: int, data_dir: Path) -> tuple[Path, float | None]:
    """The demo database with ``rows`` visits, generated only if no valid cached copy exists.

    Returns the path and the generation time (None when the cache was reused).
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    ignore = data_dir / ".gitignore"
    if not ignore.exists():  # the cache never shows up in `git status`
        ignore.write_text("# benchmark cache, see benchmarks/README.md\n*\n")
    path = data_dir / f"visits_{rows}_seed{DEFAULT_SEED}.duckdb"
    if path.exists() and _count_rows(path) == rows:
        return path, None
    print(f"generating {rows:,} rows -> {path} ...", flush=True)
    start = time.perf_counter()
    write_demo_database(path, rows=rows)
    return path, time.perf_counter() - start


# -- DP phase timers ------------------------------------------------------------------------------
class PhaseTimer:
    """Accumulates time spent inside wrapped callables of one session (instance attributes only)."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}

    def wrap(self, obj: Any, attr: str, key: str) -> bool:
        fn = getattr(obj, attr, None)
        if not callable(fn):
            return False

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.t[key] = self.t.get(key, 0.0) + time.perf_counter() - start

        setattr(obj, attr, timed)
        return True


def instrument(sess: Any) -> PhaseTimer | None:
    timer = PhaseTimer()
    ok = all(
        [
            timer.wrap(sess, "_plan", "plan"),
            timer.wrap(sess.accountant, "preview", "preview"),
            timer.wrap(sess.accountant, "admit", "admit"),
            timer.wrap(sess, "_engine_sql", "sqlgen"),
            timer.wrap(sess.engine, "bind", "bind"),
            timer.wrap(sess.engine, "run", "run"),
            timer.wrap(sess, "_run_core", "run_core"),
        ]
    )
    return timer if ok else None


def split_phases(total: float, t: dict[str, float]) -> dict[str, float]:
    run = t.get("run", 0.0)
    phases = {
        "planning": t.get("plan", 0.0),
        "accounting": t.get("preview", 0.0) + t.get("admit", 0.0),
        "sqlgen": t.get("sqlgen", 0.0),
        "binding": t.get("bind", 0.0),
        "engine": run,
        "noise": max(t.get("run_core", 0.0) - run, 0.0),
    }
    phases["post"] = max(total - sum(phases.values()), 0.0)
    return phases


# -- measurement ----------------------------------------------------------------------------------


def _session(db: Path, prepare: bool = False) -> Any:
    policy = pp.Policy.from_yaml(demo_policy_path())
    return pp.connect(db, policy=policy, budget=pp.PureDP(1e9), prepare=prepare)


def engine_statements(db: Path, sql: str) -> list[str]:
    """The statements a DP answer to ``sql`` runs on the engine (captured from one answer)."""
    sess = _session(db)
    seen: list[str] = []
    real = sess.engine.run
    sess.engine.run = lambda st: seen.append(st) or real(st)  # type: ignore[method-assign]
    try:
        sess.sql(sql, epsilon=EPSILON)
    finally:
        sess.close()
    return seen


def measure(
    db: Path, rows: int, name: str, sql: str, repeat: int, plain: duckdb.DuckDBPyConnection,
    prepared_db: Path | None = None,
) -> dict[str, Any]:
    def dp_once() -> tuple[float, dict[str, float] | None, float, int]:
        sess = _session(db)
        try:
            # untimed: caches what a long-lived session caches once (the table's column types)
            sess.explain(sql, epsilon=EPSILON)
            explain_s, _ = timed(lambda: sess.explain(sql, epsilon=EPSILON))  # spends nothing
            timer = instrument(sess)
            seconds, res = timed(lambda: sess.sql(sql, epsilon=EPSILON))
            phases = split_phases(seconds, timer.t) if timer is not None else None
            return seconds, phases, explain_s, len(res.df)
        finally:
            sess.close()

    def plain_once() -> tuple[float, int]:
        seconds, df = timed(lambda: plain.execute(sql).df())
        return seconds, len(df)

    statements = engine_statements(db, sql)

    def floor_once() -> float:
        # privplan's engine statement(s) alone, on the plain connection: clamping to the grid
        # and the public-domain join are what DP needs of the engine; no privplan code runs
        return sum(timed(lambda st=st: plain.execute(st).df())[0] for st in statements)

    dp_once()  # warm-up (imports, sqlglot caches, DuckDB buffers)
    plain_once()
    floor_once()
    # a default session on the file `privplan prepare` ran on, long-lived like the prepared one
    # (a fresh one per repetition would attach the copies file afresh each time: cold reads,
    # where the sessions on ``db`` share the instance the plain connection keeps warm)
    on_file = None if prepared_db is None else _session(prepared_db)
    if on_file is not None:
        on_file.sql(sql, epsilon=EPSILON)

    # a prepared session (connect(prepare=True)) is long-lived by design: its first query
    # makes the clamped copy (timed on its own), later ones read it
    prepared = _session(db, prepare=True)
    prepared_first, _ = timed(lambda: prepared.sql(sql, epsilon=EPSILON))
    prepared_times: list[float] = []

    dp_times: list[float] = []
    plain_times: list[float] = []
    floor_times: list[float] = []
    explain_times: list[float] = []
    file_times: list[float] = []
    phase_runs: list[dict[str, float]] = []
    dp_rows = plain_rows = 0
    for i in range(repeat):
        order = ("dp", "plain") if i % 2 == 0 else ("plain", "dp")
        for which in order:
            if which == "dp":
                s, phases, e, dp_rows = dp_once()
                dp_times.append(s)
                explain_times.append(e)
                if phases is not None:
                    phase_runs.append(phases)
                if on_file is not None:
                    file_times.append(timed(lambda: on_file.sql(sql, epsilon=EPSILON))[0])
            else:
                s, plain_rows = plain_once()
                plain_times.append(s)
                floor_times.append(floor_once())
                prepared_times.append(timed(lambda: prepared.sql(sql, epsilon=EPSILON))[0])

    prepared.close()
    if on_file is not None:
        on_file.close()
    dp_med = statistics.median(dp_times)
    plain_med = statistics.median(plain_times)
    breakdown = (
        {k: statistics.median(p[k] for p in phase_runs) for k in PHASES}
        if len(phase_runs) == repeat
        else None
    )
    return {
        "rows": rows,
        "workload": name,
        "sql": sql,
        "repeat": repeat,
        "dp_median_s": dp_med,
        "plain_median_s": plain_med,
        "ratio": dp_med / plain_med if plain_med > 0 else None,
        "engine_statement_median_s": statistics.median(floor_times),
        "engine_floor_ratio": statistics.median(floor_times) / plain_med if plain_med else None,
        "engine_statements": statements,
        "prepared_first_query_s": prepared_first,
        "prepared_median_s": statistics.median(prepared_times),
        "prepared_ratio": statistics.median(prepared_times) / plain_med if plain_med else None,
        "prepared_file_median_s": statistics.median(file_times) if file_times else None,
        "prepared_file_ratio": (statistics.median(file_times) / plain_med
                                if file_times and plain_med else None),
        "dp_times_s": dp_times,
        "plain_times_s": plain_times,
        "dp_breakdown_median_s": breakdown,
        "explain_median_s": statistics.median(explain_times),
        "dp_output_rows": dp_rows,
        "plain_output_rows": plain_rows,
    }


# -- long IN lists -------------------------------------------------------------------------------
IN_LIST_SIZES = [1_000, 10_000, 100_000]
QUICK_IN_LIST_SIZES = [1_000, 10_000]


def in_list_sql(kind: str, n: int) -> str:
    """COUNT(*) over ``n`` distinct values: integers 3 apart on ``age`` (no runs to merge), or
    strings on ``hospital`` (one of them a real hospital)."""
    if kind == "int":
        return f"SELECT COUNT(*) FROM visits WHERE age IN ({', '.join(str(3 * i) for i in range(n))})"
    values = ", ".join(["'A'"] + [f"'v{i}'" for i in range(n - 1)])
    return f"SELECT COUNT(*) FROM visits WHERE hospital IN ({values})"


def measure_in_lists(db: Path, sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    """Explain and answer time of a query with one long IN list (planning dominates), each in
    a fresh session whose table types are cached (as in a long-lived session)."""
    out = []
    for kind in ("int", "str"):
        for n in sizes:
            sql = in_list_sql(kind, n)
            runs = [_in_list_once(db, sql) for _ in range(repeat)]
            explain_times, answer_times = [r[0] for r in runs], [r[1] for r in runs]
            out.append({"kind": kind, "values": n, "repeat": repeat,
                        "explain_median_s": statistics.median(explain_times),
                        "answer_median_s": statistics.median(answer_times)})
            print(f"  IN list {kind} x {n:,}: explain {ms(out[-1]['explain_median_s'])} ms, "
                  f"answer {ms(out[-1]['answer_median_s'])} ms", flush=True)
    return out


def _in_list_once(db: Path, sql: str) -> tuple[float, float]:
    sess = _session(db)
    try:
        sess.explain("SELECT COUNT(*) FROM visits", epsilon=EPSILON)  # (caches column types)
        explain_s, _ = timed(lambda: sess.explain(sql, epsilon=EPSILON))
        answer_s, _ = timed(lambda: sess.sql(sql, epsilon=EPSILON))
        return explain_s, answer_s
    finally:
        sess.close()


def print_in_lists(results: list[dict[str, Any]]) -> None:
    print(f"\n{'IN list':>8}  {'values':>8}  {'explain ms':>10}  {'answer ms':>10}")
    for r in results:
        print(f"{r['kind']:>8}  {r['values']:>8,}  {ms(r['explain_median_s']):>10}  "
              f"{ms(r['answer_median_s']):>10}")
    print("COUNT(*) with one IN list (ints on age, strings on hospital), medians; target "
          "(reported, not asserted): under 1 s at 100,000 values.")
# -- fixed cost per query --------------------------------------------------------------------------
def fixed_cost(db: Path, name: str, sql: str, repeat: int,
               plain: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """DP time and plain time of ``sql`` in one long-lived prepared session (the steady state
    of a notebook or dashboard: the session copy made, the query planned before), interleaved
    DP, plain, DP, ...; the DP time split into phases. ``overhead`` = DP time - engine time:
    what privplan adds around the engine (plan or its reuse, bind, accounting, noise, ledger,
    explanation, post-processing, accuracy)."""
    sess = _session(db, prepare=True)
    try:
        for _ in range(3):  # the copy, then the plan over it, then the steady state
            sess.sql(sql, epsilon=EPSILON)
        timer = PhaseTimer()
        admit = "_admit" if hasattr(sess, "_admit") else "plan"  # (the gate's cached verdict)
        for obj, attr, key in ((sess, admit, "plan"), (sess.engine, "bind", "bind"),
                               (sess.accountant, "preview", "preview"),
                               (sess.accountant, "admit", "admit"),
                               (sess.engine, "run", "run"), (sess, "_run_core", "run_core")):
            timer.wrap(obj, attr, key)
        dp: list[float] = []
        plain_times: list[float] = []
        runs: list[dict[str, float]] = []
        for i in range(repeat):
            for which in (("dp", "plain") if i % 2 == 0 else ("plain", "dp")):
                if which == "plain":
                    plain_times.append(timed(lambda: plain.execute(sql).df())[0])
                    continue
                timer.t.clear()
                seconds, _ = timed(lambda: sess.sql(sql, epsilon=EPSILON))
                dp.append(seconds)
                runs.append(fixed_phases(seconds, dict(timer.t)))
    finally:
        sess.close()
    phases = {k: statistics.median(r[k] for r in runs) for k in FIXED_PHASES}
    return {
        "rows": FIXED_ROWS, "workload": name, "sql": sql, "repeat": repeat,
        "dp_median_s": statistics.median(dp), "plain_median_s": statistics.median(plain_times),
        "overhead_median_s": statistics.median(r["overhead"] for r in runs),
        "phases_median_s": phases, "dp_times_s": dp, "plain_times_s": plain_times,
    }


def fixed_phases(total: float, t: dict[str, float]) -> dict[str, float]:
    run, bind = t.get("run", 0.0), t.get("bind", 0.0)
    phases = {
        "plan": max(t.get("plan", 0.0) - bind, 0.0),
        "bind": bind,
        "accounting": t.get("preview", 0.0) + t.get("admit", 0.0),
        "engine": run,
        "noise": max(t.get("run_core", 0.0) - run, 0.0),
    }
    phases["post"] = max(total - sum(phases.values()), 0.0)
    phases["overhead"] = total - run
    return phases


def run_fixed_cost(data_dir: Path, repeat: int) -> list[dict[str, Any]]:
    db, _ = cached_database(FIXED_ROWS, data_dir)
    plain = duckdb.connect(str(db), read_only=True)
    try:
        return [fixed_cost(db, name, sql, repeat, plain) for name, sql in FIXED_WORKLOADS.items()]
    finally:
        plain.close()


def print_fixed_cost(results: list[dict[str, Any]]) -> None:
    width = max(len(r["workload"]) for r in results)
    head = (f"{'workload':<{width}}  {'DP ms':>6}  {'plain':>6}  {'fixed':>6}  "
            + "  ".join(f"{p[:6]:>6}" for p in FIXED_PHASES))
    print(f"\nfixed cost per query at {FIXED_ROWS:,} rows (prepared session, steady state)")
    print(head)
    print("-" * len(head))
    for r in results:
        ph = r["phases_median_s"]
        print(f"{r['workload']:<{width}}  {ms(r['dp_median_s']):>6}  "
              f"{ms(r['plain_median_s']):>6}  {ms(r['overhead_median_s']):>6}  "
              + "  ".join(f"{ms(ph[p]):>6}" for p in FIXED_PHASES))
    print("fixed = DP - engine (median of per-query differences): privplan's own time per "
          "query. plan = planning or the reuse of a cached plan, bind = binding the engine "
          "statement before the charge, accounting = composing the charge, engine = the "
          "statement (-> pandas), noise, post = ledger, explanation, post-processing, accuracy.")


# -- reporting ------------------------------------------------------------------------------------
def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(results: list[dict[str, Any]]) -> None:
    width = max(len(r["workload"]) for r in results)
    head = (
        f"{'rows':>10}  {'workload':<{width}}  {'DP ms':>8}  {'plain ms':>8}  {'ratio':>6}  "
        f"{'floor':>6}  {'file':>6}  {'prep.':>6}  {'prep. 1st':>9}  "
        + "  ".join(f"{label:>6}" for label in LABELS)
        + f"  {'explain':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        b = r["dp_breakdown_median_s"] or {}
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        print(
            f"{r['rows']:>10,}  {r['workload']:<{width}}  {ms(r['dp_median_s']):>8}  "
            f"{ms(r['plain_median_s']):>8}  {ratio:>6}  {r['engine_floor_ratio']:>6.2f}  "
            f"{_ratio(r.get('prepared_file_ratio')):>6}  "
            f"{r['prepared_ratio']:>6.2f}  {ms(r['prepared_first_query_s']):>9}  "
            + "  ".join(f"{ms(b.get(p)):>6}" for p in PHASES)
            + f"  {ms(r['explain_median_s']):>7}"
        )
    print(
        "\nms, medians over repetitions. floor = privplan's engine statement run alone on the "
        "plain connection / plain (the cost of clamping to the grid in DuckDB, before any "
        "privplan code). file = DP/plain of the same default session on the file after "
        "`privplan prepare` (it reads the stored SUM grids). prep. = DP/plain in a session "
        "opened with prepare=True (steady "
        "state), prep. 1st = its first query, which makes the clamped copy. DP phases (median each, so they need not add up): "
        "plan = parse/validate/plan/cost split, acct = accountant preview+admit, sqlgen = "
        "engine statement, bind = binding it, engine = run it (-> pandas), noise, post = "
        "explanation/ledger/post-processing SQL/accuracy; explain = session.explain alone."
    )
    print(f"target (reported, not asserted): ratio <= {TARGET_RATIO} at 10M rows")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows",
        type=int,
        nargs="+",
        default=None,
        help="database sizes (default: 1000000 10000000)",
    )
    parser.add_argument("--quick", action="store_true", help="100k rows only")
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=None)
    parser.add_argument("--in-list-sizes", type=int, nargs="*", default=None,
                        help="IN list lengths timed on the first database (default 1000 10000 "
                        "100000; --quick: 1000 10000; none: skip)")
    parser.add_argument("--fixed-repeat", type=int, default=None,
                        help=f"queries per workload for the fixed cost at {FIXED_ROWS:,} rows "
                             f"(default {FIXED_REPEAT}, 10 with --quick; 0 skips it)")
    parser.add_argument("--many-keys", type=int, nargs="*", default=None,
                        help="public key counts of the many-keys case (default 10000 100000; "
                        "--quick: 1000 10000 over 100k rows; none: skip)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "overhead.json")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=HERE / ".data",
        help="cache of generated databases (default benchmarks/.data)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = QUICK_ROWS if args.quick else (args.rows or DEFAULT_ROWS)
    names = args.workloads or list(WORKLOADS)

    results: list[dict[str, Any]] = []
    generated: dict[str, float | None] = {}
    prepared_s: dict[str, float | None] = {}  # `privplan prepare` per size (None: made before)
    for rows in sizes:
        db, gen_s = cached_database(rows, args.data_dir)
        generated[str(rows)] = gen_s
        twin, prepared_s[str(rows)] = prepared_file(db, pp.Policy.from_yaml(demo_policy_path()))
        plain = duckdb.connect(str(db), read_only=True)
        try:
            for name in names:
                r = measure(db, rows, name, WORKLOADS[name], args.repeat, plain, twin)
                results.append(r)
                print(
                    f"  {rows:,} {name}: DP {ms(r['dp_median_s'])} ms, plain "
                    f"{ms(r['plain_median_s'])} ms",
                    flush=True,
                )
        finally:
            plain.close()
    in_sizes = args.in_list_sizes
    if in_sizes is None:
        in_sizes = QUICK_IN_LIST_SIZES if args.quick else IN_LIST_SIZES
    db, _ = cached_database(sizes[0], args.data_dir)
    in_lists = measure_in_lists(db, in_sizes, args.repeat) if in_sizes else []
    keys = args.many_keys
    if keys is None:
        keys = many_keys.QUICK_KEYS if args.quick else many_keys.KEYS
    key_rows = many_keys.QUICK_ROWS if args.quick else many_keys.ROWS
    many = many_keys.measure(keys, key_rows) if keys else []
    print()
    print_table(results)
    if in_lists:
        print_in_lists(in_lists)
    fixed_repeat = args.fixed_repeat if args.fixed_repeat is not None else (
        10 if args.quick else FIXED_REPEAT)
    fixed = run_fixed_cost(args.data_dir, fixed_repeat) if fixed_repeat > 0 else []
    if fixed:
        print_fixed_cost(fixed)
    if many:
        many_keys.print_table(many)

    out = {
        "benchmark": "overhead",
        "description": "DP query time / plain DuckDB time on the same file, same process",
        "rows": sizes,
        "repeat": args.repeat,
        "epsilon": EPSILON,
        "target_ratio_at_10m": TARGET_RATIO,
        "phases": list(PHASES),
        "generation_s": generated,
        "prepare_s": prepared_s,
        "results": results,
        "in_lists": in_lists,
        "fixed_cost_phases": list(FIXED_PHASES),
        "fixed_cost": fixed,
        "many_keys": many,
        "machine": machine_info(),
        "argv": sys.argv[1:] if argv is None else argv,
    }
    write_json(args.out, out)


if __name__ == "__main__":
    main()
