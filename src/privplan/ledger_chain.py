"""The ledger's hash chain: any change to a recorded charge, its budget or its policy shows.

Why (DESIGN.md invariant 9, the ledger is never silently changed): the ledger is the only memory
of what was spent. A flipped byte, an edited row or a deleted entry must not lower ``spent()``
(budget given back) or change what later queries are composed with. So every entry carries
``hash = H(previous hash, the entry's stored fields)``; the chain starts at a *root* that hashes
the format, the budget and the policy fingerprint, and the ledger's meta row ``head`` names the
last entry's sequence number and hash, so removing the last entries breaks it too. The whole
chain is verified when a ledger is opened, and each entry another process adds is verified when
it is read. The chain has no secret: it detects corruption and edits that do not recompute it;
an owner who rewrites the file on purpose is trusted by the threat model (docs/DESIGN.md).

H is SHA-256 over the exact stored text, so verifying needs no decoding.
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


def root_hash(fmt: str, budget_json: str, policy_fingerprint: str) -> str:
    """The chain's start: the format, the budget and the policy the entries were charged under."""
    text = json.dumps([fmt, budget_json, policy_fingerprint], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def entry_hash(previous: str, row: Row) -> str:
    """The hash of one stored entry after ``previous``. ``time`` is hashed by its repr, which
    reads back as the same float."""
    seq, qid, sql, t, marginal, total, mechanisms = row
    text = json.dumps([previous, int(seq), qid, sql, repr(float(t)), marginal, total,
                       mechanisms], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ChainHead:
    """Where a verified chain ends: the last entry's sequence number (0: none) and hash."""

    seq: int
    hash: str


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


def _changed(path: Any, what: str) -> str:
    return (f"ledger '{path}' was changed: {what}. privplan refuses it rather than compose with "
            "altered charges (a change could give spent budget back). The file was left as it "
            "is: restore it from a backup, or run `privplan ledger verify` on it for a report.")


def changed(path: Any, what: str) -> LedgerError:
    """The error for a ledger whose chain, root or head does not verify."""
    return LedgerError(_changed(path, what))
