"""One charging transaction on a SQLite ledger, and the row helpers every ledger read shares.

Why it is its own step: everything a charge writes must be derived from what this transaction
read, never from what the process remembered. So a transaction starts by reading the meta row
under the write lock (:func:`privplan.ledger.record.read_record`), checks that the ledger is
still the one the session verified (its id, the last entry it verified, the owner's seal), takes
the chain's start from the root it just read, verifies every entry added since, and only then
may append. What it reads or appends is *staged* here and becomes the ledger's only after the
COMMIT (:meth:`privplan.ledger.store.SQLiteLedger.charging`).

Privacy: a charge writes only what it read under the write lock; its state is kept only on COMMIT.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from privplan.accounting.model import MechanismSpec
from privplan.errors import LedgerError
from privplan.ledger.chain import ChainHead, changed, entry_hash, head_check
from privplan.ledger.codec import decode_cost, decode_mechanism, encode_cost, encode_mechanism
from privplan.ledger.file import _DB_ERRORS, FORMAT, _failure
from privplan.ledger.memory import LedgerEntry, _Hooks
from privplan.ledger.record import Record, read_record
from privplan.ledger.seal import head_mac

FIELDS = "seq, query_id, sql, time, marginal, total_after, mechanisms"


class ChargedLedger(Protocol):
    """What a charging transaction reads and asks of its ledger
    (:class:`~privplan.ledger.store.SQLiteLedger` is one; it imports this module, so the
    transaction names what it needs instead of importing the store)."""

    @property
    def path(self) -> Path: ...
    @property
    def _key(self) -> bytes | None: ...
    @property
    def _ledger_id(self) -> str: ...
    @property
    def _seen(self) -> int: ...
    @property
    def _verified(self) -> ChainHead: ...

    def _replaced(self, how: str) -> LedgerError: ...
    def _owner_check(self, con: sqlite3.Connection, record: Record) -> None: ...
    def _check_may_write(self, record: Record) -> None: ...
    def _fetch(self, after: int, verify_from: ChainHead, through: int | None = None
               ) -> tuple[list[tuple[Any, ...]], ChainHead]: ...


class SQLiteCharging(_Hooks):
    """One charging transaction: reads and appends are staged until the COMMIT succeeds.

    ``verified`` is the last entry whose hash this process has checked; entries after it are
    verified as they are read (each continues the chain from it). ``seen`` is the last entry
    the session has consumed. ``head`` is the last entry the file records (read in this
    transaction; moved by this transaction's append)."""

    def __init__(self, ledger: ChargedLedger, con: sqlite3.Connection) -> None:
        super().__init__()
        self.ledger = ledger
        self.con = con
        self.seen = ledger._seen
        try:
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        except _DB_ERRORS as err:
            raise _failure(ledger.path, err, "reading it") from None
        record = read_record(meta, ledger.path, ledger._key)
        if record.format != FORMAT or not record.bound or record.head is None:
            raise LedgerError(f"ledger '{ledger.path}' has no budget record yet (bind it to "
                              "a budget first: a session does so when it opens it).")
        if record.ledger_id != ledger._ledger_id:
            raise ledger._replaced("another ledger's records are in it now")
        self.record: Record = record
        self.head: ChainHead = record.head
        verified = ledger._verified
        if verified.seq == 0:
            verified = record.start()  # (the root read now, never one remembered)
        elif stored_hash(con, record, verified.seq) != verified.hash:
            raise ledger._replaced(f"entry {verified.seq}, verified before, is gone or changed")
        self.verified = verified
        ledger._owner_check(con, record)

    def _verify_new(self) -> None:
        """Verify the entries appended (by any process) after ``verified``, and check they end
        at the file's record of its last entry (no entry vanished since it was verified)."""
        _, self.verified = self.ledger._fetch(self.verified.seq, verify_from=self.verified)
        if self.head != self.verified:
            raise changed(self.ledger.path, f"its last entries changed while it was open (the "
                                            f"record of its last entry says {self.head.seq}, "
                                            f"the entries end at {self.verified.seq})")

    def _rows(self, columns: str) -> list[tuple[Any, ...]]:
        try:
            return self.con.execute(f"SELECT {columns} FROM entries WHERE seq > ? AND seq <= ? "
                                    "ORDER BY seq", (self.seen, self.verified.seq)).fetchall()
        except _DB_ERRORS as err:
            raise _failure(self.ledger.path, err, "reading it") from None

    def unseen(self) -> list[LedgerEntry]:
        self._verify_new()
        rows = self._rows(FIELDS)
        self.seen = self.verified.seq
        return [entry_of(r) for r in rows]

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
        self.ledger._check_may_write(self.record)
        fields = (self.verified.seq + 1, entry.query_id, entry.sql, entry.time,
                  json.dumps(encode_cost(entry.marginal)),
                  json.dumps(encode_cost(entry.total_after)),
                  json.dumps([encode_mechanism(m) for m in entry.mechanisms]))
        head = ChainHead(int(fields[0]), entry_hash(self.verified.hash, fields))
        try:
            self.con.execute(
                f"INSERT INTO entries ({FIELDS}, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (*fields, head.hash))
            set_head(self.con, self.record, head, self.ledger._key)
        except _DB_ERRORS as err:
            raise _failure(self.ledger.path, err, "recording a charge") from None
        self.verified = self.head = head
        self.seen = head.seq


def stored_hash(con: sqlite3.Connection, record: Record, seq: int | None) -> str | None:
    """The stored hash of entry ``seq`` (the root for 0; None if there is no such entry)."""
    if seq is None:
        return None
    if seq == 0:
        return record.root
    row = con.execute("SELECT hash FROM entries WHERE seq = ?", (seq,)).fetchone()
    return None if row is None else str(row[0])


def set_head(con: sqlite3.Connection, record: Record, head: ChainHead,
             key: bytes | None) -> None:
    """Record ``head`` as the last entry, with its check value (and the owner's MAC)."""
    values = [("head_seq", str(head.seq)), ("head_hash", head.hash),
              ("head_check", head_check(record.root, head))]
    if key is not None:
        values.append(("head_mac", head_mac(key, record.ledger_id, record.root, head)))
    con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values)


@contextmanager
def snapshot(con: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every statement inside sees the file as of one moment (WAL), so
    another process's append cannot fall between reading the head and reading the entries.
    Inside a transaction already (a read made during a charge), that one is the moment."""
    if con.in_transaction:
        yield
        return
    con.execute("BEGIN")
    try:
        yield
    finally:
        con.execute("COMMIT")


def text_factory(raw: bytes) -> str:
    """Stored text as UTF-8; text that is not (a damaged file) is a database error, refused
    like any other damage."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise sqlite3.DatabaseError("the file holds text that is not valid UTF-8 "
                                    "(malformed)") from None


def entry_of(row: tuple[Any, ...]) -> LedgerEntry:
    _, qid, sql, t, marginal, total, mechs = row
    return LedgerEntry(query_id=qid, sql=sql, time=t,
                       marginal=decode_cost(json.loads(marginal)),
                       total_after=decode_cost(json.loads(total)),
                       mechanisms=tuple(decode_mechanism(m) for m in json.loads(mechs)))
