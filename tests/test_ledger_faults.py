"""The durable ledger under injected faults: a full disk at COMMIT, flipped bytes, edits,
concurrent creation, a file deleted under an open session, a read-only file, missing
directories, and killed processes. Each fault is real (a file size limit, byte flips in the
file, a removed directory, SIGKILL), not a mock."""

from __future__ import annotations

import itertools
import json
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ledger_files import edit_ledger

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger import FORMAT, SQLiteLedger
from privplan.ledger.verify import verify_ledger

POLICY = pp.Policy.from_yaml(demo_policy_path())


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("faults") / "d.duckdb", rows=2_000)


def _session(db: Path, ledger: Path, budget: object = None) -> pp.Session:
    return pp.connect(db, policy=POLICY, budget=budget or pp.PureDP(1), ledger=ledger)


def _run(code: str, *args: object, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False, **kw)  # type: ignore


# ------------------------------------------------------------------------ a failed COMMIT

FULL_DISK = """
    import resource, signal, sys
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    db, ledger = sys.argv[1], sys.argv[2]
    sess = pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(1),
                      ledger=ledger)
    # the disk fills up: the ledger's files may not grow (a real write failure at COMMIT)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
    try:
        sess.sql("SELECT COUNT(*) FROM visits", epsilon=0.1)
        print("first: answered", flush=True)
    except pp.PrivplanError as err:
        print("first:", type(err).__name__, str(err).replace(chr(10), " "), flush=True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space is freed
    sys.stdin.readline()  # meanwhile another session charges
    try:
        sess.sql("SELECT COUNT(*) FROM visits", epsilon=0.9)
        print("second: answered", flush=True)
    except pp.PrivplanError as err:
        print("second:", type(err).__name__, flush=True)
"""


