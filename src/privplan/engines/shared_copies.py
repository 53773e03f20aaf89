"""Session copies made once per process: the sessions of a ``privplan serve`` (or any process
with several sessions on one DuckDB file) share one bounded copy of a table instead of each
making its own.

A session copy (:meth:`~privplan.engines.duckdb_engine.DuckDBEngine.materialize`) is the
result of one SELECT over a private table (its bounded rows, with their SUM-grid columns). Each
session made it in its own in-memory work database: under ``privplan serve`` every connection
is a session, so 32 connections made 32 copies of a million-row table (each about one clamped
statement of CPU, and its memory), all equal.

DuckDB keeps one database instance per file in a process, and a database ATTACHed by one
connection of the instance is visible to all of them. A shared copy is a table ``rows`` in an
in-memory database of its own, attached to the instance under a name this registry gives to
its **key**:

* the data file's identity when the engine opened it (real path, device, inode, modification
  time in ns, size, and its write-ahead log's: ``file_identity``);
* the policy's content (:func:`privplan.session.shared_plans.policy_key`, set by the session);
* the exact SELECT text (which names the table, its typed columns and every bound and grid).

and an engine shares only where that key is everything the copy's rows depend on
(:meth:`DuckDBEngine._share_key`): it opened the file itself, read only (DuckDB's file lock
keeps every writer out while the instance lives, and the instance — with the copies attached
to it — ends when its last connection closes), it has registered nothing and defined no view
(names a SELECT text could read with another meaning in another session), and the text calls
no volatile function. Then the copy another session made is exactly the one this session
would make (the rows of the same statement over the same file state; privplan's bounding is a
fixed function of each unit's rows: :mod:`privplan.rewrite.row_order`), so reading it changes
no answer; a different policy, bound or file state is a different key, hence another copy.

Privacy: unchanged from the session copy's argument (:mod:`privplan.session.copies`). A copy
is made only after a charge, by the session whose query needs it (the other sessions wait on
the key's lock rather than make their own); whether it already exists depends on what other
sessions of the process asked, never on a row (timing, DESIGN.md §1, is out of scope). A
failure making it is the session copy's failure (``COPY_FAILED``, withheld) and leaves nothing
attached. A plan over a shared copy is shared by the process's sessions on condition that
the reusing session reads that very copy too (:mod:`privplan.session.shared_plans`: the copy
is one of the reads replayed); a statement naming the copy is bound once per process where
the engine reads that copy (:mod:`.file_catalog`: the name means one key's columns).

The key's identity is taken before the file is opened and again after (DuckDB's lock then
keeps writers out): a file written in between is not shared at all. A copy is dropped
(DETACHed) when the last engine that read it releases it (closes, or registers a table);
otherwise it lives as long as the DuckDB instance. A user-level table's copy is also kept for
the process beyond the instance (:mod:`.copy_snapshots`): a later instance over the same file
state restores it instead of bounding every row again. The session's copies decide when the
first is made (:mod:`privplan.session.copies`: from the process's second charged query over
the rows, counted by :meth:`SharedCopyRegistry.asked`).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import duckdb

from privplan.engines import copy_snapshots
from privplan.engines.base import COPY_FAILED
from privplan.errors import ExecutionError
from privplan.process_memory import kept
from privplan.rewrite.engine_sql import per_unit_select

__all__ = ["VOLATILE", "FileIdentity", "SharedCopyRegistry", "SharingEngine", "file_identity",
           "registry"]

VOLATILE = ("random(", "uuid(", "setseed(", "now(", "current_timestamp", "current_date",
            "current_time", "nextval(")
"""Functions whose value is not a function of the rows: a text calling one is never shared."""


FileIdentity = tuple[str, int, int, int, int, tuple[int, int] | None]
"""A DuckDB file's state: real path, device, inode, mtime in ns, size, and its write-ahead
log's (mtime in ns, size), None without one."""


