"""Values derived once per planning object: the memo a session's reused plans read.

A session reuses its planned queries (:mod:`privplan.session.plan_cache`), so what the answer path
derives from a plan's objects alone (a core's output layout and post-processing SQL, a
measure's region as text) can be derived once per object instead of once per answer. Only
objects that do not change once planned are used as keys, and only pure functions of them are
memoised: a memo changes nothing but time, and never holds anything derived from data. An entry
lives as long as its object (it is keyed by identity and dropped when the object dies).

Privacy: memos are pure functions of planned objects, never of data: they change only time.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_MEMO: dict[int, tuple[weakref.ref[Any], dict[Hashable, Any]]] = {}


def derived(obj: Any, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()`` — a pure function of ``obj`` (and of ``key``, which names it) — once per
    live ``obj``."""
    ident = id(obj)
    found = _MEMO.get(ident)
    if found is None or found[0]() is not obj:
        try:
            held = weakref.ref(obj, lambda _: _MEMO.pop(ident, None))
        except TypeError:  # (an object without weak references: derived each time)
            return compute()
        found = (held, {})
        _MEMO[ident] = found
    values = found[1]
    if key not in values:
        values[key] = compute()
    return values[key]
