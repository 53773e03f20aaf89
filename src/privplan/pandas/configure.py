"""``df.dp.configure``, step by step: the refusals, the budget, the policy and the registration.

The data owner configures a frame once. Before anything is created, ``configure`` refuses a
frame already configured, derived from a configured frame, sharing memory with one or holding
the same rows as one (one budget per dataset), and a budget or setting it does not understand;
then it opens the frame's session on a zero-copy snapshot and records the dataset in the
registries (by frame, by marker and by content fingerprint). The caller holds the registry lock.
"""

from __future__ import annotations

import secrets
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from privplan.accounting.definitions import KINDS, constructors
from privplan.errors import PolicyError
from privplan.pandas.fingerprints import (
    _Dataset,
    _fingerprint,
    _known_dataset,
    _ledger_key,
    _remember_dataset,
    _same_rows_message,
)
from privplan.pandas.frame_policy import _given_policy, _policy_from_frame
from privplan.pandas.helper_sql import _ident
from privplan.pandas.messages import _WHY_DERIVED, _derived_message
from privplan.pandas.shared_memory import _buffer_ranges, _shares_memory
from privplan.pandas.state import (
    ATTRS_KEY,
    _by_marker,
    _close_session,
    _forget,
    _owners,
    _State,
)
from privplan.policy import Policy
from privplan.session.session import Session

DEFAULT_TABLE = "df"


def _refuse_configured(frame: pd.DataFrame, kind: str, state: _State | None) -> None:
    """Refuse a frame that is configured, derived from a configured frame, or shares its memory
    (``kind`` and ``state`` as :meth:`DPAccessor._lookup` gives them)."""
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


def _check_budget(budget: Any) -> None:
    if budget is None:
        raise PolicyError(
            "df.dp.configure: pass budget=, the total privacy loss this data may ever "
            "incur through df.dp, e.g. budget=pp.PureDP(1.0) (or "
            f"{', '.join(k.constructor_hint() for k in KINDS[1:])}).")
    if type(budget) not in KINDS:
        raise PolicyError(
            f"df.dp.configure: budget must be a privacy value: {constructors()}; got {budget!r}")
    if budget.is_zero():
        raise PolicyError("df.dp.configure: the budget must be positive")


def _configured_policy(
    frame: pd.DataFrame,
    policy: Policy | Mapping[str, Any] | str | Path | None,
    table: str | None,
    *,
    privacy_unit: str,
    bounds: Mapping[str, tuple[Any, Any]] | None,
    public_values: Mapping[str, Iterable[Any]] | None,
    types: Mapping[str, str] | None,
    neighbourhood: str,
    max_rows_per_unit: int | None,
    max_groups_per_unit: int | None,
    max_rows_per_group_per_unit: int | None,
) -> tuple[Policy, str]:
    """The policy and table name: the ``policy=`` given, or one built from the column settings."""
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
        return _given_policy(policy, table, frame)
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
    return pol, name


def _register(frame: pd.DataFrame, pol: Policy, name: str, budget: Any,
              ledger: str | Path | None) -> None:
    """Refuse the same rows as a configured frame, then open the session and record the frame."""
    # Zero-copy snapshot (copy-on-write): in-place edits of `frame` after this point do
    # not reach the engine, and DuckDB holds the snapshot, not `frame` (no cycle).
    snapshot = frame.copy(deep=False)
    # One budget per dataset, whatever object holds it: a frame with the same rows as a
    # configured one (a deep copy stripped of attrs, a rebuild from values, the file
    # read again) is refused unless it charges the same durable ledger. Checked last
    # among the refusals (it reads every value) and before anything is created.
    fingerprint = _fingerprint(snapshot)
    ledger_key = _ledger_key(ledger)
    known = _known_dataset(fingerprint)
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
    _remember_dataset(fingerprint, _Dataset(name, marker, ledger_key))
    weakref.finalize(frame, _forget, id(frame), weakref.ref(state))
    weakref.finalize(state, _close_session, session)
