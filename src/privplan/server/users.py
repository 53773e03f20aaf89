"""The server's users file: each analyst's SCRAM-SHA-256 verifier and budget, never a password.

A JSON object ``{"format": "privplan-users", "version": 1, "users": {NAME: {"scram_sha_256":
{"salt", "iterations", "stored_key", "server_key"}, "budget": {"epsilon": ..., ...}}}}`` (bytes
as base64). The verifier is what RFC 5802 lets a server keep: it checks a client's proof and
cannot be used to log in (it yields neither the password nor the client key). The file is
written atomically, a temporary file in the same folder with mode 0600 then ``os.replace``, so a
crash leaves the old file or the new one, and a failing ``add`` changes nothing.

Each analyst's budget is enforced by the server on their own ledger, on top of the data's total
(:mod:`privplan.server.accounts`).

Privacy: the file holds no data and no password; reading it never touches the ledger.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scramp

from privplan.accounting.definitions import build, kind_for
from privplan.errors import PolicyError

__all__ = ["ITERATIONS", "User", "add_user", "check_budget", "load_users", "make_user"]

ITERATIONS = 4096  # PostgreSQL's default scram_iterations
_FORMAT = "privplan-users"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,62}")


@dataclass(frozen=True)
class User:
    """One analyst: name, SCRAM verifier and the budget stored for them (keyword: value)."""

    name: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes
    budget: dict[str, float]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def check_budget(budget: dict[str, float]) -> dict[str, float]:
    kind = kind_for(budget)
    if kind is None:
        raise PolicyError(f"the budget {budget} names no privacy definition. Fix: give "
                          "--epsilon (optionally with --delta), --rho or --mu.")
    try:
        build(kind, budget)
    except (ValueError, TypeError) as err:
        raise PolicyError(f"invalid budget: {err}. Nothing was written.") from None
    return {k: float(v) for k, v in budget.items()}


def make_user(name: str, password: str, budget: dict[str, float]) -> User:
    """A new user record: the password is turned into its verifier here and dropped."""
    if not _NAME.fullmatch(name):
        raise PolicyError(f"user name {name!r}: use 1 to 63 letters, digits, '_', '.', '@' or "
                          "'-' (not starting with '.', '@' or '-').")
    if not password:
        raise PolicyError("the password is empty. Fix: give a password on standard input or "
                          "in --password-file.")
    salt, stored, server, iterations = scramp.ScramMechanism().make_auth_info(
        password, iteration_count=ITERATIONS)
    return User(name, bytes(salt), int(iterations), bytes(stored), bytes(server),
                check_budget(budget))


def _record(user: User) -> dict[str, Any]:
    return {"scram_sha_256": {"salt": _b64(user.salt), "iterations": user.iterations,
                              "stored_key": _b64(user.stored_key),
                              "server_key": _b64(user.server_key)},
            "budget": dict(user.budget)}


def _user(name: str, record: Any, where: str) -> User:
    try:
        v = record["scram_sha_256"]
        raw = [base64.b64decode(v[k], validate=True)
               for k in ("salt", "stored_key", "server_key")]
        iterations = v["iterations"]
        if not isinstance(iterations, int) or iterations < 1 or len(raw[1]) != 32 or \
                len(raw[2]) != 32 or not raw[0]:
            raise ValueError
        budget = check_budget(dict(record["budget"]))
    except (KeyError, TypeError, ValueError, binascii.Error):
        raise PolicyError(f"{where}: the entry of user {name!r} is malformed. Fix: remove it "
                          "and add the user again with `privplan users add`.") from None
    return User(name, raw[0], iterations, raw[1], raw[2], budget)


def load_users(path: str | os.PathLike[str]) -> dict[str, User]:
    """Every user of the file at ``path`` (a missing file is an error: the server would have
    no one to let in)."""
    where = f"users file '{path}'"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyError(f"{where} does not exist. Fix: create it with `privplan users add "
                          f"{path} NAME --epsilon E`.") from None
    except (OSError, UnicodeDecodeError) as err:
        raise PolicyError(f"{where} cannot be read ({type(err).__name__}).") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise PolicyError(f"{where} is not JSON (line {err.lineno}). Fix: pass the file "
                          "`privplan users add` wrote.") from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT or data.get("version") != 1 \
            or not isinstance(data.get("users"), dict):
        raise PolicyError(f"{where} is not a privplan users file (version 1). Fix: pass the "
                          "file `privplan users add` wrote.")
    return {name: _user(name, record, where) for name, record in data["users"].items()}


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def add_user(path: str | os.PathLike[str], user: User) -> None:
    """Add ``user`` to the file at ``path`` (created if missing); an existing name is refused
    (a silent replace would hand the name's budget to whoever knows the new password)."""
    p = Path(path)
    users = load_users(p) if p.exists() else {}
    if user.name in users:
        raise PolicyError(f"user {user.name!r} is already in users file '{p}'. Nothing was "
                          "changed. Fix: choose another name.")
    users[user.name] = user
    _write_atomically(p, {"format": _FORMAT, "version": 1,
                          "users": {n: _record(u) for n, u in sorted(users.items())}})
