"""The notebook view of a policy (its ``_repr_html_``), and the HTML fragment basics every
notebook view shares (:mod:`privplan.views.html` builds the views of a result, an explanation
and a session on them).

The policy's view lives with the policy, below the views: the policy is core, and the core
imports no face. Like every view it returns one self-contained ``<div class="privplan-repr …">``
with its own scoped ``<style>``, passes every string through :func:`html.escape` and formats
every number itself; it reads the policy only (showing it loads no pandas).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Protocol

from privplan.policy.model import ColumnPolicy, TablePolicy

MAX_VALUES = 12
"""Public values of one column shown in a policy; the rest are counted."""

_STYLE = """<style>
.privplan-repr { font-size: 0.92em; line-height: 1.45; margin: 0.2em 0; }
.privplan-repr .pp-title { font-weight: 600; font-size: 1.05em; margin-bottom: 0.25em; }
.privplan-repr table { border-collapse: collapse; margin: 0.35em 0; }
.privplan-repr th, .privplan-repr td { padding: 0.15em 0.65em; vertical-align: top;
  border-bottom: 1px solid rgba(127, 127, 127, 0.3); text-align: right; }
.privplan-repr th { font-weight: 600; }
.privplan-repr .pp-text, .privplan-repr table.pp-fields th { text-align: left; }
.privplan-repr .pp-interval, .privplan-repr .pp-muted { opacity: 0.72; }
.privplan-repr .pp-interval { white-space: nowrap; font-size: 0.92em; }
.privplan-repr .pp-null { opacity: 0.55; font-style: italic; }
.privplan-repr .pp-warn { color: #c2410c; font-weight: 600; }
.privplan-repr .pp-ok { color: #15803d; }
.privplan-repr code { white-space: pre-wrap; word-break: break-word; }
.privplan-repr .pp-bar { display: inline-block; width: 14em; height: 0.8em;
  vertical-align: middle; background: rgba(127, 127, 127, 0.25); border-radius: 3px;
  overflow: hidden; margin-right: 0.5em; }
.privplan-repr .pp-bar > span { display: block; height: 100%; background: #3b82f6; }
.privplan-repr .pp-bar.pp-full > span { background: #c2410c; }
.privplan-repr ul { margin: 0.2em 0; padding-left: 1.4em; }
</style>"""


def _text(value: object) -> str:
    """Any value as escaped text (``html.escape`` also escapes quotes, so the result is safe
    inside an attribute too)."""
    return escape(str(value), quote=True)


def _number(value: float) -> str:
    """A float as a person reads it: whole numbers without ``.0``, large ones in full (a noisy
    sum's digits beyond the noise carry nothing, but an exponent hides its size), the rest to
    six significant digits (as the text ``explain`` shows them)."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) < 1e15 and (value.is_integer() or abs(value) >= 1e6):
        return f"{value:.0f}"
    return f"{value:.6g}"


def _count(n: int, noun: str) -> str:
    """``1 row``, ``2 rows``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _wrap(kind: str, body: Iterable[str]) -> str:
    return f'<div class="privplan-repr privplan-{kind}">{_STYLE}{"".join(body)}</div>'


def _list(items: Iterable[str], css: str) -> str:
    """An unordered list of plain strings (escaped), or nothing for no items."""
    lis = "".join(f"<li>{_text(item)}</li>" for item in items)
    return f'<ul class="{css}">{lis}</ul>' if lis else ""


class ShownPolicy(Protocol):
    """What the view reads of a policy (:class:`~privplan.policy.document.Policy`, which
    imports this module to show itself)."""

    @property
    def tables(self) -> Mapping[str, TablePolicy]: ...
    @property
    def notes(self) -> Sequence[str]: ...

    def private_tables(self) -> Sequence[TablePolicy]: ...
    def public_tables(self) -> Sequence[TablePolicy]: ...


def _column_row(col: ColumnPolicy) -> str:
    values = "" if col.public_values is None else ", ".join(
        str(v) for v in col.public_values[:MAX_VALUES])
    if col.public_values is not None and len(col.public_values) > MAX_VALUES:
        values += f", … {len(col.public_values) - MAX_VALUES} more"
    other = []
    if col.unit_level:
        other.append("unit level")
    if not col.nullable:
        other.append("never NULL")
    if col.resolution is not None:
        other.append(f"resolution {float(col.resolution):g}")
    bounds = ["" if b is None else _number(b) if isinstance(b, float) else str(b)
              for b in (col.lower, col.upper)]
    cells = [col.name, col.type, *bounds, values, ", ".join(other)]
    return "<tr>" + "".join(f'<td class="pp-text">{_text(c)}</td>' for c in cells) + "</tr>"


def _table_section(table: TablePolicy) -> str:
    name = f"<b>{_text(table.qualified_name)}</b>"
    if table.public:
        facts = ["public (not protected, free to read)"]
    else:
        unit = ("each row is one person" if table.is_row_level
                else f"privacy unit {table.privacy_unit}")
        hood = {"add_remove": "add/remove one unit (unbounded DP)",
                "replace": "replace one unit (bounded DP: the size is public)"}.get(
                    table.neighbourhood, table.neighbourhood)
        facts = ["private", unit, f"neighbourhood: {hood}"]
        if not table.is_row_level:
            facts.append(f"at most {table.max_rows_per_unit} rows per unit")
        if table.max_groups_per_unit is not None:
            facts.append(f"at most {table.max_groups_per_unit} groups per unit")
        if table.max_rows_per_group_per_unit is not None:
            facts.append(f"at most {table.max_rows_per_group_per_unit} rows per group per unit")
    for key in ("source", "rows"):
        if getattr(table, key) is not None:
            facts.append(f"{key}: {getattr(table, key)}")
    head = (f'<div class="pp-table" data-table="{_text(table.name)}">{name} · '
            f"{_text(' · '.join(facts))}</div>")
    if not table.columns:
        return head + '<div class="pp-muted">columns: as the database has them</div>'
    columns = "".join(_column_row(c) for c in table.columns.values())
    return (head + '<table class="pp-columns"><thead><tr>'
            + "".join(f'<th class="pp-text">{h}</th>' for h in
                      ("Column", "Type", "Lower", "Upper", "Public values", "Other"))
            + f"</tr></thead><tbody>{columns}</tbody></table>")


def policy_html(policy: ShownPolicy) -> str:
    """Each table: public or private, its privacy unit, neighbourhood and per-unit limits, and
    its columns with their types, bounds and public domains."""
    private = len(policy.private_tables())
    public = len(policy.public_tables())
    title = (f'<div class="pp-title">Privacy policy · {private} private, '
             f"{_count(public, 'public table')}</div>")
    return _wrap("policy", [title, *(_table_section(t) for t in policy.tables.values()),
                            _list((f"Note: {n}" for n in policy.notes), "pp-notes")])
