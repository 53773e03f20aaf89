"""A query's budget from its keyword arguments, in the session's privacy definition.

``epsilon=`` (with ``delta=``), ``rho=``, ``mu=`` or ``budget=``: exactly one names the whole
budget; a value of another definition than the session's, a non-number or a zero budget is
refused with what to pass instead (a failure that does not depend on the data spends nothing).

Privacy: a budget is one positive value of the session's definition; anything else is refused free.
"""

from __future__ import annotations

from decimal import Decimal
from numbers import Real
from typing import Any

from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PrivacyValue, PureDP
from privplan.errors import PolicyError

__all__ = ["query_budget", "query_groups"]


def query_groups(value: Any) -> int | None:
    """``max_groups_contributed=`` of one query: a positive int, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyError(f"max_groups_contributed must be a positive integer, got {value!r}.")
    return value


def query_budget(
    session_kind: type[PrivacyValue],
    *,
    epsilon: Any = None,
    delta: Any = None,
    rho: Any = None,
    mu: Any = None,
    budget: Any = None,
) -> Any:
    """The query's total budget as a value of the session's kind (clear errors otherwise)."""
    given = [n for n, v in (("epsilon", epsilon), ("rho", rho), ("mu", mu), ("budget", budget))
             if v is not None]
    if not given and delta is not None:
        raise PolicyError(_delta_alone(session_kind))
    if not given:
        raise PolicyError(
            "say how much privacy budget this query may use: pass epsilon= (with delta= for "
            "(ε, δ)-DP), rho= (zCDP), mu= (Gaussian DP) or budget=<a privacy value>. Why: every "
            "answer spends budget, and privplan never picks the amount for you."
        )
    if len(given) > 1:
        raise PolicyError(
            f"pass only one of {', '.join(given)} for a query: each names a whole budget (in "
            f"its privacy definition). Pass one, matching the session's "
            f"({param_hint(session_kind)}).")
    for name, v in (("epsilon", epsilon), ("delta", delta), ("rho", rho), ("mu", mu)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, Real | Decimal)):
            raise PolicyError(
                f"{name}={v!r} is not a number: pass a number, e.g. {name}=0.5 (a string or a "
                "boolean is refused rather than guessed at).")
    if delta is not None and epsilon is None:
        raise PolicyError(f"delta= goes with epsilon=, not with {given[0]}= (δ is the second "
                          f"parameter of (ε, δ)-DP). Drop delta=, or pass "
                          f"{param_hint(session_kind)} for this session.")
    try:
        value: PrivacyValue
        if budget is not None:
            value = budget
        elif epsilon is not None:
            if delta is not None or "delta" in session_kind.keywords():  # (an (ε, δ) session)
                value = ApproxDP(epsilon, delta if delta is not None else 0)
            else:
                value = PureDP(epsilon)
        elif rho is not None:
            value = ZCDP(rho)
        else:
            value = GDP(mu)
    except (TypeError, ValueError) as err:
        raise PolicyError(f"invalid query budget: {err}. Why: a budget that is not a finite "
                          "positive number bounds nothing. Fix: pass a positive number, e.g. "
                          "epsilon=0.5.") from None
    if type(value) is not session_kind:
        raise PolicyError(_other_kind(type(value), session_kind, given[0]))
    if value.is_zero():
        shown = ", ".join(f"{n}={v!r}" for n, v in (("epsilon", epsilon), ("rho", rho),
                                                     ("mu", mu), ("budget", budget))
                          if v is not None)
        raise PolicyError(f"{shown}: the query budget must be positive (a query with no budget "
                          f"could release nothing). Pass e.g. {param_hint(session_kind).split('=')[0]}=0.1.")
    return value


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


def _delta_alone(session_kind: type[PrivacyValue]) -> str:
    """``delta=`` without ``epsilon=``: not a budget on its own."""
    if "delta" in session_kind.keywords():
        return ("delta= alone is not a query budget: δ goes with ε in (ε, δ)-DP. Pass "
                "epsilon= with it, e.g. epsilon=0.5, delta=1e-6.")
    return (f"delta= alone is not a query budget, and this session's budget is "
            f"{session_kind.__name__}, which has no δ: drop delta= and pass "
            f"{param_hint(session_kind)}, e.g. {session_kind.keyword_example()}.")
