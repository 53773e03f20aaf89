"""The ledger's checkpoint (a cache of the composed state) never changes what is charged.

Oracles: an accountant that never saved (same admissions, same order) for the restored
solver's totals, witnesses and mechanisms; a full rebuild from the entries (the checkpoint
removed) and ``ledger verify``'s recomputation for sessions; damaged checkpoints must be
ignored, never trusted.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from ledger_files import edit_ledger

import privplan as pp
from privplan.accounting.accountant import Accountant
from privplan.accounting.definitions import ZCDP, PureDP
from privplan.accounting.model import MechanismSpec, Partition, TableModel, UnitModel
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger import MemoryLedger, SQLiteLedger
from privplan.ledger.checkpoint import decode_states, encode_states
from privplan.ledger.verify import verify_ledger

POLICY = pp.Policy.from_yaml(demo_policy_path())

MODELS = {
    "add_remove": TableModel(),
    "replace": TableModel("replace"),
    "units": TableModel(unit=UnitModel(3, frozenset({"region"}))),
}


def _random_specs(rng: random.Random, n: int, kind: type) -> list[MechanismSpec]:
    """Mechanisms over int, str, date and float columns, with and without GROUP BY."""
    out = []
    for i in range(n):
        boxes = {}
        if rng.random() < 0.7:
            a = rng.randrange(10)
            boxes["age"] = (ColumnSet.points([a]) if rng.random() < 0.5
                            else ColumnSet.interval(a, a + rng.randrange(1, 5)))
        if rng.random() < 0.5:
            boxes["region"] = ColumnSet.points(rng.sample("abcd", rng.randrange(1, 3)))
        if rng.random() < 0.3:
            d = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(5))
            boxes["day"] = ColumnSet.points([d])
        if rng.random() < 0.2:
            boxes["score"] = ColumnSet.interval(rng.random(), 1.5)
        region = Region.box(**boxes) if boxes else Region.full()
        part = None
        r = rng.random()
        if r < 0.25:
            part = Partition(("region",), ("region",), rng.choice([None, 2]))
        elif r < 0.35:
            part = Partition(("f(x)",), None)
        w = Fraction(rng.choice([1, 2, 3]), rng.choice([10, 20, 7]))
        cost = kind.from_weights((w,) * len(kind.zero().weights()))
        out.append(MechanismSpec(f"q{i}.c0_m0", "t", region, cost, part))
    return out


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("kind", [PureDP, ZCDP])
@pytest.mark.parametrize("seed", range(6))
def test_a_restored_accountant_continues_exactly_as_one_that_never_saved(
        model: str, kind: type, seed: int) -> None:
    rng = random.Random(seed)
    specs = _random_specs(rng, 40, kind)
    cut = rng.randrange(1, 39)
    tables = {"t": MODELS[model]}
    plain = Accountant(tables, kind)
    saved = Accountant(tables, kind)
    for s in specs[:cut]:
        plain.admit([s])
        saved.admit([s])
    blob = encode_states(saved.export_state())
    loads = []

    def load(table: str) -> list[MechanismSpec]:
        loads.append(table)
        return specs[:cut]

    restored = Accountant.restore(tables, kind, decode_states(blob), load)
    assert restored.total == plain.total
    assert not loads  # the specs are not read to restore
    for s in specs[cut:]:
        assert restored.admit([s]) == plain.admit([s])
    assert restored.mechanisms() == plain.mechanisms()
    assert loads == ["t"]
    # and against composing everything at once (equal when both are exact)
    whole = Accountant(tables, kind).admit(specs)
    if whole.exact and restored.total.exact:
        assert whole.cost == restored.total.cost


def test_a_state_for_another_model_or_kind_is_not_restored() -> None:
    specs = _random_specs(random.Random(1), 10, PureDP)
    acc = Accountant({"t": TableModel()}, PureDP)
    acc.admit(specs)
    states = decode_states(encode_states(acc.export_state()))
    with pytest.raises(ValueError):
        Accountant.restore({"t": TableModel("replace")}, PureDP, states, lambda t: specs)
    with pytest.raises(ValueError):
        Accountant.restore({"t": TableModel()}, ZCDP, states, lambda t: specs)
    # another search limit is fine: saved maxima are exact or proven bounds whatever the limit
    other = Accountant.restore({"t": TableModel()}, PureDP, states, lambda t: specs,
                               exact_limit=5)
    assert other.total.cost == acc.total.cost


def test_bytes_that_are_not_a_checkpoint_are_refused() -> None:
    acc = Accountant({"t": TableModel()}, PureDP)
    acc.admit(_random_specs(random.Random(2), 10, PureDP))
    blob = encode_states(acc.export_state())
    for bad in (b"", b"junk", blob[:-9], blob[:40]):
        with pytest.raises(Exception):  # noqa: B017 - any failure means "no checkpoint"
            decode_states(bad)


# ------------------------------------------------------------------------------ sessions


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("ckpt") / "d.duckdb", rows=1_000)


QUERIES = [
    *(f"SELECT COUNT(*) FROM visits WHERE age = {a}" for a in range(8)),
    "SELECT hospital, COUNT(*) FROM visits GROUP BY hospital",
    "SELECT SUM(cost) FROM visits WHERE age >= 50",
    *(f"SELECT COUNT(*) FROM visits WHERE hospital = '{h}' AND age > 60" for h in "ABCD"),
]


def _charged(db: Path, path: Path, every: int = 4) -> None:
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=path) as s:
        s.ledger.checkpoint_every = every
        for q in QUERIES:
            s.sql(q, epsilon=0.1)


def _composed(db: Path, path: Path) -> tuple[object, object, bool]:
    """(spent, the accountant's total, whether the checkpoint was used) of a new session."""
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=path) as s:
        used = s.ledger.checkpoint() is not None
        return s.spent(), s.accountant.total.cost, used


