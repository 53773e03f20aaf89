"""AVG, VAR, STDDEV and SEM: values derived from a noisy count, sum and sum of squares.

The sums are of (value - centre) on the column's grid (:mod:`privplan.sql.measures`), so the
mean is S/C + centre and the population variance S2/C - (S/C)², which needs no centre. Each
value is clamped into what the declared bounds allow (a mean within them, a variance at most
((upper - lower)/2)², Popoviciu) and is NULL when the noisy count is below the rows SQL needs
for a value (1; 2 for a sample statistic). Their per-row intervals combine the intervals of
their parts by interval arithmetic (:mod:`privplan.mechanisms.accuracy`).

Privacy: the values and intervals are functions of the noisy measures and the policy's bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from privplan.mechanisms.accuracy import ratio_interval, stddev_interval, variance_interval
from privplan.sql.aggregates.base import Aggregate, Part, floats, null_below
from privplan.sql.plan import AggregateUse

__all__ = ["AVG", "SEM", "STDDEV_POP", "STDDEV_SAMP", "VAR_POP", "VAR_SAMP", "Mean", "Sem",
           "Spread", "StandardError"]


def _bounds(use: AggregateUse) -> tuple[float, float]:
    """The declared bounds less the centre: the range of the values the parts sum."""
    centre = float(use.centre)
    return float(use.lower) - centre, float(use.upper) - centre


@dataclass(frozen=True)
class Mean(Aggregate):
    """AVG: the noisy sum over the noisy count, within the bounds."""

    def value(self, use: AggregateUse, parts: Mapping[Part, Any]) -> np.ndarray:
        c, s = floats(parts, "count"), floats(parts, "sum")
        lo, hi = float(use.lower), float(use.upper)
        mean = s / np.maximum(c, 1.0)  # of (value - centre)
        centre = float(use.centre)
        return null_below(c, self.min_count, np.minimum(np.maximum(mean + centre, lo), hi))

    def interval(self, use: AggregateUse, values: Mapping[Part, float],
                 halves: Mapping[Part, float]) -> tuple[float, float]:
        lo, hi = ratio_interval(values["sum"], halves["sum"], values["count"], halves["count"],
                                bounds=_bounds(use))
        centre = float(use.centre)
        return lo + centre, hi + centre


@dataclass(frozen=True)
class Spread(Aggregate):
    """VAR and STDDEV: ``ddof`` 1 for the sample statistic (times C/(C - 1)), ``root`` for
    the standard deviation (the square root of the variance)."""

    ddof: int = 0
    root: bool = False

    def variance(self, use: AggregateUse, parts: Mapping[Part, Any]
                 ) -> tuple[np.ndarray, np.ndarray]:
        """(the noisy count, the variance: population, or sample with ``ddof`` 1), the
        variance within what the bounds allow."""
        c, s = floats(parts, "count"), floats(parts, "sum")
        lo, hi = float(use.lower), float(use.upper)
        mean = s / np.maximum(c, 1.0)  # of (value - centre): the variance needs no centre
        q = floats(parts, "sum_sq")
        var = q / np.maximum(c, 1.0) - mean * mean
        var = np.minimum(np.maximum(var, 0.0), ((hi - lo) / 2) ** 2)
        if self.ddof:
            cc = np.maximum(c, 2.0)
            var = var * cc / (cc - 1.0)
        return c, var

    def value(self, use: AggregateUse, parts: Mapping[Part, Any]) -> np.ndarray:
        c, var = self.variance(use, parts)
        if self.root:
            var = np.sqrt(var)
        return null_below(c, self.min_count, var)

    def interval(self, use: AggregateUse, values: Mapping[Part, float],
                 halves: Mapping[Part, float]) -> tuple[float, float]:
        fn = stddev_interval if self.root else variance_interval
        return fn(values["sum_sq"], halves["sum_sq"], values["sum"], halves["sum"],
                  values["count"], halves["count"], ddof=self.ddof, bounds=_bounds(use))


class Sem(exp.Expression, exp.AggFunc):
    """DuckDB's ``SEM(x)``, which sqlglot parses as an anonymous function: the parser makes
    this node of it (its row's spelling)."""


@dataclass(frozen=True)
class StandardError(Spread):
    """SEM: the standard error of the mean as DuckDB computes it, the population standard
    deviation over the square root of the count."""

    def value(self, use: AggregateUse, parts: Mapping[Part, Any]) -> np.ndarray:
        c, var = self.variance(use, parts)
        return null_below(c, self.min_count, np.sqrt(var / np.maximum(c, 1.0)))

    def interval(self, use: AggregateUse, values: Mapping[Part, float],
                 halves: Mapping[Part, float]) -> tuple[float, float]:
        lo, hi = variance_interval(values["sum_sq"], halves["sum_sq"], values["sum"],
                                   halves["sum"], values["count"], halves["count"],
                                   bounds=_bounds(use))
        c, half = values["count"], abs(halves["count"])  # (a group with a value has a row)
        return math.sqrt(lo / max(c + half, 1.0)), math.sqrt(hi / max(c - half, 1.0))


_SUMS: tuple[Part, ...] = ("sum", "count")
_SQUARES: tuple[Part, ...] = ("sum", "count", "sum_sq")

AVG = Mean("avg", (exp.Avg,), _SUMS, listed="AVG", example="AVG(x)", centred=True, min_count=1,
           anon=("AVG",), contribution_bounds="per_group")
VAR_POP = Spread("var_pop", (exp.VariancePop,), _SQUARES, listed="VAR_POP/VAR_SAMP/VARIANCE",
                 example="VAR_POP(x)", centred=True, min_count=1, anon=("VAR_POP",),
                 contribution_bounds="per_row")
VAR_SAMP = Spread("var_samp", (exp.Variance,), _SQUARES, listed="", example="VAR_SAMP(x)",
                  spellings=("VAR",), centred=True, min_count=2, ddof=1)
STDDEV_POP = Spread("stddev_pop", (exp.StddevPop,), _SQUARES, listed="STDDEV(_POP/_SAMP)",
                    example="STDDEV_POP(x)", centred=True, min_count=1, root=True,
                    anon=("STDDEV_POP",), contribution_bounds="per_row")
STDDEV_SAMP = Spread("stddev_samp", (exp.Stddev, exp.StddevSamp), _SQUARES, listed="",
                     example="STDDEV_SAMP(x)", spellings=("STD",), centred=True, min_count=2,
                     ddof=1, root=True)
SEM = StandardError("sem", (Sem,), _SQUARES, listed="SEM", example="SEM(x)", spellings=("SEM",),
                    centred=True, min_count=1)
