"""Load on ``privplan serve`` (issue 37): pgbench clients running DP queries for a fixed time.

A ``privplan serve`` process over a DuckDB file of the demo data (one durable SQLite ledger, a
total budget large enough never to refuse), and the real ``pgbench`` running a custom script of
DP queries (ε from the startup options, ``PGOPTIONS=-c privplan.epsilon=...``) with ``--clients``
clients for ``--seconds`` seconds. Reported: pgbench's errors (must be 0), transactions,
throughput, p50/p99 latency from its per-transaction log; the ledger's entries and its total,
which must equal #entries × ε (every admitted query charged, nothing else); and the same
queries in-process (``Session.sql`` in a loop on the same file) with the ratio p50 server /
p50 in-process (target ≤ 1.3, reported, not enforced).

    python benchmarks/server.py [--rows 1000000] [--clients 32] [--seconds 60] [--threads 2]
                                [--protocol simple|extended|prepared] [--quick] [--out PATH]
                                [--data-dir DIR]   (the DuckDB file is cached in benchmarks/.data/)
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from _common import HERE, git_revision, machine_info, write_json

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger.store import SQLiteLedger
from privplan.ledger.verify import verify_ledger

SRC = str(HERE.parent / "src")
EPSILON = Fraction(1, 1024)  # exact in binary: the ledger's total is checked exactly
QUERIES = [
    "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital",
    "SELECT COUNT(*) AS n FROM visits WHERE age > 40",
]


def _start_server(db: Path, ledger: Path, users: Path, log: Path) -> tuple[Any, int]:
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "privplan.cli", "serve", "--database", str(db), "--policy",
             str(demo_policy_path()), "--ledger", str(ledger), "--users", str(users),
             "--listen", "127.0.0.1:0", "--total-epsilon", "1000000000"],
            env=dict(os.environ, PYTHONPATH=SRC), stderr=err, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = re.search(r"serving on 127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return proc, int(found.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the server did not start: " + log.read_text(errors="replace"))


def _pgbench(port: int, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    script = folder / "dp.sql"
    script.write_text("".join(q + ";\n" for q in QUERIES))
    env = dict(os.environ, PGPASSWORD="pw", PGSSLMODE="disable",
               PGOPTIONS=f"-c privplan.epsilon={float(EPSILON)!r}")
    cmd = ["pgbench", "-n", "-f", str(script), "-c", str(args.clients), "-j", str(args.threads),
           "-T", str(args.seconds), "-M", args.protocol, "--log",
           f"--log-prefix={folder / 'pgbench'}", "-h", "127.0.0.1", "-p", str(port),
           "-U", "alice", "demo"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False,
                          timeout=args.seconds + 300)
    out = done.stdout + done.stderr
    latencies = [int(line.split()[2]) / 1e6 for log in folder.glob("pgbench.*")
                 for line in log.read_text().splitlines() if line.strip()]

    def number(pattern: str) -> float | None:
        found = re.search(pattern, out)
        return float(found.group(1)) if found else None

    return {
        "returncode": done.returncode,
        "transactions": int(number(r"actually processed: (\d+)") or 0),
        "failed": int(number(r"number of failed transactions: (\d+)") or 0),
        "errors_in_output": len(re.findall(r"(?i)\berror\b", done.stderr)),
        "tps": number(r"tps = ([\d.]+)"),
        "latency_p50_s": statistics.median(latencies) if latencies else None,
        "latency_p99_s": _p99(latencies),
        "logged_transactions": len(latencies),
        "pgbench_summary": done.stdout.strip().splitlines()[-12:],
    }


def _p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _in_process(db: Path, seconds: float) -> dict[str, Any]:
    """The script's transaction (both queries) by ``Session.sql`` in a loop, same file."""
    session = pp.connect(db, policy=demo_policy_path(), budget=pp.PureDP(1e9))
    times: list[float] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until or len(times) < 5:
        start = time.perf_counter()
        for q in QUERIES:
            session.sql(q, epsilon=float(EPSILON))
        times.append(time.perf_counter() - start)
    return {"transactions": len(times), "latency_p50_s": statistics.median(times),
            "latency_p99_s": _p99(times)}


def _ledger(path: Path) -> dict[str, Any]:
    store = SQLiteLedger(path)
    try:
        entries = len(store.entries())
        total = store.recorded_total()
    finally:
        store.close()
    spent = Fraction(0) if total is None else Fraction(total.epsilon)
    return {"entries": entries, "total_epsilon": float(spent),
            "total_equals_entries_times_epsilon": spent == entries * EPSILON,
            "verify_ok": verify_ledger(path).ok}


def run(args: argparse.Namespace) -> dict[str, Any]:
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    db = data_dir / f"server_{args.rows}.duckdb"
    if not db.exists():
        write_demo_database(db, rows=args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        users = folder / "users.json"
        subprocess.run([sys.executable, "-m", "privplan.cli", "users", "add", str(users),
                        "alice", "--epsilon", "1000000000"], input="pw\n", text=True,
                       check=True, env=dict(os.environ, PYTHONPATH=SRC), capture_output=True)
        proc, port = _start_server(db, folder / "ledger.sqlite", users, folder / "serve.log")
        try:
            served = _pgbench(port, folder, args)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        ledger = _ledger(folder / "ledger.sqlite")
    local = _in_process(db, min(args.seconds, 20))
    ratio = (served["latency_p50_s"] / local["latency_p50_s"]
             if served["latency_p50_s"] and local["latency_p50_s"] else None)
    return {"benchmark": "server", "rows": args.rows, "clients": args.clients,
            "threads": args.threads, "seconds": args.seconds, "protocol": args.protocol,
            "queries": QUERIES, "epsilon_per_query": float(EPSILON), "server": served,
            "ledger": ledger, "in_process": local, "ratio_p50_server_in_process": ratio,
            "charges_match": ledger["entries"] == len(QUERIES) * served["transactions"],
            "machine": machine_info(), "git": git_revision()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--protocol", choices=["simple", "extended", "prepared"],
                        default="simple")
    parser.add_argument("--quick", action="store_true",
                        help="10k rows, 2 clients, 3 seconds (a smoke run)")
    parser.add_argument("--out", default=str(HERE / "results" / "server.json"))
    parser.add_argument("--data-dir", default=str(HERE / ".data"))
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.clients, args.threads, args.seconds = 10_000, 2, 1, 3
    result = run(args)
    write_json(Path(args.out), result)
    s, local = result["server"], result["in_process"]
    print(f"server: {s['transactions']} transactions ({s['failed']} failed), {s['tps']} tps, "
          f"p50 {s['latency_p50_s']}, p99 {s['latency_p99_s']}; ledger {result['ledger']}; "
          f"in-process p50 {local['latency_p50_s']} p99 {local['latency_p99_s']}; "
          f"ratio {result['ratio_p50_server_in_process']}")
    return 0 if s["returncode"] == 0 and s["failed"] == 0 and result["charges_match"] else 1


if __name__ == "__main__":
    sys.exit(main())