def _without_checkpoint(path: Path, out: Path) -> Path:
    out.write_bytes(path.read_bytes())
    con = sqlite3.connect(out)
    con.execute("DROP TABLE checkpoint")
    con.commit()
    con.close()
    return out


def test_a_new_session_resumes_from_the_checkpoint_with_the_same_total(
        db: Path, tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _charged(db, path)
    with _open(path) as led:
        found = led.checkpoint()
    assert found is not None
    seq, _ = found
    assert seq >= len(QUERIES) - 4  # written every 4 entries
    spent, total, used = _composed(db, path)
    assert used
    rebuilt = _composed(db, _without_checkpoint(path, tmp_path / "plain.sqlite"))
    assert rebuilt[2] is False
    assert (spent, total) == rebuilt[:2]
    report = verify_ledger(path, POLICY)
    assert report.chain_intact and not report.findings
    assert total == report.recomputed_total


class _open:  # a closing context for a ledger
    def __init__(self, path: Path) -> None:
        self.led = SQLiteLedger(path)

    def __enter__(self) -> SQLiteLedger:
        return self.led

    def __exit__(self, *exc: object) -> None:
        self.led.close()


@pytest.mark.parametrize("damage", [
    "UPDATE checkpoint SET state = substr(state, 1, 200) || x'00' || substr(state, 202)",
    "UPDATE checkpoint SET seq = seq - 1",
    "UPDATE checkpoint SET binding = 'x' || substr(binding, 2)",
    "UPDATE checkpoint SET state = x'00'",
])
def test_a_damaged_checkpoint_is_ignored_and_the_entries_decide(
        db: Path, tmp_path: Path, damage: str) -> None:
    path = tmp_path / "l.sqlite"
    _charged(db, path)
    want = _composed(db, _without_checkpoint(path, tmp_path / "plain.sqlite"))[:2]
    edit_ledger(path, damage)
    spent, total, used = _composed(db, path)
    assert not used
    assert (spent, total) == want


def test_a_checkpoint_written_by_another_state_of_the_same_entries_is_bound_to_them(
        db: Path, tmp_path: Path) -> None:
    """A checkpoint copied from another ledger (other entries, same budget and policy) does
    not bind to this chain: it is ignored."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    _charged(db, a)
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=b) as s:
        s.ledger.checkpoint_every = 4
        for q in reversed(QUERIES):
            s.sql(q, epsilon=0.2)
    want = _composed(db, _without_checkpoint(b, tmp_path / "plain.sqlite"))[:2]
    con = sqlite3.connect(b)
    con.execute("ATTACH ? AS other", (str(a),))
    con.execute("UPDATE checkpoint SET state = (SELECT state FROM other.checkpoint), "
                "binding = (SELECT binding FROM other.checkpoint), "
                "seq = (SELECT seq FROM other.checkpoint)")
    con.commit()
    con.close()
    spent, total, used = _composed(db, b)
    assert not used
    assert (spent, total) == want


def test_entries_before_the_checkpoint_are_verified_when_read(db: Path, tmp_path: Path) -> None:
    """An edit of an entry the checkpoint covers changes nothing the session composes (the
    checkpoint holds it), and it is found by every read of that entry: the history, the
    entries, and ``ledger verify``."""
    path = tmp_path / "l.sqlite"
    _charged(db, path)
    before = _composed(db, path)
    edit_ledger(path, "UPDATE entries SET marginal = replace(marginal, '1', '2') WHERE seq = 2")
    assert _composed(db, path) == before
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=path) as s:
        with pytest.raises(pp.LedgerError, match="entry 2"):
            s.ledger.entries()
        with pytest.raises(pp.LedgerError, match="entry 2"):
            s.explain("SELECT COUNT(*) FROM visits WHERE age = 3", epsilon=0.1)  # the history
    report = verify_ledger(path, POLICY)
    assert not report.chain_intact and any("entry 2" in f for f in report.findings)


def test_history_and_further_charges_from_a_restored_session(db: Path, tmp_path: Path) -> None:
    path, plain = tmp_path / "l.sqlite", tmp_path / "plain.sqlite"
    _charged(db, path)
    _without_checkpoint(path, plain)
    sessions = [pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=p)
                for p in (path, plain)]
    try:
        more = ["SELECT COUNT(*) FROM visits WHERE age = 3",
                "SELECT department, SUM(cost) FROM visits GROUP BY department"]
        got = []
        for s in sessions:
            e = s.explain(more[0], epsilon=0.1)  # names the earlier queries it overlaps
            got.append(([m.relations for m in e.mechanisms],
                        [s.sql(q, epsilon=0.1).cost for q in more], s.spent()))
        assert got[0][0] and got[0][0][0]
        assert got[0] == got[1]
        assert sessions[0].accountant.mechanisms() == sessions[1].accountant.mechanisms()
    finally:
        for s in sessions:
            s.close()


def test_checkpoints_follow_the_interval(db: Path, tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=path) as s:
        s.ledger.checkpoint_every = 5
        seqs = []
        for q in QUERIES:
            s.sql(q, epsilon=0.1)
            found = sqlite3.connect(path).execute(
                "SELECT seq FROM checkpoint").fetchone() if _has_checkpoint(path) else None
            seqs.append(found[0] if found else 0)
    assert seqs == [(i + 1) // 5 * 5 for i in range(len(QUERIES))]


def _has_checkpoint(path: Path) -> bool:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT 1 FROM sqlite_master WHERE name = 'checkpoint'").fetchone() \
            is not None
    finally:
        con.close()


# ------------------------------------------------------------------- one session per object


@pytest.mark.parametrize("make", [MemoryLedger, "sqlite"])
def test_one_ledger_object_serves_one_session(db: Path, tmp_path: Path, make: object) -> None:
    """Two sessions on one ledger *object* would each skip the other's charges (the object
    remembers what its session admitted): two ε = 1 queries over everyone were reported as
    ε = 1 spent by both. The second session is refused; sharing goes through the file."""
    led = make() if callable(make) else SQLiteLedger(tmp_path / "l.sqlite")
    a = pp.connect(db, policy=POLICY, budget=pp.PureDP(10), ledger=led)
    with pytest.raises(pp.LedgerError, match="already serves another session"):
        pp.connect(db, policy=POLICY, budget=pp.PureDP(10), ledger=led)
    a.sql("SELECT COUNT(*) FROM visits", epsilon=1.0)
    if make == "sqlite":
        with pp.connect(db, policy=POLICY, budget=pp.PureDP(10),
                        ledger=tmp_path / "l.sqlite") as b:
            b.sql("SELECT COUNT(*) FROM visits", epsilon=1.0)
            assert b.spent() == pp.PureDP(2.0)
        assert a.spent() == pp.PureDP(2.0)
    a.close()


def test_a_failing_checkpoint_write_loses_only_the_cache(db: Path, tmp_path: Path) -> None:
    """The checkpoint is written after the charge committed: when writing it fails (here a
    real SQLite error: a table of that name the writer cannot fill), the answer is released,
    the charge stands, and the session's accounting is rebuilt from the file."""
    path = tmp_path / "l.sqlite"
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=path) as s:
        s.sql(QUERIES[0], epsilon=0.1)
    edit_ledger(path, "CREATE TABLE checkpoint (x)")
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=path) as s:
        s.ledger.checkpoint_every = 1
        for q in QUERIES[1:6]:
            assert s.sql(q, epsilon=0.1).df is not None
        spent = s.spent()
    report = verify_ledger(path, POLICY)
    assert report.entries == 6 and not report.findings
    assert spent == report.recomputed_total == report.recorded_total
    assert _composed(db, path) == (spent, spent, False)