@pytest.mark.invariant(3)
@pytest.mark.invariant(9)
def test_a_failed_commit_never_lets_the_budget_be_overspent(db: Path, tmp_path: Path) -> None:
    """The review's case: A's COMMIT of ε = 0.1 fails (disk full), B charges ε = 0.5 in its
    place, then A asks for ε = 0.9 with budget 1. Had A kept its failed charge in memory and
    its "last seen" marker past B's entry, it would see 0.1 + 0.9 = 1.0 and admit, and the file
    would end at 1.4. A must see B's charge instead and refuse: the file ends at 0.5."""
    ledger = tmp_path / "l.sqlite"
    _session(db, ledger).close()
    a = subprocess.Popen([sys.executable, "-c", textwrap.dedent(FULL_DISK), str(db),
                          str(ledger)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert a.stdout is not None
    first = a.stdout.readline()
    assert first.startswith("first: LedgerError"), first + a.stderr.read()  # type: ignore
    assert "file size limit" in first or "disk is full" in first, first
    assert "Nothing was charged or released" in first
    with _session(db, ledger) as b:
        assert b.sql("SELECT COUNT(*) FROM visits", epsilon=0.5).cost == pp.PureDP(0.5)
    out, err = a.communicate("go\n", timeout=120)
    assert "second: BudgetExceededError" in out, out + err
    with _session(db, ledger) as c:
        assert c.spent() == pp.PureDP(0.5)
        assert [e.query_id for e in c.ledger.entries()] == ["q1"]
    assert verify_ledger(ledger).ok


# ------------------------------------------------------------------------ corruption


def _base_ledger(db: Path, path: Path, checkpoint_every: int = 256) -> dict[str, object]:
    """A closed ledger (one file, WAL checkpointed) with overlapping and disjoint charges (and
    with ``checkpoint_every`` small, the composed state's checkpoint)."""
    with _session(db, path, pp.PureDP(5)) as s:
        s.ledger.checkpoint_every = checkpoint_every
        for i in range(12):
            s.sql(f"SELECT COUNT(*) FROM visits WHERE age = {i}", epsilon=0.05)
        s.sql("SELECT hospital, COUNT(*) FROM visits GROUP BY hospital", epsilon=0.1)
        s.sql("SELECT SUM(cost) FROM visits WHERE insured", epsilon=0.2)
    return _state(db, path)


def _state(db: Path, path: Path) -> dict[str, object]:
    with _session(db, path, pp.PureDP(5)) as s:
        return {"spent": s.spent(), "composed": s.accountant.total.cost,
                "entries": [(e.query_id, e.sql, e.marginal, e.total_after, e.mechanisms)
                            for e in s.ledger.entries()]}


def _flip_trials(db: Path, tmp_path: Path, trials: int, seed: int,
                 checkpoint_every: int = 256) -> None:
    base = tmp_path / "base.sqlite"
    want = _base_ledger(db, base, checkpoint_every)
    data = base.read_bytes()
    rng = random.Random(seed)
    outcomes = {"refused": 0, "unchanged": 0}
    for t in range(trials):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(damaged))
            damaged[i] ^= 1 << rng.randrange(8)
        path = tmp_path / f"t{t}.sqlite"
        path.write_bytes(bytes(damaged))
        try:
            got = _state(db, path)
        except pp.LedgerError:
            outcomes["refused"] += 1
            assert path.read_bytes() == bytes(damaged), f"trial {t}: a refused file was changed"
        else:
            outcomes["unchanged"] += 1
            assert got == want, f"trial {t}: the ledger changed silently"
        for p in tmp_path.glob(f"t{t}.sqlite*"):
            p.unlink()
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == trials, outcomes


@pytest.mark.parametrize("checkpoint_every", [256, 3])
def test_flipped_bytes_are_refused_or_harmless(db: Path, tmp_path: Path,
                                               checkpoint_every: int) -> None:
    """Any byte flip either leaves every entry and the total exactly as they were (it hit free
    space, or a checkpoint, which is then ignored) or is refused with a LedgerError (never
    another exception), the file untouched."""
    _flip_trials(db, tmp_path, trials=60, seed=1, checkpoint_every=checkpoint_every)


@pytest.mark.invariant(9)
@pytest.mark.slow
@pytest.mark.parametrize("checkpoint_every", [256, 3])
def test_500_random_corruptions_change_nothing_silently(db: Path, tmp_path: Path,
                                                        checkpoint_every: int) -> None:
    _flip_trials(db, tmp_path, trials=500, seed=2024, checkpoint_every=checkpoint_every)


@pytest.mark.invariant(9)
@pytest.mark.parametrize("edit", [
    "lower an entry's total", "remove the last entry", "remove an entry in the middle",
    "raise the budget", "change the policy record", "change an entry's mechanisms",
    "swap two entries' hashes"])
def test_edits_are_refused_with_what_was_found(db: Path, tmp_path: Path, edit: str) -> None:
    path = tmp_path / "l.sqlite"
    _base_ledger(db, path)
    if edit == "lower an entry's total":
        edit_ledger(path, "UPDATE entries SET total_after = ? WHERE seq = 14",
              json.dumps({"kind": "PureDP", "weights": ["1/10"]}))
    elif edit == "remove the last entry":
        edit_ledger(path, "DELETE FROM entries WHERE seq = (SELECT MAX(seq) FROM entries)")
    elif edit == "remove an entry in the middle":
        edit_ledger(path, "DELETE FROM entries WHERE seq = 5")
    elif edit == "raise the budget":
        edit_ledger(path, "UPDATE meta SET value = ? WHERE key = 'budget'",
              json.dumps({"kind": "PureDP", "weights": ["9/1"]}))
    elif edit == "change the policy record":
        edit_ledger(path, "UPDATE meta SET value = 'x' || value WHERE key = 'policy'")
    elif edit == "change an entry's mechanisms":
        edit_ledger(path, "UPDATE entries SET mechanisms = replace(mechanisms, '1/20', '1/40') "
                    "WHERE seq = 3")
    else:
        con = sqlite3.connect(path)
        (h1,), (h2,) = con.execute("SELECT hash FROM entries WHERE seq IN (2, 3) ORDER BY seq")
        con.execute("UPDATE entries SET hash = ? WHERE seq = 2", (h2,))
        con.execute("UPDATE entries SET hash = ? WHERE seq = 3", (h1,))
        con.commit()
        con.close()
    before = path.read_bytes()
    with pytest.raises(pp.LedgerError, match="was changed|belongs to a session|different "
                                             "policy"):
        _session(db, path, pp.PureDP(5))
    assert path.read_bytes() == before
    assert not verify_ledger(path).ok


# ------------------------------------------------------------------------ creation races

CREATE = """
    import sys, time
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    db, ledger, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    time.sleep(max(0.0, start - time.time()))  # all processes open at the same moment
    with pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(1),
                    ledger=ledger) as s:
        print(s.spent().epsilon)
"""


@pytest.mark.slow
def test_sixteen_processes_creating_one_ledger_all_succeed(db: Path, tmp_path: Path) -> None:
    import time

    ledger = tmp_path / "new.sqlite"
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(CREATE), str(db),
                               str(ledger), str(start)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(16)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.strip() == "0.0"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".new")] == []
    with _session(db, ledger) as s:
        assert s.spent() == pp.PureDP(0)
    assert verify_ledger(ledger).ok


