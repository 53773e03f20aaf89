"""Exact privacy values: construction, exactness, arithmetic, rounding directions, errors."""

from __future__ import annotations

import copy
import math
import pickle
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privplan.accounting.definitions import (
    GDP,
    KINDS,
    ZCDP,
    ApproxDP,
    PrivacyValue,
    PureDP,
    as_fraction,
    same_kind,
    sqrt_fraction,
)

# -- construction ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "exact"),
    [
        (3, Fraction(3)),
        (0.1, Fraction(1, 10)),
        (1e-5, Fraction(1, 100000)),
        ("0.25", Fraction(1, 4)),
        ("1/3", Fraction(1, 3)),
        (" 2 ", Fraction(2)),
        (Decimal("0.1"), Fraction(1, 10)),
        (Fraction(2, 7), Fraction(2, 7)),
        (-0.0, Fraction(0)),
    ],
)
def test_as_fraction_is_exact(raw: object, exact: Fraction) -> None:
    assert as_fraction(raw) == exact
    assert PureDP(raw).exact_epsilon == exact  # type: ignore[arg-type]


def test_numpy_scalars_accepted() -> None:
    np = pytest.importorskip("numpy")
    assert PureDP(np.float64(0.1)).exact_epsilon == Fraction(1, 10)
    assert PureDP(np.int64(3)).exact_epsilon == 3


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), "inf", "nan", Decimal("NaN"), Decimal("Infinity"), "abc", "1/0"],
)
def test_rejects_non_finite(bad: object) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        PureDP(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [True, None, [1], 1j])
def test_rejects_non_numbers(bad: object) -> None:
    with pytest.raises(TypeError, match="rho"):
        ZCDP(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: PureDP(-1), "epsilon"),
        (lambda: ApproxDP(-0.5, 0), "epsilon"),
        (lambda: ApproxDP(1, -1e-9), "delta"),
        (lambda: ZCDP("-1/2"), "rho"),
        (lambda: GDP(Decimal(-3)), "mu"),
    ],
)
def test_rejects_negative(make: object, name: str) -> None:
    with pytest.raises(ValueError, match=f"{name} must be non-negative"):
        make()  # type: ignore[operator]


@pytest.mark.parametrize("delta", [1, 1.0, "1", 1.5])
def test_rejects_delta_at_least_one(delta: object) -> None:
    with pytest.raises(ValueError, match="delta must be < 1"):
        ApproxDP(1, delta)  # type: ignore[arg-type]


def test_properties_and_display() -> None:
    a = ApproxDP("1", 1e-5)
    assert (a.epsilon, a.delta) == (1.0, 1e-5)
    assert isinstance(a.epsilon, float)
    assert (a.exact_epsilon, a.exact_delta) == (Fraction(1), Fraction(1, 100000))
    assert ZCDP(0.125).rho == 0.125 and ZCDP(0.125).exact_rho == Fraction(1, 8)
    assert GDP(1).mu == 1.0 and GDP(1).exact_mu == 1
    assert PureDP(Fraction(1, 3)).epsilon == 1 / 3
    assert repr(PureDP(0.5)) == "PureDP(epsilon=0.5)"
    assert repr(ApproxDP(1, 1e-5)) == "ApproxDP(epsilon=1.0, delta=1e-05)"
    # rounded for people (the exact value stays exact)
    almost = PureDP(Fraction(24999992, 10**7))
    assert repr(almost) == "PureDP(epsilon=2.5)" and almost < PureDP("2.5")
    assert repr(ZCDP(Fraction(1, 3))) == "ZCDP(rho=0.333333)"
    assert PureDP(0.5).describe() == "ε=0.5"
    assert a.describe() == "ε=1, δ=1e-05"
    assert ZCDP(0.125).describe() == "ρ=0.125"
    assert GDP(1).describe() == "μ=1"


# -- exactness, immutability, hashing -----------------------------------------------------------


def test_float_sums_are_exact() -> None:
    assert PureDP(0.1) + PureDP(0.2) == PureDP(0.3)
    assert (PureDP(0.1) + PureDP(0.2)).exact_epsilon == Fraction(3, 10)
    assert sum([PureDP(0.1)] * 10, PureDP.zero()) == PureDP(1)
    assert sum([ZCDP(0.1)] * 10) == ZCDP(1)  # builtin sum starting at 0
    assert ApproxDP(0.1, 1e-7) + ApproxDP(0.2, 2e-7) == ApproxDP("0.3", "3e-7")


