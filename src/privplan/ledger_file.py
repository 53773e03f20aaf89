"""The ledger file: created atomically and checked before use, with failures explained (what
went wrong with the file, and what to do), never by resetting it (see :mod:`privplan.ledger`)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from privplan.errors import LedgerError

FORMAT = "privplan-ledger-2"
"""Entries carry a hash chain (:mod:`privplan.ledger_chain`); meta holds its root and head."""
_SQLITE_HEADER = b"SQLite format 3\x00"
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
            con.execute("BEGIN")
            for statement in _SCHEMA:
                con.execute(statement)
            con.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
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


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


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
    if path.is_dir():
        raise LedgerError(f"ledger path '{path}' is a directory; pass a file path")
    try:
        with path.open("rb") as f:
            header = f.read(len(_SQLITE_HEADER))
    except OSError as err:
        raise LedgerError(
            f"ledger '{path}' cannot be read: {err.strerror or err}. Check its permissions.") from None
    if header != _SQLITE_HEADER:
        what = "empty" if not header else "not an SQLite file"
        raise LedgerError(
            f"ledger '{path}' is {what} (truncated or corrupted?). It was left untouched: "
            "privplan never resets a ledger, because that would forget spent budget. Restore it "
            "from a backup, or pass a new path to start a new budget.")


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
