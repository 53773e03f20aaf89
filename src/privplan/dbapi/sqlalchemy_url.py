"""A ``privplan://`` URL read into the keyword arguments of :func:`privplan.dbapi.connect`:
the URL form SQLAlchemy's ``create_engine`` takes (:mod:`privplan.sqlalchemy_dialect`, whose
docstring describes every parameter) and ``privplan.dbapi.connect`` takes too.

Apart from the dialect so that ``privplan.dbapi.connection`` can read a URL without importing the dialect
(which imports ``privplan.dbapi.connection``); it needs SQLAlchemy (its URL type and ArgumentError).
"""

from __future__ import annotations

import difflib
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from sqlalchemy import exc
from sqlalchemy.engine import URL

from privplan.accounting.definitions import (
    budget_keywords,
    build,
    join_or,
    keyword_menu,
    kind_for,
    leader_of,
    leading_keywords,
)

__all__ = ["EXAMPLE", "connect_arguments"]

_TOTALS = tuple(f"budget_{k}" for k in leading_keywords())  # (budget_epsilon, _rho, _mu)
_SECONDS = tuple(f"budget_{k}" for k in budget_keywords() if k not in leading_keywords())
_DEFAULTS = budget_keywords()  # (epsilon, delta, rho, mu: each registered definition's)
_PARAMETERS = ("policy", "ledger", *_TOTALS, *_SECONDS, *_DEFAULTS, "intervals",
               "composition")
_EXAMPLE = ("privplan:///data.duckdb?policy=policy.yaml&ledger=ledger.sqlite"
            "&budget_epsilon=3&epsilon=0.5")
EXAMPLE = _EXAMPLE


def _bad(parameter: str, what: str, fix: str, why: str = "") -> exc.ArgumentError:
    because = f" Why: {why}." if why else ""
    return exc.ArgumentError(f"privplan URL parameter {parameter}: {what}. Fix: {fix} "
                             f"(e.g. {_EXAMPLE}).{because}")


def _number(parameter: str, text: str) -> Decimal:
    """A URL parameter as an exact, finite, positive decimal."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value <= 0:
        raise _bad(f"{parameter}={text!r}", "is not a positive finite number",
                   f"write a number such as {parameter}=0.5")
    return value


def _total(query: dict[str, str]) -> Any:
    """The session's total budget: one ``budget_<leading keyword>``, with the rest of its
    definition's keywords (``budget_delta``)."""
    totals = [k for k in _TOTALS if k in query]
    if len(totals) != 1:
        what = "is missing" if not totals else f"is given as {' and '.join(totals)}"
        raise _bad("/".join(_TOTALS), f"the session's total budget {what}",
                   "give exactly one: " + join_or(keyword_menu(lambda n: f"budget_{n}")))
    total = totals[0]
    values = {total.removeprefix("budget_"): _number(total, query[total])}
    for second in _SECONDS:
        if second not in query:
            continue
        lead = f"budget_{leader_of(second.removeprefix('budget_'))}"
        if lead != total:
            raise _bad(second, f"goes with {lead}, not {total}",
                       f"drop {second}, or give {lead} with it")
        values[second.removeprefix("budget_")] = _number(second, query[second])
    kind = kind_for(values)
    if kind is None:
        raise _bad(total, f"{' with '.join(f'budget_{k}' for k in values)} name no privacy "
                   "definition", "give exactly one: "
                   + join_or(keyword_menu(lambda n: f"budget_{n}")))
    return build(kind, values)


def connect_arguments(url: URL) -> dict[str, Any]:
    """The keyword arguments of :func:`privplan.dbapi.connect` for ``url``, every parameter
    checked (see the module docstring). Reads the policy file; opens nothing else."""
    from privplan.errors import PrivplanError
    from privplan.planning.query_budget import query_budget
    from privplan.policy import Policy
    from privplan.session.pld import pld_accounting

    if url.host or url.port or url.username or url.password:
        raise _bad(f"host {url.host!r}", "privplan reads a local database file, not a server",
                   "write privplan:///relative/path.duckdb or privplan:////absolute/path.duckdb")
    query: dict[str, str] = {}
    for key, given in url.query.items():
        if key not in _PARAMETERS:
            close = difflib.get_close_matches(key, _PARAMETERS, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise _bad(key, "is not a parameter privplan knows",
                       f"{hint}use only {', '.join(_PARAMETERS)}",
                       "an unknown parameter is refused, not ignored, so that a misspelt one "
                       "cannot leave its setting at the default")
        if not isinstance(given, str):
            raise _bad(key, f"is given {len(given)} times", f"give {key}= once")
        query[key] = given
    ledger_why = ("the path of a SQLite ledger file, shared by every pooled connection so "
                  "that they spend one budget")
    for required, why in (("policy", "the path of the policy YAML file"),
                          ("ledger", ledger_why)):
        if not query.get(required):
            raise _bad(required, "is missing", f"add {required}=<{why}>")
    try:
        policy = Policy.from_yaml(Path(query["policy"]))
    except PrivplanError as err:
        raise _bad(f"policy={query['policy']!r}", f"the policy cannot be read: {err}",
                   "pass the path of a valid policy YAML file") from None
    budget = _total(query)
    composition = query.get("composition", "additive")
    try:
        pld = pld_accounting(budget, composition)
    except PrivplanError as err:
        raise _bad(f"composition={composition}", str(err),
                   "write composition=pld with budget_epsilon and budget_delta, or leave it "
                   "out") from None
    defaults = {k: _number(k, query[k]) for k in _DEFAULTS if k in query}
    if defaults:
        try:
            if pld is not None:
                pld.query_budget(defaults)
            else:
                query_budget(type(budget), **defaults)
        except PrivplanError as err:
            given = "&".join(f"{k}={query[k]}" for k in defaults)
            raise _bad(given, f"not a per-query budget for a {type(budget).__name__} session "
                              f"({err})", "give the per-query budget in the same privacy "
                                          "definition as the total") from None
    intervals = query.get("intervals", "false").lower()
    if intervals not in ("true", "false"):
        raise _bad(f"intervals={query['intervals']}", "is not true or false",
                   "write intervals=true (each noisy column followed by its 95% interval) or "
                   "leave it out")
    database = url.database or ":memory:"
    return {"database": database, "policy": policy, "budget": budget,
            "ledger": query["ledger"], **defaults, "intervals": intervals == "true",
            "composition": composition}
