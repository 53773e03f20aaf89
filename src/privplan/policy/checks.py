"""Where a policy setting sits and the checks every input format shares.

A :class:`_Loc` is the YAML key path plus the table and column a value belongs to; every refusal
goes through :func:`_fail`, which names that location, what is wrong, why it matters for privacy
and how to fix it. The small readers here (known keys, names, mappings, flags, positive integers,
optional strings) and the shared "why" texts are used by both privplan's own format and the
SmartNoise metadata reader, so a mistake reads the same whichever format it is made in.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from privplan.errors import PolicyError

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
    name = key.strip().lower()
    if name.startswith("__"):
        _fail(
            loc,
            f"{what} name {key!r} starts with two underscores",
            "privplan's engine statements name their inner columns and relations so "
            "(`__privplan_order`, `__rn`, `__k`…); a column of that name could be read in "
            "their place.",
            "rename it without the leading underscores (in the data, or in a `source:` "
            "query of the table that selects it under another name).",
        )
    return name


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
