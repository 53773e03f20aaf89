"""The error hierarchy. Every user-facing error says what is wrong, where, and how to fix it."""

from __future__ import annotations


class PrivplanError(Exception):
    """Base class of every error privplan raises on purpose."""


class ParseError(PrivplanError):
    """The SQL text could not be parsed."""


class UnsupportedQueryError(PrivplanError):
    """The query is valid SQL but outside the subset privplan can answer privately."""


class PolicyError(PrivplanError):
    """The privacy policy is missing, malformed or inconsistent with the query."""


class BudgetExceededError(PrivplanError):
    """Answering would take the composed privacy cost over the budget. Nothing was spent."""


class LedgerError(PrivplanError):
    """The budget ledger cannot be opened or is damaged. It is never reset silently."""


class ExecutionError(PrivplanError):
    """The engine failed while reading data. Its message is withheld, and so is its kind (the
    engine's message could quote private values, and even the class of its error is a bit
    about the rows); the budget for the query was already charged."""


class EngineUnavailableError(PrivplanError):
    """The engine cannot be reached: the PostgreSQL server went away or the connection is
    closed or broken, or the Spark session was stopped or its JVM died. Raised when it is
    noticed before the charge (binding the statements), so nothing was spent; a session that
    opened its PostgreSQL connection itself connects again on its next query. (An engine that
    goes away while a charged statement runs is an :class:`ExecutionError`.)"""


class PostProcessingError(PrivplanError):
    """The outer query (HAVING, ORDER BY, LIMIT, expressions) failed over the noisy answers.
    It was checked before the charge on stand-in values, so this depends on the noisy values
    themselves; the budget for the query was charged."""


class InternalError(PrivplanError):
    """An internal invariant was broken. Please report it: this is a bug, not a usage error."""
