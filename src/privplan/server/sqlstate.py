"""What a client is told when a statement fails: a SQLSTATE and privplan's own message.

The codes (documented for clients; PostgreSQL's where one fits):

* ``53000`` (insufficient_resources): the privacy budget would be exceeded; nothing was spent.
* ``42601`` (syntax_error): SQL privplan cannot parse; ``0A000`` (feature_not_supported): a
  query privplan does not answer with DP; ``42501`` (insufficient_privilege): the policy
  refuses it; ``22023`` (invalid_parameter_value): a bad ``SET privplan.*`` value or budget;
  ``42704`` (undefined_object): ``SHOW`` of an unknown setting; ``22000`` (data_exception):
  the outer query (HAVING, ORDER BY...) failed on the noisy table.
* ``58000`` (system_error): the ledger or the engine failed; ``XX000`` (internal_error): a bug.
* ``08P01`` (protocol_violation), ``28P01`` (invalid_password), ``28000``
  (invalid_authorization_specification: cleartext refused when TLS is required), ``57P05``
  (a startup, authentication or idle timeout), ``57014`` (query_canceled: a CancelRequest or
  ``statement_timeout``), ``53300`` (too many connections, to the server or of one analyst),
  ``53400`` (too many prepared statements or portals on one connection), ``26000``/``34000`` (no such
  prepared statement/portal), ``22P02`` (a parameter that is not a value of its type).

Privacy: only privplan's messages reach a client; they are written to say nothing about private
values (DESIGN.md invariant 5). Any other exception is a bug: the client gets "internal error"
and the exception's type stays in the server's log (its text could quote data).
"""

from __future__ import annotations

from dataclasses import dataclass

from privplan import errors as _pe
from privplan.dbapi import errors as _dbe

__all__ = ["BUDGET_EXCEEDED", "ClientError", "client_error"]

BUDGET_EXCEEDED = "53000"


@dataclass(frozen=True)
class ClientError(Exception):
    """An error the client sees as an ErrorResponse."""

    code: str
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        return self.message


_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (_pe.BudgetExceededError, BUDGET_EXCEEDED),
    (_pe.ParseError, "42601"),
    (_pe.PolicyError, "42501"),
    (_pe.UnsupportedQueryError, "0A000"),
    (_pe.LedgerError, "58000"),
    (_pe.ExecutionError, "58000"),
    (_pe.EngineUnavailableError, "58000"),
    (_pe.PostProcessingError, "22000"),
    (_pe.InternalError, "XX000"),
    (_dbe.BudgetExceeded, BUDGET_EXCEEDED),
    (_dbe.ProgrammingError, "42601"),
    (_dbe.NotSupportedError, "0A000"),
    (_dbe.OperationalError, "58000"),
)


def client_error(err: BaseException) -> ClientError | None:
    """The client's view of a privplan (or DB-API) error; None for anything else (a bug: the
    caller logs it and tells the client only that an internal error happened)."""
    if isinstance(err, ClientError):
        return err
    if isinstance(err, _dbe.Error) and err.privplan_error is not None:
        err = err.privplan_error
    if not isinstance(err, (_pe.PrivplanError, _dbe.Error)):
        return None
    for cls, code in _CODES:
        if isinstance(err, cls):
            return ClientError(code, str(err))
    return ClientError("XX000", str(err))