@pytest.mark.parametrize("error", [ValueError, TypeError, pp.LedgerError])
def test_a_checkpoint_that_cannot_be_encoded_is_skipped(db: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        error: type[Exception]) -> None:
    """Whatever goes wrong while saving the cache, the charged query still answers."""
    import privplan.session.account as session_module

    def fail(states: object) -> bytes:
        raise error("cannot store this state")

    monkeypatch.setattr(session_module, "encode_states", fail)
    path = tmp_path / "l.sqlite"
    _charged(db, path, every=1)
    assert not _has_checkpoint(path) or sqlite3.connect(path).execute(
        "SELECT COUNT(*) FROM checkpoint").fetchone()[0] == 0
    monkeypatch.undo()
    spent, total, used = _composed(db, path)
    assert not used and spent == total == verify_ledger(path, POLICY).recomputed_total


def test_explain_reads_what_sql_reads_not_the_whole_history(db: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """``explain`` on a ledger restored from its checkpoint reads the checkpoint, the entries
    after it, and the last entries it compares one by one (here 3), never the entries the
    checkpoint covers (it used to decode every entry: 17 s at 100,000), and later calls only
    what was added since."""
    import privplan.session.account as session_ledger
    from privplan.ledger import history

    path = tmp_path / "l.sqlite"
    _charged(db, path)
    monkeypatch.setattr(session_ledger, "MAX_HISTORY", 3)

    def whole_history(self: object, seq: int) -> None:
        raise AssertionError("explain read the entries the checkpoint covers")

    decoded: list[object] = []
    decode = history.decode_mechanism
    monkeypatch.setattr(history, "decode_mechanism",
                        lambda m: decoded.append(m) or decode(m))
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=path) as s:
        assert s.ledger.checkpoint() is not None
        n = len(s.ledger.entries())
        monkeypatch.setattr(SQLiteLedger, "mechanisms_through", whole_history)
        e = s.explain("SELECT COUNT(*) FROM visits WHERE age = 3", epsilon=0.1)
        assert len(decoded) == 3
        named = " ".join(r for m in e.mechanisms for r in m.relations)
        assert f"q{n}" in named and f"q{n - 3}" not in named
        s.sql("SELECT COUNT(*) FROM visits WHERE age = 4", epsilon=0.1)
        s.explain("SELECT COUNT(*) FROM visits WHERE age = 5", epsilon=0.1)
        assert len(decoded) == 4  # (only the entry added since)


