"""Pictures: a result's bars with their 95% intervals, and a budget over a session or ledger.

matplotlib is an optional extra (``pip install 'privplan[plot]'``); it is imported only when a
plot is drawn. Everything plotted is already released: noisy answers and their intervals (which
depend only on the noise scale, not on the data), and the ledger's charges (computed from the
queries' text and the policy, never from the data). Drawing reads no private row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from privplan.errors import PolicyError

if TYPE_CHECKING:
    import pandas as pd

    from privplan.views.shown import ShownResult, ShownSession


def _pyplot() -> Any:
    try:
        import matplotlib

        if not _interactive():
            matplotlib.use("Agg", force=False)  # (no screen: draw to files)
        import matplotlib.pyplot as plt
    except ImportError:
        raise PolicyError("plotting needs matplotlib: pip install 'privplan[plot]' "
                          "(or pip install matplotlib).") from None
    return plt


def _interactive() -> bool:
    import sys

    return "ipykernel" in sys.modules or bool(getattr(sys, "ps1", None))


def headline(value: Any) -> tuple[str, float]:
    """The parameter a budget plot draws: ε for pure and (ε, δ) DP (δ is in the label), ρ for
    zCDP, μ for Gaussian DP."""
    for attr, symbol in (("epsilon", "ε"), ("rho", "ρ"), ("mu", "μ")):
        if hasattr(value, attr):
            return symbol, float(getattr(value, attr))
    raise TypeError(f"not a privacy value: {value!r}")


# ============================================================================== results


class Panels(tuple[Any, ...]):
    """The Axes of a result drawn as one panel per column, in column order; ``.figure`` is the
    figure holding them (so ``res.plot().figure.savefig(...)`` works whatever was drawn)."""

    figure: Any


def plot_result(result: ShownResult, y: str | list[str] | None = None,
                x: str | list[str] | None = None, *, ax: Any = None,
                title: str | None = None) -> Any:
    """Bars of the noisy column(s) ``y`` over the group key(s) ``x``, each with its 95% interval
    as an error bar (per row where the result has one, else the column's half-width).

    ``y`` defaults to every noisy column, ``x`` to the columns that are not noisy (the group
    keys; a result without keys draws one bar per column). One column is drawn on one Axes,
    which is returned. Several columns get a panel (Axes) each, side by side with their own y
    axis — a count of 25,000 and an average of 80 share no useful scale — and a
    :class:`Panels` tuple of the Axes is returned; ``ax=`` (one Axes) draws them as grouped bars
    on that Axes instead, and returns it. New figures use constrained layout, so a saved file
    keeps the axis labels."""
    plt = _pyplot()
    df = result.df
    ys = _columns(result, y, default=[c for c in df.columns if c in result.accuracy])
    if not ys:
        raise PolicyError("plot: the result has no noisy column to draw; name one with y=")
    xs = _columns(result, x, default=[c for c in df.columns if c not in result.accuracy])
    labels = ([" / ".join(str(v) for v in row) for row in df[xs].itertuples(index=False)]
              if xs else [""] * len(df))
    heading = title if title is not None else "DP answer with 95% intervals"
    if ax is not None or len(ys) == 1:
        if ax is None:
            _, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(df) + 2), 3.5),
                                 layout="constrained")
        _bars(ax, result, ys, labels, xs)
        ax.set_title(heading)
        return ax
    width = max(3.0, 0.5 * len(df) + 1.5)
    fig, axes = plt.subplots(1, len(ys), figsize=(width * len(ys), 3.5), layout="constrained",
                             squeeze=False)
    panels = Panels(axes[0])
    panels.figure = fig
    for panel, col in zip(panels, ys):
        _bars(panel, result, [col], labels, xs)
        panel.set_title(col)
    fig.suptitle(heading)
    return panels


def _columns(result: ShownResult, given: str | list[str] | None, default: list[str]) -> list[str]:
    """The columns ``given`` (one name or a list), each checked to be in the result."""
    df = result.df
    cols = [given] if isinstance(given, str) else list(given) if given is not None else default
    for c in cols:
        if c not in df.columns:
            raise PolicyError(f"plot: no column {c!r} in the result; its columns are "
                              f"{', '.join(map(str, df.columns))}")
    return cols


def _bars(ax: Any, result: ShownResult, ys: list[str], labels: list[str], xs: list[str]) -> None:
    """Bars of the columns ``ys`` (grouped when several) with their intervals on ``ax``."""
    width = 0.8 / len(ys)
    positions = list(range(len(result.df)))
    for i, col in enumerate(ys):
        low, high = _interval(result, col)
        values = result.df[col].astype(float).to_numpy()
        err = None
        if low is not None and high is not None:
            err = [values - low, high - values]
        offsets = [p - 0.4 + width * (i + 0.5) for p in positions]
        ax.bar(offsets, values, width=width, yerr=err, capsize=3, label=col, alpha=0.85)
    longest = max((len(s) for s in labels), default=0)
    ax.set_xticks(positions)
    ax.set_xticklabels(labels, rotation=30 if longest > 8 else 0,
                       ha="right" if longest > 8 else "center")
    if xs:
        ax.set_xlabel(" / ".join(xs))
    if len(ys) > 1:
        ax.legend()
    else:
        ax.set_ylabel(ys[0])


def _interval(result: ShownResult, col: str) -> tuple[Any, Any]:
    """Per-row (low, high) of ``col``: its interval columns, else value ± half-width."""
    lo, hi = f"{col}_low", f"{col}_high"
    if lo in result.intervals.columns and hi in result.intervals.columns:
        return (result.intervals[lo].astype(float).to_numpy(),
                result.intervals[hi].astype(float).to_numpy())
    acc = result.accuracy.get(col)
    if acc is not None and acc.halfwidth is not None:
        values = result.df[col].astype(float).to_numpy()
        return values - acc.halfwidth, values + acc.halfwidth
    return None, None


# ============================================================================== budgets


def budget_history(session: ShownSession) -> pd.DataFrame:
    """One row per query in the session's ledger (other sessions' charges included): its id,
    SQL, its cost on its own, what it added to the composed total, the composed total after it,
    and the sequential total (the sum of the costs on their own: what an engine that ignores
    disjointness would have charged). A query that added nothing touched data no earlier query
    could be changed together with (or a cheaper subset of it): it was free.

    Costs are shown as the budget's headline parameter (ε, ρ or μ; for (ε, δ) the ε). Computing
    each query's cost alone solves one composition per entry (fast for hundreds of entries)."""
    import pandas as pd

    accountant = session.accountant  # (verifies and loads the ledger's entries)
    rows: list[dict[str, Any]] = []
    sequential = 0.0
    for entry in session.ledger.entries():
        alone = headline(accountant.alone(entry.mechanisms).cost)[1]
        sequential += alone
        rows.append({"query": entry.query_id, "sql": " ".join(entry.sql.split()),
                     "alone": alone, "added": headline(entry.marginal)[1],
                     "total": headline(entry.total_after)[1], "sequential": sequential})
    return pd.DataFrame(rows, columns=["query", "sql", "alone", "added", "total", "sequential"])


