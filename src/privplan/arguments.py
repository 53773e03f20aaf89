"""Argument mistakes at the public entry points: Python's own ``TypeError``, in privplan's words.

Why before the error boundary (:mod:`privplan.boundary`): a call that does not fit the
function's signature fails before privplan reads anything, so it is the caller's mistake, not a
bug; raised inside the boundary, Python's binding error would be withheld as an
``InternalError`` ("please report it"). The call is bound here first, and a mistake is
explained: which method, which argument, why, and the call to write instead (a budget given
positionally -> ``epsilon=``; query parameters given positionally -> ``params=``; an unknown
keyword -> the accepted keyword it resembles). Only the kinds of the caller's own arguments and
small numbers are quoted: nothing here has read data.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any, TypeVar

from privplan.accounting.definitions import KINDS, PrivacyValue

__all__ = ["ArgumentError", "accepts", "check_arguments", "checked_arguments"]

F = TypeVar("F", bound=Callable[..., Any])

_RECEIVERS = {"Session": "sess", "DPAccessor": "df.dp", "DPView": "view", "Connection": "con",
              "Cursor": "cur"}
_MODULES = {"privplan.session.session": "pp", "privplan.dbapi.connection": "privplan.dbapi"}
_FIRST = {"sql": "q", "database": "'data.duckdb'"}  # how an example shows a required argument


def accepts(*names: str) -> Callable[[F], F]:
    """The keywords a function taking ``**kwargs`` accepts (checked, with did-you-mean)."""

    def mark(fn: F) -> F:
        fn.__privplan_keywords__ = frozenset(names)  # type: ignore[attr-defined]
        return fn

    return mark


class ArgumentError(TypeError):
    """An argument mistake found inside a public entry point (a query that is not a str, say):
    a TypeError the error boundary lets through, as it does one found by binding the call."""


@functools.cache
def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(fn)


def checked_arguments(fn: F) -> F:
    """Decorate a public function so that an argument mistake is privplan's TypeError."""

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        check_arguments(fn, args, kwargs)
        return fn(*args, **kwargs)

    return checked  # type: ignore[return-value]


def check_arguments(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
                    ) -> None:
    """Raise privplan's TypeError if ``fn(*args, **kwargs)`` does not fit ``fn``'s signature."""
    sig = _signature(fn)
    try:
        sig.bind(*args, **kwargs)
    except TypeError as err:
        raise TypeError(_explain(fn, sig, args, kwargs, str(err))) from None
    accepted = getattr(fn, "__privplan_keywords__", None)
    if accepted is not None:
        for name in kwargs:
            if name not in sig.parameters and name not in accepted:
                raise TypeError(_unknown(fn, sig, args, name))


