"""Speed side by side with the peer DP SQL systems: the same queries, data and budget, timed
interleaved in one run, as ratios to plain DuckDB measured in the same run (issue #19).

Data: the demo ``visits`` table (:mod:`privplan.demo.data`) at each ``--sizes`` (default 100k,
1M and 10M rows), the DuckDB file cached in ``--data-dir`` as ``overhead.py`` caches it; the
peers that read files get a cached Parquet or CSV export of the four columns the queries read
(``patient_id, department, age, cost``) next to it. Bounds, public keys and the per-patient cap
come from the demo policies (``policy.yaml``, ``policy_patients.yaml``): age [0, 100], cost [0,
20000] (about 1% NULL), five public departments, at most 10 rows per patient.

Queries, each at ε = 1 for the whole query (Qrlew, Gaussian only: ε = 1, δ = 1e-6):

* ``grouped``: ``SELECT department, COUNT(*) AS n, AVG(cost) AS avg_cost FROM visits GROUP BY
  department``, row level;
* ``filtered``: ``SELECT SUM(cost) AS total_cost FROM visits WHERE age >= 65``, row level;
* ``user_grouped``: the grouped query at user level (privacy unit ``patient_id``, at most 10
  rows per patient).

Systems:

* **plain**: the SQL on a read-only DuckDB connection to the file, ``.fetchall()``;
* **privplan**: one long-lived ``pp.connect(db, policy=..., budget=pp.PureDP(1e6))`` per
  policy (row level, patient level), ``session.sql(sql, epsilon=1)``;
* **privplan prepared**: the same with ``prepare=True`` (its first query makes the clamped,
  compressed copy; that first time is the cell's ``warmup_s``);
* **privplan fresh**: a new session per answer, ``with pp.connect(...) as s: s.sql(...)``
  (connect, first answer, close: what the CLI or a DB-API connection per request pays), with
  the durable copies of ``privplan prepare`` made for the patient policy at the start of the
  size (timed: ``prepare_s``; removed at the end);
* **peers**, each a long-lived process in its own virtual environment,
  ``<envs>/<env>/bin/python benchmarks/peers/speed_<peer>.py`` (protocol and job format in
  ``peers/_speed.py``; each adapter's docstring says how the peer is configured and what its
  timed region is): ``smartnoise`` (SmartNoise SQL on DuckDB, on the same file),
  ``smartnoise-sqlite`` (SmartNoise on SQLite, the engine of its ``from_df``), ``qrlew``
  (rewritten SQL run on DuckDB, on the same file), ``opendp`` (Polars), ``pipelinedp`` (local
  backend), ``tumult`` (Spark ``local[2]``). A peer's start-up (interpreter and imports) and
  data loading are timed apart (``startup_s``, ``load_s``) and are not in its query times.

How each figure is taken, per size: the systems are started one at a time (peers loaded);
then every system answers every query once as a warm-up (not counted), the systems in
rotating order; then ``--repeat`` rounds, each asking every query of every system once, the
order of the systems rotated by one for each round and query (so no system always follows a
slow one). A figure is the median of a cell's counted runs; its ratio is that median over plain
DuckDB's median for the same size and query. Exceptions, for peers that take minutes per query:

* a warm-up that takes at least ``--slow-seconds`` (default 30 s) is counted as the cell's first
  run, and the cell then gets ``min(repeat, --slow-repeat)`` runs in all (default 1: the warm-up
  alone);
* each peer has ``--peer-timeout`` seconds (default 900) per size for everything it does,
  start-up and load included; a run still going at the deadline is stopped (the process is
  killed) and a cell with no counted run is reported as "> cap" (a cell with fewer runs keeps
  its median; ``runs`` says how many). The same rules apply to privplan and plain DuckDB,
  which never come near them.

A peer without its environment is reported as "not installed"; a query a peer cannot express
as "n/a"; an error as "error" with its first line. Each peer's configuration and versions are
in the JSON (``systems``).

    python benchmarks/vs_peers.py [--sizes 100000 1000000 10000000] [--repeat 5]
        [--peers smartnoise,smartnoise-sqlite,qrlew,opendp,pipelinedp,tumult] [--envs DIR]
        [--peer-timeout 900] [--slow-seconds 30] [--slow-repeat 1] [--quick] [--out PATH]
        [--data-dir DIR]

``--quick``: 100k rows, 2 repetitions (with ``--peers none`` or an empty ``--envs``, privplan
and plain DuckDB alone: the smoke test). Prints a table per size and writes
``benchmarks/results/vs_peers.json``. Never asserts on time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from _common import PEER_ENVS, exported, git_revision, machine_info, timed, write_json
from overhead import cached_database

import privplan as pp
from privplan.demo.data import demo_policy_path
from privplan.engines.durable_copies import copies_path
from privplan.session.prepare import prepare_copies

HERE = Path(__file__).resolve().parent
PEERS_DIR = HERE / "peers"
DEFAULT_SIZES = [100_000, 1_000_000, 10_000_000]
EPSILON = 1.0
DELTA = 1e-6  # for a peer with only the Gaussian mechanism (Qrlew)
SESSION_BUDGET = 1e6
TABLE = "visits"
COLUMNS = ("patient_id", "department", "age", "cost")  # what the queries read (exports)
GROUPED_SQL = (f"SELECT department, COUNT(*) AS n, AVG(cost) AS avg_cost FROM {TABLE} "
               "GROUP BY department")
LOCAL = ("plain", "privplan", "privplan prepared", "privplan fresh")
LOCAL_NOTES = {
    "plain": "duckdb.connect(file, read_only=True); con.execute(sql).fetchall()",
    "privplan": f"one long-lived pp.connect(file, policy=<demo policy of the unit>, "
                f"budget=pp.PureDP({SESSION_BUDGET:g})) per privacy unit; "
                "session.sql(sql, epsilon=1)",
    "privplan prepared": "the same with prepare=True (its first query, the warm-up, makes the "
                         "clamped copy)",
    "privplan fresh": "with pp.connect(file, policy=..., budget=...) as s: s.sql(sql, epsilon=1)"
                      " per answer; durable copies of `privplan prepare` (patient policy) made "
                      "at the start of the size",
}
SHORT = {"privplan prepared": "pp prepared", "privplan fresh": "pp fresh",
         "smartnoise-sqlite": "sn sqlite"}  # table headers


@dataclass(frozen=True)
class PeerSpec:
    """A peer system: its virtual environment, adapter, data format and adapter options."""

    env: str
    script: str
    data: str  # "duckdb" | "parquet" | "csv"
    options: dict[str, Any] = field(default_factory=dict)


PEERS: dict[str, PeerSpec] = {
    "smartnoise": PeerSpec("smartnoise", "speed_smartnoise.py", "duckdb", {"backend": "duckdb"}),
    "smartnoise-sqlite": PeerSpec("smartnoise", "speed_smartnoise.py", "csv",
                                  {"backend": "sqlite"}),
    "qrlew": PeerSpec("qrlew", "speed_qrlew.py", "duckdb"),
    "opendp": PeerSpec("opendp", "speed_opendp.py", "parquet"),
    "pipelinedp": PeerSpec("pipelinedp", "speed_pipelinedp.py", "csv"),
    "tumult": PeerSpec("tumult", "speed_tumult.py", "parquet"),
}


# -- queries and policies -------------------------------------------------------------------------
def policies() -> dict[str, pp.Policy]:
    """The demo policies by privacy unit: ``row`` and ``patient_id``."""
    row = pp.Policy.from_yaml(demo_policy_path())
    patient = pp.Policy.from_yaml(demo_policy_path().with_name("policy_patients.yaml"))
    return {"row": row, patient.table(TABLE).privacy_unit: patient}


def queries(pols: dict[str, pp.Policy]) -> list[dict[str, Any]]:
    """The benchmark's queries in the job format of ``peers/_speed.py``."""
    cap = next(p.table(TABLE).max_rows_per_unit for u, p in pols.items() if u != "row")
    user = next(u for u in pols if u != "row")
    grouped = {"group_by": "department", "where": [],
               "aggs": [["count", None, "n"], ["avg", "cost", "avg_cost"]]}
    common = {"max_rows_per_unit": cap, "epsilon": EPSILON, "delta": DELTA}
    return [
        {"id": "grouped", "title": "COUNT(*), AVG(cost) GROUP BY department", "sql": GROUPED_SQL,
         "unit": "row", **grouped, **common},
        {"id": "filtered", "title": "SUM(cost) WHERE age >= 65",
         "sql": f"SELECT SUM(cost) AS total_cost FROM {TABLE} WHERE age >= 65", "unit": "row",
         "group_by": None, "where": [["age", ">=", 65]], "aggs": [["sum", "cost", "total_cost"]],
         **common},
        {"id": "user_grouped", "title": f"user level ({user}, <= {cap} rows): COUNT(*), "
         "AVG(cost) GROUP BY department", "sql": GROUPED_SQL, "unit": user, **grouped, **common},
    ]


