"""Durable copies: the bounded rows of user-level tables, made once, read by every later session.

A user-level query reads the table's *bounded copy*: at most ``max_rows_per_unit`` rows per
unit, chosen by a deterministic order over the unit's own rows, unit-level columns made
canonical, bounded numeric columns on their SUM grid (:func:`privplan.rewrite.engine_sql.
bounded_source`). A session makes it on its first user-level query and keeps it, which makes
that first answer cost a window pass over every row (tens of times the plain query). The CLI, a
DB-API connection per request and every script open a fresh session, so they pay it each time.

``privplan prepare DB --policy P`` (:func:`prepare_copies`) makes those copies once, into a
file beside the database, ``<DB>.privplan-copies``; a session opened on the DuckDB file ``DB``
later reads them instead of making its own (:func:`open_copies`).

Why the answers and charges are unchanged: a copy is stored under the hash of the exact SELECT
that makes it (:func:`copy_name`), which spells out the table, the policy's column types, bounds,
resolutions, ``max_rows_per_unit`` and unit-level columns. A session uses a stored copy only for
the very statement it would run itself, so it reads the same rows it would have made. Accounting
never looks at the copy.

When the copies are used, and why that reveals nothing about individuals: only if the database
file (and its write-ahead log) has the same size and modification time as when the copies were
made, read from the file system before any row; and only while the session has registered no
table of its own (which could shadow one in the file). Otherwise the session ignores the file
and makes its copy as before. So whether the faster path is taken depends on file metadata —
on whether the owner changed the file since ``prepare`` — never on a row's value. (A changed
file's timing differs: that tells an analyst the file was written, which the owner controls.)

The copies file holds private rows, like the database: keep it where the database is kept. On a
file system that keeps modification times to the second, a write in the same second as
``prepare`` that leaves the size unchanged would go unnoticed: the copies would be stale (the
answers those of the data when they were made, privacy unaffected) — run ``prepare`` again after
writing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from privplan.errors import PolicyError

__all__ = ["SUFFIX", "copies_path", "copy_name", "open_copies", "prepare_copies"]

SUFFIX = ".privplan-copies"
_META = "__privplan_copies"  # the table listing the copies and the stamp they were made under


def copies_path(database: Path) -> Path:
    """Where the durable copies of ``database`` live: beside it, ``<name>.privplan-copies``."""
    return database.with_name(database.name + SUFFIX)


def copy_name(select_sql: str) -> str:
    """The table name of the copy made by ``select_sql`` (a hash of the statement's text)."""
    return "__privplan_copy_" + hashlib.sha256(select_sql.encode()).hexdigest()[:24]


def file_stamp(database: Path) -> str:
    """Size and modification time of the database file and of its write-ahead log (or that it
    has none): what has to be unchanged for copies made earlier to still hold."""
    parts = []
    for path in (database, database.with_name(database.name + ".wal")):
        try:
            st = path.stat()
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
        except FileNotFoundError:
            parts.append("-")
    return "|".join(parts)


def open_copies(con: duckdb.DuckDBPyConnection, database: Path) -> tuple[str, set[str]] | None:
    """Attach ``database``'s durable copies to ``con`` (read only) if they were made for the
    file as it is now: (the attached alias, the names of its copies), else None."""
    path = copies_path(database)
    if not path.exists():
        return None
    stamp = file_stamp(database)  # (before anything is read)
    alias = f"__privplan_durable_{uuid.uuid4().hex[:12]}"
    quoted = str(path).replace("'", "''")
    try:
        con.execute(f"ATTACH '{quoted}' AS {alias} (READ_ONLY)")
        rows = con.execute(f"SELECT name, stamp FROM {alias}.{_META}").fetchall()
    except duckdb.Error:
        _detach(con, alias)
        logging.getLogger("privplan").warning(
            "ignored '%s': not a privplan copies file (run `privplan prepare` again)", path)
        return None
    names = {name for name, made_for in rows if made_for == stamp}
    if not names:
        _detach(con, alias)
        logging.getLogger("privplan").info(
            "ignored the durable copies in '%s': the database changed since they were made "
            "(run `privplan prepare` again)", path)
        return None
    return alias, names


def _detach(con: duckdb.DuckDBPyConnection, alias: str) -> None:
    try:
        con.execute(f"DETACH {alias}")
    except duckdb.Error:
        pass


def prepare_copies(database: str | Path, policy: Any) -> list[str]:
    """Make the durable copies of every user-level table of ``policy`` in ``database`` (a
    DuckDB file), replacing earlier ones; returns the tables copied. Spends no budget and
    releases nothing: the copies are private rows, written beside the database.

    The file's stamp is read before and after; if the database changed meanwhile, nothing is
    kept and :class:`PolicyError` says to run it again."""
    from privplan.accounting.definitions import PureDP
    from privplan.session import connect

    db = Path(database)
    if not db.is_file():
        raise PolicyError(f"privplan prepare needs a DuckDB file; '{db}' is not one")
    stamp = file_stamp(db)
    target = copies_path(db)
    tmp = target.with_name(target.name + f".tmp-{uuid.uuid4().hex[:8]}")
    made: list[str] = []
    with connect(db, policy=policy, budget=PureDP(1)) as sess:
        if sess.engine.durable is not None:  # (read its own statements, not old copies)
            _detach(sess.engine.con, sess.engine.durable[0])
            sess.engine.durable = None
        selects = _user_level_selects(sess, [t.name for t in sess.policy.private_tables()])
        if not selects:
            return []
        con = sess.engine.con
        quoted = str(tmp).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS __privplan_prepare (READ_WRITE)")
        try:
            con.execute(f"CREATE TABLE __privplan_prepare.{_META} (name VARCHAR, stamp VARCHAR, "
                        "source_table VARCHAR)")
            for table, select in selects:
                name = copy_name(select)
                con.execute(f"CREATE TABLE __privplan_prepare.{name} AS {select}")
                con.execute(f"INSERT INTO __privplan_prepare.{_META} VALUES (?, ?, ?)",
                            [name, stamp, table])
                made.append(table)
        finally:
            con.execute("DETACH __privplan_prepare")
    if file_stamp(db) != stamp:
        tmp.unlink(missing_ok=True)
        raise PolicyError(f"'{db}' changed while its copies were made; run privplan prepare again")
    os.replace(tmp, target)
    return made


def _user_level_selects(sess: Any, tables: Sequence[str]) -> list[tuple[str, str]]:
    """The statement that makes each user-level table's bounded copy, as a session plans it."""
    from privplan.session import _bounded_select

    out = []
    for table in tables:
        planned, _ = sess.plan(f'SELECT COUNT(*) FROM "{table}"', {"epsilon": 1})
        for core in planned.plan.cores:
            if core.unit is not None:
                out.append((table, _bounded_select(core)))
    return out
