"""Ledger format migrations: explicit and verified, never a silent re-chain.

Why: a ledger's format decides how it is verified. If a file could announce an earlier format
and be "upgraded" by chaining whatever its entries say, an edit that computes no hash (rename
the format, then lower the totals) would give budget back. So:

* **format 2 → 3** (the format privplan wrote before this one) happens when a session binds its
  budget to the file, inside that write transaction, and only after the *whole* file verified
  under format 2's rules: its root, every entry, its last-entry record, its policy record. The
  entries are then chained again from the format-3 root (with a new ledger id), the head
  gets its check value (and the owner's MAC), and a checkpoint bound to the old chain is bound
  to the new one. A format-3 file renamed to format 2 does not verify (its root and hashes are
  format 3's), so it is refused, not migrated.
* **format 1 → 3** (entries without any hash) cannot be verified: only the owner migrates it,
  with ``privplan ledger migrate --from-format-1`` and the policy it was charged under. A file
  that claims format 1 but carries any trace of a chain (a hash, a root, a head) was altered and
  is refused even then.

Privacy: a ledger is re-chained only after it verified whole; format 1 only when the owner asks.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from privplan.errors import LedgerError
from privplan.ledger.chain import ChainHead, changed, entry_hash, head_check, root_hash, verify_rows
from privplan.ledger.checkpoint import binding, bound_checkpoint
from privplan.ledger.file import (
    APPLICATION_ID,
    FORMAT,
    FORMAT_1,
    FORMAT_2,
    new_ledger_id,
    owner_transaction,
)
from privplan.ledger.record import read_record
from privplan.ledger.seal import head_mac

FIELDS = "seq, query_id, sql, time, marginal, total_after, mechanisms"


def migrate_2(con: sqlite3.Connection, path: Path, key: bytes | None,
              policy_json: str | None) -> ChainHead | None:
    """Inside the caller's write transaction: verify a format-2 file whole, then make it format
    3 (see the module docstring). Returns the new head (None when the file was not format 2).
    ``policy_json``: the binding session's policy, recorded if the file lacks it (a file once
    upgraded from format 1 does) and its fingerprint is the file's."""
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("format") != FORMAT_2:
        return None
    record = read_record(meta, path, None)
    rows = con.execute(f"SELECT {FIELDS}, hash FROM entries ORDER BY seq").fetchall()
    head = verify_rows(path, record.start(), rows)
    if not record.bound:
        if rows:
            raise changed(path, "it holds entries but no budget record")
        _finish_unbound(con)
        return ChainHead(0, "")
    if record.head != head:
        raise changed(path, f"its last entries are missing or were changed (the record of its "
                            f"last entry says {record.head.seq if record.head else 0}, the "
                            f"entries end at {head.seq})")
    found = bound_checkpoint(con, record.root)
    kept = None if found is None else found[:2]
    text = record.policy_json
    if text is None:
        if policy_json is None or _digest(policy_json) != record.policy:
            raise LedgerError(f"ledger '{path}' (format 2) does not record its policy; open it "
                              "with the policy it was charged under to migrate it.")
        text = policy_json
    return _rechain(con, path, meta["budget"], text, [r[:7] for r in rows], kept, key)


def migrate_1(path: Path, policy_json: str, key: bytes | None) -> int:
    """The owner's explicit migration of a format-1 file (see the module docstring); returns
    the number of entries. The entries are trusted as they are: there is nothing to verify."""
    con = sqlite3.connect(str(path), isolation_level=None)
    with owner_transaction(con, path, "migrating it"):
        con.execute("BEGIN IMMEDIATE")
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT_1:
            raise LedgerError(f"ledger '{path}' is not of format 1 (it says "
                              f"{meta.get('format')!r}): nothing to migrate that way.")
        columns = {r[1] for r in con.execute("PRAGMA table_info(entries)")}
        traces = [k for k in ("root", "head_seq", "head_hash", "head_check", "ledger_id",
                              "policy_json") if k in meta]
        if "hash" in columns and con.execute(
                "SELECT 1 FROM entries WHERE hash IS NOT NULL LIMIT 1").fetchone():
            traces.append("entry hashes")
        if traces:
            raise changed(path, f"it claims format 1, which had no hash chain, yet it holds "
                                f"{', '.join(traces)}: its format record was edited")
        if "budget" not in meta:
            raise LedgerError(f"ledger '{path}' records no budget: it was never used; delete it "
                              "and start a new one.")
        if meta.get("policy", _digest(policy_json)) != _digest(policy_json):
            raise LedgerError(f"the policy given is not the one ledger '{path}' was charged "
                              "under; pass that one.")
        if "hash" not in columns:
            con.execute("ALTER TABLE entries ADD COLUMN hash TEXT")
        con.execute("INSERT OR REPLACE INTO meta VALUES ('policy', ?)", (_digest(policy_json),))
        rows = con.execute(f"SELECT {FIELDS} FROM entries ORDER BY seq").fetchall()
        con.execute("DROP TABLE IF EXISTS checkpoint")
        _rechain(con, path, meta["budget"], policy_json, rows, None, key)
    return len(rows)


def _rechain(con: sqlite3.Connection, path: Path, budget: str, policy_json: str,
             rows: list[Any], checkpoint: tuple[int, bytes] | None,
             key: bytes | None) -> ChainHead:
    """Chain ``rows`` (verified, or trusted by the owner) from a new format-3 root, and write
    the format-3 meta row."""
    ledger_id = new_ledger_id()
    fingerprint = _digest(policy_json)
    root = root_hash(FORMAT, budget, fingerprint, ledger_id)
    head = ChainHead(0, root)
    hashes: dict[int, str] = {}
    for row in rows:
        h = hashes[int(row[0])] = entry_hash(head.hash, row)
        con.execute("UPDATE entries SET hash = ? WHERE seq = ?", (h, row[0]))
        head = ChainHead(int(row[0]), h)
    values = {"format": FORMAT, "ledger_id": ledger_id, "policy": fingerprint,
              "policy_json": policy_json, "root": root, "head_seq": str(head.seq),
              "head_hash": head.hash, "head_check": head_check(root, head)}
    if key is not None:
        values["head_mac"] = head_mac(key, ledger_id, root, head)
    con.execute("DELETE FROM meta WHERE key = 'head_mac'")
    for k, v in values.items():
        con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (k, v))
    if checkpoint is not None and checkpoint[0] in hashes:
        seq, blob = checkpoint
        con.execute("UPDATE checkpoint SET binding = ? WHERE id = 1",
                    (binding(seq, hashes[seq], root, blob),))
    else:
        con.execute("DROP TABLE IF EXISTS checkpoint")
    _tag(con)
    return head


def _finish_unbound(con: sqlite3.Connection) -> None:
    con.execute("INSERT OR REPLACE INTO meta VALUES ('ledger_id', ?)", (new_ledger_id(),))
    con.execute("UPDATE meta SET value = ? WHERE key = 'format'", (FORMAT,))
    _tag(con)


def _tag(con: sqlite3.Connection) -> None:
    """The header's application id, as a created file gets it."""
    con.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def policy_json_of(policy: Any) -> str:
    """The recorded form of a policy (its fingerprint is this text's SHA-256)."""
    return json.dumps(policy.to_dict(), sort_keys=True, default=str)
