"""DP time / plain time on each engine: embedded DuckDB, a PostgreSQL server, Spark local[2].

For each size (``--sizes``) the same demo ``visits`` rows (:mod:`privplan.demo.data`, cached as
a DuckDB file in ``benchmarks/.data/``) are loaded once into every engine (``--engines``):

* **duckdb**: the cached DuckDB file itself (the session opens it read-only, the plain
  connection too);
* **postgres**: a throw-away PostgreSQL server (``tests/servers/postgres_server.py``), the table
  created and filled in one transaction by ``COPY ... FROM STDIN (FORMAT csv, FREEZE)`` streaming
  a CSV file DuckDB exported (cached next to the database), then ``VACUUM (ANALYZE)``;
* **spark**: a ``local[2]`` SparkSession, the table read from a Parquet file DuckDB wrote
  (cached), cached in Spark's memory (``.cache()`` + ``count()``) and exposed as the temporary
  view ``visits``.

Then, per engine and query, after one untimed warm-up of each, ``--repeat`` rounds time in
rotating order (plain, engine statement, DP; then statement, DP, plain; ...):

* **plain**: the user's SQL itself, no DP, through the engine's native client (duckdb
  ``fetchall()``, psycopg ``fetchall()``, Spark ``collect()``);
* **stmt**: the engine statement privplan runs for that query (captured from the session's
  ``engine.run`` and rendered for the engine's dialect by
  :func:`privplan.engines.render.render`), through the same native client: the engine floor,
  what DP asks of the engine before any privplan code runs;
* **DP**: ``session.sql(query, epsilon=1)`` in one long-lived session per engine, size and
  query (``PureDP(1e6)`` budget: nothing is refused), a row-level policy (the demo policy's
  ``visits`` table), opened as a user opens one (``pp.connect`` with the DuckDB file, the
  ``postgresql://`` URL or the SparkSession);
* **file** (DuckDB only): DP in a default session opened on a second name of the DuckDB file
  (a hard link) beside which ``privplan prepare`` made its durable copies: the session reads
  the stored SUM grids instead of clamping every row (:mod:`privplan.engines.durable_copies`);
* **prep.**: the same in a session opened with ``prepare=True`` (its first, untimed query
  makes the session's clamped copy of the table: a DuckDB table, a cached Spark view, a
  PostgreSQL temporary table filled inside the read-only transaction).

**User level** (DuckDB and PostgreSQL; ``--user-queries``): the same rows under the demo's
user-level policy (privacy unit ``patient_id``, at most 10 visits kept per patient:
``policy_patients.yaml``'s ``visits`` table), each round timing, in rotating order:

* **plain**: the query without DP on the native client;
* **first**: a fresh session's first answer (``pp.connect`` + ``sql``), which makes the
  session's bounded copy after its charge (a window over every row);
* **later**: the next answer of one long-lived session whose copy exists (warmed by two
  untimed queries: the first makes the copy, the second plans the query again over it) — the
  acceptance figure on PostgreSQL is later/plain <= 2;
* **inline** (PostgreSQL): a long-lived session that makes no copy and inlines the bounded
  SELECT in every statement, as every PostgreSQL session did before copies.

Medians are reported, with DP/plain (the issue's figure), prep./plain and stmt/plain. As a
consistency check the exact answers of the engine statement and of the plain query on
PostgreSQL and Spark are compared with DuckDB's for the same rows (``matches_duckdb`` in the
JSON, "!" in the table; a quantile's per-group histogram compares as its cell counts).

Run: ``python benchmarks/engines.py [--sizes 1000000 10000000] [--repeat 5]
[--engines duckdb postgres spark] [--out PATH] [--data-dir DIR]``. Prints the table and writes
``benchmarks/results/engines.json``. Never asserts on wall time; the target (reported only) is
DP/plain <= 1.5 on every engine at 10M rows.
"""

from __future__ import annotations

import argparse
import functools
import math
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import yaml
from _common import exported, machine_info, prepared_file, timed, write_json
from engines_user import USER_LEVEL_ENGINES, USER_QUERIES, measure_user, print_user_table
from overhead import cached_database

