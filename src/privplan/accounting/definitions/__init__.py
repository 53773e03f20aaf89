"""Privacy values: exact, immutable amounts of privacy loss in one of four definitions.

``PureDP(epsilon)``, ``ApproxDP(epsilon, delta)``, ``ZCDP(rho)`` and ``GDP(mu)`` are both costs
(what a release spends) and budgets (what a session may spend). Parameters are stored exactly as
:class:`fractions.Fraction` (a float through its shortest repr, so ``0.1`` is ``1/10``), so
sums and budget checks never drift. What all of them are is :mod:`.value`; each definition is a
module of its own (:mod:`.pure`, :mod:`.approx`, :mod:`.zcdp`, :mod:`.gdp`) that says what
differs — its conversions, what its budgets buy, what it can spend — and is registered below.

Composition within one definition (CSF'24, Section VI): ε and δ add (Thms VI.4, VI.7), ρ adds
(VI.13, VI.14), μ composes as the ℓ2 norm sqrt(Σ μ_i²) (VI.21, VI.22). So every kind is
described by *additive weights*: (ε,), (ε, δ), (ρ,) and (μ²,); composing is summing weights and
``from_weights`` maps back (for GDP through a square root rounded *up*, never under-charging).

Privacy: one registration line per definition; a value never asks another which definition it is.

>>> PureDP(0.1) + PureDP(0.2) == PureDP("0.3")
True
>>> (GDP(3) + GDP(4)).mu
5.0
"""

from __future__ import annotations

from privplan.accounting.definitions.approx import ApproxDP
from privplan.accounting.definitions.gdp import GDP
from privplan.accounting.definitions.keywords import (
    budget_keywords,
    build,
    check_registry,
    constructors,
    join_or,
    keyword_menu,
    kind_for,
    kind_with,
    leader_of,
    leading_keywords,
)
from privplan.accounting.definitions.pure import PureDP
from privplan.accounting.definitions.value import (
    Number,
    PrivacyValue,
    as_fraction,
    register,
    same_kind,
    sqrt_fraction,
)
from privplan.accounting.definitions.zcdp import ZCDP

__all__ = [
    "GDP",
    "KINDS",
    "ZCDP",
    "ApproxDP",
    "Number",
    "PrivacyValue",
    "PureDP",
    "as_fraction",
    "budget_keywords",
    "build",
    "constructors",
    "join_or",
    "keyword_menu",
    "kind_for",
    "kind_named",
    "kind_with",
    "leader_of",
    "leading_keywords",
    "same_kind",
    "sqrt_fraction",
]

KINDS: tuple[type[PrivacyValue], ...] = check_registry(register(PureDP, ApproxDP, ZCDP, GDP))
"""The privacy definitions, registered: the one line a new definition adds (beside its module)."""


def kind_named(name: object) -> type[PrivacyValue] | None:
    """The registered definition whose class is called ``name`` (as the ledger stores it)."""
    return next((k for k in KINDS if k.__name__ == name), None)
