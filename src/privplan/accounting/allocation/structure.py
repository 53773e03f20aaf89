"""Which queries of a report one neighbouring change can affect together, read off the linear
model: the maximal co-affected groups, overlapping and disjoint pairs, and the connected
components of the overlap graph. Disjoint queries compose by max under the general composition
theorem (CSF'24 Thm IV.11); queries on different private tables always add up, since one person
may be in every private table. Shown to the user so the allocation can be understood.

Privacy: what it shows is read from the model, never from data, and changes no cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privplan.accounting.allocation.interface import Demand, Structure
from privplan.accounting.allocation.linear_model import _Model


def _structure(demands: Sequence[Demand], model: _Model, model_notes: Sequence[str]
               ) -> Structure:
    names = [d.name for d in demands]
    n = len(names)
    groups: list[frozenset[int]] = []
    for A in model.A:
        for row in A:
            g = frozenset(np.flatnonzero(row > 0).tolist())
            if g:
                groups.append(g)
    maximal: list[frozenset[int]] = []
    for g in sorted(set(groups), key=lambda s: (-len(s), sorted(s))):
        if not any(g <= m for m in maximal):
            maximal.append(g)
    over = np.zeros((n, n), dtype=bool)
    for g in maximal:
        ids = sorted(g)
        for a in ids:
            for b in ids:
                over[a, b] = True
    # one person may be in every private table: queries on different tables always add up
    tables_of = [{m.table for m in d.mechanisms if not m.region.is_empty()} for d in demands]
    notes: list[str] = []
    for a in range(n):
        for b in range(a + 1, n):
            if not over[a, b] and any(t1 != t2 for t1 in tables_of[a] for t2 in tables_of[b]):
                over[a, b] = over[b, a] = True
                if not notes:
                    notes.append("queries on different private tables always add up: one "
                                 "person may be in every private table")
    overlapping: list[tuple[str, str]] = []
    disjoint: list[tuple[str, str]] = []
    for a in range(n):
        for b in range(a + 1, n):
            (overlapping if over[a, b] else disjoint).append((names[a], names[b]))
    # connected components of the overlap graph
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a in range(n):
        for b in range(a + 1, n):
            if over[a, b]:
                parent[find(a)] = find(b)
    comps: dict[int, list[str]] = {}
    for i in range(n):
        comps.setdefault(find(i), []).append(names[i])
    if not model.exact:
        notes.append("the overlap structure is conservative (" + "; ".join(model_notes) + ")")
    return Structure(
        names=tuple(names),
        groups=tuple(tuple(names[i] for i in sorted(g)) for g in maximal),
        overlapping=tuple(overlapping), disjoint=tuple(disjoint),
        components=tuple(tuple(c) for c in comps.values()),
        exact=model.exact, notes=tuple(notes))
