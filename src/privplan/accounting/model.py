"""What the accountant is told about each released mechanism, and about each table.

These descriptors are the whole interface between the query analysis and the composition
theorem (CSF'24): a mechanism is ``f``-dependent on its table through its region (WHERE /
FILTER) and, for GROUP BY, a partitioning function; its cost is given in one privacy definition
*per group* (every group of a partitioned mechanism is calibrated the same way).

How a cost grows with a unit's rows (``MechanismSpec.growth``): a ``"flat"`` cost is calibrated
to *any* change of one unit's whole contribution to one group's input (a distinct-unit count, a
partition selection), so the solver only decides which mechanisms (and how many groups) a
neighbouring pair affects. A ``"linear"`` or ``"square"`` cost is calibrated to *one row*: a unit
with r rows in a group's input changes it by at most r times one row's sensitivity, and the
privacy loss of additive noise at sensitivity r·Δ is r times (pure ε, the ε of Laplace under
(ε, δ)) or r² times (ρ of zCDP; μ² of μ-GDP: exactly for Gaussian noise, at most for Laplace
noise, whose μ(ε) is concave) the loss at Δ. The solver then charges a unit Σ_g cost·φ(r_g) over the groups it meets (issue: user-level
GROUP BY). With one row per unit every growth is the same.

Privacy: a region holds every record that can change a mechanism; a cost is per group, unit or row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from privplan.accounting.definitions import PrivacyValue
from privplan.analysis.regions import Region

Neighbourhood = Literal["add_remove", "replace"]
Growth = Literal["flat", "linear", "square"]
GROWTHS: tuple[Growth, ...] = ("flat", "linear", "square")


@dataclass(frozen=True, slots=True)
class Partition:
    """A GROUP BY: every record is in exactly one group (Example IV.4).

    ``key_columns`` names the columns when every key is a plain column (so two records in the
    same box cell may be told apart by key); ``None`` means the keys are opaque expressions, and
    the solver then assumes two different records can always fall in different groups.
    ``max_groups_per_unit`` is the policy limit m: one unit touches at most m groups;
    ``max_rows_per_group`` the limit c on one unit's rows in one group (both enforced by the
    rewrite, per query, after WHERE).
    """

    keys: tuple[str, ...]
    key_columns: tuple[str, ...] | None = None
    max_groups_per_unit: int | None = None
    max_rows_per_group: int | None = None


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
    group; for ``growth`` ``"linear"``/``"square"`` it is the cost of one row of a unit changing
    the group's input (see the module docstring).
    """

    id: str
    table: str
    region: Region
    cost: PrivacyValue
    partition: Partition | None = None
    label: str = ""
    growth: Growth = "flat"


def growth_factor(growth: Growth, rows: int) -> int:
    """φ(r): how many times the one-row cost a group pays when a unit has ``rows`` rows in it."""
    if rows <= 0:
        return 0
    return 1 if growth == "flat" else rows if growth == "linear" else rows * rows


def unit_multiplier(
    growth: Growth, k: int, *, partitioned: bool, same_group: bool = False,
    max_groups: int | None = None, max_rows_per_group: int | None = None,
) -> int:
    """The most one unit of at most ``k`` rows can make a mechanism pay, in one-group costs.

    Σ_g φ(r_g) over at most ``max_groups`` groups with r_g <= ``max_rows_per_group`` and
    Σ r_g <= k. ``same_group``: every row of a unit has the same key (keys are unit-level).
    Flat: one per group met (Example IV.5). Linear and square: φ grows at least linearly, so
    groups filled to the cap c are the worst — q = k // c full groups (at most m), then the
    remainder in one more group if m allows. Used both by the solver's bounds and by the
    report allocator, so the two never disagree.
    """
    if k <= 0:
        return 0
    if not partitioned:
        return growth_factor(growth, k)
    m = max_groups if max_groups is not None else k
    c = min(max_rows_per_group, k) if max_rows_per_group is not None else k
    if same_group:
        m = 1
    if growth == "flat":
        return min(m, k)
    full = min(m, k // c)
    rest = k - full * c if full < m else 0
    return full * growth_factor(growth, c) + growth_factor(growth, min(rest, c))


def unit_group_rows(
    growth: Growth, k: int, *, partitioned: bool, same_group: bool = False,
    max_groups: int | None = None, max_rows_per_group: int | None = None,
) -> tuple[int, ...]:
    """The rows per group of the arrangement :func:`unit_multiplier` charges (the same rule):
    Σ_g φ(r_g) over the result equals ``unit_multiplier``. Flat: one row (one one-group cost) in
    each of min(m, k) groups; otherwise q = k // c full groups (at most m), then the remainder.
    A composition theorem other than the sum (PLD, advanced) needs the groups, not the total:
    r rows in one group are *one* mechanism at r times the sensitivity, not r mechanisms.
    """
    if k <= 0:
        return ()
    if not partitioned:
        return (k,)
    m = max_groups if max_groups is not None else k
    c = min(max_rows_per_group, k) if max_rows_per_group is not None else k
    if same_group:
        m = 1
    if growth == "flat":
        return (1,) * min(m, k)
    full = min(m, k // c)
    rest = k - full * c if full < m else 0
    return (c,) * full + ((min(rest, c),) if rest > 0 else ())


def row_multiplier(growth: Growth, k: int, *, partitioned: bool,
                   max_rows_per_group: int | None = None) -> int:
    """The most one row of a unit adds to a mechanism's multiplier, averaged over the unit.

    Σ_g φ(r_g) <= R·Σ_g r_g with R = 1 (flat, linear) or the most rows one group can hold
    (square: r² <= R·r), so a unit of k rows pays at most Σ over its rows of R·cost: the
    per-row weight behind the solver's "k x the heaviest record" bound.
    """
    if growth != "square":
        return 1
    if partitioned and max_rows_per_group is not None:
        return min(max_rows_per_group, k)
    return k