@pytest.mark.parametrize("value", [PureDP(1), ApproxDP(1, 1e-6), ZCDP(0.5), GDP(2)])
def test_immutable_hashable_picklable(value: PrivacyValue) -> None:
    with pytest.raises(AttributeError):
        value._params = (Fraction(9),)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        value.epsilon = 9  # type: ignore[misc, union-attr]
    with pytest.raises(AttributeError):
        del value._params
    twin = type(value)._create(value._params)
    assert twin == value and hash(twin) == hash(value)
    assert len({value, twin}) == 1
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.deepcopy(value) == value


def test_equality_across_kinds_is_false_not_error() -> None:
    assert PureDP(1) != ApproxDP(1, 0)
    assert ZCDP(1) != GDP(1)
    assert PureDP(1) != 1


# -- the solver's interface --------------------------------------------------------------------


def test_weights_and_kinds() -> None:
    assert KINDS == (PureDP, ApproxDP, ZCDP, GDP)
    assert PureDP(0.5).weights() == (Fraction(1, 2),)
    assert ApproxDP(1, 1e-6).weights() == (Fraction(1), Fraction(1, 10**6))
    assert ZCDP(0.25).weights() == (Fraction(1, 4),)
    assert GDP(0.5).weights() == (Fraction(1, 4),)
    for v in (PureDP(0.7), ApproxDP(2, 1e-9), ZCDP(3), GDP(0.1), GDP(7)):
        assert type(v).from_weights(v.weights()) == v  # exact round trip
    assert same_kind(PureDP(1), PureDP(2))
    assert not same_kind(PureDP(1), ZCDP(1))
    assert not same_kind(1, 1)


def test_from_weights_validation() -> None:
    with pytest.raises(ValueError):
        PureDP.from_weights((Fraction(1), Fraction(2)))
    with pytest.raises(ValueError, match="non-negative"):
        ZCDP.from_weights((Fraction(-1),))
    with pytest.raises(ValueError, match="non-negative"):
        GDP.from_weights((Fraction(-1),))


def test_composed_delta_may_reach_one_and_never_fits() -> None:
    total = ApproxDP(0.1, 0.6) + ApproxDP(0.1, 0.6)
    assert total.exact_delta == Fraction(6, 5)
    assert not total <= ApproxDP(100, 0.999)
    assert ApproxDP.from_weights((Fraction(1), Fraction(2))).exact_delta == 2


def test_gdp_perfect_squares_are_exact() -> None:
    assert GDP(3) + GDP(4) == GDP(5)
    assert GDP.from_weights((Fraction(9, 4),)) == GDP(1.5)
    assert GDP(1).scale(4) == GDP(2)
    assert GDP(5) - GDP(3) == GDP(4)


fractions_pos = st.fractions(min_value=Fraction(1, 10**30), max_value=Fraction(10**30))


@given(fractions_pos)
def test_sqrt_rounding_directions(w: Fraction) -> None:
    up = sqrt_fraction(w, round_up=True)
    down = sqrt_fraction(w, round_up=False)
    assert down * down <= w <= up * up
    # within 1e-15 relative of the true root: up/(1+1e-15) < sqrt(w) < down*(1+1e-15)
    rel = Fraction(1, 10**15)
    assert (up / (1 + rel)) ** 2 < w
    assert (down * (1 + rel)) ** 2 > w
    assert GDP.from_weights((w,)).exact_mu == up
    assert up.denominator.bit_count() == 1 or up * up == w  # dyadic unless exact


def test_gdp_composition_rounds_up() -> None:
    two = GDP(1) + GDP(1)
    assert two.exact_mu**2 >= 2
    assert two.mu == pytest.approx(math.sqrt(2), rel=1e-15)
    assert GDP(1).scale(2).exact_mu ** 2 >= 2
    assert GDP(1).scale(3).exact_mu ** 2 >= 3


def test_remaining_rounds_down_and_floors_at_zero() -> None:
    rem = GDP(1) - GDP(0.5)
    assert rem.exact_mu**2 <= Fraction(3, 4)
    assert rem.mu == pytest.approx(math.sqrt(0.75), rel=1e-15)
    assert GDP(1) - GDP(2) == GDP(0)
    assert PureDP(1) - PureDP(3) == PureDP(0)
    assert ApproxDP(1, 1e-6) - ApproxDP(0.5, 1e-5) == ApproxDP(0.5, 0)
    assert ZCDP(0.3) - ZCDP(0.1) == ZCDP(0.2)