def test_checkpoints_of_a_long_ledger_are_spaced_by_its_length(
        db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint is a pass over the whole state: written every ``checkpoint_every`` entries
    it made each charge of a long ledger pay for the history. It is due after
    max(checkpoint_every, last checkpoint's entry // CHECKPOINT_SPACING) entries (spacing 4
    here, so the growth shows in a short ledger), and a session resuming from any of them
    composes the same total as one rebuilt from the entries."""
    monkeypatch.setattr("privplan.ledger.checkpoint.CHECKPOINT_SPACING", 4)
    path = tmp_path / "l.sqlite"
    written = []
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=path) as s:
        s.ledger.checkpoint_every = 2
        for i in range(60):
            s.sql(QUERIES[i % len(QUERIES)], epsilon=0.1)
            con = sqlite3.connect(path)
            try:
                row = con.execute("SELECT seq FROM checkpoint").fetchone()
            except sqlite3.OperationalError:  # (no checkpoint table yet)
                row = None
            finally:
                con.close()
            if row is not None and (not written or row[0] != written[-1]):
                written.append(row[0])
    want, last = [], 0
    for seq in range(1, 61):  # the rule, replayed
        if seq - last >= max(2, last // 4):
            want.append(seq)
            last = seq
    assert written == want
    assert want[:4] == [2, 4, 6, 8] and want[-1] - want[-2] > 2  # (it did space out)
    spent, total, used = _composed(db, path)
    rebuilt = _composed(db, _without_checkpoint(path, tmp_path / "no_ckpt.sqlite"))
    assert used and (spent, total) == rebuilt[:2]


def test_a_checkpoint_holds_the_state_of_the_entry_it_names_when_a_shared_account_races(
        db: Path, tmp_path: Path) -> None:
    """Sessions of a process sharing one account (the server's connections) save checkpoints
    after their charges, outside the account's lock. Between a session's reading the
    account's state and its checkpoint write, another process may charge the ledger and
    another session of this one charge too (catching that entry up, which replaces the
    account's state): the checkpoint must name the entry its state covers, or a process
    resuming from it would never compose those charges (an under-charge). The race is made
    exact here: both charges run inside the first session's checkpoint save, before its
    write (the other process is a session over its own connection to the file)."""
    from privplan.session.account import Account
    from privplan.session.inputs import as_policy
    from privplan.session.session import Session

    policy = as_policy(POLICY)
    path = tmp_path / "l.sqlite"
    account = Account.open(SQLiteLedger(path), pp.PureDP(50), policy)
    first = Session(db, policy=policy, budget=pp.PureDP(50), ledger=account)
    other = Session(db, policy=policy, budget=pp.PureDP(50), ledger=account)
    sql = "SELECT COUNT(*) FROM visits WHERE age = 1"  # (each charge adds 1 to the total)
    try:
        account.ledger.checkpoint_every = 1
        real_save = account.ledger.save_checkpoint
        raced: list[int] = []

        def save_after_another_charge(export: Any) -> bool:
            if not raced:
                raced.append(1)
                # the other session commits a charge; its own checkpoint save has not come
                # yet (it would come after this one, in the race)
                with pp.connect(db, policy=POLICY, budget=pp.PureDP(50), ledger=path) as far:
                    far.sql(sql, epsilon=1)
                account.ledger.checkpoint_every = 10**9
                other.sql(sql, epsilon=1)
                account.ledger.checkpoint_every = 1
            return real_save(export)

        account.ledger.save_checkpoint = save_after_another_charge
        first.sql(sql, epsilon=1)
        assert raced and account.spent() == pp.PureDP(3)
        with _open(path) as led:
            assert led.checkpoint()[0] == 3  # (written in the race; nothing after it)
    finally:
        first.close()
        other.close()
        account.close()
    spent, total, used = _composed_with(db, path, budget=pp.PureDP(50))
    assert used and spent == total == pp.PureDP(3)
    assert verify_ledger(path).ok


def _composed_with(db: Path, path: Path, budget: object) -> tuple[object, object, bool]:
    with pp.connect(db, policy=POLICY, budget=budget, ledger=path) as s:
        used = s.ledger.checkpoint() is not None
        return s.spent(), s.accountant.total.cost, used


@pytest.mark.parametrize("policy_name", ["policy.yaml", "policy_patients.yaml"])
def test_a_long_lived_account_continues_from_its_checkpoint_as_one_that_never_saved(
        db: Path, tmp_path: Path, policy_name: str) -> None:
    """After each checkpoint an account continues from the state it saved, restored (as a new
    session would), instead of keeping every mechanism since it opened as objects. The oracle:
    a session over an in-memory ledger (never saves, never restores) charged the same queries
    — every marginal cost and every total equal, at row and at user level; and the account
    did switch (its accountant object changed at checkpoints, and its mechanisms are held as
    columns after one)."""
    policy = pp.Policy.from_yaml(demo_policy_path().with_name(policy_name))
    rng = random.Random(7)
    asked = [rng.choice(QUERIES) for _ in range(45)]
    epsilons = [Fraction(rng.randint(1, 8), 8) for _ in asked]
    with pp.connect(db, policy=policy, budget=pp.PureDP(10**6), ledger=tmp_path / "l.sqlite"
                    ) as saving, pp.connect(db, policy=policy, budget=pp.PureDP(10**6),
                                            ledger=MemoryLedger()) as plain:
        saving.ledger.checkpoint_every = 4
        switched = 0
        for sql, eps in zip(asked, epsilons):
            before = saving.account.accountant
            a = saving.sql(sql, epsilon=float(eps))
            b = plain.sql(sql, epsilon=float(eps))
            assert a.cost == b.cost, sql
            assert saving.spent() == plain.spent(), sql
            switched += saving.account.accountant is not before
        assert switched >= 45 // 4 - 1
        solver = next(iter(saving.account.accountant._solvers.values()))
        assert solver._inst.mechs._base is not None  # (columns, from the last checkpoint)