def bounds_and_keys(policy: pp.Policy) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    """The demo policy's bounds of ``age`` and ``cost`` and public ``department`` keys."""
    cols = policy.table(TABLE).columns
    bounds = {c: [cols[c].lower, cols[c].upper] for c in ("age", "cost")}
    return bounds, {"department": list(cols["department"].public_values or ())}


# -- data -----------------------------------------------------------------------------------------
def export(db: Path, fmt: str) -> Path:
    """The queried columns of ``visits`` as a Parquet file or a CSV file with a header, next to
    ``db`` (cached while newer than ``db``)."""
    options = "FORMAT csv, HEADER true" if fmt == "csv" else "FORMAT parquet"
    return exported(db, db.with_name(f"{db.stem}.vs_peers.{fmt}"),
                    f"SELECT {', '.join(COLUMNS)} FROM {TABLE}", options)


# -- measurement outcomes and cells -------------------------------------------------------------
@dataclass
class Outcome:
    """One run: ``status`` "ok" with its seconds (and the peer's split of them), or "> cap",
    "n/a", "error" or "failed" with a reason."""

    status: str
    seconds: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    reason: str | None = None


@dataclass
class Cell:
    """A system's runs of one query at one size, and the rules for how many to count."""

    repeat: int
    slow_seconds: float
    slow_repeat: int
    samples: list[float] = field(default_factory=list)
    parts: list[dict[str, float]] = field(default_factory=list)
    warmup_s: float | None = None
    warmup_counted: bool = False
    status: str = "ok"
    reason: str | None = None
    capped: bool = False  # the peer's time cap ended the cell after some counted runs

    @property
    def limit(self) -> int:
        return min(self.repeat, self.slow_repeat) if self.warmup_counted else self.repeat

    def wants_more(self) -> bool:
        return self.status == "ok" and not self.capped and len(self.samples) < self.limit

    def warm(self, out: Outcome) -> None:
        """The warm-up; counted when it took at least ``slow_seconds``."""
        if out.status != "ok":
            self._stop(out)
            return
        self.warmup_s = out.seconds
        if out.seconds >= self.slow_seconds:
            self.warmup_counted = True
            self._count(out)

    def add(self, out: Outcome) -> None:
        if out.status == "ok":
            self._count(out)
        else:
            self._stop(out)

    def _count(self, out: Outcome) -> None:
        self.samples.append(out.seconds)
        self.parts.append(out.parts)

    def _stop(self, out: Outcome) -> None:
        # a run cut short by the cap leaves the counted runs standing
        if out.status == "> cap" and self.samples:
            self.capped, self.reason = True, f"cap reached after {len(self.samples)} run(s)"
            return
        self.status, self.reason = out.status, out.reason

    def median(self) -> float | None:
        return statistics.median(self.samples) if self.status == "ok" and self.samples else None


