"""The ``privplan`` command's paths and counts, checked before a command does any work.

Why: a bad path or number is the commonest mistake at a command line, and Python's answer to
it deep inside a command is a traceback (``UnicodeDecodeError`` for a binary spec,
``FileExistsError`` for a demo directory that is a file, ``ValueError: embedded null byte``).
Each command checks its arguments first with :func:`check_args`: a bad one is a
:class:`PolicyError` (a ledger path: :class:`LedgerError`) saying what, where and how to fix
it, printed as one line by :func:`privplan.cli.run.run_command` (exit status 2); nothing is
created or spent. The checks run when the command runs, not when argparse reads the
arguments, so a parser can be built and inspected without the files.
"""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from privplan.errors import LedgerError, PolicyError, PrivplanError

_ENGINE_URLS = ("postgresql://", "postgres://")


_POSITIONAL = {"path", "dest", "spec", "audit"}


def _plain(value: str, where: str, error: type[PrivplanError]) -> Path:
    if "\x00" in value:
        raise error(f"{where} {value!r}: a path cannot contain a NUL byte. Pass the path as it "
                    "is written on disk.")
    if not value:
        raise error(f"{where}: the path is empty. Pass a file path.")
    return Path(value)


_WHY_EXISTING = {  # why a missing file is refused rather than made
    "DuckDB file": " (privplan never creates a database: a typo would answer from an empty one)",
    "policy YAML file": " (the policy says which tables are private; privplan never guesses it)",
    "report spec (YAML)": " (the spec names the report's queries and budget)",
    "report's audit file (audit.json)": " (`privplan report run` writes it into its --out)",
}


def _existing(value: str, where: str, what: str, error: type[PrivplanError]) -> Path:
    path = _plain(value, where, error)
    if not path.exists():
        why = _WHY_EXISTING.get(what, "")
        raise error(f"{where} '{value}' does not exist{why}. Pass an existing {what}.")
    if path.is_dir():
        raise error(f"{where} '{value}' is a directory. Pass the path of a {what}, not its "
                    "folder.")
    if not os.access(path, os.R_OK):
        raise error(f"{where} '{value}' cannot be read (permission denied). Check the file's "
                    "permissions, or run as a user who may read it.")
    return path


def _text(value: str, where: str, what: str) -> None:
    path = _existing(value, where, what, PolicyError)
    try:
        path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"{where} '{value}' is not a text file (it is not UTF-8: a binary "
                          f"file, or the wrong file?). Pass the path of a {what}.") from None
    except OSError as err:
        raise PolicyError(f"{where} '{value}' cannot be read ({err.strerror}).") from None


def _database(value: str, where: str, *, url: bool = True) -> None:
    """An existing database file: a typo must not create an empty DuckDB file."""
    if url and (value == ":memory:" or value.startswith(_ENGINE_URLS)):
        return
    _existing(value, where, "DuckDB file", PolicyError)


def _new_file(value: str, where: str, error: type[PrivplanError]) -> None:
    """A file that may not exist yet, in a directory that does."""
    path = _plain(value, where, error)
    if path.is_dir():
        raise error(f"{where} '{value}' is a directory. Pass a file path.")
    if not path.parent.is_dir():
        raise error(f"{where} '{value}': its directory '{path.parent}' does not exist. "
                    "Create it, or pass a path in an existing directory.")


def _directory(value: str, where: str) -> None:
    path = _plain(value, where, PolicyError)
    if path.exists() and not path.is_dir():
        raise PolicyError(f"{where} '{value}' exists and is not a directory. Pass a new "
                          "directory, or an existing one.")


KINDS: dict[str, Callable[[str, str], None]] = {
    "policy": lambda v, w: _text(v, w, "policy YAML file"),
    "spec": lambda v, w: _text(v, w, "report spec (YAML)"),
    "audit": lambda v, w: _text(v, w, "report's audit file (audit.json)"),
    "database": _database,
    "database_file": lambda v, w: _database(v, w, url=False),
    "ledger": lambda v, w: _ledger(v, w),
    "count": lambda v, w: _count(v, w),
    "new_ledger": lambda v, w: _new_file(v, w, LedgerError),
    "new_file": lambda v, w: _new_file(v, w, PolicyError),
    "directory": _directory,
}


def _ledger(value: str, where: str, near: Sequence[Path] = ()) -> None:
    path = _plain(value, where, LedgerError)
    if not path.exists():
        raise LedgerError(f"{where} '{value}': no ledger there, and this command reads an "
                          "existing one (it records what was spent; it is never made here). "
                          "Fix: check the path" + ledger_hint(path, where, near) + ".")
    _existing(value, where, "ledger file", LedgerError)


def nearby_ledgers(missing: Path, near: Sequence[Path] = ()) -> list[Path]:
    """Ledger files a mistyped ledger path may have meant: every ``*.ledger.sqlite`` in its own
    folder and beside each of ``near`` (the database), and any ``*.sqlite`` there whose name is
    close to the one given, the closest first."""
    folders = dict.fromkeys([missing.parent, *(p.parent for p in near)])
    found: dict[Path, None] = {}
    for folder in folders:
        try:
            names = sorted(f.name for f in folder.iterdir() if f.is_file())
        except OSError:
            continue
        sqlite = [n for n in names if n.endswith(".sqlite")]
        for name in difflib.get_close_matches(missing.name, sqlite, n=3, cutoff=0.6):
            found[folder / name] = None
        for name in sqlite:
            if name.endswith(".ledger.sqlite"):
                found[folder / name] = None
    return [p for p in found if p != missing]


def ledger_hint(missing: Path, where: str, near: Sequence[Path] = ()) -> str:
    """'' or ``; did you mean --ledger ./x.ledger.sqlite`` (the flag or argument ``where``)
    to end a sentence."""
    found = nearby_ledgers(missing, near)
    if not found:
        return ""
    shown = [f"./{p}" if p.parent == Path() else str(p) for p in found[:3]]
    flag = f"{where} " if where.startswith("--") else ""
    return " (did you mean " + " or ".join(f"{flag}{s}" for s in shown) + "?)"


def _count(value: str, where: str) -> None:
    if int(value) < 1:
        raise PolicyError(f"{where} {value}: must be at least 1, since it counts what to "
                          f"make and none would make nothing. Fix: pass e.g. {where} 1000.")


def check_args(args: argparse.Namespace, **kinds: str) -> None:
    """Check the named arguments that were given, each as its kind (see :data:`KINDS`); the
    command's ``checks`` (its ``set_defaults``) name them."""
    for name, kind in kinds.items():
        value = getattr(args, name, None)
        if value is not None and value is not False:
            where = name if name in _POSITIONAL or kind == "database_file" else \
                "--" + name.replace("_", "-")
            if kind == "ledger":  # (a ledger beside the database is offered for a typo)
                database = getattr(args, "database", None)
                near = [Path(database)] if isinstance(database, str) and "\x00" not in database \
                    else []
                _ledger(str(value), where, near)
                continue
            KINDS[kind](str(value), where)
