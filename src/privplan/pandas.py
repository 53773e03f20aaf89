"""The pandas accessor ``df.dp``: DP answers about a DataFrame, charged to the data's own budget.

``import privplan`` registers ``df.dp`` on every DataFrame (as soon as pandas is imported).
The data owner configures a frame once; from then on ``df.dp`` answers SQL and pandas-shaped
questions through the same planner, accountant and DuckDB engine as :func:`privplan.connect`.
The frame is registered with DuckDB zero-copy; only one row per group comes back to Python.

>>> import pandas as pd
>>> import privplan as pp
>>> from privplan.testing import noise_disabled
>>> visits = pd.DataFrame({
...     "age": [4, 17, 25, 31, 47, 62, 70, 88],
...     "hospital": ["A", "B", "A", "B", "A", "B", "A", "B"],
...     "cost": [120.0, 80.5, 300.0, 45.0, 980.0, 1500.0, 60.0, 210.0]})
>>> visits.dp.configure(bounds={"age": (0, 100), "cost": (0, 2000)},
...                     public_values={"hospital": ["A", "B"]}, budget=pp.PureDP(1))
>>> with noise_disabled():  # TESTS ONLY: exact answers, so that this example is reproducible
...     visits.dp.count(by="hospital", epsilon=0.5)
  hospital  count  count_low  count_high
0        A      4       -2.0        10.0
1        B      4       -2.0        10.0

Each answer carries what it added to the data's composed total; a ``where`` view passes its
filter to the accountant, so queries over disjoint filters compose in parallel (max, not sum):

>>> kids, adults = visits.dp.where("age < 18"), visits.dp.where("age >= 18")
>>> kids.sum("cost", epsilon=0.5).attrs["privplan_cost"]    # a child is also in the count
PureDP(epsilon=0.5)
>>> adults.sum("cost", epsilon=0.5).attrs["privplan_cost"]  # disjoint from kids: no extra cost
PureDP(epsilon=0.0)
>>> visits.dp.spent(), visits.dp.remaining()
(PureDP(epsilon=1.0), PureDP(epsilon=0.0))

The budget belongs to the data, not to the Python object: a copy, slice or mask of the frame
shares its budget and can be neither queried nor configured afresh:

>>> visits[visits.age < 30].dp.count(epsilon=0.1)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privplan.errors.PolicyError: this DataFrame was derived with pandas ... from a DataFrame ...
>>> visits.copy().dp.spent()
PureDP(epsilon=1.0)

A frame holding the same rows is recognised by their content, even without the marker:

>>> rebuilt = pd.DataFrame(visits.to_dict())  # no marker, no shared memory: the same rows
>>> rebuilt.dp.configure(budget=pp.PureDP(1))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privplan.errors.PolicyError: df.dp.configure: this DataFrame holds the same rows as a DataFrame ...

Threat model
------------
**Who configures.** The *data owner* calls ``df.dp.configure(...)``. It declares that this frame,
as it is at that moment, is a protected dataset with this policy and this total budget; privplan
builds the policy from the frame's dtypes and column names only (never from its values). It
reads the values once, to fingerprint the rows (below); the fingerprint stays in this process
and is never released. A configuration is final: the same frame cannot be configured again.

**What an analyst holding ``df.dp`` (or a ``where`` view) can do.** Ask ``sql``/``count``/
``sum``/``mean``/``explain``/``spent``/``remaining``. Every answer is planned from the query text
and the policy, charged before release against the frame's one ledger (general composition
theorem), and refused once the composed total would exceed the budget.

**What is enforced.**

* One budget per dataset. A second ``configure`` of the frame is refused (it would start a
  fresh budget for the same people).
* Frames derived from a configured frame share its budget and are refused. pandas propagates
  ``df.attrs`` (key ``"privplan.dp"``, a random marker) through copies, slices, masks,
  ``query``, ``head``/``sample``, column selection, ``dropna``/``assign``/``rename``/``astype``/
  ``sort_values``/``reset_index``, self-``merge``/``concat``, ``groupby`` results, ``melt``,
  ``T`` and more (checked in the tests for pandas 3). Such a frame reports the shared
  ``spent()``/``remaining()`` but cannot be configured or queried: privplan cannot see how it
  was derived, and a derivation that looks at other rows or repeats rows
  (``df[df.age > df.age.mean()]``, ``df.sort_values(...).head(n)``, ``pd.concat([df, df])``, a
  groupby result) lets one person change many of its rows, so answering it as if each row were
  one person would under-charge. Filter the configured frame with ``df.dp.where(...)`` instead:
  the accountant sees the predicate (each row is tested on its own), and disjoint filters
  compose in parallel.
* ``pd.DataFrame(df)`` drops ``attrs`` in pandas 3 but shares the configured frame's memory;
  ``configure`` refuses any frame whose column buffers overlap a configured frame's.
* Frames holding the same rows are refused, however they were made. ``configure`` refuses a
  frame whose content fingerprint equals that of a frame configured earlier in this process,
  alive, closed or garbage-collected (the budget belongs to the data, not to the object): a
  deep copy with ``attrs`` cleared, ``pd.DataFrame(df.to_dict())``, the same CSV or Parquet
  file read again with the same column types, the rows in another order (``sample(frac=1)``,
  ``sort_values``) under any index, the columns in another order or with names in another
  case, lossless casts (``astype`` between integer widths, integers to floats, ``bool`` to 0/1,
  nullable dtypes, any string storage, categoricals, any timestamp unit). The refusal spends
  nothing and changes nothing. One exception keeps one budget: a frame configured with the
  same durable ledger file as the first configuration of its rows (``ledger=`` the same path)
  is allowed, since it charges that ledger's single budget.
* **The fingerprint** is the multiset of the frame's rows. Column names are taken as SQL sees
  them (stripped, lower case) and sorted, which fixes the column order; each row's values are
  hashed canonically in that order by DuckDB (a number equal to an integer alike in every
  integer or float width, ``bool`` as 0/1, NaN missing like ``<NA>``, ``-0.0`` as ``0.0``; a
  string alike in every storage; a timestamp at microsecond precision whatever its unit); each
  row hash is salted twice and mixed again, and summed exactly over the rows in two lanes. So
  row order, the index and the Python object do not matter, and a repeated row counts twice.
  Two different sets of rows collide only by a 64-bit hash coincidence (about 2^-64 per
  differing row; a crafted collision could only refuse a configuration, never allow one). A
  frame with no rows holds no one and is not fingerprinted. Cost: one zero-copy DuckDB scan
  per ``configure``, about 0.1 s per million rows of five columns.
* Answers come from a zero-copy snapshot taken by ``configure`` (pandas copy-on-write): editing
  the frame in place afterwards does not change what is answered.
* ``where`` predicates are parsed and planned like any WHERE clause: one expression, no
  subqueries or aggregates; a predicate the analyzer does not understand gets the conservative
  region (the whole domain), so it is charged as unfiltered.

**What is out of scope.** Python cannot hide an object from code in the same process: whoever
holds ``df`` (or ``df.dp``) can read raw values (``df["age"].mean()``, the accessor's internals)
and so already has the raw data; privplan does not protect against that analyst. Recognition
by content has a precise limit: a frame with the *same rows* (in any order, under any index, in
any copy, with the casts listed above) is recognised; a frame with *different rows* is a
different dataset to privplan, and configuring it is the data owner's act, like opening a
second database that holds the same people. Different rows include a subset (``df.iloc[1:]``,
a filter, a column dropped), edited values, added or repeated rows, a column added or renamed,
a lossy cast (float to int, integers beyond 2^53 to float), values re-typed (dates or numbers
read back as text), and ``pd.concat``/``merge`` with an unconfigured frame. So a subset or an
edited copy stripped of its marker (``df.attrs.pop("privplan.dp")``) is not recognised.
Fingerprints live in this process only. To give a dataset one budget across processes,
configure it with a durable ledger (``ledger="budget.sqlite"``). To keep an untrusted analyst
away from the raw rows, run their code in another process and give them only privplan's
answers.
"""

