"""What a session shows of itself: its budget history, the budget plot, its one-line and
notebook views (kept apart from :mod:`privplan.session.session`, which does the work)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from privplan.boundary import privplan_errors

if TYPE_CHECKING:
    from privplan.session.pld import PLDAccounting
    from privplan.views.shown import ShownSession


class SessionViews:
    """Read-only views of a :class:`~privplan.session.session.Session` (its base class)."""

    budget: Any  # (set by Session.__init__)
    pld: PLDAccounting | None

    @privplan_errors
    def budget_history(self) -> pd.DataFrame:
        """One row per query in the ledger: its cost alone, what it added to the composed
        total, the total after it, and the sequential total (see
        :func:`privplan.views.plot.budget_history`)."""
        from privplan.views.plot import budget_history

        return budget_history(cast("ShownSession", self))

    @privplan_errors
    def plot_budget(self, *, ax: Any = None, title: str | None = None) -> Any:
        """The composed total after each query next to the sequential total, the budget as a
        line, free (disjoint) queries marked (needs matplotlib). Returns the matplotlib Axes."""
        from privplan.views.plot import plot_budget

        return plot_budget(cast("ShownSession", self), ax=ax, title=title)

    def _exceeded(self, before: Any, after: Any) -> str:
        """What a refused charge says: spent, budget, the query's part, what to do."""
        budget, pld = self.budget, self.pld
        marginal = after - before
        text = (f"budget exceeded: the session has spent {before.describe()} of "
                f"{budget.describe()}; this query would add {marginal.describe()} "
                f"(composed total {after.describe()}). Nothing was spent. Why: the budget bounds "
                "what all of the session's answers together may reveal about anyone. Fix: use "
                "a smaller budget for the query, or a query disjoint from earlier ones.")
        if pld is not None:
            text += (f" (PLD accounting of the (ε, δ) budget ({pld.target.epsilon:g}, "
                     f"{pld.target.delta:g}): spent {pld.describe(before)}, with "
                     f"this query {pld.describe(after)}.)")
        return text

    def __repr__(self) -> str:
        """One line: the budget, the tables and where the ledger lives. It reads nothing (a
        debugger calls it freely); ``spent()`` or the notebook view read the ledger."""
        budget, policy = getattr(self, "budget", None), getattr(self, "policy", None)
        if budget is None or policy is None:  # (a session whose __init__ failed)
            return "Session(not open)"
        tables = ", ".join(policy.tables)
        tables = tables if len(tables) <= 60 else tables[:57] + "…"
        path = getattr(getattr(self, "ledger", None), "path", None)
        where = "in memory" if path is None else repr(str(path)[-60:])
        return (f"Session({type(budget).__name__} {budget.describe()}, tables: {tables}, "
                f"ledger: {where})")

    def _repr_html_(self) -> str:
        """The notebook view: budget, spent and remaining with a bar, queries answered, the
        ledger (see :func:`privplan.views.html.session_html`)."""
        from privplan.views.html import session_html

        return session_html(cast("ShownSession", self))

