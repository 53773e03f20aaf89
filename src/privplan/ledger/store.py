"""The budget ledger: every charged mechanism, in order — in memory, or durable in SQLite.

The ledger is the single source of truth for what has been spent: the composed total is
recomputed from its entries with the composition theorem. Admission is an atomic
check-and-charge: :meth:`charging` gives exclusive access (for SQLite a ``BEGIN IMMEDIATE``
write transaction, so several processes sharing one file serialise), the caller catches up with
entries other processes committed, checks the budget, and appends; the entry is committed (WAL;
by default ``synchronous=FULL``: flushed to disk, one flush per charge) before the caller may
release anything (DESIGN.md invariant 3). What each ``durability`` setting survives:
:mod:`privplan.ledger.durability`.

In-memory state follows the durable write, never precedes it (invariant 9): what a charging
transaction reads or appends is *staged* (:mod:`privplan.ledger.txn`), and applied only after
its COMMIT returns. If the COMMIT fails (disk full, an I/O error), SQLite rolls the transaction
back and the ledger forgets what it had staged — and everything it had seen — so the next
transaction rebuilds from the file; the caller's ``on_failure`` hooks drop their state too.

Nothing written is derived from a stale read: the budget record and the chain's root are
written in one transaction (:meth:`bind`) that every opener runs and re-reads, and a charge
takes the chain's start and head from the meta row it reads under the write lock. So no
interleaving of opens and charges, by any number of processes, writes an entry off the wrong
start.

A damaged or altered ledger is never reset: opening a truncated, corrupted, foreign or edited
file raises :class:`LedgerError` and leaves the file as it is (:mod:`privplan.ledger.chain`,
:mod:`privplan.ledger.record`; with an owner key also :mod:`privplan.ledger.seal`). Before each
charge the ledger checks that the file at its path is still the one it opened, not truncated or
overwritten in place (:meth:`_check_file`): a charge recorded where no later session reads it
would be lost.

Privacy: the budget check and the append are one transaction, committed before anything is released.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from privplan.accounting.model import MechanismSpec
from privplan.errors import LedgerError
from privplan.ledger.chain import ChainHead, changed, root_hash, verify_rows
from privplan.ledger.checkpoint import CHECKPOINT_EVERY, binding, bound_checkpoint, checkpoint_due
from privplan.ledger.codec import decode_cost, decode_mechanism, encode_cost
from privplan.ledger.durability import apply, durability_of
from privplan.ledger.file import (
    _DB_ERRORS,
    FORMAT,
    FORMAT_1,
    FORMAT_2,
    FileStamp,
    _check_directory,
    _check_file,
    _claim,
    _create,
    _failure,
    close_leaving,
    file_stamp,
)
from privplan.ledger.history import LedgerHistory
from privplan.ledger.memory import (
    Charging,
    LedgerEntry,
    MemoryLedger,
    policy_fingerprint,
)
from privplan.ledger.migrate import migrate_2, policy_json_of
from privplan.ledger.record import Record, read_record
from privplan.ledger.seal import Seal, check_seal, owner_key, read_seal, seal_path, write_seal
from privplan.ledger.txn import (
    FIELDS,
    SQLiteCharging,
    entry_of,
    set_head,
    snapshot,
    stored_hash,
    text_factory,
)

_JITTER = secrets.SystemRandom()
"""The retry backoff's jitter (not privacy noise; drawn from the OS source all the same, so
no module-level PRNG exists in the package)."""

__all__ = ["FORMAT", "Charging", "LedgerEntry", "MemoryLedger", "SQLiteLedger", "open_ledger",
           "policy_fingerprint"]

log = logging.getLogger("privplan")


class SQLiteLedger(LedgerHistory):
    """A durable ledger in one SQLite file, safe to share between processes.

    ``key``: the owner key (bytes or text; default ``PRIVPLAN_LEDGER_KEY_FILE`` or
    ``PRIVPLAN_LEDGER_KEY``), see :mod:`privplan.ledger.seal`. ``durability``: ``"full"``
    (default, or ``PRIVPLAN_LEDGER_DURABILITY``), ``"copyable"`` or ``"process"`` — what a
    charge that returned survives, see :mod:`privplan.ledger.durability`."""

    def __init__(self, path: str | Path, *, timeout: float = 120.0,
                 key: bytes | str | None = None, durability: str | None = None) -> None:
        self.path = Path(path)
        self.durability = durability_of(durability)
        # re-entrant: a read made inside a charge (same thread) must not wait for itself
        self._lock = threading.RLock()
        self._failure_hooks: list[Callable[[], None]] = []
        self._key = owner_key(key)
        self._seal = seal_path(self.path)
        _check_directory(self.path)
        if not self.path.exists():
            _create(self.path)
        _check_file(self.path)
        self._verified = ChainHead(0, "")  # the last entry this process verified
        self._seen = 0  # the last entry the session consumed (admitted)
        self._checkpoint: tuple[int, bytes] | None = None  # bound to the chain (verified)
        self._checkpoint_seq = 0  # the newest checkpoint this process knows of
        self.checkpoint_every = CHECKPOINT_EVERY
        self._quiet: tuple[int, FileStamp] | None = None  # see _check_file
        self._recent: list[tuple[int, str, list[MechanismSpec]]] = []  # see LedgerHistory
        self._recent_limit = 0
        deadline = time.monotonic() + timeout
        for attempt in itertools.count():
            try:
                self.con = sqlite3.connect(str(self.path), timeout=timeout,
                                           isolation_level=None, check_same_thread=False)
                self.con.text_factory = text_factory
                # everything is checked before anything could be written (even the journal mode)
                self._check_integrity()
                self._stamp = self._open_stamp()
                self._verify()
                apply(self.con, self.durability)
                break
            except _DB_ERRORS as err:
                with contextlib.suppress(Exception):
                    self.con.close()
                if _busy(err) and time.monotonic() < deadline:
                    # (SQLite answers "locked" at once, without waiting, in a few moments of a
                    # new file's life: turning it to WAL, recovering the WAL index. Opening only
                    # reads, so it is tried again: many processes opening at once all open.)
                    time.sleep(min(0.2, 0.005 * 2 ** min(attempt, 6)) * _JITTER.random())
                    continue
                raise _failure(self.path, err, "opening it") from None
            except LedgerError:
                self.con.close()
                raise

    @property
    def format(self) -> str:
        """The format the file was verified under when opened (or migrated to since)."""
        return FORMAT if self._ledger_id else FORMAT_2

    @property
    def keyed(self) -> bool:
        """Whether an owner key checks this ledger's head MAC and seal."""
        return self._key is not None and self._ledger_id != ""

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
        if row is not None and row[0] == FORMAT_1:
            raise LedgerError(
                f"ledger '{self.path}' is of format 1, written before privplan chained its "
                "entries: nothing in it can be verified, so it is not upgraded by itself. If you "
                "(the owner) know privplan wrote it and nobody edited it, migrate it with "
                f"`privplan ledger migrate --from-format-1 --policy POLICY {self.path}`.")
        if row is None or row[0] not in (FORMAT, FORMAT_2):
            raise sqlite3.DatabaseError(f"unknown ledger format {row[0] if row else None!r}")

    def _open_stamp(self) -> FileStamp:
        stamp = file_stamp(self.path)
        if stamp is None:
            raise LedgerError(f"ledger '{self.path}' vanished while it was being opened.")
        self._min_size = stamp.size
        return stamp

    def _meta(self) -> dict[str, str]:
        return dict(self.con.execute("SELECT key, value FROM meta").fetchall())

    def _record(self) -> Record:
        return read_record(self._meta(), self.path, self._key)

    def _verify(self) -> None:
        """Verify the meta row and the chain: every entry, or, when a checkpoint bound to the
        chain covers the first entries, every entry from the checkpoint's on (the entries
        before it are verified whenever they are read); with an owner key, its MAC and seal."""
        seal = read_seal(self._seal, self._key) if self._key is not None else None
        try:
            with snapshot(self.con):  # the meta row and the entries as of one moment
                record = self._record()
                start, checkpoint = record.start(), None
                if record.bound:
                    checkpoint = bound_checkpoint(self.con, record.root)
                if checkpoint is not None:
                    start = checkpoint[2]
                rows = self.con.execute(
                    f"SELECT {FIELDS}, hash FROM entries WHERE seq > ? ORDER BY seq",
                    (start.seq,)).fetchall()
                sealed = stored_hash(self.con, record, seal.head.seq if seal else None)
        except _DB_ERRORS as err:
            raise _failure(self.path, err, "reading it") from None
        head = verify_rows(self.path, start, rows)
        if not record.bound and rows:
            raise changed(self.path, "it holds entries but no budget record")
        if record.bound and record.head != head:
            stored = record.head.seq if record.head else 0
            raise changed(self.path, f"its last entries are missing or were changed (the record "
                                     f"of its last entry says {stored}, the entries end at "
                                     f"{head.seq})")
        if record.format == FORMAT and self._key is not None:
            self._check_owner(record, sealed, seal)
        if checkpoint is not None:
            self._checkpoint = checkpoint[:2]
            self._checkpoint_seq = checkpoint[0]
        self._ledger_id = record.ledger_id
        self._verified = head if record.bound else ChainHead(0, "")

    def _owner_check(self, con: sqlite3.Connection, record: Record) -> None:
        """(In a transaction.) :meth:`_check_owner` with the seal read now."""
        if self._key is not None:
            seal = read_seal(self._seal, self._key)
            self._check_owner(record, stored_hash(con, record, seal.head.seq if seal else None),
                              seal)

    def _check_owner(self, record: Record, sealed: str | None, seal: Seal | None) -> None:
        """With an owner key: the head must carry its MAC (checked in :func:`read_record`) once
        anything was charged, and the file must hold the sealed entry."""
        if self._key is None or not record.bound or record.head is None:
            return
        if record.mac is None and record.head.seq > 0:
            raise LedgerError(
                f"ledger '{self.path}' was not kept under the owner key (its last entry carries "
                "no MAC), so a rewritten or older copy could not be told apart. If you (the "
                "owner) know it is the latest, adopt it with `privplan ledger seal` (it "
                "verifies the chain first).")
        check_seal(self._seal, self.path, seal, record.ledger_id, record.head, sealed)

    def _check_may_write(self, record: Record) -> None:
        """A session without the owner key may not write to a ledger kept under one: its head
        would lose the MAC, and every keyed session would then refuse the file."""
        if self._key is None and record.mac is not None:
            raise LedgerError(
                f"ledger '{self.path}' is kept under an owner key; this process has none. Set "
                "PRIVPLAN_LEDGER_KEY_FILE (or PRIVPLAN_LEDGER_KEY) as the owner configured it. "
                "Nothing was charged.")

    def checkpoint(self) -> tuple[int, bytes] | None:
        """The checkpoint found bound to the chain when the ledger was opened: (the entry it
        covers up to, its bytes), or None. See :mod:`privplan.ledger.checkpoint`."""
        return self._checkpoint

    def resume(self, seq: int) -> None:
        """The session's accounting was restored from the checkpoint up to entry ``seq``: only
        later entries are unseen."""
        with self._lock:
            self._seen = seq

    def save_checkpoint(self, export: Callable[[int], bytes]) -> bool:
        """Store ``export(seq)`` (the session's accounting after entry ``seq``, the last it
        consumed) as the checkpoint, when one is due (:func:`checkpoint_due`). Runs under the
        ledger's lock, so the state and the entry it covers agree."""
        if not checkpoint_due(self._seen, self._checkpoint_seq, self.checkpoint_every):
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
            blob = export(seq)
            root = self._record().root
            con.execute("INSERT OR REPLACE INTO checkpoint VALUES (1, ?, ?, ?)",
                        (seq, binding(seq, found[0], root, blob), blob))
        self._checkpoint_seq = seq
        return True

    def bind(self, budget: Any, policy: Any) -> None:
        """Record (first use) or check the budget and policy the ledger's entries were charged
        under, in one transaction with the chain's root and head. A different budget or policy
        would change what the entries mean, so it is refused. The policy itself is kept too,
        so the ledger can be verified on its own. A file of format 2 is verified whole and
        migrated here first (:mod:`privplan.ledger.migrate`)."""
        text = policy_json_of(policy)
        want = {"budget": json.dumps(encode_cost(budget)), "policy": policy_fingerprint(policy)}
        with self._write() as con:
            migrated = migrate_2(con, self.path, self._key, text)
            record = self._record()
            if migrated is not None or self._ledger_id == "":
                # (migrated, here or by another process since this one verified it as format
                # 2: the old chain's hashes are gone, the chain is read again from its root)
                self._ledger_id, self._verified = record.ledger_id, ChainHead(0, "")
            elif record.ledger_id != self._ledger_id:
                raise self._replaced("another ledger's records are in it now")
            if not record.bound:
                self._check_may_write(record)
                root = root_hash(FORMAT, want["budget"], want["policy"], record.ledger_id)
                con.executemany("INSERT INTO meta VALUES (?, ?)", [
                    ("budget", want["budget"]), ("policy", want["policy"]),
                    ("policy_json", text), ("root", root)])
                record = self._record_after_bind(record, want, text, root)
                set_head(con, record, ChainHead(0, root), self._key)
            else:
                self._check_binding(record, budget, want)
            record = self._record()
            self._owner_check(con, record)
        if self._verified.seq == 0:
            self._verified = record.start()  # (the root read in that transaction)
        if migrated is not None:
            log.warning("ledger %s: migrated from %s to %s (verified first)", self.path,
                        FORMAT_2, FORMAT)
        self._seal_head(record.head)

    @staticmethod
    def _record_after_bind(record: Record, want: dict[str, str], text: str,
                           root: str) -> Record:
        return Record(record.format, record.ledger_id, want["budget"], want["policy"], text,
                      root, ChainHead(0, root), None)

    def _check_binding(self, record: Record, budget: Any, want: dict[str, str]) -> None:
        if record.budget != want["budget"]:
            old = decode_cost(json.loads(record.budget or "{}"))
            raise LedgerError(
                f"ledger '{self.path}' belongs to a session with budget {old.describe()} "
                f"({type(old).__name__}), not {budget.describe()} ({type(budget).__name__}). "
                "Why: a ledger composes what its entries spent against the one budget it was "
                "opened with. Fix: open it with the same budget, or use a new ledger file for "
                "a new budget.")
        if record.policy != want["policy"]:
            raise LedgerError(
                f"ledger '{self.path}' was charged under a different policy; its entries "
                "cannot be composed with queries under this one. Use the original policy "
                "or a new ledger file.")

    def _seal_head(self, head: ChainHead | None) -> None:
        """Advance the seal after a commit (with an owner key). A failure is logged, not
        raised: the charge is committed, and a seal that lags is still a lower bound."""
        if self._key is None or head is None:
            return
        try:
            write_seal(self._seal, self._key, self._ledger_id, head)
        except LedgerError as err:
            log.warning("%s", err)

    # -- reading ------------------------------------------------------------------------------
    def stored_budget(self) -> Any | None:
        """The budget this ledger was first opened with (None for a new ledger)."""
        with self._lock, self._reading():
            record = self._record()
        return decode_cost(json.loads(record.budget)) if record.budget else None

    def stored_policy(self) -> dict[str, Any] | None:
        """The policy the entries were charged under, as recorded (None if not recorded)."""
        with self._lock, self._reading():
            record = self._record()
        return json.loads(record.policy_json) if record.policy_json else None

    def entries(self) -> tuple[LedgerEntry, ...]:
        """Every entry, verified from the chain's root to the recorded head."""
        with self._lock, self._reading():
            record = self._record()
            rows, head = self._fetch(0, verify_from=record.start())
            self._check_head(record, head)
        return tuple(entry_of(r) for r in rows)

    def recorded_total(self) -> Any | None:
        """The composed total the last entry recorded (None for an empty ledger), after
        verifying the entries other processes appended since. Each entry's total was computed,
        under the ledger's lock, by composing it with every entry before it, so the last one is
        the total of the whole ledger; it is what the budget was enforced against."""
        with self._lock, self._reading():
            self._advance()
            row = self.con.execute("SELECT total_after FROM entries WHERE seq = ?",
                                   (self._verified.seq,)).fetchone()
        return decode_cost(json.loads(row[0])) if row else None

    def mechanisms_through(self, seq: int) -> list[MechanismSpec]:
        """Every mechanism of entries 1..``seq``, read after verifying them from the root."""
        with self._lock, self._reading():
            rows, head = self._fetch(0, self._record().start(), through=seq)
        if head.seq != seq or len(rows) != seq:
            raise changed(self.path, f"entries before {seq} are missing")
        return [decode_mechanism(m) for r in rows for m in json.loads(r[6])]

    def next_query_id(self) -> str:
        with self._lock:
            (n,) = self.con.execute("SELECT COUNT(*) FROM entries").fetchone()
        return f"q{n + 1}"

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """A snapshot read; SQLite failures become a :class:`LedgerError` naming the cause."""
        try:
            with snapshot(self.con):
                yield
        except _DB_ERRORS as err:
            raise _failure(self.path, err, "reading it") from None

    def _advance(self) -> tuple[Record, ChainHead]:
        """(In a snapshot.) Verify the entries added since the last verified one and that they
        end at the recorded head; the last verified entry must still be there, unchanged."""
        record = self._record()
        start = self._verified if self._verified.seq else record.start()
        if start.seq and stored_hash(self.con, record, start.seq) != start.hash:
            raise self._replaced(f"entry {start.seq}, verified before, is gone or changed")
        _, head = self._fetch(start.seq, verify_from=start)
        self._check_head(record, head)
        self._verified = head
        return record, head

    def _check_head(self, record: Record, head: ChainHead) -> None:
        if record.bound and record.head != head:
            raise changed(self.path, f"its last entries are missing or were changed (the "
                                     f"record of its last entry says "
                                     f"{record.head.seq if record.head else 0}, the entries "
                                     f"end at {head.seq})")

    def _fetch(self, after: int, verify_from: ChainHead, through: int | None = None
               ) -> tuple[list[tuple[Any, ...]], ChainHead]:
        """Entries after seq ``after`` (up to ``through``), each verified against the chain
        from ``verify_from``, and the chain's new head."""
        try:
            rows = self.con.execute(
                f"SELECT {FIELDS}, hash FROM entries WHERE seq > ? AND seq <= ? ORDER BY seq",
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
            changes = self.con.total_changes
            try:
                self._check_file()
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
            if self.con.total_changes != changes:
                self._after_write()
            if committed is not None:
                committed()

    def _after_write(self) -> None:
        """After a write: stamp the main file (see :meth:`_check_file`), having first copied
        the WAL into it when the setting says so (``"copyable"``: a passive checkpoint, which
        waits for no one; then the main file alone holds every committed charge).

        Without that copy the stamp holds all the same: the main file is written only by a
        checkpoint, and SQLite checkpoints only inside a COMMIT (every 1000 WAL pages) or when
        the last connection closes — this connection's own ran before the stamp, another
        process's changes ``data_version``, and none runs while this one is open and idle."""
        self._quiet = None
        try:
            # (read first: a commit by another process after this point, whose checkpoint may
            # write the file after the stamp, changes it)
            (version,) = self.con.execute("PRAGMA data_version").fetchone()
            whole = True
            if self.durability.copies:
                busy, frames, copied = self.con.execute(
                    "PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                whole = busy == 0 and frames == copied
        except sqlite3.Error:
            return
        stamp = file_stamp(self.path)
        if whole and stamp is not None:
            self._quiet = (version, stamp)
            self._min_size = max(self._min_size, stamp.size)

    def _forget(self) -> None:
        """After a failed write: forget what was seen, so the next read rebuilds from the file,
        and tell the sessions to drop their accounting."""
        self._seen = 0
        self._quiet = None
        self._recent = []
        for action in self._failure_hooks:
            action()

    def _check_file(self) -> None:
        """(Under the write lock.) The file at the path must be the one this session opened:
        the same inode, no smaller than it was (SQLite never shrinks it), and, when no other
        process committed since this one's last write (stamped then: see
        :meth:`_after_write`), not written since. SQLite itself does not notice a file
        overwritten in place: it keeps the pages it cached while the WAL is unchanged, and
        would append to a file it no longer describes. The checks in
        :class:`~privplan.ledger.txn.SQLiteCharging` (the ledger's id, the last entry
        verified, the recorded head) then read the file itself."""
        now = file_stamp(self.path)
        if now is None or now.identity != self._stamp.identity:
            raise self._replaced("it was deleted, moved or replaced, or its directory was")
        if now.size < self._min_size:
            raise self._replaced("it was truncated")
        if self._quiet is not None:
            version, stamp = self._quiet
            (current,) = self.con.execute("PRAGMA data_version").fetchone()
            if current == version and now.content != stamp.content:
                raise self._replaced("it was written by something other than privplan: "
                                     "overwritten in place?")

    def _replaced(self, how: str) -> LedgerError:
        return LedgerError(
            f"ledger '{self.path}' is no longer the file this session opened ({how}). Charging "
            "it would record spent budget where no later session reads it, so nothing was "
            "charged or released. Restore the file, then open a new session.")

    @contextmanager
    def charging(self) -> Iterator[Charging]:
        txn: SQLiteCharging | None = None

        def committed() -> None:  # now (and only now) the staged state becomes the ledger's
            assert txn is not None
            self._seen, self._verified = txn.seen, txn.verified
            txn.committed()

        with self._write(committed) as con:
            txn = SQLiteCharging(self, con)
            yield txn
        if txn.head != txn.record.head:
            self._seal_head(txn.head)

    def close(self) -> None:
        """Close the connection; a file found replaced or overwritten is left as it is
        (:func:`~privplan.ledger.file.close_leaving`)."""
        try:
            self._check_file()
            ours = True
        except (LedgerError, *_DB_ERRORS):
            ours = False
        close_leaving(self.con, self.path, ours)


def _busy(err: BaseException) -> bool:
    name = getattr(err, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in str(err)


def open_ledger(ledger: Any) -> Any:
    """None → in-memory; a path → SQLite file; a ledger object → itself."""
    if ledger is None:
        return MemoryLedger()
    if isinstance(ledger, (str, Path)):
        return SQLiteLedger(ledger)
    return ledger