from __future__ import annotations

import atexit
import contextlib
import difflib
import secrets
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError

from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.errors import ParseError, PolicyError, UnsupportedQueryError
from privplan.explain import Explanation
from privplan.policy import COLUMN_TYPES, Policy
from privplan.result import Result
from privplan.session import Session

__all__ = ["ATTRS_KEY", "DPAccessor", "DPView", "infer_column_type"]

ATTRS_KEY = "privplan.dp"
"""The ``df.attrs`` key holding the marker of the configured frame (pandas propagates it)."""

DEFAULT_TABLE = "df"
_KINDS = (PureDP, ApproxDP, ZCDP, GDP)
_ORDERED = ("int", "float", "date", "timestamp")

_lock = threading.RLock()
_owners: dict[int, _State] = {}  # id(configured frame) -> its state (entry removed at frame death)
_by_marker: weakref.WeakValueDictionary[str, _State] = weakref.WeakValueDictionary()


# ----------------------------------------------------------------------------------------------
# Per-dataset state
# ----------------------------------------------------------------------------------------------


class _State:
    """One configured dataset: its session (policy, engine, ledger), table name and snapshot.

    Held strongly only by the registry entry of the configured frame (and by ``where`` views);
    it dies with the frame. The session holds the zero-copy snapshot, not the frame itself, so
    no reference cycle runs through DuckDB (which the garbage collector could not break).
    """

    def __init__(self, frame: pd.DataFrame, session: Session, table: str, marker: str,
                 snapshot: pd.DataFrame) -> None:
        self.frame = weakref.ref(frame)
        self.session = session
        self.table = table
        self.marker = marker
        self.snapshot = snapshot
        self.lock = threading.RLock()  # one query at a time on this dataset's connection
        self.closed = False
        self._final_spent: Any = None

    def _open_session(self) -> Session:
        if self.closed:
            raise PolicyError(
                f"the DP session of table '{self.table}' was closed with df.dp.close(); nothing "
                "more can be answered about this frame. Its budget stays spent: the frame cannot "
                "be configured again.")
        return self.session

    def sql(self, sql: str, budget: Mapping[str, Any]) -> Result:
        with self.lock:
            return self._open_session().sql(sql, **budget)

    def explain(self, sql: str, budget: Mapping[str, Any]) -> Explanation:
        with self.lock:
            return self._open_session().explain(sql, **budget)

    def spent(self) -> Any:
        with self.lock:
            return self._final_spent if self.closed else self.session.spent()

    def remaining(self) -> Any:
        return self.session.budget - self.spent()

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self._final_spent = self.session.spent()
                self.closed = True
                self.session.close()


def _close_session(session: Session) -> None:
    with contextlib.suppress(Exception):  # closing twice, or at interpreter exit
        session.close()


def _forget(key: int, state_ref: weakref.ref[_State]) -> None:
    """The configured frame died: drop its registry entry (its state dies with it)."""
    with _lock:
        state = _owners.get(key)
        if state is not None and state is state_ref():
            del _owners[key]


def _owner_state(frame: pd.DataFrame) -> _State | None:
    state = _owners.get(id(frame))
    if state is not None and state.frame() is frame:
        return state
    return None


def _marker(frame: pd.DataFrame) -> str | None:
    value = frame.attrs.get(ATTRS_KEY)
    return None if value is None else str(value)


# ----------------------------------------------------------------------------------------------
# Messages
# ----------------------------------------------------------------------------------------------

_WHY_DERIVED = (
    "Why: privplan cannot see how it was derived, and a derivation that looks at other rows or "
    "repeats rows (df[df.age > df.age.mean()], df.sort_values(...).head(n), pd.concat([df, df]), "
    "a groupby result) lets one person change many of its rows, so answering it as if each row "
    "were one person would under-charge; configuring it would give the same people a second "
    "budget."
)


