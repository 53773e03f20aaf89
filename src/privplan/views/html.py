"""HTML views of a result, an explanation, a policy and a session, for notebooks.

Jupyter shows an object through its ``_repr_html_`` method; the four classes call the functions
here (imported only then, so ``import privplan`` stays light). Each function takes the object
and returns one self-contained HTML fragment: a ``<div class="privplan-repr …">`` with its own
small ``<style>`` block, scoped by class so that it does not restyle the rest of the notebook.

Every string that reaches the page passes through :func:`html.escape` — table and column names
come from the policy and group keys from the data, so a key such as ``<script>`` must show as
text, never become markup. Numbers are formatted here too, never inserted raw.

Nothing here reads private data: a result's table and intervals are already released, and an
explanation, a policy and a session's totals come from query text, the policy and the ledger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

# (the policy's view, and the fragment basics every view shares, live with the policy: the
# policy is core, and the core imports no face; policy_html is named here as before)
from privplan.policy.html import _count, _list, _number, _text, _wrap, policy_html

if TYPE_CHECKING:
    from privplan.views.shown import (
        ShownExplanation,
        ShownMechanism,
        ShownResult,
        ShownSession,
    )

__all__ = ["MAX_ROWS", "explanation_html", "policy_html", "result_html", "session_html"]

MAX_ROWS = 50
"""Rows of a result shown in a notebook; the rest are counted ("… N more rows")."""


# ============================================================================== formatting

_FLOATS = ("float16", "float32", "float64", "longdouble")
"""numpy float types by name (float64 is a ``float``; the others are not)."""


def _is_null(value: object) -> bool:
    """None, NaN, pandas' NA and NaT — checked without importing pandas (a policy or a session
    view must not load it)."""
    if value is None:
        return True
    if isinstance(value, float) or type(value).__name__ in _FLOATS:
        return math.isnan(float(value))  # type: ignore[arg-type]
    return type(value).__name__ in ("NAType", "NaTType")


def _value(value: object) -> str:
    """One released value as escaped HTML (NULL shown as such)."""
    if _is_null(value):
        return '<span class="pp-null">NULL</span>'
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return _text(bool(value))
    if isinstance(value, float) or type(value).__name__ in _FLOATS:
        return _text(_number(float(value)))  # type: ignore[arg-type]
    return _text(value)


def _cost(value: object) -> str:
    """A privacy value (``ε=1, δ=1e-06``) as escaped text."""
    describe = getattr(value, "describe", None)
    return _text(describe() if callable(describe) else value)


def _fields(rows: Sequence[tuple[str, str]], css: str = "pp-fields") -> str:
    """A two-column table of (label, already-escaped HTML value)."""
    cells = "".join(f"<tr><th>{_text(label)}</th><td class=\"pp-text\">{value}</td></tr>"
                    for label, value in rows)
    return f'<table class="{css}"><tbody>{cells}</tbody></table>'


# ============================================================================== result


def result_html(result: ShownResult, max_rows: int = MAX_ROWS) -> str:
    """The released table, each noisy value next to its 95% interval, at most ``max_rows``
    rows; the query's cost and how each column was noised.

    The intervals are :meth:`Result.with_intervals`'s ``<col>_low``/``<col>_high`` columns,
    shown as one ``[low, high]`` cell after the value; the cell's ``data-column`` attribute
    keeps their names, so the page and the DataFrame name the same things."""
    full = result.with_intervals()
    rows = len(full)
    names = [str(c) for c in full.columns]
    answer = {str(c) for c in result.df.columns}
    # the layout, by position (a query may name two columns alike): a value, or an interval
    # made of the `<c>_low` and `<c>_high` that with_intervals() put after `<c>` (never a
    # column of the answer itself that happens to be called so)
    layout: list[tuple[str, int]] = []
    j = 0
    while j < len(names):
        if (j > 0 and j + 1 < len(names) and names[j] not in answer
                and names[j] == f"{names[j - 1]}_low" and names[j + 1] == f"{names[j - 1]}_high"):
            layout.append(("interval", j))
            j += 2
        else:
            layout.append(("value", j))
            j += 1

    head = []
    for kind, j in layout:
        if kind == "interval":
            c = _text(names[j - 1])
            head.append(f'<th class="pp-interval" data-column="{c}_low {c}_high" '
                        f'title="95% interval">{c} 95% interval</th>')
        else:
            css = "" if names[j] in result.accuracy else "pp-text"
            head.append(f'<th class="{css}" data-column="{_text(names[j])}">'
                        f"{_text(names[j])}</th>")
    body = []
    for row in full.iloc[:max_rows].itertuples(index=False, name=None):
        cells = []
        for kind, j in layout:
            if kind == "interval":
                low, high = row[j], row[j + 1]
                inner = ('<span class="pp-null">—</span>' if _is_null(low) or _is_null(high)
                         else f"[{_value(low)}, {_value(high)}]")
                cells.append(f'<td class="pp-interval">{inner}</td>')
            else:
                css = "" if names[j] in result.accuracy else "pp-text"
                cells.append(f'<td class="{css}">{_value(row[j])}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    if rows > max_rows:
        body.append(f'<tr class="pp-more"><td class="pp-text pp-muted" colspan="{len(head)}">'
                    f"… {rows - max_rows} more rows ({rows} in all; <code>.df</code> has them)"
                    "</td></tr>")

    title = (f'<div class="pp-title">DP result · {_count(rows, "row")} · '
             f"cost {_cost(result.cost)}</div>")
    cost = ("<div>Cost: <b>" + _cost(result.cost) + "</b> added to the session's composed "
            "total (the query alone composes to " + _cost(result.query_cost) + "). Values are "
            "noisy; each interval holds the exact answer with 95% probability.</div>")
    table = (f'<table class="pp-answer"><thead><tr>{"".join(head)}</tr></thead>'
             f"<tbody>{''.join(body)}</tbody></table>")
    return _wrap("result", [title, table, cost, _noise(result),
                            _list(result.notes, "pp-notes")])


def _noise(result: ShownResult) -> str:
    """How each column was noised (its mechanism, std and 95% half-width), and the query's
    mechanisms in a collapsed ``<details>`` block."""
    items = []
    for name, acc in result.accuracy.items():
        spread = []
        if acc.std is not None:
            spread.append(f"std {_number(float(acc.std))}")
        if acc.halfwidth is not None:
            spread.append(f"95% ±{_number(float(acc.halfwidth))}")
        extra = f" ({', '.join(spread)})" if spread else ""
        items.append(f"<li><b>{_text(name)}</b>: {_text(acc.method)}{_text(extra)}</li>")
    out = f'<div>Noise:</div><ul class="pp-noise">{"".join(items)}</ul>' if items else ""
    explanation = result.explanation
    if explanation is not None and getattr(explanation, "mechanisms", None):
        out += ("<details><summary>How it was computed ("
                f"{_count(len(explanation.mechanisms), 'mechanism')})</summary>"
                f"{_mechanisms(explanation.mechanisms)}</details>")
    return out


# ============================================================================== explain


def _mechanisms(mechanisms: Sequence[ShownMechanism]) -> str:
    """One row per mechanism (sensitivity and noise in the column's units, as the text form
    shows them), then a row of its notes and relations to earlier queries."""
    head = ("<tr><th class=\"pp-text\">Mechanism</th><th class=\"pp-text\">Aggregate</th>"
            "<th class=\"pp-text\">Region</th><th>Sensitivity</th><th class=\"pp-text\">Noise"
            "</th><th>Std</th><th>95% ±</th><th class=\"pp-text\">Cost</th></tr>")
    rows = []
    for m in mechanisms:
        part = f" per group of ({m.partition})" if m.partition else ""
        rank_error = getattr(m, "rank_error_95", None)
        if rank_error is not None:  # a quantile: its error is in rows of rank, not in units
            sensitivity = f"rank {m.sensitivity} (in 1/{m.label_denominator()} rows)"
            noise = f"{m.noise} over values {m.noise_grid()}"
            std, half = "—", f"within {rank_error:.3g} rows of rank"
        else:
            sensitivity = f"{m.sensitivity_in_units:.6g}"
            noise = m.noise_in_units()
            if m.threshold is not None:
                noise += f", released if noisy count >= {m.threshold}"
            if m.step != 1:
                noise += f"; on a grid of step {float(m.step):g}"
            std = "—" if m.noise_std is None else f"{m.noise_std:.3g}"
            half = "—" if m.halfwidth_95 is None else f"{m.halfwidth_95:.3g}"
        rows.append(
            f'<tr class="pp-mechanism"><td class="pp-text"><code>{_text(m.id)}</code></td>'
            f'<td class="pp-text">{_text(m.label + part)}</td>'
            f'<td class="pp-text"><code>{_text(m.region)}</code></td>'
            f"<td>{_text(sensitivity)}</td><td class=\"pp-text\">{_text(noise)}</td>"
            f"<td>{_text(std)}</td><td>{_text(half)}</td>"
            f'<td class="pp-text">{_cost(m.cost)}</td></tr>')
        extra = [f"note: {n}" for n in m.notes] + list(m.relations)
        if extra:
            rows.append(f'<tr class="pp-sub"><td></td><td class="pp-text pp-muted" colspan="7">'
                        f"{'<br>'.join(_text(e) for e in extra)}</td></tr>")
    return (f'<table class="pp-mechanisms"><thead>{head}</thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def explanation_html(explanation: ShownExplanation) -> str:
    """What ``str(explanation)`` says, as a page: the query, its composed cost, the session's
    total before and after against the budget, each mechanism, and the worst case (the
    neighbouring pair of databases that costs most)."""
    e = explanation
    status = ('<span class="pp-ok">within the budget</span>' if e.within_budget else
              '<span class="pp-warn">EXCEEDS THE BUDGET: would be refused</span>')
    fields = [
        ("Query cost (composed)", (f"<b>{_cost(e.query_cost)}</b> "
                                   f'<span class="pp-muted">[{_text(e.query_rule)}]</span>')),
        ("Marginal cost against the ledger", f"<b>{_cost(e.marginal)}</b>"),
        ("Session total", (f"{_cost(e.total_before)} → <b>{_cost(e.projected_total)}</b> of "
                           f"budget {_cost(e.budget)}: {status}")),
        ("Worst case", _text(e.witness)),
    ]
    return _wrap("explanation", [
        '<div class="pp-title">Explain (nothing spent)</div>',
        f"<div><code>{_text(' '.join(e.sql.split()))}</code></div>",
        _fields(fields, "pp-fields pp-summary"),
        _mechanisms(e.mechanisms),
        _list((f"Note: {n}" for n in e.notes), "pp-notes"),
    ])


# ============================================================================== session


def _bars(spent: Any, budget: Any) -> str:
    """One bar per additive weight of the budget (ε; ε and δ; ρ; μ² for Gaussian DP): the
    share already composed. For GDP the weight is μ², what composition adds, so the bar and
    the remaining μ agree (μ = 0.5 of 1 spent leaves μ ≈ 0.87: a quarter of the budget)."""
    symbols = budget.weight_symbols()
    out = []
    for i, (used, total) in enumerate(zip(spent.weights(), budget.weights(), strict=True)):
        share = 1.0 if total == 0 and used > 0 else (0.0 if total == 0 else float(used / total))
        share = min(max(share, 0.0), 1.0)
        symbol = symbols[i] if i < len(symbols) else f"w{i}"
        full = " pp-full" if share >= 1 else ""
        out.append(f'<div><span class="pp-bar{full}" role="meter" aria-valuemin="0" '
                   f'aria-valuemax="100" aria-valuenow="{share * 100:.0f}">'
                   f'<span style="width: {share * 100:.1f}%"></span></span>'
                   f"{share * 100:.0f}% of {_text(symbol)} used</div>")
    return "".join(out)


def session_html(session: ShownSession) -> str:
    """The budget (kind, total, spent, remaining, with a bar), how many queries the ledger has
    answered, where the ledger lives, and the policy's tables. Reads the ledger (as
    :meth:`Session.spent` does) but never the data; a ledger that cannot be read is shown as
    such rather than raised, since a notebook calls this just to display the session."""
    from privplan.errors import PrivplanError

    budget = getattr(session, "budget", None)
    if budget is None:
        return _wrap("session", ['<div class="pp-title">privplan session (not open)</div>'])
    ledger = getattr(session, "ledger", None)
    path = getattr(ledger, "path", None)
    where = (f"<code>{_text(path)}</code>" if path is not None
             else "in memory (forgotten when the session ends)")
    rows: list[tuple[str, str]] = [
        ("Budget", (f'<b>{_cost(budget)}</b> <span class="pp-muted">'
                    f"({_text(type(budget).__name__)})</span>"))]
    try:
        spent = session.spent()
        remaining = session.remaining()
    except PrivplanError as err:
        rows.append(("Spent", f'<span class="pp-warn">cannot read the ledger: {_text(err)}</span>'))
    else:
        rows += [("Spent", f"<b>{_cost(spent)}</b>{_bars(spent, budget)}"),
                 ("Remaining", f"<b>{_cost(remaining)}</b>")]
    queries = _answered(ledger)
    if queries is not None:
        rows.append(("Queries answered", _text(queries)))
    rows.append(("Ledger", where))
    policy = getattr(session, "policy", None)
    if policy is not None:
        tables = ", ".join(f"{t.qualified_name} ({'public' if t.public else 'private'})"
                           for t in policy.tables.values())
        rows.append(("Tables", _text(tables)))
    title = (f'<div class="pp-title">privplan session · {_text(type(budget).__name__)} budget '
             f"{_cost(budget)}</div>")
    return _wrap("session", [title, _fields(rows, "pp-fields pp-budget")])


def _answered(ledger: Any) -> int | None:
    """Queries charged to the ledger (by this session and any other sharing its file), from
    the id the next one would get (``q3`` after two); None if the ledger cannot tell."""
    try:
        next_id = str(ledger.next_query_id())
        return int(next_id.removeprefix("q")) - 1
    except Exception:  # noqa: BLE001 - a display helper: an unreadable ledger shows no count
        return None
