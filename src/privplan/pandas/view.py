"""``df.dp.where(...)``: a configured frame seen through WHERE filters, with the helpers.

The view adds its filters to the SQL the helpers build, so the accountant sees them and answers
over disjoint filters compose in parallel; the accessor's own helpers answer through an
unfiltered view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from privplan.arguments import checked_arguments
from privplan.errors import UnsupportedQueryError
from privplan.pandas.helper_sql import (
    _answer_frame,
    _budget_kwargs,
    _by_list,
    _helper_sql,
    _parse_predicate,
)
from privplan.pandas.messages import _unknown_method
from privplan.pandas.state import _State


class DPView:
    """A configured frame seen through WHERE filters: ``df.dp.where("age < 30")``.

    Its helpers add the filters to the SQL they build, so the accountant sees them: answers
    over disjoint filters compose in parallel (the max of their costs, not the sum).
    ``where`` on a view adds another filter (AND).

    >>> import pandas as pd
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

    @checked_arguments
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

    @checked_arguments
    def count(self, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
              delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
              explain: bool = False) -> Any:
        """Noisy row count (per group of ``by``): columns ``by...``, ``count``, ``count_low``,
        ``count_high``. With ``explain=True`` nothing is spent and the plan is returned."""
        return self._ask("COUNT", None, by, _budget_kwargs(epsilon, delta, rho, mu, budget),
                         explain)

    @checked_arguments
    def sum(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
            delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
            explain: bool = False) -> Any:
        """Noisy sum of ``column`` (clamped to its bounds), per group of ``by``; the output
        column is named after ``column``, with ``<column>_low``/``<column>_high``."""
        return self._ask("SUM", column, by, _budget_kwargs(epsilon, delta, rho, mu, budget),
                         explain)

    @checked_arguments
    def mean(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
             delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
             explain: bool = False) -> Any:
        """Noisy mean of ``column`` (noisy SUM / noisy COUNT, clamped to its bounds), per group
        of ``by``; per-row 95% intervals in ``<column>_low``/``<column>_high``."""
        return self._ask("AVG", column, by, _budget_kwargs(epsilon, delta, rho, mu, budget),
                         explain)

    @checked_arguments
    def var(self, column: str, by: str | Sequence[str] | None = None, *, ddof: int = 1,
            epsilon: Any = None, delta: Any = None, rho: Any = None, mu: Any = None,
            budget: Any = None, explain: bool = False) -> Any:
        """Noisy variance of ``column`` (clamped to its bounds), per group of ``by``:
        ``VAR_SAMP`` (``ddof=1``, pandas' default) or ``VAR_POP`` (``ddof=0``); the same
        answer and cost as that SQL."""
        return self._ask(_spread("var", ddof), column, by,
                         _budget_kwargs(epsilon, delta, rho, mu, budget), explain)

    @checked_arguments
    def std(self, column: str, by: str | Sequence[str] | None = None, *, ddof: int = 1,
            epsilon: Any = None, delta: Any = None, rho: Any = None, mu: Any = None,
            budget: Any = None, explain: bool = False) -> Any:
        """Noisy standard deviation of ``column`` (the square root of :meth:`var`):
        ``STDDEV_SAMP`` (``ddof=1``) or ``STDDEV_POP`` (``ddof=0``), per group of ``by``."""
        return self._ask(_spread("std", ddof), column, by,
                         _budget_kwargs(epsilon, delta, rho, mu, budget), explain)

    @checked_arguments
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

    @checked_arguments
    def median(self, column: str, by: str | Sequence[str] | None = None, *, epsilon: Any = None,
               delta: Any = None, rho: Any = None, mu: Any = None, budget: Any = None,
               explain: bool = False) -> Any:
        """Noisy median of ``column``: :meth:`quantile` with q = 0.5."""
        return self._ask("MEDIAN", column, by, _budget_kwargs(epsilon, delta, rho, mu, budget),
                         explain)

    def __getattr__(self, name: str) -> Any:
        """An unknown ``df.dp.where(...).<name>``: AttributeError naming what exists."""
        raise AttributeError(_unknown_method(name, type(self), "df.dp.where(...)"))

    @checked_arguments
    def spent(self) -> Any:
        """The composed cost of everything released about this frame so far."""
        return self._state.spent()

    @checked_arguments
    def remaining(self) -> Any:
        """What is left of the frame's budget."""
        return self._state.remaining()


def _spread(method: str, ddof: Any) -> str:
    """The registered spread ``df.dp.var`` / ``df.dp.std`` (``method``) answers for pandas'
    ``ddof``: the row of the aggregate table with that ``ddof`` (VAR_SAMP for 1, VAR_POP for 0;
    STDDEV_... for std, a ``root`` of the variance)."""
    from privplan.sql.aggregates import AGGREGATES
    from privplan.sql.aggregates.moments import Spread

    rows = {row.ddof: row.label for row in AGGREGATES.values()
            if type(row) is Spread and row.root == (method == "std")}
    if isinstance(ddof, bool) or ddof not in tuple(rows):  # (a tuple: ddof may be unhashable)
        forms = " and ".join(f"{_FORMS.get(d, 'ddof')} (ddof={d}, {rows[d]})"
                             for d in sorted(rows, reverse=True))
        raise UnsupportedQueryError(
            f"df.dp.{method}: ddof={ddof!r} is not supported. Why: privplan answers the "
            f"{forms} forms only. Fix: pass "
            f"{' or '.join(f'ddof={d}' for d in sorted(rows, reverse=True))}.")
    return next(label for d, label in rows.items() if d == ddof)


_FORMS = {1: "sample", 0: "population"}  # (what pandas' ddof of 1 and 0 mean)
