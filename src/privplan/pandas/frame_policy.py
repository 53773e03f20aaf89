"""The policy of a configured frame: column types from pandas dtypes, the data owner's bounds,
public values and overrides checked against the frame's columns, or a whole policy given.

Only column names and dtypes are read here, never values: the policy must not depend on the
data it protects. Column names are matched case-insensitively, as SQL and the policy do, and a
setting for a column the frame does not have is refused rather than silently dropped.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privplan.errors import PolicyError
from privplan.policy import COLUMN_TYPES, Policy

_ORDERED = ("int", "float", "date", "timestamp")


def infer_column_type(dtype: Any) -> str | None:
    """The policy column type of a pandas dtype, or None if privplan cannot infer one.

    int / unsigned / nullable ``Int64`` -> int; float -> float; bool / ``boolean`` -> bool;
    the string dtype (pandas 3 default, any storage) -> str; naive ``datetime64`` -> timestamp;
    pyarrow ``date32``/``date64`` -> date; a categorical takes the type of its categories (its
    categories are *not* used as public values: they usually come from the data). ``object``,
    time-zone-aware datetimes, timedeltas and others give None.

    >>> infer_column_type(pd.Series(["a"]).dtype), infer_column_type(np.dtype("int32"))
    ('str', 'int')
    >>> infer_column_type(np.dtype("datetime64[s]")), infer_column_type(np.dtype("O")) is None
    ('timestamp', True)
    """
    if isinstance(dtype, pd.CategoricalDtype):
        return infer_column_type(dtype.categories.dtype)
    if isinstance(dtype, pd.ArrowDtype):
        import pyarrow as pa

        t = dtype.pyarrow_dtype
        checks = (
            (pa.types.is_boolean, "bool"),
            (pa.types.is_integer, "int"),
            (pa.types.is_floating, "float"),
            (lambda x: pa.types.is_string(x) or pa.types.is_large_string(x)
             or getattr(pa.types, "is_string_view", lambda _: False)(x), "str"),
            (pa.types.is_date, "date"),
            (lambda x: pa.types.is_timestamp(x) and x.tz is None, "timestamp"),
        )
        for check, name in checks:
            if check(t):
                return name
        return None
    if isinstance(dtype, pd.StringDtype):
        return "str"
    if isinstance(dtype, pd.DatetimeTZDtype):
        return None
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if isinstance(dtype, np.dtype) and dtype.kind == "M":
        return "timestamp"
    return None


def _why_uninferred(dtype: Any) -> str:
    if isinstance(dtype, pd.DatetimeTZDtype):
        return ("time-zone-aware timestamps are not supported; convert to naive UTC with "
                "df[col] = df[col].dt.tz_convert('UTC').dt.tz_localize(None) before configuring")
    return (f"privplan cannot infer a policy type from dtype {dtype}; convert the column (e.g. "
            f"df[col].astype('str')) or pass types={{col: 'str'}} (one of "
            f"{', '.join(COLUMN_TYPES)})")


def _plain(v: Any) -> Any:
    """numpy / pandas scalars as the Python values the policy parser expects."""
    if isinstance(v, pd.Timestamp):
        if v.tz is not None:
            v = v.tz_convert("UTC").tz_localize(None)
        return v.to_pydatetime()
    if isinstance(v, np.datetime64):
        return pd.Timestamp(v).to_pydatetime()
    if isinstance(v, np.generic):
        return v.item()
    return v


class _Columns:
    """The frame's column names, matched case-insensitively (as SQL and the policy do)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.names: dict[str, str] = {}
        for c in frame.columns:
            if not isinstance(c, str) or not c.strip():
                raise PolicyError(
                    f"df.dp.configure: column name {c!r} is not a non-empty string. Why: privplan "
                    f"queries columns by name in SQL. Fix: rename it, e.g. "
                    f"df.columns = df.columns.astype(str).")
            key = c.strip().lower()
            if key in self.names:
                raise PolicyError(
                    f"df.dp.configure: columns '{self.names[key]}' and '{c}' differ only in case "
                    f"(or spaces). Why: SQL names are case-insensitive, so a query could not say "
                    f"which one it means. Fix: rename one of them.")
            self.names[key] = c

    def resolve(self, name: object, arg: str) -> str:
        """The lower-case policy name of ``name`` given in argument ``arg``."""
        if not isinstance(name, str):
            raise PolicyError(f"df.dp.configure: {arg} keys must be column names, got {name!r}")
        key = name.strip().lower()
        if key not in self.names:
            close = difflib.get_close_matches(key, list(self.names), n=1, cutoff=0.6)
            hint = f"did you mean '{self.names[close[0]]}'? " if close else ""
            raise PolicyError(
                f"df.dp.configure: {arg} names column '{name}', which this DataFrame does not "
                f"have (columns: {', '.join(self.names.values())}). Why: a setting for a column "
                f"that does not exist would be silently dropped. Fix: {hint}use one of the "
                f"frame's columns.")
        return key


