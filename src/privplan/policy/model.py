"""The per-table model of a policy: :class:`ColumnPolicy` and :class:`TablePolicy`.

Immutable, hashable dataclasses (so a policy can key caches), each with the lookups the planner
and the accountant need (bounds, columns, the unit model) and its ``to_dict`` — the policy-file
form that every input format is validated into. They are built only by the format readers
(:mod:`privplan.policy.native`, :mod:`privplan.policy.smartnoise`), which validate first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, get_args

from privplan.accounting.model import Neighbourhood, TableModel, UnitModel
from privplan.errors import PolicyError
from privplan.policy.checks import _suggest
from privplan.policy.values import _EXAMPLE_BOUNDS, _ORDERED_TYPES, ColumnType, _fraction_out

NEIGHBOURHOODS: tuple[str, ...] = get_args(Neighbourhood)


# --------------------------------------------------------------------------------------------
# Immutable mapping (hashable, so policies can key caches)
# --------------------------------------------------------------------------------------------


class FrozenMap(Mapping[str, Any]):
    """A read-only, ordered, hashable mapping."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(tuple(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"


# --------------------------------------------------------------------------------------------
# Columns
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnPolicy:
    """One column: its type, optional clamping bounds and optional public domain of values.

    ``lower``/``upper`` are typed per column (``int``, ``float``, ``datetime.date``,
    ``datetime.datetime``); ``public_values`` is typed, sorted and deduplicated (``None`` if not
    declared). ``unit_level`` says the column is constant across one privacy unit's rows.
    ``resolution`` is the grid step of float sums.
    """

    name: str
    type: ColumnType
    lower: Any = None
    upper: Any = None
    public_values: tuple[Any, ...] | None = None
    unit_level: bool = False
    nullable: bool = True
    resolution: Fraction | None = None

    @property
    def has_bounds(self) -> bool:
        """Both ``lower`` and ``upper`` are declared."""
        return self.lower is not None and self.upper is not None

    def require_bounds(self, what: str, table: str) -> tuple[Any, Any]:
        """``(lower, upper)``, or a PolicyError saying that ``what`` (e.g. "SUM(cost)") needs them.

        Sensitivity of a sum or an average is the width of the clamping range, so an aggregate
        over an unbounded column has no finite noise scale and is refused.
        """
        if self.has_bounds:
            return self.lower, self.upper
        where = f"column '{self.name}' of table '{table}'"
        if self.type not in _ORDERED_TYPES:
            raise PolicyError(
                f"{what} needs bounds, but {where} has type {self.type}, which has no numeric "
                f"range. Why: privplan scales noise to the largest change one privacy unit can "
                f"make. Fix: aggregate a numeric column, or count rows per value instead."
            )
        lo, hi = _EXAMPLE_BOUNDS[self.type]
        lo = lo if self.lower is None else str(self.lower)
        hi = hi if self.upper is None else str(self.upper)
        missing = (
            "no lower/upper"
            if self.lower is None and self.upper is None
            else ("no lower" if self.lower is None else "no upper")
        )
        raise PolicyError(
            f"{what} needs bounds: {where} has {missing} in the policy. Why: the noise is scaled "
            f"to the largest change one privacy unit can make, which is unbounded without them. "
            f"Fix: add e.g. `{self.name}: {{type: {self.type}, lower: {lo}, upper: {hi}}}` under "
            f"tables.{table}.columns; privplan clamps values to them."
        )

    def to_dict(self) -> dict[str, Any]:
        """The policy-file form of this column (without its name)."""
        d: dict[str, Any] = {"type": self.type}
        if self.lower is not None:
            d["lower"] = self.lower
        if self.upper is not None:
            d["upper"] = self.upper
        if self.public_values is not None:
            d["public_values"] = list(self.public_values)
        if self.unit_level:
            d["unit_level"] = True
        if not self.nullable:
            d["nullable"] = False
        if self.resolution is not None:
            d["resolution"] = _fraction_out(self.resolution)
        return d


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TablePolicy:
    """One table: public, or private with a privacy unit, a neighbourhood and limits.

    ``privacy_unit`` is ``"row"`` (each row is one person) or the name of the column that
    identifies a unit; a unit then has at most ``max_rows_per_unit`` rows (enforced by the
    rewrite) and touches at most ``max_groups_per_unit`` groups of any GROUP BY, with at most
    ``max_rows_per_group_per_unit`` rows in each (both enforced per query). ``replace``
    neighbourhood is bounded DP (the table size is public); ``add_remove`` is unbounded DP.
    """

    name: str
    columns: Mapping[str, ColumnPolicy] = field(default_factory=FrozenMap)
    public: bool = False
    privacy_unit: str = "row"
    neighbourhood: Neighbourhood = "add_remove"
    max_rows_per_unit: int = 1
    max_groups_per_unit: int | None = None
    source: str | None = None
    rows: int | None = None
    schema: str | None = None
    max_rows_per_group_per_unit: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.columns, FrozenMap):
            object.__setattr__(self, "columns", FrozenMap(self.columns))

    @property
    def is_row_level(self) -> bool:
        """Each row is its own privacy unit."""
        return self.privacy_unit == "row"

    @property
    def qualified_name(self) -> str:
        """``schema.name`` if a schema is declared, else ``name``."""
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def column(self, name: str) -> ColumnPolicy:
        """The column called ``name`` (case-insensitive), or a PolicyError listing the known ones."""
        key = name.strip().strip('"`[]').lower()
        col = self.columns.get(key)
        if col is not None:
            return col
        known = ", ".join(self.columns) or "(none declared)"
        raise PolicyError(
            f"column '{name}' of table '{self.name}' is not in the policy; known columns: "
            f"{known}. Why: privplan reads only declared columns, since it needs their types and "
            f"bounds to bound each answer's sensitivity. Fix: {_suggest(key, list(self.columns))}"
            f"declare it under tables.{self.name}.columns, e.g. `{key}: {{type: int}}`."
        )

    def unit_level_columns(self) -> frozenset[str]:
        """Columns constant per privacy unit, including the privacy-unit column itself.

        On a row-level table every column is trivially constant per unit; only the declared
        ones are listed.
        """
        cols = {n for n, c in self.columns.items() if c.unit_level}
        if not self.public and not self.is_row_level:
            cols.add(self.privacy_unit)
        return frozenset(cols)

    def table_model(self) -> TableModel:
        """The neighbourhood and unit model the accountant uses for this (private) table."""
        if self.public:
            raise PolicyError(
                f"table '{self.name}' is public: it has no privacy model. Why: public tables are "
                f"not protected and cost nothing. Fix: only charge queries on private tables "
                f"(this is a bug in the caller if you did not call table_model yourself)."
            )
        unit = UnitModel(self.max_rows_per_unit, self.unit_level_columns())
        return TableModel(self.neighbourhood, unit)

    def to_dict(self) -> dict[str, Any]:
        """The policy-file form of this table (without its name)."""
        d: dict[str, Any] = {}
        if self.public:
            d["public"] = True
        else:
            d["privacy_unit"] = self.privacy_unit
            d["neighbourhood"] = self.neighbourhood
            d["max_rows_per_unit"] = self.max_rows_per_unit
            if self.max_groups_per_unit is not None:
                d["max_groups_per_unit"] = self.max_groups_per_unit
            if self.max_rows_per_group_per_unit is not None:
                d["max_rows_per_group_per_unit"] = self.max_rows_per_group_per_unit
        for k in ("source", "rows", "schema"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.columns or not self.public:
            d["columns"] = {n: c.to_dict() for n, c in self.columns.items()}
        return d
