"""The budget ledger: every charged mechanism, in order — in memory, or durable in SQLite.

The ledger is the single source of truth for what has been spent: the composed total is
recomputed from its entries with the composition theorem. Admission is an atomic
check-and-charge: :meth:`charging` gives exclusive access (for SQLite a ``BEGIN IMMEDIATE``
write transaction, so several processes sharing one file serialise), the caller catches up with
entries other processes committed, checks the budget, and appends; the entry is committed (WAL,
``synchronous=FULL``) before the caller may release anything (DESIGN.md invariant 3).

A damaged ledger is never reset: opening a truncated, corrupted or foreign file raises
:class:`LedgerError` and leaves the file as it is.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol

from privplan.accounting.model import MechanismSpec
from privplan.errors import LedgerError
from privplan.ledger_codec import (
    decode_cost,
    decode_mechanism,
    encode_cost,
    encode_mechanism,
)

FORMAT = "privplan-ledger-1"
_SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True)
class LedgerEntry:
    """One admitted query: its mechanisms, what it added to the total, and when."""

    query_id: str
    sql: str
    mechanisms: tuple[MechanismSpec, ...]
    marginal: Any
    total_after: Any
    time: float = field(default_factory=time.time)


class Charging(Protocol):
    """Exclusive access to the ledger for one check-and-charge."""

    def unseen(self) -> list[LedgerEntry]: ...
    def next_query_id(self) -> str: ...
    def append(self, entry: LedgerEntry) -> None: ...


def policy_fingerprint(policy: Any) -> str:
    text = json.dumps(policy.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class MemoryLedger:
    """An in-process ledger (lost when the process ends); thread-safe."""

    def __init__(self) -> None:
        self._entries: list[LedgerEntry] = []
        self._lock = threading.Lock()
        self._seen = 0

    def bind(self, budget: Any, policy: Any) -> None:
        """Nothing to check: an in-memory ledger lives and dies with its session."""

    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    def next_query_id(self) -> str:
        return f"q{len(self._entries) + 1}"

    @contextmanager
    def charging(self) -> Iterator[Charging]:
        with self._lock:
            yield _MemoryCharging(self)

    def close(self) -> None:
        pass


class _MemoryCharging:
    def __init__(self, ledger: MemoryLedger) -> None:
        self.ledger = ledger

    def unseen(self) -> list[LedgerEntry]:
        out = self.ledger._entries[self.ledger._seen:]
        self.ledger._seen = len(self.ledger._entries)
        return out

    def next_query_id(self) -> str:
        return self.ledger.next_query_id()

    def append(self, entry: LedgerEntry) -> None:
        self.ledger._entries.append(entry)
        self.ledger._seen = len(self.ledger._entries)


class SQLiteLedger:
    """A durable ledger in one SQLite file, safe to share between processes."""

    def __init__(self, path: str | Path, *, timeout: float = 120.0) -> None:
        self.path = Path(path)
        existed = self.path.exists()
        if existed:
            _check_file(self.path)
        try:
            self.con = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None,
                                       check_same_thread=False)
            self.con.execute("PRAGMA journal_mode=WAL")
            self.con.execute("PRAGMA synchronous=FULL")
            if existed:
                self._check_integrity()
            else:
                self._create()
        except sqlite3.DatabaseError as err:
            raise LedgerError(
                f"ledger '{self.path}' cannot be opened: {err}. The file is damaged or is not a "
                "privplan ledger; it was left untouched. Restore it from a backup — privplan never "
                "resets a ledger, because that would forget spent budget."
            ) from None
        self._seen = 0
        self._lock = threading.Lock()

    # -- set-up -------------------------------------------------------------------------------
    def _create(self) -> None:
        self.con.execute("BEGIN IMMEDIATE")
        self.con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self.con.execute(
            "CREATE TABLE IF NOT EXISTS entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "query_id TEXT NOT NULL UNIQUE, sql TEXT NOT NULL, time REAL NOT NULL, "
            "marginal TEXT NOT NULL, total_after TEXT NOT NULL, mechanisms TEXT NOT NULL)")
        self.con.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (FORMAT,))
        self.con.execute("COMMIT")

    def _check_integrity(self) -> None:
        (result,) = self.con.execute("PRAGMA quick_check").fetchone()
        if result != "ok":
            raise sqlite3.DatabaseError(f"integrity check failed: {result}")
        tables = {r[0] for r in self.con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"meta", "entries"} <= tables:
            raise sqlite3.DatabaseError("it has no privplan ledger tables")
        row = self.con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or row[0] != FORMAT:
            raise sqlite3.DatabaseError(f"unknown ledger format {row[0] if row else None!r}")

    def bind(self, budget: Any, policy: Any) -> None:
        """Record (first use) or check the budget and policy the ledger's entries were charged
        under. A different budget or policy would change what the entries mean, so it is refused."""
        fingerprint = policy_fingerprint(policy)
        want = {"budget": json.dumps(encode_cost(budget)), "policy": fingerprint}
        with self._write() as con:
            stored = dict(con.execute("SELECT key, value FROM meta").fetchall())
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

    # -- reading ------------------------------------------------------------------------------
    def stored_budget(self) -> Any | None:
        """The budget this ledger was first opened with (None for a new ledger)."""
        with self._lock:
            row = self.con.execute("SELECT value FROM meta WHERE key = 'budget'").fetchone()
        return decode_cost(json.loads(row[0])) if row else None

    def entries(self) -> tuple[LedgerEntry, ...]:
        with self._lock:
            rows = self._fetch(0)
        return tuple(_entry(r) for r in rows)

    def next_query_id(self) -> str:
        with self._lock:
            (n,) = self.con.execute("SELECT COUNT(*) FROM entries").fetchone()
        return f"q{n + 1}"

    def _fetch(self, after: int) -> list[tuple[Any, ...]]:
        try:
            return self.con.execute(
                "SELECT seq, query_id, sql, time, marginal, total_after, mechanisms FROM entries "
                "WHERE seq > ? ORDER BY seq", (after,)).fetchall()
        except sqlite3.DatabaseError as err:
            raise LedgerError(f"ledger '{self.path}' cannot be read: {err}") from None

    # -- writing ------------------------------------------------------------------------------
    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self.con.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as err:
                raise LedgerError(f"ledger '{self.path}' cannot be locked: {err}") from None
            try:
                yield self.con
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            else:
                self.con.execute("COMMIT")

    @contextmanager
    def charging(self) -> Iterator[Charging]:
        with self._write() as con:
            yield _SQLiteCharging(self, con)

    def close(self) -> None:
        self.con.close()


class _SQLiteCharging:
    def __init__(self, ledger: SQLiteLedger, con: sqlite3.Connection) -> None:
        self.ledger = ledger
        self.con = con

    def unseen(self) -> list[LedgerEntry]:
        rows = self.ledger._fetch(self.ledger._seen)
        if rows:
            self.ledger._seen = rows[-1][0]
        return [_entry(r) for r in rows]

    def next_query_id(self) -> str:
        (n,) = self.con.execute("SELECT COUNT(*) FROM entries").fetchone()
        return f"q{n + 1}"

    def append(self, entry: LedgerEntry) -> None:
        cur = self.con.execute(
            "INSERT INTO entries (query_id, sql, time, marginal, total_after, mechanisms) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (entry.query_id, entry.sql, entry.time, json.dumps(encode_cost(entry.marginal)),
             json.dumps(encode_cost(entry.total_after)),
             json.dumps([encode_mechanism(m) for m in entry.mechanisms])))
        self.ledger._seen = int(cur.lastrowid or self.ledger._seen)


def _entry(row: tuple[Any, ...]) -> LedgerEntry:
    _, qid, sql, t, marginal, total, mechs = row
    return LedgerEntry(query_id=qid, sql=sql, time=t,
                       marginal=decode_cost(json.loads(marginal)),
                       total_after=decode_cost(json.loads(total)),
                       mechanisms=tuple(decode_mechanism(m) for m in json.loads(mechs)))


def _check_file(path: Path) -> None:
    if path.is_dir():
        raise LedgerError(f"ledger path '{path}' is a directory; pass a file path")
    with path.open("rb") as f:
        header = f.read(len(_SQLITE_HEADER))
    if header != _SQLITE_HEADER:
        what = "empty" if not header else "not an SQLite file"
        raise LedgerError(
            f"ledger '{path}' is {what} (truncated or corrupted?). It was left untouched: "
            "privplan never resets a ledger, because that would forget spent budget. Restore it "
            "from a backup, or pass a new path to start a new budget.")


def open_ledger(ledger: Any) -> Any:
    """None → in-memory; a path → SQLite file; a ledger object → itself."""
    if ledger is None:
        return MemoryLedger()
    if isinstance(ledger, (str, Path)):
        return SQLiteLedger(ledger)
    return ledger
