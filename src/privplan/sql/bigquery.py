"""BigQuery's differential-privacy syntax, accepted as a thin layer over privplan's own SQL.

BigQuery writes the privacy parameters into the query::

    SELECT WITH DIFFERENTIAL_PRIVACY
        OPTIONS(epsilon=1, delta=1e-5, max_groups_contributed=2, privacy_unit_column=patient_id)
        hospital, COUNT(*) FROM visits GROUP BY hospital

privplan reads such a query in two small steps before its normal parse:

1. :func:`split_dp_clause` finds ``WITH DIFFERENTIAL_PRIVACY [OPTIONS(...)]`` (or the legacy
   ``WITH ANONYMIZATION``) right after ``SELECT``, parses the options with sqlglot's tokenizer
   (numbers, strings, identifiers, NULL; option names case-insensitive) and returns the SQL with
   the clause cut out — every other byte unchanged — plus a :class:`DPOptions`.
2. :func:`rewrite_dp_aggregates` maps BigQuery's aggregate spellings to privplan's:
   ``ANON_COUNT``/``ANON_SUM``/``ANON_AVG``/``ANON_VAR_POP``/``ANON_STDDEV_POP``/
   ``ANON_PERCENTILE_CONT`` become ``COUNT``/``SUM``/``AVG``/``VAR_POP``/``STDDEV_POP``/
   ``PERCENTILE_CONT``; their ``CLAMPED BETWEEN lo AND hi`` and the newer
   ``contribution_bounds_per_group => (lo, hi)`` (COUNT, SUM, AVG) or
   ``contribution_bounds_per_row => (lo, hi)`` (VAR_POP, STDDEV_POP, PERCENTILE_CONT: each row
   clamped) arguments are removed from the text and returned as :class:`ContributionBounds`.

:func:`apply_dp_clause` then checks the options against the policy and turns them into the
query's budget. **The policy stays authoritative** (docs/FEATURES.md §1): options may restate it
or ask for less than it allows, never weaken it —

* ``privacy_unit_column`` must name the table's declared privacy unit (absent on a row-level
  table). A different column would be a different privacy guarantee than the one privplan
  enforces, so it is refused (PolicyError), in both directions. Left out, the policy's unit
  applies — the policy plays the part of BigQuery's privacy policy on a table or view, whose
  queries omit the option.
* ``max_groups_contributed`` (ZetaSQL: ``kappa``) may only be ≤ the policy's
  ``max_groups_per_unit``; the query's GROUP BY then keeps at most that many groups per unit
  (enforced by the rewrite, like the policy's bound) and is charged for it. On a row-level
  table every unit (a row) is in exactly one group, so any value ≥ 1 holds.
* On a row-level table, clamping bounds may restate or narrow the policy's bounds (narrower
  ones clamp this query's values); wider bounds would widen the declared range (PolicyError).
* On a table with a privacy unit, BigQuery's bounds are on a unit's *total* per group and its
  ``AVG`` is the average of per-unit averages: such queries (an ``AVG`` or explicit bounds) are
  answered per unit and group first, as BigQuery does
  (:mod:`privplan.sql.bigquery_per_group`).

ZetaSQL's spellings and test settings: ``kappa`` is ``max_groups_contributed``; ``delta = 1``
(privacy off in ZetaSQL's compliance tests), ``WITH REPORT(...)`` and the options privplan
takes from the policy instead (a ``group_selection_strategy`` other than ``PUBLIC_GROUPS``)
are refused, each with why and what to do. ``max_rows_contributed = m`` keeps at most m of a
unit's rows for the query (never more than the policy's ``max_rows_per_unit``).
``min_privacy_units_per_group = N`` raises partition selection's threshold by N - 1
(:func:`privplan.planning.costs._selection`). Public groups joined in the query (``RIGHT OUTER JOIN
(SELECT DISTINCT k FROM UNNEST([...])) USING (k)``) become a domain listed in the query text
(:mod:`privplan.sql.bigquery_public_groups`).

The budget: ``epsilon`` (and ``delta``) become the query's budget. In a pure-DP session a
``delta`` is satisfied trivially — privplan's pure ε-DP answer is (ε, δ)-DP for every δ ≥ 0 — so the
query is charged ``PureDP(epsilon)``. zCDP and Gaussian-DP sessions refuse (ε, δ) options: pass
``rho=`` / ``mu=`` instead (a conversion would be valid but is not implemented).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from fractions import Fraction
from itertools import pairwise
from typing import Any

from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from privplan.accounting.definitions import budget_keywords
from privplan.errors import ParseError, PolicyError, UnsupportedQueryError
from privplan.policy import Policy
from privplan.sql.aggregates import ANON, CONTRIBUTION_BOUNDS
from privplan.sql.bigquery_policy import (
    ContributionBounds,
    DPOptions,
    check_dp_options,
    per_query_clamps,
    private_tables,
)
from privplan.sql.bigquery_public_groups import public_groups_as_in_list
from privplan.sql.parse import parse_statement
from privplan.sql.tokens import matching_paren, with_depth

__all__ = [
    "KNOWN_OPTIONS",
    "ContributionBounds",
    "DPOptions",
    "apply_dp_clause",
    "check_dp_options",
    "clause_budget",
    "explain_bigquery",
    "rewrite_dp_aggregates",
    "split_dp_clause",
]

KNOWN_OPTIONS = ("epsilon", "delta", "max_groups_contributed", "privacy_unit_column",
                 "group_selection_strategy", "min_privacy_units_per_group",
                 "max_rows_contributed")
_ALIASES = {"kappa": "max_groups_contributed"}  # ZetaSQL's ANONYMIZATION spelling
_GROUP_SELECTION = {"PUBLIC_GROUPS"}  # LAPLACE_THRESHOLD is BigQuery's own partition selection
_CLAUSE_KEYWORDS = ("DIFFERENTIAL_PRIVACY", "ANONYMIZATION")
_QUICK = re.compile(r"differential_privacy|anonymization|anon_|contribution_bounds_per_(group|row)",
                    re.IGNORECASE)
_ANON = ANON  # (ANON_COUNT → COUNT, ...: each aggregate's row says its ANON_ names)
_BOUNDED = CONTRIBUTION_BOUNDS["per_group"]  # (COUNT, SUM, AVG)
_PER_ROW = CONTRIBUTION_BOUNDS["per_row"]  # (VAR_POP, STDDEV_POP, PERCENTILE_CONT)
_REFUSED_ANON = {
    "ANON_QUANTILES": "it returns an array of n + 1 quantiles; privplan answers one quantile "
    "per aggregate. Write one PERCENTILE_CONT(x, q) per quantile you need.",
}
_BUDGET_KEYS = (*budget_keywords(), "budget")


# ---------------------------------------------------------------------------------- tokens


def _tokens(sql: str) -> list[Token]:
    try:
        return list(DuckDB().tokenizer_class().tokenize(sql))
    except TokenError as err:
        raise ParseError(f"could not read the SQL: {err}") from None


def _where(sql: str, offset: int) -> str:
    line = sql.count("\n", 0, offset) + 1
    col = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    text = sql.splitlines()[line - 1] if sql.splitlines() else sql
    return f"\n  at line {line}, column {col}:\n    {text}\n    {' ' * (col - 1)}^"


def _word(tok: Token) -> str:
    """The upper-cased text of an unquoted word token (a name or keyword), else ''."""
    if tok.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
        return ""
    return tok.text.upper() if tok.text.isidentifier() else ""


def _matching(tokens: list[Token], open_index: int) -> int:
    close = matching_paren(tokens, open_index)
    if close is None:
        raise ParseError("could not parse the SQL: a '(' is never closed")
    return close


def _split_top(tokens: list[Token], lo: int, hi: int) -> list[list[Token]]:
    """Tokens in [lo, hi) split on commas at depth 0."""
    parts: list[list[Token]] = [[]]
    for depth, tok in with_depth(tokens[lo:hi]):
        if tok.token_type == TokenType.COMMA and depth == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


_NUMERIC_LITERAL = re.compile(r"\s*([+-]?)\s*((?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*")


def _number(sql: str, toks: list[Token]) -> Fraction | None:
    """A (signed) numeric literal, exactly; None if ``toks`` is not one."""
    if not toks:
        return None
    m = _NUMERIC_LITERAL.fullmatch(sql[toks[0].start:toks[-1].end + 1])
    if m is None:
        return None
    _, _, exponent = m.group(2).lower().partition("e")
    if exponent and abs(int(exponent)) > 400:  # Fraction would compute 10**exponent exactly
        return Fraction(10) ** 400 if int(exponent) > 0 else Fraction(0)
    value = Fraction(m.group(2))
    return -value if m.group(1) == "-" else value


# ---------------------------------------------------------------------------- the clause


_REPORT = re.compile(r"\bWITH\s+REPORT\b", re.IGNORECASE)


def _refuse_report(sql: str) -> None:
    """ZetaSQL's ``WITH REPORT(FORMAT=...)`` (confidence intervals in a proto or JSON column)."""
    try:
        tokens = _tokens(sql)
    except ParseError:
        return  # not SQL we can read: the parser reports it
    for tok, nxt in pairwise(tokens):
        if tok.token_type == TokenType.WITH and nxt.text.upper() == "REPORT":
            raise UnsupportedQueryError(
                "WITH REPORT is not supported: privplan does not return a report column; the "
                "noise of every answer and its 95% intervals are in the result "
                "(Result.accuracy, Result.intervals; `privplan query --json`). Remove "
                "WITH REPORT(...)." + _where(sql, tok.start))


