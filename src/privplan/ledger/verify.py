"""``privplan ledger verify``: check a durable ledger on its own, and recompute what it spent.

Three checks, from the file alone (its recorded policy, or one passed in):

1. the hash chain (format, identity, budget and policy record, every entry, the last entry's
   record and check value; with the owner key its MAC and the seal) is intact — the check a
   session makes on open for the entries after the ledger's checkpoint, and on every read for
   the ones before it (:mod:`privplan.ledger.chain`, :mod:`privplan.ledger.record`,
   :mod:`privplan.ledger.seal`, :mod:`privplan.ledger.checkpoint`). A file of the previous
   format is verified under that format's rules (a session migrates it when it opens it);
2. the recorded totals never decrease, and each entry's recorded marginal is the difference
   of the totals around it;
3. the composed total, recomputed from every recorded mechanism at once with the composition
   theorem, is not above the total the last entry recorded (the total a session enforced the
   budget against). Equal in the usual case; lower only where the solver used a proven upper
   bound then. Higher would mean the recorded totals under-state the spending: a finding.

Nothing is written: a failed check is reported, the file is left as it is. Without the owner
key, a ledger rewritten with recomputed hashes, or an older copy put back, verifies: see
:mod:`privplan.ledger.seal` for what the key adds.

Privacy: nothing is written; a broken chain, or totals below the mechanisms', are reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privplan.accounting.accountant import Accountant
from privplan.errors import LedgerError, PolicyError
from privplan.ledger.store import SQLiteLedger, policy_fingerprint


@dataclass
class LedgerVerification:
    """What ``verify_ledger`` found. ``ok`` is True when every check passed."""

    path: str
    format: str = ""
    keyed: bool = False
    entries: int = 0
    budget: Any = None
    recorded_total: Any = None
    recomputed_total: Any = None
    chain_intact: bool = False
    findings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.chain_intact and not self.findings

    def to_dict(self) -> dict[str, Any]:
        def describe(v: Any) -> str | None:
            return v.describe() if v is not None else None

        return {"path": self.path, "ok": self.ok, "format": self.format,
                "owner_key_checked": self.keyed, "entries": self.entries,
                "chain_intact": self.chain_intact, "budget": describe(self.budget),
                "recorded_total": describe(self.recorded_total),
                "recomputed_total": describe(self.recomputed_total),
                "findings": list(self.findings)}

    def __str__(self) -> str:
        lines = [f"ledger {self.path}: {'OK' if self.ok else 'PROBLEMS FOUND'}"]
        if self.chain_intact:
            lines.append(f"  hash chain intact over {self.entries} entries (budget and policy "
                         f"record, every entry, the last entry; format {self.format})")
            lines.append("  owner key: head MAC and seal checked" if self.keyed else
                         "  no owner key: a rewrite that recomputes the hashes, or an older "
                         "copy put back, would not show")
        if self.budget is not None:
            lines.append(f"  budget {self.budget.describe()}")
        if self.recorded_total is not None:
            lines.append(f"  recorded total {self.recorded_total.describe()}")
        if self.recomputed_total is not None:
            lines.append(f"  recomputed from the mechanisms {self.recomputed_total.describe()}")
        lines += [f"  ! {f}" for f in self.findings]
        return "\n".join(lines)


def verify_ledger(path: str | Path, policy: Any = None) -> LedgerVerification:
    """Verify the ledger at ``path`` (see the module docstring). ``policy`` (a Policy, dict or
    YAML path) is needed only for a ledger that does not record its policy; if given, it must
    be the one the ledger was charged under."""
    from privplan.policy import Policy
    from privplan.session.inputs import as_policy as _as_policy

    out = LedgerVerification(path=str(path))
    if not Path(path).exists():
        raise LedgerError(f"no ledger at '{path}'. Check the path (a ledger is the file a "
                          "session was opened with, ledger=...).")
    try:
        ledger = SQLiteLedger(path)
    except LedgerError as err:
        out.findings.append(str(err))
        return out
    try:
        try:  # every entry, verified from the chain's root (whatever a checkpoint covers)
            out.budget = ledger.stored_budget()
            entries = ledger.entries()
            recorded = ledger.stored_policy()
        except LedgerError as err:
            out.findings.append(str(err))
            return out
        out.format, out.keyed = ledger.format, ledger.keyed
        out.chain_intact = True
        out.entries = len(entries)
        if policy is not None:
            pol = _as_policy(policy)
            if recorded is not None and policy_fingerprint(pol) != policy_fingerprint(
                    Policy.from_dict(recorded)):
                out.findings.append("the policy given is not the one the ledger was charged "
                                    "under")
                return out
        elif recorded is not None:
            pol = Policy.from_dict(recorded)
        else:
            raise PolicyError(
                f"ledger '{path}' does not record its policy (it predates that); pass the "
                "policy it was charged under (--policy policy.yaml).")
        if not entries or out.budget is None:
            return out
        out.recorded_total = entries[-1].total_after
        _check_totals(entries, out)
        out.recomputed_total = _recompute(entries, pol, type(out.budget))
        if not out.recomputed_total <= out.recorded_total:
            out.findings.append(
                f"the mechanisms compose to {out.recomputed_total.describe()}, more than the "
                f"recorded total {out.recorded_total.describe()}: the recorded totals "
                "under-state the spending")
    finally:
        ledger.close()
    return out


def _check_totals(entries: Any, out: LedgerVerification) -> None:
    previous = type(out.budget).zero()
    for e in entries:
        if not previous <= e.total_after:
            out.findings.append(f"entry {e.query_id}: the recorded total decreased "
                                f"({previous.describe()} -> {e.total_after.describe()})")
        if e.marginal != e.total_after - previous:
            out.findings.append(f"entry {e.query_id}: its marginal {e.marginal.describe()} is "
                                f"not the change of the total")
        previous = e.total_after


def _recompute(entries: Any, policy: Any, kind: type) -> Any:
    """The composed total of every recorded mechanism, composed at once."""
    from privplan.sql.virtual_tables import is_virtual, table_model

    models = {t.name: t.table_model() for t in policy.private_tables()}
    mechanisms = [m for e in entries for m in e.mechanisms]
    for m in mechanisms:
        if m.table not in models and is_virtual(m.table):  # a join or a per-unit table
            models[m.table] = table_model(policy, m.table)
    accountant = Accountant(models, kind)
    return accountant.admit(mechanisms).cost


def verification_json(v: LedgerVerification) -> str:
    return json.dumps(v.to_dict(), indent=2)