def test_scale() -> None:
    assert PureDP(0.1).scale(3) == PureDP(0.3)
    assert ApproxDP(1, 1e-6).scale("1/2") == ApproxDP(0.5, 5e-7)
    assert ZCDP(1).scale(0).is_zero()
    with pytest.raises(ValueError, match="k must be non-negative"):
        PureDP(1).scale(-1)


def test_zero() -> None:
    for kind in KINDS:
        z = kind.zero()
        assert z.is_zero() and all(w == 0 for w in z.weights())
    assert not ApproxDP(0, 1e-9).is_zero()
    assert PureDP(2) + PureDP.zero() == PureDP(2)


def test_partial_order() -> None:
    assert ApproxDP(1, 0) < ApproxDP(2, 0)
    assert ApproxDP(1, 0) <= ApproxDP(1, 0) and not ApproxDP(1, 0) < ApproxDP(1, 0)
    a, b = ApproxDP(1, 1e-5), ApproxDP(2, 0)  # incomparable
    assert not a <= b and not b <= a and not a < b and not a > b and not a >= b
    assert ApproxDP(2, 1e-5) > a and ApproxDP(2, 1e-5) >= a
    assert GDP(1) < GDP(1.5) and PureDP(1) >= PureDP(1)


# -- mixing kinds ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "verb"),
    [
        (lambda a, b: a + b, "add"),
        (lambda a, b: a - b, "subtract"),
        (lambda a, b: a <= b, "compare"),
        (lambda a, b: a < b, "compare"),
        (lambda a, b: a >= b, "compare"),
        (lambda a, b: a > b, "compare"),
    ],
)
def test_mixing_kinds_raises_type_error(op: object, verb: str) -> None:
    with pytest.raises(TypeError) as err:
        op(PureDP(1), ZCDP(1))  # type: ignore[operator]
    assert str(err.value) == f"cannot {verb} PureDP and ZCDP: convert first, e.g. pure_to_zcdp(...)"


@pytest.mark.parametrize(
    ("a", "b", "hint"),
    [
        (ApproxDP(1, 1e-6), PureDP(1), "pure_to_approx"),
        (GDP(1), PureDP(1), "pure_to_gdp"),
        (ZCDP(1), ApproxDP(1, 1e-6), "zcdp_to_approx"),
        (ApproxDP(1, 1e-6), GDP(1), "gdp_to_approx"),
        (ZCDP(1), GDP(1), r"convert\(\.\.\., ZCDP\)"),  # (μ-GDP implies (μ²/2)-zCDP)
    ],
)
def test_mixing_kinds_names_both_and_hint(a: PrivacyValue, b: PrivacyValue, hint: str) -> None:
    with pytest.raises(TypeError, match=hint) as err:
        a + b
    assert type(a).__name__ in str(err.value) and type(b).__name__ in str(err.value)


def test_arithmetic_with_non_values() -> None:
    with pytest.raises(TypeError):
        PureDP(1) + 1  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = PureDP(1) <= 1  # type: ignore[operator]


# -- properties ---------------------------------------------------------------------------------

nonneg = st.one_of(
    st.fractions(min_value=0, max_value=100, max_denominator=10**6),
    st.floats(min_value=0, max_value=100, allow_nan=False, allow_infinity=False),
)
small = st.fractions(min_value=0, max_value=Fraction(1, 10), max_denominator=10**9)


def additive_values(kind: type[PrivacyValue]) -> st.SearchStrategy[PrivacyValue]:
    if kind is ApproxDP:
        return st.builds(ApproxDP, nonneg, small)
    return st.builds(kind, nonneg)


additive = st.sampled_from([PureDP, ApproxDP, ZCDP]).flatmap(
    lambda k: st.tuples(additive_values(k), additive_values(k), additive_values(k))
)


@given(additive)
def test_additive_kinds_form_a_commutative_monoid(abc: tuple[PrivacyValue, ...]) -> None:
    a, b, c = abc
    assert (a + b) + c == a + (b + c)
    assert a + b == b + a
    assert a + type(a).zero() == a
    assert a + b >= a and a + b >= b
    assert (a + b) - b == a
    assert a.scale(2) == a + a
    assert (a - b) <= a


gdps = st.builds(GDP, nonneg)


@given(gdps, gdps)
def test_gdp_composition_is_an_upper_bound(a: GDP, b: GDP) -> None:
    s = a + b
    assert s == b + a
    assert s >= a and s >= b
    assert s.exact_mu**2 >= a.exact_mu**2 + b.exact_mu**2
    r = s - b
    assert r.exact_mu**2 <= s.exact_mu**2 - b.exact_mu**2