def blanked(text: str) -> str:
    """``text`` as spaces, its line breaks kept (positions after it stay where they were)."""
    return "".join(c if c == "\n" else " " for c in text)


def without_clauses(sql: str) -> str:
    """``sql`` with every ``WITH DIFFERENTIAL_PRIVACY [OPTIONS(...)]`` clause right after a
    ``SELECT`` blanked (:func:`blanked`): the text sqlglot parses for a statement whose DP
    subqueries carry their own clauses (:mod:`privplan.sql.nesting`). Unchanged when it has none
    or cannot be tokenized (the normal path reports that)."""
    if not isinstance(sql, str) or not _QUICK.search(sql):
        return sql
    try:
        tokens = _tokens(sql)
    except ParseError:
        return sql
    out, last = [], 0
    for i, tok in enumerate(tokens[:-1]):
        nxt = tokens[i + 1]
        if (tok.token_type != TokenType.WITH or i == 0
                or tokens[i - 1].token_type != TokenType.SELECT
                or nxt.token_type not in (TokenType.VAR, TokenType.IDENTIFIER)
                or nxt.text.upper() not in _CLAUSE_KEYWORDS):
            continue
        end = i + 1
        if (i + 3 < len(tokens) and tokens[i + 2].text.upper() == "OPTIONS"
                and tokens[i + 3].token_type == TokenType.L_PAREN):
            close = matching_paren(tokens, i + 3)
            if close is None:
                return sql
            end = close
        out += [sql[last:tok.start], blanked(sql[tok.start:tokens[end].end + 1])]
        last = tokens[end].end + 1
    return "".join(out) + sql[last:]