def _policy_from_frame(
    frame: pd.DataFrame,
    table: str,
    *,
    privacy_unit: str,
    neighbourhood: str,
    bounds: Mapping[str, Any] | None,
    public_values: Mapping[str, Any] | None,
    types: Mapping[str, str] | None,
    max_rows_per_unit: int | None,
    max_groups_per_unit: int | None,
    max_rows_per_group_per_unit: int | None = None,
) -> Policy:
    cols = _Columns(frame)
    for arg, value in (("bounds", bounds), ("public_values", public_values), ("types", types)):
        if value is not None and not isinstance(value, Mapping):
            raise PolicyError(
                f"df.dp.configure: {arg} must be a dict keyed by column name, got "
                f"{type(value).__name__}; e.g. bounds={{'age': (0, 100)}}")
    given_types = {cols.resolve(k, "types"): v for k, v in (types or {}).items()}
    given_bounds = {cols.resolve(k, "bounds"): v for k, v in (bounds or {}).items()}
    given_public = {cols.resolve(k, "public_values"): v for k, v in (public_values or {}).items()}
    unit = privacy_unit
    if not isinstance(unit, str):
        raise PolicyError(
            f"df.dp.configure: privacy_unit must be 'row' or a column name, got {unit!r}")
    if unit.strip().lower() != "row":
        unit = cols.resolve(unit, "privacy_unit")

    columns: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for key, original in cols.names.items():
        dtype = frame[original].dtype
        ctype = _column_type(original, dtype, given_types.get(key))
        if ctype is None:
            needed = [arg for arg, d in (("bounds", given_bounds), ("public_values", given_public))
                      if key in d] + (["privacy_unit"] if unit == key else [])
            if needed:
                raise PolicyError(
                    f"df.dp.configure: column '{original}' is named in {', '.join(needed)} but "
                    f"its type is unknown: {_why_uninferred(dtype)}.")
            notes.append(f"column '{original}' (dtype {dtype}) is not declared, so it cannot be "
                         f"queried: {_why_uninferred(dtype)}.")
            continue
        col: dict[str, Any] = {"type": ctype}
        if key in given_bounds:
            col["lower"], col["upper"] = _column_bounds(original, dtype, ctype, given_bounds[key])
        if key in given_public:
            col["public_values"] = _column_public_values(original, given_public[key])
        columns[key] = col

    spec: dict[str, Any] = {"privacy_unit": unit, "neighbourhood": neighbourhood,
                            "columns": columns}
    if max_rows_per_unit is not None:
        spec["max_rows_per_unit"] = max_rows_per_unit
    if max_groups_per_unit is not None:
        spec["max_groups_per_unit"] = max_groups_per_unit
    if max_rows_per_group_per_unit is not None:
        spec["max_rows_per_group_per_unit"] = max_rows_per_group_per_unit
    if not columns:
        raise PolicyError(
            "df.dp.configure: no column of this DataFrame has a type privplan can infer "
            f"({'; '.join(notes)}). Fix: pass types={{col: 'int' | 'str' | ...}}.")
    doc: dict[str, Any] = {"tables": {table: spec}}
    if notes:
        doc["notes"] = notes
    try:
        return Policy.from_dict(doc)
    except PolicyError as err:
        raise PolicyError(f"df.dp.configure: {err}") from None