# -- systems ------------------------------------------------------------------------------------
class System:
    """A system under test: ``start`` (untimed for local ones), ``run`` one query, ``close``."""

    name: str

    def start(self) -> dict[str, Any]:
        return {"status": "ok"}

    def run(self, q: dict[str, Any]) -> Outcome:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Plain(System):
    """The query on a read-only DuckDB connection to the file, ``fetchall()``."""

    name = "plain"

    def __init__(self, db: Path) -> None:
        self.con = duckdb.connect(str(db), read_only=True)

    def run(self, q: dict[str, Any]) -> Outcome:
        return Outcome("ok", timed(lambda: self.con.execute(q["sql"]).fetchall())[0])

    def close(self) -> None:
        self.con.close()


class Privplan(System):
    """Long-lived privplan sessions, one per privacy unit (``prepare=True`` for "prepared")."""

    def __init__(self, db: Path, pols: dict[str, pp.Policy], prepare: bool) -> None:
        self.name = "privplan prepared" if prepare else "privplan"
        self.sessions = {unit: pp.connect(db, policy=p, budget=pp.PureDP(SESSION_BUDGET),
                                          prepare=prepare) for unit, p in pols.items()}

    def run(self, q: dict[str, Any]) -> Outcome:
        sess = self.sessions[q["unit"]]
        return Outcome("ok", timed(lambda: sess.sql(q["sql"], epsilon=q["epsilon"]))[0])

    def close(self) -> None:
        for sess in self.sessions.values():
            sess.close()


