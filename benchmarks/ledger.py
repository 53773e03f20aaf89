"""Durable ledger at scale: open + ``spent()``, and admissions, at 1k, 10k and 100k entries.

The ledgers hold a dashboard-like mix over the demo ``visits`` table (60% disjoint slices
``hospital = H AND age = a``, 20% GROUP BY department over an age band, 20% overlapping
``SUM(cost) WHERE age >= a``), written directly in one transaction with a valid hash chain
(cached in ``benchmarks/.data/``). Every entry records the final composed total of the whole
ledger as its total: an over-statement of each prefix's total (so ``privplan ledger verify``
accepts it), which keeps generation linear; the timings do not depend on those values.

For each size the script reports, in a fresh process-like state (new Session each repetition):

* ``open+spent``: ``pp.connect(..., ledger=path)`` and ``spent()`` (the chain is verified, the
  recorded total read; no mechanism is decoded);
* ``first admission``: the first query of that session, which builds the accountant from every
  recorded mechanism, then charges;
* ``next admission``: a second query in the same session (steady state).

Targets (issue: the ledger): open < 0.5 s and an admission < 50 ms at 100k entries. No
assertions: it prints a table and writes ``benchmarks/results/ledger.json``.

Run: ``python benchmarks/ledger.py [--sizes 1000 10000 100000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import privplan as pp  # noqa: E402
from _common import machine_info, write_json  # noqa: E402
from privplan.accounting.accountant import Accountant  # noqa: E402
from privplan.accounting.definitions import PureDP  # noqa: E402
from privplan.accounting.model import MechanismSpec, Partition  # noqa: E402
from privplan.analysis.regions import Region  # noqa: E402
from privplan.analysis.sets import ColumnSet  # noqa: E402
from privplan.demo.data import demo_policy_path, write_demo_database  # noqa: E402
from privplan.ledger import FORMAT, policy_fingerprint  # noqa: E402
from privplan.ledger_chain import ChainHead, entry_hash, root_hash  # noqa: E402
from privplan.ledger_codec import encode_cost, encode_mechanism  # noqa: E402

DATA = Path(__file__).parent / ".data"
HOSPITALS = "ABCD"
DEPARTMENTS = ["cardiology", "emergency", "oncology", "orthopedics", "pediatrics"]
EPS = PureDP(0.00001)


def workload(n: int, seed: int = 7) -> list[tuple[str, list[MechanismSpec]]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        qid = f"q{i + 1}"
        k = rng.random()
        if k < 0.6:
            h, a = rng.choice(HOSPITALS), rng.randrange(100)
            sql = f"SELECT COUNT(*) FROM visits WHERE hospital = '{h}' AND age = {a}"
            region = Region.box(hospital=ColumnSet.points([h]), age=ColumnSet.points([a]))
            mechs = [MechanismSpec(f"{qid}.c0_m0", "visits", region, EPS, None, "COUNT(*)")]
        elif k < 0.8:
            lo = rng.randrange(90)
            sql = (f"SELECT department, COUNT(*) FROM visits WHERE age BETWEEN {lo} AND "
                   f"{lo + 10} GROUP BY department")
            region = Region.box(age=ColumnSet.interval(lo, lo + 10),
                                department=ColumnSet.points(DEPARTMENTS))
            part = Partition(("department",), ("department",))
            mechs = [MechanismSpec(f"{qid}.c0_m0", "visits", region, EPS, part, "COUNT(*)")]
        else:
            lo = rng.randrange(90)
            sql = f"SELECT SUM(cost) FROM visits WHERE age >= {lo}"
            region = Region.box(age=ColumnSet.interval(lo, 100),
                                cost=ColumnSet.interval(0, 20000))
            mechs = [MechanismSpec(f"{qid}.c0_m0", "visits", region, EPS, None, "SUM(cost)")]
        out.append((sql, mechs))
    return out


def build(path: Path, n: int, policy: pp.Policy, budget: PureDP) -> None:
    """Write a ledger of ``n`` entries with a valid chain, in one transaction."""
    entries = workload(n)
    total = Accountant({"visits": policy.table("visits").table_model()}, PureDP).admit(
        [m for _, ms in entries for m in ms]).cost
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    with pp.connect(":memory:", policy=policy, budget=budget, ledger=tmp):
        pass  # creates the file and records budget, policy and root
    con = sqlite3.connect(tmp)
    budget_json = json.dumps(encode_cost(budget))
    head = ChainHead(0, root_hash(FORMAT, budget_json, policy_fingerprint(policy)))
    total_json = json.dumps(encode_cost(total))
    zero_json = json.dumps(encode_cost(PureDP(0)))
    rows = []
    for i, (sql, mechs) in enumerate(entries, start=1):
        fields = (i, f"q{i}", sql, float(i), total_json if i == 1 else zero_json, total_json,
                  json.dumps([encode_mechanism(m) for m in mechs]))
        h = entry_hash(head.hash, fields)
        rows.append((*fields, h))
        head = ChainHead(i, h)
    con.executemany("INSERT INTO entries (seq, query_id, sql, time, marginal, total_after, "
                    "mechanisms, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.execute("INSERT OR REPLACE INTO meta VALUES ('head_seq', ?)", (str(head.seq),))
    con.execute("INSERT OR REPLACE INTO meta VALUES ('head_hash', ?)", (head.hash,))
    con.commit()
    con.close()
    tmp.rename(path)


def measure(n: int, repeat: int, db: Path, policy: pp.Policy) -> dict[str, object]:
    budget = PureDP(1000)
    path = DATA / f"ledger_{n}.sqlite"
    if not path.exists():
        t0 = time.perf_counter()
        build(path, n, policy, budget)
        print(f"  built {n:,} entries in {time.perf_counter() - t0:.1f} s", flush=True)
    opens, firsts, nexts = [], [], []
    for r in range(repeat):
        work = DATA / f"ledger_{n}.run.sqlite"
        work.write_bytes(path.read_bytes())  # each repetition charges its own copy
        t0 = time.perf_counter()
        sess = pp.connect(db, policy=policy, budget=budget, ledger=work)
        sess.spent()
        t1 = time.perf_counter()
        sess.sql(f"SELECT COUNT(*) FROM visits WHERE age = {200 + r}", epsilon=0.001)
        t2 = time.perf_counter()
        sess.sql(f"SELECT COUNT(*) FROM visits WHERE age = {300 + r}", epsilon=0.001)
        t3 = time.perf_counter()
        sess.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(work) + suffix).unlink(missing_ok=True)
        opens.append(t1 - t0)
        firsts.append(t2 - t1)
        nexts.append(t3 - t2)
    return {"entries": n, "open_spent_s": statistics.median(opens),
            "first_admission_s": statistics.median(firsts),
            "next_admission_ms": 1000 * statistics.median(nexts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "ledger.json"))
    args = parser.parse_args()
    DATA.mkdir(exist_ok=True)
    db = DATA / "ledger_demo.duckdb"
    if not db.exists():
        write_demo_database(db, rows=2_000)
    policy = pp.Policy.from_yaml(demo_policy_path())
    rows = []
    for n in args.sizes:
        rows.append(measure(n, args.repeat, db, policy))
        print(f"  {n:>9,} entries: open+spent {rows[-1]['open_spent_s']:.3f} s, first admission "
              f"{rows[-1]['first_admission_s']:.2f} s, next {rows[-1]['next_admission_ms']:.1f} ms",
              flush=True)
    print(f"\n{'entries':>9}  {'open+spent s':>12}  {'first admission s':>17}  "
          f"{'next admission ms':>17}")
    for r in rows:
        print(f"{r['entries']:>9,}  {r['open_spent_s']:>12.3f}  {r['first_admission_s']:>17.2f}  "
              f"{r['next_admission_ms']:>17.1f}")
    print("targets (reported, not asserted): open < 0.5 s and an admission < 50 ms at 100k")
    write_json(Path(args.out), {"machine": machine_info(), "rows": rows})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
