"""A long public key domain's values as the DuckDB engine loads them, prepared once per process.

A plan shared by the sessions of a process (:mod:`privplan.session.shared_plans`) holds each
long public domain as one tuple of values, and every fresh session's engine makes its own table
of them (:meth:`~privplan.engines.duckdb_engine.DuckDBEngine.domain_table`): with 100,000 keys
it built the values' key (their types and values), checked that all are strings and encoded
them into an Arrow array each time, ~8 ms of every fresh session. A tuple cannot change, so
both are kept here by the tuple's identity (the tuple is held, so its id is not reused); a list
(planning's own call) is prepared afresh.

Privacy: public values only (the policy's domains); nothing here reads a row.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from typing import Any

from privplan.process_memory import kept

__all__ = ["arrow_strings", "domain_key"]

_MAX_ENTRIES = 8  # (an entry holds its Arrow array: ~1.5 MB for 100,000 short strings)
_LOCK = threading.Lock()
_KNOWN: dict[tuple[str, int], tuple[Sequence[Any], Any]] = {}


def _forget() -> None:
    with _LOCK:
        _KNOWN.clear()


kept(__name__, _forget)


def _prepared(kind: str, values: Sequence[Any], make: Any) -> Any:
    if type(values) is not tuple:
        return make(values)
    ident = (kind, id(values))
    with _LOCK:
        found = _KNOWN.get(ident)
    if found is not None and found[0] is values:
        return found[1]
    answer = make(values)
    with _LOCK:
        if len(_KNOWN) >= _MAX_ENTRIES:
            _KNOWN.pop(next(iter(_KNOWN)))  # (the oldest)
        _KNOWN[ident] = (values, answer)
    return answer


class _DomainKey:
    """The values with the type of each, hashed once (a dict lookup hashes its key every time:
    ~2 ms for 100,000 values)."""

    __slots__ = ("_hash", "key")

    def __init__(self, values: Sequence[Any]) -> None:
        self.key = (tuple(map(type, values)), tuple(values))
        self._hash = hash(self.key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DomainKey) and self._hash == other._hash and (
            self.key == other.key)


def domain_key(values: Sequence[Any]) -> Hashable:
    """The values with the type of each (``1`` and ``True`` are equal values, not equal keys)."""
    return _prepared("key", values, _DomainKey)


def arrow_strings(values: Sequence[Any]) -> Any:
    """An Arrow table (one column ``x``) of ``values`` when all are ``str`` and pyarrow can
    encode them (a lone surrogate cannot be), else None."""
    return _prepared("arrow", values, _arrow_table)


def _arrow_table(values: Sequence[Any]) -> Any:
    if not values or not all(type(v) is str for v in values):
        return None
    try:
        import pyarrow as pa
    except ImportError:
        return None
    try:
        return pa.table({"x": pa.array(values, type=pa.string())})
    except (pa.ArrowException, UnicodeError):  # (a lone surrogate: the list, as before)
        return None
