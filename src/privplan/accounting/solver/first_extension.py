"""The atoms of an empty instance's first extension, remembered by the regions that made them.

A fresh accountant (a fresh session with an in-memory ledger, the sequential baseline of
``Accountant.alone``, a budget plot) extends an empty instance with the query's mechanisms:
it sorts every region's interval ends into atom axes and writes each region as atom-index
boxes. With a long public domain that is most of a fresh session's cost (100,000 keys: ~120
ms of ~280 ms), and it was done again by every fresh session for the very same regions: the
sessions of a process share their plans (``session.shared_plans``), region objects included.

What is remembered is a pure function of the regions, the GROUP BY key columns and the
unorderable (poisoned) columns — never of a mechanism's id or cost — keyed by the regions'
identities, each held here so that no other object can take its id.

Privacy: a hit gives exactly what computing again gives, so no charge can differ (the
brute-force solver tests compose through it; ``tests/accounting/test_first_extension.py``
compares every solver state with the memory emptied). Nothing here reads data: regions are
made from the query text and the policy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from privplan.process_memory import kept

__all__ = ["FirstExtension", "first_extension", "first_solver", "remember_first"]

_MAX_ENTRIES = 16  # (an entry holds its axes: ~6 MB for a 100,000-value public domain)


@dataclass(frozen=True)
class FirstExtension:
    """What ``_Instance._merged_axes`` and ``_rows_of`` gave for an empty instance."""

    regions: tuple[Any, ...]  # (held: their ids are the key)
    axes: tuple[Any, ...]  # (columns, axes, remaps, cell maps, new tops)
    region_rows: dict[int, Any]


_LOCK = threading.Lock()
_KNOWN: dict[Hashable, FirstExtension] = {}
_SOLVERS: dict[Hashable, tuple[tuple[Any, ...], Any]] = {}
_MAX_SOLVERS = 8  # (a solver holds its instance: a few MB for a 100,000-value public domain)


def _forget() -> None:
    with _LOCK:
        _KNOWN.clear()
        _SOLVERS.clear()


kept(__name__, _forget)


def _key(specs: Sequence[Any], poisoned: frozenset[str]) -> Hashable:
    return (poisoned, tuple(
        (id(m.region), None if m.partition is None else m.partition.key_columns)
        for m in specs))


def first_extension(specs: Sequence[Any], poisoned: frozenset[str]) -> FirstExtension | None:
    """The first extension of an empty instance by ``specs``' regions, if made before."""
    with _LOCK:
        return _KNOWN.get(_key(specs, poisoned))


def remember_first(specs: Sequence[Any], poisoned: frozenset[str], axes: tuple[Any, ...],
                   region_rows: dict[int, Any]) -> None:
    """Keep what an empty instance's extension by ``specs`` computed (see the module)."""
    frozen = tuple(tuple(part) for part in axes)  # (lists the instance only reads, kept as tuples)
    rows = {k: (tuple(r), wide) for k, (r, wide) in region_rows.items()}
    entry = FirstExtension(tuple(m.region for m in specs), frozen, rows)
    with _LOCK:
        if len(_KNOWN) >= _MAX_ENTRIES:
            _KNOWN.pop(next(iter(_KNOWN)))  # (the oldest)
        _KNOWN[_key(specs, poisoned)] = entry


def first_solver(table: str, model: Any, kind: type, exact_limit: int,
                 specs: Sequence[Any], make: Callable[[], Any]) -> Any:
    """``make()`` — a fresh table solver extended by ``specs`` — once for the same spec
    objects (held, so their ids are not reused), table model, kind and search limit.

    Why it may be shared: table solvers are immutable (``extended`` returns a new one and
    every accountant already extends one solver more than once: a preview, then the
    admission), and a fresh solver's first extension is a pure function of these. A fresh
    session answering a shared plan as its first query charges the very spec objects the
    planning session charged (``with_query_id`` keeps them when the query id is the same), so
    its accountant starts from the solver the first session made (~0.7 ms of a fresh session's
    charge at 1k rows). Privacy: a hit is exactly what computing again gives, so no charge can
    differ (``tests/accounting/test_first_extension.py`` diverges two accountants from one
    remembered solver and compares both with the memory emptied)."""
    key = (table, model, kind, exact_limit, tuple(id(m) for m in specs))
    with _LOCK:
        found = _SOLVERS.get(key)
    if found is not None and len(found[0]) == len(specs) and all(
            a is b for a, b in zip(found[0], specs)):
        return found[1]
    solver = make()
    with _LOCK:
        if len(_SOLVERS) >= _MAX_SOLVERS:
            _SOLVERS.pop(next(iter(_SOLVERS)))  # (the oldest)
        _SOLVERS[key] = (tuple(specs), solver)
    return solver