import privplan as pp
from privplan.demo.data import demo_policy_path
from privplan.engines.render import render

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # (the throw-away PostgreSQL server and Spark helpers of the tests)
    sys.path.insert(0, str(ROOT))

DEFAULT_SIZES = [1_000_000, 10_000_000]
ENGINES = ("duckdb", "postgres", "spark")
EPSILON = 1.0
TARGET_RATIO = 1.5
SPARK_DRIVER_MEMORY = "4g"

QUERIES: dict[str, str] = {
    "grouped_count": "SELECT department, COUNT(*) AS n FROM visits GROUP BY department",
    "grouped_sum_avg": (
        "SELECT department, SUM(length_of_stay) AS s, AVG(cost) AS c FROM visits "
        "GROUP BY department"
    ),
    "grouped_count_avg": (
        "SELECT department, COUNT(*) AS n, AVG(cost) AS c FROM visits GROUP BY department"
    ),
    "filtered_count": "SELECT COUNT(*) AS n FROM visits WHERE age >= 65 AND insured",
    "grouped_median": (
        "SELECT department, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY cost) AS m "
        "FROM visits GROUP BY department"
    ),
}


def policy() -> dict[str, Any]:
    """The demo policy's ``visits`` table alone (row-level privacy; the public ``hospitals``
    table is left out: no engine here holds it)."""
    spec = yaml.safe_load(demo_policy_path().read_text())
    return {"tables": {"visits": spec["tables"]["visits"]}}


# -- engines ----------------------------------------------------------------------------------
class Backend:
    """One engine holding the rows of one size: a native client to time plain SQL with, and
    sessions over it."""

    name: str
    dialect: str

    def run_native(self, sql: str) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def render(self, sql: str) -> str:
        """An engine statement as this engine runs it."""
        return render(sql, self.dialect)

    def target(self) -> Any:
        """What ``pp.connect`` is given for this engine."""
        raise NotImplementedError

    def prepared_target(self) -> Any | None:
        """What ``pp.connect`` is given for a default session that reads ``privplan
        prepare``'s durable copies, or None (only a DuckDB file has them)."""
        return None

    def close(self) -> None:
        pass


def open_session(backend: Backend, budget: Any, prepare: bool = False) -> Any:
    """A DP session over ``backend``'s engine, opened as a user opens one: ``pp.connect`` with
    the DuckDB file, the ``postgresql://`` URL or the SparkSession."""
    return pp.connect(backend.target(), policy=policy(), budget=budget, prepare=prepare)


class DuckDBBackend(Backend):
    name, dialect = "duckdb", "duckdb"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.con = duckdb.connect(str(path), read_only=True)
        # the same file under a second name, with `privplan prepare`'s copies beside it
        self.twin, self.prepare_s = prepared_file(path, pp.Policy.from_dict(policy()))

    def prepared_target(self) -> Any | None:
        return self.twin

    def run_native(self, sql: str) -> list[tuple[Any, ...]]:
        return self.con.execute(sql).fetchall()

    def target(self) -> Any:
        return self.path

    def close(self) -> None:
        self.con.close()


class PostgresBackend(Backend):
    name, dialect = "postgres", "postgres"

    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self.con = psycopg.connect(url, autocommit=True)

    def run_native(self, sql: str) -> list[tuple[Any, ...]]:
        with self.con.cursor() as cur:
            cur.execute(sql)  # (psycopg 3: server-side parameters; none here)
            return cur.fetchall()

    def target(self) -> Any:
        return self.url

    def close(self) -> None:
        self.con.close()


class SparkBackend(Backend):
    name, dialect = "spark", "spark"

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def run_native(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]

    def target(self) -> Any:
        return self.spark


def export(db: Path, fmt: str) -> Path:
    """The ``visits`` table of ``db`` as a CSV (no header) or Parquet file next to it (cached)."""
    options = "FORMAT csv, HEADER false" if fmt == "csv" else "FORMAT parquet"
    return exported(db, db.with_suffix(f".{fmt}"), "SELECT * FROM visits", options)


