"""privplan's own policy format (YAML, or the dict it parses to): tables and the whole policy.

Every key is checked up front: an unknown or mistyped setting, a column without a type, bounds
that contradict each other, a private table without a privacy unit or a row limit — each is
refused with a :class:`PolicyError` naming the ``table.column`` and key path. A silently ignored
typo would mean a policy that protects less than its author believes. The SmartNoise reader
translates its metadata into this format and validates it here too. One column's settings are
read by :mod:`privplan.policy.native_columns`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, cast

from privplan.accounting.model import Neighbourhood
from privplan.policy.checks import (
    _WHY_UNIT,
    _check_keys,
    _fail,
    _flag,
    _Loc,
    _mapping,
    _name,
    _optional_str,
    _positive_int,
    _suggest,
)
from privplan.policy.model import NEIGHBOURHOODS, ColumnPolicy, TablePolicy
from privplan.policy.native_columns import _parse_column

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
    columns = _parse_columns(name, raw, tloc, col_loc, public=public)

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
        _refuse_private_keys(name, raw, tloc)
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
    unit = _privacy_unit(name, raw, columns, tloc)
    neighbourhood = _neighbourhood(raw, tloc)
    max_rows = _max_rows_per_unit(raw, unit, tloc)

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


def _parse_columns(
    name: str,
    raw: Mapping[Any, Any],
    tloc: _Loc,
    col_loc: Callable[[str], _Loc],
    *,
    public: bool,
) -> dict[str, ColumnPolicy]:
    """The columns of table ``name`` by lower-cased name; a name declared twice is refused."""
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
    return columns


def _refuse_private_keys(name: str, raw: Mapping[Any, Any], tloc: _Loc) -> None:
    """A public table may not carry privacy settings."""
    for k in _PRIVATE_ONLY_KEYS:
        if k in raw:
            _fail(
                tloc.key(k),
                f"public table '{name}' sets `{k}`",
                "a public table is not protected at all, so privacy settings on it are "
                "contradictory and suggest the table holds personal data.",
                f"remove `{k}`, or remove `public: true` to make the table private.",
            )


def _privacy_unit(
    name: str, raw: Mapping[Any, Any], columns: Mapping[str, ColumnPolicy], tloc: _Loc
) -> str:
    """``"row"`` or the lower-cased name of a declared column identifying a privacy unit."""
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
    return unit


def _neighbourhood(raw: Mapping[Any, Any], tloc: _Loc) -> Neighbourhood:
    """The declared neighbourhood (default ``add_remove``)."""
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
    return cast(Neighbourhood, nb)


def _max_rows_per_unit(raw: Mapping[Any, Any], unit: str, tloc: _Loc) -> int:
    """The rows one privacy unit may contribute: 1 for a row unit, required for a column unit."""
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
    return max_rows


def _parse_policy(d: object, loc: _Loc) -> tuple[dict[str, TablePolicy], tuple[str, ...]]:
    """The tables and notes of a policy given as a dict (:class:`Policy` is built from them by
    its constructors, which sit above this reader)."""
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
    return tables, tuple(notes)
