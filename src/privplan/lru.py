"""A thread-safe least-recently-used mapping: what the process's and the sessions' memories
hold (a session's plans, the process's shared plans, the kept copies of user-level tables).

Bounded by entries by default; a memory bounded by something else (the kept copies: bytes)
says when it is too full (:meth:`LRU._too_full`). Nothing here reads a row or decides what is
charged: a dropped entry is computed again, a kept one is the value computed before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["LRU"]

V = TypeVar("V")


class LRU(Generic[V]):
    """A thread-safe mapping of at most ``max_entries`` values (or what :meth:`_too_full`
    allows), least recently used dropped first."""

    def __init__(self, max_entries: int) -> None:
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()  # (a session may be shared by threads)

    def _found(self, key: Hashable) -> V | None:
        """The value under ``key`` (marked recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
        return value

    def _store(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while self._entries and self._too_full():
                self._entries.popitem(last=False)

    def _too_full(self) -> bool:
        """Whether the entries exceed what this memory keeps (asked under the lock after each
        store, the oldest dropped until it is not)."""
        return len(self._entries) > self._max

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
