"""The durable ledger shared by real processes: new ledgers created and charged at once, a
refusal caused by another process's charges, and processes killed in the middle of a charge.
Every process is real (multiprocessing's forkserver, or a subprocess) on a real SQLite file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from ledger_workers import SESSION, context, race

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger import SQLiteLedger
from privplan.ledger.verify import verify_ledger

pytestmark = pytest.mark.invariant(9)

POLICY = pp.Policy.from_yaml(demo_policy_path())


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("concurrency") / "d.duckdb", rows=500)


def _race(db: Path, folder: Path, processes: int, ledgers: int, charges: int = 2) -> Counter[str]:
    """``processes`` processes open each of ``ledgers`` new ledgers together and charge it
    ``charges`` times at ε = 0.01 (budget 100: no refusal is right). Returns the outcomes; every
    ledger must verify and hold exactly every charge."""
    ctx = context()
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=race, args=(str(db), str(folder), ledgers, charges, 0.01, 100.0,
                                            barrier, results)) for _ in range(processes)]
    for p in procs:
        p.start()
    outcomes: Counter[str] = Counter()
    details = []
    for _ in range(processes * ledgers):
        i, outcome, detail = results.get(timeout=600)
        outcomes[outcome] += 1
        if detail:
            details.append(f"ledger {i}: {outcome}: {detail[-300:]}")
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert outcomes == {"charged": processes * ledgers}, details[:5]
    want = Fraction(processes * charges, 100)  # every charge is the same query: they add
    for i in range(ledgers):
        path = folder / f"l{i}.sqlite"
        result = verify_ledger(path)
        assert result.ok, (i, result.findings)
        assert result.entries == processes * charges
        assert result.recorded_total.exact_epsilon == want
        assert result.recomputed_total == result.recorded_total
    return outcomes


def test_two_processes_create_and_charge_new_ledgers_together(db: Path, tmp_path: Path) -> None:
    """The reviewers' race: a session whose ledger was opened before the other process recorded
    the budget charged entry 1 off an empty chain start (8 of 20 ledgers left unusable)."""
    _race(db, tmp_path, processes=2, ledgers=20)


@pytest.mark.slow
def test_eight_processes_create_and_charge_new_ledgers_together(db: Path,
                                                                 tmp_path: Path) -> None:
    _race(db, tmp_path, processes=8, ledgers=5)


# ---------------------------------------------------------- a refusal caused by another process


class _Proc:
    """A session in its own process, one command at a time."""

    def __init__(self, db: Path, ledger: Path, budget: float) -> None:
        self.p = subprocess.Popen([sys.executable, "-c", SESSION, str(db), str(ledger),
                                   str(budget)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        assert self.read() == "ready"

    def read(self) -> str:
        assert self.p.stdout is not None
        line = self.p.stdout.readline().strip()
        if not line:
            assert self.p.stderr is not None
            raise AssertionError(self.p.stderr.read())
        return line

    def ask(self, command: str) -> str:
        assert self.p.stdin is not None
        self.p.stdin.write(command + "\n")
        self.p.stdin.flush()
        return self.read()

    def spent(self) -> Fraction:
        word, value = self.ask("spent").split(" ", 1)
        assert word == "spent", value
        return Fraction(eval(value, {"Fraction": Fraction}))  # (its repr)

    def close(self) -> None:
        for pipe in (self.p.stdin, self.p.stdout, self.p.stderr):
            if pipe is not None:
                pipe.close()
        self.p.wait(timeout=60)


def _file_total(ledger: Path) -> Fraction:
    led = SQLiteLedger(ledger)
    try:
        total = led.recorded_total()
        return Fraction(0) if total is None else total.exact_epsilon
    finally:
        led.close()


def test_a_refusal_caused_by_another_process_counts_its_charges_once(db: Path,
                                                                     tmp_path: Path) -> None:
    """The reviewers' sequence on PureDP(1): A asks 0.3; B asks 0.3, 0.3; A asks 0.3 (rightly
    refused: 1.2), then 0.05, which fits (0.95). A used to keep B's entries, read in the
    refused transaction, and admit them again: 0.05 refused as "spent ε=1.5", spent() climbing
    to 2.7 while the file held 0.9. ``spent()`` must equal the file's total at every step."""
    ledger = tmp_path / "l.sqlite"
    a, b = _Proc(db, ledger, 1.0), _Proc(db, ledger, 1.0)
    try:
        steps = [(a, "sql 0.3", "charged"), (b, "sql 0.3", "charged"),
                 (b, "sql 0.3", "charged"), (a, "sql 0.3", "BudgetExceededError"),
                 (a, "sql 0.3", "BudgetExceededError"), (a, "sql 0.05", "charged"),
                 (b, "sql 0.1", "BudgetExceededError"), (b, "sql 0.05", "charged"),
                 (a, "sql 0.01", "BudgetExceededError")]
        for who, command, want in steps:
            got = who.ask(command)
            assert got.startswith(want), (command, got)
            total = _file_total(ledger)
            assert a.spent() == total and b.spent() == total, (command, total)
        assert _file_total(ledger) == Fraction(1)
    finally:
        a.close()
        b.close()
    assert verify_ledger(ledger).ok