def plot_budget(session: ShownSession, *, ax: Any = None, title: str | None = None) -> Any:
    """The session's composed total after each query (general composition theorem) next to the
    sequential total, with the budget as a line; queries that added nothing are marked free.
    Returns the matplotlib Axes."""
    plt = _pyplot()
    history = budget_history(session)
    symbol, budget = headline(session.budget)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(5.0, 0.35 * len(history) + 3), 3.8),
                             layout="constrained")
    steps = list(range(1, len(history) + 1))
    # (each total holds from its query on; the last one is drawn a little past the last query)
    xs = [0, *steps, len(steps) + 0.6]

    def held(values: Any) -> list[float]:
        values = [float(v) for v in values]
        return [0.0, *values, values[-1] if values else 0.0]

    ax.step(xs, held(history["sequential"]), where="post", color="0.55", linestyle="--",
            label="sequential composition")
    ax.step(xs, held(history["total"]), where="post", color="C0",
            label="privplan (general composition)")
    ax.axhline(budget, color="C3", linewidth=1, label=f"budget {symbol}={budget:g}")
    free = [s for s, added in zip(steps, history["added"]) if added <= 0]
    if free:
        ax.scatter(free, [history["total"].iloc[s - 1] for s in free], color="C2", zorder=3,
                   label="free (disjoint data)")
    ax.set_xticks(steps)
    ax.set_xticklabels(history["query"], rotation=45 if len(steps) > 12 else 0)
    ax.set_xlabel("query")
    extra = ""
    if hasattr(session.budget, "delta"):
        extra = f" (δ={session.budget.delta:g})"
    ax.set_ylabel(f"{symbol} spent{extra}")
    ax.set_ylim(0, max(budget, float(history["sequential"].max()) if len(history) else 0) * 1.08)
    ax.legend(fontsize="small", loc="lower right")
    ax.set_title(title if title is not None else
                 f"budget: {len(free)} of {len(history)} queries free")
    return ax