class PrivplanFresh(System):
    """A new session per answer: connect, answer, close."""

    name = "privplan fresh"

    def __init__(self, db: Path, pols: dict[str, pp.Policy]) -> None:
        self.db, self.pols = db, pols

    def run(self, q: dict[str, Any]) -> Outcome:
        def answer() -> None:
            with pp.connect(self.db, policy=self.pols[q["unit"]],
                            budget=pp.PureDP(SESSION_BUDGET)) as sess:
                sess.sql(q["sql"], epsilon=q["epsilon"])

        return Outcome("ok", timed(answer)[0])


class Peer(System):
    """A peer's adapter process (``peers/_speed.py``): started and loaded by ``start``, asked
    one query per ``run``; the time spent waiting for it (start-up, load, runs; not the other
    systems' turns) may add up to ``cap`` seconds."""

    def __init__(self, name: str, python: Path, spec: PeerSpec, job: Path, cap: float,
                 log: Path) -> None:
        self.name, self.python, self.spec, self.job, self.cap, self.log = (
            name, python, spec, job, cap, log)
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.used = 0.0  # seconds spent waiting for this peer
        self.ended: Outcome | None = None  # once set, every later run gets it
        self.na: dict[str, str] = {}

    def start(self) -> dict[str, Any]:
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(
                [str(self.python), str(PEERS_DIR / self.spec.script), str(self.job)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                cwd=PEERS_DIR, bufsize=1, start_new_session=True)  # (a group: Spark's JVM)
        threading.Thread(target=self._read, daemon=True).start()
        ready = self._receive()
        if isinstance(ready, dict) and ready.get("event") != "ready":
            ready = self._end("failed", f"unexpected first message {str(ready)[:300]}")
        if isinstance(ready, Outcome):
            return {"status": ready.status, "reason": ready.reason}
        self.na = ready.get("na", {})
        return {"status": "ok", "load_s": ready["load_s"],
                "startup_s": self.used - ready["load_s"],
                "versions": ready["versions"], "notes": ready["notes"], "na": self.na}

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _end(self, status: str, reason: str) -> Outcome:
        """Stop the adapter for good: every later run gets this outcome."""
        self._kill()
        self.ended = Outcome(status, reason=reason)
        return self.ended

    def _receive(self) -> dict[str, Any] | Outcome:
        """The adapter's next message, or the outcome that ended it (cap, exit)."""
        while self.ended is None:
            start = time.perf_counter()
            try:
                line = self.lines.get(timeout=max(self.cap - self.used, 0.0))
            except queue.Empty:
                return self._end("> cap", f"peer time cap of {self.cap:.0f} s reached")
            finally:
                self.used += time.perf_counter() - start
            if line is None:
                return self._end("failed", f"adapter exited: {self._last_error()}")
            if line.startswith("{"):  # (anything else was printed before the protocol began)
                return json.loads(line)
        return self.ended

    def run(self, q: dict[str, Any]) -> Outcome:
        if q["id"] in self.na:
            return Outcome("n/a", reason=self.na[q["id"]])
        if self.ended is None and self.used >= self.cap:
            self._end("> cap", f"peer time cap of {self.cap:.0f} s reached")
        if self.ended is not None:
            return self.ended
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": "run", "query": q["id"]}) + "\n")
        self.proc.stdin.flush()
        msg = self._receive()
        if isinstance(msg, Outcome):
            return msg
        if msg["event"] == "error":
            return Outcome("error", reason=msg["error"])
        return Outcome("ok", msg["seconds"], msg.get("parts") or {})

    def _last_error(self) -> str:
        lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1][:400] if lines else "(no output)"

    def _kill(self) -> None:
        """End the adapter's process group (the adapter, and Spark's JVM if it has one)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None and self.ended is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self._kill()


# -- one size -----------------------------------------------------------------------------------
def rotated(systems: list[System], k: int) -> list[System]:
    k %= len(systems)
    return systems[k:] + systems[:k]


def peer_systems(args: argparse.Namespace, rows: int, db: Path, job_base: dict[str, Any],
                 tmp: Path) -> tuple[list[System], dict[str, dict[str, Any]]]:
    """The installed peers' processes (not started) and the status of the others."""
    peers: list[System] = []
    missing: dict[str, dict[str, Any]] = {}
    log_dir = args.data_dir / "vs_peers_logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    for name in args.peers:
        spec = PEERS[name]
        python = args.envs / spec.env / "bin" / "python"
        if not python.exists():
            missing[name] = {"status": "not installed",
                             "reason": f"no virtual environment at {python.parent.parent}"}
            continue
        data = {"duckdb": str(db)}
        if spec.data != "duckdb":
            data[spec.data] = str(export(db, spec.data))
        job = {**job_base, "data": data, "options": spec.options}
        job_path = tmp / f"{name}_{rows}.json"
        job_path.write_text(json.dumps(job))
        peers.append(Peer(name, python, spec, job_path, args.peer_timeout,
                          log_dir / f"{name}_{rows}.log"))
    return peers, missing


