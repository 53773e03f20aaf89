"""What a DP query returns: noisy answers, what they cost, and how accurate they are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class ColumnAccuracy:
    """Noise of one output column: standard deviation and the 95% interval half-width.

    ``halfwidth`` is None for derived columns whose interval depends on the row (AVG, VAR,
    STDDEV); their per-row intervals are in ``Result.intervals``.
    """

    column: str
    method: str
    std: float | None
    halfwidth: float | None
    confidence: float = 0.95


@dataclass
class Result:
    """``df``: noisy answers; ``cost``: what this query added to the session's composed total;
    ``query_cost``: the query's own composed cost; ``accuracy``: per output column;
    ``intervals``: per-row 95% intervals (``<col>_low``/``<col>_high``) where available."""

    df: pd.DataFrame
    cost: Any
    query_cost: Any
    accuracy: dict[str, ColumnAccuracy]
    intervals: pd.DataFrame
    explanation: Any = None
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Result(cost={self.cost!r}, rows={len(self.df)})\n{self.df.to_string()}"