def split_dp_clause(sql: str) -> tuple[str, DPOptions | None]:
    """Cut ``WITH DIFFERENTIAL_PRIVACY [OPTIONS(...)]`` out of ``sql``.

    Returns ``(sql_without_clause, options)``; ``(sql, None)`` when there is no clause. Only the
    clause's own characters (from ``WITH`` to the closing parenthesis of ``OPTIONS``) are
    blanked (spaces, line breaks kept); everything else is byte-identical and in its place, so
    positions in the result are positions in ``sql`` (and the result is the same slice of a
    statement whose clauses were all blanked at once: :func:`without_clauses`). Raises :class:`UnsupportedQueryError` for an
    unknown or repeated option, a clause not right after ``SELECT``, or more than one clause,
    and :class:`ParseError` for malformed options.
    """
    if not isinstance(sql, str):
        return sql, None
    if _REPORT.search(sql):
        _refuse_report(sql)
    if not _QUICK.search(sql):
        return sql, None
    tokens = _tokens(sql)
    found: list[tuple[int, int]] = []  # (index of WITH, index of the clause's last token)
    for i, tok in enumerate(tokens[:-1]):
        nxt = tokens[i + 1]
        if tok.token_type != TokenType.WITH or nxt.token_type not in (
                TokenType.VAR, TokenType.IDENTIFIER) or nxt.text.upper() not in _CLAUSE_KEYWORDS:
            continue
        has_options = (i + 3 < len(tokens) and tokens[i + 2].text.upper() == "OPTIONS"
                       and tokens[i + 3].token_type == TokenType.L_PAREN)
        after_select = i > 0 and tokens[i - 1].token_type == TokenType.SELECT
        if not after_select:
            if has_options:
                raise UnsupportedQueryError(
                    f"WITH {nxt.text.upper()} must come right after SELECT (BigQuery syntax: "
                    f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(...) <select list> ...)."
                    + _where(sql, tok.start))
            continue  # e.g. a CTE named differential_privacy: not the clause
        end = _matching(tokens, i + 3) if has_options else i + 1
        found.append((i, end))
    if not found:
        return sql, None
    if len(found) > 1:
        second = tokens[found[1][0]]
        raise UnsupportedQueryError(
            "more than one DIFFERENTIAL_PRIVACY clause: in BigQuery each SELECT of a UNION ALL "
            "carries its own budget, while privplan gives one budget to a whole query and splits "
            "it over the branches. Send the branches as separate queries, or write one UNION ALL "
            "without the clauses and pass epsilon= as an argument." + _where(sql, second.start))
    i, end = found[0]
    options = _parse_options(sql, tokens, i + 4, end) if end > i + 1 else {}
    start, stop = tokens[i].start, tokens[end].end + 1
    opts = DPOptions(clause=sql[start:stop], **options)
    stripped = sql[:start] + blanked(sql[start:stop]) + sql[stop:]
    selects = [t for t in tokens if t.token_type == TokenType.SELECT]
    public = opts.group_selection_strategy == "PUBLIC_GROUPS"
    if len(selects) > 1:
        rewritten = public_groups_as_in_list(stripped)
        if rewritten is not None:  # BigQuery releases exactly the groups joined in
            return rewritten, dataclasses.replace(opts, listed_groups=True)
    if public:
        raise UnsupportedQueryError(
            "group_selection_strategy = PUBLIC_GROUPS needs the public groups in the query: "
            "write FROM t RIGHT OUTER JOIN (SELECT DISTINCT k FROM UNNEST([v1, v2, ...])) "
            "USING (k) ... GROUP BY k (as in BigQuery), or WHERE k IN (v1, v2, ...) GROUP BY "
            "k, or give the column public_values in the policy." + _where(sql, tokens[i].start))
    if len(selects) > 1:
        raise UnsupportedQueryError(
            "a DIFFERENTIAL_PRIVACY clause in a query with several SELECTs: in BigQuery the "
            "clause covers only its own SELECT, so the other branches would not be private "
            "there, while privplan answers every branch privately with one budget. Send the "
            "SELECT with the clause on its own, or drop the clause and pass epsilon= as an "
            "argument." + _where(sql, tokens[i].start))
    return stripped, opts


