"""Shared copies kept for the process beyond the DuckDB instance that made them.

A shared copy (:mod:`privplan.engines.shared_copies`) lives in an in-memory database attached
to the DuckDB instance of its file, and DuckDB ends the instance with its last connection. A
process that opens a session per query (a DB-API connection per request, ``privplan serve``
with clients that connect one at a time) therefore lost every copy between queries, and each
fresh session over a user-level table read its bounded rows inline again: a window over every
row ordered by the portable row order (~8 ms at 1k rows, ~0.6 s at 1M).

So when a shared copy of a **user-level** table is made, its rows are also kept here, in
process memory, as an Arrow table beside the copy's exact ``CREATE TABLE`` (column types and
collations), under the shared copy's key — the data file *as it was opened* (identity), the
policy's content and the SELECT text, everything the rows depend on. A later instance over the
same file state gets the copy back (:func:`restore`): the same attached database, created from
that DDL and filled from the Arrow rows, so statements read it exactly as the first instance's.

* **Exactly the same rows, checked once.** Before a snapshot is kept it is restored once in
  the making instance and compared with the copy by the engine itself (``EXCEPT ALL`` both
  ways, and the same column types): a type whose values do not survive Arrow and the cast back
  is simply not kept. Restoring is deterministic, so every later restore gives those rows.
* **Bounded memory.** At most :data:`MAX_BYTES` of Arrow rows in all (least recently used
  dropped first); a copy larger than that is not kept (its sessions read inline as before).
* **Privacy.** Nothing here decides what is charged or released. A snapshot is taken only when
  a shared copy is made, after a charge; it holds the copy's rows, a fixed function of the file
  and the policy (the bounded rows every inline statement reads), so reading it changes no
  answer. Whether one exists depends on the queries the process ran and on the copy's size in
  bytes — time only (DESIGN.md §1), never what is released; a failure restoring it leaves
  nothing attached and the session reads the table inline.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import duckdb

from privplan.lru import LRU
from privplan.process_memory import kept

__all__ = ["MAX_BYTES", "keep", "restore", "snapshots"]

MAX_BYTES = 256 << 20
"""The Arrow rows the process keeps in all (256 MiB)."""
_BATCH = 1 << 16


@dataclass(frozen=True)
class _Snapshot:
    columns: str  # the copy's CREATE TABLE after its table's name: "(col TYPE ..., ...);"
    rows: Any  # a pyarrow.Table
    nbytes: int


class _Snapshots(LRU[_Snapshot]):
    """The process's snapshots by shared-copy key, least recently used dropped first while
    their rows exceed :data:`MAX_BYTES` in all (a snapshot larger than that is never put:
    :func:`keep` stops reading it)."""

    def __init__(self) -> None:
        super().__init__(max_entries=0)  # (bounded by bytes: _too_full)

    def _too_full(self) -> bool:
        return sum(s.nbytes for s in self._entries.values()) > MAX_BYTES

    def get(self, key: Hashable) -> _Snapshot | None:
        return self._found(key)

    def put(self, key: Hashable, snap: _Snapshot) -> None:
        self._store(key, snap)


snapshots = _Snapshots()
kept(__name__, snapshots.clear)


def keep(con: duckdb.DuckDBPyConnection, key: Hashable, alias: str) -> bool:
    """Keep the finished copy ``{alias}.rows`` (see the module) if it fits and restores to the
    same rows; True if kept. Never raises: a copy not kept is read as before."""
    try:
        import pyarrow as pa
    except ImportError:
        return False
    try:
        found = con.execute(
            "SELECT sql FROM duckdb_tables() WHERE database_name = ? AND table_name = 'rows'",
            [alias]).fetchall()
        ddl = found[0][0] if found else None
        prefix = 'CREATE TABLE "rows"('
        if not isinstance(ddl, str) or not ddl.startswith(prefix):
            return False
        reader = con.sql(f"SELECT * FROM {alias}.rows").to_arrow_reader(_BATCH)
        batches, size = [], 0
        for batch in reader:
            size += batch.nbytes
            if size > MAX_BYTES:
                return False
            batches.append(batch)
        snap = _Snapshot("(" + ddl[len(prefix):],
                         pa.Table.from_batches(batches, schema=reader.schema), size)
        if not _same_rows(con, alias, snap):
            logging.getLogger("privplan").info(
                "the shared copy %s does not survive Arrow exactly: not kept", alias)
            return False
    except Exception:  # noqa: BLE001 - after a charge: keeping is optional, failing is not
        # (this reads the copy's rows after the query was charged: whatever goes wrong — an
        # engine or Arrow error, memory — must not fail the query, only not keep the copy)
        logging.getLogger("privplan").info("could not keep the shared copy %s", alias)
        return False
    snapshots.put(key, snap)
    return True


def restore(con: duckdb.DuckDBPyConnection, key: Hashable, alias: str) -> bool:
    """Attach ``alias`` holding ``key``'s kept copy (its ``rows`` and its ``ready`` mark, as
    :meth:`~privplan.engines.shared_copies.SharingEngine._make_shared` leaves them); False,
    with nothing attached, if none is kept or it cannot be restored."""
    snap = snapshots.get(key)
    if snap is None:
        return False
    try:
        _fill(con, alias, snap)
        con.execute(f"CREATE TABLE {alias}.ready (x INTEGER)")
    except Exception:  # noqa: BLE001 - may run after a charge: restoring is optional
        # (a session that needs the copy after its charge restores it: a failure must leave
        # it making the copy, or reading inline, never fail the query)
        _detach(con, alias)
        return False
    return True


def _fill(con: duckdb.DuckDBPyConnection, alias: str, snap: _Snapshot) -> None:
    """``alias``, an in-memory database, with ``rows`` made by the copy's own DDL and filled
    from the snapshot (each value cast back to its column's type). Not compressed (no
    CHECKPOINT, as a copy being made is): compressing ~1M rows took as long as filling them
    (~150 ms each), for statements ~10 ms faster; its memory, as the snapshot's, is bounded by
    :data:`MAX_BYTES` and freed with the session."""
    # (one call for the database and its table, and the rows inserted from a relation over
    # the Arrow table rather than a view registered and dropped: ~0.6 ms of a fresh session)
    con.execute(f"ATTACH ':memory:' AS {alias} (READ_WRITE); "
                f'CREATE TABLE {alias}."rows"{snap.columns}')
    con.from_arrow(snap.rows).insert_into(f'{alias}."rows"')


def _same_rows(con: duckdb.DuckDBPyConnection, alias: str, snap: _Snapshot) -> bool:
    """Whether restoring ``snap`` gives ``{alias}.rows`` again, the engine as judge: the same
    column types and no row of either missing from the other (``EXCEPT ALL``, so duplicates
    count)."""
    trial = f"{alias}_trial"
    try:
        _fill(con, trial, snap)
        types = [con.execute(f"DESCRIBE SELECT * FROM {db}.rows").fetchall()
                 for db in (alias, trial)]
        if types[0] != types[1]:
            return False
        ((missing,),) = con.execute(
            f"SELECT (SELECT count(*) FROM (SELECT * FROM {alias}.rows EXCEPT ALL "
            f"SELECT * FROM {trial}.rows)) + (SELECT count(*) FROM (SELECT * FROM "
            f"{trial}.rows EXCEPT ALL SELECT * FROM {alias}.rows))").fetchall()
        return bool(missing == 0)
    finally:
        _detach(con, trial)


def _detach(con: duckdb.DuckDBPyConnection, alias: str) -> None:
    try:
        con.execute(f"DETACH DATABASE IF EXISTS {alias}")
    except duckdb.Error:
        pass
