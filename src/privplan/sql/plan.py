"""The logical plan: what a query releases, in terms the analysis, accountant and rewrite share.

A query is one or more *cores* (an aggregate SELECT over one private table) combined by
UNION ALL, plus post-processing (HAVING, ORDER BY, LIMIT, expressions) that runs only on noisy
values. Each core releases *measures*: exact grouped aggregates (a count, a clamped sum, a
clamped sum of squares, a histogram of grid cells for a quantile, or a partition-selection
count) that become one mechanism each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal, TypeAlias

from sqlglot import exp

from privplan.analysis.regions import Region
from privplan.policy.model import FrozenMap

MeasureKind = Literal["count", "count_units", "count_distinct", "sum", "sum_sq", "select_count",
                      "quantile", "sum_distinct", "sum_sq_distinct", "count_distinct_grid"]
COUNT_KINDS = frozenset({"count", "count_units", "count_distinct", "select_count",
                         "count_distinct_grid"})  # released in rows, whatever the grid
AggregateFunc: TypeAlias = str
"""The name of an aggregate's row in :data:`privplan.sql.aggregates.AGGREGATES` (``"count"``,
``"var_samp"``, ...): what parsing, the measures and post-processing read of the function."""


@dataclass(frozen=True)
class GroupKey:
    """One GROUP BY expression. ``column`` is set when the key is a plain column."""

    id: str
    expr: exp.Expression
    sql: str
    column: str | None
    public_domain: tuple[Any, ...] | None  # values released without selection, if public
    public_join: int | None = None  # the key reads only columns of this public join: its
    # domain is the public table's distinct values (filled in by the session)
    domain_literals: tuple[str, ...] | None = None  # SQL of each CASE result, as written
    engine_type: str | None = None  # the engine's type of the key (filled in by the session)
    domain_sql: tuple[str, ...] | None = None  # the public domain as engine-typed SQL values,
    # one per distinct value as the engine compares them (filled in by the session)
    domain_cast: str | None = None  # when set, ``domain_sql`` holds plain literals of one
    # kind (strings, or integers) and this SQL over ``x`` makes each the engine-typed key
    domain_table: str | None = None  # when set (a long domain with ``domain_cast``): an engine
    # relation whose one column ``x`` holds those values, read in place of ``domain_sql``


@dataclass(frozen=True)
class Measure:
    """One exact aggregate column computed by the engine and noised as one mechanism.

    ``condition`` is the FILTER/CASE condition beyond WHERE (None: none); ``region`` is the
    mechanism's region (WHERE ∩ condition ∩ value NOT NULL ∩ public key domain).
    ``lo``/``hi`` are clamping bounds on the integer grid (``resolution`` per unit); the
    measure's value is reported in real units as ``noisy_int * scale``.
    """

    id: str
    kind: MeasureKind
    column: str | None
    condition: exp.Expression | None
    region: Region
    sensitivity: int
    lo: int = 0
    hi: int = 0
    resolution: Fraction = Fraction(1)
    label: str = ""
    per_row: bool = False  # sensitivity is one row's; a unit's r rows in a group move it r x
    centre: int = 0  # sums of (value - centre) on the grid (AVG/VAR: half the range, not |hi|)
    expression: str | None = None  # engine SQL of an expression's value (column: its name)
    quantile: Fraction | None = None  # kind "quantile": q in [0, 1]; the engine computes a
    # histogram of the grid cells [lo, hi] (``resolution`` wide) and ``sensitivity`` is the
    # rank utility's (privplan.mechanisms.exponential)
    monotone: bool = False  # kind "quantile": its utilities move one way between neighbours
    # (q = 0 or 1 under add/remove), so the mechanism may use exp(-ε·U/Δ)

    @property
    def scale(self) -> Fraction:
        if self.kind in COUNT_KINDS:
            return Fraction(1)
        if self.kind in ("sum_sq", "sum_sq_distinct"):
            return self.resolution * self.resolution
        return self.resolution


@dataclass(frozen=True)
class AggregateUse:
    """A user-visible aggregate call and how it is derived from measures."""

    sql: str
    func: AggregateFunc
    column: str | None
    count: str | None = None  # measure ids
    sum: str | None = None
    sum_sq: str | None = None
    multiplier: Any = 1  # SUM(CASE WHEN p THEN 3 ...) = 3 * COUNT
    lower: Any = None  # declared bounds (real units) for clamping derived values
    upper: Any = None
    centre: Any = 0  # real units: the sum and sum of squares are of (value - centre)
    quantile: str | None = None  # func "quantile": the measure id


@dataclass(frozen=True)
class CorePlan:
    """One aggregate SELECT over one private table.

    Frozen: the builder makes it from the query text and the policy, and each pre-charge
    binding pass (:data:`privplan.planning.passes.PASSES`) returns a new one, so a plan that
    was admitted (and cached) cannot be changed behind the gate's back."""

    table: str  # policy table name
    table_sql: str  # how the engine names it (filled by the session)
    alias: str | None
    where: exp.Expression | None
    where_region: Region
    keys: tuple[GroupKey, ...]
    measures: tuple[Measure, ...]
    aggregates: Mapping[str, AggregateUse]  # by the aggregate node's SQL (read-only)
    select: exp.Select  # the user's SELECT (a private copy) for post-processing
    selection: Measure | None = None  # partition-selection count, when keys are not public
    notes: tuple[str, ...] = ()
    unit: str | None = None  # privacy-unit column (None: row-level)
    max_rows_per_unit: int = 1
    max_groups_per_unit: int | None = None
    max_rows_per_group: int | None = None  # a unit's rows per group (enforced per query)
    unit_level_columns: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    joins: tuple[Any, ...] = ()  # PublicJoin, see privplan.sql.joins
    prebounded: bool = False  # table_sql already holds the per-unit bounded rows
    table_policy: Any = None  # the TablePolicy queried (virtual for a private join)
    private_join: tuple[Any, Any] | None = None  # (left, right) TablePolicy of a private join
    # keys read from one public table together: (key indices, the engine SQL selecting their
    # distinct rows from that table, how many): the domain is those rows, not the cross
    # product of each key's values (filled by the session, privplan.planning.public_joins)
    joint_domains: tuple[tuple[tuple[int, ...], str, int], ...] = ()
    min_units_per_group: int = 1  # partition selection keeps groups of >= this many units
    max_rows_per_query: int | None = None  # BigQuery's max_rows_contributed (enforced per query)
    # (BigQuery's min_privacy_units_per_group; privplan.planning.costs._selection)
    # the pre-charge gate's view of the source (privplan.gate): table_sql with every private
    # table replaced by a named relation of stand-in rows, and each name's columns with their
    # storage types (filled by the session)
    stand_in_sql: str | None = None
    stand_in_tables: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # the engine's type of each column the core's expressions read (the source pass)
    source_types: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """The mappings read-only too (a frozen dataclass freezes only its fields)."""
        for name in ("aggregates", "source_types"):
            if not isinstance(getattr(self, name), FrozenMap):
                object.__setattr__(self, name, FrozenMap(getattr(self, name)))
        if not isinstance(self.stand_in_tables, FrozenMap):
            object.__setattr__(self, "stand_in_tables", FrozenMap(
                {k: FrozenMap(v) for k, v in self.stand_in_tables.items()}))

    @property
    def grouped(self) -> bool:
        return bool(self.keys)

    @property
    def public_keys(self) -> bool:
        return all(k.public_domain is not None or k.public_join is not None for k in self.keys)


@dataclass(frozen=True)
class QueryPlan:
    sql: str
    statement: exp.Expression
    cores: tuple[CorePlan, ...]
