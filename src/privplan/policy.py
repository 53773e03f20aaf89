"""The privacy policy: which tables are private, what one privacy unit is, what is public.

A policy is read from YAML (:meth:`Policy.from_yaml`), a dict (:meth:`Policy.from_dict`) or
SmartNoise SQL metadata (:meth:`Policy.from_smartnoise_yaml`). Everything is validated up front:
a policy privplan does not fully understand is refused with a :class:`PolicyError` saying what is
wrong, where (``table.column`` and the YAML key path), why it matters for privacy, and how to fix
it — a silently ignored typo would mean a policy that protects less than its author believes.

>>> policy = Policy.from_yaml('''
... tables:
...   visits:
...     privacy_unit: patient_id
...     max_rows_per_unit: 10
...     columns:
...       patient_id: {type: int}
...       cost: {type: float, lower: 0, upper: 10000}
...   hospitals: {public: true}
... ''')
>>> policy.table("VISITS").column("Cost").require_bounds("SUM(cost)", "visits")
(0.0, 10000.0)
>>> policy.table("visits").table_model().unit.max_rows
10
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, NoReturn, cast, get_args

import yaml

from privplan.accounting.model import Neighbourhood, TableModel, UnitModel
from privplan.errors import PolicyError

__all__ = ["ColumnPolicy", "ColumnType", "Policy", "TablePolicy"]

ColumnType = Literal["int", "float", "str", "bool", "date", "timestamp"]
COLUMN_TYPES: tuple[str, ...] = get_args(ColumnType)
NEIGHBOURHOODS: tuple[str, ...] = get_args(Neighbourhood)

_POLICY_KEYS = ("tables", "notes")
_TABLE_KEYS = (
    "public",
    "privacy_unit",
    "neighbourhood",
    "max_rows_per_unit",
    "max_groups_per_unit",
    "max_rows_per_group_per_unit",
    "source",
    "rows",
    "schema",
    "columns",
)
_PRIVATE_ONLY_KEYS = ("privacy_unit", "neighbourhood", "max_rows_per_unit", "max_groups_per_unit",
                      "max_rows_per_group_per_unit")
_COLUMN_KEYS = ("type", "lower", "upper", "public_values", "unit_level", "nullable", "resolution")
_ORDERED_TYPES = ("int", "float", "date", "timestamp")

# Names users reach for that privplan spells differently: used only to suggest the fix.
_TYPE_ALIASES = {
    "integer": "int",
    "bigint": "int",
    "smallint": "int",
    "long": "int",
    "double": "float",
    "real": "float",
    "decimal": "float",
    "numeric": "float",
    "string": "str",
    "text": "str",
    "varchar": "str",
    "boolean": "bool",
    "datetime": "timestamp",
}

_EXAMPLE_BOUNDS: dict[str, tuple[str, str]] = {
    "int": ("0", "100"),
    "float": ("0", "10000"),
    "date": ("2020-01-01", "2024-12-31"),
    "timestamp": ("2020-01-01 00:00:00", "2024-12-31 23:59:59"),
}

_WHY_UNKNOWN_KEY = (
    "privplan refuses settings it does not understand: a mistyped bound or limit would be "
    "silently dropped and the policy would protect less than you meant."
)
_WHY_TYPE = "privplan needs each column's type to derive regions, bounds and sensitivities."
_WHY_BOUNDS = (
    "privplan clamps values to the bounds, and the noise is scaled to the largest change one "
    "privacy unit can make; inconsistent bounds would make that scale wrong."
)
_WHY_PUBLIC_VALUES = (
    "public_values is the declared domain of group keys; privplan releases only those keys "
    "without spending budget on partition selection, so each must be a valid column value."
)
_WHY_UNIT = (
    "the privacy unit is who is protected; the sensitivity of every answer is derived from it."
)


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
# Error locations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Loc:
    """Where a policy value sits: the YAML key path plus the table and column it belongs to."""

    keys: tuple[str, ...] = ()
    table: str | None = None
    column: str | None = None

    def key(self, k: object) -> _Loc:
        return replace(self, keys=(*self.keys, '""' if k == "" else str(k)))

    def __str__(self) -> str:
        obj = ".".join(p for p in (self.table, self.column) if p is not None)
        path = ".".join(self.keys)
        if obj and path:
            return f"{obj} (key `{path}`)"
        return obj or (f"key `{path}`" if path else "policy")


def _fail(loc: _Loc | str, what: str, why: str, fix: str) -> NoReturn:
    raise PolicyError(f"{loc}: {what}. Why: {why} Fix: {fix}")


def _suggest(word: str, options: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word.lower(), list(options), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'? " if close else ""


def _check_keys(raw: Mapping[Any, Any], allowed: tuple[str, ...], loc: _Loc, what: str) -> None:
    for k in raw:
        if not isinstance(k, str):
            _fail(
                loc.key(k),
                f"key {k!r} of {what} is not a name",
                _WHY_UNKNOWN_KEY,
                f"valid keys are {', '.join(allowed)}.",
            )
        if k not in allowed:
            _fail(
                loc.key(k),
                f"unknown key '{k}' in {what}",
                _WHY_UNKNOWN_KEY,
                f"{_suggest(k, allowed)}Valid keys: {', '.join(allowed)}.",
            )


def _name(key: object, loc: _Loc, what: str) -> str:
    """Lower-cased table/column name; names are case-insensitive."""
    if isinstance(key, bool) or not isinstance(key, str) or not key.strip():
        _fail(
            loc,
            f"{what} name {key!r} is not a non-empty string",
            "privplan matches tables and columns in SQL by name.",
            f"quote it in the YAML, e.g. `'{key}':`.",
        )
    return key.strip().lower()


def _mapping(raw: object, loc: _Loc, what: str, example: str) -> Mapping[Any, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        _fail(
            loc,
            f"{what} must be a mapping of keys to values, got {type(raw).__name__} {raw!r}",
            "privplan reads every setting by its key.",
            f"write e.g. `{example}`.",
        )
    return raw


def _flag(raw: Mapping[Any, Any], key: str, default: bool, loc: _Loc) -> bool:
    v = raw.get(key, default)
    if not isinstance(v, bool):
        _fail(
            loc.key(key),
            f"`{key}` must be true or false, got {v!r}",
            "privplan will not guess whether a privacy setting is on.",
            f"write `{key}: true` or `{key}: false`.",
        )
    return v


def _positive_int(v: object, loc: _Loc, what: str, why: str, *, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        _fail(
            loc,
            f"{what} must be an integer >= {minimum}, got {v!r}",
            why,
            f"write a whole number such as `{loc.keys[-1] if loc.keys else what}: "
            f"{max(minimum, 1)}`.",
        )
    return v


def _optional_str(raw: Mapping[Any, Any], key: str, loc: _Loc, example: str) -> str | None:
    v = raw.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip():
        _fail(
            loc.key(key),
            f"`{key}` must be a non-empty string, got {v!r}",
            "privplan uses it to find the data the policy protects.",
            f"write e.g. `{key}: {example}`.",
        )
    return v.strip()


# --------------------------------------------------------------------------------------------
# Values typed per column
# --------------------------------------------------------------------------------------------


def _to_utc_naive(t: dt.datetime) -> dt.datetime:
    if t.tzinfo is None:
        return t
    return t.astimezone(dt.UTC).replace(tzinfo=None)


def _coerce(v: object, ctype: str, loc: _Loc, what: str, why: str) -> Any:
    """``v`` as a value of a ``ctype`` column, or a PolicyError explaining the mismatch.

    Numbers also accept numeric strings (PyYAML reads ``1e6`` as a string); dates and
    timestamps accept ``datetime.date``/``datetime`` (PyYAML's reading of unquoted dates) and ISO
    strings. Time-zone aware timestamps are converted to naive UTC.
    """

    def bad(hint: str) -> NoReturn:
        shown = repr(v) if isinstance(v, str) else str(v)
        _fail(loc, f"{what} {shown} ({type(v).__name__}) is not a valid {ctype} value", why, hint)

    if v is None:
        bad(f"give a {ctype} value; NULLs are governed by `nullable`, not by {what}.")
    if ctype in ("int", "float"):
        if isinstance(v, bool):
            bad(f"write a number, e.g. {_EXAMPLE_BOUNDS[ctype][1]}.")
        num: Fraction | float
        if isinstance(v, int):
            num = Fraction(v)
        elif isinstance(v, float):
            if not math.isfinite(v):
                bad("bounds and values must be finite numbers.")
            num = v
        elif isinstance(v, str):
            try:
                num = Fraction(v.strip())
            except (ValueError, ZeroDivisionError):
                bad(f"write a number, e.g. {_EXAMPLE_BOUNDS[ctype][1]}.")
        else:
            bad(f"write a number, e.g. {_EXAMPLE_BOUNDS[ctype][1]}.")
        if ctype == "float":
            try:
                return float(num)
            except OverflowError:
                bad("bounds and values must be finite numbers.")
        if isinstance(num, float):
            if not num.is_integer():
                bad("an int column takes whole numbers; use `type: float` for fractions.")
            return int(num)
        if num.denominator != 1:
            bad("an int column takes whole numbers; use `type: float` for fractions.")
        return int(num)
    if ctype == "str":
        if not isinstance(v, str):
            bad(
                f"quote it in the YAML: `'{v}'` (unquoted yes/no/on/off, numbers and dates are "
                "read as other types)."
            )
        return v
    if ctype == "bool":
        if not isinstance(v, bool):
            bad("write true or false.")
        return v
    if ctype == "date":
        if isinstance(v, dt.datetime):
            if v.time() != dt.time(0) or v.tzinfo is not None:
                bad(
                    "a date column takes dates such as 2020-01-01; use `type: timestamp` for times."
                )
            return v.date()
        if isinstance(v, dt.date):
            return v
        if isinstance(v, str):
            try:
                return dt.date.fromisoformat(v.strip())
            except ValueError:
                pass
        bad("write an ISO date such as 2020-01-01.")
    if ctype == "timestamp":
        if isinstance(v, dt.datetime):
            return _to_utc_naive(v)
        if isinstance(v, dt.date):
            return dt.datetime(v.year, v.month, v.day)
        if isinstance(v, str):
            try:
                return _to_utc_naive(dt.datetime.fromisoformat(v.strip()))
            except ValueError:
                pass
        bad("write an ISO timestamp such as 2020-01-01 00:00:00.")
    raise AssertionError(ctype)  # pragma: no cover - ctype is validated before


def _check_grid(resolution: Fraction, lower: Any, upper: Any, loc: _Loc) -> None:
    """A resolution the policy sets must put the bounds on a grid whose SUM fits int64 and
    that holds at least one point (checked when the policy is loaded, not at the first SUM)."""
    from privplan.errors import UnsupportedQueryError
    from privplan.mechanisms import grid as gridlib

    suggested = gridlib.default_resolution(lower, upper, "float")
    fix = (f"use `resolution: {_fraction_out(suggested)}` (the default for these bounds), or "
           "remove `resolution` to get it.")
    why = ("float sums are computed exactly on the integer grid value / resolution, which must "
           "fit 64-bit integers over up to 2^40 rows (|value| / resolution <= 2^22) and hold "
           "at least one point between the bounds.")
    try:
        lo, hi = gridlib.Grid(resolution).to_grid_bounds(lower, upper)
        gridlib.check_no_overflow(lo, hi, 1)
    except UnsupportedQueryError:
        _fail(loc, f"resolution {_fraction_out(resolution)} does not fit the bounds "
                   f"[{lower}, {upper}]", why, fix)


def _resolution(v: object, loc: _Loc) -> Fraction:
    why = "the resolution is the grid float sums are computed on; noise is calibrated to it."
    fix = "write a positive step such as `resolution: 0.01`."
    r: Fraction | None = None
    if isinstance(v, bool):
        r = None
    elif isinstance(v, int):
        r = Fraction(v)
    elif isinstance(v, float) and math.isfinite(v):
        r = Fraction(repr(v))  # the decimal the user wrote, not the binary approximation
    elif isinstance(v, str):
        try:
            r = Fraction(v.strip())
        except (ValueError, ZeroDivisionError):
            r = None
    if r is None or r <= 0:
        _fail(loc, f"resolution {v!r} is not a positive number", why, fix)
    return r


def _fraction_out(r: Fraction) -> float | str:
    """A Fraction as the float the user would write, or as ``"p/q"`` if no float is exact."""
    f = float(r)
    return f if Fraction(repr(f)) == r else str(r)


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


def _parse_column(name: str, raw: object, loc: _Loc, *, public: bool) -> ColumnPolicy:
    if isinstance(raw, str):  # shorthand `age: int`
        raw = {"type": raw}
    raw = _mapping(raw, loc, f"column '{name}'", f"{name}: {{type: int, lower: 0, upper: 100}}")
    _check_keys(raw, _COLUMN_KEYS, loc, f"column '{name}'")
    t = raw.get("type")
    if t is None:
        _fail(
            loc.key("type"),
            f"column '{name}' has no type",
            _WHY_TYPE,
            f"add `type:` (one of {', '.join(COLUMN_TYPES)}), e.g. `{name}: {{type: int}}`.",
        )
    if not isinstance(t, str) or t not in COLUMN_TYPES:
        alias = _TYPE_ALIASES.get(str(t).lower())
        hint = f"did you mean '{alias}'? " if alias else _suggest(str(t), COLUMN_TYPES)
        _fail(
            loc.key("type"),
            f"unknown column type {t!r}",
            _WHY_TYPE,
            f"{hint}Valid types: {', '.join(COLUMN_TYPES)}.",
        )
    ctype = cast(ColumnType, t)

    bounds: dict[str, Any] = {}
    for b in ("lower", "upper"):
        if raw.get(b) is None:
            continue
        if ctype not in _ORDERED_TYPES:
            _fail(
                loc.key(b),
                f"a {ctype} column cannot have `{b}`",
                "bounds clamp numeric and date values; a string or boolean has no range to clamp.",
                f"remove `{b}`; to fix the set of values, use `public_values: [...]`.",
            )
        bounds[b] = _coerce(raw[b], ctype, loc.key(b), f"`{b}` bound", _WHY_BOUNDS)
    lower, upper = bounds.get("lower"), bounds.get("upper")
    if lower is not None and upper is not None and lower > upper:
        _fail(
            loc,
            f"lower bound {lower} is greater than upper bound {upper}",
            _WHY_BOUNDS,
            f"swap them: `lower: {upper}, upper: {lower}`.",
        )

    public_values: tuple[Any, ...] | None = None
    if "public_values" in raw:
        pv = raw["public_values"]
        ploc = loc.key("public_values")
        if isinstance(pv, (str, bytes)) or not isinstance(pv, (list, tuple, set, frozenset)):
            _fail(
                ploc,
                f"public_values must be a list, got {pv!r}",
                _WHY_PUBLIC_VALUES,
                "write a YAML list, e.g. `public_values: [A, B, C]`.",
            )
        if not pv:
            _fail(
                ploc,
                "public_values is empty",
                _WHY_PUBLIC_VALUES + " An empty domain would release no group at all.",
                "list the possible values, or remove the key "
                "to let privplan select groups privately.",
            )
        values = {
            _coerce(v, ctype, ploc.key(i), "public value", _WHY_PUBLIC_VALUES)
            for i, v in enumerate(pv)
        }
        for v in values:
            if (lower is not None and v < lower) or (upper is not None and v > upper):
                _fail(
                    ploc,
                    f"public value {v} lies outside the bounds [{lower}, {upper}]",
                    _WHY_PUBLIC_VALUES + " Clamping would move rows into another group.",
                    "widen the bounds or drop the value.",
                )
        public_values = tuple(sorted(values))

    unit_level = _flag(raw, "unit_level", False, loc)
    if unit_level and public:
        _fail(
            loc.key("unit_level"),
            "`unit_level` is set on a column of a public table",
            "unit_level describes privacy units, and a public table has none; marking it "
            "suggests the table was meant to be private.",
            "remove `unit_level`, or remove `public: true` and declare a privacy_unit.",
        )
    nullable = _flag(raw, "nullable", True, loc)

    resolution = None
    if raw.get("resolution") is not None:
        if ctype != "float":
            _fail(
                loc.key("resolution"),
                f"`resolution` is set on column of type {ctype}",
                "resolution is the grid step for sums of float columns; other types are not "
                "summed on a grid (int columns already use the integer grid).",
                "remove `resolution`, or declare the column `type: float`.",
            )
        resolution = _resolution(raw["resolution"], loc.key("resolution"))
        if lower is not None and upper is not None:
            _check_grid(resolution, lower, upper, loc.key("resolution"))

    return ColumnPolicy(name, ctype, lower, upper, public_values, unit_level, nullable, resolution)


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


def _unit_limit(raw: Mapping[str, Any], key: str, unit: str, tloc: _Loc, why: str,
                row_why: str) -> int | None:
    """An optional positive per-unit limit (1 is the only value a row-level table allows)."""
    if raw.get(key) is None:
        return None
    value = _positive_int(raw[key], tloc.key(key), key, why)
    if unit == "row" and value != 1:
        _fail(tloc.key(key), f"{key} is {value} but the privacy unit is a row", row_why,
              f"set `privacy_unit:` to the column identifying a person, or remove {key}.")
    return value


def _parse_table(
    name: str,
    raw: object,
    loc: _Loc,
    col_loc: Callable[[str], _Loc] | None = None,
) -> TablePolicy:
    """Validate one table's settings. ``col_loc`` maps a column key to its location."""
    tloc = replace(loc, table=name)
    raw = _mapping(raw, tloc, f"table '{name}'", f"{name}: {{privacy_unit: row, columns: ...}}")
    _check_keys(raw, _TABLE_KEYS, tloc, f"table '{name}'")
    public = _flag(raw, "public", False, tloc)
    if col_loc is None:
        col_loc = lambda c: tloc.key("columns").key(c)

    columns: dict[str, ColumnPolicy] = {}
    raw_cols = _mapping(
        raw.get("columns"), tloc.key("columns"), "`columns`", "columns: {age: {type: int}}"
    )
    for ckey, craw in raw_cols.items():
        cname = _name(ckey, col_loc(str(ckey)), "column")
        cloc = replace(col_loc(str(ckey)), table=name, column=cname)
        if cname in columns:
            _fail(
                cloc,
                f"column '{cname}' is declared twice (names are case-insensitive)",
                "two declarations of one column could carry different bounds.",
                "keep one of them.",
            )
        columns[cname] = _parse_column(cname, craw, cloc, public=public)

    source = _optional_str(raw, "source", tloc, f"{name}.parquet")
    schema = _optional_str(raw, "schema", tloc, "main")
    rows = None
    if raw.get("rows") is not None:
        rows = _positive_int(
            raw["rows"],
            tloc.key("rows"),
            "`rows`",
            "rows is the public size of the table.",
            minimum=0,
        )

    if public:
        for k in _PRIVATE_ONLY_KEYS:
            if k in raw:
                _fail(
                    tloc.key(k),
                    f"public table '{name}' sets `{k}`",
                    "a public table is not protected at all, so privacy settings on it are "
                    "contradictory and suggest the table holds personal data.",
                    f"remove `{k}`, or remove `public: true` to make the table private.",
                )
        return TablePolicy(name, columns, True, source=source, rows=rows, schema=schema)

    if not columns:
        _fail(
            tloc.key("columns"),
            f"private table '{name}' declares no columns",
            "privplan only reads declared columns, so nothing of this table could be queried; "
            "if the table holds no personal data it should be marked public.",
            f"declare its columns, e.g. `columns: {{age: {{type: int, lower: 0, upper: 120}}}}`, "
            f"or write `{name}: {{public: true}}`.",
        )

    unit = raw.get("privacy_unit", "row")
    if not isinstance(unit, str) or not unit.strip():
        _fail(
            tloc.key("privacy_unit"),
            f'privacy_unit must be "row" or a column name, got {unit!r}',
            _WHY_UNIT,
            "write `privacy_unit: row` or e.g. `privacy_unit: patient_id`.",
        )
    unit = unit.strip().lower()
    if unit != "row" and unit not in columns:
        _fail(
            tloc.key("privacy_unit"),
            f"privacy_unit '{unit}' is not a column of table "
            f"'{name}' (known columns: {', '.join(columns)})",
            _WHY_UNIT,
            f"{_suggest(unit, list(columns))}declare the column under tables.{name}.columns, "
            f"or write `privacy_unit: row` if each row is one person.",
        )

    nb = raw.get("neighbourhood", "add_remove")
    if nb not in NEIGHBOURHOODS:
        _fail(
            tloc.key("neighbourhood"),
            f"unknown neighbourhood {nb!r}",
            "the neighbourhood defines which pairs of databases DP must hide the difference "
            "between: add_remove (unbounded DP) adds or removes one unit; replace (bounded DP, "
            "table size public) changes one unit's data.",
            f"{_suggest(str(nb), NEIGHBOURHOODS)}write `neighbourhood: add_remove` or "
            f"`neighbourhood: replace`.",
        )
    neighbourhood = cast(Neighbourhood, nb)

    why_rows = "sensitivities scale with how many rows one privacy unit may contribute."
    if unit == "row":
        max_rows = 1
        if "max_rows_per_unit" in raw:
            max_rows = _positive_int(
                raw["max_rows_per_unit"],
                tloc.key("max_rows_per_unit"),
                "max_rows_per_unit",
                why_rows,
            )
            if max_rows != 1:
                _fail(
                    tloc.key("max_rows_per_unit"),
                    f"max_rows_per_unit is {max_rows} but the privacy unit is a row",
                    "with privacy_unit: row each unit is exactly one "
                    "row, so a unit with several rows contradicts it; the intended protection "
                    "is unclear.",
                    "set `privacy_unit:` to the column identifying a person "
                    "(e.g. patient_id), or remove max_rows_per_unit.",
                )
    else:
        if "max_rows_per_unit" not in raw:
            _fail(
                tloc.key("max_rows_per_unit"),
                f"privacy_unit is column '{unit}' but max_rows_per_unit is missing",
                why_rows + " Without a bound, one unit could "
                "contribute any number of rows and no finite noise would hide it.",
                "add e.g. `max_rows_per_unit: 10`; privplan keeps at most that many rows per unit.",
            )
        max_rows = _positive_int(
            raw["max_rows_per_unit"], tloc.key("max_rows_per_unit"), "max_rows_per_unit", why_rows
        )

    max_groups = _unit_limit(
        raw, "max_groups_per_unit", unit, tloc,
        "it bounds how many groups of a GROUP BY one privacy unit can change.",
        "a row is in exactly one group, so a larger limit contradicts the privacy unit.")
    rows_per_group = _unit_limit(
        raw, "max_rows_per_group_per_unit", unit, tloc,
        "it bounds how many rows one privacy unit adds to one group of a GROUP BY.",
        "a unit is one row, so it adds one row to one group.")
    if rows_per_group is not None and rows_per_group >= max_rows:
        rows_per_group = None  # no tighter than max_rows_per_unit: nothing to enforce

    if unit != "row" and not columns[unit].unit_level:
        columns[unit] = replace(columns[unit], unit_level=True)

    return TablePolicy(
        name, columns, False, unit, neighbourhood, max_rows, max_groups, source, rows, schema,
        rows_per_group,
    )


# --------------------------------------------------------------------------------------------
# Policy
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """The privacy policy of every table a session may read, keyed by lower-case table name."""

    tables: Mapping[str, TablePolicy]
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.tables, FrozenMap):
            object.__setattr__(self, "tables", FrozenMap(self.tables))
        object.__setattr__(self, "notes", tuple(self.notes))

    # ---- construction ------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """Validate a policy given as a dict (the parsed form of the YAML file)."""
        return _parse_policy(d, _Loc())

    @classmethod
    def from_yaml(cls, source: str | os.PathLike[str]) -> Policy:
        """Read a policy from a YAML file path, or from YAML text (anything with a newline)."""
        text, label = _read_source(source)
        try:
            return _parse_policy(_load_yaml(text), _Loc())
        except PolicyError as e:
            if label == "<text>":
                raise
            raise PolicyError(f"{label}: {e}") from None

    @classmethod
    def from_smartnoise_yaml(cls, source: str | os.PathLike[str] | Mapping[str, Any]) -> Policy:
        """Read SmartNoise SQL metadata (collection → schema → table → options and columns).

        ``row_privacy: true`` → privacy_unit "row"; the ``private_id: true`` column → the
        privacy unit with ``max_ids`` (default 1) as max_rows_per_unit; ``rows`` (or
        ``rows_exact``) → rows; types int/float/string/boolean/datetime map to
        int/float/str/bool/timestamp. Options privplan does not use are listed in ``notes``.
        """
        if isinstance(source, Mapping):
            return _parse_smartnoise(source, "<dict>")
        text, label = _read_source(source)
        try:
            return _parse_smartnoise(_load_yaml(text), label)
        except PolicyError as e:
            if label == "<text>":
                raise
            raise PolicyError(f"{label}: {e}") from None

    # ---- lookup ------------------------------------------------------------------------------

    def table(self, name: str) -> TablePolicy:
        """The table called ``name``: accepts ``t``, ``T``, ``schema.t`` or ``db.schema.t``."""
        parts = [p.strip().strip('"`[]') for p in name.split(".")]
        key = parts[-1].lower()
        qualifier = parts[-2].lower() if len(parts) >= 2 else None
        t = self.tables.get(key)
        if t is not None and (
            qualifier is None or t.schema is None or t.schema.lower() == qualifier
        ):
            return t
        known = ", ".join(t.qualified_name for t in self.tables.values())
        if t is not None:
            what = (
                f"table '{name}' is not in the policy: '{key}' is declared in schema "
                f"'{t.schema}', not '{parts[-2]}'"
            )
        else:
            what = f"table '{name}' is not in the policy"
        raise PolicyError(
            f"{what}; known tables: {known}. Why: privplan reads only tables the policy "
            f"declares, since it cannot know how to protect any other. Fix: "
            f"{_suggest(key, list(self.tables))}add it under `tables:` (with `public: true` if "
            f"it holds no personal data)."
        )

    def private_tables(self) -> tuple[TablePolicy, ...]:
        """The private tables, in policy order."""
        return tuple(t for t in self.tables.values() if not t.public)

    def public_tables(self) -> tuple[TablePolicy, ...]:
        """The public tables, in policy order."""
        return tuple(t for t in self.tables.values() if t.public)

    # ---- serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The policy-file form; ``Policy.from_dict(p.to_dict()) == p``."""
        d: dict[str, Any] = {"tables": {n: t.to_dict() for n, t in self.tables.items()}}
        if self.notes:
            d["notes"] = list(self.notes)
        return d

    def to_yaml(self) -> str:
        """The policy as YAML text; ``Policy.from_yaml(p.to_yaml()) == p``."""
        d = self.to_dict()
        text = yaml.safe_dump(d, sort_keys=False, allow_unicode=True)
        if yaml.safe_load(text) != d:  # PyYAML writes some characters (e.g. U+0085) raw
            text = yaml.safe_dump(d, sort_keys=False, allow_unicode=False)
        return text

    # ---- display -----------------------------------------------------------------------------

    def __repr__(self) -> str:
        """One line naming each table (the dataclass default printed every column of every
        table); ``to_yaml()`` or the notebook view show the whole policy."""
        parts = [f"{t.qualified_name} (" + ("public" if t.public else
                                            f"private, unit {t.privacy_unit}, {t.neighbourhood}")
                 + f", {len(t.columns)} columns)" for t in self.tables.values()]
        text = f"Policy({'; '.join(parts)})"
        return text if len(text) <= 160 else text[:156] + " …)"

    def _repr_html_(self) -> str:
        """The notebook view: every table and column (see :func:`privplan.html.policy_html`)."""
        from privplan.html import policy_html

        return policy_html(self)


