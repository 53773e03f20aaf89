"""privplan's own policy format: one column's settings, validated into a ColumnPolicy.

A column needs a known type (common aliases such as ``integer`` or ``varchar`` are suggested,
never accepted silently); its bounds must be of that type and in order; its ``public_values``
must lie within them; ``unit_level`` makes no sense on a public table; and a ``resolution`` must
fit the bounds. The table reader (:mod:`privplan.policy.native`) calls it for every column.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, cast

from privplan.policy.checks import (
    _WHY_BOUNDS,
    _WHY_PUBLIC_VALUES,
    _WHY_TYPE,
    _check_keys,
    _fail,
    _flag,
    _Loc,
    _mapping,
    _suggest,
)
from privplan.policy.model import ColumnPolicy
from privplan.policy.values import (
    _ORDERED_TYPES,
    COLUMN_TYPES,
    ColumnType,
    _check_grid,
    _coerce,
    _resolution,
)

_COLUMN_KEYS = ("type", "lower", "upper", "public_values", "unit_level", "nullable", "resolution")

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


def _parse_column(name: str, raw: object, loc: _Loc, *, public: bool) -> ColumnPolicy:
    """Validate one column's settings (``public``: its table is public), in the order a reader
    of the policy would check them: type, bounds, public values, flags, resolution."""
    if isinstance(raw, str):  # shorthand `age: int`
        raw = {"type": raw}
    raw = _mapping(raw, loc, f"column '{name}'", f"{name}: {{type: int, lower: 0, upper: 100}}")
    _check_keys(raw, _COLUMN_KEYS, loc, f"column '{name}'")
    ctype = _column_type(name, raw, loc)
    lower, upper = _column_bounds(raw, ctype, loc)
    public_values = _public_values(raw, ctype, lower, upper, loc)

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
    resolution = _column_resolution(raw, ctype, lower, upper, loc)

    return ColumnPolicy(name, ctype, lower, upper, public_values, unit_level, nullable, resolution)


def _column_type(name: str, raw: Mapping[Any, Any], loc: _Loc) -> ColumnType:
    """The declared `type` of column ``name``, refused if missing or unknown."""
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
    return cast(ColumnType, t)


def _column_bounds(raw: Mapping[Any, Any], ctype: ColumnType, loc: _Loc) -> tuple[Any, Any]:
    """``(lower, upper)`` typed per column (each ``None`` if not declared), in order."""
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
    return lower, upper


_PLAIN: dict[str, type] = {"str": str, "int": int, "bool": bool}
"""The Python type _coerce returns unchanged for a column type (exactly that type: a subclass,
or a bool for an int column, takes the value-by-value path and its messages)."""


def _public_values(
    raw: Mapping[Any, Any], ctype: ColumnType, lower: Any, upper: Any, loc: _Loc
) -> tuple[Any, ...] | None:
    """The declared domain of values, typed, sorted and deduplicated (``None`` if not declared);
    each must lie within the bounds."""
    if "public_values" not in raw:
        return None
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
    kinds = set(map(type, pv))
    if kinds == {_PLAIN.get(ctype)}:  # every value already of the column's type: taken as is
        values = set(pv)  # (what _coerce returns for each; one pass in C for 100,000 values)
    else:
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
    return tuple(sorted(values))


def _column_resolution(
    raw: Mapping[Any, Any], ctype: ColumnType, lower: Any, upper: Any, loc: _Loc
) -> Fraction | None:
    """The grid step of float sums (``None`` if not declared), checked against the bounds."""
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
    return resolution