# --------------------------------------------------------------- killed in the middle of a charge

KILLED_MID_CHARGE = """
    import os, sys, time
    import privplan as pp
    import privplan.ledger.txn as txn
    from privplan.demo.data import demo_policy_path
    db, ledger = sys.argv[1], sys.argv[2]
    sess = pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(1),
                      ledger=ledger)
    sess.sql("SELECT COUNT(*) FROM visits WHERE age < 30", epsilon=0.25)
    append = txn.SQLiteCharging.append
    def stall(self, entry):  # between BEGIN IMMEDIATE and COMMIT, the entry written
        append(self, entry)
        print("appended", flush=True)
        time.sleep(600)
    txn.SQLiteCharging.append = stall
    sess.sql("SELECT COUNT(*) FROM visits", epsilon=0.5)
    print("released", flush=True)  # never reached
"""


def test_a_process_killed_between_begin_and_commit_leaves_no_trace(db: Path,
                                                                   tmp_path: Path) -> None:
    """SIGKILL while the charge's transaction holds the write lock with its entry written: the
    lock goes with the process, the entry was never committed, nothing was released, and the
    next sessions open, verify and charge as if it never started."""
    ledger = tmp_path / "l.sqlite"
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KILLED_MID_CHARGE), str(db),
                          str(ledger)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "appended", line + (p.stderr.read() if p.stderr else "")
    p.send_signal(signal.SIGKILL)
    out, _ = p.communicate(timeout=60)
    assert "released" not in out
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(1), ledger=ledger) as s:
        assert s.spent() == pp.PureDP(0.25)
        assert [e.query_id for e in s.ledger.entries()] == ["q1"]
        assert s.sql("SELECT COUNT(*) FROM visits", epsilon=0.5).cost == pp.PureDP(0.5)
        assert s.spent() == pp.PureDP(0.75)
    assert verify_ledger(ledger).ok


KILLED_BEFORE_SEAL = """
    import sys, time
    import privplan as pp
    import privplan.ledger.store as ledger_module
    from privplan.demo.data import demo_policy_path
    db, ledger = sys.argv[1], sys.argv[2]
    sess = pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(1),
                      ledger=ledger)
    sess.sql("SELECT COUNT(*) FROM visits WHERE age < 30", epsilon=0.25)
    def stall(*args, **kwargs):  # after the COMMIT, before the seal moves
        print("committed", flush=True)
        time.sleep(600)
    ledger_module.write_seal = stall
    sess.sql("SELECT COUNT(*) FROM visits", epsilon=0.5)
"""


def test_a_keyed_process_killed_after_its_commit_leaves_a_seal_that_lags(
        db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seal is advanced after the COMMIT: a process killed in between leaves it one entry
    behind, which is still a lower bound — the ledger opens, the charge counts, and the next
    charge advances the seal."""
    monkeypatch.setenv("PRIVPLAN_LEDGER_KEY", "an owner key of thirty-two bytes")
    ledger = tmp_path / "l.sqlite"
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KILLED_BEFORE_SEAL), str(db),
                          str(ledger)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "committed", line + (p.stderr.read() if p.stderr else "")
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    seal = json.loads(Path(str(ledger) + ".seal").read_text())
    assert seal["seq"] == 1
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(1), ledger=ledger) as s:
        assert s.spent() == pp.PureDP(0.75)
        s.sql("SELECT COUNT(*) FROM visits WHERE age > 90", epsilon=0.25)
    assert json.loads(Path(str(ledger) + ".seal").read_text())["seq"] == 3
    assert verify_ledger(ledger).ok
