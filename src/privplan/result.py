"""What a DP query returns: noisy answers, what they cost, and how accurate they are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pandas as pd

from privplan.errors import PolicyError

B = TypeVar("B")
"""The privacy definition of the session that released the result (``PureDP`` …)."""


class AnswerFrame(pd.DataFrame):
    """The noisy answer: a pandas DataFrame that may also be called, as DuckDB's ``.df()`` is,
    so ``result.df`` and ``result.df()`` are the same frame. Operations return plain frames."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def __call__(self) -> pd.DataFrame:
        return self


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
class Result(Generic[B]):
    """``df``: noisy answers; ``cost``: what this query added to the session's composed total;
    ``query_cost``: the query's own composed cost; ``accuracy``: per output column;
    ``intervals``: per-row 95% intervals (``<col>_low``/``<col>_high``) where available."""

    df: pd.DataFrame
    cost: B
    query_cost: B
    accuracy: dict[str, ColumnAccuracy]
    intervals: pd.DataFrame
    explanation: Any = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.df, AnswerFrame):
            self.df = AnswerFrame(self.df)

    # -- DuckDB-style accessors ------------------------------------------------------------
    def fetchall(self) -> list[tuple[Any, ...]]:
        """The rows as tuples (as a DB-API cursor returns them)."""
        return list(self.df.itertuples(index=False, name=None))

    def fetchone(self) -> tuple[Any, ...] | None:
        """The first row, or None for an empty answer."""
        return next(self.df.itertuples(index=False, name=None), None)

    def arrow(self) -> Any:
        """The answer as a ``pyarrow.Table`` (needs pyarrow: ``pip install 'privplan[parquet]'``)."""
        try:
            import pyarrow as pa
        except ImportError:
            raise PolicyError("Result.arrow() needs pyarrow: pip install 'privplan[parquet]' "
                              "(or pip install pyarrow).") from None
        return pa.Table.from_pandas(self.df, preserve_index=False)

    def pl(self) -> Any:
        """The answer as a ``polars.DataFrame`` (needs polars: ``pip install polars``)."""
        try:
            import polars
        except ImportError:
            raise PolicyError("Result.pl() needs polars: pip install polars.") from None
        return polars.from_pandas(self.df)

    def with_intervals(self) -> pd.DataFrame:
        """The answer with each noisy column followed by its 95% interval (``<col>_low``,
        ``<col>_high``) where one is known: the same shape ``df.dp`` results have."""
        out = pd.DataFrame(self.df)
        cols: list[str] = []
        for c in self.df.columns:
            cols.append(c)
            for end in ("low", "high"):
                name = f"{c}_{end}"
                if name in self.intervals.columns and name not in self.df.columns:
                    out[name] = self.intervals[name].to_numpy()
                    cols.append(name)
        return out[cols]

    def plot(self, y: str | list[str] | None = None, x: str | list[str] | None = None, *,
             ax: Any = None, title: str | None = None) -> Any:
        """Bars of the noisy column(s) over the group keys, each with its 95% interval (needs
        matplotlib: ``pip install 'privplan[plot]'``). Returns the matplotlib Axes, or for
        several columns a tuple of Axes (one panel per column, each on its own scale); either
        has ``.figure``. See :func:`privplan.views.plot.plot_result`."""
        from privplan.views.plot import plot_result

        return plot_result(self, y, x, ax=ax, title=title)

    def __repr__(self) -> str:
        return f"Result(cost={self.cost!r}, rows={len(self.df)})\n{self.df.to_string()}"

    def _repr_html_(self) -> str:
        """The notebook view: the answer with its 95% intervals, the cost and the noise
        (see :func:`privplan.views.html.result_html`)."""
        from privplan.views.html import result_html

        return result_html(self)
