"""The row of one aggregate function: what parsing, the measures, post-processing and accuracy
read of it.

An :class:`Aggregate` says which sqlglot nodes (and other spellings) are the function, which
noisy measures its value is computed from (a count, a sum, a sum of squares, a quantile's
histogram: :data:`Part`), how its argument is read (COUNT counts rows, SUM adds values, AVG
and the spreads sum values less a centre), its value from the noisy measures (vectorised,
post-processing only), and for a value derived from several measures its per-row interval.
Each family's rows live in their own module (``counts``, ``moments``, ``quantile``); the
registry in :mod:`privplan.sql.aggregates` lists them.

Privacy: a row names the measures its value is computed from; the value reads noisy measures only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from sqlglot import exp

from privplan.sql.plan import AggregateUse

__all__ = ["PARTS", "Aggregate", "Part", "floats", "measure_ids", "null_below"]

Part = Literal["count", "sum", "sum_sq", "quantile"]
PARTS: tuple[Part, ...] = ("count", "sum", "sum_sq", "quantile")
"""The measures an aggregate may be computed from, named as the fields of
:class:`~privplan.sql.plan.AggregateUse` that hold their ids."""


@dataclass(frozen=True)
class Aggregate:
    """One aggregate function (a row of the registry).

    ``name`` is :attr:`AggregateUse.func <privplan.sql.plan.AggregateUse.func>`; ``nodes``
    the sqlglot node types that are this function (the parser's classes); ``spellings`` other
    names of it, rewritten to ``nodes[0]`` when the query is parsed (SmartNoise's ``VAR``);
    ``measures`` the noisy measures its value is computed from, in the order the builder makes
    them (that order numbers the measures). ``listed``: how the refusal of an unknown
    aggregate names it (``""``: named with the row before it). ``example``: a call of it over
    a column ``x`` (the tests answer it with noise off and compare with the engine's own).
    ``anon``: its names that BigQuery's ``ANON_`` functions take (``ANON_COUNT`` → ``COUNT``),
    and ``contribution_bounds``, which of BigQuery's bounds arguments those take.
    """

    name: str
    nodes: tuple[type[exp.Expression], ...]
    measures: tuple[Part, ...]
    listed: str
    example: str
    spellings: tuple[str, ...] = ()
    counts_rows: bool = False  # its value is a number of rows: it takes *, reads no value (no
    # bounds), a constant argument is COUNT(*), and its DISTINCT counts distinct values
    additive: bool = False  # a sum of its values: SUM(v) of a constant is v × COUNT, and
    # CASE WHEN p THEN x ELSE 0 END is a filter
    centred: bool = False  # its sums are of (value - centre), the centre about the middle of
    # the bounds (a row moves them by half the range: privplan.sql.measures)
    min_count: int = 0  # below this noisy count its value is NULL (as SQL's for fewer rows)
    anon: tuple[str, ...] = ()  # the names of it BigQuery also spells ANON_<name> (ANON_COUNT
    # is COUNT): privplan.sql.bigquery rewrites those to <name>
    contribution_bounds: Literal["per_group", "per_row"] | None = None  # what BigQuery's
    # contribution_bounds_per_... of those names clamps: a unit's total per group, or each row

    @property
    def label(self) -> str:
        """The function's name in messages (``VAR_SAMP``)."""
        return self.name.upper()

    def needs(self, part: Part) -> bool:
        return part in self.measures

    @property
    def derived(self) -> bool:
        """Its value combines several noisy measures: its accuracy is a per-row interval by
        interval arithmetic (:meth:`interval`), not one noise's std."""
        return len(self.measures) > 1

    def value(self, use: AggregateUse, parts: Mapping[Part, Any]) -> np.ndarray:
        """The released value of each row from the noisy measures ``parts`` (the columns of
        the measures ``use`` names, in real units). Post-processing of DP outputs only."""
        raise NotImplementedError

    def interval(self, use: AggregateUse, values: Mapping[Part, float],
                 halves: Mapping[Part, float]) -> tuple[float, float]:
        """A :attr:`derived` value's interval in one row, from its noisy measures ``values``
        and their half-widths ``halves`` (each at the joint confidence's share)."""
        raise NotImplementedError(f"{self.label} has no per-row interval")


def measure_ids(use: AggregateUse) -> dict[Part, str]:
    """The ids of the measures ``use`` is computed from, by part (in :data:`PARTS` order)."""
    ids: dict[Part, str | None] = {"count": use.count, "sum": use.sum, "sum_sq": use.sum_sq,
                                   "quantile": use.quantile}
    return {part: mid for part, mid in ids.items() if mid is not None}


def floats(parts: Mapping[Part, Any], part: Part) -> np.ndarray:
    return np.asarray(parts[part], dtype=np.float64)


def null_below(count: np.ndarray, minimum: int, value: np.ndarray) -> np.ndarray:
    """``value`` with NULL (NaN) where the noisy ``count`` is below ``minimum``."""
    return np.where(count < minimum, np.nan, value)
