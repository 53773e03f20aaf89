"""What :func:`privplan.dbapi.connect` was given, besides a database and keywords: a
``privplan://`` URL (the form SQLAlchemy's dialect takes), a session, or too little.

Why: a DB-API ``connect`` is often called with a connection string copied from a SQLAlchemy
setting, and it used to end in Python's "missing 2 required keyword-only arguments", which
names neither the URL form nor the keywords. The URL is read by the dialect's own reader
(:func:`privplan.dbapi.sqlalchemy_url.connect_arguments`), so both accept exactly the same URLs
and name the same URL parameters in their messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privplan.dbapi.errors import InterfaceError, ProgrammingError

__all__ = ["CALL", "URL_EXAMPLE", "is_url", "missing_keywords", "session_given", "url_arguments"]

URL_EXAMPLE = ("privplan:///data.duckdb?policy=policy.yaml&ledger=ledger.sqlite"
               "&budget_epsilon=3&epsilon=0.5")
CALL = ("privplan.dbapi.connect('data.duckdb', policy='policy.yaml', budget=pp.PureDP(3), "
        f"ledger='ledger.sqlite', epsilon=0.5), or one URL: privplan.dbapi.connect("
        f"'{URL_EXAMPLE}')")
"""The two accepted call forms, as the messages show them."""


def is_url(database: Any) -> bool:
    """Whether ``database`` is a ``privplan:`` URL."""
    return isinstance(database, str) and database.strip().lower().startswith("privplan:")


def url_arguments(url: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``privplan.dbapi.connect`` a ``privplan://`` URL stands for.
    ``given``: the keywords passed with it that are not at their defaults (refused: the URL
    carries the policy, ledger and budget, and two sources of them could disagree)."""
    if given:
        raise ProgrammingError(
            f"privplan.dbapi.connect() got a privplan:// URL and the keywords "
            f"{', '.join(f'{k}=' for k in given)} too. Why: the URL carries the policy, the "
            "ledger and the budgets (URL parameters policy, ledger, budget_epsilon, epsilon, "
            "...), and two sources could disagree. Fix: put them in the URL, or pass the path "
            f"with keywords instead: {CALL}.")
    try:
        from sqlalchemy import exc
        from sqlalchemy.engine import make_url

        from privplan.dbapi.sqlalchemy_url import connect_arguments
    except ImportError:
        raise InterfaceError(
            "privplan.dbapi.connect() got a privplan:// URL, which needs SQLAlchemy to be "
            "read. Why: the URL form is SQLAlchemy's, and it is not installed. Fix: pip install "
            "'privplan[sqlalchemy]', or pass the path with keywords: "
            "privplan.dbapi.connect('data.duckdb', policy='policy.yaml', "
            "budget=pp.PureDP(3), ledger='ledger.sqlite').") from None
    try:
        arguments = connect_arguments(make_url(url.strip()))
    except exc.ArgumentError as err:
        message = str(err)
        if not message.startswith("privplan URL parameter"):  # (make_url's own)
            message = (f"privplan.dbapi.connect(): {url!r} cannot be read as a URL "
                       f"({message}). Why: a privplan URL is privplan:///<database path>?"
                       f"<parameters>. Fix: write e.g. {URL_EXAMPLE}")
        raise ProgrammingError(message) from None
    _check_path(arguments["database"])
    return arguments


def _check_path(database: str) -> None:
    """Refuse a URL whose database path does not exist, naming the URL's path (what follows
    ``privplan:///``) rather than a Python argument."""
    path = Path(database)
    if database == ":memory:" or path.exists():
        return
    relative = "" if path.is_absolute() else (
        f", relative to the working directory {Path.cwd()} (an absolute path takes four "
        "slashes: privplan:////srv/data.duckdb)")
    raise ProgrammingError(
        f"the database path of the URL (what follows privplan:///), '{database}', does not "
        f"exist{relative}. Why: the URL's path is the database file privplan opens. Fix: "
        "write privplan:///relative/path.duckdb or privplan:////absolute/path.duckdb.")


def missing_keywords(missing: list[str]) -> TypeError:
    """The error for a call without ``policy=`` or ``budget=`` (and no URL)."""
    return TypeError(
        f"privplan.dbapi.connect() is missing {' and '.join(f'{k}=' for k in missing)}: the "
        "policy (a YAML path, a dict or a pp.Policy) and the session's total budget (e.g. "
        "pp.PureDP(3)). Why: every query is checked against the policy and charged to that "
        f"budget. Fix: {CALL}.")


def session_given(database: Any) -> None:
    """Refuse a privplan Session passed as the database, naming the wrapper to use."""
    if type(database).__name__ == "Session" and type(database).__module__.startswith(
            "privplan"):
        raise TypeError(
            "privplan.dbapi.connect() got a privplan Session as the database. Why: connect "
            "opens a new session from a database, a policy and a budget. Fix: wrap the session "
            "you have: privplan.dbapi.Connection(session, epsilon=0.5), or pass its database: "
            f"{CALL}.")
