"""The budget ledger: every charged mechanism, in order. This one lives in memory.

The accountant's total is recomputed from the ledger's entries with the composition theorem, so
the ledger is the single source of truth for what has been spent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from privplan.accounting.model import MechanismSpec


@dataclass(frozen=True)
class LedgerEntry:
    """One admitted query: its mechanisms, what it added to the total, and when."""

    query_id: str
    sql: str
    mechanisms: tuple[MechanismSpec, ...]
    marginal: Any
    total_after: Any
    time: float = field(default_factory=time.time)


class MemoryLedger:
    """An in-process ledger (lost when the process ends)."""

    def __init__(self) -> None:
        self._entries: list[LedgerEntry] = []

    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    def append(self, entry: LedgerEntry) -> None:
        self._entries.append(entry)

    def next_query_id(self) -> str:
        return f"q{len(self._entries) + 1}"
