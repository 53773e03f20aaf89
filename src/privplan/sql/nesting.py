"""An outer query over a DP subquery: ``SELECT ... FROM (SELECT <DP query>) AS x ...``.

BigQuery and ZetaSQL write the DP query as a subquery (or a CTE) and post-process it outside:
filter, reshape, join its rows with each other, compute ratios. privplan answers the inner
query as usual (charged, noised) and runs the outer query over its *noisy answer only*, on the
post-processing connection that holds nothing else (:func:`privplan.engines.duckdb_engine.
post_process`) — so the outer query is post-processing, free of privacy cost, and cannot reach
a private row. The split is textual, on sqlglot's tokens, so the inner text (which may carry a
``WITH DIFFERENTIAL_PRIVACY`` clause sqlglot cannot parse) reaches the normal path unchanged.

A statement is split only when it has exactly one parenthesised ``SELECT``, in its FROM clause
or as its WITH query, and the outer query, with that subquery replaced by the inner answer,
reads no table but it (and its own CTEs); everything else goes the normal way (where nested
private reads are refused).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from privplan.errors import UnsupportedQueryError

__all__ = ["INNER", "Nested", "split_outer"]

INNER = "__privplan_inner"  # the table the outer query reads: the inner query's noisy answer


@dataclass(frozen=True)
class Nested:
    """The inner DP query's text and the outer query over ``INNER``."""

    inner: str
    outer: str


def split_outer(sql: str) -> Nested | None:
    """The inner and outer queries of ``sql``, or None when it is not an outer query over one
    DP subquery (see the module docstring)."""
    if not isinstance(sql, str) or sql.upper().count("SELECT") < 2:
        return None
    try:
        tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    except (TokenError, SqlglotParseError, ValueError):
        return None
    opens = [i for i in range(len(tokens) - 1)
             if tokens[i].token_type == TokenType.L_PAREN
             and tokens[i + 1].token_type == TokenType.SELECT]
    if len(opens) != 1 or not tokens or tokens[0].token_type not in (TokenType.SELECT,
                                                                      TokenType.WITH):
        return None
    start = opens[0]
    before = tokens[start - 1].token_type if start else None
    in_from = before == TokenType.FROM
    in_cte = (before == TokenType.ALIAS and tokens[0].token_type == TokenType.WITH
              and start >= 3)
    if not (in_from or in_cte):
        return None  # e.g. a subquery in WHERE: the normal path refuses it
    depth, end = 0, None
    for j in range(start, len(tokens)):
        if tokens[j].token_type == TokenType.L_PAREN:
            depth += 1
        elif tokens[j].token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                end = j
                break
    if end is None:
        return None
    inner = sql[tokens[start].end + 1: tokens[end].start]
    outer = (sql[: tokens[start].start] + f"(SELECT * FROM {INNER})"
             + sql[tokens[end].end + 1:])
    try:
        tree = sqlglot.parse_one(outer, dialect="duckdb")
    except (SqlglotParseError, TokenError):
        return None  # the normal path reports the syntax error
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name != INNER and name not in ctes:
            raise UnsupportedQueryError(
                f"the outer query reads table '{table.name}' besides the DP subquery: an outer "
                "query may only post-process the subquery's noisy answer (its rows, keys and "
                "noisy values). Join inside the DP query, or send the other table's query on "
                "its own.")
    return Nested(inner=inner, outer=outer)
