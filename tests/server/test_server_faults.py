"""Faults: the ``privplan serve`` process killed with SIGKILL while clients run DP queries, twenty
times at seeded random moments, restarted on the same ledger each time.

After every kill the ledger verifies (hash chain, recorded and recomposed totals); no answer a
client received is missing from the ledger (each query has a unique alias, so a received answer
names its own ledger entry; the ledger may hold charges whose answers were lost, never fewer);
and the restarted server continues from the ledger (its spent total is the ledger's, and a query
after the restart is charged on top)."""

from __future__ import annotations

import itertools
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest

from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger.store import SQLiteLedger
from privplan.ledger.verify import verify_ledger
from privplan.server.accounts import analysts_folder

SRC = str(Path(__file__).resolve().parents[2] / "src")
SEED = 20261129
KILLS = 20
CLIENTS = 3
EPSILON = Fraction(1, 8)


def _start(files: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A ``privplan serve`` process on a free port; its stderr goes to ``log``."""
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "privplan.cli", "serve", "--database", files["db"],
             "--policy", files["policy"], "--ledger", files["ledger"], "--users", files["users"],
             "--listen", "127.0.0.1:0", "--total-epsilon", "100000"],
            env=dict(os.environ, PYTHONPATH=SRC), stderr=err, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"serving on 127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return proc, int(found.group(1))
        assert proc.poll() is None, log.read_text(errors="replace")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the server did not start: " + log.read_text(errors="replace"))


def _dsn(port: int) -> str:
    return f"host=127.0.0.1 port={port} user=alice dbname=demo sslmode=disable"


def _client(port: int, names: itertools.count[int], received: list[str],
            stop: threading.Event) -> None:
    """DP queries with unique aliases until the server dies; the aliases of answers received."""
    try:
        with psycopg.connect(_dsn(port), password="pw", autocommit=True,
                             connect_timeout=10) as con:
            con.execute(f"SET privplan.epsilon = {float(EPSILON)}")
            while not stop.is_set():
                alias = f"q{next(names)}"
                row = con.execute(f"SELECT COUNT(*) AS {alias} FROM visits").fetchone()
                assert row is not None
                received.append(alias)
    except psycopg.OperationalError:
        return  # the server was killed under us: what was received so far is what counts


def _ledger_state(path: str) -> tuple[Fraction, set[str], int]:
    """The ledger's recorded total (ε), the aliases its entries name, and its entry count."""
    result = verify_ledger(path)
    assert result.ok, str(result)
    store = SQLiteLedger(path)
    try:
        total = store.recorded_total()
        entries = store.entries()
    finally:
        store.close()
    aliases = {m.group(1) for e in entries for m in [re.search(r"AS (q\d+)", e.sql)] if m}
    return (Fraction(0) if total is None else Fraction(total.epsilon)), aliases, len(entries)


def _own_ledger(files: dict[str, str]) -> str:
    """alice's own ledger (the server charges it as well as the total)."""
    return str(analysts_folder(Path(files["ledger"])) / "alice.sqlite")


def _spent_shown(port: int) -> str:
    with psycopg.connect(_dsn(port), password="pw", autocommit=True) as con:
        row = con.execute("SHOW privplan.spent").fetchone()
    assert row is not None
    return str(row[0])


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, str]:
    db = write_demo_database(tmp_path / "d.duckdb", rows=500)
    users = tmp_path / "users.json"
    subprocess.run([sys.executable, "-m", "privplan.cli", "users", "add", str(users), "alice",
                    "--epsilon", "100000"], input="pw\n", text=True, check=True,
                   env=dict(os.environ, PYTHONPATH=SRC), capture_output=True)
    return {"db": str(db), "users": str(users), "policy": str(demo_policy_path()),
            "ledger": str(tmp_path / "served.ledger.sqlite"), "dir": str(tmp_path)}


def _one_round(files: dict[str, str], rng: random.Random, names: itertools.count[int],
               received: list[str], round_no: int) -> int:
    """Start the server, check it continues from the ledger, run clients, SIGKILL it."""
    before, _, count_before = (_ledger_state(files["ledger"]) if Path(files["ledger"]).exists()
                               else (Fraction(0), set(), 0))
    proc, port = _start(files, Path(files["dir"]) / f"serve{round_no}.log")
    try:
        shown = _spent_shown(port)  # the restarted server's figure is alice's own ledger's
        own_before = _ledger_state(_own_ledger(files))[0]
        assert Fraction(shown.removeprefix("ε=") or "0") == own_before, (shown, own_before)
        stop = threading.Event()
        threads = [threading.Thread(target=_client, args=(port, names, received, stop))
                   for _ in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.05, 1.0))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    after, aliases, count = _ledger_state(files["ledger"])
    assert not set(received) - aliases, sorted(set(received) - aliases)  # none uncharged
    assert after == before + EPSILON * (count - count_before)  # each entry charged on top
    own, own_aliases, own_count = _ledger_state(_own_ledger(files))
    assert not set(received) - own_aliases  # every answer received is in alice's too
    assert own == EPSILON * own_count and own_aliases <= aliases  # (the total commits first)
    return count - count_before


@pytest.mark.slow
def test_sigkill_during_queries_loses_no_charge(files: dict[str, str]) -> None:
    rng = random.Random(SEED)
    names = itertools.count()
    received: list[str] = []
    admitted = [_one_round(files, rng, names, received, n) for n in range(KILLS)]
    total, aliases, count = _ledger_state(files["ledger"])
    assert count == sum(admitted) >= len(received) > KILLS  # queries ran between the kills
    assert set(received) <= aliases
    proc, port = _start(files, Path(files["dir"]) / "final.log")
    own = _ledger_state(_own_ledger(files))[0]
    try:  # the last restart continues from the ledgers, and charges on top
        assert Fraction(_spent_shown(port).removeprefix("ε=")) == own
        with psycopg.connect(_dsn(port), password="pw", autocommit=True) as con:
            con.execute(f"SET privplan.epsilon = {float(EPSILON)}")
            con.execute("SELECT COUNT(*) AS last FROM visits").fetchone()
            spent = con.execute("SHOW privplan.spent").fetchone()
        assert spent is not None and Fraction(str(spent[0]).removeprefix("ε=")) == own + EPSILON
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert _ledger_state(files["ledger"])[0] == total + EPSILON
    print(f"faults: {KILLS} kills, {len(received)} answers received, {count} charged")
