"""Edits of a ledger file that compute no hash, rollback to an older copy or another ledger,
files overwritten under an open session, backups, the owner key and seal, and the migration of
a ledger written by the previous format. Real files, edited with SQLite or copied with the OS."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_files import edit_ledger

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger import FORMAT, SQLiteLedger
from privplan.ledger.tools import backup_ledger, seal_ledger
from privplan.ledger.verify import verify_ledger

POLICY = pp.Policy.from_yaml(demo_policy_path())
KEY = "an owner key of thirty-two bytes"
FIXTURE = Path(__file__).parent / "fixtures" / "ledgers" / "format2.sqlite"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("tamper") / "d.duckdb", rows=500)


def _session(db: Path, ledger: Path, budget: float = 5) -> pp.Session:
    return pp.connect(db, policy=POLICY, budget=pp.PureDP(budget), ledger=ledger)


def _charge(db: Path, ledger: Path, ages: range, epsilon: float = 0.01) -> pp.PureDP:
    """Overlapping charges (each adds): ``age >= a`` for each a."""
    with _session(db, ledger) as s:
        for a in ages:
            s.sql(f"SELECT COUNT(*) FROM visits WHERE age >= {a}", epsilon=epsilon)
        return s.spent()


def _refused(db: Path, ledger: Path, match: str) -> None:
    """A session refuses the file, ``ledger verify`` finds it, and the file is left as it is."""
    before = ledger.read_bytes()
    with pytest.raises(pp.LedgerError, match=match):
        _session(db, ledger).close()
    result = verify_ledger(ledger)
    assert not result.ok and result.findings, result
    assert ledger.read_bytes() == before


def _head(ledger: Path) -> dict[str, str]:
    con = sqlite3.connect(ledger)
    try:
        return dict(con.execute("SELECT key, value FROM meta"))
    finally:
        con.close()


# ------------------------------------------------------------------ edits that compute no hash


@pytest.mark.invariant(9)
@pytest.mark.parametrize("k", [1, 3])
def test_dropping_the_last_entries_and_copying_an_earlier_hash_is_refused(
        db: Path, tmp_path: Path, k: int) -> None:
    ledger = tmp_path / "l.sqlite"
    _charge(db, ledger, range(6))
    con = sqlite3.connect(ledger)
    (kept,) = con.execute("SELECT hash FROM entries WHERE seq = ?", (6 - k,)).fetchone()
    con.execute("DELETE FROM entries WHERE seq > ?", (6 - k,))
    con.execute("UPDATE meta SET value = ? WHERE key = 'head_seq'", (str(6 - k),))
    con.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (kept,))
    con.commit()
    con.close()
    _refused(db, ledger, "last entry .* does not match its check value")


@pytest.mark.invariant(9)
def test_a_format_renamed_to_the_previous_one_is_refused_not_migrated(db: Path,
                                                                      tmp_path: Path) -> None:
    """Format 2 is migrated on open, after verifying it under format 2's rules: a format-3
    file relabelled does not verify under them (its root and hashes are format 3's)."""
    ledger = tmp_path / "l.sqlite"
    _charge(db, ledger, range(4))
    edit_ledger(ledger, "UPDATE meta SET value = 'privplan-ledger-2' WHERE key = 'format'")
    edit_ledger(ledger, "UPDATE entries SET total_after = ? WHERE seq = 4",
                json.dumps({"kind": "PureDP", "weights": ["1/100"]}))
    _refused(db, ledger, "was changed")


@pytest.mark.parametrize("edit", ["a damaged byte", "another policy", "no policy record",
                                  "no head check", "no ledger id", "another ledger id"])
def test_the_policy_record_and_the_identity_are_bound_to_the_chain(db: Path, tmp_path: Path,
                                                                   edit: str) -> None:
    ledger = tmp_path / "l.sqlite"
    _charge(db, ledger, range(2))
    if edit == "a damaged byte":  # (ledger verify died with a raw JSONDecodeError)
        edit_ledger(ledger, "UPDATE meta SET value = '{' || substr(value, 3) WHERE "
                    "key = 'policy_json'")
    elif edit == "another policy":
        edit_ledger(ledger, "UPDATE meta SET value = replace(value, '\"upper\": 100', "
                    "'\"upper\": 1000') WHERE key = 'policy_json'")
    elif edit == "no policy record":
        edit_ledger(ledger, "DELETE FROM meta WHERE key = 'policy_json'")
    elif edit == "no head check":
        edit_ledger(ledger, "DELETE FROM meta WHERE key = 'head_check'")
    elif edit == "no ledger id":
        edit_ledger(ledger, "DELETE FROM meta WHERE key = 'ledger_id'")
    else:
        edit_ledger(ledger, "UPDATE meta SET value = ? WHERE key = 'ledger_id'", "ab" * 16)
    _refused(db, ledger, "was changed")
    p = subprocess.run([sys.executable, "-m", "privplan.cli", "ledger", "verify", str(ledger)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "PROBLEMS FOUND" in p.stdout


# ------------------------------------------------------------------ overwritten under a session


@pytest.mark.invariant(9)
@pytest.mark.parametrize("how", ["another ledger", "an older copy", "truncated", "emptied"])
def test_a_file_overwritten_in_place_under_an_open_session_is_refused(
        db: Path, tmp_path: Path, how: str) -> None:
    """Same inode, new content: SQLite keeps the pages it cached and would have charged on.
    The session refuses before the charge, and spends nothing."""
    ledger, other = tmp_path / "l.sqlite", tmp_path / "other.sqlite"
    _charge(db, other, range(1))
    older = tmp_path / "older.sqlite"
    with _session(db, ledger) as s:
        for a in range(3):
            s.sql(f"SELECT COUNT(*) FROM visits WHERE age >= {a}", epsilon=0.01)
            if a == 0:
                backup_ledger(ledger, older)
        inode = os.stat(ledger).st_ino
        data = {"another ledger": other.read_bytes(), "an older copy": older.read_bytes(),
                "truncated": ledger.read_bytes()[:4096], "emptied": b""}[how]
        with open(ledger, "r+b") as f:
            f.write(data)
            f.truncate()
        assert os.stat(ledger).st_ino == inode
        with pytest.raises(pp.LedgerError, match="no longer the file this session opened"):
            s.sql("SELECT COUNT(*) FROM visits", epsilon=0.01)
    assert ledger.read_bytes() == data


# ------------------------------------------------------------------ backups and rollback


def test_a_backup_taken_during_a_session_restores_the_exact_spent(db: Path,
                                                                  tmp_path: Path) -> None:
    ledger, copy = tmp_path / "l.sqlite", tmp_path / "backup.sqlite"
    with _session(db, ledger) as s:
        for a in range(12):
            s.sql(f"SELECT COUNT(*) FROM visits WHERE age >= {a}", epsilon=0.01)
        spent = s.spent()
        assert backup_ledger(ledger, copy) == (12, spent)  # (the session is still open)
        s.sql("SELECT COUNT(*) FROM visits", epsilon=0.01)
    with pytest.raises(pp.LedgerError, match="exists"):
        backup_ledger(ledger, copy)
    shutil.copy(copy, ledger)
    with _session(db, ledger) as s:
        assert s.spent() == spent
    assert verify_ledger(ledger).ok


def test_a_plain_copy_between_charges_of_a_copyable_ledger_misses_nothing(
        db: Path, tmp_path: Path) -> None:
    """``durability="copyable"``: each charge ends with the WAL copied into the file, so a
    ``cp`` of the file alone taken while a session is open (between its charges) holds every
    committed charge; it used to miss what was still in the WAL (restored: spent 0.12 -> 0.04,
    and verify said OK). (The default, ``"full"``, leaves that copy to SQLite: see the next
    test.)"""
    ledger, copy = tmp_path / "l.sqlite", tmp_path / "copy.sqlite"
    led = SQLiteLedger(ledger, durability="copyable")
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(5), ledger=led) as s:
        for a in range(12):
            s.sql(f"SELECT COUNT(*) FROM visits WHERE age >= {a}", epsilon=0.01)
        spent = s.spent()
        shutil.copy(ledger, copy)  # (the -wal file is not copied)
        s.sql("SELECT COUNT(*) FROM visits", epsilon=0.01)
    with _session(db, copy) as s:
        assert s.spent() == spent == pp.PureDP(0.12)
    assert verify_ledger(copy).ok


def test_the_default_ledger_is_whole_in_its_backup_and_in_its_file_once_closed(
        db: Path, tmp_path: Path) -> None:
    """``durability="full"`` (the default) flushes each charge into the WAL only: a plain copy
    of the main file alone while a session is open may miss the newest charges, which is why
    copies are made with ``privplan ledger backup`` (WAL included). Once the last session
    closes, SQLite copies the WAL into the file, and the file alone holds every charge."""
    ledger, backup, copy = (tmp_path / n for n in ("l.sqlite", "b.sqlite", "c.sqlite"))
    with _session(db, ledger) as s:
        for a in range(12):
            s.sql(f"SELECT COUNT(*) FROM visits WHERE age >= {a}", epsilon=0.01)
        spent = s.spent()
        assert Path(f"{ledger}-wal").stat().st_size > 0  # (the newest charges are there)
        assert backup_ledger(ledger, backup) == (12, spent)
    assert not Path(f"{ledger}-wal").exists()
    shutil.copy(ledger, copy)
    for path in (backup, copy):
        with _session(db, path) as s:
            assert s.spent() == spent == pp.PureDP(0.12)
        assert verify_ledger(path).ok


def test_without_the_key_an_older_copy_or_another_ledger_is_indistinguishable(
        db: Path, tmp_path: Path) -> None:
    """What the chain alone cannot say (DESIGN.md §6): an older copy is a valid chain, and so
    is another ledger with the same budget and policy. Documented, and closed by the key."""
    ledger, older, other = tmp_path / "l.sqlite", tmp_path / "older.sqlite", tmp_path / "o.sqlite"
    _charge(db, ledger, range(2))
    shutil.copy(ledger, older)
    _charge(db, ledger, range(2, 5))
    _charge(db, other, range(1))
    for copy, spent in ((older, pp.PureDP(0.02)), (other, pp.PureDP(0.01))):
        shutil.copy(copy, ledger)
        with _session(db, ledger) as s:
            assert s.spent() == spent
        assert verify_ledger(ledger).ok


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVPLAN_LEDGER_KEY", KEY)


@pytest.mark.invariant(9)
@pytest.mark.usefixtures("keyed")
@pytest.mark.parametrize("what", ["an older copy", "another ledger", "truncated and rehashed",
                                  "older copy and its seal elsewhere"])
def test_with_the_owner_key_rollback_is_refused(db: Path, tmp_path: Path, what: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = tmp_path / "l.sqlite"
    if what == "older copy and its seal elsewhere":
        seals = tmp_path / "seals"
        seals.mkdir()
        monkeypatch.setenv("PRIVPLAN_LEDGER_SEAL_DIR", str(seals))
    _charge(db, ledger, range(2))
    older = tmp_path / "older.sqlite"
    shutil.copy(ledger, older)
    _charge(db, ledger, range(2, 5))
    if what in ("an older copy", "older copy and its seal elsewhere"):
        shutil.copy(older, ledger)
        match = "rolled back"
    elif what == "another ledger":
        other = tmp_path / "other.sqlite"
        _charge(db, other, range(1))
        shutil.copy(other, ledger)
        match = "not the ledger its seal .* names"
    else:  # the chain recomputed from the root: whoever does so has no key for the MAC
        from privplan.ledger.chain import ChainHead, head_check

        con = sqlite3.connect(ledger)
        meta = dict(con.execute("SELECT key, value FROM meta"))
        (h,) = con.execute("SELECT hash FROM entries WHERE seq = 2").fetchone()
        con.execute("DELETE FROM entries WHERE seq > 2")
        for k, v in (("head_seq", "2"), ("head_hash", h),
                     ("head_check", head_check(meta["root"], ChainHead(2, h)))):
            con.execute("UPDATE meta SET value = ? WHERE key = ?", (v, k))
        con.commit()
        con.close()
        match = "not the one the owner key sealed"
    _refused(db, ledger, match)


@pytest.mark.usefixtures("keyed")
def test_the_owner_adopts_a_ledger_under_the_key(db: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger kept before the key (or restored on purpose) looks like a rollback until the
    owner seals it; a process without the key may read a keyed ledger but not charge it."""
    ledger = tmp_path / "l.sqlite"
    monkeypatch.delenv("PRIVPLAN_LEDGER_KEY")
    spent = _charge(db, ledger, range(3))
    monkeypatch.setenv("PRIVPLAN_LEDGER_KEY", KEY)
    _refused(db, ledger, "not kept under the owner key")
    assert seal_ledger(ledger) == 3
    assert _charge(db, ledger, range(3, 4)) == spent + pp.PureDP(0.01)
    Path(str(ledger) + ".seal").unlink()
    _refused(db, ledger, "seal .* is missing")
    seal_ledger(ledger)
    assert verify_ledger(ledger).ok and verify_ledger(ledger).keyed
    monkeypatch.delenv("PRIVPLAN_LEDGER_KEY")
    with _session(db, ledger) as s:
        assert s.spent() == spent + pp.PureDP(0.01)
        with pytest.raises(pp.LedgerError, match="kept under an owner key"):
            s.sql("SELECT COUNT(*) FROM visits", epsilon=0.01)
    assert verify_ledger(ledger).ok and not verify_ledger(ledger).keyed


# ------------------------------------------------------------------ the previous format


def test_a_ledger_written_by_the_previous_format_is_verified_then_migrated(
        db: Path, tmp_path: Path) -> None:
    """``fixtures/ledgers/format2.sqlite`` was written by privplan's code before format 3
    (9 entries, budget ε=5, a checkpoint at entry 8). ``ledger verify`` reads it as it is;
    the first session verifies it whole and migrates it, keeping what it spent."""
    ledger = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, ledger)
    result = verify_ledger(ledger)
    assert result.ok and result.format == "privplan-ledger-2" and result.entries == 9
    assert ledger.read_bytes() == FIXTURE.read_bytes()
    with _session(db, ledger) as s:
        assert s.spent() == pp.PureDP(0.6)
        assert [e.query_id for e in s.ledger.entries()] == [f"q{i}" for i in range(1, 10)]
    assert _head(ledger)["format"] == FORMAT
    led = SQLiteLedger(ledger)
    assert led.checkpoint() is not None and led.checkpoint()[0] == 8  # (bound to the new chain)
    led.close()
    with _session(db, ledger) as s:
        assert s.accountant.total.cost == pp.PureDP(0.6)  # (resumed from the checkpoint)
        assert s.sql("SELECT COUNT(*) FROM visits WHERE age = 7", epsilon=0.05).cost \
            == pp.PureDP(0)
    result = verify_ledger(ledger)
    assert result.ok and result.format == FORMAT and result.entries == 10


@pytest.mark.usefixtures("keyed")
def test_with_the_owner_key_a_ledger_of_the_previous_format_is_adopted_by_the_owner(
        db: Path, tmp_path: Path) -> None:
    """Format 2 had no seal: a keyed session cannot tell it from a rolled-back file, so it
    refuses it (and leaves it as it was); the owner's seal verifies, migrates and seals it."""
    ledger = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, ledger)
    with pytest.raises(pp.LedgerError, match="seal .* is missing"):
        _session(db, ledger).close()
    assert _head(ledger)["format"] == "privplan-ledger-2"  # (the migration was rolled back)
    assert seal_ledger(ledger) == 9
    with _session(db, ledger) as s:
        assert s.spent() == pp.PureDP(0.6)
    assert verify_ledger(ledger).ok and verify_ledger(ledger).keyed


def test_a_format_2_ledger_edited_before_migration_is_refused(db: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, ledger)
    edit_ledger(ledger, "UPDATE entries SET total_after = ? WHERE seq = 9",
                json.dumps({"kind": "PureDP", "weights": ["1/100"]}))
    _refused(db, ledger, "was changed")


def test_the_ledger_commands(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """``privplan ledger migrate|backup|verify|seal`` end to end."""
    from privplan.cli import main

    monkeypatch.delenv("PRIVPLAN_LEDGER_KEY", raising=False)
    ledger, copy = tmp_path / "old.sqlite", tmp_path / "copy.sqlite"
    shutil.copy(FIXTURE, ledger)
    assert main(["ledger", "migrate", str(ledger)]) == 0
    assert "migrated" in capsys.readouterr().out and _head(ledger)["format"] == FORMAT
    assert main(["ledger", "migrate", str(ledger)]) == 0
    assert "already" in capsys.readouterr().out
    assert main(["ledger", "backup", str(ledger), str(copy)]) == 0
    assert "9 entries, spent ε=0.6" in capsys.readouterr().out
    assert main(["ledger", "verify", str(copy)]) == 0
    assert "no owner key" in capsys.readouterr().out
    monkeypatch.setenv("PRIVPLAN_LEDGER_KEY", KEY)
    assert main(["ledger", "verify", str(copy)]) == 1  # (kept without the key so far)
    assert main(["ledger", "seal", str(copy)]) == 0
    assert "entry 9" in capsys.readouterr().out
    assert main(["ledger", "verify", str(copy)]) == 0
    assert "head MAC and seal checked" in capsys.readouterr().out
    with _session(db, copy) as s:
        assert s.spent() == pp.PureDP(0.6)


@pytest.mark.usefixtures("keyed")
def test_a_backup_under_the_owner_key_verifies_and_putting_it_back_is_refused(
        db: Path, tmp_path: Path) -> None:
    """`privplan ledger backup` under the key: the copy is sealed at its own path (it used to
    fail its own verification: a keyed ledger without a seal), and its bytes put back at the
    ledger's path are refused as a rollback until the owner adopts them."""
    ledger, backup = tmp_path / "l.sqlite", tmp_path / "l.backup.sqlite"
    spent = _charge(db, ledger, range(2))
    assert backup_ledger(ledger, backup) == (2, spent)
    assert verify_ledger(backup).ok
    _charge(db, ledger, range(2, 4))
    shutil.copy(backup, ledger)
    _refused(db, ledger, "rolled back")
    seal_ledger(ledger)
    with _session(db, ledger) as s:
        assert s.spent() == spent