def _parse_options(sql: str, tokens: list[Token], lo: int, hi: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if lo == hi:
        return out
    for part in _split_top(tokens, lo, hi):
        if not part:
            raise ParseError("could not parse OPTIONS(...): an empty option (two commas, or a "
                             "trailing comma)." + _where(sql, tokens[lo].start))
        if len(part) < 3 or part[1].token_type != TokenType.EQ or not _word(part[0]):
            raise ParseError(
                "could not parse OPTIONS(...): write name=value pairs separated by commas, "
                "e.g. OPTIONS(epsilon=1, delta=1e-5)." + _where(sql, part[0].start))
        name = part[0].text.lower()
        name = _ALIASES.get(name, name)
        if name not in KNOWN_OPTIONS:
            raise UnsupportedQueryError(
                f"unknown DIFFERENTIAL_PRIVACY option '{part[0].text}': privplan knows "
                f"{', '.join(KNOWN_OPTIONS)}. Remove it, or set the equivalent in the policy "
                "(which privplan always enforces)." + _where(sql, part[0].start))
        if name in out:
            raise UnsupportedQueryError(
                f"option '{name}' is given twice; give it once." + _where(sql, part[0].start))
        out[name] = _option_value(sql, name, part[2:])
    return {k: v for k, v in out.items() if v is not None}


def _option_value(sql: str, name: str, toks: list[Token]) -> Any:
    where = _where(sql, toks[0].start)
    if len(toks) == 1 and toks[0].token_type == TokenType.NULL:
        return None
    if name == "privacy_unit_column":
        return _identifier(sql, toks)
    if name == "group_selection_strategy":
        word = sql[toks[0].start:toks[-1].end + 1].strip("'\"` ").upper()
        if word not in _GROUP_SELECTION:
            raise UnsupportedQueryError(
                f"group_selection_strategy {word} is not supported: privplan's partition "
                "selection is a noisy distinct-unit count over a threshold (or a public "
                "domain). Remove it, or use PUBLIC_GROUPS with the groups joined in "
                "the query." + where)
        return word
    value = _number(sql, toks)
    if value is None and len(toks) == 1 and toks[0].token_type == TokenType.STRING:
        try:  # a quoted number, e.g. epsilon='0.5'
            value = Fraction(toks[0].text.strip())
        except (ValueError, ZeroDivisionError):
            value = None
    if value is None:
        raise UnsupportedQueryError(
            f"option {name} must be a number, got {sql[toks[0].start:toks[-1].end + 1]!r}."
            + where)
    if name == "epsilon":
        if value <= 0:
            raise PolicyError(f"option epsilon must be positive, got {value}." + where)
    elif name == "delta":
        if not 0 <= value < 1:
            raise PolicyError(
                f"option delta must be in [0, 1), got {value} (delta = 1, which ZetaSQL's "
                "compliance tests use to switch privacy off, would make any answer 'private')."
                + where)
    elif name in ("max_groups_contributed", "min_privacy_units_per_group",
                  "max_rows_contributed"):
        if value.denominator != 1 or value < 1:
            raise PolicyError(
                f"option {name} must be a positive integer, got {value}." + where)
        return int(value)
    return value


def _identifier(sql: str, toks: list[Token]) -> str:
    """A column name: ``patient_id``, ``"patient_id"``, `` `patient_id` ``, ``'patient_id'``
    or qualified ``visits.patient_id`` (the qualifier is dropped)."""
    parts: list[str] = []
    expect_name = True
    k = 0
    while k < len(toks):
        tok = toks[k]
        if expect_name and tok.text == "`" and k + 2 < len(toks) and toks[k + 2].text == "`":
            parts.append(toks[k + 1].text)
            k += 3
            expect_name = False
            continue
        if expect_name and (tok.token_type in (TokenType.VAR, TokenType.IDENTIFIER,
                                               TokenType.STRING) or tok.text.isidentifier()):
            parts.append(tok.text)
            expect_name = False
        elif not expect_name and tok.token_type == TokenType.DOT:
            expect_name = True
        else:
            parts = []
            break
        k += 1
    if not parts or expect_name:
        raise UnsupportedQueryError(
            "option privacy_unit_column must be a column name, got "
            f"{sql[toks[0].start:toks[-1].end + 1]!r}." + _where(sql, toks[0].start))
    return parts[-1].lower()


# ---------------------------------------------------------------------- aggregate spellings


def rewrite_dp_aggregates(sql: str) -> tuple[str, list[ContributionBounds]]:
    """Map BigQuery's DP aggregate spellings to privplan's, returning the explicit bounds.

    ``ANON_COUNT(x [CLAMPED BETWEEN lo AND hi])`` → ``COUNT(x)``, likewise ANON_SUM → SUM and
    ANON_AVG → AVG; ``COUNT/SUM/AVG(x, contribution_bounds_per_group => (lo, hi))`` → ``...(x)``.
    Other ``ANON_*`` functions are refused. Only the rewritten tokens change; the rest of the
    text is byte-identical.
    """
    if not _QUICK.search(sql):
        return sql, []
    tokens = _tokens(sql)
    edits: list[tuple[int, int, str]] = []  # (start, stop, replacement) on character offsets
    bounds: list[ContributionBounds] = []
    for i, tok in enumerate(tokens[:-1]):
        if tokens[i + 1].token_type != TokenType.L_PAREN or tok.token_type != TokenType.VAR:
            continue
        if i > 0 and tokens[i - 1].token_type == TokenType.DOT:
            continue  # schema.function: not BigQuery's aggregate
        name = tok.text.upper()
        if name in _REFUSED_ANON:
            raise UnsupportedQueryError(f"{name} is not supported: {_REFUSED_ANON[name]}"
                                        + _where(sql, tok.start))
        if name.startswith("ANON_") and name not in _ANON:
            raise UnsupportedQueryError(
                f"{name} is not supported: privplan maps {', '.join(_ANON)} to "
                f"{', '.join(_ANON.values())}. Use one of those (or plain COUNT/SUM/AVG)."
                + _where(sql, tok.start))
        func = _ANON.get(name, name)
        if func not in _BOUNDED and func not in _PER_ROW:
            continue
        keyword = ("contribution_bounds_per_group" if func in _BOUNDED
                   else "contribution_bounds_per_row")
        close = _matching(tokens, i + 1)
        args = _split_top(tokens, i + 2, close)
        if name in _ANON:
            edits.append((tok.start, tok.end + 1, func))
        found = _clamped(sql, args[-1]) if name in _ANON else None
        named = [k for k, a in enumerate(args) if a and a[0].text.lower() in (
            "contribution_bounds_per_group", "contribution_bounds_per_row")]
        if found is None and named:
            k = named[0]
            if len(named) > 1 or k != len(args) - 1 or k == 0 or args[k][0].text.lower() != keyword:
                example = ", q" if func == "PERCENTILE_CONT" else ""
                raise UnsupportedQueryError(
                    f"{func}(...) takes {keyword} => (lower, upper) as its last argument, as "
                    f"in BigQuery, where {func} clamps "
                    + ("each privacy unit's total per group" if func in _BOUNDED
                       else "each row") + f": write "
                    f"{func}(column{example}, {keyword} => (lower, upper))."
                    + _where(sql, tok.start))
            lo, hi = _contribution_bounds(sql, args[k])
            found = (lo, hi, args[k - 1][-1].end + 1)
        if found is None:
            continue
        lo, hi, cut_from = found
        stop = tokens[close].start
        arg_toks = [t for t in args[0] if t.start < cut_from]
        argument = sql[arg_toks[0].start:arg_toks[-1].end + 1] if arg_toks else ""
        bounds.append(ContributionBounds(func=func, argument=argument, lower=lo, upper=hi,
                                         syntax=sql[cut_from:stop].strip(" ,\t\r\n"),
                                         per_row=func in _PER_ROW))
        edits.append((cut_from, stop, ""))
    out = sql
    for start, stop, text in sorted(edits, reverse=True):
        out = out[:start] + text + out[stop:]
    return out, bounds


def _clamped(sql: str, arg: list[Token]) -> tuple[Fraction, Fraction, int] | None:
    """``x CLAMPED BETWEEN lo AND hi`` at the end of an ANON_* argument."""
    for k, tok in enumerate(arg):
        if tok.text.upper() == "CLAMPED":
            rest = arg[k + 1:]
            if not rest or rest[0].token_type != TokenType.BETWEEN:
                break
            ands = [j for j, t in enumerate(rest) if t.token_type == TokenType.AND]
            if len(ands) != 1:
                break
            lo, hi = _number(sql, rest[1:ands[0]]), _number(sql, rest[ands[0] + 1:])
            if lo is None or hi is None:
                break
            cut = arg[k - 1].end + 1 if k else tok.start
            return lo, hi, cut
    else:
        return None
    raise UnsupportedQueryError(
        "CLAMPED BETWEEN needs two numeric literals: CLAMPED BETWEEN <lower> AND <upper>."
        + _where(sql, arg[0].start))


def _contribution_bounds(sql: str, arg: list[Token]) -> tuple[Fraction, Fraction]:
    ok = (len(arg) >= 4 and arg[1].token_type == TokenType.FARROW
          and arg[2].token_type == TokenType.L_PAREN
          and arg[-1].token_type == TokenType.R_PAREN)
    if ok:
        inner = _split_top(arg, 3, len(arg) - 1)
        if len(inner) == 2:
            lo, hi = _number(sql, inner[0]), _number(sql, inner[1])
            if lo is not None and hi is not None:
                return lo, hi
    raise UnsupportedQueryError(
        f"{arg[0].text} needs two numeric literals: "
        f"{arg[0].text} => (<lower>, <upper>)." + _where(sql, arg[0].start))


# ---------------------------------------------------------------------- entry points


def apply_dp_clause(sql: str, policy: Policy, kind: type,
                    budget: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """Accept BigQuery's DP syntax: ``(privplan_sql, budget_kwargs)`` for ``Session._plan``.

    Without a clause, returns ``(sql, budget)`` unchanged. With one: strips it, rewrites the
    aggregate spellings, checks the options against the policy, and — if the options set
    epsilon — returns ``{"budget": <value of the session's kind>}``. Passing epsilon/delta both
    in OPTIONS and as arguments is refused; a clause without epsilon leaves the budget to the
    arguments.
    """
    stripped, opts = split_dp_clause(sql)
    if opts is None:
        return sql, dict(budget or {})
    stripped, bounds = rewrite_dp_aggregates(stripped)
    check_dp_options(opts, policy, parse_statement(stripped), bounds)
    clamps = per_query_clamps(bounds, private_tables(parse_statement(stripped), policy))
    return stripped, clause_budget(opts, kind, budget, clamps)


def clause_budget(opts: DPOptions, kind: type, budget: Mapping[str, Any] | None,
                  extra: Mapping[str, Any]) -> dict[str, Any]:
    """The budget keywords of a clause query: OPTIONS' epsilon/delta as a value of the session's
    ``kind`` (or, without epsilon in OPTIONS, the arguments' budget), its
    ``max_groups_contributed``, and ``extra`` (per-query clamps). A budget given both ways is
    refused."""
    given = {k: v for k, v in (budget or {}).items() if v is not None}
    if opts.epsilon is None:
        if opts.delta is not None:
            raise PolicyError("OPTIONS sets delta but not epsilon: set both in OPTIONS, or pass "
                              "both as arguments.")
        return {**given, **_query_options(opts), **extra}
    if any(k in given for k in _BUDGET_KEYS):
        raise PolicyError(
            "the budget is given twice: in the query's OPTIONS(epsilon=...) and as an argument "
            f"({', '.join(k for k in _BUDGET_KEYS if k in given)}=). Keep one.")
    return {"budget": opts.budget_for(kind), **_query_options(opts), **extra}


def _query_options(opts: DPOptions) -> dict[str, Any]:
    return {name: getattr(opts, name) for name in QUERY_OPTIONS[:-1]
            if getattr(opts, name) is not None}


QUERY_OPTIONS = ("max_groups_contributed", "min_privacy_units_per_group",
                 "max_rows_contributed", "listed_groups",
                 "clamps")  # per-query settings besides the budget


def explain_bigquery(sess: Any, sql: str) -> Any:
    """``sess.explain`` for a BigQuery-syntax query (the session reads the clause itself)."""
    return sess.explain(sql)
