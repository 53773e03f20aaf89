"""The ledger file: created atomically and checked before use, with failures explained (what
went wrong with the file, and what to do), never by resetting it (see :mod:`privplan.ledger.store`).

Privacy: a ledger file is created whole and never reset: one failing a check is refused, untouched.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privplan.errors import LedgerError

FORMAT = "privplan-ledger-3"
"""Entries carry a hash chain (:mod:`privplan.ledger.chain`) from a root over the format, the
ledger's id, the budget and the policy; meta holds the bound head (:mod:`privplan.ledger.record`)."""
FORMAT_2 = "privplan-ledger-2"
"""The chain without the ledger's id, a bound head or a bound policy record: verified, then
migrated on open (:mod:`privplan.ledger.migrate`)."""
FORMAT_1 = "privplan-ledger-1"
"""No chain at all: migrated only when the owner asks (``privplan ledger migrate``)."""
APPLICATION_ID = 0x70706C67
"""SQLite's header field for the file's application ("pplg"), set on creation."""
_DB_ERRORS = (sqlite3.Error, UnicodeDecodeError)
"""What reading or writing the file can raise (damaged text surfaces as UnicodeDecodeError)."""



_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ("CREATE TABLE entries (seq INTEGER PRIMARY KEY, query_id TEXT NOT NULL UNIQUE, "
     "sql TEXT NOT NULL, time REAL NOT NULL, marginal TEXT NOT NULL, total_after TEXT NOT NULL, "
     "mechanisms TEXT NOT NULL, hash TEXT)"),
)


def _create(path: Path) -> None:
    """Create a new, complete ledger file at ``path`` atomically: it is built under a temporary
    name in the same directory and linked into place, so a process that opens the path at the
    same moment sees either no file or a whole one (never an empty one); if another process
    links first, its file is used."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.new")
    try:
        con = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=DELETE")
            con.execute(f"PRAGMA application_id = {APPLICATION_ID}")  # (says what it is)
            con.execute("BEGIN")
            for statement in _SCHEMA:
                con.execute(statement)
            con.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
            con.execute("INSERT INTO meta VALUES ('ledger_id', ?)", (new_ledger_id(),))
            con.execute("COMMIT")
        finally:
            con.close()
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    except _DB_ERRORS as err:
        raise _failure(path, err, "creating it") from None
    except OSError as err:
        raise LedgerError(
            f"ledger '{path}' cannot be created: {err.strerror or err}. Check that its directory "
            "is writable (and on a file system with hard links), or pass another path.") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def new_ledger_id() -> str:
    """A ledger's identity: random, so two ledgers with the same budget and policy differ."""
    return secrets.token_hex(16)


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


