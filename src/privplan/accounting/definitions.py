"""Privacy values: exact, immutable amounts of privacy loss in one of four definitions.

``PureDP(epsilon)``, ``ApproxDP(epsilon, delta)``, ``ZCDP(rho)`` and ``GDP(mu)`` are both costs
(what a release spends) and budgets (what a session may spend). Parameters are stored exactly as
:class:`fractions.Fraction` (a float through its shortest repr, so ``0.1`` is ``1/10``), so
sums and budget checks never drift.

Composition within one definition (CSF'24, Section VI): ε and δ add (Thms VI.4, VI.7), ρ adds
(VI.13, VI.14), μ composes as the ℓ2 norm sqrt(Σ μ_i²) (VI.21, VI.22). So every kind is
described by *additive weights*: (ε,), (ε, δ), (ρ,) and (μ²,); composing is summing weights and
``from_weights`` maps back (for GDP through a square root rounded *up*, never under-charging).

Privacy: values are exact fractions that compose by adding weights; μ's square root is rounded up.

>>> PureDP(0.1) + PureDP(0.2) == PureDP("0.3")
True
>>> (GDP(3) + GDP(4)).mu
5.0
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar, Self

Number = int | float | str | Decimal | Fraction

__all__ = [
    "GDP",
    "KINDS",
    "ZCDP",
    "ApproxDP",
    "Number",
    "PrivacyValue",
    "PureDP",
    "as_fraction",
    "same_kind",
    "sqrt_fraction",
]


def as_fraction(x: object, name: str = "value") -> Fraction:
    """Convert ``x`` exactly to a Fraction: int, Fraction, Decimal, str, or float via its repr.

    Rejects NaN and infinities (``ValueError``) and booleans or other types (``TypeError``).
    Sign is not checked here. ``name`` is used in the error message.
    """
    if isinstance(x, bool):
        raise TypeError(f"{name} must be a number, got the bool {x!r}")
    if isinstance(x, Fraction):
        return x
    if isinstance(x, numbers.Rational):  # int, numpy integers
        return Fraction(int(x.numerator), int(x.denominator))
    if isinstance(x, Decimal):
        if not x.is_finite():
            raise ValueError(f"{name} must be finite, got {x!r}")
        return Fraction(x)
    if isinstance(x, str):
        try:
            return Fraction(x.strip())
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(
                f"{name} must be a finite number such as '0.5' or '1/3', got {x!r}"
            ) from exc
    if isinstance(x, numbers.Real):  # float, numpy floats
        f = float(x)
        if not math.isfinite(f):
            raise ValueError(f"{name} must be finite, got {x!r}")
        return Fraction(repr(f))
    raise TypeError(
        f"{name} must be an int, float, str, Decimal or Fraction, got {type(x).__name__}"
    )


def _nonnegative(x: object, name: str, kind: str) -> Fraction:
    value = as_fraction(x, f"{kind}: {name}")
    if value < 0:
        example = "1e-6" if name == "delta" else "1.0"
        raise ValueError(f"{kind}: {name} must be non-negative (a privacy loss), got {x!r}: "
                         f"a privacy loss cannot be negative. Use e.g. {example}")
    return value


def _isqrt_ceil(n: int) -> int:
    s = math.isqrt(n)
    return s if s * s == n else s + 1


def sqrt_fraction(w: Fraction, *, round_up: bool) -> Fraction:
    """A Fraction within 2**-62 relative of sqrt(w), >= it if ``round_up`` else <= it.

    Exact when w is the square of a rational. Otherwise the result is dyadic (denominator a
    power of two): m / 2**K with m = ceil or floor of sqrt(ceil or floor of w * 4**K), which is
    on the requested side because sqrt and the integer roundings are monotone.
    """
    if w < 0:
        raise ValueError(f"cannot take the square root of a negative weight {w}")
    p, q = w.numerator, w.denominator
    rp, rq = math.isqrt(p), math.isqrt(q)
    if rp * rp == p and rq * rq == q:
        return Fraction(rp, rq)
    log2_root = (p.bit_length() - q.bit_length()) // 2
    k = max(0, 64 - log2_root)
    num = p << (2 * k)
    if round_up:
        m = _isqrt_ceil(-(-num // q))
    else:
        m = math.isqrt(num // q)
    return Fraction(m, 1 << k)


def _fmt(x: Fraction) -> str:
    return format(float(x), ".6g")


_HINTS: dict[frozenset[str], str] = {
    frozenset({"PureDP", "ZCDP"}): "pure_to_zcdp(...)",
    frozenset({"PureDP", "ApproxDP"}): "pure_to_approx(...)",
    frozenset({"PureDP", "GDP"}): "pure_to_gdp(...)",
    frozenset({"ZCDP", "ApproxDP"}): "zcdp_to_approx(..., delta)",
    frozenset({"GDP", "ApproxDP"}): "gdp_to_approx(..., delta)",
    frozenset({"ZCDP", "GDP"}): (
        "zcdp_to_approx(..., delta) and gdp_to_approx(..., delta) to compare both as ApproxDP"
    ),
}


class PrivacyValue:
    """Base of the four privacy values. Immutable, hashable, exact; see the module docstring."""

    __slots__ = ("_params",)
    _names: ClassVar[tuple[str, ...]]
    _symbols: ClassVar[tuple[str, ...]]
    _examples: ClassVar[tuple[str, ...]]  # (a plausible value per parameter, for messages)
    _params: tuple[Fraction, ...]

    # -- how a user names one (messages say the fix in these words) ---------------------------
    @classmethod
    def keywords(cls) -> tuple[str, ...]:
        """The query keywords of this definition (``("epsilon", "delta")`` for (ε, δ))."""
        return cls._names

    @classmethod
    def keyword_example(cls) -> str:
        """A call's budget keywords with plausible values: ``epsilon=0.5, delta=1e-6``."""
        return ", ".join(f"{n}={v}" for n, v in zip(cls._names, cls._examples))

    @classmethod
    def constructor_hint(cls) -> str:
        """The value's constructor as a user writes it: ``pp.ApproxDP(eps, delta)``."""
        return f"pp.{cls.__name__}({', '.join('eps' if n == 'epsilon' else n for n in cls._names)})"

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def _create(cls, params: tuple[Fraction, ...]) -> Self:
        obj = object.__new__(cls)
        object.__setattr__(obj, "_params", params)
        return obj

    @classmethod
    def zero(cls) -> Self:
        """The value of a release that reveals nothing (the identity of composition)."""
        return cls._create(tuple(Fraction(0) for _ in cls._names))

    def is_zero(self) -> bool:
        return all(p == 0 for p in self._params)

    # -- the solver's interface ---------------------------------------------------------------
    def weights(self) -> tuple[Fraction, ...]:
        """The additive coordinates: composing values of one kind sums these componentwise."""
        return self._params

    @classmethod
    def from_weights(cls, weights: tuple[Fraction, ...]) -> Self:
        """Inverse of :meth:`weights` (for GDP, μ = sqrt(w) rounded up).

        Composed ApproxDP weights may have δ >= 1: that is a valid but vacuous guarantee, kept
        (not capped, not rejected) so it is still compared honestly against a budget.
        """
        return cls._from_weights(weights, round_up=True)

    @classmethod
    def _from_weights(cls, weights: tuple[Any, ...], *, round_up: bool) -> Self:
        if len(weights) != len(cls._names):
            raise ValueError(f"{cls.__name__} has {len(cls._names)} weight(s), got {len(weights)}")
        ws = tuple(_nonnegative(w, f"weight {i}", cls.__name__) for i, w in enumerate(weights))
        return cls._create(ws)

    # -- arithmetic ---------------------------------------------------------------------------
    def _check_kind(self, other: PrivacyValue, verb: str) -> None:
        if type(self) is not type(other):
            a, b = type(self).__name__, type(other).__name__
            hint = _HINTS.get(frozenset({a, b}), "the conversions in privplan.accounting")
            raise TypeError(f"cannot {verb} {a} and {b}: convert first, e.g. {hint}")

    def __add__(self, other: object) -> Self:
        """Sequential composition: weights add (CSF'24 Section VI)."""
        if not isinstance(other, PrivacyValue):
            return NotImplemented
        self._check_kind(other, "add")
        return self._from_weights(
            tuple(a + b for a, b in zip(self.weights(), other.weights(), strict=True)),
            round_up=True,
        )

    def __radd__(self, other: object) -> Self:
        # Only so that the builtin sum() (which starts at 0) works.
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def __sub__(self, other: object) -> Self:
        """Remaining budget: weights subtract, floored at 0 (GDP: the root rounds down)."""
        if not isinstance(other, PrivacyValue):
            return NotImplemented
        self._check_kind(other, "subtract")
        return self._from_weights(
            tuple(max(Fraction(0), a - b) for a, b in zip(self.weights(), other.weights())),
            round_up=False,
        )

    def scale(self, k: Number) -> Self:
        """Multiply the additive weights by k >= 0 (k identical copies; GDP: μ·sqrt(k), up)."""
        kf = _nonnegative(k, "k", f"{type(self).__name__}.scale")
        return self._from_weights(tuple(w * kf for w in self.weights()), round_up=True)

    # -- comparison (componentwise: a partial order) -----------------------------------------
    def _pairs(self, other: object, verb: str) -> list[tuple[Fraction, Fraction]] | None:
        if not isinstance(other, PrivacyValue):
            return None
        self._check_kind(other, verb)
        return list(zip(self._params, other._params))

    def __le__(self, other: object) -> bool:
        """Componentwise <=: "self fits within the budget other"."""
        pairs = self._pairs(other, "compare")
        if pairs is None:
            return NotImplemented
        return all(a <= b for a, b in pairs)

    def __ge__(self, other: object) -> bool:
        pairs = self._pairs(other, "compare")
        if pairs is None:
            return NotImplemented
        return all(a >= b for a, b in pairs)

    def __lt__(self, other: object) -> bool:
        """Strict partial order: componentwise <= and not equal."""
        pairs = self._pairs(other, "compare")
        if pairs is None:
            return NotImplemented
        return all(a <= b for a, b in pairs) and any(a < b for a, b in pairs)

    def __gt__(self, other: object) -> bool:
        pairs = self._pairs(other, "compare")
        if pairs is None:
            return NotImplemented
        return all(a >= b for a, b in pairs) and any(a > b for a, b in pairs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PrivacyValue):
            return NotImplemented
        return type(self) is type(other) and self._params == other._params

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._params))

    # -- immutability, pickling, display ------------------------------------------------------
    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self)._create, (self._params,))

    def __repr__(self) -> str:
        """Parameters to 6 significant digits (a composed total of 0.3 + 0.7 + 1.5 whose noise
        was rounded up shows as 2.5, not 2.4999992000003775); the exact values are the
        ``exact_*`` properties and what comparisons use."""
        fields = ", ".join(f"{n}={float(format(float(p), '.6g'))!r}"
                           for n, p in zip(self._names, self._params))
        return f"{type(self).__name__}({fields})"

    def describe(self) -> str:
        """A short human string, e.g. ``"ε=1, δ=1e-05"``."""
        return ", ".join(f"{s}={_fmt(p)}" for s, p in zip(self._symbols, self._params))