def _parse_policy(d: object, loc: _Loc) -> Policy:
    example = "tables: {visits: {privacy_unit: row, columns: {age: {type: int}}}}"
    if d is None:
        d = {}
    d = _mapping(d, loc, "the policy", example)
    _check_keys(d, _POLICY_KEYS, loc, "the policy")
    tables_raw = _mapping(d.get("tables"), loc.key("tables"), "`tables`", example)
    if not tables_raw:
        _fail(
            loc.key("tables"),
            "the policy declares no tables",
            "privplan reads only tables the policy declares, so nothing could be queried.",
            f"add a `tables:` section, e.g. `{example}`.",
        )
    tables: dict[str, TablePolicy] = {}
    for key, raw in tables_raw.items():
        tkey = loc.key("tables").key(key)
        name = _name(key, tkey, "table")
        if "." in name:
            _fail(
                tkey,
                f"table name '{key}' contains a dot",
                "privplan keys tables by their bare name; a schema is a separate setting.",
                f"write `{key.split('.')[-1]}: {{schema: {key.rsplit('.', 1)[0]}, ...}}`.",
            )
        if name in tables:
            _fail(
                tkey,
                f"table '{name}' is declared twice (names are case-insensitive)",
                "two declarations of one table could carry different protections.",
                "keep one of them.",
            )
        tables[name] = _parse_table(name, raw, tkey)
    notes = d.get("notes") or []
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        _fail(
            loc.key("notes"),
            "`notes` must be a list of strings",
            "notes only document the policy.",
            'write `notes: ["..."]` or remove it.',
        )
    return Policy(tables, tuple(notes))


