"""``df.dp`` itself: the accessor pandas builds on every attribute access, and its removal at
interpreter exit.

The accessor finds the frame's state (its own, a derived frame's origin, or none), refuses what
it cannot answer, and delegates: configuration to :mod:`privplan.pandas.configure`, answers to
the frame's session and to :class:`~privplan.pandas.view.DPView`.
"""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from privplan.arguments import checked_arguments
from privplan.errors import PolicyError
from privplan.explain import Explanation
from privplan.pandas.configure import (
    _check_budget,
    _configured_policy,
    _refuse_configured,
    _register,
)
from privplan.pandas.helper_sql import _answer_frame, _budget_kwargs
from privplan.pandas.messages import _NOT_CONFIGURED, _derived_message, _unknown_method
from privplan.pandas.state import _by_marker, _lock, _marker, _owner_state, _State
from privplan.pandas.view import DPView
from privplan.policy import Policy
from privplan.session.session import Session
from privplan.sql.params import Style, bind_params


class DPAccessor:
    """``df.dp``: differentially private answers about ``df``, charged to the data's budget.

    pandas builds a new accessor on every ``df.dp``; the per-dataset state lives in a registry
    keyed by the configured frame object (and, for frames derived from it, by the marker pandas
    propagates in ``df.attrs``); configured rows are also remembered by a content fingerprint,
    for the life of the process. See the :mod:`privplan.pandas` docstring for the
    threat model.
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
    @checked_arguments
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
            _refuse_configured(frame, kind, state)
            _check_budget(budget)
            pol, name = _configured_policy(
                frame, policy, table, privacy_unit=privacy_unit, bounds=bounds,
                public_values=public_values, types=types, neighbourhood=neighbourhood,
                max_rows_per_unit=max_rows_per_unit, max_groups_per_unit=max_groups_per_unit,
                max_rows_per_group_per_unit=max_rows_per_group_per_unit)
            _register(frame, pol, name, budget, ledger)

    @checked_arguments
    def close(self) -> None:
        """Close the frame's DP session (and its ledger file). Spent budget stays spent: the
        frame can be neither queried nor configured again; ``spent()`` still reports."""
        self._state("closed from a derived frame").close()

    # -- answers -------------------------------------------------------------------------------
    @checked_arguments
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
        _no_placeholders(sql)
        res = self._state().sql(sql, _budget_kwargs(epsilon, delta, rho, mu, budget))
        return _answer_frame(res, sql)

    @checked_arguments
    def explain(self, sql: str, *, epsilon: Any = None, delta: Any = None, rho: Any = None,
                mu: Any = None, budget: Any = None) -> Explanation:
        """What ``sql`` would cost against this frame's ledger and how accurate it would be.
        Spends nothing. ``print()`` it, or use ``.marginal``, ``.mechanisms``, ``.to_dict()``."""
        _no_placeholders(sql)
        return self._state().explain(sql, _budget_kwargs(epsilon, delta, rho, mu, budget))

    @checked_arguments
    def where(self, predicate: str) -> DPView:
        """A view of the frame filtered by the SQL condition ``predicate`` (see :class:`DPView`)."""
        return DPView(self._state()).where(predicate)

    @checked_arguments
    def count(self, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
              delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
              explain: bool = False) -> Any:
        """Noisy row count, per group of ``by`` — ``SELECT by, COUNT(*) AS count ... GROUP BY
        by`` through :meth:`sql`. ``explain=True`` returns the plan and spends nothing."""
        return DPView(self._state()).count(by, epsilon=epsilon, delta=delta, rho=rho, mu=mu,
                                           budget=budget, explain=explain)

    @checked_arguments
    def sum(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
            delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
            explain: bool = False) -> Any:
        """Noisy ``SUM(column)`` (clamped to its bounds), per group of ``by``."""
        return DPView(self._state()).sum(column, by, epsilon=epsilon, delta=delta, rho=rho,
                                         mu=mu, budget=budget, explain=explain)

    @checked_arguments
    def mean(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
             delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
             explain: bool = False) -> Any:
        """Noisy ``AVG(column)`` (noisy sum / noisy count), per group of ``by``."""
        return DPView(self._state()).mean(column, by, epsilon=epsilon, delta=delta, rho=rho,
                                          mu=mu, budget=budget, explain=explain)

    @checked_arguments
    def var(self, column: str, by: str | Sequence[str] | None = None, *, ddof: int = 1,
            epsilon: Any = None, delta: Any = None, rho: Any = None, mu: Any = None,
            budget: Any = None, explain: bool = False) -> Any:
        """Noisy ``VAR_SAMP(column)`` (``ddof=0``: ``VAR_POP``), clamped to its bounds, per
        group of ``by`` (see DPView.var)."""
        return DPView(self._state()).var(column, by, ddof=ddof, epsilon=epsilon, delta=delta,
                                         rho=rho, mu=mu, budget=budget, explain=explain)

    @checked_arguments
    def std(self, column: str, by: str | Sequence[str] | None = None, *, ddof: int = 1,
            epsilon: Any = None, delta: Any = None, rho: Any = None, mu: Any = None,
            budget: Any = None, explain: bool = False) -> Any:
        """Noisy ``STDDEV_SAMP(column)`` (``ddof=0``: ``STDDEV_POP``), per group of ``by``."""
        return DPView(self._state()).std(column, by, ddof=ddof, epsilon=epsilon, delta=delta,
                                         rho=rho, mu=mu, budget=budget, explain=explain)

    @checked_arguments
    def quantile(self, column: str, q: float, by: str | Sequence[str] | None = None, *,
                 epsilon: Any = None, delta: Any = None, rho: Any = None, mu: Any = None,
                 budget: Any = None, explain: bool = False) -> Any:
        """Noisy ``q``-quantile of ``column`` per group of ``by`` (see DPView.quantile)."""
        return DPView(self._state()).quantile(column, q, by, epsilon=epsilon, delta=delta,
                                              rho=rho, mu=mu, budget=budget, explain=explain)

    @checked_arguments
    def median(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
               delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
               explain: bool = False) -> Any:
        """Noisy median of ``column`` per group of ``by`` (the 0.5-quantile)."""
        return DPView(self._state()).median(column, by, epsilon=epsilon, delta=delta, rho=rho,
                                            mu=mu, budget=budget, explain=explain)

    def __getattr__(self, name: str) -> Any:
        """An unknown ``df.dp.<name>``: AttributeError naming what exists (did you mean ...?)."""
        raise AttributeError(_unknown_method(name, type(self), "df.dp"))

    # -- budget --------------------------------------------------------------------------------
    @checked_arguments
    def spent(self) -> Any:
        """The composed cost of everything released about this data (general composition
        theorem). A frame derived from a configured frame reports the shared total."""
        return self._shared_state().spent()

    @checked_arguments
    def remaining(self) -> Any:
        """The data's budget minus :meth:`spent`."""
        return self._shared_state().remaining()


_NO_PARAMS = Style(call="", named="$", none=(
    "df.dp.sql() takes no query parameters: write each value into the SQL in place of its "
    "placeholder, e.g. WHERE age > 30"))


def _no_placeholders(sql: Any) -> None:
    """A placeholder in the SQL: refused with df.dp's fix (the session would name params=)."""
    if isinstance(sql, str):
        bind_params(sql, None, _NO_PARAMS)


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
