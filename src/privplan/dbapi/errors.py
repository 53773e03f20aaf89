"""PEP 249's exception classes for :mod:`privplan.dbapi.connection` (which re-exports them), and the
translation of privplan's own errors into them."""

from __future__ import annotations

from typing import Literal

import duckdb

from privplan import errors as _pe


class Warning(Exception):  # the name is PEP 249's (it shadows the builtin here)
    """Important warnings (PEP 249). privplan raises none today."""


class Error(Exception):
    """Base of every DB-API error. ``privplan_error`` is the privplan error it wraps, if any."""

    privplan_error: _pe.PrivplanError | None = None


class InterfaceError(Error):
    """Misuse of the interface itself (not of the database)."""


class DatabaseError(Error):
    """Errors related to the database (privplan)."""


class DataError(DatabaseError):
    """A value cannot be processed (e.g. a NaN or infinite query parameter)."""


class OperationalError(DatabaseError):
    """Errors in the operation of the database: budget, ledger, engine."""


class IntegrityError(DatabaseError):
    """Relational integrity (unused: privplan never writes data)."""


class InternalError(DatabaseError):
    """privplan's own invariant was broken (a bug): wraps :class:`privplan.InternalError`."""


class ProgrammingError(DatabaseError):
    """The query or its use is wrong: parse errors, unsupported SQL, policy conflicts, bad
    parameters, a closed cursor."""


class NotSupportedError(DatabaseError):
    """A DB-API method privplan cannot honour (rollback, executemany)."""


class BudgetExceeded(OperationalError):
    """Answering would exceed the session's privacy budget. Nothing was spent."""


_MAPPING: tuple[tuple[type[_pe.PrivplanError], type[Error]], ...] = (
    (_pe.ParseError, ProgrammingError),
    (_pe.UnsupportedQueryError, ProgrammingError),
    (_pe.PolicyError, ProgrammingError),
    (_pe.BudgetExceededError, BudgetExceeded),
    (_pe.LedgerError, OperationalError),
    (_pe.ExecutionError, OperationalError),
    (_pe.EngineUnavailableError, OperationalError),
    (_pe.InternalError, InternalError),
)


def _translate(err: _pe.PrivplanError) -> Error:
    """The DB-API error for a privplan error (``DatabaseError`` for any other PrivplanError)."""
    cls: type[Error] = DatabaseError
    for source, target in _MAPPING:
        if isinstance(err, source):
            cls = target
            break
    out = cls(str(err))
    out.privplan_error = err
    return out


class _Translating:
    """``with _Translating(): ...`` re-raises privplan (and engine) errors as DB-API errors."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, et: object, ev: BaseException | None, tb: object) -> Literal[False]:
        if isinstance(ev, _pe.PrivplanError):
            raise _translate(ev) from ev
        if isinstance(ev, duckdb.Error):
            # Not expected (the session wraps engine errors), but an engine message could quote
            # private values, so it is withheld here as well (DESIGN.md invariant 5).
            raise OperationalError(
                "the engine failed; its message and the kind of its error are withheld because "
                "they could say something about private values.") from None
        return False
