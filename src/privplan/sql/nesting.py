"""An outer query over DP subqueries: ``SELECT ... FROM (SELECT <DP query>) AS x ...``.

BigQuery and ZetaSQL write the DP query as a subquery (or a CTE) and post-process it outside:
filter, reshape, join its rows with each other, compute ratios. privplan answers the inner
query as usual (charged, noised) and runs the outer query over its *noisy answer only*, on the
post-processing connection that holds nothing else (:func:`privplan.engines.duckdb_engine.
post_process`) — so the outer query is post-processing, free of privacy cost, and cannot reach
a private row. The split is textual, on sqlglot's tokens, so the inner text (which may carry a
``WITH DIFFERENTIAL_PRIVACY`` clause sqlglot cannot parse) reaches the normal path unchanged.

Several DP subqueries may be post-processed together (``SELECT a.n - b.n FROM (<DP>) a,
(<DP>) b``, a UNION ALL of subqueries, several WITH queries, scalar subqueries): every outermost
parenthesised ``SELECT … FROM …`` is an inner query, answered on its own, and the outer query
reads their answers as ``__privplan_inner``, ``__privplan_inner1``, … A top-level ``UNION ALL``
of BigQuery clause queries (each branch a DP query with its own OPTIONS) is read the same way,
one inner query per branch. A statement is split only when one of its subqueries is in its FROM
clause or a WITH query and the outer query, with the subqueries replaced by their answers,
reads no table but them (and its own CTEs); everything else goes the normal way (where nested
private reads are refused). A WITH query that reads only other WITH queries (``r AS (SELECT …
FROM q)``) is not an inner query: it post-processes their answers, inside the outer query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from privplan.errors import PrivplanError, UnsupportedQueryError
from privplan.sql.bigquery import without_clauses
from privplan.sql.derive import Edit, extent, moved
from privplan.sql.parse import parse_statement, remember
from privplan.sql.tokens import matching_paren, with_depth

__all__ = ["INNER", "Nested", "has_clause", "inner_name", "split_outer"]

INNER = "__privplan_inner"  # the table the outer query reads: the inner query's noisy answer
_CLAUSE = ("DIFFERENTIAL_PRIVACY", "ANONYMIZATION")


def inner_name(i: int) -> str:
    """The table name under which the outer query reads the ``i``-th subquery's answer."""
    return INNER if i == 0 else f"{INNER}{i}"


@dataclass(frozen=True)
class Nested:
    """The inner DP queries' texts and the outer query over their answers (``inner_name(i)``)."""

    inners: tuple[str, ...]
    outer: str

    @property
    def inner(self) -> str:
        """The first (usually the only) inner query."""
        return self.inners[0]

    def clauses(self) -> list[bool]:
        """Whether each inner query carries its own DIFFERENTIAL_PRIVACY clause (budget)."""
        return [has_clause(q) for q in self.inners]


def has_clause(sql: str) -> bool:
    """Whether ``sql`` starts with ``SELECT WITH DIFFERENTIAL_PRIVACY`` (or ANONYMIZATION)."""
    words = sql.split(None, 3)
    return (len(words) >= 3 and words[0].upper() == "SELECT" and words[1].upper() == "WITH"
            and words[2].upper().startswith(_CLAUSE))