class PureDP(PrivacyValue):
    """ε-differential privacy. ε adds under composition."""

    __slots__ = ()
    _names = ("epsilon",)
    _symbols = ("ε",)
    _examples = ("0.5",)

    def __init__(self, epsilon: Number) -> None:
        object.__setattr__(self, "_params", (_nonnegative(epsilon, "epsilon", "PureDP"),))

    @property
    def epsilon(self) -> float:
        return float(self._params[0])

    @property
    def exact_epsilon(self) -> Fraction:
        return self._params[0]


class ApproxDP(PrivacyValue):
    """(ε, δ)-differential privacy. ε and δ both add under composition (CSF'24 VI.4, VI.7)."""

    __slots__ = ()
    _names = ("epsilon", "delta")
    _symbols = ("ε", "δ")
    _examples = ("0.5", "1e-6")

    def __init__(self, epsilon: Number, delta: Number) -> None:
        eps = _nonnegative(epsilon, "epsilon", "ApproxDP")
        dlt = _nonnegative(delta, "delta", "ApproxDP")
        if dlt >= 1:
            raise ValueError(
                f"ApproxDP: delta must be < 1 (delta >= 1 allows publishing the data), "
                f"got {delta!r}. Use a delta well below 1 / (number of people), e.g. 1e-6"
            )
        object.__setattr__(self, "_params", (eps, dlt))

    @property
    def epsilon(self) -> float:
        return float(self._params[0])

    @property
    def delta(self) -> float:
        return float(self._params[1])

    @property
    def exact_epsilon(self) -> Fraction:
        return self._params[0]

    @property
    def exact_delta(self) -> Fraction:
        return self._params[1]


