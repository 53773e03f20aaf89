"""The durable ledger: persistence, atomic check-and-charge across processes, crash safety, and
refusal to open (never reset) a damaged file."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("ledger") / "d.duckdb", rows=2_000)


def _session(db: Path, ledger: Path, budget: object = None) -> pp.Session:
    return pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()),
                      budget=budget or pp.PureDP(2), ledger=ledger)


def test_spent_budget_survives_a_restart(db: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    with _session(db, ledger) as s:
        s.sql("SELECT COUNT(*) FROM visits WHERE age < 18", epsilon=0.5)
        s.sql("SELECT COUNT(*) FROM visits WHERE age >= 65", epsilon=0.5)  # disjoint: +0
        s.sql("SELECT COUNT(*) FROM visits", epsilon=0.25)
    with _session(db, ledger) as s:
        assert s.spent() == pp.PureDP(0.75)
        assert [e.query_id for e in s.ledger.entries()] == ["q1", "q2", "q3"]
        assert s.ledger.entries()[1].marginal == pp.PureDP(0)
        # the reloaded regions still compose: another disjoint query is free
        assert s.sql("SELECT COUNT(*) FROM visits WHERE age BETWEEN 18 AND 64",
                     epsilon=0.5).cost == pp.PureDP(0)


def test_a_ledger_keeps_its_budget_and_policy(db: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    _session(db, ledger).close()
    with pytest.raises(pp.LedgerError, match="budget ε=2"):
        _session(db, ledger, pp.PureDP(3))
    d = pp.Policy.from_yaml(demo_policy_path()).to_dict()
    d["tables"]["visits"]["neighbourhood"] = "replace"
    with pytest.raises(pp.LedgerError, match="different policy"):
        pp.connect(db, policy=pp.Policy.from_dict(d), budget=pp.PureDP(2), ledger=ledger)


@pytest.mark.invariant(9)
@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "half"])
def test_damaged_ledger_is_refused_and_untouched(db: Path, tmp_path: Path, damage: str) -> None:
    ledger = tmp_path / "l.sqlite"
    with _session(db, ledger) as s:
        for i in range(20):
            s.sql(f"SELECT COUNT(*) FROM visits WHERE age = {i}", epsilon=0.01)
    for suffix in ("-wal", "-shm"):
        Path(str(ledger) + suffix).unlink(missing_ok=True)
    data = ledger.read_bytes()
    damaged = {"truncate": data[:100], "garbage": b"x" * len(data), "empty": b"",
               "half": data[: len(data) // 2]}[damage]
    ledger.write_bytes(damaged)
    with pytest.raises(pp.LedgerError) as err:
        _session(db, ledger)
    assert "never resets" in str(err.value) or "never reset" in str(err.value)
    assert ledger.read_bytes() == damaged, "a damaged ledger must be left as it was"


WORKER = textwrap.dedent("""
    import sys
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    db, ledger = sys.argv[1], sys.argv[2]
    sess = pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()),
                      budget=pp.PureDP(5), ledger=ledger)
    sess.ledger.checkpoint_every = 4  # the racers also race to write checkpoints
    ok = 0
    for _ in range(50):
        try:
            sess.sql("SELECT COUNT(*) FROM visits", epsilon=0.1)
            ok += 1
        except pp.BudgetExceededError:
            pass
    print(ok)
""")


@pytest.mark.invariant(9)
@pytest.mark.slow
def test_processes_racing_on_one_ledger_never_exceed_the_budget(db: Path, tmp_path: Path) -> None:
    """8 processes x 50 queries at ε = 0.1 against ε = 5: exactly 50 are admitted."""
    ledger = tmp_path / "race.sqlite"
    with pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(5),
                    ledger=ledger):
        pass  # create it once so all workers agree on budget and policy
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(db), str(ledger)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    admitted = 0
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        admitted += int(out.strip())
    assert admitted == 50
    with pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(5),
                    ledger=ledger) as s:
        assert s.spent() == pp.PureDP(5)
        assert len(s.ledger.entries()) == 50
        assert s.ledger.checkpoint() is not None
        assert s.accountant.total.cost == pp.PureDP(5)  # resumed from the checkpoint


KILLED = textwrap.dedent("""
    import os, signal, sys
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    db, ledger = sys.argv[1], sys.argv[2]
    sess = pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()),
                      budget=pp.PureDP(2), ledger=ledger)
    def die(sql):  # the engine is reached only after the charge is committed
        os.kill(os.getpid(), signal.SIGKILL)
    sess.engine.run = die
    sess.sql("SELECT COUNT(*) FROM visits", epsilon=0.5)
    print("released")  # never reached
""")


@pytest.mark.invariant(3)
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX only")
def test_killed_between_charge_and_return_keeps_the_charge(db: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "killed.sqlite"
    p = subprocess.run([sys.executable, "-c", KILLED, str(db), str(ledger)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL
    assert "released" not in p.stdout
    with _session(db, ledger) as s:
        assert s.spent() == pp.PureDP(0.5)
        assert len(s.ledger.entries()) == 1


def test_explain_shows_disjoint_savings_and_overlap(db: Path, tmp_path: Path) -> None:
    with _session(db, tmp_path / "l.sqlite") as s:
        s.sql("SELECT COUNT(*) FROM visits WHERE department = 'pediatrics'", epsilon=0.5)
        s.sql("SELECT COUNT(*) FROM visits WHERE department = 'oncology'", epsilon=0.5)
        free = s.explain("SELECT COUNT(*) FROM visits WHERE department = 'cardiology'",
                         epsilon=0.4)
        assert free.marginal == pp.PureDP(0)
        assert "disjoint from q1, q2" in str(free)
        pays = s.explain("SELECT COUNT(*) FROM visits WHERE age < 18", epsilon=0.4)
        assert pays.marginal == pp.PureDP(0.4)
        assert pays.projected_total == pp.PureDP(0.9)
        assert "may overlap q1, q2" in str(pays)
        assert pays.to_dict()["marginal_cost"] == "ε=0.4"


def test_a_read_inside_a_charge_does_not_wait_for_itself(db: Path, tmp_path: Path) -> None:
    """The ledger's lock is re-entrant: reading entries while the same thread holds a charging
    transaction returns (it once waited forever: a PLD session's explanation did exactly that
    on a ledger restored from its checkpoint)."""
    import threading

    path = tmp_path / "l.sqlite"
    with pp.connect(db, policy=demo_policy_path(), budget=pp.PureDP(3), ledger=path) as s:
        s.sql("SELECT COUNT(*) FROM visits", epsilon=0.5)
        ledger = s.ledger
        got: dict[str, object] = {}

        def charge_and_read() -> None:
            with ledger.charging():
                got["specs"] = ledger.mechanisms_through(1)
                got["next"] = ledger.next_query_id()

        worker = threading.Thread(target=charge_and_read, daemon=True)
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), "a read inside a charge waited for the charge's own lock"
        assert len(got["specs"]) == 1 and got["next"] == "q2"  # type: ignore[arg-type]
