"""The durable ledger's ``durability`` settings (:mod:`privplan.ledger.durability`): the SQLite
settings each one puts in effect on the ledger's connection, which is the default, how one is
chosen, and the guarantee every setting keeps — a charge that returned is on disk for a fresh
process to read even when the charging process is SIGKILLed right after it. Real SQLite files
and real processes; no mocks. (Power loss cannot be staged in a test: that part of ``"full"``
is SQLite's contract for ``synchronous=FULL`` in WAL mode, whose setting is asserted here.)"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger import SQLiteLedger
from privplan.ledger.durability import DURABILITY_ENV

POLICY = pp.Policy.from_yaml(demo_policy_path())
SETTINGS = {"full": 2, "copyable": 2, "process": 1}  # name -> SQLite's synchronous level


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("durability") / "d.duckdb", rows=500)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DURABILITY_ENV, raising=False)


def _in_effect(ledger: SQLiteLedger) -> tuple[str, int]:
    (mode,) = ledger.con.execute("PRAGMA journal_mode").fetchone()
    (level,) = ledger.con.execute("PRAGMA synchronous").fetchone()
    return str(mode), int(level)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_each_setting_is_in_effect_on_the_ledger_connection(db: Path, tmp_path: Path,
                                                            name: str) -> None:
    ledger = SQLiteLedger(tmp_path / "l.sqlite", durability=name)
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(1), ledger=ledger) as s:
        s.sql("SELECT COUNT(*) FROM visits", epsilon=0.1)
        assert s.ledger.durability.name == name
        assert _in_effect(s.ledger) == ("wal", SETTINGS[name])


def test_the_default_flushes_every_charge(db: Path, tmp_path: Path) -> None:
    """A ledger opened by its path (as ``connect(ledger=path)``, the CLI and reports do) is
    ``"full"``: WAL with ``synchronous=FULL``, whose COMMIT flushes the WAL before it returns."""
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(1), ledger=tmp_path / "l.sqlite") as s:
        assert s.ledger.durability.name == "full"
        assert s.ledger.durability.survives_power_loss
        assert _in_effect(s.ledger) == ("wal", 2)


def test_the_environment_chooses_and_a_wrong_name_is_refused_before_any_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DURABILITY_ENV, "process")
    ledger = SQLiteLedger(tmp_path / "p.sqlite")
    assert ledger.durability.name == "process" and _in_effect(ledger) == ("wal", 1)
    ledger.close()
    assert SQLiteLedger(tmp_path / "k.sqlite", durability="full").durability.name == "full"
    for bad in ("fast", "off"):
        monkeypatch.setenv(DURABILITY_ENV, bad)
        with pytest.raises(pp.LedgerError, match="unknown ledger durability"):
            SQLiteLedger(tmp_path / "x.sqlite")
    monkeypatch.delenv(DURABILITY_ENV)
    with pytest.raises(pp.LedgerError, match="'full' .* 'copyable' .* 'process'"):
        SQLiteLedger(tmp_path / "x.sqlite", durability="OFF")
    assert not (tmp_path / "x.sqlite").exists()


CHARGE_THEN_DIE = textwrap.dedent("""
    import os, signal, sys
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    from privplan.ledger import SQLiteLedger
    db, path, durability = sys.argv[1:4]
    sess = pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(2),
                      ledger=SQLiteLedger(path, durability=durability))
    sess.sql("SELECT COUNT(*) FROM visits WHERE age < 30", epsilon=0.25)
    sess.sql("SELECT COUNT(*) FROM visits", epsilon=0.5)
    os.kill(os.getpid(), signal.SIGKILL)  # right after the charge returned: no close
""")

READ = textwrap.dedent("""
    import sys
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    from privplan.ledger.verify import verify_ledger
    db, path = sys.argv[1:3]
    assert verify_ledger(path).ok
    with pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(2),
                    ledger=path) as s:
        print(s.spent().epsilon, [e.query_id for e in s.ledger.entries()])
""")


@pytest.mark.invariant(3)
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX only")
@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_a_charge_that_returned_survives_a_kill_right_after(db: Path, tmp_path: Path,
                                                            name: str) -> None:
    """Every setting: the process is SIGKILLed right after its second charge returned (no
    close, so nothing was copied into the main file at exit); a fresh process reads both
    entries and the exact total, and the chain verifies."""
    path = tmp_path / "l.sqlite"
    p = subprocess.run([sys.executable, "-c", CHARGE_THEN_DIE, str(db), str(path), name],
                       check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr
    if name != "copyable":  # (the newest charges are in the WAL, which the reader recovers)
        assert Path(f"{path}-wal").stat().st_size > 0
    r = subprocess.run([sys.executable, "-c", READ, str(db), str(path)],
                       check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0.75", "['q1',", "'q2']"]


def test_copyable_leaves_every_charge_in_the_main_file(db: Path, tmp_path: Path) -> None:
    """``"copyable"``: after each charge the main file alone holds it (read here with the WAL
    set aside, as a plain copy of the main file would be)."""
    path, copy = tmp_path / "l.sqlite", tmp_path / "c.sqlite"
    ledger = SQLiteLedger(path, durability="copyable")
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(1), ledger=ledger) as s:
        for a in range(3):
            s.sql(f"SELECT COUNT(*) FROM visits WHERE age >= {a}", epsilon=0.1)
            copy.write_bytes(path.read_bytes())  # the main file only
            con = sqlite3.connect(copy)
            try:
                (n,) = con.execute("SELECT COUNT(*) FROM entries").fetchone()
            finally:
                con.close()
            os.unlink(copy)
            assert n == a + 1