def measure_size(args: argparse.Namespace, rows: int, tmp: Path) -> dict[str, Any]:
    """Every system's cells at one size (see the module docstring for the schedule)."""
    pols = policies()
    qs = queries(pols)
    db, generated_s = cached_database(rows, args.data_dir)
    bounds, keys = bounds_and_keys(pols["row"])
    job_base = {"rows": rows, "table": TABLE, "bounds": bounds, "keys": keys, "queries": qs}
    peers, missing = peer_systems(args, rows, db, job_base, tmp)
    prepare_s, _ = timed(lambda: prepare_copies(db, next(p for u, p in pols.items()
                                                          if u != "row")))
    systems: list[System] = []
    loads: dict[str, dict[str, Any]] = dict(missing)
    try:
        systems = [Plain(db), Privplan(db, pols, prepare=False), Privplan(db, pols, prepare=True),
                   PrivplanFresh(db, pols)]
        for peer in peers:
            print(f"  starting {peer.name} ...", flush=True)
            loads[peer.name] = peer.start()
            systems.append(peer)
        cells = {(s.name, q["id"]): Cell(args.repeat, args.slow_seconds, args.slow_repeat)
                 for s in systems for q in qs}
        schedule(systems, qs, cells, args.repeat)
    finally:
        for s in systems:
            s.close()
        copies_path(db).unlink(missing_ok=True)
    return {"rows": rows, "database": db.name, "generated_s": generated_s,
            "prepare_s": prepare_s, "loads": loads,
            "cells": cell_results(rows, qs, cells, loads)}


def schedule(systems: list[System], qs: list[dict[str, Any]], cells: dict[tuple[str, str], Cell],
             repeat: int) -> None:
    """One warm-up of every (system, query), then ``repeat`` rounds in rotating order."""
    for i, q in enumerate(qs):
        for s in rotated(systems, i):
            cells[s.name, q["id"]].warm(s.run(q))
    for r in range(repeat):
        for i, q in enumerate(qs):
            for s in rotated(systems, r + i + 1):
                cell = cells[s.name, q["id"]]
                if cell.wants_more():
                    cell.add(s.run(q))
        print(f"  round {r + 1}/{repeat} done", flush=True)