def visits_types(db: Path) -> dict[str, str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {r[0]: r[1] for r in con.execute("DESCRIBE visits").fetchall()}
    finally:
        con.close()


def load_postgres(url: str, db: Path) -> float:
    """(Re)create ``visits`` in PostgreSQL from the DuckDB file; seconds taken (export
    included when not cached)."""
    import psycopg

    from tests.servers.postgres_server import _pg_type

    start = time.perf_counter()
    csv = export(db, "csv")
    types = visits_types(db)
    columns = ", ".join(f'"{c}" {_pg_type(t)}' for c, t in types.items())
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DROP TABLE IF EXISTS visits")
        with con.transaction():  # (created in the same transaction: COPY FREEZE may skip hints)
            con.execute(f"CREATE TABLE visits ({columns})")
            with con.cursor() as cur, cur.copy(
                    "COPY visits FROM STDIN (FORMAT csv, FREEZE true)") as copy, \
                    csv.open("rb") as f:
                while chunk := f.read(1 << 20):
                    copy.write(chunk)
        con.execute("VACUUM (ANALYZE) visits")
    return time.perf_counter() - start


def start_spark() -> Any:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("privplan-bench-engines")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.driver.memory", SPARK_DRIVER_MEMORY)
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    return spark


def load_spark(spark: Any, db: Path, previous: Any) -> tuple[float, Any]:
    """The cached temporary view ``visits`` from the Parquet export of ``db``; (seconds, the
    cached frame). ``previous`` (the last size's frame) is unpersisted first."""
    if previous is not None:
        previous.unpersist(blocking=True)
    start = time.perf_counter()
    parquet = export(db, "parquet")
    frame = spark.read.parquet(str(parquet)).cache()
    frame.count()
    frame.createOrReplaceTempView("visits")
    return time.perf_counter() - start, frame


# -- measurement --------------------------------------------------------------------------------
def engine_statements(backend: Backend, sql: str) -> list[str]:
    """What a DP answer to ``sql`` runs on the engine, rendered for its dialect (captured from
    one answer in a throw-away session)."""
    sess = open_session(backend, pp.PureDP(1e6))
    seen: list[str] = []
    real = sess.engine.run

    def capture(st: str) -> Any:
        seen.append(st)
        return real(st)

    sess.engine.run = capture
    try:
        sess.sql(sql, epsilon=EPSILON)
    finally:
        sess.close()
    return [backend.render(st) for st in seen]


_MAP_TEXT = re.compile(r"\{(-?\d+=\d+(, -?\d+=\d+)*)?\}")


def _normal(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows in a comparable form: sorted, numbers as floats, NaN as None, a histogram (a
    map: a dict, or PostgreSQL's text of DuckDB's MAP literal) as its sorted (cell, count)
    pairs."""
    def cell(v: Any) -> Any:
        if isinstance(v, dict):
            return tuple(sorted((int(k), int(n)) for k, n in v.items()))
        if isinstance(v, str) and _MAP_TEXT.fullmatch(v):
            return tuple(sorted(tuple(int(x) for x in pair.split("="))
                                for pair in v[1:-1].split(", ") if pair))
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        try:
            f = float(v)
        except (TypeError, ValueError):
            return str(v)
        return None if math.isnan(f) else f

    return sorted((tuple(cell(v) for v in r) for r in rows), key=repr)


def same_rows(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    """Equal up to row order and a relative 1e-9 on numbers (sums add in another order)."""
    na, nb = _normal(a), _normal(b)
    if len(na) != len(nb):
        return False
    for ra, rb in zip(na, nb):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb):
            if isinstance(x, float) and isinstance(y, float):
                if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9):
                    return False
            elif x != y:
                return False
    return True


def measure(backend: Backend, rows: int, name: str, sql: str, repeat: int,
            reference: dict[str, list[tuple[Any, ...]]] | None) -> dict[str, Any]:
    statements = engine_statements(backend, sql)
    sess = open_session(backend, pp.PureDP(1e6))
    prepared = open_session(backend, pp.PureDP(1e6), prepare=True)
    twin = backend.prepared_target()
    on_file = None if twin is None else pp.connect(twin, policy=policy(),
                                                   budget=pp.PureDP(1e6))
    outputs: dict[str, Any] = {}

    def plain() -> float:
        seconds, outputs["plain"] = timed(lambda: backend.run_native(sql))
        return seconds

    def stmt() -> float:
        total, results = 0.0, []
        for st in statements:
            seconds, out = timed(functools.partial(backend.run_native, st))
            total += seconds
            results.append(out)
        outputs["stmt"] = results
        return total

    def dp() -> float:
        seconds, outputs["dp"] = timed(lambda: sess.sql(sql, epsilon=EPSILON))
        return seconds

    def prep() -> float:
        return timed(lambda: prepared.sql(sql, epsilon=EPSILON))[0]

    def file() -> float:
        assert on_file is not None
        return timed(lambda: on_file.sql(sql, epsilon=EPSILON))[0]

    runs: dict[str, Callable[[], float]] = {"plain": plain, "stmt": stmt, "dp": dp,
                                            "prep": prep}
    if on_file is not None:
        runs["file"] = file
    times: dict[str, list[float]] = {k: [] for k in runs}
    try:
        for fn in runs.values():  # warm-up: buffers, plan cache, the session's column types
            fn()  # (and the prepared session's copy)
        order = list(runs)
        for i in range(repeat):
            k = i % len(order)
            for key in order[k:] + order[:k]:
                times[key].append(runs[key]())
    finally:
        sess.close()
        prepared.close()
        if on_file is not None:
            on_file.close()

    med = {k: statistics.median(v) for k, v in times.items()}
    exact = {"plain": outputs["plain"], "stmt": outputs["stmt"][0] if statements else []}
    matches = None
    if reference is not None:
        matches = {k: same_rows(exact[k], reference[k]) for k in exact}
    return {
        "engine": backend.name,
        "rows": rows,
        "query": name,
        "sql": sql,
        "repeat": repeat,
        "plain_median_s": med["plain"],
        "stmt_median_s": med["stmt"],
        "dp_median_s": med["dp"],
        "prepared_median_s": med["prep"],
        "dp_over_plain": med["dp"] / med["plain"] if med["plain"] > 0 else None,
        "prepared_over_plain": med["prep"] / med["plain"] if med["plain"] > 0 else None,
        "prepared_file_median_s": med.get("file"),
        "prepared_file_over_plain": (med["file"] / med["plain"]
                                     if "file" in med and med["plain"] > 0 else None),
        "prepared_file_times_s": times.get("file"),
        "stmt_over_plain": med["stmt"] / med["plain"] if med["plain"] > 0 else None,
        "dp_over_stmt": med["dp"] / med["stmt"] if med["stmt"] > 0 else None,
        "plain_times_s": times["plain"],
        "stmt_times_s": times["stmt"],
        "dp_times_s": times["dp"],
        "prepared_times_s": times["prep"],
        "engine_statements": statements,
        "plain_output_rows": len(outputs["plain"]),
        "dp_output_rows": len(outputs["dp"].df),
        "matches_duckdb": matches,
        "_exact": exact,
    }


# -- output -------------------------------------------------------------------------------------
def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(results: list[dict[str, Any]]) -> None:
    head = (f"{'engine':<9} {'rows':>11} {'query':<18} {'plain s':>9} {'stmt s':>9} "
            f"{'DP s':>9} {'DP/plain':>9} {'file/plain':>10} {'prep./plain':>11} "
            f"{'stmt/plain':>10}")
    print(head)
    print("-" * len(head))
    for r in results:
        flag = "" if not r["matches_duckdb"] or all(r["matches_duckdb"].values()) else " !"
        print(f"{r['engine']:<9} {r['rows']:>11,} {r['query']:<18} {r['plain_median_s']:>9.3f} "
              f"{r['stmt_median_s']:>9.3f} {r['dp_median_s']:>9.3f} {r['dp_over_plain']:>9.2f} "
              f"{_ratio(r['prepared_file_over_plain']):>10} "
              f"{r['prepared_over_plain']:>11.2f} {r['stmt_over_plain']:>10.2f}{flag}")
    print("(medians; file = DP in a default session on the DuckDB file after `privplan "
          "prepare` (it reads the stored SUM grids); prep. = DP in a session opened with "
          "prepare=True; stmt = privplan's "
          "engine statement run alone on the native client; '!' = an exact answer differs "
          "from DuckDB's)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--queries", nargs="*", choices=list(QUERIES), default=list(QUERIES))
    parser.add_argument("--user-queries", nargs="*", choices=list(USER_QUERIES),
                        default=list(USER_QUERIES))
    parser.add_argument("--out", type=Path, default=HERE / "results" / "engines.json")
    parser.add_argument("--data-dir", type=Path, default=HERE / ".data")
    args = parser.parse_args(argv)

    server = spark = cached = None
    results: list[dict[str, Any]] = []
    user_results: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    try:
        if "postgres" in args.engines:
            from tests.servers.postgres_server import start_postgres

            seconds, server = timed(start_postgres)
            print(f"PostgreSQL server started ({seconds:.1f} s)", flush=True)
        if "spark" in args.engines:
            seconds, spark = timed(start_spark)
            print(f"Spark local[2] started ({seconds:.1f} s)", flush=True)
        for rows in args.sizes:
            db, generated = cached_database(rows, args.data_dir)
            if generated is not None:
                print(f"generated {rows:,} rows in {generated:.1f} s", flush=True)
            reference: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
            for name in ENGINES:
                if name not in args.engines:
                    continue
                backend: Backend
                if name == "duckdb":
                    backend = DuckDBBackend(db)  # ("load": `privplan prepare`, if it ran now)
                    seconds = backend.prepare_s or 0.0  # type: ignore[attr-defined]
                elif name == "postgres":
                    assert server is not None
                    seconds = load_postgres(server.url, db)
                    backend = PostgresBackend(server.url)
                else:
                    seconds, cached = load_spark(spark, db, cached)
                    backend = SparkBackend(spark)
                loads.append({"engine": name, "rows": rows, "load_s": seconds})
                print(f"{name}: {rows:,} rows loaded in {seconds:.1f} s", flush=True)
                try:
                    for query in args.queries:
                        r = measure(backend, rows, query, QUERIES[query], args.repeat,
                                    reference.get(query))
                        exact = r.pop("_exact")
                        if name == "duckdb":
                            reference[query] = exact
                        results.append(r)
                        print(f"  {query}: plain {r['plain_median_s']:.3f} s, stmt "
                              f"{r['stmt_median_s']:.3f} s, DP {r['dp_median_s']:.3f} s, "
                              f"prep. {r['prepared_median_s']:.3f} s "
                              f"(DP/plain {r['dp_over_plain']:.2f})", flush=True)
                    for query in args.user_queries if name in USER_LEVEL_ENGINES else ():
                        u = measure_user(backend, rows, query, USER_QUERIES[query],
                                         args.repeat)
                        user_results.append(u)
                        print(f"  {query}: plain {u['plain_median_s']:.3f} s, first "
                              f"{u['first_median_s']:.3f} s, later {u['later_median_s']:.3f} s"
                              f" (later/plain {_ratio(u['later_over_plain'])}, inline/plain "
                              f"{_ratio(u.get('inline_over_plain'))})", flush=True)
                finally:
                    backend.close()
    finally:
        if spark is not None:
            spark.stop()
        if server is not None:
            server.stop()

    print()
    print_table(results)
    print()
    print_user_table(user_results)
    write_json(args.out, {
        "benchmark": "engines",
        "sizes": args.sizes,
        "engines": args.engines,
        "repeat": args.repeat,
        "epsilon": EPSILON,
        "target_dp_over_plain": TARGET_RATIO,
        "queries": {q: QUERIES[q] for q in args.queries},
        "user_queries": {q: USER_QUERIES[q] for q in args.user_queries},
        "machine": machine_info(),
        "spark": {"master": "local[2]", "driver_memory": SPARK_DRIVER_MEMORY}
        if spark is not None else None,
        "loads": loads,
        "results": results,
        "user_level_results": user_results,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
