"""The same rows as a configured frame: content fingerprints of frames, and the registry of
the datasets configured in this process.

Privacy invariant: one budget per dataset, whatever Python object holds it. A frame's
fingerprint is the multiset of its rows, hashed canonically by DuckDB in one zero-copy scan, so
a copy, a rebuild from values, the same file read again, rows or columns reordered and lossless
casts are recognised; ``configure`` refuses a frame whose fingerprint it has seen before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from privplan.pandas.helper_sql import _ident
from privplan.pandas.state import _by_marker

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



def _known_dataset(fingerprint: _Fingerprint | None) -> _Dataset | None:
    """The first configuration of these rows in this process (None for rows never configured,
    and for a frame with no rows)."""
    return None if fingerprint is None else _datasets.get(fingerprint)


def _remember_dataset(fingerprint: _Fingerprint | None, dataset: _Dataset) -> None:
    """Record the first configuration of these rows (kept for the life of the process)."""
    if fingerprint is not None:
        _datasets.setdefault(fingerprint, dataset)
