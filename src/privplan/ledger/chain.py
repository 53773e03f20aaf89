"""The ledger's hash chain: any change to a recorded charge, its budget, its policy, its format
or its last entry shows.

Why (DESIGN.md invariant 9, the ledger is never silently changed): the ledger is the only memory
of what was spent. A flipped byte, an edited row or a deleted entry must not lower ``spent()``
(budget given back) or change what later queries are composed with. So every entry carries
``hash = H(previous hash, the entry's stored fields)``; the chain starts at a *root* that hashes
the format, the ledger's identity (a random id drawn when the file is created), the budget and
the policy fingerprint (itself the hash of the recorded policy); and the ledger's meta row
``head`` names the last entry's sequence number and hash with a check value
``H(root, seq, hash)``, so removing the last entries and copying an earlier entry's hash into the
head is refused too. Changing the recorded format name changes the root: a file is read under
the rules of the format it really has, or refused.

The chain has no secret: it detects corruption and every edit that does not recompute SHA-256.
Someone who rewrites the file on purpose *and computes the hashes* (or puts an older copy back)
is caught only with the owner key and the seal (:mod:`privplan.ledger.seal`).

H is SHA-256 over the exact stored text, so verifying needs no decoding.

Privacy: an edit of an entry, budget, policy, format or head that computes no hash is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from privplan.errors import LedgerError

Row = Sequence[Any]
"""An entry as stored: (seq, query_id, sql, time, marginal, total_after, mechanisms)."""


def _sha(parts: list[Any]) -> str:
    text = json.dumps(parts, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def root_hash(fmt: str, budget_json: str, policy_fingerprint: str,
              ledger_id: str | None = None) -> str:
    """The chain's start: the format, the ledger's id (format 3 on; None for format 2), the
    budget and the policy the entries were charged under."""
    if ledger_id is None:  # privplan-ledger-2 (kept to verify such files before migrating)
        text = json.dumps([fmt, budget_json, policy_fingerprint], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()
    return _sha([fmt, ledger_id, budget_json, policy_fingerprint])


def entry_hash(previous: str, row: Row) -> str:
    """The hash of one stored entry after ``previous``. ``time`` is hashed by its repr, which
    reads back as the same float."""
    seq, qid, sql, t, marginal, total, mechanisms = row
    text = json.dumps([previous, int(seq), qid, sql, repr(float(t)), marginal, total,
                       mechanisms], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ChainHead:
    """Where a verified chain ends: the last entry's sequence number (0: none) and hash (for
    0, the root)."""

    seq: int
    hash: str


def head_check(root: str, head: ChainHead) -> str:
    """The head's check value: binds the record of the last entry to the chain, so that an
    earlier entry's stored hash copied into the head does not pass for it."""
    return _sha(["privplan-ledger-3/head", root, head.seq, head.hash])


def verify_rows(path: Any, start: ChainHead, rows: Iterable[Sequence[Any]]) -> ChainHead:
    """Check ``rows`` (stored fields then the stored hash, in seq order) continue the chain
    from ``start``; return the new head. Raises :class:`LedgerError` naming the first entry
    that does not."""
    head = start
    for row in rows:
        fields, stored = row[:7], row[7]
        seq = int(fields[0])
        if seq <= head.seq:
            raise LedgerError(_changed(path, f"entry {seq} is out of order"))
        expected = entry_hash(head.hash, fields)
        if stored != expected:
            raise LedgerError(_changed(
                path, f"entry {seq} ({fields[1]}) does not match its hash: it, or an entry before "
                      "it, was changed after it was recorded"))
        head = ChainHead(seq, expected)
    return head


def verify_suffix(path: Any, before: ChainHead, rows: Iterable[Sequence[Any]],
                  anchor: ChainHead) -> None:
    """Check that ``rows`` (entries k .. ``anchor.seq``: stored fields then hash) continue the
    chain from ``before`` (entry k-1 as stored; for k = 1 the root) and arrive, hash by hash,
    at ``anchor``, a head verified before.

    Why this suffices without reading entries 1..k-2: recomputing each hash from the stored
    hash of entry k-1 and arriving at the verified anchor means every field in between is the
    one that was chained (anything else would be a SHA-256 collision)."""
    if verify_rows(path, before, rows) != anchor:
        raise changed(path, f"its entries up to {anchor.seq} do not lead to the last entry "
                            "verified before")


def _changed(path: Any, what: str) -> str:
    return (f"ledger '{path}' was changed: {what}. privplan refuses it rather than compose with "
            "altered charges (a change could give spent budget back). The file was left as it "
            "is: restore it from a backup, or run `privplan ledger verify` on it for a report.")


def changed(path: Any, what: str) -> LedgerError:
    """The error for a ledger whose chain, root or head does not verify."""
    return LedgerError(_changed(path, what))
