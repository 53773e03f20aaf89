"""The budget ledger: every charged mechanism, in order — in memory, or durable in SQLite.

The ledger is the single source of truth for what has been spent: the composed total is
recomputed from its entries with the composition theorem. Admission is an atomic
check-and-charge: :meth:`charging` gives exclusive access (for SQLite a ``BEGIN IMMEDIATE``
write transaction, so several processes sharing one file serialise), the caller catches up with
entries other processes committed, checks the budget, and appends; the entry is committed (WAL,
``synchronous=FULL``) before the caller may release anything (DESIGN.md invariant 3).

In-memory state follows the durable write, never precedes it (invariant 9): what a charging
transaction reads or appends is *staged*, and applied only after its COMMIT returns. If the
COMMIT fails (disk full, an I/O error), SQLite rolls the transaction back and the ledger forgets
what it had staged — and everything it had seen — so the next transaction rebuilds from the
file; the caller's ``on_failure`` hooks drop their state too. Otherwise a session could believe
a charge it never recorded and miss another process's charge made in its place.

A damaged or altered ledger is never reset: opening a truncated, corrupted, foreign or edited
file raises :class:`LedgerError` and leaves the file as it is (the hash chain of
:mod:`privplan.ledger_chain` is verified on open and for every entry read later). The file being
charged must stay the file at its path (checked on every charge): a ledger deleted or moved
under an open session is refused rather than charged in a place no one will read.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from privplan.accounting.model import MechanismSpec
from privplan.errors import LedgerError
from privplan.ledger_chain import ChainHead, changed, entry_hash, root_hash, verify_rows
from privplan.ledger_checkpoint import CHECKPOINT_EVERY, binding
from privplan.ledger_codec import (
    decode_cost,
    decode_mechanism,
    encode_cost,
    encode_mechanism,
)
from privplan.ledger_file import (
    _DB_ERRORS,
    FORMAT,
    _check_directory,
    _check_file,
    _claim,
    _create,
    _failure,
    _identity,
)
from privplan.ledger_memory import (
    Charging,
    LedgerEntry,
    MemoryLedger,
    _Hooks,
    policy_fingerprint,
)

LEGACY_FORMATS = ("privplan-ledger-1",)
"""Formats upgraded in place on first open (their entries get a chain as they are)."""
_FIELDS = "seq, query_id, sql, time, marginal, total_after, mechanisms"


# ------------------------------------------------------------------------------ SQLite


class SQLiteLedger:
    """A durable ledger in one SQLite file, safe to share between processes."""

    def __init__(self, path: str | Path, *, timeout: float = 120.0) -> None:
        self.path = Path(path)
        # re-entrant: a read made inside a charge (same thread) must not wait for itself
        self._lock = threading.RLock()
        self._failure_hooks: list[Callable[[], None]] = []
        _check_directory(self.path)
        if not self.path.exists():
            _create(self.path)
        _check_file(self.path)
        try:
            self.con = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None,
                                       check_same_thread=False)
            self.con.text_factory = _text
            # everything is checked before anything could be written (even the journal mode)
            self._check_integrity()
            self._verified = ChainHead(0, "")  # the last entry this process verified
            self._seen = 0  # the last entry the session consumed (admitted)
            self._checkpoint: tuple[int, bytes] | None = None  # bound to the chain (verified)
            self._checkpoint_seq = 0  # the newest checkpoint this process knows of
            self.checkpoint_every = CHECKPOINT_EVERY
            if self._meta().get("format") == FORMAT:
                self._verify()
            self.con.execute("PRAGMA journal_mode=WAL")
            self.con.execute("PRAGMA synchronous=FULL")
        except _DB_ERRORS as err:
            with contextlib.suppress(Exception):
                self.con.close()
            raise _failure(self.path, err, "opening it") from None
        except LedgerError:
            self.con.close()
            raise
        self._identity = _identity(self.path)
        if self._meta().get("format") != FORMAT:
            self._upgrade()
            self._verify()

    def claim(self) -> None:
        """Reserve this ledger object for one session (see :func:`_claim`)."""
        _claim(self)

    # -- set-up and verification --------------------------------------------------------------
    def _check_integrity(self) -> None:
        (result,) = self.con.execute("PRAGMA quick_check").fetchone()
        if result != "ok":
            raise sqlite3.DatabaseError(f"integrity check failed: {result}")
        tables = {r[0] for r in self.con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"meta", "entries"} <= tables:
            raise sqlite3.DatabaseError("it has no privplan ledger tables")
        row = self.con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or row[0] not in (FORMAT, *LEGACY_FORMATS):
            raise sqlite3.DatabaseError(f"unknown ledger format {row[0] if row else None!r}")

    def _meta(self) -> dict[str, str]:
        return dict(self.con.execute("SELECT key, value FROM meta").fetchall())

    def _root(self, meta: dict[str, str]) -> str:
        """The chain's root for this ledger's recorded budget and policy ('' before first use)."""
        if "budget" not in meta:
            return ""
        return root_hash(FORMAT, meta["budget"], meta.get("policy", ""))

    def _upgrade(self) -> None:
        """A ledger of an earlier format gets the chain over its entries as they are (they were
        not tamper-evident before; from now on they are)."""
        meta = self._meta()
        if meta.get("format") == FORMAT:
            return
        with self._write() as con:
            meta = self._meta()
            if meta.get("format") == FORMAT:
                return  # another process upgraded it meanwhile
            columns = {r[1] for r in con.execute("PRAGMA table_info(entries)")}
            if "hash" not in columns:
                con.execute("ALTER TABLE entries ADD COLUMN hash TEXT")
            head = ChainHead(0, self._root(meta))
            for row in con.execute(f"SELECT {_FIELDS} FROM entries ORDER BY seq").fetchall():
                h = entry_hash(head.hash, row)
                con.execute("UPDATE entries SET hash = ? WHERE seq = ?", (h, row[0]))
                head = ChainHead(int(row[0]), h)
            _set_head(con, head)
            if "budget" in meta:
                con.execute("INSERT OR REPLACE INTO meta VALUES ('root', ?)",
                            (self._root(meta),))
            con.execute("UPDATE meta SET value = ? WHERE key = 'format'", (FORMAT,))

    def _verify(self) -> None:
        """Verify the chain: the root (budget and policy), the head, and every entry, or,
        when a checkpoint bound to the chain covers the first entries, every entry from the
        checkpoint's on (the entries before it are verified whenever they are read)."""
        try:
            with _snapshot(self.con):  # the meta row and the entries as of one moment
                meta = self._meta()
                root = self._root(meta)
                if "budget" in meta and meta.get("root") != root:
                    raise changed(self.path, "its budget or policy record does not match the "
                                             "root of its chain")
                start, checkpoint = ChainHead(0, root), self._bound_checkpoint(root)
                if checkpoint is not None:
                    start = checkpoint[2]
                rows = self.con.execute(
                    f"SELECT {_FIELDS}, hash FROM entries WHERE seq > ? ORDER BY seq",
                    (start.seq,)).fetchall()
        except _DB_ERRORS as err:
            raise _failure(self.path, err, "reading it") from None
        head = verify_rows(self.path, start, rows)
        if checkpoint is not None:
            self._checkpoint = checkpoint[:2]
            self._checkpoint_seq = checkpoint[0]
        stored = ChainHead(int(meta.get("head_seq", "0")), meta.get("head_hash", root))
        if stored != head:
            raise changed(self.path, f"its last entries are missing or were changed (the record "
                                     f"of its last entry says {stored.seq}, the entries end at "
                                     f"{head.seq})")
        self._verified = head

    def _bound_checkpoint(self, root: str) -> tuple[int, bytes, ChainHead] | None:
        """The stored checkpoint, its entry, and the chain head just before that entry, if the
        checkpoint is bound to this chain; else None (then it is ignored: it is only a cache)."""
        if not self.con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                "AND name = 'checkpoint'").fetchone():
            return None
        # read as bytes: a damaged checkpoint is ignored, whatever its bytes (or its table's
        # columns) became
        try:
            row = self.con.execute("SELECT seq, CAST(binding AS BLOB), CAST(state AS BLOB) "
                                   "FROM checkpoint WHERE id = 1").fetchone()
        except sqlite3.OperationalError:
            return None
        if row is None or not isinstance(row[0], int) or not isinstance(row[2], bytes):
            return None
        seq, bound, blob = row
        hashes = dict(self.con.execute("SELECT seq, hash FROM entries WHERE seq IN (?, ?)",
                                       (seq - 1, seq)).fetchall())
        if seq not in hashes or bound != binding(seq, hashes[seq], root, blob).encode():
            return None
        before = ChainHead(seq - 1, root if seq == 1 else hashes.get(seq - 1, ""))
        return seq, blob, before

    def checkpoint(self) -> tuple[int, bytes] | None:
        """The checkpoint found bound to the chain when the ledger was opened: (the entry it
        covers up to, its bytes), or None. See :mod:`privplan.ledger_checkpoint`."""
        return self._checkpoint

    def resume(self, seq: int) -> None:
        """The session's accounting was restored from the checkpoint up to entry ``seq``: only
        later entries are unseen."""
        with self._lock:
            self._seen = seq

    def mechanisms_through(self, seq: int) -> list[MechanismSpec]:
        """Every mechanism of entries 1..``seq``, read after verifying them from the root."""
        with self._lock:
            rows, head = self._fetch(0, ChainHead(0, self._root(self._meta())), through=seq)
        if head.seq != seq or len(rows) != seq:
            raise changed(self.path, f"entries before {seq} are missing")
        return [decode_mechanism(m) for r in rows for m in json.loads(r[6])]

    def save_checkpoint(self, export: Callable[[], bytes]) -> bool:
        """Store ``export()`` (the session's accounting after the last entry it consumed) as
        the checkpoint, when :attr:`checkpoint_every` entries have passed since the newest one.
        Runs under the ledger's lock, so the state and the entry it covers agree."""
        if self._seen - self._checkpoint_seq < self.checkpoint_every:
            return False
        with self._write() as con:
            seq = self._seen
            con.execute("CREATE TABLE IF NOT EXISTS checkpoint (id INTEGER PRIMARY KEY "
                        "CHECK (id = 1), seq INTEGER NOT NULL, binding TEXT NOT NULL, "
                        "state BLOB NOT NULL)")
            row = con.execute("SELECT seq FROM checkpoint WHERE id = 1").fetchone()
            if seq == 0 or (row is not None and isinstance(row[0], int) and row[0] >= seq):
                self._checkpoint_seq = max(self._checkpoint_seq, row[0] if row else 0)
                return False
            found = con.execute("SELECT hash FROM entries WHERE seq = ?", (seq,)).fetchone()
            if found is None:  # (the entry vanished: the next read refuses the file)
                return False
            blob = export()
            entry = found[0]
            root = self._root(self._meta())
            con.execute("INSERT OR REPLACE INTO checkpoint VALUES (1, ?, ?, ?)",
                        (seq, binding(seq, entry, root, blob), blob))
        self._checkpoint_seq = seq
        return True

    def bind(self, budget: Any, policy: Any) -> None:
        """Record (first use) or check the budget and policy the ledger's entries were charged
        under. A different budget or policy would change what the entries mean, so it is
        refused. The policy itself is kept too, so the ledger can be verified on its own."""
        fingerprint = policy_fingerprint(policy)
        want = {"budget": json.dumps(encode_cost(budget)), "policy": fingerprint}
        with self._write() as con:
            stored = self._meta()
            for key, value in want.items():
                if key not in stored:
                    con.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
                elif stored[key] != value:
                    if key == "budget":
                        old = decode_cost(json.loads(stored[key]))
                        raise LedgerError(
                            f"ledger '{self.path}' belongs to a session with budget "
                            f"{old.describe()} ({type(old).__name__}), not {budget.describe()} "
                            f"({type(budget).__name__}). Open it with the same budget, or use a "
                            "new ledger file for a new budget.")
                    raise LedgerError(
                        f"ledger '{self.path}' was charged under a different policy; its entries "
                        "cannot be composed with queries under this one. Use the original policy "
                        "or a new ledger file.")
            if "root" not in stored:
                root = root_hash(FORMAT, want["budget"], fingerprint)
                con.execute("INSERT INTO meta VALUES ('root', ?)", (root,))
                con.execute("INSERT OR IGNORE INTO meta VALUES ('policy_json', ?)", (
                    json.dumps(policy.to_dict(), sort_keys=True, default=str),))
                if self._verified.seq == 0:
                    self._verified = ChainHead(0, root)

    # -- reading ------------------------------------------------------------------------------
    def stored_budget(self) -> Any | None:
        """The budget this ledger was first opened with (None for a new ledger)."""
        with self._lock:
            row = self.con.execute("SELECT value FROM meta WHERE key = 'budget'").fetchone()
        return decode_cost(json.loads(row[0])) if row else None

    def stored_policy(self) -> dict[str, Any] | None:
        """The policy the entries were charged under, as recorded (None if not recorded)."""
        with self._lock:
            row = self.con.execute("SELECT value FROM meta WHERE key = 'policy_json'").fetchone()
        return json.loads(row[0]) if row else None

    def entries(self) -> tuple[LedgerEntry, ...]:
        with self._lock:
            rows, _ = self._fetch(0, verify_from=ChainHead(0, self._root(self._meta())))
        return tuple(_entry(r) for r in rows)

    def recorded_total(self) -> Any | None:
        """The composed total the last entry recorded (None for an empty ledger), after
        verifying the entries other processes appended since. Each entry's total was computed,
        under the ledger's lock, by composing it with every entry before it, so the last one is
        the total of the whole ledger; it is what the budget was enforced against."""
        with self._lock:
            _, self._verified = self._fetch(self._verified.seq, verify_from=self._verified)
            try:  # the last *verified* entry (another process may have appended since)
                row = self.con.execute("SELECT total_after FROM entries WHERE seq = ?",
                                       (self._verified.seq,)).fetchone()
            except _DB_ERRORS as err:
                raise _failure(self.path, err, "reading it") from None
        return decode_cost(json.loads(row[0])) if row else None

    def next_query_id(self) -> str:
        with self._lock:
            (n,) = self.con.execute("SELECT COUNT(*) FROM entries").fetchone()
        return f"q{n + 1}"

    def _fetch(self, after: int, verify_from: ChainHead, through: int | None = None
               ) -> tuple[list[tuple[Any, ...]], ChainHead]:
        """Entries after seq ``after`` (up to ``through``), each verified against the chain
        from ``verify_from``, and the chain's new head."""
        try:
            rows = self.con.execute(
                f"SELECT {_FIELDS}, hash FROM entries WHERE seq > ? AND seq <= ? ORDER BY seq",
                (after, 2**62 if through is None else through)).fetchall()
        except _DB_ERRORS as err:
            raise _failure(self.path, err, "reading it") from None
        head = verify_rows(self.path, verify_from, rows)
        return [r[:7] for r in rows], head

    # -- writing ------------------------------------------------------------------------------
    def on_failure(self, action: Callable[[], None]) -> None:
        """Run ``action`` when a write fails (a session drops its in-memory accounting)."""
        self._failure_hooks.append(action)

    @contextmanager
    def _write(self, committed: Callable[[], None] | None = None
               ) -> Iterator[sqlite3.Connection]:
        """One write transaction under the ledger's lock; ``committed`` runs after a successful
        COMMIT, still under the lock (so no other thread reads in between)."""
        with self._lock:
            try:
                self.con.execute("BEGIN IMMEDIATE")
            except _DB_ERRORS as err:
                raise _failure(self.path, err, "locking it for a charge") from None
            try:
                self._check_identity()
                yield self.con
            except _DB_ERRORS as err:
                with contextlib.suppress(sqlite3.Error):
                    self.con.execute("ROLLBACK")
                self._forget()
                raise _failure(self.path, err, "recording a charge") from None
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.con.execute("ROLLBACK")
                raise
            try:
                self.con.execute("COMMIT")
            except _DB_ERRORS as err:
                # SQLite rolls the transaction back: nothing staged may survive in memory
                with contextlib.suppress(sqlite3.Error):
                    self.con.execute("ROLLBACK")
                self._forget()
                raise _failure(self.path, err, "recording a charge") from None
            if committed is not None:
                committed()

    def _forget(self) -> None:
        """After a failed write: forget what was seen, so the next read rebuilds from the file,
        and tell the sessions to drop their accounting."""
        self._seen = 0
        for action in self._failure_hooks:
            action()

    def _check_identity(self) -> None:
        """The file being charged must be the file at the path (not deleted or replaced)."""
        try:
            now = _identity(self.path)
        except OSError:
            now = None
        if now != self._identity:
            raise LedgerError(
                f"ledger '{self.path}' is no longer the file this session opened (it was deleted, "
                "moved or replaced, or its directory was). Charging it would record spent budget "
                "where no later session reads it, so nothing was charged or released. Restore "
                "the file, then open a new session.")

    @contextmanager
    def charging(self) -> Iterator[Charging]:
        txn: _SQLiteCharging | None = None

        def committed() -> None:  # now (and only now) the staged state becomes the ledger's
            assert txn is not None
            self._seen, self._verified = txn.seen, txn.verified
            txn.committed()

        with self._write(committed) as con:
            txn = _SQLiteCharging(self, con)
            yield txn

    def close(self) -> None:
        self.con.close()


