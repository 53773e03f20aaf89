"""The per-dataset state behind ``df.dp``: one configured frame's session, table and snapshot.

pandas builds a new accessor on every ``df.dp``, so what a configured dataset owns (its session,
ledger, zero-copy snapshot and lock) lives here, in registries keyed by the configured frame
object and by the marker pandas propagates in ``df.attrs`` to frames derived from it. A state
dies with its frame; the registries never keep a frame alive.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import pandas as pd

from privplan.errors import PolicyError
from privplan.explain import Explanation
from privplan.result import Result
from privplan.session.session import Session

ATTRS_KEY = "privplan.dp"
"""The ``df.attrs`` key holding the marker of the configured frame (pandas propagates it)."""

_lock = threading.RLock()
_owners: dict[int, _State] = {}  # id(configured frame) -> its state (entry removed at frame death)
_by_marker: weakref.WeakValueDictionary[str, _State] = weakref.WeakValueDictionary()


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

