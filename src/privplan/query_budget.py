"""A query's budget from its keyword arguments, in the session's privacy definition.

``epsilon=`` (with ``delta=``), ``rho=``, ``mu=`` or ``budget=``: exactly one names the whole
budget; a value of another definition than the session's, a non-number or a zero budget is
refused with what to pass instead (a failure that does not depend on the data spends nothing).
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
    session_kind: type,
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
    if not given:
        raise PolicyError(
            "say how much privacy budget this query may use: pass epsilon= (with delta= for "
            "(ε, δ)-DP), rho= (zCDP), mu= (Gaussian DP) or budget=<a privacy value>."
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
        raise PolicyError("delta= goes with epsilon=: pass epsilon= and delta= for (ε, δ)-DP")
    try:
        value: PrivacyValue
        if budget is not None:
            value = budget
        elif epsilon is not None:
            if delta is not None or session_kind is ApproxDP:
                value = ApproxDP(epsilon, delta if delta is not None else 0)
            else:
                value = PureDP(epsilon)
        elif rho is not None:
            value = ZCDP(rho)
        else:
            value = GDP(mu)
    except (TypeError, ValueError) as err:
        raise PolicyError(f"invalid query budget: {err}") from None
    if type(value) is not session_kind:
        raise PolicyError(
            f"this query's budget is {type(value).__name__} but the session's budget is "
            f"{session_kind.__name__}; privplan composes one privacy definition per session. "
            f"Pass the matching parameter ({param_hint(session_kind)})."
        )
    if value.is_zero():
        shown = ", ".join(f"{n}={v!r}" for n, v in (("epsilon", epsilon), ("rho", rho),
                                                     ("mu", mu), ("budget", budget))
                          if v is not None)
        raise PolicyError(f"{shown}: the query budget must be positive (a query with no budget "
                          f"could release nothing). Pass e.g. {param_hint(session_kind).split('=')[0]}=0.1.")
    return value


def param_hint(kind: type) -> str:
    return {PureDP: "epsilon=", ApproxDP: "epsilon= and delta=", ZCDP: "rho=",
            GDP: "mu="}[kind]


