"""Durable copies: the tables' bounded rows and SUM grids, made once, read by every later session.

A user-level query reads the table's *bounded copy*: at most ``max_rows_per_unit`` rows per
unit, chosen by a deterministic order over the unit's own rows, unit-level columns made
canonical, bounded numeric columns on their SUM grid (:func:`privplan.rewrite.engine_sql.
bounded_source`). A session makes it on its first user-level query and keeps it, which makes
that first answer cost a window pass over every row (tens of times the plain query). The CLI, a
DB-API connection per request and every script open a fresh session, so they pay it each time.
A row-level query clamps every row onto its SUM grid in its statement (2.5x the plain query at
10M rows for a grouped AVG); a prepared session copies the rows with their grids once.

``privplan prepare DB --policy P`` (:func:`privplan.session.prepare.prepare_copies`) makes both kinds
of copy once, into a file beside the database, ``<DB>.privplan-copies`` (:func:`write_copies`);
a session opened on the DuckDB file ``DB`` later reads them instead of making its own or
clamping every row (:func:`open_copies`; a default session reads a row-level copy only from
here, it makes none).

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

import duckdb

from privplan.errors import PolicyError

__all__ = ["SUFFIX", "copies_path", "copy_name", "file_stamp", "open_copies", "write_copies"]

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


def write_copies(con: duckdb.DuckDBPyConnection, database: Path, stamp: str,
                 selects: Sequence[tuple[str, str]]) -> None:
    """Write the copies made by ``selects`` ((table, SELECT) pairs, run on ``con``) into
    ``database``'s copies file, replacing it whole (written aside, then renamed), under
    ``stamp`` (the database file's :func:`file_stamp` before anything was read)."""
    target = copies_path(database)
    tmp = target.with_name(target.name + f".tmp-{uuid.uuid4().hex[:8]}")
    quoted = str(tmp).replace("'", "''")
    try:
        con.execute(f"ATTACH '{quoted}' AS __privplan_prepare (READ_WRITE)")
    except duckdb.Error as err:  # (about the path only: no private value in it)
        raise PolicyError(f"cannot write the copies beside '{database}': "
                          f"{str(err).splitlines()[0]}. Run privplan prepare where the "
                          "database's folder is writable.") from None
    try:
        con.execute(f"CREATE TABLE __privplan_prepare.{_META} (name VARCHAR, stamp VARCHAR, "
                    "source_table VARCHAR)")
        for table, select in selects:
            name = copy_name(select)
            con.execute(f"CREATE TABLE __privplan_prepare.{name} AS {select}")
            con.execute(f"INSERT INTO __privplan_prepare.{_META} VALUES (?, ?, ?)",
                        [name, stamp, table])
        con.execute("DETACH __privplan_prepare")
        if file_stamp(database) != stamp:
            raise PolicyError(f"'{database}' changed while its copies were made; run privplan "
                              "prepare again")
        os.replace(tmp, target)
    except duckdb.Error as err:  # (its message could quote private values: withheld)
        raise PolicyError(f"making the copies of '{database}' failed ({type(err).__name__}); "
                          "nothing was written") from None
    except OSError as err:
        raise PolicyError(f"cannot put the copies at '{target}': {err.strerror}; nothing was "
                          "written") from None
    finally:
        _detach(con, "__privplan_prepare")
        tmp.unlink(missing_ok=True)
        tmp.with_name(tmp.name + ".wal").unlink(missing_ok=True)
