"""The exponential mechanism's draw as an exponential race: exact, with data-independent work.

Goal: pick cell g of a group with probability exp(-γ_g) / Σ_h exp(-γ_h) for rationals
γ_g = rate·gap_g >= 0 (:mod:`privplan.mechanisms.exponential` gives rate and gaps), exactly,
with running time that does not depend on the γ's, so the time taken reveals nothing about
the data behind them.

**The race.** Draw independent uniforms V_g on (0, 1) and let E_g = -ln V_g (i.i.d. Exp(1)).
T_g = E_g·exp(γ_g) is exponential with rate exp(-γ_g), and the first arrival of independent
exponentials is g with probability rate_g / Σ rates = exp(-γ_g) / Σ exp(-γ_h) — the mechanism's
law exactly (ties have probability 0). Taking logarithms, the winner is
argmin_g key_g with key_g = ln(-ln V_g) + γ_g (the Gumbel-max form). Every cell is drawn and
keyed, whatever the γ's: the work is fixed by the number of cells.

**Deciding exactly.** V_g is never known in full: its first 52 bits k_g (a uniform integer from
the OS CSPRNG source of :mod:`privplan.mechanisms.samplers`) put it in [k/2^52, (k+1)/2^52],
and f(v) = ln(-ln v) is decreasing, so key_g lies in
[f((k+1)/2^52) + γ_g, f(k/2^52) + γ_g] — both ends finite doubles' images, computed in float64
(numpy, vectorised over every cell of every group) and widened by a margin that covers every
rounding (below). A cell whose lower bound L_g is not below the smallest upper bound m of its
group cannot be the argmin (its key is at least L_g >= m, which some cell's key is at most).
When one cell is left — all but about 1e-13 of the time — it is the winner: a decision the
float bounds prove. Otherwise the cells left are *refined*: each one's uniform gets 62 more bits
from the same source (the bits of one V_g, drawn later: the race is unchanged), and their keys
are bounded again with Python's :mod:`decimal` at a precision that grows with the bits
(``ln`` in decimal is correctly rounded, so one step outwards — ``next_minus`` / ``next_plus`` —
bounds the true value; quotients and sums are rounded *towards* the bound needed), until one is
left. The answer is always argmin_g key_g of the full uniforms, so its law is the mechanism's
exactly; floating point only proves which cell that is.

**The float margin.** For a double v in (0, 1): Ê = -log(v) and f̂ = log(Ê) with numpy's log,
assumed correct to 2^-46 relative (64 ulps; glibc documents 1 ulp, numpy's own SIMD log 4 ulps;
``tests/mechanisms/test_race.py`` checks numpy's log against decimal). Then
|f̂ - f(v)| <= 1.02·2^-46·(1 + |f̂|); γ̂ = float(gap)·float(rate) is within 4·2^-53·γ of γ; the
sum f̂ + γ̂ and the margin's own arithmetic round by 2^-53 of their size. All of it is below
2^-45·(1 + |f̂| + γ̂), and the margin taken is 2^-40·(1 + |f̂| + γ̂) (32 times more). A gap above
2^62 is clipped for the lower bound (γ only grows with it) and gets an upper bound of +inf;
k = 0 (V near 0) has upper bound +inf and k = 2^52 - 1 (V near 1) lower bound -inf, which
refinement narrows like any other overlap.

**What the time still depends on.** The float pass does the same operations on arrays of one
shape for any data. Which cell wins (the output, released anyway) changes a few index
operations. Refinement happens with probability about 1e-13 per group, slightly more when
near-ties of γ are likelier; its cost is not constant, but it is so rare that it is no usable
channel. Converting gaps to floats is constant time for int64 gaps; gaps held as Python ints
(groups of more than about 4·10^9 rows) take longer (see docs/FEATURES.md §2).

Privacy: the pick has the exponential mechanism's exact law, with work fixed by the number of cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction
from typing import Final

import numpy as np

from privplan.mechanisms.samplers import Int64Array, RandomSource

__all__ = ["race"]

_FIRST_BITS: Final = 52  # the bits of each uniform the float pass sees (k < 2^52: exact doubles)
_MORE_BITS = 62  # bits added to an undecided cell's uniform per refinement round
_SLACK = 2.0**-40  # relative margin of the float bounds (see the module docstring)
_GAP_CAP: Final = 1 << 62  # larger gaps are clipped in the float pass (upper bound +inf)
_RATE_CAP: Final = Fraction(2) ** 900  # so are larger rates (a float product stays finite)
_CHUNK_CELLS: Final = 4096  # cells keyed per numpy pass
_INF = Decimal("Infinity")


def race(gaps: Sequence[np.ndarray], rate: Fraction, src: RandomSource) -> Int64Array:
    """One winning cell index per group: cell g of group i with probability ∝
    exp(-rate·gaps[i][g]), exactly (see the module docstring). ``gaps``: one array per group of
    non-negative integers (int64, or Python ints in an object array); ``rate`` > 0."""
    groups = len(gaps)
    if groups == 0:
        return np.zeros(0, dtype=np.int64)
    if min(g.size for g in gaps) == 0:
        raise ValueError("every group needs at least one cell")
    width = max(g.size for g in gaps)
    out = np.empty(groups, dtype=np.int64)
    step = max(1, _CHUNK_CELLS // width)
    for start in range(0, groups, step):
        part = gaps[start:start + step]
        out[start:start + len(part)] = _race_chunk(part, width, rate, src)
    return out


def _race_chunk(gaps: Sequence[np.ndarray], width: int, rate: Fraction, src: RandomSource
                ) -> Int64Array:
    """:func:`race` for a few groups at a time (temporary arrays of at most about 4,096 cells,
    32 KB: they stay in the CPU's caches however many groups a query has)."""
    groups = len(gaps)
    gap_f, unbounded, pad = _float_gaps(gaps, width)
    bits = src.uniform_ints(groups * width, 1 << _FIRST_BITS).reshape(groups, width)
    low, high = _float_bounds(bits, gap_f, rate)
    high[unbounded] = np.inf
    low[pad], high[pad] = np.inf, np.inf
    best = high.min(axis=1)
    open_ = low < best[:, None]  # the cells that may still hold the smallest key
    left = open_.sum(axis=1)
    out = np.argmax(open_, axis=1).astype(np.int64)
    for i in np.flatnonzero(left != 1).tolist():  # probability about 1e-13 per group
        cells = np.flatnonzero(open_[i]).tolist()
        gammas = [rate * int(gaps[i][c]) for c in cells]
        out[i] = cells[_refine(src, [int(bits[i, c]) for c in cells], gammas)]
    return out


def _float_gaps(gaps: Sequence[np.ndarray], width: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gaps as float64, clipped at 2^62; where they were clipped; where a group has no cell)
    as (groups, width) arrays."""
    if all(g.dtype == np.int64 and g.size == width for g in gaps):
        table = np.stack(list(gaps))
        return (np.minimum(table, _GAP_CAP).astype(np.float64), table > _GAP_CAP,
                np.zeros(table.shape, dtype=np.bool_))
    gap_f = np.zeros((len(gaps), width), dtype=np.float64)
    clipped = np.zeros((len(gaps), width), dtype=np.bool_)
    pad = np.ones((len(gaps), width), dtype=np.bool_)
    for i, g in enumerate(gaps):
        values = [int(x) for x in g.tolist()]
        gap_f[i, :g.size] = [float(min(x, _GAP_CAP)) for x in values]
        clipped[i, :g.size] = [x > _GAP_CAP for x in values]
        pad[i, :g.size] = False
    return gap_f, clipped, pad


def _float_bounds(bits: Int64Array, gap_f: np.ndarray, rate: Fraction
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of every key, from the first 52 bits of its uniform."""
    rate_f = float(min(rate, _RATE_CAP))
    k = bits.astype(np.float64)  # exact: k < 2^52
    step = 2.0**-_FIRST_BITS
    with np.errstate(divide="ignore"):
        e_low = -np.log((k + 1.0) * step)  # -ln of the largest V (0 when V may reach 1)
        e_high = -np.log(k * step)  # -ln of the smallest V (+inf when V may reach 0)
        f_low, f_high = np.log(e_low), np.log(e_high)  # log(0) = -inf, log(inf) = inf
    gamma = gap_f * rate_f
    low = f_low + gamma
    low -= _SLACK * (1.0 + np.abs(f_low) + gamma)
    high = f_high + gamma
    high += _SLACK * (1.0 + np.abs(f_high) + gamma)
    if rate > _RATE_CAP:
        high[gap_f > 0] = np.inf
    return low, high


def _refine(src: RandomSource, ks: list[int], gammas: list[Fraction]) -> int:
    """The position (in ``ks``) of the cell with the smallest key among undecided cells whose
    uniforms begin with the 52-bit integers ``ks`` (keys ln(-ln V) + ``gammas``): more bits
    are drawn and the keys bounded in decimal until only one cell has a lower bound below the
    smallest upper bound (``ctx.minus`` rather than ``-x``, which would round to the thread's
    context precision). Terminates with probability 1: distinct keys (probability 1) are
    separated once the bits drawn pin them closer than their distance."""
    alive = list(range(len(ks)))
    ks = list(ks)
    bits = _FIRST_BITS
    digits = max(len(str(g.numerator // g.denominator)) for g in gammas)
    while len(alive) > 1:
        more = src.uniform_ints(len(alive), 1 << _MORE_BITS).tolist()
        for j, r in zip(alive, more):
            ks[j] = (ks[j] << _MORE_BITS) | int(r)
        bits += _MORE_BITS
        ctx = Context(prec=bits * 3 // 10 + digits + 20, Emin=-999999, Emax=999999)
        bounds = [_decimal_bounds(ks[j], bits, gammas[j], ctx) for j in alive]
        best = min(high for _, high in bounds)
        alive = [j for j, (low, _) in zip(alive, bounds) if low < best]
    return alive[0]


def _decimal_bounds(k: int, bits: int, gamma: Fraction, ctx: Context) -> tuple[Decimal, Decimal]:
    """Rigorous bounds of ln(-ln V) + γ for V uniform in [k/2^bits, (k+1)/2^bits]."""
    floor, ceiling = ctx.copy(), ctx.copy()
    floor.rounding, ceiling.rounding = ROUND_FLOOR, ROUND_CEILING
    scale = Decimal(1 << bits)  # (integers convert exactly)
    g_low = floor.divide(Decimal(gamma.numerator), Decimal(gamma.denominator))
    g_high = ceiling.divide(Decimal(gamma.numerator), Decimal(gamma.denominator))
    # lower bound: V at its largest, (k + 1) / 2^bits
    low = -_INF
    if k + 1 < 1 << bits:
        ln_v = ctx.next_plus(ceiling.divide(Decimal(k + 1), scale).ln(ctx))  # >= ln V_max
        if ln_v < 0:
            low = floor.add(ctx.next_minus(ctx.minus(ln_v).ln(ctx)), g_low)
    # upper bound: V at its smallest, k / 2^bits
    high = _INF
    if k > 0:
        ln_v = ctx.next_minus(floor.divide(Decimal(k), scale).ln(ctx))  # <= ln V_min
        high = ceiling.add(ctx.next_plus(ctx.minus(ln_v).ln(ctx)), g_high)
    return low, high
