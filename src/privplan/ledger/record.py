"""The ledger's meta row, read and checked: its format, identity, budget, policy, root and head.

Why one place: everything outside the entries that decides what a ledger means (the budget it
was charged against, the policy its regions are in, the format whose rules it follows, the
record of its last entry) must be bound to the hash chain, or an edit that computes no hash
could change it. :func:`read_record` checks each binding and raises :class:`LedgerError` naming
what does not hold; the entries themselves are checked by :mod:`privplan.ledger.chain`.

Format 3 (``privplan-ledger-3``): meta holds ``format``, ``ledger_id`` (drawn at creation),
and once a session binds it, ``budget``, ``policy`` (SHA-256 of ``policy_json``),
``policy_json``, ``root`` (over format, id, budget and policy), and the head: ``head_seq``,
``head_hash``, ``head_check`` (over the root and the head), with the owner key ``head_mac``.
Format 2 is read by its own, weaker rules only to verify a file before it is migrated
(:mod:`privplan.ledger.migrate`).

Privacy: the budget, policy, format and head are each bound to the chain, or the ledger is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privplan.errors import LedgerError
from privplan.ledger.chain import ChainHead, changed, head_check, root_hash
from privplan.ledger.codec import decode_cost
from privplan.ledger.file import FORMAT, FORMAT_2
from privplan.ledger.seal import head_mac

_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Record:
    """A ledger's checked meta row. ``root`` is '' and ``head`` None before the first bind."""

    format: str
    ledger_id: str
    budget: str | None
    policy: str | None
    policy_json: str | None
    root: str
    head: ChainHead | None
    mac: str | None

    @property
    def bound(self) -> bool:
        return self.budget is not None

    def start(self) -> ChainHead:
        """The chain's start: entry 0 is the root."""
        return ChainHead(0, self.root)


def read_record(meta: dict[str, str], path: Path, key: bytes | None) -> Record:
    """``meta`` checked under the rules of its format (see the module docstring)."""
    fmt = meta.get("format", "")
    if fmt == FORMAT_2:
        return _record_2(meta, path)
    ledger_id = meta.get("ledger_id", "")
    if not _ID.fullmatch(ledger_id):
        raise changed(path, "its identity record (ledger_id) is missing or damaged")
    keys = ("budget", "policy", "policy_json", "root", "head_seq", "head_hash", "head_check")
    present = [k for k in keys if k in meta]
    if not present:
        if "head_mac" in meta:
            raise changed(path, "it holds a sealed head but no budget")
        return Record(fmt, ledger_id, None, None, None, "", None, None)
    if len(present) < len(keys):
        missing = ", ".join(k for k in keys if k not in meta)
        raise changed(path, f"its budget and head records are incomplete ({missing} missing)")
    _check_policy(meta, path)
    _check_budget(meta["budget"], path)
    root = root_hash(FORMAT, meta["budget"], meta["policy"], ledger_id)
    if meta["root"] != root:
        raise changed(path, "its budget, policy, format or identity record does not match the "
                            "root of its chain")
    head = _head(meta, path, root)
    if meta["head_check"] != head_check(root, head):
        raise changed(path, f"the record of its last entry (entry {head.seq}) does not match "
                            "its check value: entries were removed, or the record was edited")
    mac = meta.get("head_mac")
    if key is not None and mac is not None and not hmac.compare_digest(
            mac, head_mac(key, ledger_id, root, head)):
        raise changed(path, "the record of its last entry is not the one the owner key sealed "
                            "(entries were removed or rewritten, or another key is in use)")
    return Record(fmt, ledger_id, meta["budget"], meta["policy"], meta["policy_json"], root,
                  head, mac)


def _record_2(meta: dict[str, str], path: Path) -> Record:
    """Format 2's rules: the root over format, budget and policy; the head as stored (it was
    not bound then: that is what migration adds)."""
    if "budget" not in meta:
        return Record(FORMAT_2, "", None, None, None, "", None, None)
    if "policy" not in meta:
        raise changed(path, "its policy record is missing")
    _check_budget(meta["budget"], path)
    if "policy_json" in meta:
        _check_policy(meta, path)
    root = root_hash(FORMAT_2, meta["budget"], meta["policy"])
    if meta.get("root") != root:
        raise changed(path, "its budget, policy or format record does not match the root of "
                            "its chain")
    head = ChainHead(0, root)
    if "head_seq" in meta or "head_hash" in meta:
        head = _head(meta, path, root)
    return Record(FORMAT_2, "", meta["budget"], meta["policy"], meta.get("policy_json"), root,
                  head, None)


def _head(meta: dict[str, str], path: Path, root: str) -> ChainHead:
    try:
        seq = int(meta.get("head_seq", ""))
    except ValueError:
        raise changed(path, "the record of its last entry is damaged") from None
    head = ChainHead(seq, meta.get("head_hash", ""))
    if seq < 0 or (seq == 0 and head.hash != root):
        raise changed(path, "the record of its last entry is damaged")
    return head


def _check_policy(meta: dict[str, str], path: Path) -> None:
    """The recorded policy must be the one the fingerprint (in the root) names, and JSON."""
    text = meta.get("policy_json", "")
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if digest != meta.get("policy"):
        raise changed(path, "its recorded policy (policy_json) does not match the policy "
                            "fingerprint in its chain")
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise changed(path, "its recorded policy is not a JSON object")


def _check_budget(text: str, path: Path) -> Any:
    try:
        return decode_cost(json.loads(text))
    except (ValueError, KeyError, TypeError, ZeroDivisionError, LedgerError):
        raise changed(path, "its budget record is damaged") from None