# --------------------------------------------------------------------------------------------
# YAML reading
# --------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:
                continue
            if first is not None:
                raise PolicyError(
                    f"duplicate key '{key}' at line {line} (first at line {first}). Why: YAML "
                    f"keeps only the last one, so a setting would be silently dropped. Fix: keep "
                    f"one of them."
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _read_source(source: str | os.PathLike[str]) -> tuple[str, str]:
    """(text, label): ``source`` is a path unless it is a str that looks like YAML text."""
    if isinstance(source, str) and (
        "\n" in source or (": " in source and not os.path.exists(source))
    ):
        return source, "<text>"
    path = Path(source)
    if not path.exists():
        raise PolicyError(
            f"policy file '{path}' does not exist (working directory: {Path.cwd()}). Why: "
            f"without its policy privplan cannot know what to protect. Fix: check the path, or "
            f"pass the YAML text itself."
        )
    if not path.is_file():
        raise PolicyError(
            f"policy path '{path}' is not a file. Why: a policy is one YAML file. Fix: pass the "
            f"path of the .yaml file."
        )
    return path.read_text(encoding="utf-8"), str(path)


def load_strict_yaml(text: str) -> Any:
    """YAML as privplan reads its own files (policies, report specs): duplicate keys refused, a
    syntax error naming the line (a :class:`PolicyError`)."""
    return _load_yaml(text)


def _load_yaml(text: str) -> Any:
    """Parse with duplicate keys refused; a syntax error names the line and shows it."""
    lines = text.splitlines()

    def show(mark: Any) -> str:
        src = lines[mark.line].strip() if mark.line < len(lines) else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: `{src}`"

    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        problem_mark = getattr(e, "problem_mark", None)
        context_mark = getattr(e, "context_mark", None)
        where = f" at {show(problem_mark)}" if problem_mark is not None else ""
        detail = getattr(e, "problem", None) or str(e)
        context = getattr(e, "context", None)
        if (
            context
            and context_mark is not None
            and (problem_mark is None or context_mark.line != problem_mark.line)
        ):
            detail += f"; {context} started at {show(context_mark)}"
        raise PolicyError(
            f"the YAML does not parse{where} ({detail}). Why: privplan needs the whole policy "
            f"to know what to protect. Fix: check the indentation, colons and brackets near "
            f"that line; quote values that contain ': ' or '#'."
        ) from None


# --------------------------------------------------------------------------------------------
# SmartNoise SQL metadata
# --------------------------------------------------------------------------------------------

_SN_TYPES = {
    "int": "int",
    "float": "float",
    "string": "str",
    "boolean": "bool",
    "datetime": "timestamp",
}
_SN_IGNORED_OPTIONS = {
    "sample_max_ids": "privplan keeps at most max_rows_per_unit rows per unit deterministically",
    "censor_dims": "privplan releases group keys only from public_values or through DP "
    "partition selection",
    "clamp_counts": "privplan post-processes noisy counts itself",
    "clamp_columns": "privplan always clamps values to the declared bounds",
    "use_dpsu": "privplan chooses its own partition selection",
}
_SN_OPTIONS = ("rows", "rows_exact", "row_privacy", "max_ids", *_SN_IGNORED_OPTIONS)
_SN_COLUMN_KEYS = (
    "type",
    "lower",
    "upper",
    "nullable",
    "private_id",
    "missing_value",
    "sensitivity",
    "card",
)
_SN_IGNORED_COLUMN_KEYS = {
    "missing_value": "privplan keeps NULLs as NULL (three-valued logic)",
    "sensitivity": "privplan derives sensitivity from lower/upper",
    "card": "privplan uses public_values or DP partition selection for group keys",
}


def _parse_smartnoise(doc: object, label: str) -> Policy:
    loc = _Loc()
    example = (
        "MyDatabase: {MySchema: {MyTable: {max_ids: 1, user_id: {type: int, private_id: true}}}}"
    )
    doc = _mapping(doc, loc, "SmartNoise metadata", example)
    notes: list[str] = []
    collections = [k for k in doc if k != "engine"]
    if "engine" in doc:
        notes.append(
            f"SmartNoise `engine: {doc['engine']}` ignored: privplan uses the session's engine."
        )
    if len(collections) != 1:
        _fail(
            loc,
            f"SmartNoise metadata must hold exactly one collection, found "
            f"{len(collections)} ({', '.join(map(str, collections)) or 'none'})",
            "each file describes one database.",
            f"write e.g. `{example}`.",
        )
    coll = collections[0]
    cloc = loc.key(coll)
    schemas = _mapping(doc[coll], cloc, f"collection '{coll}'", example)
    tables: dict[str, TablePolicy] = {}
    for skey, sraw in schemas.items():
        sloc = cloc.key(skey)
        tmap = _mapping(sraw, sloc, f"schema '{skey}'", "MySchema: {MyTable: {...}}")
        for tkey, traw in tmap.items():
            tloc = sloc.key(tkey)
            name = _name(tkey, tloc, "table")
            if name in tables:
                _fail(
                    tloc,
                    f"table '{name}' appears in two schemas",
                    "privplan keys tables by name, so the two would share one protection.",
                    "rename one of them, or split the metadata into two files.",
                )
            schema = str(skey) if skey not in (None, "") else None
            tables[name] = _smartnoise_table(name, schema, traw, tloc, notes)
    if not tables:
        _fail(
            cloc,
            "the SmartNoise metadata declares no tables",
            "privplan reads only tables the policy declares.",
            f"write e.g. `{example}`.",
        )
    return Policy(tables, tuple(notes))


def _smartnoise_table(
    name: str, schema: str | None, raw: object, loc: _Loc, notes: list[str]
) -> TablePolicy:
    qname = f"{schema}.{name}" if schema else name
    tloc = replace(loc, table=name)
    raw = _mapping(
        raw,
        tloc,
        f"table '{name}'",
        f"{name}: {{row_privacy: true, age: {{type: int, lower: 0, upper: 100}}}}",
    )
    options = {k: v for k, v in raw.items() if not isinstance(v, Mapping)}
    for k, v in options.items():
        if k not in _SN_OPTIONS:
            _fail(
                tloc.key(k),
                f"unknown SmartNoise table option '{k}'",
                _WHY_UNKNOWN_KEY,
                f"{_suggest(str(k), _SN_OPTIONS)}Valid options: {', '.join(_SN_OPTIONS)}; "
                f"a column must be a mapping such as `{k}: {{type: int}}`.",
            )
        if k in _SN_IGNORED_OPTIONS:
            notes.append(
                f"{qname}: SmartNoise option `{k}: {v}` ignored: {_SN_IGNORED_OPTIONS[k]}."
            )

    row_privacy = _flag(options, "row_privacy", False, tloc)
    max_ids = None
    if "max_ids" in options:
        max_ids = _positive_int(
            options["max_ids"],
            tloc.key("max_ids"),
            "max_ids",
            "max_ids bounds the rows per privacy unit, which the sensitivity is scaled by.",
        )
    rows = None
    for k in ("rows", "rows_exact"):  # rows_exact wins: it is the exact public size
        if options.get(k) is not None:
            rows = _positive_int(
                options[k], tloc.key(k), f"`{k}`", "it is the public size of the table.", minimum=0
            )

    columns: dict[str, Any] = {}
    private_ids: list[str] = []
    for ckey, craw in raw.items():
        if ckey in options:
            continue
        cloc = tloc.key(ckey)
        cname = _name(ckey, cloc, "column")
        cloc = replace(cloc, column=cname)
        _check_keys(craw, _SN_COLUMN_KEYS, cloc, f"SmartNoise column '{cname}'")
        col = dict(craw)
        t = col.get("type")
        if t == "unknown":
            notes.append(
                f"{qname}.{cname}: SmartNoise column of type unknown skipped: it cannot be queried."
            )
            continue
        if t not in _SN_TYPES:
            _fail(
                cloc.key("type"),
                f"unknown SmartNoise column type {t!r}",
                _WHY_TYPE,
                f"{_suggest(str(t), list(_SN_TYPES))}Valid types: {', '.join(_SN_TYPES)}.",
            )
        col["type"] = _SN_TYPES[t]
        if _flag(col, "private_id", False, cloc):
            private_ids.append(cname)
        col.pop("private_id", None)
        for k, reason in _SN_IGNORED_COLUMN_KEYS.items():
            if k in col:
                notes.append(f"{qname}.{cname}: SmartNoise `{k}: {col.pop(k)}` ignored: {reason}.")
        columns[ckey] = col  # duplicates (by lower-cased name) are refused by _parse_table

    if len(private_ids) > 1:
        _fail(
            tloc,
            f"several private_id columns ({', '.join(private_ids)})",
            _WHY_UNIT + " privplan supports a single column as the privacy unit.",
            "keep `private_id: true` on the one column that identifies a person.",
        )
    if row_privacy and private_ids:
        _fail(
            tloc.key("row_privacy"),
            f"row_privacy is true but column '{private_ids[0]}' is a private_id",
            _WHY_UNIT + " Row privacy protects single rows, a private_id "
            "protects everything one person contributed; the two contradict.",
            "remove `row_privacy: true` to protect each person, or remove `private_id: true` "
            "if each row is one person.",
        )
    table: dict[str, Any] = {"columns": columns}
    if private_ids:
        table["privacy_unit"] = private_ids[0]
        table["max_rows_per_unit"] = 1 if max_ids is None else max_ids
    elif row_privacy:
        if max_ids is not None and max_ids != 1:
            _fail(
                tloc.key("max_ids"),
                f"max_ids is {max_ids} but row_privacy is true",
                "with row privacy each privacy unit is one row.",
                "remove max_ids, or mark the person-identifying column `private_id: true` "
                "instead of row_privacy.",
            )
    else:
        _fail(
            tloc,
            "the table has neither `row_privacy: true` nor a `private_id: true` column",
            _WHY_UNIT + " SmartNoise cannot answer on such a table either.",
            "add `row_privacy: true` if each row is one person, or `private_id: true` on the "
            "column identifying a person.",
        )
    if rows is not None:
        table["rows"] = rows
    if schema is not None:
        table["schema"] = schema
    return _parse_table(name, table, loc, col_loc=lambda c: loc.key(c))