def cell_results(rows: int, qs: list[dict[str, Any]], cells: dict[tuple[str, str], Cell],
                 loads: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One JSON record per (query, system): median, ratio to plain, runs; or a status."""
    out = []
    for q in qs:
        plain = cells["plain", q["id"]].median()
        for name in [*LOCAL, *loads]:
            cell = cells.get((name, q["id"]))
            if cell is None:  # not installed, or failed to start
                out.append({"rows": rows, "query": q["id"], "system": name,
                            "status": loads[name]["status"], "reason": loads[name]["reason"]})
                continue
            med = cell.median()
            out.append({"rows": rows, "query": q["id"], "system": name, "status": cell.status,
                        "reason": cell.reason, "median_s": med,
                        "ratio_to_plain": med / plain if med is not None and plain else None,
                        "runs": len(cell.samples) if cell.status == "ok" else 0,
                        "times_s": cell.samples, "warmup_s": cell.warmup_s,
                        "warmup_counted": cell.warmup_counted, "parts_s": cell.parts})
    return out


# -- output -------------------------------------------------------------------------------------
def cell_text(r: dict[str, Any], repeat: int) -> str:
    if r["status"] != "ok":
        return {"not installed": "not inst.", "failed": "failed"}.get(r["status"], r["status"])
    text = f"{r['ratio_to_plain']:,.2f}" if r["ratio_to_plain"] < 100 else \
        f"{r['ratio_to_plain']:,.0f}"
    return text if r["runs"] >= repeat else f"{text} ({r['runs']})"


def print_size(result: dict[str, Any], systems: list[str], repeat: int) -> None:
    """Query x system: ratio to plain DuckDB (runs in parentheses when fewer than repeat)."""
    rows = result["rows"]
    print(f"\n{rows:,} rows: median time / plain DuckDB median (plain in ms)")
    header = f"{'query':<13} {'plain ms':>9} " + " ".join(f"{SHORT.get(s, s):>11}"
                                                          for s in systems[1:])
    print(header)
    by = {(r["query"], r["system"]): r for r in result["cells"]}
    for qid in dict.fromkeys(r["query"] for r in result["cells"]):
        plain = by[qid, "plain"]["median_s"]
        cells = " ".join(f"{cell_text(by[qid, s], repeat):>11}" for s in systems[1:])
        print(f"{qid:<13} {plain * 1000:>9.1f} {cells}")
    for name, load in result["loads"].items():
        if load["status"] == "ok":
            print(f"  {name}: start-up {load['startup_s']:.1f} s, load {load['load_s']:.1f} s")
        else:
            print(f"  {name}: {load['status']} ({load['reason']})")
    print(f"  privplan prepare (durable copies): {result['prepare_s']:.2f} s")


def systems_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per peer: status, versions and configuration notes (from its last start)."""
    out: dict[str, Any] = {name: {"status": "ok", "kind": "local", "notes": LOCAL_NOTES[name],
                                  "versions": {"privplan": pp.__version__,
                                               "duckdb": duckdb.__version__}}
                           for name in LOCAL}
    for res in results:
        for name, load in res["loads"].items():
            keep = {k: load[k] for k in ("status", "reason", "versions", "notes", "na")
                    if k in load}
            out[name] = {"kind": "peer", "env": PEERS[name].env, "adapter":
                         f"peers/{PEERS[name].script}", "options": PEERS[name].options, **keep}
    return out


# -- main ---------------------------------------------------------------------------------------
def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="comma-separated, or 'none' (default: all)")
    ap.add_argument("--envs", type=Path, default=PEER_ENVS)  # (one per peer, outside the repo)
    ap.add_argument("--peer-timeout", type=float, default=900.0,
                    help="seconds per peer and size, start-up and load included")
    ap.add_argument("--slow-seconds", type=float, default=30.0,
                    help="a warm-up at least this long counts as a run")
    ap.add_argument("--slow-repeat", type=int, default=1,
                    help="runs in all of a cell whose warm-up was counted")
    ap.add_argument("--quick", action="store_true", help="100k rows, 2 repetitions")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "vs_peers.json")
    ap.add_argument("--data-dir", type=Path, default=HERE / ".data")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.repeat = [100_000], min(args.repeat, 2)
    args.peers = [] if args.peers.strip() in ("", "none") else args.peers.split(",")
    unknown = set(args.peers) - set(PEERS)
    if unknown:
        ap.error(f"unknown peers {sorted(unknown)}; choose from {', '.join(PEERS)}")
    return args


def main() -> None:
    args = parse_args()
    revision = git_revision()
    load_at_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    started = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="vs_peers_") as tmp:
        for rows in args.sizes:
            print(f"{rows:,} rows ...", flush=True)
            results.append(measure_size(args, rows, Path(tmp)))
            print_size(results[-1], [*LOCAL, *args.peers], args.repeat)
    qs = queries(policies())
    write_json(args.out, {
        "benchmark": "vs_peers", "sizes": args.sizes, "repeat": args.repeat, "quick": args.quick,
        "peers": args.peers, "peer_timeout_s": args.peer_timeout,
        "slow_seconds": args.slow_seconds, "slow_repeat": args.slow_repeat,
        "epsilon": EPSILON, "delta_for_gaussian_only_peers": DELTA,
        "queries": {q["id"]: {k: q[k] for k in ("title", "sql", "unit", "max_rows_per_unit")}
                    for q in qs},
        "machine": {**machine_info(), "load_average_at_start": load_at_start}, "git": revision, "seconds": time.perf_counter() - started,
        "systems": systems_summary(results), "results": results,
    })


if __name__ == "__main__":
    main()
