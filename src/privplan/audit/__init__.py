"""The audit file of a report run, and its offline verification.

``audit.json`` records, for every released query, its SQL and budget, and for every mechanism
its region (readable SQL *and* the exact serialised region of :mod:`privplan.ledger.codec`), its
partition, sensitivity, noise (exact parameters) and cost; the mechanisms the ledger held before
the report; the composed total with the rule used; and the SHA-256 of every result file.

:func:`verify_audit` re-checks it without the database:

1. ``format`` and ``integrity`` — the file's own SHA-256 over its canonical JSON (catches edits
   and corruption; it is not a signature: whoever can rewrite the file can recompute it);
2. ``decode`` — every mechanism, cost and budget decodes exactly;
3. ``regions`` — the SQL text of every region is the text of its serialised region;
4. ``noise`` — every cost is what its noise costs (ε = Δ/t for discrete Laplace, ρ = Δ²/2σ² for
   discrete Gaussian; partition selection: its threshold keeps a one-unit group out with
   probability ≥ 1 − δ);
5. ``replan`` — every query, re-planned from its SQL, the recorded policy and its budget,
   gives exactly the recorded mechanisms and noise (queries joining public tables need the
   database for the join keys and are skipped, with a note);
6. ``queries`` — each query's own mechanisms compose within its budget;
7. ``total`` — the history and the report's mechanisms, recomposed with
   :func:`privplan.accounting.solver.compose` (or, for ``composition: advanced``,
   :func:`privplan.accounting.allocation.advanced_total`), give exactly the claimed totals, and
   the total is within the budget;
8. ``files`` — every result file's SHA-256 matches;
9. ``ledger`` (when the ledger file is given or found next to the audit) — the ledger's entries
   hold exactly the recorded history and query mechanisms.

The package holds the two halves: :mod:`~privplan.audit.record` writes the file,
:mod:`~privplan.audit.verify` re-checks it.
"""

from __future__ import annotations

from privplan.audit.record import FORMAT, build_audit, canonical_hash, write_audit
from privplan.audit.verify import AuditCheck, AuditResult, verify_audit

__all__ = ["FORMAT", "AuditCheck", "AuditResult", "build_audit", "canonical_hash",
           "verify_audit", "write_audit"]
