"""The pre-charge gate: the one place every answer crosses before its charge.

Everything privplan runs after a charge reads private rows or values computed from them: the
engine statements, then privplan's own arithmetic (noise, the exponential mechanism, partition
selection, the flat output), then the outer query over the noisy answer. If any of it can fail
on some rows and not on others, the failure is one exact bit about the data, released at any ε
(DESIGN.md invariants 7 and 8). The allow-lists (:mod:`privplan.sql.totality`,
:mod:`privplan.engines.portable`) keep expressions total by construction; they are one line of
defence, written case by case. The gate is the second, independent one, and it is structural:

* :func:`admit` is the only maker of an :class:`Admission`, and the session's charge takes an
  :class:`Admission` and nothing else (``Session._charge``); every interface — ``Session.sql``,
  ``explain``, ``df.dp``, DB-API, SQLAlchemy, reports, the CLI — plans through
  ``Session._admit``, so nothing reaches the charge without crossing this function, whatever
  feature added the path (``tests/gate/test_structure.py`` checks the code for it).
* It asks the engine itself, over stand-in rows of edge values of every private column's
  storage type, to run each engine statement, the statement without its conditions, and every
  sub-expression on its own (:mod:`privplan.gate.engine_checks`).
* It runs privplan's own post-charge code over those stand-in answers
  (:mod:`privplan.gate.in_process`) and the outer query over stand-in noisy values at each
  column's extremes, every sub-expression on its own (:mod:`privplan.gate.outer`).

Any failure is a refusal before the charge: nothing is spent, and the message names what failed
(on stand-in values, never on a private row). The verdict is cached with the plan (a cached
plan is re-admitted by :meth:`Admission.renamed` only while nothing it was checked against can
have changed: see :mod:`privplan.session.plan_cache`).

Privacy: nothing is charged without an Admission, and admit makes one only when every check passed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from privplan.errors import InternalError
from privplan.gate.engine_checks import probe_core
from privplan.gate.in_process import check_in_process
from privplan.gate.outer import check_outer_query
from privplan.planning.costs import PlannedQuery

__all__ = ["Admission", "admit"]

_MINT = object()


@dataclass(frozen=True)
class Admission:
    """A planned query and its engine statements that passed the gate. Only :func:`admit`
    makes one (and :meth:`renamed` a copy of one); the session charges nothing else."""

    planned: PlannedQuery
    statements: tuple[str, ...]
    mint: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mint is not _MINT:
            raise InternalError("an Admission is made by privplan.gate.admit only")

    def renamed(self, planned: PlannedQuery) -> Admission:
        """The same admitted query with its mechanisms renamed (the ledger's next query id):
        the statements, the stand-ins and the verdict are unchanged."""
        assert planned.plan is self.planned.plan
        return Admission(planned, self.statements, _MINT)

    def relocated(self, names: Mapping[str, str]) -> Admission:
        """The same admitted query with the engine relations of its long public key domains
        (``GroupKey.domain_table``) named as another engine holds them: a plan shared by
        sessions (:mod:`privplan.session.shared_plans`) reads the relation the reusing
        session's engine made of the *same* public values. Only those names change (in the
        keys and, as whole names, in the statements): the statements, their stand-ins and
        the verdict are otherwise the ones :func:`admit` checked."""
        if not names:
            return self
        pattern = re.compile(r"(?<![0-9A-Za-z_.])(?:"
                             + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
                             + r")(?![0-9A-Za-z_])")
        cores = tuple(replace(core, keys=tuple(
            replace(k, domain_table=names.get(k.domain_table, k.domain_table))
            if k.domain_table is not None else k for k in core.keys))
            for core in self.planned.plan.cores)
        planned = replace(self.planned, plan=replace(self.planned.plan, cores=cores))
        statements = tuple(pattern.sub(lambda m: names[m.group(0)], s) for s in self.statements)
        return Admission(planned, statements, _MINT)


def admit(engine: Any, planned: PlannedQuery, statements: list[str],
          schemas: list[list[tuple[str, str]]]) -> Admission:
    """Check everything that will read private rows after the charge (see the module doc) and
    return the admission the charge requires, or raise a free refusal. ``schemas``: each
    statement's bound (column, type) pairs. Reads no private row."""
    probes = [probe_core(engine, core, [p.measure for p in planned.for_core(i)])
              for i, core in enumerate(planned.plan.cores)]
    check_in_process(planned, [[p.answer for p in probes], [p.unfiltered for p in probes]])
    check_outer_query(planned, schemas)
    return Admission(planned, tuple(statements), _MINT)
