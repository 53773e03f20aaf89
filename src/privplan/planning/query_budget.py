"""A query's budget from its keyword arguments, in the session's privacy definition.

A leading keyword of a registered definition (``epsilon=``, with ``delta=``; ``rho=``; ``mu=``:
:mod:`privplan.accounting.definitions.keywords`) or ``budget=``: exactly one names the whole budget; a value of another definition than the session's, a non-number or a zero budget is
refused with what to pass instead (a failure that does not depend on the data spends nothing).

Privacy: a budget is one positive value of the session's definition; anything else is refused free.
"""

from __future__ import annotations

from decimal import Decimal
from numbers import Real
from typing import Any

from privplan.accounting.definitions import (
    PrivacyValue,
    budget_keywords,
    build,
    keyword_menu,
    kind_for,
    kind_with,
    leader_of,
    leading_keywords,
)
from privplan.errors import PolicyError

__all__ = ["query_budget", "query_groups"]


def query_groups(value: Any) -> int | None:
    """``max_groups_contributed=`` of one query: a positive int, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyError(f"max_groups_contributed must be a positive integer, got {value!r}.")
    return value


def query_budget(session_kind: type[PrivacyValue], *, budget: Any = None, **given: Any) -> Any:
    """The query's total budget as a value of the session's kind (clear errors otherwise).

    ``given``: the registered definitions' keywords (:func:`budget_keywords`), None for unset."""
    unknown = [k for k in given if k not in budget_keywords()]
    if unknown:
        raise TypeError(f"query_budget() got an unexpected keyword argument {unknown[0]!r}")
    values = {k: given[k] for k in budget_keywords() if given.get(k) is not None}
    named = [k for k in leading_keywords() if k in values] + (["budget"] if budget is not None
                                                             else [])
    if not named and values:
        raise PolicyError(_alone(next(iter(values)), session_kind))
    if not named:
        raise PolicyError(
            f"say how much privacy budget this query may use: pass "
            f"{', '.join(keyword_menu())} or budget=<a privacy value>. Why: every "
            "answer spends budget, and privplan never picks the amount for you."
        )
    if len(named) > 1:
        raise PolicyError(
            f"pass only one of {', '.join(named)} for a query: each names a whole budget (in "
            f"its privacy definition). Pass one, matching the session's "
            f"({param_hint(session_kind)}).")
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, Real | Decimal):
            raise PolicyError(
                f"{name}={v!r} is not a number: pass a number, e.g. {name}=0.5 (a string or a "
                "boolean is refused rather than guessed at).")
    stray = [k for k in values if leader_of(k) not in values]
    if stray:
        raise PolicyError(_stray(stray[0], named[0], session_kind))
    try:
        value: PrivacyValue = budget if budget is not None else _value(session_kind, values)
    except (TypeError, ValueError) as err:
        raise PolicyError(f"invalid query budget: {err}. Why: a budget that is not a finite "
                          "positive number bounds nothing. Fix: pass a positive number, e.g. "
                          "epsilon=0.5.") from None
    if type(value) is not session_kind:
        raise PolicyError(_other_kind(type(value), session_kind, named[0]))
    if value.is_zero():
        shown = f"{named[0]}={values.get(named[0], budget)!r}"
        raise PolicyError(f"{shown}: the query budget must be positive (a query with no budget "
                          f"could release nothing). Pass e.g. {param_hint(session_kind).split('=')[0]}=0.1.")
    return value


def _value(session_kind: type[PrivacyValue], values: dict[str, Any]) -> PrivacyValue:
    """The value the keywords name: the session's own definition when they are its leading
    keyword and some of the rest (an (ε, δ) session: epsilon= alone is δ = 0), else the
    definition whose keywords they are exactly."""
    own = session_kind.keywords()
    if own[0] in values and set(values) <= set(own):
        return build(session_kind, {n: values.get(n, 0) for n in own})
    kind = kind_for(values)
    if kind is None:
        raise ValueError(f"{', '.join(f'{n}=' for n in values)} name no privacy definition "
                         f"(pass {', '.join(keyword_menu())})")
    return build(kind, values)


def param_hint(kind: Any) -> str:
    return " and ".join(f"{n}=" for n in kind.keywords())


def _other_kind(query_kind: type[PrivacyValue], session_kind: type[PrivacyValue],
                keyword: str) -> str:
    """A query budget of another privacy definition than the session's: what to pass instead.

    Why refused rather than converted: the session composes one definition, and a conversion
    (ε from ρ, say) is lossy in a direction the analyst did not choose."""
    head = (f"this query's budget is {query_kind.__name__} but the session's budget is "
            f"{session_kind.__name__}; privplan composes one privacy definition per session. ")
    if keyword == "budget":
        return head + (f"Pass budget={session_kind.constructor_hint()} (a value of the "
                       f"session's definition), or {session_kind.keyword_example()}.")
    extra = [n for n in query_kind.keywords() if n not in session_kind.keywords()]
    if keyword in session_kind.keywords() and extra:  # (e.g. epsilon= with delta= on ε-DP)
        drop = " and ".join(f"{n}=" for n in extra)
        return head + (f"A {session_kind.__name__} session spends no {', '.join(extra)}: drop "
                       f"{drop} and pass {param_hint(session_kind)} alone (e.g. "
                       f"{session_kind.keyword_example()}), or open a session with "
                       f"budget={query_kind.constructor_hint()} to spend it.")
    return head + (f"Pass the matching parameter ({param_hint(session_kind)}) instead of "
                   f"{keyword}=, e.g. {session_kind.keyword_example()}, or open a session with "
                   f"budget={query_kind.constructor_hint()} to spend {keyword}.")


def _alone(keyword: str, session_kind: type[PrivacyValue]) -> str:
    """A second parameter (``delta=``) without its leading one: not a budget on its own."""
    lead = leader_of(keyword)
    kind = kind_with(keyword)
    sym = kind.symbol(keyword)
    if keyword in session_kind.keywords():
        return (f"{keyword}= alone is not a query budget: {sym} goes with "
                f"{kind.symbol(lead)} in {kind.title()}. Pass {lead}= with it, e.g. "
                f"{kind.keyword_example()}.")
    return (f"{keyword}= alone is not a query budget, and this session's budget is "
            f"{session_kind.__name__}, which has no {sym}: drop {keyword}= and pass "
            f"{param_hint(session_kind)}, e.g. {session_kind.keyword_example()}.")


def _stray(keyword: str, named: str, session_kind: type[PrivacyValue]) -> str:
    """A second parameter (``delta=``) given with another budget than its leading keyword."""
    lead = leader_of(keyword)
    kind = kind_with(keyword)
    nth = ("first", "second", "third", "fourth")[kind.keywords().index(keyword)]
    return (f"{keyword}= goes with {lead}=, not with {named}= ({kind.symbol(keyword)} is the "
            f"{nth} parameter of {kind.title()}). Drop {keyword}=, or pass "
            f"{param_hint(session_kind)} for this session.")
