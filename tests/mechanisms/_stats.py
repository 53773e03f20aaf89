"""Shared helpers for the statistical tests: exact pmfs and a binned chi-square test."""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

#: Statistical tests fail only below this p-value: a false alarm is a one-in-a-million event.
P_MIN = 1e-6


def laplace_pmf(scale: float, z: np.ndarray) -> np.ndarray:
    """P(Z = z) = (1 - q)/(1 + q) q^|z| with q = e^{-1/t}."""
    q = math.exp(-1 / scale)
    return (1 - q) / (1 + q) * np.exp(-np.abs(z) / scale)


def laplace_cdf(scale: float, k: np.ndarray) -> np.ndarray:
    """P(Z <= k): P(Z >= k) = q^k/(1+q) for k >= 1, and symmetry."""
    q = math.exp(-1 / scale)
    k = np.asarray(k, dtype=np.float64)
    upper = q ** (k + 1) / (1 + q)  # P(Z > k) = P(Z >= k+1) for k >= 0
    lower = q ** (-k) / (1 + q)  # P(Z <= k) = P(Z >= -k) for k <= -1
    return np.where(k >= 0, 1 - upper, lower)


def gaussian_pmf(sigma2: float, z: np.ndarray) -> np.ndarray:
    """exp(-z^2/2s^2)/N by brute force (N summed over |z| <= 40 sigma + 50)."""
    n = int(40 * math.sqrt(sigma2)) + 50
    grid = np.arange(-n, n + 1, dtype=np.float64)
    norm = np.exp(-(grid * grid) / (2 * sigma2)).sum()
    z = np.asarray(z, dtype=np.float64)
    return np.exp(-(z * z) / (2 * sigma2)) / norm


def gaussian_cdf_large(sigma2: float, k: np.ndarray) -> np.ndarray:
    """P(Z <= k) for sigma >= 100 by the midpoint rule (error ~ 1/sigma^2, far below test noise)."""
    return 0.5 * special.erfc(-(np.asarray(k, dtype=np.float64) + 0.5) / math.sqrt(2 * sigma2))


def chi2_from_cdf(samples: np.ndarray, cdf, edges: np.ndarray) -> float:
    """p-value of a chi-square test with bins (-inf, e0], (e0, e1], ..., (e_last, inf)."""
    probs = np.diff(np.concatenate([[0.0], cdf(edges), [1.0]]))
    counts = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=len(probs))
    return chi2_counts(counts, probs)


def chi2_pmf(samples: np.ndarray, pmf, lo: int, hi: int) -> float:
    """p-value of a chi-square test with one bin per value in [lo, hi] and two pooled tails."""
    support = np.arange(lo, hi + 1)
    p_inside = pmf(support)
    below = np.sum(pmf(np.arange(lo - 10_000, lo)))
    probs = np.concatenate([[below], p_inside, [max(0.0, 1 - below - p_inside.sum())]])
    clipped = np.clip(samples, lo - 1, hi + 1) - (lo - 1)
    counts = np.bincount(clipped, minlength=len(probs))
    return chi2_counts(counts, probs)


def chi2_counts(counts: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square p-value, merging bins with expected count < 5 into their neighbours."""
    n = counts.sum()
    merged_c, merged_p = [], []
    acc_c, acc_p = 0, 0.0
    for c, p in zip(counts.tolist(), probs.tolist(), strict=True):
        acc_c += c
        acc_p += p
        if acc_p * n >= 5:
            merged_c.append(acc_c)
            merged_p.append(acc_p)
            acc_c, acc_p = 0, 0.0
    if acc_c or acc_p:
        if merged_c:
            merged_c[-1] += acc_c
            merged_p[-1] += acc_p
        else:
            merged_c, merged_p = [acc_c], [acc_p]
    if len(merged_c) < 2:
        return 1.0
    exp = np.array(merged_p) * n
    stat = float(((np.array(merged_c) - exp) ** 2 / exp).sum())
    return float(stats.chi2.sf(stat, len(merged_c) - 1))
