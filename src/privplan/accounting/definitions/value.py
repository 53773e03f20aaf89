"""What every privacy value is: exact parameters, additive weights, composition and order.

A privacy definition is a subclass of :class:`PrivacyValue` in a module of its own (``pure``,
``approx``, ``zcdp``, ``gdp`` beside this one) that says what differs between definitions: its
parameters and their names, how its weights map back to parameters, the conversions it implies
(:class:`Conversion`, declared by the source), the noise parameters a budget of it may be
calibrated to (:meth:`PrivacyValue.calibration`) and what it can spend (a δ, say). Nothing
outside those modules asks *which* definition a value is: it asks the value. The package
(``definitions/__init__.py``) registers the definitions in one line (:func:`register`).

Composition within one definition (CSF'24, Section VI): ε and δ add (Thms VI.4, VI.7), ρ adds
(VI.13, VI.14), μ composes as the ℓ2 norm sqrt(Σ μ_i²) (VI.21, VI.22). So every kind is
described by *additive weights*: (ε,), (ε, δ), (ρ,) and (μ²,); composing is summing weights and
``from_weights`` maps back (for GDP through a square root rounded *up*, never under-charging).

Privacy: values are exact fractions that compose by adding weights; μ's square root is rounded up.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar, Self, TypeVar

Number = int | float | str | Decimal | Fraction

__all__ = [
    "Conversion",
    "DeltaNeeded",
    "Number",
    "PrivacyValue",
    "as_fraction",
    "cost_in",
    "register",
    "route",
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


class DeltaNeeded(TypeError):
    """A conversion that needs a δ (to read an unbounded privacy loss as (ε, δ)) was given none."""


@dataclass(frozen=True)
class Conversion:
    """One implication between definitions, declared by the module of its source.

    ``apply`` maps a value of the source to a value of ``target`` (with the δ to read it at when
    ``needs_delta``); ``name`` is the public function messages name (``pure_to_zcdp``), or None
    when the conversion is reached through ``convert`` only.
    """

    target: type[PrivacyValue]
    apply: Callable[..., PrivacyValue]
    name: str | None = None
    needs_delta: bool = False

    def __call__(self, value: PrivacyValue, delta: Any = None) -> PrivacyValue:
        if not self.needs_delta:
            return self.apply(value)
        if delta is None:
            raise DeltaNeeded(f"converting {type(value).__name__} to {self.target.__name__} "
                              "needs delta=, e.g. 1e-6")
        return self.apply(value, delta)

    def hint(self) -> str:
        """How a user writes it: ``pure_to_zcdp(...)``, ``zcdp_to_approx(..., delta)``."""
        if self.name is None:
            tail = ", delta=...)" if self.needs_delta else ")"
            return f"convert(..., {self.target.__name__}{tail}"
        return f"{self.name}(..., delta)" if self.needs_delta else f"{self.name}(...)"


_REGISTERED: list[type[PrivacyValue]] = []


def register(*kinds: type[PrivacyValue]) -> tuple[type[PrivacyValue], ...]:
    """Make definitions known (the ledger reads them by name, messages list them in this
    order); every definition registered so far, in order."""
    _REGISTERED.extend(k for k in kinds if k not in _REGISTERED)
    return tuple(_REGISTERED)


def _hint(a: type[PrivacyValue], b: type[PrivacyValue]) -> str:
    """What to convert two different kinds with: a conversion between them, else conversions
    of both to a common definition (the first registered converts first)."""
    for src, dst in ((a, b), (b, a)):
        direct = src.conversion_to(dst)
        if direct is not None:
            return direct.hint()
    order = {k: i for i, k in enumerate(_REGISTERED)}
    first, second = sorted((a, b), key=lambda k: order.get(k, len(order)))
    for conv in first.conversions():
        other = second.conversion_to(conv.target)
        if other is not None:
            return f"{conv.hint()} and {other.hint()} to compare both as {conv.target.__name__}"
    return "the conversions in privplan.accounting"


V = TypeVar("V", bound="PrivacyValue")


class PrivacyValue:
    """Base of the privacy values. Immutable, hashable, exact; see the module docstring."""

    __slots__ = ("_params",)
    _names: ClassVar[tuple[str, ...]]
    _symbols: ClassVar[tuple[str, ...]]
    _examples: ClassVar[tuple[str, ...]]  # (a plausible value per parameter, for messages)
    _title: ClassVar[str]  # (the definition as prose names it: "zCDP", "Gaussian DP")
    _conversions: ClassVar[tuple[Conversion, ...]] = ()
    _no_conversion: ClassVar[str] = "no other definition's guarantee is implied"
    weight_power: ClassVar[int]
    """At fixed noise, a release's weight grows as (its sensitivity)^weight_power: 1 for ε (and
    so for (ε, δ) of Laplace noise), 2 for ρ and μ². So a unit's r rows cost r or r² times one
    row's (``growth``), and noise std ∝ weight^(-1/weight_power) (the allocation's exponent)."""
    _params: tuple[Fraction, ...]

    # -- how a user names one (messages say the fix in these words) ---------------------------
    @classmethod
    def keywords(cls) -> tuple[str, ...]:
        """The query keywords of this definition (``("epsilon", "delta")`` for (ε, δ))."""
        return cls._names

    @classmethod
    def symbol(cls, keyword: str) -> str:
        """The symbol of the parameter called ``keyword`` (``"δ"`` for ``"delta"``)."""
        return cls._symbols[cls._names.index(keyword)]

    @classmethod
    def keyword_example(cls) -> str:
        """A call's budget keywords with plausible values: ``epsilon=0.5, delta=1e-6``."""
        return ", ".join(f"{n}={v}" for n, v in zip(cls._names, cls._examples))

    @classmethod
    def constructor_hint(cls) -> str:
        """The value's constructor as a user writes it: ``pp.ApproxDP(eps, delta)``."""
        return f"pp.{cls.__name__}({', '.join('eps' if n == 'epsilon' else n for n in cls._names)})"

    @classmethod
    def title(cls) -> str:
        """The definition as prose names it (``"zCDP"``, ``"Gaussian DP"``)."""
        return cls._title

    @classmethod
    def weight_symbols(cls) -> tuple[str, ...]:
        """A symbol per additive weight (``("ε", "δ")``; GDP's weight is ``"μ²"``)."""
        return cls._symbols

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

    @classmethod
    def from_weights_down(cls, weights: tuple[Fraction, ...]) -> Self:
        """Like :meth:`from_weights`, rounded *down* (GDP: μ = sqrt(w) rounded down): a budget
        that is never above the weights."""
        return cls._from_weights(weights, round_up=False)

    def map_parameters(self, fn: Callable[[Fraction], Fraction]) -> Self:
        """Every parameter (ε, δ, ρ or μ, not a weight) through ``fn`` (e.g. rounded down)."""
        return self._from_parameters(tuple(fn(p) for p in self._params))

    def rounded_roots(self, fn: Callable[[Fraction], Fraction]) -> Self:
        """The parameters that are roots of their weights (GDP's μ = sqrt(μ²): a long dyadic
        fraction once rounded) through ``fn``; ε, δ and ρ are their weights, kept as they are."""
        return self

    @classmethod
    def _from_parameters(cls, params: tuple[Fraction, ...]) -> Self:
        return cls._create(tuple(_nonnegative(p, cls._names[i], cls.__name__)
                                 for i, p in enumerate(params)))

    # -- what a budget buys, what it may spend --------------------------------------------------
    def calibration(self) -> tuple[tuple[str, Fraction], ...]:
        """The noise parameters a release within this budget may be calibrated to, preferred
        first: ``("epsilon", ε)`` for an ε-DP mechanism, ``("rho", ρ)`` for a ρ-zCDP one,
        ``("mu", μ)`` for the Gaussian mechanism with Δ/σ = μ. Each fits the budget."""
        raise NotImplementedError(f"{type(self).__name__} names no noise calibration")

    def delta_or_none(self) -> Fraction | None:
        """δ for a definition that spends one (partition selection, advanced and PLD
        composition need it), None for one without a δ."""
        return None

    def without_delta(self) -> Self:
        """This value as a budget for a mechanism that spends no δ (δ set to 0, if any)."""
        return self

    @classmethod
    def unit_cost(cls, *, spends_delta: bool = False, weight: Fraction = Fraction(1)) -> Self:
        """A provisional cost of ``weight`` per weight coordinate, for splitting a budget by
        the theorem (``spends_delta``: the mechanism spends δ, e.g. partition selection)."""
        return cls.from_weights(tuple(weight for _ in cls._names))

    # -- conversions (declared by each definition as ``_conversions``) -------------------------
    @classmethod
    def conversions(cls) -> tuple[Conversion, ...]:
        """The implications from this definition to others, in the order messages list them."""
        return cls._conversions

    @classmethod
    def implications(cls) -> str:
        """What this definition converts to, as a refusal lists it (``"ApproxDP (needs
        delta=)"``; ``"none (...)"`` with the reason when it implies nothing)."""
        if not cls._conversions:
            return f"none ({cls._no_conversion})"
        return ", ".join(c.target.__name__ + (" (needs delta=)" if c.needs_delta else "")
                         for c in cls._conversions)

    @classmethod
    def conversion_to(cls, kind: object) -> Conversion | None:
        """The conversion from this definition to ``kind``, None if it implies nothing there."""
        return next((c for c in cls._conversions if c.target is kind), None)

    def stated_as(self, kind: type[V]) -> V | None:
        """This value as a ``kind`` value when that needs no δ (itself for its own kind; ε-DP is
        (ε, 0)-DP), else None."""
        if isinstance(self, kind):
            return self
        conv = self.conversion_to(kind)
        if conv is None or conv.needs_delta:
            return None
        return conv(self)  # type: ignore[return-value]  # (a conversion to kind gives a kind)

    # -- arithmetic ---------------------------------------------------------------------------
    def _check_kind(self, other: PrivacyValue, verb: str) -> None:
        if type(self) is not type(other):
            a, b = type(self).__name__, type(other).__name__
            hint = _hint(type(self), type(other))
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


def same_kind(a: object, b: object) -> bool:
    """True iff a and b are privacy values of the same definition (and so may be composed)."""
    return isinstance(a, PrivacyValue) and type(a) is type(b)


def route(kind: object, guarantees: Sequence[PrivacyValue]
          ) -> tuple[PrivacyValue, Conversion | None] | None:
    """How a mechanism that has every one of ``guarantees`` is charged in ``kind``: the
    guarantee stated in ``kind`` (no conversion), else the first that converts there (and the
    conversion); None when none does."""
    for g in guarantees:
        if type(g) is kind:
            return g, None
    for g in guarantees:
        conv = g.conversion_to(kind)
        if conv is not None:
            return g, conv
    return None


def cost_in(kind: object, guarantees: Sequence[PrivacyValue], delta: Any = None
            ) -> PrivacyValue | None:
    """The cost in ``kind`` of a mechanism with all of ``guarantees`` (see :func:`route`), read
    at ``delta`` where a conversion needs one (:class:`DeltaNeeded` if it is None); None when
    no guarantee implies anything in ``kind``."""
    found = route(kind, guarantees)
    if found is None:
        return None
    g, conv = found
    return g if conv is None else conv(g, delta)
