"""The budget ledger: every charged mechanism, in order — in memory, or durable in SQLite
(:mod:`privplan.ledger.store`); its file, chain, checkpoint, seal and the owner's tools live
beside it in this package.

Privacy: the ledger is the only record of what was spent: no charge may be lost, lowered or skipped.
"""

from __future__ import annotations

from privplan.ledger.store import (
    FORMAT,
    Charging,
    LedgerEntry,
    MemoryLedger,
    SQLiteLedger,
    open_ledger,
    policy_fingerprint,
)

__all__ = [
    "FORMAT", "Charging", "LedgerEntry", "MemoryLedger", "SQLiteLedger", "open_ledger",
    "policy_fingerprint",
]
