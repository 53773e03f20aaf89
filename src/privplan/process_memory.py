"""The memories privplan keeps for the whole process, listed in one place.

Several answers are kept across the sessions of a process because computing them again gives
the same answer: plans (:mod:`privplan.session.shared_plans`), what a DuckDB file's statements
bind to (:mod:`privplan.engines.file_catalog`), an empty accountant's first atoms
(:mod:`privplan.accounting.solver.first_extension`), checked expressions
(:mod:`privplan.sql.totality`) and outer queries (:mod:`privplan.gate.outer`), parsed texts
(:mod:`privplan.sql.parse`). Each module keeps its own (its key says when a hit is what
computing again gives, and its cap bounds its memory) and registers how to empty it here when
it is imported.

Why one list: :func:`forget_all` empties every one of them, so a caller that must see every
check run again — the test suite before each test, which would otherwise meet a plan, a bind
or a verdict another test made and pass without exercising what it tests — does not have to
know each memory, and a memory added later is emptied with the rest by registering.

Privacy: emptying a memory only makes the next answer be computed again; nothing here holds
or reads a row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["forget_all", "kept", "memories"]

_LOCK = threading.Lock()
_FORGET: dict[str, Callable[[], None]] = {}


def kept(name: str, forget: Callable[[], None]) -> None:
    """Register the process-wide memory ``name`` (its module's dotted name), emptied by
    ``forget``."""
    with _LOCK:
        _FORGET[name] = forget


def memories() -> list[str]:
    """The names of the memories registered so far (those of the modules imported)."""
    with _LOCK:
        return sorted(_FORGET)


def forget_all() -> None:
    """Empty every registered memory."""
    with _LOCK:
        forgets = list(_FORGET.values())
    for forget in forgets:
        forget()