def split_outer(sql: str) -> Nested | None:
    """The inner DP queries and the outer query of ``sql``, or None when it is not an outer
    query over DP subqueries (see the module docstring)."""
    if not isinstance(sql, str) or sql.upper().count("SELECT") < 2:
        return None
    try:
        tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    except (TokenError, SqlglotParseError, ValueError):
        return None
    if not tokens or tokens[0].token_type not in (TokenType.SELECT, TokenType.WITH):
        return None
    wrapped = _wrap_clause_branches(sql, tokens)
    if wrapped is not None:
        sql = wrapped
        tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    ctes = _cte_names(tokens)
    whole = _whole(sql)
    spans = [(a, b) for a, b in _subqueries(tokens)
             if not _reads_only(sql, _cut(sql, tokens[a].end + 1, tokens[b].start), ctes, whole)]
    if not spans:
        return None
    inners, outer, last, in_from, cuts = [], [], 0, False, []
    for i, (start, end) in enumerate(spans):
        before = tokens[start - 1].token_type if start else None
        in_from = in_from or before == TokenType.FROM or (
            before == TokenType.ALIAS and tokens[0].token_type == TokenType.WITH)
        inners.append(sql[tokens[start].end + 1: tokens[end].start].strip())
        cuts.append(_cut(sql, tokens[start].end + 1, tokens[end].start))
        outer.append(sql[last: tokens[start].start] + f"(SELECT * FROM {inner_name(i)})")
        last = tokens[end].end + 1
    outer_sql = "".join(outer) + sql[last:]
    tree: exp.Expr | None = _outer_tree(whole, cuts) if whole is not None else None
    if tree is None:
        try:
            tree = sqlglot.parse_one(outer_sql, dialect="duckdb")
        except (SqlglotParseError, TokenError):
            return None  # the normal path reports the syntax error
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    names = {inner_name(i) for i in range(len(inners))}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name not in names and name not in ctes:
            if not in_from:
                return None  # e.g. a subquery in WHERE: the normal path refuses it
            raise UnsupportedQueryError(
                f"the outer query reads table '{table.name}' besides the DP subquery: an outer "
                "query may only post-process the subquery's noisy answer (its rows, keys and "
                "noisy values). Join inside the DP query, or send the other table's query on "
                "its own.")
    return Nested(inners=tuple(inners), outer=outer_sql)


def _cut(sql: str, start: int, stop: int) -> tuple[int, int]:
    """The character span of the inner query written in ``sql[start:stop]``, spaces trimmed."""
    text = sql[start:stop]
    return start + len(text) - len(text.lstrip()), start + len(text.rstrip())


def _whole(sql: str) -> tuple[str, exp.Expression] | None:
    """The statement's one parse (its DP clauses blanked, so positions hold) and the text
    parsed, or None when it does not parse as a whole: then each part is parsed on its own."""
    text = without_clauses(sql)
    try:
        return text, parse_statement(text)
    except (PrivplanError, SqlglotParseError, TokenError, ValueError, RecursionError):
        return None


def _outer_tree(whole: tuple[str, exp.Expression], cuts: list[tuple[int, int]]
                ) -> exp.Expression | None:
    """The outer query's tree, derived from the statement's one parse, each inner query's
    tree kept for its text (:func:`privplan.sql.parse.remember`): the inner queries are then
    planned from it, not parsed again. None when an inner query is not one node of it."""
    text, tree = whole[0], whole[1].copy()
    nodes = [_query_at(tree, a, b) for a, b in cuts]
    if any(node is None for node in nodes):
        return None
    for i, (node, (a, b)) in enumerate(zip(nodes, cuts)):
        assert node is not None
        part = text[a:b]
        remember(part, moved(node, part, [Edit(0, a, ""), Edit(b, len(text), "")]))
        node.replace(exp.select("*").from_(inner_name(i)))
    return tree


def _query_at(tree: exp.Expr, a: int, b: int) -> exp.Expr | None:
    """The query node (the body of a subquery or WITH query) written at ``[a, b)``: the one
    whose recorded tokens are exactly those recorded there (its first and last tokens may be
    unrecorded, e.g. ``)`` or ``DESC``); breadth first, so the outermost when a nested one
    spans the same recorded tokens."""
    inside = [(m["start"], m["end"]) for n in tree.walk()
              if (m := getattr(n, "_meta", None)) and "start" in m
              and a <= m["start"] and m["end"] < b]
    if not inside:
        return None
    wanted = (min(s for s, _ in inside), max(e for _, e in inside))
    for node in tree.find_all(exp.Subquery, exp.CTE):  # (breadth first: outermost first)
        body = node.this
        if isinstance(body, exp.Query) and extent(body) == wanted:
            return body
    return None