class _Call:
    """How messages show the call: its title (``Session.sql()``) and an example."""

    def __init__(self, fn: Callable[..., Any], sig: inspect.Signature, args: tuple[Any, ...]):
        owner, _, name = fn.__qualname__.rpartition(".")
        self.method = bool(owner)
        if owner and args and name != "__init__" and hasattr(type(args[0]), name):
            owner = type(args[0]).__name__  # (a base class's method: the user's class)
        if name == "__init__":  # a class called directly: pp.Session(...)
            self.prefix = f"{_MODULES.get(fn.__module__, fn.__module__)}.{owner}"
        elif owner:
            self.prefix = f"{_RECEIVERS.get(owner, owner.lower())}.{name}"
        else:
            self.prefix = f"{_MODULES.get(fn.__module__, fn.__module__)}.{name}"
        plain = owner and name != "__init__" and owner != "DPAccessor"  # (df.dp.sql() is seen)
        self.title = f"{owner}.{name}()" if plain else f"{self.prefix}()"
        params = list(sig.parameters.values())[1 if owner else 0:]
        self.positional = [p.name for p in params
                           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.required = [p.name for p in params if p.default is p.empty
                         and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.keywords = sorted({p.name for p in params if p.kind == p.KEYWORD_ONLY}
                               | set(getattr(fn, "__privplan_keywords__", ())))
        self.required_keywords = [p.name for p in params
                                  if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
        kind = getattr(args[0], "kind", None) if owner and args else None
        self.budget = (kind.keyword_example() if kind in KINDS  # (a session's definition)
                       else "epsilon=0.5")

    def example(self, extra: str | None = None) -> str:
        """The call with its required arguments and ``extra`` (by default, for a query: its
        budget)."""
        if extra is None:
            extra = self.budget if "epsilon" in self.keywords and self.method else ""
        shown = [_FIRST.get(n, n) for n in self.required]
        shown += [f"{n}=..." for n in self.required_keywords if not extra.startswith(n + "=")]
        return f"{self.prefix}({', '.join([*shown, extra] if extra else shown)})"


def _explain(fn: Callable[..., Any], sig: inspect.Signature, args: tuple[Any, ...],
             kwargs: Mapping[str, Any], python: str) -> str:
    call = _Call(fn, sig, args)
    given = list(args[1:] if call.method else args)
    if "positional argument" in python and len(given) > len(call.positional):
        return _too_many(call, given[len(call.positional)])
    unknown = [k for k in kwargs if k not in sig.parameters and k not in call.keywords]
    if unknown:
        return _unknown(fn, sig, args, unknown[0])
    missing = [n for n in [*call.required[len(given):], *call.required_keywords]
               if n not in kwargs]
    if "missing" in python and missing:
        return (f"{call.title} is missing its argument {missing[0]!r}: it is required (it has "
                f"no default). Pass it, e.g. {call.example()}.")
    twice = [n for n in call.positional[:len(given)] if n in kwargs]
    if twice:
        return (f"{call.title} got the argument {twice[0]!r} twice, by position and as "
                f"{twice[0]}=: a value can be given once. Pass it one way only.")
    return (f"{call.title}: the arguments do not fit its signature {call.prefix}{sig} "
            f"({python}). Pass the arguments it names, by keyword after the required ones.")


def _too_many(call: _Call, value: Any) -> str:
    """A positional argument too many: a budget or parameters in the wrong place, most often."""
    count = (f"{len(call.positional)} positional argument(s) "
             f"({', '.join(call.positional) or 'none'})")
    takes = f"{call.title} takes {count}"
    is_number = isinstance(value, (int, float, Decimal, Fraction)) and not isinstance(value, bool)
    if is_number and "epsilon" in call.keywords:
        return (f"{call.title} takes the budget as a keyword, not as the positional argument "
                f"{value!r} (a bare number could be any of epsilon, delta, rho or mu): "
                f"{call.example(call.budget)}")
    if isinstance(value, PrivacyValue) and "budget" in call.keywords:
        return (f"{call.title} takes a privacy value as the keyword budget=, not as a positional "
                f"argument (after the query every argument is a keyword): "
                f"{call.example('budget=' + repr(value))}")
    if isinstance(value, (list, tuple, Mapping)) and "params" in call.keywords:
        example = "{'age': 30}" if isinstance(value, Mapping) else "[30]"
        return (f"{takes}; query parameters go in params=, not as a positional "
                f"{type(value).__name__} (after the query every argument is a keyword, so "
                f"that a value is never taken for another): "
                f"{call.example('params=' + example)}")
    if isinstance(value, (list, tuple, Mapping)) and "sql" in call.positional:
        return (f"{takes}; it takes no query parameters (the {type(value).__name__} given "
                f"after the query): write the values into the query text, e.g. "
                f"{call.example()} with 'WHERE age > 30'.")
    if not call.keywords:
        return (f"{takes}, but one more (of type {type(value).__name__}) was given: it takes "
                f"nothing else. Drop it: {call.example()}.")
    keywords = ", ".join(f"{k}=" for k in call.keywords)
    return (f"{takes}, but one more (of type {type(value).__name__}) was given: the rest are "
            f"keywords ({keywords}). Pass it by its keyword, e.g. "
            f"{call.example((call.keywords[0] + '=...') if call.keywords else '')}.")


def _unknown(fn: Callable[..., Any], sig: inspect.Signature, args: tuple[Any, ...],
             name: str) -> str:
    call = _Call(fn, sig, args)
    known = [*call.positional, *call.keywords]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}=? " if close else ""
    return (f"{call.title} got an unknown keyword argument {name}=: it is not one of its "
            f"arguments ({', '.join(f'{k}=' for k in known)}). {hint}Fix the name, e.g. "
            f"{call.example((close[0] + '=...') if close else '')}.")
