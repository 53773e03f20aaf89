"""SmartNoise SQL metadata as a privplan policy.

Translates SmartNoise's collection → schema → table → options-and-columns YAML into privplan's
own format (``row_privacy`` / ``private_id`` → the privacy unit, ``max_ids`` → the row limit,
SmartNoise types → column types) and validates it with the native reader. Options privplan does
not use are recorded as notes rather than dropped silently; options it does not know are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from privplan.policy.checks import (
    _WHY_TYPE,
    _WHY_UNIT,
    _WHY_UNKNOWN_KEY,
    _check_keys,
    _fail,
    _flag,
    _Loc,
    _mapping,
    _name,
    _positive_int,
    _suggest,
)
from privplan.policy.model import TablePolicy
from privplan.policy.native import _parse_table

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


def _parse_smartnoise(
    doc: object, label: str
) -> tuple[dict[str, TablePolicy], tuple[str, ...]]:
    """The tables and notes of SmartNoise metadata (:class:`Policy` is built from them by
    :meth:`Policy.from_smartnoise_yaml`)."""
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
    return tables, tuple(notes)


def _smartnoise_table(
    name: str, schema: str | None, raw: object, loc: _Loc, notes: list[str]
) -> TablePolicy:
    """One SmartNoise table translated into privplan's format and validated by it; options
    privplan does not use are added to ``notes``."""
    qname = f"{schema}.{name}" if schema else name
    tloc = replace(loc, table=name)
    raw = _mapping(
        raw,
        tloc,
        f"table '{name}'",
        f"{name}: {{row_privacy: true, age: {{type: int, lower: 0, upper: 100}}}}",
    )
    options = _smartnoise_options(raw, tloc, qname, notes)

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
        _smartnoise_column(ckey, craw, tloc, qname, notes, columns, private_ids)

    table: dict[str, Any] = {"columns": columns}
    table.update(_smartnoise_unit(tloc, row_privacy, private_ids, max_ids))
    if rows is not None:
        table["rows"] = rows
    if schema is not None:
        table["schema"] = schema
    return _parse_table(name, table, loc, col_loc=lambda c: loc.key(c))


def _smartnoise_options(
    raw: Mapping[Any, Any], tloc: _Loc, qname: str, notes: list[str]
) -> dict[Any, Any]:
    """The table's options (its non-mapping entries): unknown ones refused, ignored ones noted."""
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
    return options


def _smartnoise_column(
    ckey: Any,
    craw: Mapping[Any, Any],
    tloc: _Loc,
    qname: str,
    notes: list[str],
    columns: dict[str, Any],
    private_ids: list[str],
) -> None:
    """Add one SmartNoise column to ``columns`` in privplan's format (skipped with a note if
    its type is unknown), and its name to ``private_ids`` if it is marked ``private_id``."""
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
        return
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


def _smartnoise_unit(
    tloc: _Loc, row_privacy: bool, private_ids: list[str], max_ids: int | None
) -> dict[str, Any]:
    """The privacy unit settings in privplan's format: the single ``private_id`` column with
    ``max_ids`` rows, or row privacy; a table with neither (or both) is refused."""
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
    table: dict[str, Any] = {}
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
    return table
