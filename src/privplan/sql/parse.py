"""Parse one SQL statement with sqlglot, turning parser failures into privplan errors."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from privplan.analysis.literal_lists import ListFallback, literal_lists_off, literal_lists_on
from privplan.errors import ParseError, UnsupportedQueryError
from privplan.process_memory import kept
from privplan.sql.aggregates import SPELLINGS
from privplan.sql.grouping_sets import expand_grouping_sets
from privplan.sql.locate import with_location
from privplan.sql.long_lists import ScannedLists, attach_lists, scan_lists
from privplan.sql.validate import check_depth

DEFAULT_DIALECT = "duckdb"
P = ParamSpec("P")
R = TypeVar("R")


def parse_statement(sql: str, dialect: str = DEFAULT_DIALECT) -> exp.Expression:
    """Parse exactly one statement. The returned tree is private to the caller (sqlglot mutates)."""
    if not isinstance(sql, str) or not sql.strip():
        raise ParseError("empty query: pass one SELECT statement, e.g. SELECT COUNT(*) FROM t")
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ParseError(
            f"the SQL is not valid Unicode at character {err.start + 1} (an unpaired surrogate "
            f"{sql[err.start]!r}): pass text that encodes as UTF-8.") from None
    key = (sql, dialect, literal_lists_on())
    tree = _TREES.get(key)
    if tree is None:
        tree = _TREES[key] = _parsed_or_scanned(sql, dialect)
        _keep_few()
    else:
        _TREES.move_to_end(key)
    return tree.copy()


def _parsed_or_scanned(sql: str, dialect: str) -> exp.Expression:
    scanned = scan_lists(sql) if dialect == DEFAULT_DIALECT else None
    if scanned is not None:
        tree = _parse_scanned(sql, scanned, dialect)
        if tree is not None:
            return tree
    return _parsed(sql, dialect)


def _keep_few() -> None:
    while len(_TREES) > _KEPT:
        _TREES.popitem(last=False)


_KEPT = 64
_TREES: OrderedDict[tuple[str, str, bool], exp.Expression] = OrderedDict()
"""Statements' trees by text, most recently used last: the front doors a query crosses (the
DP clause, BigQuery's per-group form, the per-unit split, the outer query's split) and the
planner read the same text, and each gets its own copy of one parse (a failed parse is not
kept: it raises again). Texts derived from a statement (its DP subqueries, the outer query over
a per-unit table) are kept with the part of the statement's tree they stand for
(:func:`remember`)."""
kept(__name__, _TREES.clear)


def remember(sql: str, tree: exp.Expr, dialect: str = DEFAULT_DIALECT) -> None:
    """Keep ``tree`` as the parse of ``sql``: the part of a parsed statement that the derived
    text ``sql`` spells exactly, its positions moved to the text (:mod:`privplan.sql.derive`;
    ``tests/sql/test_derive.py`` checks each derivation against sqlglot parsing the text)."""
    key = (sql, dialect, literal_lists_on())
    _TREES[key] = cast(exp.Expression, tree.copy())  # (a statement's part: a node)
    _TREES.move_to_end(key)
    _keep_few()


def _parsed(sql: str, dialect: str) -> exp.Expression:
    """One statement's tree, parsed and finished (TOP, aggregate spellings, GROUPING SETS)."""
    sql, top = _top(sql, dialect)
    try:
        statements = [s for s in sqlglot.parse(sql, dialect=dialect) if s is not None]
    except SqlglotParseError as err:
        first = err.errors[0] if err.errors else {}
        line, col = first.get("line"), first.get("col")
        where = f" at line {line}, column {col}" if line else ""
        desc = first.get("description", str(err))
        hint = ""
        if "number of provided arguments" in desc:
            hint = (" A function was given more arguments than it takes: write COUNT(x), "
                    "SUM(x), AVG(x), VAR_POP(x) with one column, and a quantile as "
                    "QUANTILE_CONT(x, 0.9) (or BigQuery's PERCENTILE_CONT(x, 0.9) in a "
                    "DIFFERENTIAL_PRIVACY query).")
        raise ParseError(
            f"could not parse the SQL{where}: {desc}. Check the syntax near "
            f"'{first.get('highlight', '')}' (dialect: {dialect}); privplan must parse a "
            f"query to check it before anything runs.{hint}"
        ) from None
    except TokenError as err:
        raise ParseError(f"could not read the SQL: {err} (dialect: {dialect})") from None
    except RecursionError:
        raise UnsupportedQueryError(
            "query nested too deeply to parse: flatten its expressions (e.g. x IN (...) "
            "instead of long OR chains, fewer nested parentheses).") from None
    if not statements:
        raise ParseError("empty query: pass one SELECT statement")
    if len(statements) > 1:
        raise UnsupportedQueryError(
            with_location(
                f"{len(statements)} statements given; privplan answers one statement at a time "
                "(a second statement could change data or settings). Send them one by one.",
                sql,
                statements[1],
            )
        )
    return _finish(sql, cast(exp.Expression, statements[0]), top)  # (a statement: a node)


