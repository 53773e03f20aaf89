"""Render a DuckDB-dialect engine statement for another engine (PostgreSQL, Spark).

(First cut: sqlglot's transpiler. The semantic rewrites come next.)
"""

from __future__ import annotations

import functools

import sqlglot


@functools.lru_cache(maxsize=1024)
def render(sql: str, dialect: str) -> str:
    """``sql`` (DuckDB dialect, built by privplan) as ``dialect`` must run it."""
    if dialect == "duckdb":
        return sql
    return sqlglot.transpile(sql, read="duckdb", write=dialect)[0]
