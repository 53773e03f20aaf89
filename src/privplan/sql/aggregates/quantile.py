"""MEDIAN, PERCENTILE_CONT/_DISC, QUANTILE_CONT/_DISC, APPROX_QUANTILE, MIN and MAX: one
quantile each, picked by the exponential mechanism over a grid of candidates.

The calls are read (their q, their column's grid) by :mod:`privplan.sql.quantiles`; the value is
the mechanism's pick, already in the column's units, and its accuracy is told in rows of rank.

Privacy: a quantile releases the exponential mechanism's pick and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from privplan.sql.aggregates.base import Aggregate, Part
from privplan.sql.plan import AggregateUse
from privplan.sql.quantiles import QUANTILE_FUNCTIONS

__all__ = ["QUANTILE", "Quantile"]


@dataclass(frozen=True)
class Quantile(Aggregate):
    """The exponential mechanism's pick of one quantile."""

    def value(self, use: AggregateUse, parts: Mapping[Part, Any]) -> np.ndarray:
        return np.asarray(parts["quantile"])


QUANTILE = Quantile("quantile", QUANTILE_FUNCTIONS, ("quantile",), example="MAX(x)",
                    anon=("PERCENTILE_CONT",), contribution_bounds="per_row",
                    listed="MEDIAN, PERCENTILE_CONT/_DISC, QUANTILE_CONT/_DISC, "
                    "APPROX_QUANTILE, MIN and MAX of a bounded numeric column")