def _cte_names(tokens: list[Any]) -> set[str]:
    """The names of a leading WITH's queries (``name AS (`` at the top level)."""
    if not tokens or tokens[0].token_type != TokenType.WITH:
        return set()
    names = set()
    for i, (depth, tok) in enumerate(with_depth(tokens)):
        if (depth == 0 and i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.ALIAS
                and tokens[i + 2].token_type == TokenType.L_PAREN
                and tok.token_type in (TokenType.VAR, TokenType.IDENTIFIER)):
            names.add(tok.text.lower())
    return names


def _reads_only(sql: str, cut: tuple[int, int], ctes: set[str],
                whole: tuple[str, exp.Expression] | None) -> bool:
    """Whether the subquery at ``cut`` reads other WITH queries only (``my_table2 AS (SELECT
    … FROM my_table1)``): it then post-processes their answers and stays in the outer query.
    A subquery with a DIFFERENTIAL_PRIVACY clause is a DP query."""
    part = sql[cut[0]:cut[1]]
    if not ctes or without_clauses(part) != part:
        return False
    node = _query_at(whole[1], *cut) if whole is not None else None
    if node is None:
        try:
            node = sqlglot.parse_one(part, dialect="duckdb")
        except (SqlglotParseError, TokenError):
            return False
    tables = [t.name.lower() for t in node.find_all(exp.Table)]
    return bool(tables) and all(t in ctes for t in tables)


def _subqueries(tokens: list[Any]) -> list[tuple[int, int]]:
    """Token spans ``(`` … ``)`` of the outermost parenthesised SELECTs that read a table
    (a FROM at their own level); ``(SELECT 1)`` stays in the outer query."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(tokens) - 1:
        if not (tokens[i].token_type == TokenType.L_PAREN
                and tokens[i + 1].token_type == TokenType.SELECT):
            i += 1
            continue
        end = matching_paren(tokens, i)
        if end is None:
            return []
        if any(tok.token_type == TokenType.FROM and depth == 1
               for depth, tok in with_depth(tokens[i:end])):
            spans.append((i, end))
            i = end + 1
        else:
            i += 1
    return spans


def _wrap_clause_branches(sql: str, tokens: list[Any]) -> str | None:
    """``SELECT WITH DIFFERENTIAL_PRIVACY … UNION ALL SELECT WITH DIFFERENTIAL_PRIVACY …``
    (BigQuery: each branch its own DP query with its own budget) as an outer query over one
    subquery per branch: ``SELECT * FROM (b1) UNION ALL SELECT * FROM (b2) [ORDER BY …]``.
    None unless the statement is a top-level UNION ALL with a clause in some branch."""
    if tokens[0].token_type != TokenType.SELECT:
        return None
    depth, cuts, tail = 0, [], None
    for k, tok in enumerate(tokens):
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and tok.token_type == TokenType.UNION:
            if k + 1 >= len(tokens) or tokens[k + 1].token_type != TokenType.ALL:
                return None  # UNION (distinct): the normal path refuses it
            cuts.append(k)
        elif depth == 0 and cuts and tail is None and tok.token_type in (
                TokenType.ORDER_BY, TokenType.LIMIT):
            tail = k
    if not cuts:
        return None
    starts = [0] + [c + 2 for c in cuts]
    stops = cuts + [tail if tail is not None else len(tokens)]
    branches = [sql[tokens[a].start: tokens[b - 1].end + 1] for a, b in zip(starts, stops)]
    if not any(has_clause(b) for b in branches):
        return None
    rest = sql[tokens[tail].start:] if tail is not None else ""
    return " UNION ALL ".join(f"SELECT * FROM ({b})" for b in branches) + (
        f" {rest}" if rest else "")
