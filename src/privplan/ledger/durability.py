"""How durable a charge is when :meth:`~privplan.ledger.store.SQLiteLedger.charging` returns,
and what that costs: the SQLite settings of a ledger connection, one named setting each.

Why it is a choice at all: a charge must be on disk before the session runs anything (DESIGN.md
invariant 3), and the disk's flush (``fdatasync``) is most of what a durable charge costs —
0.2 ms to 4 ms each on the shared machine the benchmarks run on, against 1-4 ms for a whole
query with an in-memory ledger. Each setting says exactly which failures a charge that returned
survives:

``"full"`` (the default): WAL, ``synchronous=FULL``. The COMMIT flushes the WAL before it
    returns: **one flush per charge** (SQLite adds one more, the WAL's header, only when it
    starts the WAL over after copying it into the main file, about every 1000 pages). A charge
    that returned survives the process being killed **and** an OS crash or power loss. The WAL
    is copied into the main file by SQLite every 1000 pages and when the last connection
    closes; between those, the newest charges are in ``<ledger>-wal`` only, so a plain ``cp`` of
    the main file alone while a session is open can miss them (``privplan ledger backup``
    copies both, consistently).
``"copyable"``: as ``"full"``, and each charge is also copied into the main file (a passive
    WAL checkpoint: two more flushes, and the WAL's header flush on the next charge) before the
    session runs anything, so a plain ``cp`` of the main file between charges holds every
    charge. This was the only behaviour before; it costs three to four flushes per charge.
``"process"`` (explicit opt-in, never the default): WAL, ``synchronous=NORMAL``. The COMMIT
    writes the WAL without flushing it: **no flush per charge**. A charge that returned
    survives the process being killed (the OS holds the written WAL), **not** an OS crash or
    power loss: the last charges before one may be lost, and the budget they spent spent again.
    Use it only where a lost charge after a power cut is acceptable (e.g. a budget that is
    itself a safety margin), or on a file system that orders writes.

Every setting keeps the budget check and the append in one write transaction (``BEGIN
IMMEDIATE``), so processes sharing a file never overspend, and every setting is crash-safe:
a process killed at any point leaves either the whole charge or none of it.

Privacy: the default flushes each charge before anything is released; weaker is opt-in only.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

from privplan.errors import LedgerError

DURABILITY_ENV = "PRIVPLAN_LEDGER_DURABILITY"
"""The setting a ledger opened without ``durability=`` uses (default ``"full"``)."""


@dataclass(frozen=True)
class Durability:
    """One setting: its name, SQLite's ``synchronous`` level, and whether each write is
    copied into the main file before the charge returns."""

    name: str
    synchronous: str
    copies: bool
    survives_power_loss: bool


SETTINGS = {
    "full": Durability("full", "FULL", copies=False, survives_power_loss=True),
    "copyable": Durability("copyable", "FULL", copies=True, survives_power_loss=True),
    "process": Durability("process", "NORMAL", copies=False, survives_power_loss=False),
}
DEFAULT = "full"


def durability_of(name: str | None) -> Durability:
    """The setting named ``name``; None: ``PRIVPLAN_LEDGER_DURABILITY``, else ``"full"``."""
    chosen = name if name is not None else (os.environ.get(DURABILITY_ENV) or DEFAULT)
    setting = SETTINGS.get(chosen.strip().lower())
    if setting is None:
        source = "durability=" if name is not None else DURABILITY_ENV
        raise LedgerError(
            f"unknown ledger durability {chosen!r} ({source}). Choose 'full' (the default: "
            "each charge flushed to disk, survives power loss), 'copyable' (as full, and each "
            "charge also copied into the main file) or 'process' (no flush: survives a killed "
            "process, not power loss).")
    return setting


def apply(con: sqlite3.Connection, setting: Durability) -> None:
    """Put the connection in WAL mode at the setting's ``synchronous`` level (both are checked:
    a connection that did not take them is refused, not used at a weaker level)."""
    (mode,) = con.execute("PRAGMA journal_mode=WAL").fetchone()
    con.execute(f"PRAGMA synchronous={setting.synchronous}")
    (level,) = con.execute("PRAGMA synchronous").fetchone()
    if str(mode).lower() != "wal" or level != _LEVELS[setting.synchronous]:
        raise sqlite3.OperationalError(
            f"the ledger connection did not take journal_mode=WAL, synchronous="
            f"{setting.synchronous} (it has {mode}, {level})")


_LEVELS = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}
