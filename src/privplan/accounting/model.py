"""What the accountant is told about each released mechanism, and about each table.

These descriptors are the whole interface between the query analysis and the composition
theorem (CSF'24): a mechanism is ``f``-dependent on its table through its region (WHERE /
FILTER) and, for GROUP BY, a partitioning function; its cost is given in one privacy definition
*per group* (every group of a partitioned mechanism is calibrated the same way).

Costs are calibrated to *any* change of one privacy unit's contribution to the mechanism's input
(added, removed, or replaced within the region), so the solver only has to decide which
mechanisms a neighbouring pair affects — never to rescale a cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from privplan.analysis.regions import Region

Neighbourhood = Literal["add_remove", "replace"]


@dataclass(frozen=True, slots=True)
class Partition:
    """A GROUP BY: every record is in exactly one group (Example IV.4).

    ``key_columns`` names the columns when every key is a plain column (so two records in the
    same box cell may be told apart by key); ``None`` means the keys are opaque expressions, and
    the solver then assumes two different records can always fall in different groups.
    ``max_groups_per_unit`` is the policy limit m: one unit touches at most m groups.
    """

    keys: tuple[str, ...]
    key_columns: tuple[str, ...] | None = None
    max_groups_per_unit: int | None = None


@dataclass(frozen=True, slots=True)
class UnitModel:
    """How many rows one privacy unit may have in a table, and which columns it shares.

    ``max_rows = 1`` is row-level privacy. With ``max_rows = k`` the rewrite keeps at most k rows
    per unit, deterministically, so a unit is a fixed set of at most k records across queries.
    ``unit_level_columns`` are constant across a unit's rows (enforced by the rewrite).
    """

    max_rows: int = 1
    unit_level_columns: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class TableModel:
    """The neighbourhood and unit model of one private table."""

    neighbourhood: Neighbourhood = "add_remove"
    unit: UnitModel = field(default_factory=UnitModel)


@dataclass(frozen=True, slots=True)
class MechanismSpec:
    """One released mechanism (or one partitioned family of them) as the accountant sees it.

    ``cost`` is a privacy value (``PureDP``, ``ApproxDP``, ``ZCDP`` or ``GDP`` from
    :mod:`privplan.accounting.definitions`); for a partitioned mechanism it is the cost of each
    group.
    """

    id: str
    table: str
    region: Region
    cost: object
    partition: Partition | None = None
    label: str = ""