@dataclass(frozen=True)
class FileStamp:
    """What the OS says about the ledger's main file (from ``stat``: the file is never opened
    outside SQLite, because closing any descriptor of it would drop the locks SQLite holds on
    it in this process)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @property
    def identity(self) -> tuple[int, int]:
        return self.dev, self.ino

    @property
    def content(self) -> tuple[int, int, int]:
        """Changes whenever the file is written (SQLite's checkpoints, or anything else)."""
        return self.size, self.mtime_ns, self.ctime_ns


def file_stamp(path: Path) -> FileStamp | None:
    """The stamp of the file at ``path`` (None if there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FileStamp(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def close_leaving(con: sqlite3.Connection, path: Path, ours: bool) -> None:
    """Close a ledger connection. When the file at ``path`` is no longer the one it opened
    (``ours`` False: overwritten in place, truncated), SQLite must not copy the WAL into it,
    as it does when its last connection closes: that would write this ledger's newest pages
    into whatever now sits there. A read-only connection holding a read transaction while
    ``con`` closes keeps it from being the last (so it copies nothing), and, read-only, cannot
    write when it closes itself. (Since each charge is no longer copied into the main file
    before it returns, the WAL holds pages the main file lacks: see
    :mod:`privplan.ledger.durability`.)"""
    guard = None
    if not ours:
        with contextlib.suppress(*_DB_ERRORS):
            guard = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                    isolation_level=None)
            guard.execute("BEGIN")
            guard.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    try:
        con.close()
    finally:
        if guard is not None:
            guard.close()


def _claim(ledger: Any) -> None:
    """A ledger object remembers which entries its session has admitted, so it can serve one
    session only: a second session on the same object would skip the first one's charges and
    under-count. Sessions that share a budget share the ledger *file* (each opens its own)."""
    if getattr(ledger, "_claimed", False):
        raise LedgerError(
            "this ledger object already serves another session; two sessions on one object "
            "would miss each other's charges. Pass the ledger's path to each session instead "
            "(they then share the budget through the file).")
    ledger._claimed = True


def _check_directory(path: Path) -> None:
    parent = path.parent
    if not parent.exists():
        raise LedgerError(
            f"ledger '{path}': its directory '{parent}' does not exist. Create the directory, "
            "or pass a path in an existing one.")
    if not parent.is_dir():
        raise LedgerError(f"ledger '{path}': '{parent}' is not a directory.")


def _check_file(path: Path) -> None:
    """A path that is no file is named here; what a file holds is SQLite's to judge (it is
    never opened outside SQLite: see :class:`FileStamp`)."""
    if path.is_dir():
        raise LedgerError(f"ledger path '{path}' is a directory; pass a file path")
    if not path.is_file():
        raise LedgerError(f"ledger path '{path}' is not a regular file; pass a file path")


def _failure(path: Path, err: Exception, doing: str) -> LedgerError:
    """A :class:`LedgerError` naming the real cause of an SQLite failure and the fix."""
    if isinstance(err, UnicodeDecodeError):
        err = sqlite3.DatabaseError("it holds text that is not valid UTF-8 (malformed)")
    name = getattr(err, "sqlite_errorname", "") or ""
    text = str(err)
    low = text.lower()
    tail = (" Nothing was charged or released; the ledger file was left as it is."
            if doing == "recording a charge" else " The file was left as it is.")
    if name == "SQLITE_FULL" or "disk is full" in low or "file too large" in low:
        cause, fix = "the disk is full", "Free space on its file system, then try again."
    elif name.startswith("SQLITE_READONLY") or "readonly" in low or "read-only" in low:
        cause = "the ledger file, its directory or its file system is read-only"
        fix = "Make them writable (the ledger records every charge), or use a writable path."
    elif name.startswith("SQLITE_CANTOPEN") or "unable to open" in low:
        cause, fix = _open_cause(path)
    elif name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in low:
        cause = "another process holds it locked for longer than the timeout"
        fix = "Try again when the other session's charge is done."
    elif name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "malformed" in low \
            or "not a database" in low or "integrity" in low or "ledger tables" in low \
            or "ledger format" in low:
        return LedgerError(
            f"ledger '{path}' cannot be used: {text}. The file is damaged or is not a "
            "privplan ledger; it was left untouched. Restore it from a backup — privplan never "
            "resets a ledger, because that would forget spent budget.")
    elif name.startswith("SQLITE_IOERR") or "i/o" in low:
        cause, fix = _io_cause(path)
    else:
        cause, fix = f"SQLite reported: {text}", "Check the file and its disk."
    return LedgerError(f"ledger '{path}' failed while {doing}: {cause} ({text}). {fix}{tail}")


def _open_cause(path: Path) -> tuple[str, str]:
    """Why SQLite could not open the file (or the journal files it keeps beside it)."""
    parent = path.parent
    with contextlib.suppress(OSError):
        if os.statvfs(parent).f_flag & os.ST_RDONLY:
            why = ("the file system holding the ledger is read-only (SQLite must write its "
                   "journal beside the file, even to read)")
            return why, "Mount it read-write, or use a ledger on a writable file system."
    if not parent.is_dir():
        return ("its directory does not exist", "Create the directory, or pass another path.")
    if not os.access(parent, os.W_OK | os.X_OK):
        why = ("the ledger's directory is read-only for this user (SQLite writes its journal "
               "beside the file)")
        return why, "Make the directory writable, or use another path."
    return ("the file cannot be opened (no permission?)", "Check the path and its permissions.")


def _io_cause(path: Path) -> tuple[str, str]:
    """What an I/O error most likely was: no space left, a file size limit, or the disk."""
    import resource
    import shutil

    with contextlib.suppress(OSError):
        if shutil.disk_usage(path.parent).free < 1 << 20:
            return "the disk is full", "Free space on its file system, then try again."
    with contextlib.suppress(OSError, ValueError):
        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        if soft != resource.RLIM_INFINITY:
            why = (f"the file could not grow: the process's file size limit (ulimit -f, {soft} "
                   "bytes) was reached, as on a full disk")
            return why, "Raise the limit or free space, then try again."
    return ("an I/O error (a failing disk, or the file vanished)",
            "Check the disk and the file, then try again.")


@contextlib.contextmanager
def owner_transaction(con: sqlite3.Connection, path: Path, doing: str) -> Iterator[None]:
    """An owner's command's write transaction (migrate, seal), begun ``BEGIN IMMEDIATE`` by
    the caller: committed when the block ends, rolled back on any failure — all of the command
    or none of it, so a ledger is never left half migrated or sealed — and the connection
    closed either way. A SQLite failure becomes a :class:`LedgerError` naming ``doing``."""
    try:
        yield
        con.execute("COMMIT")
    except _DB_ERRORS as err:
        with contextlib.suppress(sqlite3.Error):
            con.execute("ROLLBACK")
        raise _failure(path, err, doing) from None
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            con.execute("ROLLBACK")
        raise
    finally:
        con.close()