def _derived_message(state: _State | None, what: str) -> str:
    if state is None:
        return (
            f"this DataFrame carries the marker of a frame configured for DP (df.attrs"
            f"['{ATTRS_KEY}']), but that frame and its budget no longer exist in this process "
            f"(it was garbage-collected, or this frame was unpickled / read back from a file "
            f"that kept the marker), so it cannot be {what}. {_WHY_DERIVED} Fix: if you are the "
            f"data owner and this frame is the whole protected dataset, remove the marker "
            f"(df.attrs.pop('{ATTRS_KEY}')) and configure it with the durable ledger that holds "
            f"its budget (ledger='budget.sqlite'); a fresh in-memory ledger would start a second "
            f"budget for the same people."
        )
    base = state.table
    spent = state.spent().describe()
    total = state.session.budget.describe()
    return (
        f"this DataFrame was derived with pandas (a copy, slice, mask, merge, ...) from a "
        f"DataFrame configured for DP (table '{base}'); it shares that frame's budget "
        f"(spent {spent} of {total}) and cannot be {what}. {_WHY_DERIVED} Fix: ask the "
        f"configured frame and filter with .dp.where, e.g. df.dp.where(\"age < 30\").count("
        f"epsilon=0.1): the accountant then sees the filter, and disjoint filters compose in "
        f"parallel. To protect prepared (cleaned, filtered) data, prepare it before configuring."
    )


_NOT_CONFIGURED = (
    "this DataFrame is not configured for differential privacy, so df.dp cannot answer about it "
    "yet. Why: privplan needs a policy (column types, bounds, public group keys) and a total "
    "budget before it can release anything. Fix: the data owner calls, once, e.g. "
    "df.dp.configure(bounds={'age': (0, 100)}, public_values={'hospital': ['A', 'B']}, "
    "budget=pp.PureDP(1.0))."
)


# ----------------------------------------------------------------------------------------------
# Policy from a frame
# ----------------------------------------------------------------------------------------------


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
        ctype = given_types.get(key)
        if ctype is not None:
            if ctype not in COLUMN_TYPES:
                raise PolicyError(
                    f"df.dp.configure: types['{original}'] is {ctype!r}, not a policy type. Why: "
                    f"privplan derives regions and sensitivities from the type. Fix: use one of "
                    f"{', '.join(COLUMN_TYPES)}.")
        else:
            ctype = infer_column_type(dtype)
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
            pair = given_bounds[key]
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
            col["lower"], col["upper"] = lo, hi
        if key in given_public:
            values = given_public[key]
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                raise PolicyError(
                    f"df.dp.configure: public_values['{original}'] must be a list of values, got "
                    f"{values!r}. Fix: e.g. public_values={{'{original}': ['A', 'B']}}.")
            col["public_values"] = [_plain(v) for v in values]
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


# ----------------------------------------------------------------------------------------------
# Memory shared with a configured frame
# ----------------------------------------------------------------------------------------------


def _buffer_ranges(frame: pd.DataFrame) -> list[tuple[int, int]]:
    """Address ranges of the frame's column buffers (numpy, masked, categorical, Arrow).

    Read without copying; a column whose storage is not recognised contributes nothing (the
    check can then miss sharing, never invent it).
    """
    ranges: list[tuple[int, int]] = []
    for i in range(frame.shape[1]):
        # storage that cannot be inspected zero-copy is skipped
        with contextlib.suppress(Exception):
            ranges.extend(_column_ranges(frame.iloc[:, i]))
    return [r for r in ranges if r[1] > r[0]]


def _column_ranges(s: pd.Series) -> list[tuple[int, int]]:
    arr = s.array
    if isinstance(s.dtype, np.dtype):
        return [_np_range(s.to_numpy())]
    if isinstance(arr, pd.arrays.ArrowExtensionArray):
        chunked = arr.__arrow_array__()
        return [(b.address, b.address + b.size)
                for chunk in getattr(chunked, "chunks", [chunked])
                for b in chunk.buffers() if b is not None and b.size]
    if isinstance(arr, pd.Categorical):
        return [_np_range(arr.codes)]
    if isinstance(arr, (pd.arrays.IntegerArray, pd.arrays.FloatingArray,
                        pd.arrays.BooleanArray)):
        return [_np_range(arr._data), _np_range(arr._mask)]
    if isinstance(getattr(arr, "_ndarray", None), np.ndarray):  # e.g. python-backed strings
        return [_np_range(arr._ndarray)]
    return []


def _np_range(a: np.ndarray) -> tuple[int, int]:
    if a.size == 0:
        return (0, 0)
    lo, hi = np.lib.array_utils.byte_bounds(a)
    return (int(lo), int(hi))


