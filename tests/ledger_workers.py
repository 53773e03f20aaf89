"""Real processes on one ledger file (the concurrency tests and ``benchmarks/ledger.py``).

``race``: N processes each open and charge a series of *new* ledgers, all starting each ledger
together (a barrier), so creation, the budget record and the first charges race. ``SESSION``:
a session in its own process, driven line by line over stdin (``sql EPS``, ``spent``), so a
test can interleave two processes' charges exactly.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

PRELOAD = ["privplan", "privplan.session.session", "privplan.ledger", "privplan.planning.costs",
           "privplan.assemble", "privplan.engines.duckdb_engine", "privplan.engines.judge",
           "duckdb", "pandas", "numpy", "sqlglot"]


def context() -> Any:
    """A forkserver context: children fork from a clean process that has imported privplan
    (fast to start, and no engine threads of the parent are forked)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def race(db: str, folder: str, ledgers: int, charges: int, epsilon: float, budget: float,
         barrier: Any, results: Any) -> None:
    """Open each of ``ledgers`` new ledgers in ``folder`` at the barrier, charge it
    ``charges`` times, and report per ledger: (index, outcome, detail)."""
    import privplan as pp
    from privplan.demo.data import demo_policy_path

    policy = pp.Policy.from_yaml(demo_policy_path())
    for i in range(ledgers):
        barrier.wait(timeout=300)
        path = Path(folder) / f"l{i}.sqlite"
        try:
            sess = pp.connect(db, policy=policy, budget=pp.PureDP(budget), ledger=path)
        except pp.PrivplanError as err:
            results.put((i, "open refused", f"{type(err).__name__}: {err}"))
            continue
        try:
            for _ in range(charges):
                sess.sql("SELECT COUNT(*) FROM visits", epsilon=epsilon)
            results.put((i, "charged", ""))
        except pp.BudgetExceededError as err:
            results.put((i, "wrongly refused", str(err)))
        except pp.PrivplanError as err:
            results.put((i, "charge failed", f"{type(err).__name__}: {err}"))
        finally:
            sess.close()


SESSION = """
import sys
import privplan as pp
from privplan.demo.data import demo_policy_path
db, ledger, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
sess = pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(budget),
                  ledger=ledger)
print("ready", flush=True)
for line in sys.stdin:
    cmd, *args = line.split()
    try:
        if cmd == "sql":
            res = sess.sql("SELECT COUNT(*) FROM visits", epsilon=float(args[0]))
            print("charged", res.cost.epsilon, flush=True)
        elif cmd == "spent":
            print("spent", repr(sess.spent().exact_epsilon), flush=True)
    except pp.PrivplanError as err:
        print(type(err).__name__, str(err).replace(chr(10), " "), flush=True)
"""