# ------------------------------------------------------------------------ the file goes away


def test_a_ledger_deleted_under_an_open_session_is_refused(db: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ledgers"
    folder.mkdir()
    with _session(db, folder / "l.sqlite") as s:
        s.sql("SELECT COUNT(*) FROM visits", epsilon=0.25)
        shutil.rmtree(folder)
        with pytest.raises(pp.LedgerError, match="no longer the file this session opened"):
            s.sql("SELECT COUNT(*) FROM visits WHERE age < 30", epsilon=0.25)


def test_a_ledger_replaced_under_an_open_session_is_refused(db: Path, tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    other = tmp_path / "other.sqlite"
    _session(db, other).close()  # another (empty) ledger file
    with _session(db, path) as s:
        s.sql("SELECT COUNT(*) FROM visits", epsilon=0.25)
        path.rename(tmp_path / "moved.sqlite")
        shutil.copy(other, path)  # a different file now sits at the path
        with pytest.raises(pp.LedgerError, match="no longer the file"):
            s.sql("SELECT COUNT(*) FROM visits", epsilon=0.25)


# ------------------------------------------------------------------------ causes in words


def test_a_missing_directory_is_named(db: Path, tmp_path: Path) -> None:
    with pytest.raises(pp.LedgerError, match="directory .* does not exist"):
        _session(db, tmp_path / "nowhere" / "l.sqlite")


READ_ONLY = """
    import os, sys
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    db, ledger = sys.argv[1], sys.argv[2]
    pp.connect  # load the engine now: privplan imports its parts on first use
    if os.geteuid() == 0:  # root writes anything: run as nobody, who may only read
        os.setgid(65534)
        os.setuid(65534)
    try:
        with pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(1),
                        ledger=ledger) as s:
            s.sql("SELECT COUNT(*) FROM visits", epsilon=0.25)
        print("answered")
    except pp.PrivplanError as err:
        print(type(err).__name__, str(err).replace(chr(10), " "))
"""


def test_a_read_only_ledger_is_named_and_spends_nothing(db: Path) -> None:
    import tempfile

    # a directory anyone may enter (pytest's own are private to the user running it)
    shared = Path(tempfile.mkdtemp(prefix="privplan-ro-"))
    try:
        shared.chmod(0o755)
        data = shared / "d.duckdb"
        shutil.copy(db, data)
        data.chmod(0o644)
        folder = shared / "ro"
        folder.mkdir()
        path = folder / "l.sqlite"
        with _session(data, path) as s:
            s.sql("SELECT COUNT(*) FROM visits", epsilon=0.25)
        before = path.read_bytes()
        path.chmod(0o444)
        folder.chmod(0o555)
        try:
            p = _run(READ_ONLY, data, path)
        finally:
            folder.chmod(0o755)
            path.chmod(0o644)
        out = p.stdout
        assert out.startswith("LedgerError") and "read-only" in out, out + p.stderr
        assert path.read_bytes() == before
        with _session(data, path) as s:
            assert s.spent() == pp.PureDP(0.25)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# ------------------------------------------------------------------------ earlier formats


def test_a_ledger_of_format_1_is_migrated_only_when_the_owner_asks(db: Path,
                                                                   tmp_path: Path) -> None:
    """Entries written before the chain existed cannot be verified: a session refuses the file
    (it used to chain whatever the entries said on open), and the owner's explicit migration
    chains them as they are; spending is unchanged."""
    from privplan.ledger.migrate import migrate_1, policy_json_of

    path = tmp_path / "old.sqlite"
    with _session(db, path, pp.PureDP(5)) as s:
        s.sql("SELECT COUNT(*) FROM visits WHERE age < 18", epsilon=0.5)
        s.sql("SELECT COUNT(*) FROM visits WHERE age >= 65", epsilon=0.5)
    con = sqlite3.connect(path)  # rewrite it as the first format had it
    con.execute("UPDATE meta SET value = 'privplan-ledger-1' WHERE key = 'format'")
    con.execute("DELETE FROM meta WHERE key IN ('root', 'head_seq', 'head_hash', 'head_check', "
                "'policy_json', 'ledger_id')")
    con.execute("ALTER TABLE entries DROP COLUMN hash")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(pp.LedgerError, match="format 1.*privplan ledger migrate"):
        _session(db, path, pp.PureDP(5))
    assert path.read_bytes() == before
    assert migrate_1(path, policy_json_of(POLICY), None) == 2
    with _session(db, path, pp.PureDP(5)) as s:
        assert s.spent() == pp.PureDP(0.5)
        assert s.sql("SELECT COUNT(*) FROM visits WHERE age BETWEEN 18 AND 64",
                     epsilon=0.5).cost == pp.PureDP(0)
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == FORMAT
    con.close()
    assert verify_ledger(path).ok


def test_a_ledger_relabelled_format_1_is_refused_even_by_the_migration(db: Path,
                                                                      tmp_path: Path) -> None:
    """The reviewers' edit: set the format to the previous name and lower a total. A file that
    claims format 1 but carries a chain was edited: no session opens it, and the owner's
    migration refuses it too (it would have chained the lowered total)."""
    from privplan.ledger.migrate import migrate_1, policy_json_of

    path = tmp_path / "l.sqlite"
    _base_ledger(db, path)
    edit_ledger(path, "UPDATE meta SET value = 'privplan-ledger-1' WHERE key = 'format'")
    edit_ledger(path, "UPDATE entries SET total_after = ? WHERE seq = 14",
                json.dumps({"kind": "PureDP", "weights": ["1/100"]}))
    before = path.read_bytes()
    with pytest.raises(pp.LedgerError, match="format 1"):
        _session(db, path, pp.PureDP(5))
    with pytest.raises(pp.LedgerError, match="claims format 1.*was edited"):
        migrate_1(path, policy_json_of(POLICY), None)
    assert path.read_bytes() == before
    assert not verify_ledger(path).ok


# ------------------------------------------------------------------------ verify


def test_verify_recomputes_the_total_and_finds_understated_totals(db: Path,
                                                                  tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _base_ledger(db, path)
    result = verify_ledger(path)
    assert result.ok and result.entries == 14
    assert result.recomputed_total == result.recorded_total
    # a consistent rewrite (the chain recomputed) that lowers the recorded totals is found
    ledger = SQLiteLedger(path)
    entries = ledger.entries()
    ledger.close()
    from privplan.ledger.chain import entry_hash

    con = sqlite3.connect(path)
    meta = dict(con.execute("SELECT key, value FROM meta"))
    h = meta["root"]
    low = json.dumps({"kind": "PureDP", "weights": ["1/100"]})
    for seq, row in enumerate(con.execute(
            "SELECT seq, query_id, sql, time, marginal, total_after, mechanisms FROM entries "
            "ORDER BY seq").fetchall(), start=1):
        fields = (*row[:4], low if seq == 1 else json.dumps(
            {"kind": "PureDP", "weights": ["0/1"]}), low, row[6])
        h = entry_hash(h, fields)
        con.execute("UPDATE entries SET marginal = ?, total_after = ?, hash = ? WHERE seq = ?",
                    (fields[4], fields[5], h, seq))
    from privplan.ledger.chain import ChainHead, head_check

    con.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (h,))
    con.execute("UPDATE meta SET value = ? WHERE key = 'head_check'",
                (head_check(meta["root"], ChainHead(14, h)),))
    con.commit()
    con.close()
    assert len(entries) == 14
    forged = verify_ledger(path)
    assert not forged.ok
    assert any("under-state" in f for f in forged.findings), forged.findings


def test_cli_ledger_verify(db: Path, tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _base_ledger(db, path)
    p = subprocess.run([sys.executable, "-m", "privplan.cli", "ledger", "verify", str(path)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0 and "OK" in p.stdout and "14 entries" in p.stdout, p.stdout
    edit_ledger(path, "DELETE FROM entries WHERE seq = 14")
    p = subprocess.run([sys.executable, "-m", "privplan.cli", "ledger", "verify", str(path),
                        "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["ok"] is False


# ------------------------------------------------------------------------ killed processes

KILL_TARGET = """
    import sys
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    print("imported", flush=True)  # the kill timer starts here (imports are slow under load)
    db, ledger = sys.argv[1], sys.argv[2]
    sess = pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(1e6),
                      ledger=ledger)
    sess.ledger.checkpoint_every = 3  # kills land in checkpoint writes too
    i = 0
    while True:
        i += 1
        res = sess.sql(f"SELECT COUNT(*) FROM visits WHERE age < {i % 90}", epsilon=0.01)
        qid = res.explanation.mechanisms[0].id.split(".")[0]
        print(qid, flush=True)  # the caller has received this answer
"""


def _kill_trials(db: Path, tmp_path: Path, trials: int, seed: int) -> None:
    """Kill a querying process at random moments: the file always opens, the total never
    decreases, and every answer the process received is covered by a committed charge."""
    import time

    rng = random.Random(seed)
    ledger = tmp_path / "k.sqlite"
    _session(db, ledger, pp.PureDP(1e6)).close()
    last_total = pp.PureDP(0)
    received: set[str] = set()
    for trial in range(trials):
        p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KILL_TARGET), str(db),
                              str(ledger)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        assert p.stdout is not None and p.stdout.readline().strip() == "imported"
        if trial == trials - 1 and not received:
            # under load every random moment may fall before the first answer: let the last
            # trial answer once, then kill it in the middle of the next charge
            received |= set(p.stdout.readline().split())
            time.sleep(rng.uniform(0.0, 0.3))
        else:
            time.sleep(rng.uniform(0.1, 2.0))  # opening the ledger, then some charges
        p.send_signal(signal.SIGKILL)
        out, _ = p.communicate(timeout=60)
        received |= set(out.split())
        with _session(db, ledger, pp.PureDP(1e6)) as s:
            total = s.spent()
            committed = {e.query_id for e in s.ledger.entries()}
            composed = s.accountant.total.cost  # from the checkpoint, if one was written
        assert composed == total, "the checkpoint and the entries disagree"
        assert last_total <= total, "the total decreased after a kill"
        assert received <= committed, f"answers without a charge: {received - committed}"
        last_total = total
    assert received, "no answer was ever received: the trials did not reach the charge path"
    assert verify_ledger(ledger).ok


@pytest.mark.invariant(3)
def test_killed_processes_never_release_uncharged_answers(db: Path, tmp_path: Path) -> None:
    _kill_trials(db, tmp_path, trials=4, seed=3)


@pytest.mark.invariant(3)
@pytest.mark.slow
def test_100_kills_on_the_charge_path(db: Path, tmp_path: Path) -> None:
    _kill_trials(db, tmp_path, trials=100, seed=2026)


# ------------------------------------------------------------------ opening while others charge

WRITER = """
    import sys
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    db, ledger, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(1e6),
                    ledger=ledger) as sess:
        sess.ledger.checkpoint_every = 7
        for i in range(n):
            sess.sql(f"SELECT COUNT(*) FROM visits WHERE age = {i % 90}", epsilon=0.01)
"""


def test_opening_while_another_process_charges_is_never_refused(db: Path,
                                                                tmp_path: Path) -> None:
    """A session opening (and asking ``spent()``) while another process appends reads the head
    and the entries of one moment: an append in between is not mistaken for a change."""
    ledger = tmp_path / "busy.sqlite"
    _session(db, ledger, pp.PureDP(1e6)).close()
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(db),
                               str(ledger), "150"], stderr=subprocess.PIPE, text=True)
    opened, totals = 0, []
    try:
        while writer.poll() is None:
            led = SQLiteLedger(ledger)
            totals.append(led.recorded_total())
            led.close()
            opened += 1
    finally:
        _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    assert opened > 10
    seen = [t for t in totals if t is not None]
    assert all(a <= b for a, b in itertools.pairwise(seen)), "a total went down"


# ------------------------------------------------- a real full disk and a read-only file system
#
# In a user and mount namespace (``unshare``; no privileges needed where user namespaces are
# enabled, as on the machines CI runs on), a 192 KB tmpfs really fills up (ENOSPC) and a bind
# mount is really read-only. The mounts vanish with the process.

IN_NAMESPACE = shutil.which("unshare") is not None and subprocess.run(
    ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True,
    check=False).returncode == 0
needs_namespace = pytest.mark.skipif(
    not IN_NAMESPACE, reason="user namespaces are disabled here; the RLIMIT_FSIZE and chmod "
                             "tests above cover the same failures")

TMPFS_FULL = """
    import os, subprocess, sys
    from pathlib import Path
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    db, mnt = sys.argv[1], Path(sys.argv[2])
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192k", "tmpfs", str(mnt)], check=True)
    policy = pp.Policy.from_yaml(demo_policy_path())
    ledger = mnt / "l.sqlite"
    a = pp.connect(db, policy=policy, budget=pp.PureDP(1), ledger=ledger)
    b = pp.connect(db, policy=policy, budget=pp.PureDP(1), ledger=ledger)
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)  # fill the disk (unbuffered writes)
    try:
        while True:
            os.write(fd, b"x" * 512)
    except OSError:
        pass
    os.close(fd)
    try:
        a.sql("SELECT COUNT(*) FROM visits", epsilon=0.1)
        print("A first: answered")
    except pp.PrivplanError as err:
        print("A first:", type(err).__name__, str(err).replace(chr(10), " "))
    filler.unlink()  # space is freed; B charges in A's place
    print("B:", b.sql("SELECT COUNT(*) FROM visits", epsilon=0.5).cost)
    try:
        a.sql("SELECT COUNT(*) FROM visits", epsilon=0.9)
        print("A second: answered")
    except pp.PrivplanError as err:
        print("A second:", type(err).__name__)
    print("spent:", a.spent(), b.spent(), len(a.ledger.entries()))
"""


@pytest.mark.invariant(9)
@needs_namespace
def test_a_full_tmpfs_never_lets_the_budget_be_overspent(db: Path, tmp_path: Path) -> None:
    """The review's sequence on a real full disk: A's charge fails with ENOSPC, B charges 0.5
    once space is freed, A then asks 0.9 of a budget of 1 and is refused (not 1.4)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c",
                        textwrap.dedent(TMPFS_FULL), str(db), str(mnt)],
                       capture_output=True, text=True, timeout=300, check=False)
    out = p.stdout
    assert "A first: LedgerError" in out and "the disk is full" in out, out + p.stderr
    assert "Nothing was charged or released" in out
    assert "B: PureDP(epsilon=0.5)" in out
    assert "A second: BudgetExceededError" in out
    assert "spent: PureDP(epsilon=0.5) PureDP(epsilon=0.5) 1" in out, out


READ_ONLY_MOUNT = """
    import subprocess, sys
    import privplan as pp
    from privplan.demo.data import demo_policy_path
    db, folder, ledger = sys.argv[1:4]
    subprocess.run(["mount", "--bind", "-o", "ro", folder, folder], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", folder, folder], check=True)
    try:
        with pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()),
                        budget=pp.PureDP(1), ledger=ledger) as s:
            s.sql("SELECT COUNT(*) FROM visits", epsilon=0.25)
        print("answered")
    except pp.PrivplanError as err:
        print(type(err).__name__, str(err).replace(chr(10), " "))
"""


@needs_namespace
def test_a_read_only_file_system_is_named_and_spends_nothing(db: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "l.sqlite"
    with _session(db, path) as s:
        s.sql("SELECT COUNT(*) FROM visits", epsilon=0.25)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c",
                        textwrap.dedent(READ_ONLY_MOUNT), str(db), str(folder), str(path)],
                       capture_output=True, text=True, timeout=300, check=False)
    out = p.stdout
    assert out.startswith("LedgerError") and "read-only" in out, out + p.stderr
    assert "damaged" not in out
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    with _session(db, path) as s:
        assert s.spent() == pp.PureDP(0.25)