def _column_type(original: str, dtype: Any, ctype: str | None) -> str | None:
    """The policy type of a column: the one given in ``types=`` (checked), else inferred."""
    if ctype is not None:
        if ctype not in COLUMN_TYPES:
            raise PolicyError(
                f"df.dp.configure: types['{original}'] is {ctype!r}, not a policy type. Why: "
                f"privplan derives regions and sensitivities from the type. Fix: use one of "
                f"{', '.join(COLUMN_TYPES)}.")
        return ctype
    return infer_column_type(dtype)


def _column_bounds(original: str, dtype: Any, ctype: str, pair: Any) -> tuple[Any, Any]:
    """The (lower, upper) given in ``bounds=`` for one column, checked, as plain values."""
    if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
        raise PolicyError(
            f"df.dp.configure: bounds['{original}'] must be a pair (lower, upper), got "
            f"{pair!r}. Fix: e.g. bounds={{'{original}': (0, 100)}}.")
    if ctype not in _ORDERED:
        raise PolicyError(
            f"df.dp.configure: bounds given for column '{original}', which is a {ctype} "
            f"column (dtype {dtype}). Why: bounds clamp numbers, dates and timestamps; a "
            f"{ctype} has no range to clamp. Fix: remove it from bounds; to declare its "
            f"possible values, use public_values={{'{original}': [...]}}.")
    lo, hi = (_plain(v) for v in pair)
    try:
        swapped = lo is not None and hi is not None and lo > hi
    except TypeError:
        swapped = False  # mixed types: the policy parser says what is wrong
    if swapped:
        raise PolicyError(
            f"df.dp.configure: bounds['{original}'] = ({lo}, {hi}) has lower > upper. "
            f"Why: privplan clamps values to the bounds and scales the noise to their "
            f"width. Fix: bounds={{'{original}': ({hi}, {lo})}}.")
    return lo, hi


def _column_public_values(original: str, values: Any) -> list[Any]:
    """The values given in ``public_values=`` for one column, checked, as plain values."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise PolicyError(
            f"df.dp.configure: public_values['{original}'] must be a list of values, got "
            f"{values!r}. Fix: e.g. public_values={{'{original}': ['A', 'B']}}.")
    return [_plain(v) for v in values]


def _given_policy(policy: Any, table: str | None, frame: pd.DataFrame) -> tuple[Policy, str]:
    if isinstance(policy, Policy):
        pol = policy
    elif isinstance(policy, Mapping):
        pol = Policy.from_dict(policy)
    elif isinstance(policy, (str, Path)):
        pol = Policy.from_yaml(policy)
    else:
        raise PolicyError("df.dp.configure: policy must be a pp.Policy, a dict, or a YAML path")
    private = pol.private_tables()
    if table is None:
        if len(private) != 1:
            raise PolicyError(
                f"df.dp.configure: the policy declares {len(private)} private tables "
                f"({', '.join(t.name for t in private) or 'none'}); pass table='<name>' to say "
                f"which one this DataFrame is.")
        tpol = private[0]
    else:
        tpol = pol.table(table)
        if tpol.public:
            raise PolicyError(
                f"df.dp.configure: table '{tpol.name}' is public in the policy. Why: a public "
                f"table is not protected, so there is nothing to charge. Fix: name a private "
                f"table, or query the frame with plain pandas.")
    cols = _Columns(frame)
    missing = [c for c in tpol.columns if c not in cols.names]
    if missing:
        raise PolicyError(
            f"df.dp.configure: the policy's table '{tpol.name}' declares column(s) "
            f"{', '.join(missing)}, which this DataFrame does not have (columns: "
            f"{', '.join(cols.names.values())}). Fix: the policy or the frame.")
    return pol, tpol.name

