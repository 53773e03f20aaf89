"""A query node's text, shortened, for a note or a message that quotes it.

The analysis quotes what it leaves unanalysed, and the SQL layer what it refuses, alike; the
helper lives here because the analysis imports nothing of :mod:`privplan.sql` (the SQL layer
builds on the analysis, not the other way round).

Privacy: it quotes the query's own text only, never a value read from a row.
"""

from __future__ import annotations

from sqlglot import exp


def snippet(node: exp.Expr, width: int = 60) -> str:
    """The node's SQL, shortened to ``width`` characters for a message."""
    text = node.sql(dialect="duckdb")
    return text if len(text) <= width else text[:width - 3] + "..."