class ZCDP(PrivacyValue):
    """ρ-zero-concentrated DP (Bun–Steinke 2016). ρ adds under composition."""

    __slots__ = ()
    _names = ("rho",)
    _symbols = ("ρ",)
    _examples = ("0.1",)

    def __init__(self, rho: Number) -> None:
        object.__setattr__(self, "_params", (_nonnegative(rho, "rho", "ZCDP"),))

    @property
    def rho(self) -> float:
        return float(self._params[0])

    @property
    def exact_rho(self) -> Fraction:
        return self._params[0]


class GDP(PrivacyValue):
    """μ-Gaussian DP (Dong–Roth–Su). μ composes as sqrt(Σ μ_i²); the weight is μ²."""

    __slots__ = ()
    _names = ("mu",)
    _symbols = ("μ",)
    _examples = ("0.5",)

    def __init__(self, mu: Number) -> None:
        object.__setattr__(self, "_params", (_nonnegative(mu, "mu", "GDP"),))

    def weights(self) -> tuple[Fraction, ...]:
        return (self._params[0] ** 2,)

    @classmethod
    def _from_weights(cls, weights: tuple[Any, ...], *, round_up: bool) -> Self:
        if len(weights) != 1:
            raise ValueError(f"GDP has 1 weight (mu squared), got {len(weights)}")
        w = _nonnegative(weights[0], "weight 0 (mu squared)", "GDP")
        return cls._create((sqrt_fraction(w, round_up=round_up),))

    @property
    def mu(self) -> float:
        return float(self._params[0])

    @property
    def exact_mu(self) -> Fraction:
        return self._params[0]


KINDS: tuple[type[PrivacyValue], ...] = (PureDP, ApproxDP, ZCDP, GDP)


def same_kind(a: object, b: object) -> bool:
    """True iff a and b are privacy values of the same definition (and so may be composed)."""
    return isinstance(a, PrivacyValue) and type(a) is type(b)