def _shares_memory(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    if not a or not b:
        return False
    events = sorted([(lo, hi, 0) for lo, hi in a] + [(lo, hi, 1) for lo, hi in b])
    reach = [0, 0]  # furthest end seen so far from each side
    for lo, hi, side in events:
        if lo < reach[1 - side]:
            return True
        reach[side] = max(reach[side], hi)
    return False


# ----------------------------------------------------------------------------------------------
# The same rows as a configured frame: content fingerprints
# ----------------------------------------------------------------------------------------------

_INT_TYPES = frozenset({"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
                        "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"})
_TIMESTAMP_TYPES = frozenset({"TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"})
_NULL_HASH = "hash(NULL)"  # DuckDB hashes NULL alike whatever its type
_SALTS = (0x243F6A8885A308D3, 0x13198A2E03707344)  # two lanes (digits of pi)


@dataclass(frozen=True)
class _Fingerprint:
    """The content of a frame as privplan sees it: the *multiset* of its rows.

    ``columns`` are the column names as SQL sees them (stripped, lower case), sorted, so column
    order does not matter; ``lanes`` are two exact sums, over the rows, of a differently salted
    64-bit hash of each row's values, so the rows count as a multiset: row order and the index
    do not matter, and a repeated row counts twice. Values are hashed canonically: a number
    equal to an integer hashes alike in every integer or float width (``astype`` between them,
    ``bool`` as 0/1), NaN is missing like ``<NA>``, ``-0.0`` is ``0.0``, a timestamp is compared
    at microsecond precision whatever its unit, and a string alike whatever its storage
    (``str``, ``object``, Arrow, categorical).
    """

    rows: int
    columns: tuple[str, ...]
    lanes: tuple[int, int]


@dataclass(frozen=True)
class _Dataset:
    """What the fingerprint registry remembers of a configured dataset (small; no frame)."""

    table: str
    marker: str
    ledger: str | None  # resolved path of its durable ledger, None for an in-memory one


# fingerprint -> the first configuration of those rows; kept for the life of the process (the
# budget belongs to the data, so it outlives the configured frame object)
_datasets: dict[_Fingerprint, _Dataset] = {}


def _value_hash_sql(column: str, duck_type: str) -> str:
    """A DuckDB expression hashing one column's value canonically (see :class:`_Fingerprint`)."""
    col = _ident(column)
    base = duck_type.split("(")[0].upper()
    if base in _INT_TYPES:
        return f"hash(CAST({col} AS HUGEINT))"
    if base in ("FLOAT", "DOUBLE", "DECIMAL"):
        x = f"CAST({col} AS DOUBLE)"
        return (f"CASE WHEN {x} IS NULL OR isnan({x}) THEN {_NULL_HASH} "
                f"WHEN {x} = trunc({x}) AND abs({x}) < 1e38 THEN hash(CAST({x} AS HUGEINT)) "
                f"ELSE hash({x}) END")
    if base in _TIMESTAMP_TYPES:
        return f"hash(CAST({col} AS TIMESTAMP))"
    if base == "ENUM":
        return f"hash(CAST({col} AS VARCHAR))"
    return f"hash({col})"


def _lane_sums(frame: pd.DataFrame, names: Sequence[str]) -> tuple[int, int]:
    """The two lane sums of :class:`_Fingerprint`, computed by DuckDB in one zero-copy scan.

    Each row's canonical values are hashed in ``names`` order; the row hash is salted twice and
    hashed again (DuckDB's integer hash is a bijective 64-bit mixer), and each lane sums those
    over the rows exactly (as HUGEINT). DuckDB hashes strings ~40x faster than pandas' siphash.
    A column DuckDB cannot scan (an exotic ``object`` column) is hashed by pandas from its
    ``str()`` values instead: still the same for identical content, only not dtype-agnostic.
    """
    def lanes(row_hash: str) -> tuple[int, int]:
        sums = ", ".join(f"sum(hash(xor(h, CAST({salt} AS UBIGINT)))::HUGEINT)"
                         for salt in _SALTS)
        row = con.execute(f"SELECT {sums} FROM (SELECT {row_hash} AS h FROM frame)").fetchone()
        assert row is not None  # an aggregate always returns one row
        return int(row[0]), int(row[1])

    con = duckdb.connect()
    try:
        con.execute("SET python_enable_replacements = false")
        try:
            try:
                con.register("frame", frame)
            except duckdb.Error:
                # a layout DuckDB cannot scan in place (negative strides, e.g. df[::-1]):
                # the same rows, contiguous, hash alike
                con.register("frame", frame.copy(deep=True))
            types = dict(con.execute("SELECT column_name, column_type FROM "
                                     "(DESCRIBE frame)").fetchall())
            return lanes(f"hash({', '.join(_value_hash_sql(n, types[n]) for n in names)})")
        except duckdb.Error:
            with contextlib.suppress(duckdb.Error):
                con.unregister("frame")
            per_column = pd.DataFrame({
                f"c{i}": pd.util.hash_pandas_object(frame[n].astype(str), index=False).to_numpy()
                for i, n in enumerate(names)})
            con.register("frame", per_column)
            return lanes(f"hash({', '.join(f'c{i}' for i in range(len(names)))})")
    finally:
        with contextlib.suppress(Exception):
            con.unregister("frame")
        con.close()


def _fingerprint(frame: pd.DataFrame) -> _Fingerprint | None:
    """The frame's content fingerprint, or None for a frame with no rows (it holds no one).

    Privacy invariant: one budget per dataset. Two frames with the same fingerprint hold the
    same rows (but for a ~2^-64 hash coincidence), so the second must not get a budget of its
    own.
    """
    if len(frame) == 0 or frame.shape[1] == 0:
        return None
    keys = [str(c).strip().lower() for c in frame.columns]  # as SQL names them
    # configure has checked that these are unique; sorting them fixes one column order for
    # every frame with these columns (the position breaks ties only for frames it refuses)
    order = sorted(range(len(keys)), key=lambda i: (keys[i], i))
    plain = frame.set_axis([f"c{i}" for i in range(len(keys))], axis=1)  # zero-copy
    return _Fingerprint(rows=len(frame), columns=tuple(sorted(keys)),
                        lanes=_lane_sums(plain, [f"c{i}" for i in order]))


def _ledger_key(ledger: Any) -> str | None:
    """The durable ledger file a configuration charges, resolved; None if it is not a file."""
    path = ledger if isinstance(ledger, (str, Path)) else getattr(ledger, "path", None)
    if not isinstance(path, (str, Path)) or str(path) in ("", ":memory:"):
        return None
    return str(Path(path).expanduser().resolve())


def _same_rows_message(known: _Dataset) -> str:
    state = _by_marker.get(known.marker)
    if state is not None:
        where = (f"table '{known.table}', spent {state.spent().describe()} of "
                 f"{state.session.budget.describe()}")
    else:
        where = (f"table '{known.table}'; that frame no longer exists in this process, but the "
                 f"budget belongs to the data, so it still holds")
    ledger = (f" or configure this frame with the same durable ledger (ledger='{known.ledger}'),"
              f" which keeps the one budget" if known.ledger is not None else "")
    return (
        f"df.dp.configure: this DataFrame holds the same rows as a DataFrame configured for DP "
        f"({where}): a copy, a rebuild from its values (pd.DataFrame(df.to_dict())), the same "
        f"file read again, its rows or columns in another order, or columns cast losslessly "
        f"(e.g. int32 -> int64) are recognised by their content. Why: a second configuration "
        f"would start a fresh budget for the same people; the budget belongs to the data, not "
        f"to the Python object. Fix: query the configured frame, filtering with "
        f"df.dp.where(...){ledger}. Nothing was configured or spent.")


# ----------------------------------------------------------------------------------------------
# Building SQL for the helpers
# ----------------------------------------------------------------------------------------------


def _ident(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise UnsupportedQueryError(f"a column name must be a non-empty string, got {name!r}")
    return '"' + name.replace('"', '""') + '"'


def _by_list(by: str | Sequence[str] | None) -> list[str]:
    if by is None:
        return []
    if isinstance(by, str):
        return [by]
    if isinstance(by, Sequence) and all(isinstance(b, str) for b in by):
        return list(by)
    raise UnsupportedQueryError(f"by must be a column name or a list of column names, got {by!r}")


def _parse_predicate(predicate: str) -> str:
    """One SQL boolean expression, re-rendered (a predicate cannot smuggle in other clauses)."""
    if not isinstance(predicate, str) or not predicate.strip():
        raise ParseError("where() takes a SQL condition as a string, e.g. where(\"age < 30\")")
    try:
        nodes = [n for n in sqlglot.parse(predicate, dialect="duckdb") if n is not None]
    except (SqlglotParseError, TokenError) as err:
        raise ParseError(
            f"could not parse the where() condition {predicate!r}: "
            f"{str(err).splitlines()[0]}. Write one SQL condition, e.g. \"age < 30 AND "
            f"hospital = 'A'\".") from None
    if len(nodes) != 1 or isinstance(nodes[0], (exp.Query, exp.Command, exp.DDL, exp.DML)):
        raise ParseError(
            f"where() takes one SQL condition, not {predicate!r}. Write e.g. \"age < 30\"; "
            f"for anything else use df.dp.sql(...).")
    return nodes[0].sql(dialect="duckdb")


def _helper_sql(table: str, func: str, column: str | None, by: Sequence[str],
                predicates: Sequence[str], extra: str = "") -> str:
    if column is None:
        value, alias = "COUNT(*)", "count"
    else:
        value, alias = f"{func}({_ident(column)}{extra})", column
    if alias.lower() in (b.lower() for b in by):
        raise UnsupportedQueryError(
            f"the output column '{alias}' would clash with a by column of the same name; use "
            f"df.dp.sql(...) and choose the aliases yourself.")
    keys = ", ".join(_ident(b) for b in by)
    sql = f"SELECT {keys + ', ' if keys else ''}{value} AS {_ident(alias)} FROM {_ident(table)}"
    if predicates:
        sql += " WHERE " + " AND ".join(f"({p})" for p in predicates)
    if by:
        sql += f" GROUP BY {keys}"
    return sql


def _budget_kwargs(epsilon: Any, delta: Any, rho: Any, mu: Any, budget: Any) -> dict[str, Any]:
    return {"epsilon": epsilon, "delta": delta, "rho": rho, "mu": mu, "budget": budget}


def _answer_frame(res: Result, sql: str) -> pd.DataFrame:
    """The noisy answers with each column's 95% interval right after it; costs in ``attrs``."""
    data: dict[str, Any] = {}
    for col in res.df.columns:
        data[col] = res.df[col]
        for side in ("low", "high"):
            name = f"{col}_{side}"
            if name in res.intervals.columns and name not in res.df.columns:
                data[name] = res.intervals[name]
    out = pd.DataFrame(data, index=res.df.index)
    out.attrs = {
        "privplan_cost": res.cost,
        "privplan_query_cost": res.query_cost,
        "privplan_accuracy": dict(res.accuracy),
        "privplan_sql": sql,
    }
    return out


# ----------------------------------------------------------------------------------------------
# The view and the accessor
# ----------------------------------------------------------------------------------------------


class DPView:
    """A configured frame seen through WHERE filters: ``df.dp.where("age < 30")``.

    Its helpers add the filters to the SQL they build, so the accountant sees them: answers
    over disjoint filters compose in parallel (the max of their costs, not the sum).
    ``where`` on a view adds another filter (AND).

    >>> import privplan as pp
    >>> frame = pd.DataFrame({"age": [10, 40, 70], "cost": [1.0, 2.0, 3.0]})
    >>> frame.dp.configure(bounds={"age": (0, 100), "cost": (0, 10)}, budget=pp.PureDP(1))
    >>> frame.dp.where("age < 50").where("cost > 1")
    DPView(table='df', where='(age < 50) AND (cost > 1)')
    >>> print(frame.dp.where("age >= 50").count(epsilon=0.5, explain=True).marginal)
    PureDP(epsilon=0.5)
    """

    def __init__(self, state: _State, predicates: tuple[str, ...] = ()) -> None:
        self._state = state
        self._predicates = predicates

    @property
    def predicate(self) -> str | None:
        """The combined WHERE condition (None for the unfiltered frame)."""
        if not self._predicates:
            return None
        return " AND ".join(f"({p})" for p in self._predicates)

    def __repr__(self) -> str:
        return f"DPView(table={self._state.table!r}, where={self.predicate!r})"

    def where(self, predicate: str) -> DPView:
        """This view with the extra filter ``predicate`` (a SQL condition on the frame's columns).

        The condition is parsed and planned now (nothing is spent), so a typo or an unknown
        column is reported here rather than at the first query.
        """
        text = _parse_predicate(predicate)
        view = DPView(self._state, (*self._predicates, text))
        self._state.explain(_helper_sql(self._state.table, "COUNT", None, [], view._predicates),
                            {"budget": self._state.session.budget})
        return view

    def _ask(self, func: str, column: str | None, by: Any, budget: dict[str, Any],
             explain: bool, extra: str = "") -> Any:
        sql = _helper_sql(self._state.table, func, column, _by_list(by), self._predicates,
                          extra)
        if explain:
            return self._state.explain(sql, budget)
        return _answer_frame(self._state.sql(sql, budget), sql)

    def count(self, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
              delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
              explain: bool = False) -> Any:
        """Noisy row count (per group of ``by``): columns ``by...``, ``count``, ``count_low``,
        ``count_high``. With ``explain=True`` nothing is spent and the plan is returned."""
        return self._ask("COUNT", None, by, _budget_kwargs(epsilon, delta, rho, mu, budget),
                         explain)

    def sum(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
            delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
            explain: bool = False) -> Any:
        """Noisy sum of ``column`` (clamped to its bounds), per group of ``by``; the output
        column is named after ``column``, with ``<column>_low``/``<column>_high``."""
        return self._ask("SUM", column, by, _budget_kwargs(epsilon, delta, rho, mu, budget),
                         explain)

    def mean(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
             delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
             explain: bool = False) -> Any:
        """Noisy mean of ``column`` (noisy SUM / noisy COUNT, clamped to its bounds), per group
        of ``by``; per-row 95% intervals in ``<column>_low``/``<column>_high``."""
        return self._ask("AVG", column, by, _budget_kwargs(epsilon, delta, rho, mu, budget),
                         explain)

    def quantile(self, column: str, q: float, by: str | Sequence[str] | None = None, *,
                 epsilon: Any = None, delta: Any = None, rho: Any = None, mu: Any = None,
                 budget: Any = None, explain: bool = False) -> Any:
        """Noisy ``q``-quantile of ``column`` (0 <= q <= 1; the exponential mechanism over a
        grid of candidates across its bounds), per group of ``by``. No interval columns: its
        accuracy, in rows of rank, is in ``attrs['privplan_accuracy']``."""
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 1:
            raise UnsupportedQueryError(f"quantile q={q!r}: pass one number between 0 and 1, "
                                        "e.g. 0.9")
        return self._ask("QUANTILE_DISC", column, by,
                         _budget_kwargs(epsilon, delta, rho, mu, budget), explain,
                         extra=f", {float(q)!r}")

    def median(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
               delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
               explain: bool = False) -> Any:
        """Noisy median of ``column``: :meth:`quantile` with q = 0.5."""
        return self._ask("MEDIAN", column, by, _budget_kwargs(epsilon, delta, rho, mu, budget),
                         explain)

    def spent(self) -> Any:
        """The composed cost of everything released about this frame so far."""
        return self._state.spent()

    def remaining(self) -> Any:
        """What is left of the frame's budget."""
        return self._state.remaining()


class DPAccessor:
    """``df.dp``: differentially private answers about ``df``, charged to the data's budget.

    pandas builds a new accessor on every ``df.dp``; the per-dataset state lives in a registry
    keyed by the configured frame object (and, for frames derived from it, by the marker pandas
    propagates in ``df.attrs``); configured rows are also remembered by a content fingerprint,
    for the life of the process. See the module docstring for the threat model.
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame

    # -- state ---------------------------------------------------------------------------------
    def _lookup(self) -> tuple[str, _State | None]:
        """("owner", state), ("derived", state or None if gone) or ("fresh", None)."""
        with _lock:
            state = _owner_state(self._frame)
            if state is not None:
                return "owner", state
            marker = _marker(self._frame)
            if marker is not None:
                return "derived", _by_marker.get(marker)
            return "fresh", None

    def _state(self, what: str = "queried on its own") -> _State:
        kind, state = self._lookup()
        if kind == "owner":
            assert state is not None
            return state
        if kind == "derived":
            raise PolicyError(_derived_message(state, what))
        raise PolicyError(_NOT_CONFIGURED)

    def _shared_state(self) -> _State:
        """The state whose budget this frame shares (its own, or its origin's)."""
        kind, state = self._lookup()
        if state is not None:
            return state
        if kind == "derived":
            raise PolicyError(_derived_message(None, "queried"))
        raise PolicyError(_NOT_CONFIGURED)

    @property
    def configured(self) -> bool:
        """True for the configured frame itself (not for frames derived from it)."""
        return self._lookup()[0] == "owner"

    @property
    def policy(self) -> Policy:
        """The policy the frame was configured with (shared with derived frames)."""
        return self._shared_state().session.policy

    @property
    def table(self) -> str:
        """The table name to use in ``df.dp.sql`` (``"df"`` unless configured otherwise)."""
        return self._shared_state().table

    @property
    def budget(self) -> Any:
        """The frame's total budget."""
        return self._shared_state().session.budget

    @property
    def session(self) -> Session:
        """The underlying :class:`privplan.Session` (ledger entries, explain history)."""
        return self._state()._open_session()

    def __repr__(self) -> str:
        kind, state = self._lookup()
        if state is None:
            return f"DPAccessor({'not configured' if kind == 'fresh' else 'derived, origin gone'})"
        role = "" if kind == "owner" else ", derived (shares the budget; not queryable)"
        return (f"DPAccessor(table={state.table!r}, budget={state.session.budget!r}, "
                f"spent={state.spent()!r}{role})")

    # -- configuration -------------------------------------------------------------------------
    def configure(
        self,
        *,
        policy: Policy | Mapping[str, Any] | str | Path | None = None,
        privacy_unit: str = "row",
        bounds: Mapping[str, tuple[Any, Any]] | None = None,
        public_values: Mapping[str, Iterable[Any]] | None = None,
        types: Mapping[str, str] | None = None,
        neighbourhood: str = "add_remove",
        max_rows_per_unit: int | None = None,
        max_groups_per_unit: int | None = None,
        max_rows_per_group_per_unit: int | None = None,
        budget: Any = None,
        ledger: str | Path | None = None,
        table: str | None = None,
    ) -> None:
        """Declare this frame a protected dataset with a total ``budget`` (the data owner, once).

        Either describe the columns — types are inferred from the dtypes (``types=`` overrides
        them), ``bounds={col: (lo, hi)}`` for numbers, dates and timestamps (needed for
        sum/mean), ``public_values={col: [...]}`` for group keys that may be released without
        partition selection — or pass a whole ``policy=`` (a :class:`privplan.Policy`, dict or
        YAML path; ``table=`` picks its table if it declares several). ``ledger`` is a SQLite
        path that keeps the budget across processes (default: in memory, for this process).
        ``table`` is the name to use in SQL (default ``"df"``).

        The policy comes from column names and dtypes only; the values are read once, to
        fingerprint the rows. It is refused (PolicyError) for a frame already configured,
        derived from a configured frame, sharing memory with one, or holding the same rows as a
        frame configured earlier in this process (unless it charges that frame's durable
        ledger), and for any setting privplan does not understand.

        >>> import privplan as pp
        >>> frame = pd.DataFrame({"age": [30, 40], "hospital": ["A", "B"]})
        >>> frame.dp.configure(bounds={"agee": (0, 100)}, budget=pp.PureDP(1))
        Traceback (most recent call last):
        ...
        privplan.errors.PolicyError: df.dp.configure: bounds names column 'agee', which this DataFrame does not have (columns: age, hospital). Why: a setting for a column that does not exist would be silently dropped. Fix: did you mean 'age'? use one of the frame's columns.
        >>> frame.dp.configure(bounds={"age": (0, 100)}, budget=pp.PureDP(1))
        >>> frame.dp.policy.table("df").column("hospital").type
        'str'
        """
        frame = self._frame
        with _lock:
            kind, state = self._lookup()
            if kind == "owner":
                assert state is not None
                raise PolicyError(
                    "df.dp.configure: this DataFrame is already configured for DP (budget "
                    f"{state.session.budget.describe()}, spent "
                    f"{state.spent().describe()}). Why: a second configuration would start a "
                    "fresh budget for the same people; the budget belongs to the data. Fix: "
                    "keep using df.dp; bounds and public values are fixed once configured.")
            if kind == "derived":
                raise PolicyError("df.dp.configure: " + _derived_message(state, "configured"))
            mine = _buffer_ranges(frame)
            for other in list(_by_marker.values()):
                if _shares_memory(mine, _buffer_ranges(other.snapshot)):
                    raise PolicyError(
                        "df.dp.configure: this DataFrame shares memory with a DataFrame "
                        f"configured for DP (table '{other.table}'), e.g. it was made with "
                        "pd.DataFrame(df), which drops df.attrs in pandas 3. " + _WHY_DERIVED
                        + " Fix: query the configured frame, filtering with df.dp.where(...).")

            if budget is None:
                raise PolicyError(
                    "df.dp.configure: pass budget=, the total privacy loss this data may ever "
                    "incur through df.dp, e.g. budget=pp.PureDP(1.0) (or pp.ApproxDP(eps, "
                    "delta), pp.ZCDP(rho), pp.GDP(mu)).")
            if type(budget) not in _KINDS:
                raise PolicyError(
                    "df.dp.configure: budget must be a privacy value: pp.PureDP(eps), "
                    f"pp.ApproxDP(eps, delta), pp.ZCDP(rho) or pp.GDP(mu); got {budget!r}")
            if budget.is_zero():
                raise PolicyError("df.dp.configure: the budget must be positive")

            if policy is not None:
                extra = [name for name, value, default in (
                    ("privacy_unit", privacy_unit, "row"), ("bounds", bounds, None),
                    ("public_values", public_values, None), ("types", types, None),
                    ("neighbourhood", neighbourhood, "add_remove"),
                    ("max_rows_per_unit", max_rows_per_unit, None),
                    ("max_groups_per_unit", max_groups_per_unit, None),
                    ("max_rows_per_group_per_unit", max_rows_per_group_per_unit, None))
                    if value != default]
                if extra:
                    raise PolicyError(
                        f"df.dp.configure: pass either policy= or column settings, not both "
                        f"(got policy= and {', '.join(extra)}). Why: two descriptions of one "
                        f"table could disagree. Fix: put the settings into the policy.")
                pol, name = _given_policy(policy, table, frame)
            else:
                name = DEFAULT_TABLE if table is None else table
                if not isinstance(name, str) or not name.strip() or "." in name:
                    raise PolicyError(
                        f"df.dp.configure: table must be a plain name such as 'visits', got "
                        f"{name!r}")
                name = name.strip().lower()
                pol = _policy_from_frame(
                    frame, name, privacy_unit=privacy_unit, neighbourhood=neighbourhood,
                    bounds=bounds, public_values=public_values, types=types,
                    max_rows_per_unit=max_rows_per_unit, max_groups_per_unit=max_groups_per_unit,
                    max_rows_per_group_per_unit=max_rows_per_group_per_unit)

            # Zero-copy snapshot (copy-on-write): in-place edits of `frame` after this point do
            # not reach the engine, and DuckDB holds the snapshot, not `frame` (no cycle).
            snapshot = frame.copy(deep=False)
            # One budget per dataset, whatever object holds it: a frame with the same rows as a
            # configured one (a deep copy stripped of attrs, a rebuild from values, the file
            # read again) is refused unless it charges the same durable ledger. Checked last
            # among the refusals (it reads every value) and before anything is created.
            fingerprint = _fingerprint(snapshot)
            ledger_key = _ledger_key(ledger)
            known = None if fingerprint is None else _datasets.get(fingerprint)
            if known is not None and (known.ledger is None or known.ledger != ledger_key):
                raise PolicyError(_same_rows_message(known))
            session = Session(":memory:", policy=pol, budget=budget, ledger=ledger)
            try:
                session.register(name, snapshot)
                # checks now that every policy column exists with a usable type (spends nothing)
                session.explain(f"SELECT COUNT(*) FROM {_ident(name)}", budget=budget)
            except BaseException:
                session.close()
                raise
            marker = secrets.token_hex(16)
            state = _State(frame, session, name, marker, snapshot)
            frame.attrs[ATTRS_KEY] = marker
            _owners[id(frame)] = state
            _by_marker[marker] = state
            if fingerprint is not None:
                _datasets.setdefault(fingerprint, _Dataset(name, marker, ledger_key))
            weakref.finalize(frame, _forget, id(frame), weakref.ref(state))
            weakref.finalize(state, _close_session, session)

    def close(self) -> None:
        """Close the frame's DP session (and its ledger file). Spent budget stays spent: the
        frame can be neither queried nor configured again; ``spent()`` still reports."""
        self._state("closed from a derived frame").close()

    # -- answers -------------------------------------------------------------------------------
    def sql(self, sql: str, *, epsilon: Any = None, delta: Any = None, rho: Any = None,
            mu: Any = None, budget: Any = None) -> pd.DataFrame:
        """Answer ``sql`` (``... FROM df ...``) with DP; the cost is charged before release.

        Returns the noisy answers, each numeric column followed by its 95% interval
        (``<col>_low``, ``<col>_high``). ``attrs`` holds ``privplan_cost`` (what this answer
        added to the frame's composed total), ``privplan_query_cost`` (the query's own composed
        cost), ``privplan_accuracy`` (per column: noise std and 95% half-width) and
        ``privplan_sql``.

        >>> import privplan as pp
        >>> from privplan.testing import noise_disabled
        >>> frame = pd.DataFrame({"age": [10, 40, 70], "hospital": ["A", "B", "A"]})
        >>> frame.dp.configure(bounds={"age": (0, 100)}, public_values={"hospital": ["A", "B"]},
        ...                    budget=pp.PureDP(1))
        >>> with noise_disabled():  # TESTS ONLY
        ...     out = frame.dp.sql("SELECT hospital, SUM(age) AS total FROM df GROUP BY hospital",
        ...                        epsilon=0.5)
        >>> out[["hospital", "total"]]
          hospital  total
        0        A     80
        1        B     40
        >>> out.attrs["privplan_cost"], out.attrs["privplan_accuracy"]["total"].halfwidth
        (PureDP(epsilon=0.5), 599.0)
        """
        res = self._state().sql(sql, _budget_kwargs(epsilon, delta, rho, mu, budget))
        return _answer_frame(res, sql)

    def explain(self, sql: str, *, epsilon: Any = None, delta: Any = None, rho: Any = None,
                mu: Any = None, budget: Any = None) -> Explanation:
        """What ``sql`` would cost against this frame's ledger and how accurate it would be.
        Spends nothing. ``print()`` it, or use ``.marginal``, ``.mechanisms``, ``.to_dict()``."""
        return self._state().explain(sql, _budget_kwargs(epsilon, delta, rho, mu, budget))

    def where(self, predicate: str) -> DPView:
        """A view of the frame filtered by the SQL condition ``predicate`` (see :class:`DPView`)."""
        return DPView(self._state()).where(predicate)

    def count(self, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
              delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
              explain: bool = False) -> Any:
        """Noisy row count, per group of ``by`` — ``SELECT by, COUNT(*) AS count ... GROUP BY
        by`` through :meth:`sql`. ``explain=True`` returns the plan and spends nothing."""
        return DPView(self._state()).count(by, epsilon=epsilon, delta=delta, rho=rho, mu=mu,
                                           budget=budget, explain=explain)

    def sum(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
            delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
            explain: bool = False) -> Any:
        """Noisy ``SUM(column)`` (clamped to its bounds), per group of ``by``."""
        return DPView(self._state()).sum(column, by, epsilon=epsilon, delta=delta, rho=rho,
                                         mu=mu, budget=budget, explain=explain)

    def mean(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
             delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
             explain: bool = False) -> Any:
        """Noisy ``AVG(column)`` (noisy sum / noisy count), per group of ``by``."""
        return DPView(self._state()).mean(column, by, epsilon=epsilon, delta=delta, rho=rho,
                                          mu=mu, budget=budget, explain=explain)

    def quantile(self, column: str, q: float, by: str | Sequence[str] | None = None, *,
                 epsilon: Any = None, delta: Any = None, rho: Any = None, mu: Any = None,
                 budget: Any = None, explain: bool = False) -> Any:
        """Noisy ``q``-quantile of ``column`` per group of ``by`` (see DPView.quantile)."""
        return DPView(self._state()).quantile(column, q, by, epsilon=epsilon, delta=delta,
                                              rho=rho, mu=mu, budget=budget, explain=explain)

    def median(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
               delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
               explain: bool = False) -> Any:
        """Noisy median of ``column`` per group of ``by`` (the 0.5-quantile)."""
        return DPView(self._state()).median(column, by, epsilon=epsilon, delta=delta, rho=rho,
                                            mu=mu, budget=budget, explain=explain)

    # -- budget --------------------------------------------------------------------------------
    def spent(self) -> Any:
        """The composed cost of everything released about this data (general composition
        theorem). A frame derived from a configured frame reports the shared total."""
        return self._shared_state().spent()

    def remaining(self) -> Any:
        """The data's budget minus :meth:`spent`."""
        return self._shared_state().remaining()


def _unregister_at_exit() -> None:
    """Remove ``df.dp`` when the interpreter exits.

    DuckDB's bindings keep ``pandas.DataFrame`` alive from C++ until their module is torn down;
    the accessor links ``DataFrame`` to this module (and through it to ``duckdb``), a cycle the
    garbage collector cannot see, so nanobind would print "leaked instances" warnings at exit.
    """
    with contextlib.suppress(AttributeError):
        delattr(pd.DataFrame, "dp")
    pd.DataFrame._accessors.discard("dp")


atexit.register(_unregister_at_exit)
