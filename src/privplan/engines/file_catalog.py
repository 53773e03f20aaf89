"""What binding and describing a DuckDB file's tables answered, kept for the whole process.

A fresh session on a DuckDB file (the CLI, a DB-API connection per request, a pool opening a
session per checkout) opens the file again, so the engine's own memory of what its statements
bind to (:meth:`~privplan.engines.duckdb_engine.DuckDBEngine.bind`) starts empty: every fresh
session described each table it plans over (``DESCRIBE``, twice: its columns, then which are
NOT NULL) and bound every statement again before its charge — ~1 ms of a row-level fresh
session's ~10 ms at 1k rows, ~5 ms at user level (the per-unit statement is long to bind).

Both answers are functions of the file's catalog alone: binding and ``DESCRIBE`` read no row.
They are kept here, per file **as it was opened** (:func:`~privplan.engines.shared_copies.
file_identity`: real path, device, inode, mtime, size, and the write-ahead log's), and given
only to an engine whose answers cannot differ from the engine's that asked first:

* the engine opened the file itself, read only (DuckDB's file lock keeps every writer out, and
  no connection of this process can open it for writing), and has registered nothing (a
  registered object can change in place) and defined no view (a name the text reads could
  mean something else in another session);
* the statement names no database privplan attaches per engine (``__privplan_work_``,
  ``__privplan_durable_``): those names are the engine's own, so what binds in one engine need
  not in another;
* a shared copy's database it names (``__privplan_shared_N``) is one this engine reads now
  (:meth:`~privplan.engines.shared_copies.SharingEngine.shared_aliases`). The process gives
  that name to one key only (the file as opened, the policy, the copy's SELECT), and every
  copy of a key has the same columns and types: made by that SELECT over that file state, or
  restored from it by its exact ``CREATE TABLE`` and checked to have the same types
  (:mod:`.copy_snapshots`). So binding it where it is attached answers the same in every engine
  (~1.4 ms of a fresh user-level session over a restored copy); where it is not attached the
  statement is bound (and fails) as before.

Privacy: nothing here depends on a row; a hit skips a check whose answer is known, and every
statement still runs on the engine itself after its charge. A wrong hit could only make a
statement fail after its charge for a reason not in the data (spending without answering),
which the conditions above exclude.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Hashable
from typing import Any

from privplan.process_memory import kept

__all__ = ["FileCatalog", "file_catalog"]

_PER_ENGINE = ("__privplan_work_", "__privplan_durable_")
_SHARED = re.compile(r"__privplan_shared_\d+")
_MAX_ENTRIES = 4096


class FileCatalog:
    """The process's memory of binding and describing DuckDB files' tables (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[Hashable, Any] = {}

    @staticmethod
    def key(engine: Any, kind: str, text: str) -> Hashable | None:
        """The key of ``kind`` ("bind" or "describe") of ``text`` on ``engine``, or None where
        another engine's answer could differ (see the module)."""
        identity = engine.file_as_opened()
        if identity is None or any(p in text for p in _PER_ENGINE):
            return None
        named = set(_SHARED.findall(text))
        if named and not named <= engine.shared_aliases():
            return None
        return (identity, kind, text)

    def get(self, key: Hashable | None) -> Any:
        if key is None:
            return None
        with self._lock:
            return self._known.get(key)

    def put(self, key: Hashable | None, answer: Any) -> None:
        if key is None:
            return
        with self._lock:
            if len(self._known) >= _MAX_ENTRIES:
                self._known.clear()
            self._known[key] = answer

    def clear(self) -> None:
        with self._lock:
            self._known.clear()


file_catalog = FileCatalog()
"""The process's one memory of DuckDB files' catalogs."""
kept(__name__, file_catalog.clear)