def file_identity(path: Path) -> FileIdentity | None:
    """The data file as it is now (:data:`FileIdentity`), or None.

    Why the write-ahead log: a writer killed before its checkpoint leaves its committed rows
    (and schema changes) in ``<file>.wal`` with the file itself untouched, and a read-only
    connection replays that log: the file alone would name the old state, and a copy, bind or
    plan kept for it would be given to a session reading the new one (a stale answer; a
    statement that binds no more, failing after its charge). Opening read only leaves both
    files as they are (checked by the tests), so equal identities mean equal contents."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    try:
        wal = os.stat(f"{path}.wal")
        log: tuple[int, int] | None = (wal.st_mtime_ns, wal.st_size)
    except FileNotFoundError:
        log = None
    except OSError:
        return None
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, log)


class SharedCopyRegistry:
    """The process's shared copies: key -> the name of the database attached for it, a lock
    per key (one session makes a copy while the others wait for it), and how many engines
    read each one (the last to release it detaches it)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._aliases: dict[Hashable, str] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._users: dict[Hashable, int] = {}
        self._asked: dict[Hashable, int] = {}
        self._count = itertools.count(1)

    def forget_asked(self) -> None:
        """Forget how many queries read each key's rows (the copies themselves stay)."""
        with self._guard:
            self._asked.clear()

    def asked(self, key: Hashable) -> int:
        """How many charged queries of the process's sessions have read ``key``'s rows, this
        one included (a default session copies from the second: :mod:`privplan.session.copies`)."""
        with self._guard:
            if len(self._asked) >= 4096:
                self._asked.clear()
            self._asked[key] = n = self._asked.get(key, 0) + 1
            return n

    def alias(self, key: Hashable) -> str:
        """The attached database's name for ``key`` (unique in the process: two keys never
        share one, whatever instance they are attached to)."""
        with self._guard:
            found = self._aliases.get(key)
            if found is None:
                found = self._aliases[key] = f"__privplan_shared_{next(self._count)}"
            return found

    def known(self, key: Hashable) -> str | None:
        """The name given to ``key`` if some session made (or is making) its copy."""
        with self._guard:
            return self._aliases.get(key)

    def lock(self, key: Hashable) -> threading.Lock:
        """The lock held while ``key``'s copy is made, adopted or dropped."""
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def acquire(self, key: Hashable) -> None:
        """One more engine reads ``key``'s copy (called under :meth:`lock`)."""
        with self._guard:
            self._users[key] = self._users.get(key, 0) + 1

    def release(self, key: Hashable) -> bool:
        """One engine less; True when it was the last (called under :meth:`lock`)."""
        with self._guard:
            left = self._users.get(key, 0) - 1
            if left > 0:
                self._users[key] = left
                return False
            self._users.pop(key, None)
            return True

    def users(self, key: Hashable) -> int:
        """How many engines read ``key``'s copy now (none: it is attached nowhere)."""
        with self._guard:
            return self._users.get(key, 0)


registry = SharedCopyRegistry()
kept(__name__, registry.forget_asked)  # (the copies attached now are live: never forgotten)