class _SQLiteCharging(_Hooks):
    """One charging transaction: reads and appends are staged until the COMMIT succeeds.

    ``verified`` is the last entry whose hash this process has checked; entries after it are
    verified as they are read (each continues the chain from it). ``seen`` is the last entry
    the session has consumed. Entries up to ``verified`` were checked against this same file
    when it was opened, or since, and are not hashed again."""

    def __init__(self, ledger: SQLiteLedger, con: sqlite3.Connection) -> None:
        super().__init__()
        self.ledger = ledger
        self.con = con
        self.seen = ledger._seen
        self.verified = ledger._verified

    def _verify_new(self) -> None:
        """Verify the entries appended (by any process) after ``verified``, and check the
        file's record of its last entry agrees (no entry vanished since it was verified)."""
        _, self.verified = self.ledger._fetch(self.verified.seq, verify_from=self.verified)
        meta = self.ledger._meta()
        recorded = ChainHead(int(meta.get("head_seq", "0")),
                             meta.get("head_hash", self.verified.hash))
        if recorded != self.verified:
            raise changed(self.ledger.path, "its last entries changed while it was open")

    def _rows(self, columns: str) -> list[tuple[Any, ...]]:
        try:
            return self.con.execute(f"SELECT {columns} FROM entries WHERE seq > ? ORDER BY seq",
                                    (self.seen,)).fetchall()
        except _DB_ERRORS as err:
            raise _failure(self.ledger.path, err, "reading it") from None

    def unseen(self) -> list[LedgerEntry]:
        self._verify_new()
        rows = self._rows(_FIELDS)
        self.seen = self.verified.seq
        return [_entry(r) for r in rows]

    def unseen_mechanisms(self) -> list[MechanismSpec]:
        """The mechanisms of the entries not consumed yet (only those are decoded)."""
        self._verify_new()
        rows = self._rows("mechanisms")
        self.seen = self.verified.seq
        return [decode_mechanism(m) for (text,) in rows for m in json.loads(text)]

    def next_query_id(self) -> str:
        (n,) = self.con.execute("SELECT COUNT(*) FROM entries").fetchone()
        return f"q{n + 1}"

    def append(self, entry: LedgerEntry) -> None:
        self._verify_new()
        fields = (self.verified.seq + 1, entry.query_id, entry.sql, entry.time,
                  json.dumps(encode_cost(entry.marginal)),
                  json.dumps(encode_cost(entry.total_after)),
                  json.dumps([encode_mechanism(m) for m in entry.mechanisms]))
        h = entry_hash(self.verified.hash, fields)
        try:
            self.con.execute(
                f"INSERT INTO entries ({_FIELDS}, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (*fields, h))
            _set_head(self.con, ChainHead(int(fields[0]), h))
        except _DB_ERRORS as err:
            raise _failure(self.ledger.path, err, "recording a charge") from None
        self.verified = ChainHead(int(fields[0]), h)
        self.seen = self.verified.seq


@contextmanager
def _snapshot(con: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every statement inside sees the file as of one moment (WAL), so
    another process's append cannot fall between reading the head and reading the entries."""
    con.execute("BEGIN")
    try:
        yield
    finally:
        con.execute("COMMIT")


def _text(raw: bytes) -> str:
    """Stored text as UTF-8; text that is not (a damaged file) is a database error, refused
    like any other damage."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise sqlite3.DatabaseError("the file holds text that is not valid UTF-8 "
                                    "(malformed)") from None


def _set_head(con: sqlite3.Connection, head: ChainHead) -> None:
    con.execute("INSERT OR REPLACE INTO meta VALUES ('head_seq', ?)", (str(head.seq),))
    con.execute("INSERT OR REPLACE INTO meta VALUES ('head_hash', ?)", (head.hash,))


def _entry(row: tuple[Any, ...]) -> LedgerEntry:
    _, qid, sql, t, marginal, total, mechs = row
    return LedgerEntry(query_id=qid, sql=sql, time=t,
                       marginal=decode_cost(json.loads(marginal)),
                       total_after=decode_cost(json.loads(total)),
                       mechanisms=tuple(decode_mechanism(m) for m in json.loads(mechs)))


def open_ledger(ledger: Any) -> Any:
    """None → in-memory; a path → SQLite file; a ledger object → itself."""
    if ledger is None:
        return MemoryLedger()
    if isinstance(ledger, (str, Path)):
        return SQLiteLedger(ledger)
    return ledger