def with_list_fallback(method: Callable[P, R]) -> Callable[P, R]:
    """Run ``method`` (planning) with long literal lists read as a whole, and again with them
    as literal nodes if a part of planning cannot handle one exactly (:class:`ListFallback`)."""
    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except ListFallback:
            with literal_lists_off():
                return method(*args, **kwargs)
    return run


def _finish(sql: str, tree: exp.Expression, top: int | None) -> exp.Expression:
    check_depth(sql, tree)
    if top is not None:
        _apply_top(sql, tree, top)
    _aggregate_spellings(tree)
    _one_argument_counts(sql, tree)
    return expand_grouping_sets(tree)


def _parse_scanned(sql: str, scanned: ScannedLists, dialect: str) -> exp.Expression | None:
    """The statement parsed with its long literal lists read as a whole
    (:mod:`privplan.sql.long_lists`), or None: then parse it as written (which also gives
    every error its exact position)."""
    text, top = _top(scanned.text, dialect)
    try:
        statements = [s for s in sqlglot.parse(text, dialect=dialect) if s is not None]
    except (SqlglotParseError, TokenError, RecursionError):
        return None
    if len(statements) != 1:
        return None
    tree = cast(exp.Expression, statements[0])
    if not attach_lists(tree, scanned, sql):
        return None
    return _finish(sql, tree, top)


def _one_argument_counts(sql: str, tree: exp.Expr) -> None:
    """``COUNT(a, b)`` parses (sqlglot keeps the extra arguments aside) but is no count
    privplan or DuckDB computes: refuse it rather than count ``a`` alone."""
    for node in tree.find_all(exp.Count):
        if node.args.get("expressions"):
            raise UnsupportedQueryError(with_location(
                "COUNT with several arguments refused: COUNT takes one column, or *; this is "
                "no count DuckDB computes, and counting the first column alone would answer "
                "another question. Write "
                "COUNT(a) (rows where a is not NULL), COUNT(*), or COUNT(DISTINCT a).",
                sql, node))


def _aggregate_spellings(tree: exp.Expression) -> None:
    """Rewrite the other spellings of registered aggregates (:data:`privplan.sql.aggregates.
    SPELLINGS`: SmartNoise SQL's VAR(x) and STD(x), which DuckDB has neither of) as the
    aggregate's node (VARIANCE(x) and STDDEV(x), sample statistics in both). A select item
    that is exactly such a call keeps its spelling as its name."""
    for node in list(tree.find_all(exp.Anonymous)):
        cls = SPELLINGS.get(node.name.lower())
        if cls is None or len(node.expressions) != 1:
            continue
        spelled = node.sql(dialect=DEFAULT_DIALECT)
        new = cls(this=node.expressions[0])
        parent = node.parent
        node.replace(new)
        if isinstance(parent, exp.Select) and new in parent.expressions:
            new.replace(exp.alias_(new.copy(), spelled, quoted=True))


def _top(sql: str, dialect: str) -> tuple[str, int | None]:
    """SmartNoise's ``SELECT TOP n ...``: the SQL without ``TOP n``, and n (None: no TOP).

    Read from the statement's first tokens only (so a TOP inside a string or a subquery is
    left alone); n must be a non-negative integer literal."""
    try:
        tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(sql)
    except (TokenError, ValueError):  # the parser reports the error with its location
        return sql, None
    i = 1 if tokens and tokens[0].token_type == TokenType.SELECT else None
    if i is None:
        return sql, None
    if i < len(tokens) and tokens[i].token_type == TokenType.DISTINCT:
        i += 1
    if i + 1 >= len(tokens) or tokens[i].text.upper() != "TOP":
        return sql, None
    number = tokens[i + 1]
    if number.token_type != TokenType.NUMBER or not number.text.isdigit():
        raise UnsupportedQueryError(
            f"SELECT TOP {number.text}: TOP needs a whole number of rows, e.g. SELECT TOP 10 ...")
    start, end = tokens[i].start, number.end + 1  # blanked, so error positions still hold
    return sql[:start] + " " * (end - start) + sql[end:], int(number.text)


def _apply_top(sql: str, tree: exp.Expression, n: int) -> None:
    if not isinstance(tree, exp.Select):
        raise UnsupportedQueryError("SELECT TOP n applies to one SELECT; use LIMIT n instead.")
    if tree.args.get("limit") is not None:
        raise UnsupportedQueryError(
            "SELECT TOP n together with LIMIT: say the number of rows once (TOP or LIMIT).")
    tree.set("limit", exp.Limit(expression=exp.Literal.number(n)))
