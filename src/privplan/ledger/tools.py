"""The owner's ledger tools: a consistent backup, and adopting a ledger under the owner key.

Why a backup command: the ledger is a SQLite file in WAL mode. A plain ``cp`` taken while a
session is charging can miss committed charges still in the WAL (privplan copies the WAL into
the file after each charge, but a copy made in between, or while a reader held the WAL, misses
them) or catch a page half written. Restoring such a copy gives spent budget back, and without
the owner key nothing can tell. :func:`backup_ledger` copies through SQLite's backup API: one
consistent snapshot of every committed entry, verified before it is kept (under the owner key,
sealed at its own path first: see :func:`backup_ledger`).

Why sealing is explicit: a session with the owner key refuses a ledger whose head carries no
MAC, or that does not hold its seal's entry — a ledger from before the key, or one restored
from a backup on purpose, looks exactly like a rollback. Only the owner can say it is not:
:func:`seal_ledger` verifies the chain, then writes the MAC and a new seal.

Privacy: a backup is one verified snapshot of committed entries; sealing needs a verified ledger.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from privplan.errors import LedgerError
from privplan.ledger.chain import changed, verify_rows
from privplan.ledger.file import _DB_ERRORS, FORMAT, _failure, owner_transaction
from privplan.ledger.migrate import migrate_2
from privplan.ledger.record import read_record
from privplan.ledger.seal import head_mac, owner_key, seal_path, write_seal
from privplan.ledger.store import SQLiteLedger
from privplan.ledger.txn import FIELDS, text_factory


def backup_ledger(source: str | Path, dest: str | Path) -> tuple[int, Any]:
    """Copy the ledger at ``source`` to the new file ``dest`` (never overwritten) as of one
    moment, verify the copy, and return (its entries, its recorded total)."""
    source, dest = Path(source), Path(dest)
    if not source.exists():
        raise LedgerError(f"no ledger at '{source}'. Check the path.")
    if dest.exists() or dest.is_symlink():
        raise LedgerError(f"'{dest}' exists; a backup is written to a new file only.")
    if not dest.parent.is_dir():
        raise LedgerError(f"the backup's directory '{dest.parent}' does not exist.")
    ledger = SQLiteLedger(source)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.new")
    try:
        with ledger._lock:
            copy = sqlite3.connect(str(tmp))
            try:
                ledger.con.backup(copy)  # (one read transaction: a consistent snapshot)
            finally:
                copy.close()
        os.link(tmp, dest)  # (fails rather than overwrite a file made meanwhile)
    except _DB_ERRORS as err:
        raise _failure(dest, err, "writing the backup") from None
    except OSError as err:
        raise LedgerError(f"the backup '{dest}' cannot be written: {err.strerror or err}."
                          ) from None
    finally:
        ledger.close()
        with contextlib.suppress(OSError):
            tmp.unlink()
    if owner_key() is not None:
        # under the owner key every ledger must hold its seal's entry: the copy (of a source
        # verified above, under the key) is sealed at its own path, so it verifies as what it
        # is. Its bytes put back at the ledger's path are still refused by the ledger's own
        # seal, which names a later entry, until the owner adopts them (`ledger seal`).
        seal_ledger(dest)
    kept = SQLiteLedger(dest)
    try:
        return len(kept.entries()), kept.recorded_total()
    finally:
        kept.close()


def seal_ledger(path: str | Path, key: bytes | str | None = None,
                policy_json: str | None = None) -> int:
    """Adopt the ledger at ``path`` under the owner key (``key``, or the environment's): verify
    its whole chain, write the MAC of its head, and write a new seal for it. Returns the number
    of entries. The owner's statement that this file is the latest: see the module docstring.
    A ledger of the previous format is verified and migrated first (in the same transaction;
    ``policy_json`` only for one that does not record its policy)."""
    path = Path(path)
    raw = owner_key(key)
    if raw is None:
        raise LedgerError("no owner key: set PRIVPLAN_LEDGER_KEY_FILE (or PRIVPLAN_LEDGER_KEY) "
                          "to the key the ledger is to be kept under.")
    if not path.is_file():
        raise LedgerError(f"no ledger at '{path}'. Check the path.")
    con = sqlite3.connect(str(path), isolation_level=None)
    con.text_factory = text_factory
    with owner_transaction(con, path, "sealing it"):
        (integrity,) = con.execute("PRAGMA quick_check").fetchone()
        if integrity != "ok":
            raise sqlite3.DatabaseError(f"integrity check failed: {integrity}")
        con.execute("BEGIN IMMEDIATE")
        migrate_2(con, path, raw, policy_json)
        record = read_record(dict(con.execute("SELECT key, value FROM meta").fetchall()), path,
                             None)
        if record.format != FORMAT or not record.bound or record.head is None:
            raise LedgerError(f"ledger '{path}' has no budget record in format {FORMAT} yet: "
                              "open it with a session first (that migrates and binds it).")
        rows = con.execute(f"SELECT {FIELDS}, hash FROM entries ORDER BY seq").fetchall()
        if verify_rows(path, record.start(), rows) != record.head:
            raise changed(path, "its entries do not end at the record of its last entry")
        con.execute("INSERT OR REPLACE INTO meta VALUES ('head_mac', ?)",
                    (head_mac(raw, record.ledger_id, record.root, record.head),))
    write_seal(seal_path(path), raw, record.ledger_id, record.head, force=True)
    return record.head.seq
