"""Where a node sits in the SQL text, for error messages that point at the spot."""

from __future__ import annotations

from sqlglot import exp


def position(node: exp.Expr) -> tuple[int, int] | None:
    """(line, column) of the first token of ``node`` that the parser recorded, if any."""
    best: tuple[int, int, int] | None = None
    for sub in node.walk():
        meta = getattr(sub, "_meta", None) or {}
        if "line" in meta and "start" in meta:
            cand = (meta["start"], meta["line"], meta["col"] - (meta["end"] - meta["start"]))
            if best is None or cand[0] < best[0]:
                best = cand
    if best is None:
        return None
    return best[1], max(best[2], 1)


def describe_location(sql: str, node: exp.Expr | None) -> str:
    """'line L, column C' plus the offending line with a caret, or '' when unknown."""
    if node is None:
        return ""
    pos = position(node)
    if pos is None:
        return ""
    line, col = pos
    lines = sql.splitlines() or [sql]
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return f"line {line}, column {col}:\n    {text}\n    {' ' * (col - 1)}^"


def with_location(message: str, sql: str, node: exp.Expr | None) -> str:
    loc = describe_location(sql, node)
    return f"{message}\n  at {loc}" if loc else message
