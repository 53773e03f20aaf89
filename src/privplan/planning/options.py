"""A query's options besides its budget, as one frozen value.

``sess.sql(q, epsilon=1, max_groups_contributed=2, clamps={...})`` (and BigQuery's ``OPTIONS(...)``
and ``CLAMPED BETWEEN``, which become the same keywords) carries per-query settings beside the
budget. They are read once, here, into a :class:`QueryOptions`, and what is left is the budget.

Privacy: an option can only tighten what the policy allows (a unit's groups, its rows, the
clamping bounds); a looser one is refused before anything is charged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from privplan.planning.query_budget import query_groups
from privplan.sql.builder import limit_rows_per_unit, require_selection
from privplan.sql.plan import CorePlan

__all__ = ["QueryOptions"]


@dataclass(frozen=True)
class QueryOptions:
    """``max_groups``: ``max_groups_contributed``; ``min_units``: BigQuery's
    ``min_privacy_units_per_group``; ``max_rows``: its ``max_rows_contributed``;
    ``listed_groups``: a WHERE's listed keys are the domain (BigQuery's public groups);
    ``clamps``: column -> (lo, hi) inside the policy's bounds."""

    max_groups: int | None = None
    min_units: int | None = None
    max_rows: int | None = None
    listed_groups: bool = False
    clamps: Mapping[str, Any] | None = None

    @classmethod
    def from_keywords(cls, keywords: Mapping[str, Any]) -> tuple[QueryOptions, dict[str, Any]]:
        """The options among a query's keywords, and the keywords left (its budget)."""
        rest = dict(keywords)
        options = cls(max_groups=query_groups(rest.pop("max_groups_contributed", None)),
                      min_units=rest.pop("min_privacy_units_per_group", None),
                      max_rows=rest.pop("max_rows_contributed", None),
                      listed_groups=bool(rest.pop("listed_groups", False)),
                      clamps=rest.pop("clamps", None))
        return options, rest

    def apply(self, core: CorePlan) -> CorePlan:
        """The core with the options' bounds: never looser than the policy's (a query may
        bound a unit's groups tighter; a looser row bound is refused)."""
        if self.min_units is not None:
            core = require_selection(core, self.min_units)
        if self.max_groups is not None and core.unit is not None and core.keys:
            declared = core.max_groups_per_unit
            core = replace(core, max_groups_per_unit=self.max_groups if declared is None
                           else min(declared, self.max_groups))
        if self.max_rows is not None:
            core = limit_rows_per_unit(core, self.max_rows)
        return core
