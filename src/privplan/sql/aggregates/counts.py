"""COUNT and SUM: one noisy measure each, released as it is.

COUNT(x) is the noisy count of rows where x is not NULL; SUM(x) the noisy sum of x clamped to
its bounds on the column's grid, or, of a constant v (``SUM(CASE WHEN p THEN 3 END)``), v times
a noisy count. Their accuracy is that one noise's (:func:`privplan.planning.costs.
count_or_sum_noise`).

Privacy: COUNT and SUM release their one noisy measure (times a constant of the query text).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from privplan.sql.aggregates.base import Aggregate, Part
from privplan.sql.plan import AggregateUse

__all__ = ["COUNT", "SUM", "Additive"]


@dataclass(frozen=True)
class Additive(Aggregate):
    """A count or a sum: the noisy measure itself."""

    def value(self, use: AggregateUse, parts: Mapping[Part, Any]) -> np.ndarray:
        if use.sum is None:  # a count (SUM of a constant: that constant times the count)
            c = np.asarray(parts["count"])
            return c if use.multiplier == 1 else c * use.multiplier
        return np.asarray(parts["sum"])


COUNT = Additive("count", (exp.Count,), ("count",), listed="COUNT", example="COUNT(x)",
                 counts_rows=True, anon=("COUNT",), contribution_bounds="per_group")
SUM = Additive("sum", (exp.Sum,), ("sum",), listed="SUM", example="SUM(x)", additive=True,
               anon=("SUM",), contribution_bounds="per_group")
