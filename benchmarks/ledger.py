"""Durable ledger at scale: open + ``spent()``, and admissions, at 1k, 10k and 100k entries.

The ledgers hold a dashboard-like mix over the demo ``visits`` table (60% disjoint slices
``hospital = H AND age = a``, 20% GROUP BY department over an age band, 20% overlapping
``SUM(cost) WHERE age >= a``), written directly in one transaction with a valid hash chain
(cached in ``benchmarks/.data/``). Every entry records the final composed total of the whole
ledger as its total: an over-statement of each prefix's total (so ``privplan ledger verify``
accepts it), which keeps generation linear; the timings do not depend on those values.

For each size the script reports, in a fresh process-like state (new Session each repetition):

* ``open+spent``: ``pp.connect(..., ledger=path)`` and ``spent()`` (the chain is verified from
  the checkpoint's entry on, the recorded total read; no mechanism is decoded);
* ``first query``: the first query of that session, whole (plan, charge, run, noise), which
  builds the accountant (from the checkpoint plus the entries after it) and charges;
* ``first admission``: the accounting part of it (accountant build, preview, admission);
* ``next query`` / ``next admission``: a second query in the same session (steady state);
* ``no checkpoint``: the first query of a session on the same ledger without its checkpoint
  (every recorded mechanism decoded and composed: the cost a ledger written by an earlier
  version pays once, until its first charge writes a checkpoint);
* ``stale``: the first query of a new session when the checkpoint is as old as it gets
  (``CHECKPOINT_EVERY - 1`` entries behind: they are decoded and admitted).

The cached ledgers are written without a checkpoint; a first session on each writes one (its
first charge), as any session does every ``CHECKPOINT_EVERY`` entries.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import machine_info, write_json

import privplan as pp
from privplan.accounting.accountant import Accountant
from privplan.accounting.definitions import GDP, PureDP
from privplan.accounting.gdp_budget import approx_to_gdp
from privplan.accounting.model import MechanismSpec, Partition
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger import FORMAT, policy_fingerprint
from privplan.ledger_chain import ChainHead, entry_hash, root_hash
from privplan.ledger_checkpoint import CHECKPOINT_EVERY
from privplan.ledger_codec import encode_cost, encode_mechanism

DATA = Path(__file__).parent / ".data"
HOSPITALS = "ABCD"
DEPARTMENTS = ["cardiology", "emergency", "oncology", "orthopedics", "pediatrics"]
EPS = PureDP(0.00001)
MU = GDP(0.00001)


class Mode:
    """The session's accounting: additive ε (PureDP) or PLD (an (ε, δ) budget held as μ-GDP,
    ``composition="pld"``: the ledger then records μ per mechanism)."""

    def __init__(self, composition: str) -> None:
        self.pld = composition == "pld"
        self.cost: Any = MU if self.pld else EPS
        self.kind: Any = GDP if self.pld else PureDP
        self.session_budget: Any = pp.ApproxDP(1000, 1e-6) if self.pld else PureDP(1000)
        self.ledger_budget: Any = (approx_to_gdp(1000, 1e-6) if self.pld
                                   else self.session_budget)
        self.query: dict[str, Any] = {"mu": 0.001} if self.pld else {"epsilon": 0.001}
        self.connect: dict[str, Any] = {"composition": composition}


def workload(n: int, cost: Any = EPS, seed: int = 7) -> list[tuple[str, list[MechanismSpec]]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        qid = f"q{i + 1}"
        k = rng.random()
        if k < 0.6:
            h, a = rng.choice(HOSPITALS), rng.randrange(100)
            sql = f"SELECT COUNT(*) FROM visits WHERE hospital = '{h}' AND age = {a}"
            region = Region.box(hospital=ColumnSet.points([h]), age=ColumnSet.points([a]))
            mechs = [MechanismSpec(f"{qid}.c0_m0", "visits", region, cost, None, "COUNT(*)")]
        elif k < 0.8:
            lo = rng.randrange(90)
            sql = (f"SELECT department, COUNT(*) FROM visits WHERE age BETWEEN {lo} AND "
                   f"{lo + 10} GROUP BY department")
            region = Region.box(age=ColumnSet.interval(lo, lo + 10),
                                department=ColumnSet.points(DEPARTMENTS))
            part = Partition(("department",), ("department",))
            mechs = [MechanismSpec(f"{qid}.c0_m0", "visits", region, cost, part, "COUNT(*)")]
        else:
            lo = rng.randrange(90)
            sql = f"SELECT SUM(cost) FROM visits WHERE age >= {lo}"
            region = Region.box(age=ColumnSet.interval(lo, 100),
                                cost=ColumnSet.interval(0, 20000))
            mechs = [MechanismSpec(f"{qid}.c0_m0", "visits", region, cost, None, "SUM(cost)")]
        out.append((sql, mechs))
    return out


def build(path: Path, n: int, policy: pp.Policy, mode: Mode) -> None:
    """Write a ledger of ``n`` entries with a valid chain, in one transaction."""
    entries = workload(n, mode.cost)
    total = Accountant({"visits": policy.table("visits").table_model()}, mode.kind).admit(
        [m for _, ms in entries for m in ms]).cost
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    with pp.connect(":memory:", policy=policy, budget=mode.session_budget, ledger=tmp,
                    **mode.connect):
        pass  # creates the file and records budget, policy and root
    con = sqlite3.connect(tmp)
    budget_json = json.dumps(encode_cost(mode.ledger_budget))
    head = ChainHead(0, root_hash(FORMAT, budget_json, policy_fingerprint(policy)))
    total_json = json.dumps(encode_cost(total))
    zero_json = json.dumps(encode_cost(mode.kind(0)))
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


def measure(n: int, repeat: int, db: Path, policy: pp.Policy,
            mode: Mode | None = None) -> dict[str, object]:
    mode = mode or Mode("additive")
    budget, q, kw = mode.session_budget, mode.query, mode.connect
    tag = "_pld" if mode.pld else ""
    path = DATA / f"ledger{tag}_{n}.sqlite"
    if not path.exists():
        t0 = time.perf_counter()
        build(path, n, policy, mode)
        print(f"  built {n:,} entries in {time.perf_counter() - t0:.1f} s", flush=True)
    work = DATA / f"ledger{tag}_{n}.run.sqlite"
    _clear(work)
    work.write_bytes(path.read_bytes())
    t0 = time.perf_counter()
    with pp.connect(db, policy=policy, budget=budget, ledger=work, **kw) as sess:
        sess.sql("SELECT COUNT(*) FROM visits WHERE age = 150", **q)  # checkpoints
    cold = time.perf_counter() - t0
    ckpt = DATA / f"ledger{tag}_{n}.ckpt.sqlite"
    _clear(ckpt)
    ckpt.write_bytes(work.read_bytes())
    # the worst case: the checkpoint as stale as it gets (CHECKPOINT_EVERY - 1 entries behind)
    with pp.connect(db, policy=policy, budget=budget, ledger=work, **kw) as sess:
        sess.ledger.checkpoint_every = 10**9
        for i in range(CHECKPOINT_EVERY - 1):
            sess.sql(f"SELECT COUNT(*) FROM visits WHERE age = {400 + i}", **q)
    stale = []
    for r in range(repeat):
        with pp.connect(db, policy=policy, budget=budget, ledger=work, **kw) as sess:
            sess.ledger.checkpoint_every = 10**9
            sess.spent()
            acc = _accounting_timer(sess)
            t0 = time.perf_counter()
            sess.sql(f"SELECT COUNT(*) FROM visits WHERE age = {900 + r}", **q)
            stale.append((time.perf_counter() - t0, acc()))
    _clear(work)
    times: dict[str, list[float]] = {k: [] for k in ("open", "first", "first_acc", "next",
                                                      "next_acc")}
    for r in range(repeat):
        work.write_bytes(ckpt.read_bytes())  # each repetition charges its own copy
        t0 = time.perf_counter()
        sess = pp.connect(db, policy=policy, budget=budget, ledger=work, **kw)
        sess.spent()
        times["open"].append(time.perf_counter() - t0)
        for key, age in (("first", 200 + r), ("next", 300 + r)):
            acc = _accounting_timer(sess)
            t0 = time.perf_counter()
            sess.sql(f"SELECT COUNT(*) FROM visits WHERE age = {age}", **q)
            times[key].append(time.perf_counter() - t0)
            times[key + "_acc"].append(acc())
        sess.close()
        _clear(work)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"entries": n, "open_spent_s": med["open"], "first_query_ms": 1000 * med["first"],
            "first_admission_ms": 1000 * med["first_acc"], "next_query_ms": 1000 * med["next"],
            "next_admission_ms": 1000 * med["next_acc"], "no_checkpoint_first_query_s": cold,
            "stale_first_query_ms": 1000 * statistics.median(q for q, _ in stale),
            "stale_first_admission_ms": 1000 * statistics.median(a for _, a in stale)}


def _clear(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def _accounting_timer(sess: pp.Session) -> Callable[[], float]:
    """Time spent in the session's accounting during the next query: building the accountant
    (checkpoint and catch-up), and the accountant's preview and admission."""
    spent = [0.0]
    depth = [0]  # only the outermost timed call counts (admissions run inside _sync)
    originals = {}

    def timed(owner: Any, name: str) -> None:
        fn = getattr(owner, name)
        originals[(owner, name)] = fn

        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            depth[0] += 1
            try:
                return fn(*a, **k)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    spent[0] += time.perf_counter() - t0
        setattr(owner, name, wrapper)

    if sess._accountant is None:
        timed(sess, "_restored")
    timed(sess, "_sync")
    timed(Accountant, "preview")
    timed(Accountant, "admit")

    def done() -> float:
        for (owner, name), fn in originals.items():
            if owner is sess:
                delattr(owner, name)
            else:
                setattr(owner, name, fn)
        return spent[0]
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--composition", choices=("additive", "pld"), default="additive",
                        help="pld: the ledger of an (ε, δ) session with PLD accounting")
    parser.add_argument("--out", default=None,
                        help="default: results/ledger.json (ledger_pld.json with --composition pld)")
    args = parser.parse_args()
    mode = Mode(args.composition)
    out = args.out or str(Path(__file__).parent / "results" / (
        "ledger_pld.json" if mode.pld else "ledger.json"))
    DATA.mkdir(exist_ok=True)
    db = DATA / "ledger_demo.duckdb"
    if not db.exists():
        write_demo_database(db, rows=2_000)
    policy = pp.Policy.from_yaml(demo_policy_path())
    rows = []
    for n in args.sizes:
        rows.append(measure(n, args.repeat, db, policy, mode))
        print(f"  {n:>9,} entries: {rows[-1]}", flush=True)
    cols = [("entries", "entries", "{:,}"), ("open+spent s", "open_spent_s", "{:.3f}"),
            ("1st query ms", "first_query_ms", "{:.1f}"),
            ("1st admission ms", "first_admission_ms", "{:.1f}"),
            ("next query ms", "next_query_ms", "{:.1f}"),
            ("next admission ms", "next_admission_ms", "{:.1f}"),
            ("no checkpoint s", "no_checkpoint_first_query_s", "{:.2f}"),
            ("stale 1st query ms", "stale_first_query_ms", "{:.1f}"),
            ("its accounting ms", "stale_first_admission_ms", "{:.1f}")]
    print("\n" + "  ".join(f"{h:>{len(h)}}" for h, _, _ in cols))
    for r in rows:
        print("  ".join(f"{f.format(r[k]):>{len(h)}}" for h, k, f in cols))
    print("targets (reported, not asserted): open < 0.5 s and an admission < 50 ms at 100k")
    write_json(Path(out), {"machine": machine_info(), "composition": args.composition,
                           "rows": rows})


if __name__ == "__main__":
    main()