class SharingEngine:
    """The shared-copy part of :class:`~privplan.engines.duckdb_engine.DuckDBEngine` (its base
    class: the engine module stays small enough to review). Reads the engine's connection,
    its registered tables and generation, set by the engine's ``__init__``."""

    con: duckdb.DuckDBPyConnection
    generation: int
    _registered: dict[str, Any]
    _catalog_locked: bool
    _identity: FileIdentity | None
    _share_scope: Hashable | None
    _views_defined: bool
    _adopted: dict[str, tuple[Hashable, str]]

    def share_copies(self, scope: Hashable) -> None:
        """Share this engine's copies with the process's other engines of the same ``scope``
        (the session's policy content) over the same file state: see :meth:`_share_key`."""
        self._share_scope = scope

    def file_as_opened(self) -> FileIdentity | None:
        """The file's identity where nothing but the file as it was opened can decide what a
        name means here: opened by this engine, read only (DuckDB's file lock keeps writers
        out), nothing registered and no view defined. None otherwise. What this engine's
        copies (:meth:`_share_key`) and its catalog answers (:mod:`.file_catalog`) may share
        with the process's other engines on that file."""
        if (self._identity is None or not self._catalog_locked or self._registered
                or self._views_defined):
            return None
        return self._identity

    def _share_key(self, select_sql: str) -> Hashable | None:
        """The shared copy's key for ``select_sql``, or None where the copy is not shared: only
        where the statement's rows are a function of the key alone — the file opened here,
        read only, as it was then (its identity), nothing registered and no view defined (no
        name the text reads can mean something else in another session), the same policy
        content, and no volatile function in the text."""
        identity = self.file_as_opened()
        if (identity is None or self._share_scope is None
                or any(v in select_sql.lower() for v in VOLATILE)):
            return None
        return (identity, self._share_scope, select_sql)

    def shared_aliases(self) -> set[str]:
        """The databases of the shared copies this engine reads (attached to its instance)."""
        return {table.rsplit(".", 1)[0] for _, table in self._adopted.values()}

    def reads_shared(self, table: str) -> bool:
        """Whether ``table`` is a shared copy this engine reads (named for the process)."""
        return any(name == table for _, name in self._adopted.values())

    def process_uses(self, select_sql: str) -> int:
        """How many charged queries of the process read ``select_sql``'s rows (this one
        included) where its copy is shared, else 0."""
        key = self._share_key(select_sql)
        return 0 if key is None else registry.asked(key)

    def _shared_copy(self, select_sql: str, *, make: bool = False) -> str | None:
        """The shared copy of ``select_sql``'s rows if this engine may read one: adopted
        before; made by another engine of this DuckDB instance (adopted now); or, with
        ``make`` (after a charge: :meth:`materialize`), made now under the key's lock while
        every other engine that needs it waits. None: not shared (the engine's own copy)."""
        key = self._share_key(select_sql)
        if key is None:
            return None
        adopted = self._adopted.get(select_sql)
        if adopted is not None:
            return adopted[1]
        if not make and registry.known(key) is None:
            return None  # (no session of the process made it: nothing to look up)
        alias = registry.alias(key)
        lock = registry.lock(key)
        # a lookup (planning) never waits while another session makes the copy: it reads the
        # table meanwhile; only a session that needs the copy now (make) waits for it
        if not lock.acquire(blocking=make):
            return None
        try:
            # (not attached here: made by an instance that has ended, its rows kept for the
            # process — copy_snapshots — or made now, after the charge)
            # (attached only while some engine of the process reads it: the last to release
            # it detaches it, so with no reader there is nothing to look for — ~0.8 ms of a
            # fresh session; a copy left attached by a failed DETACH makes restoring fail,
            # which detaches it and reads or makes the copy as if none were kept)
            attached = registry.users(key) > 0 and self._attached(alias)
            if not attached and not copy_snapshots.restore(self.con, key, alias):
                if not make:
                    return None
                self._make_shared(alias, select_sql, key)
            registry.acquire(key)
        finally:
            lock.release()
        self._adopted[select_sql] = (key, f"{alias}.rows")
        self.generation += 1
        return f"{alias}.rows"

    def _attached(self, alias: str) -> bool:
        """Whether this DuckDB instance holds ``alias``'s finished copy (its ``ready`` table is
        created only once the copy is written and checkpointed)."""
        rows = self.con.execute(
            "SELECT 1 FROM duckdb_tables() WHERE database_name = ? AND table_name = 'ready'",
            [alias]).fetchall()
        return bool(rows)

    def _make_shared(self, alias: str, select_sql: str, key: Hashable) -> None:
        """Make the copy in a compressed in-memory database of its own (as :meth:`materialize`
        does), attached to the instance as ``alias``; on failure nothing stays attached. A
        user-level table's copy (its rows are chosen per unit: the costly one to make again)
        is also kept for the process (:mod:`.copy_snapshots`)."""
        from privplan.views.progress import execute_with_progress

        started = time.perf_counter()
        try:
            self.con.execute(f"ATTACH ':memory:' AS {alias} (COMPRESS, READ_WRITE)")
            execute_with_progress(
                self.con, f"CREATE TABLE {alias}.rows AS {select_sql}",
                desc="privplan: making the session's copy of the table")
            self.con.execute(f"CHECKPOINT {alias}")
            self.con.execute(f"CREATE TABLE {alias}.ready (x INTEGER)")
        except duckdb.Error:
            try:
                self.con.execute(f"DETACH DATABASE IF EXISTS {alias}")
            except duckdb.Error:
                pass
            raise ExecutionError(COPY_FAILED) from None
        logging.getLogger("privplan").info(
            "made the process's shared copy of the table (%s) in %.2f s", alias,
            time.perf_counter() - started)
        if per_unit_select(select_sql):
            copy_snapshots.keep(self.con, key, alias)

    def _release_shared(self) -> None:
        """Stop reading the shared copies; the last engine reading one detaches it."""
        for key, table in self._adopted.values():
            alias = table.rsplit(".", 1)[0]
            with registry.lock(key):
                if registry.release(key):
                    try:
                        self.con.execute(f"DETACH DATABASE IF EXISTS {alias}")
                    except duckdb.Error:
                        pass  # (the connection may already be closed by its owner)
        self._adopted.clear()
