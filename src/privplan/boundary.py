"""The public boundary: every call into a session ends in a result or a :class:`PrivplanError`.

Why: a raw exception is a bad answer to bad input (it says neither what nor how to fix), and an
unexpected one from the engine could quote a private value in its message. Expected failures are
raised as PrivplanErrors where they happen; this wrapper is the last line for the rest:

* ``RecursionError`` (input nested beyond what a recursive walk can take) becomes an
  :class:`UnsupportedQueryError`;
* an engine error that escaped its wrapper becomes an :class:`InternalError` whose message and
  class are withheld (the message could quote data; even the class, say a conversion error, is
  a bit about the rows), as does any other unexpected exception (it is a bug: the original
  stays attached as ``__cause__`` for debugging in the process, never in the message).

Whether anything was charged is unchanged by the conversion: the ledger commits before release,
and a failure after the charge stays charged.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import duckdb

from privplan.arguments import ArgumentError, check_arguments
from privplan.errors import InternalError, PolicyError, PrivplanError, UnsupportedQueryError

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("privplan")


def privplan_errors(fn: F) -> F:
    """Decorate a public entry point so that it raises only :class:`PrivplanError`s — or,
    for a call that does not fit its signature, Python's own ``TypeError`` in privplan's words
    (bound first, outside the boundary: see :mod:`privplan.arguments`)."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        check_arguments(fn, args, kwargs)
        try:
            return fn(*args, **kwargs)
        except PrivplanError as err:
            # the message is what the caller sees anyway (data-dependent ones are withheld)
            log.info("%s refused (%s): %s", fn.__name__, type(err).__name__,
                     str(err).splitlines()[0] if str(err) else "")
            raise
        except ArgumentError:
            raise  # (the caller's own argument, explained where it was found)
        except RecursionError:
            raise UnsupportedQueryError(
                "the input is nested too deeply to analyse: flatten its expressions (fewer "
                "nested parentheses, functions or NOTs).") from None
        except duckdb.ConnectionException as err:
            raise PolicyError(
                "the database connection is closed (a session closes the connection it was "
                "given when it is closed). Open a new connection and a new session.") from err
        except duckdb.Error as err:
            raise InternalError(
                "the engine failed unexpectedly; its message and the kind of its error are "
                "withheld because they could say something about private values. Please "
                "report it with the query.") from err
        except Exception as err:
            raise InternalError(
                "an unexpected error inside privplan; its kind and message are withheld "
                "(raised after the engine read rows, they could say something about them; "
                "the original is this error's __cause__). Please report it with the query. "
                "Nothing was released.") from err

    return guarded  # type: ignore[return-value]
