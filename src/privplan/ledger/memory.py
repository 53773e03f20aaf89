"""The in-memory ledger, and what every ledger shares: an entry, a charging transaction, a
policy fingerprint (see :mod:`privplan.ledger.store` for the rules every ledger keeps).

Privacy: a charge is appended under one lock and adopted after it; an exception appends nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from privplan.accounting.model import MechanismSpec
from privplan.ledger.file import _claim


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
    def unseen_mechanisms(self) -> list[MechanismSpec]: ...
    def next_query_id(self) -> str: ...
    def append(self, entry: LedgerEntry) -> None: ...
    def on_commit(self, action: Callable[[], None]) -> None: ...


def policy_fingerprint(policy: Any) -> str:
    text = json.dumps(policy.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------------------ in memory


class MemoryLedger:
    """An in-process ledger (lost when the process ends); thread-safe."""

    def __init__(self) -> None:
        self._entries: list[LedgerEntry] = []
        self._lock = threading.Lock()
        self._seen = 0

    def bind(self, budget: Any, policy: Any) -> None:
        """Nothing to check: an in-memory ledger lives and dies with its session."""

    def claim(self) -> None:
        """Reserve this ledger object for one session (see :func:`_claim`)."""
        _claim(self)

    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    def next_query_id(self) -> str:
        return f"q{len(self._entries) + 1}"

    def recorded_total(self) -> Any | None:
        """The total the last entry recorded (None when empty)."""
        return self._entries[-1].total_after if self._entries else None

    def recent_mechanisms(self, limit: int) -> list[MechanismSpec]:
        """The mechanisms of the last ``limit`` entries, in order."""
        return [m for e in self._entries[-limit:] for m in e.mechanisms] if limit > 0 else []

    def mechanisms_of(self, query_ids: Collection[str]) -> list[MechanismSpec]:
        """The mechanisms of the entries of ``query_ids``."""
        return [m for e in self._entries if e.query_id in query_ids for m in e.mechanisms]

    @contextmanager
    def charging(self) -> Iterator[Charging]:
        with self._lock:
            txn = _MemoryCharging(self)
            yield txn
            self._entries.extend(txn.appended)
            self._seen = txn.seen + len(txn.appended)
            txn.committed()

    def close(self) -> None:
        pass


class _Hooks:
    """``on_commit`` actions, run after the durable write (and only then)."""

    def __init__(self) -> None:
        self._after: list[Callable[[], None]] = []

    def on_commit(self, action: Callable[[], None]) -> None:
        self._after.append(action)

    def committed(self) -> None:
        for action in self._after:
            action()


class _MemoryCharging(_Hooks):
    def __init__(self, ledger: MemoryLedger) -> None:
        super().__init__()
        self.ledger = ledger
        self.appended: list[LedgerEntry] = []
        self.seen = ledger._seen

    def unseen(self) -> list[LedgerEntry]:
        out = self.ledger._entries[self.seen:]
        self.seen = len(self.ledger._entries)
        return out

    def unseen_mechanisms(self) -> list[MechanismSpec]:
        return [m for e in self.unseen() for m in e.mechanisms]

    def next_query_id(self) -> str:
        return f"q{len(self.ledger._entries) + len(self.appended) + 1}"

    def append(self, entry: LedgerEntry) -> None:
        self.appended.append(entry)
