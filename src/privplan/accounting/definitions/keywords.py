"""The budget keywords of the registered definitions: what every face reads a budget from.

A definition names its parameters (:meth:`PrivacyValue.keywords`: ``epsilon``/``delta``,
``rho``, ``mu``). The first keyword of a definition *leads*: it names a whole budget on its
own (``epsilon=``, ``rho=``, ``mu=``); the others (``delta=``) go with their leader. Pure DP
and (ε, δ)-DP share the leader ``epsilon``, and which of them a set of keywords is, is the
definition whose keywords are exactly that set (:func:`kind_for`). The query keywords, the CLI
flags, the DB-API and URL parameters, the report spec's budget mapping and the messages that
list them are all read from here, so a new definition is its module and its registration line.

Privacy: a set of keywords names at most one registered definition (checked at registration).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from privplan.accounting.definitions.value import PrivacyValue, register

__all__ = ["budget_keywords", "build", "check_registry", "constructors", "join_or",
           "keyword_menu", "kind_for", "kind_with", "leader_of", "leading_keywords"]


def _kinds() -> tuple[type[PrivacyValue], ...]:
    return register()  # (no argument: every definition registered so far, in order)


def budget_keywords() -> tuple[str, ...]:
    """Every registered definition's keywords, each once, in registration order."""
    return tuple(dict.fromkeys(n for k in _kinds() for n in k.keywords()))


def leading_keywords() -> tuple[str, ...]:
    """The keywords that name a whole budget (each definition's first), in order."""
    return tuple(dict.fromkeys(k.keywords()[0] for k in _kinds()))


def kind_with(keyword: str) -> type[PrivacyValue]:
    """The first registered definition that has the keyword ``keyword``."""
    return next(k for k in _kinds() if keyword in k.keywords())


def leader_of(keyword: str) -> str:
    """The leading keyword ``keyword`` goes with (itself for a leading one)."""
    return kind_with(keyword).keywords()[0]


def kind_for(keywords: Iterable[str]) -> type[PrivacyValue] | None:
    """The registered definition whose keywords are exactly ``keywords`` (as a set), or None."""
    given = frozenset(keywords)
    return next((k for k in _kinds() if frozenset(k.keywords()) == given), None)


def build(kind: type[PrivacyValue], values: Mapping[str, Any]) -> PrivacyValue:
    """``kind`` from its keywords' values (``ValueError``/``TypeError`` as its constructor)."""
    maker: Any = kind  # (each definition's constructor takes its keywords by name)
    return maker(**{n: values[n] for n in kind.keywords()})


def _group(lead: str) -> tuple[type[PrivacyValue], list[type[PrivacyValue]]]:
    """The definitions led by ``lead``: the one with fewest keywords, and the others."""
    kinds = [k for k in _kinds() if k.keywords()[0] == lead]
    base = min(kinds, key=lambda k: len(k.keywords()))
    return base, [k for k in kinds if k is not base]


def keyword_menu(word: Callable[[str], str] = lambda n: f"{n}=", *, titles: bool = True
                 ) -> list[str]:
    """One entry per leading keyword, as messages list what to pass, each keyword written by
    ``word``: ``epsilon= (with delta= for (ε, δ)-DP)``, ``rho= (zCDP)``, ``mu= (Gaussian DP)``;
    without ``titles``: ``epsilon (with optional delta)``, ``rho``, ``mu``."""
    out: list[str] = []
    for lead in leading_keywords():
        base, others = _group(lead)
        extra = [" and ".join(word(n) for n in k.keywords() if n not in base.keywords())
                 for k in others]
        if titles:
            notes = [f"with {e} for {k.title()}" for e, k in zip(extra, others)]
            if len(base.keywords()) > 1:
                notes.insert(0, "with " + " and ".join(word(n) for n in base.keywords()[1:])
                             + f" for {base.title()}")
            out.append(f"{word(lead)} ({'; '.join(notes or [base.title()])})")
        else:
            notes = [f"with optional {e}" for e in extra]
            out.append(f"{word(lead)} ({'; '.join(notes)})" if notes else word(lead))
    return out


def join_or(items: list[str]) -> str:
    """``a, b or c``."""
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else "".join(items)


def check_registry(kinds: tuple[type[PrivacyValue], ...]) -> tuple[type[PrivacyValue], ...]:
    """``kinds``, once no two of them share a keyword set and every keyword goes with one
    leading keyword: else a set of keywords would not say which definition a budget is in."""
    sets = [frozenset(k.keywords()) for k in kinds]
    if len(set(sets)) != len(sets):
        raise ValueError(f"two privacy definitions share their keywords: {kinds}")
    for name in dict.fromkeys(n for k in kinds for n in k.keywords()):
        leads = {k.keywords()[0] for k in kinds if name in k.keywords()}
        if len(leads) != 1:
            raise ValueError(f"the keyword {name} goes with {sorted(leads)}: it must go with one")
    return kinds


def constructors() -> str:
    """The values a session's budget may be: ``pp.PureDP(eps), ... or pp.GDP(mu)``."""
    return join_or([k.constructor_hint() for k in _kinds()])
