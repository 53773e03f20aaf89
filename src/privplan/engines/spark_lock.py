"""One lock per SparkSession: privplan pins its settings one statement at a time; and whether
the session is still there (:func:`alive`).

A SparkSession's SQL settings are shared by every thread that uses it. privplan sets its own
(ANSI mode on, DuckDB's time zone, no pruning of cached batches) around each call and restores
the user's afterwards (``SparkEngine._pinned``). Two privplan sessions on one SparkSession —
the server's connections, a user's threads — would otherwise restore the user's values (ANSI
off, another time zone) in the middle of each other's statements, which would then run under
semantics the pre-charge gate did not check (it failed after the charge, found by
tests/server/test_engine_behind.py). Reentrant: a pinned block may call another.

Privacy: holds no data; it serialises the use of one SparkSession's settings.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["alive", "session_lock"]

_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()


def session_lock(spark: Any) -> threading.RLock:
    """The lock of ``spark``'s settings (made on first use, dropped with the session)."""
    with _GUARD:
        lock = _LOCKS.get(spark)
        if lock is None:
            lock = _LOCKS[spark] = threading.RLock()
        return lock


def alive(spark: Any, errors: tuple[type[BaseException], ...]) -> bool:
    """Whether ``spark`` can still analyse and run statements: not stopped, its JVM reachable
    (``errors``: what its gateway raises). (A stopped session still analyses statements over
    its temporary views, and only fails when a job runs: after the charge.)"""
    if getattr(spark, "is_stopped", False) is True:  # (Spark Connect)
        return False
    context = getattr(spark, "_sc", None)
    if context is None:
        return True  # (no classic context to ask: a failure surfaces when analysing)
    jsc = getattr(context, "_jsc", None)
    if jsc is None:  # (SparkContext.stop drops it)
        return False
    try:
        return not jsc.sc().isStopped()
    except (OSError,) + errors:  # (the gateway cannot reach the JVM)
        return False
