"""Trees of derived texts, taken from the one parse of the statement they come from.

A statement over DP subqueries, or over a per-unit pre-aggregation, is planned as several
texts: each inner query, and the outer query with the subquery replaced by a table name. Each
of those texts is a *splice* of the user's text (a slice of it, or it with spans replaced), so
its tree is the matching part of the statement's one tree, with the recorded source positions
moved to where they sit in the new text. :func:`privplan.sql.parse.remember` keeps such a tree
under its text, so planning the text later reads it instead of parsing it again: sqlglot's
parser runs once per statement, and an error in a part still points at its place in the part.

Positions are the parser's token metadata (``start``/``end`` offsets, ``line`` and ``col`` of
the token's last character, 1-based). A node whose token lies inside a replaced span has no
place in the new text; the derived trees never hold one (the span's subtree is what was cut).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from sqlglot import exp

E = TypeVar("E", bound=exp.Expr)

__all__ = ["Edit", "extent", "moved", "placed", "spliced"]


@dataclass(frozen=True)
class Edit:
    """``text[start:stop]`` replaced by ``new``."""

    start: int
    stop: int
    new: str


def spliced(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with every edit made (edits do not overlap; any order)."""
    out, last = [], 0
    for e in sorted(edits, key=lambda e: e.start):
        out.append(text[last:e.start])
        out.append(e.new)
        last = e.stop
    return "".join(out) + text[last:]


def moved(node: E, text: str, edits: Sequence[Edit]) -> E:
    """A copy of ``node`` (positions in the original text) with every recorded position moved
    to where it sits in ``text`` (the original with ``edits`` made). A position inside an
    edited span raises ``ValueError``: the caller derived the tree wrongly."""
    ordered = sorted(edits, key=lambda e: e.start)
    copy = node.copy()
    for sub in copy.walk():
        meta = getattr(sub, "_meta", None)
        if not meta or "start" not in meta:
            continue
        start, end = _offset(meta["start"], ordered), _offset(meta["end"], ordered)
        line_start = text.rfind("\n", 0, end) + 1
        sub._meta = {**meta, "start": start, "end": end,
                     "line": text.count("\n", 0, end) + 1, "col": end - line_start + 1}
    return copy


def placed(node: exp.Expr, text: str, start: int) -> None:
    """Record on ``node`` (a new token, e.g. a table name put in) that it is written at
    ``text[start:]``, as the parser would have: its last character's offset, line and column."""
    end = start + len(node.sql(dialect="duckdb")) - 1
    node._meta = {"line": text.count("\n", 0, end) + 1, "col": end - text.rfind("\n", 0, end),
                  "start": start, "end": end}


def _offset(position: int, edits: Sequence[Edit]) -> int:
    shift = 0
    for e in edits:
        if position < e.start:
            break
        if position < e.stop:
            raise ValueError(f"position {position} lies in an edited span")
        shift += len(e.new) - (e.stop - e.start)
    return position + shift


def extent(node: exp.Expr) -> tuple[int, int] | None:
    """The first and last offsets of the tokens recorded under ``node`` (None: none)."""
    spans = [(m["start"], m["end"]) for sub in node.walk()
             if (m := getattr(sub, "_meta", None)) and "start" in m]
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)
