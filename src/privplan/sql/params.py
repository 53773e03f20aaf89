"""Query parameters: placeholders replaced by SQL literals before privplan reads the statement.

One binder for the Python API (``sess.sql(q, params=...)``: DuckDB's ``?``, ``$1`` and
``$name``) and the DB-API (``paramstyle = "qmark"``: ``?``, and ``:name`` as in sqlite3).

Why before planning: a parameter is a public value the analyst supplies, so it is bound into
the statement before anything is parsed, planned, costed, cached or admitted; what is analysed,
charged and run is exactly the statement with its values in place, and a query with a parameter
costs what the query with the literal written in costs. Why a value can never become SQL:
placeholders are found with sqlglot's tokenizer (so a ``?`` inside a string or a comment is not
one), each value is rendered as ONE literal by sqlglot (strings quoted and escaped), and the
result is re-tokenized and checked to be the original tokens with each placeholder replaced by
its literal's tokens; anything else is refused.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import pairwise
from typing import Any

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from privplan.arguments import ArgumentError
from privplan.errors import InternalError, UnsupportedQueryError

__all__ = ["ParameterError", "Style", "bind_params", "bind_query"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TYPES = "None, bool, int, float, Decimal, str, datetime.date, datetime.time or datetime.datetime"


class ParameterError(UnsupportedQueryError):
    """A query parameter does not fit the query's placeholders, or is not a value SQL can hold:
    the query is not answered as written (an :class:`UnsupportedQueryError`, as a placeholder
    left in a query always was).

    ``kind`` is ``"data"`` (a value with no SQL literal), ``"not_supported"`` (a kind of value
    privplan does not take) or ``"programming"`` (placeholders and parameters do not match): the
    DB-API raises its own class for each."""

    def __init__(self, message: str, kind: str = "programming") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Style:
    """Which placeholders a surface takes, and how its messages show a call with parameters.

    ``call``: the call with ``{}`` where the parameters go (``sess.sql(q, params={})``);
    ``named``: ``"$"`` (DuckDB's ``$name`` and ``$1``) or ``":"`` (sqlite3's ``:name``);
    ``none``: for a surface that takes no parameters, what to do instead."""

    call: str
    named: str
    none: str = ""  # the fix where the surface takes no parameters (the CLI, df.dp)


def _tokens(sql: str) -> list[Token]:
    try:
        return list(DuckDB().tokenizer_class().tokenize(sql))
    except TokenError as err:
        raise ParameterError(f"could not read the SQL to find its placeholders: {err}. Check "
                             "the quotes and comments of the query.") from None


def literal(value: Any) -> str:
    """``value`` as a SQL literal, rendered by sqlglot (never by formatting the raw value)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ParameterError(f"parameter {value!r} is not a finite number; SQL has no literal "
                             "for it. Pass a finite number, or None for NULL.", "data")
    if isinstance(value, Decimal) and not value.is_finite():
        raise ParameterError(f"parameter {value!r} is not a finite number; SQL has no literal "
                             "for it. Pass a finite Decimal, or None for NULL.", "data")
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise ParameterError("binary parameters are not supported (no private column is "
                             f"binary): pass {_TYPES}", "not_supported")
    if not isinstance(value, (type(None), bool, int, float, Decimal, str, _dt.date, _dt.time)):
        raise ParameterError(f"a parameter of type {type(value).__name__} is not supported "
                             f"(it has no SQL literal): pass {_TYPES}")
    if isinstance(value, str) and "\x00" in value:
        raise ParameterError("a string parameter contains a NUL character, which SQL text "
                             "cannot hold: remove it", "data")
    text = exp.convert(value).sql(dialect="duckdb")
    if text.startswith("-"):
        text = f"({text})"  # so "x-?" cannot become "x--1" (a comment)
    return text


def _glues(ch: str) -> bool:
    """Could ``ch`` merge with an adjacent literal into another token? (Then pad with a space.)"""
    return ch.isalnum() or ch in "_-/*.:$@#?'\"`"


def _adjacent(a: Token, b: Token) -> bool:
    return b.start == a.end + 1


def _percent_style(tokens: list[Token]) -> str | None:
    """``%s`` or ``%(name)s`` (the format/pyformat paramstyles), if the query uses one."""
    for i, t in enumerate(tokens):
        if t.token_type != TokenType.MOD or i + 1 >= len(tokens):
            continue
        nxt = tokens[i + 1]
        if _adjacent(t, nxt) and nxt.text == "s":
            return "%s"
        if nxt.token_type == TokenType.L_PAREN and _adjacent(t, nxt) and i + 4 < len(tokens) \
                and tokens[i + 3].token_type == TokenType.R_PAREN and tokens[i + 4].text == "s":
            return f"%({tokens[i + 2].text})s"
    return None


def _named_slots(tokens: list[Token], style: Style) -> list[tuple[Token, Token, str]]:
    """The named (``$name``/``$1`` or ``:name``) placeholders: (first, last token, name)."""
    lead = TokenType.PARAMETER if style.named == "$" else TokenType.COLON
    out = []
    for a, b in pairwise(tokens):
        if a.token_type == lead and _adjacent(a, b) and b.token_type != TokenType.IDENTIFIER \
                and (_NAME.fullmatch(b.text) or (lead == TokenType.PARAMETER and b.text.isdigit())):
            out.append((a, b, b.text))
    return out


def _mismatch(sql: str, tokens: list[Token], style: Style, n_q: int, named: int,
              given: str) -> ParameterError:
    """The parameters do not fit the placeholders: say which, and the paramstyle to use."""
    percent = _percent_style(tokens)
    if percent is not None and n_q == 0 and named == 0 and percent.startswith("%("):
        name = percent[2:-2]
        return ParameterError(
            f"the query uses {percent} placeholders (the pyformat paramstyle), which privplan "
            f"does not read: its paramstyle is 'qmark' (? with a sequence; {style.named}name "
            f"with a mapping). Write {style.named}{name} where the query has {percent}, with "
            f"{style.call.format(repr({name: 30}))}.")
    if percent is not None and n_q == 0 and named == 0:
        names = "?" if style.named == ":" else "? (or $name)"
        return ParameterError(
            f"the query uses {percent} placeholders (the format/pyformat paramstyle), which "
            f"privplan does not read: its paramstyle is 'qmark'. Write {names} where the query "
            f"has {percent}, e.g. 'WHERE age > ?' with {style.call.format('[30]')}.")
    has = f"{n_q} ? placeholder(s)" + (f" and {named} {style.named}name placeholder(s)"
                                       if named else "")
    if not n_q and not named:
        has = f"no placeholder (no ?, no {style.named}name)"
    return ParameterError(f"the query has {has} but {given}: each placeholder takes exactly "
                          f"one value. Pass one value per ? in order, e.g. "
                          f"{style.call.format('[30]')}, or one per {style.named}name in a "
                          f"mapping, e.g. {style.call.format(repr({'name': 30}))}.")


def _positional(sql: str, tokens: list[Token], style: Style, values: Sequence[Any]
                ) -> list[tuple[Token, Token, Any]]:
    qmarks = [t for t in tokens if t.token_type == TokenType.PLACEHOLDER]
    named = _named_slots(tokens, style) if style.named == "$" else []
    numbered = [s for s in named if s[2].isdigit()]
    if numbered and not qmarks and len(numbered) == len(named):  # DuckDB's $1, $2, ...
        slots = []
        for a, b, name in numbered:
            if not 1 <= int(name) <= len(values):
                raise ParameterError(
                    f"the placeholder ${name} has no value: {len(values)} parameter(s) were "
                    f"given, for $1 to ${len(values)}. Pass a value for each $n, e.g. "
                    f"{style.call.format('[30]')} for $1.")
            slots.append((a, b, values[int(name) - 1]))
        return slots
    if named and qmarks:
        raise ParameterError(
            f"the query mixes ? and ${named[0][2]} placeholders, which cannot be matched to "
            f"values reliably: write ? everywhere (with a sequence, e.g. "
            f"{style.call.format('[30]')}), or $name everywhere (with a mapping).")
    if named:
        raise ParameterError(
            f"the parameters are a sequence but the query uses ${named[0][2]}: pass a mapping "
            f"for $name placeholders, e.g. {style.call.format(repr({named[0][2]: 30}))}, or "
            "write ? placeholders for a sequence.")
    if len(qmarks) != len(values):
        raise _mismatch(sql, tokens, style, len(qmarks), 0, f"{len(values)} parameter(s) were given")
    return [(t, t, v) for t, v in zip(qmarks, values)]


def _by_name(tokens: list[Token], style: Style, values: Mapping[str, Any], sql: str
             ) -> list[tuple[Token, Token, Any]]:
    if any(t.token_type == TokenType.PLACEHOLDER for t in tokens):
        raise ParameterError(
            f"the parameters are a mapping but the query uses ? placeholders: write "
            f"{style.named}name placeholders for a mapping, or pass a sequence, e.g. "
            f"{style.call.format('[30]')}.")
    slots = []
    named = _named_slots(tokens, style)
    for a, b, name in named:
        if name not in values:
            raise ParameterError(
                f"no value given for the placeholder {style.named}{name}: every placeholder "
                f"needs a value, and the mapping has {sorted(map(str, values)) or 'no keys'}. "
                f"Add {name!r} to it.")
        slots.append((a, b, values[name]))
    if not slots and values:
        raise _mismatch(sql, tokens, style, 0, 0, f"parameters {sorted(map(str, values))} "
                        "were given")
    unused = sorted(set(map(str, values)) - {n for _, _, n in named})
    if unused and style.named == "$":  # (the DB-API, as sqlite3, ignores unused keys)
        raise ParameterError(
            f"the parameter(s) {unused} match no placeholder of the query (it has "
            f"{sorted({style.named + n for _, _, n in named})}); an unused value is most "
            "likely a misspelt name. Fix the name, or drop them.")
    return slots


def bind_query(sql: str, params: Sequence[Any] | Mapping[str, Any] | None, style: Style) -> str:
    """:func:`bind_params` for the Python API, where a query that is not a str is an argument
    mistake (Python's TypeError, raised before the error boundary would withhold it)."""
    if not isinstance(sql, str):
        method = style.call.split("(")[0]
        raise ArgumentError(f"{method}() takes the query as a str, got {type(sql).__name__}: the "
                        f"SQL text is what privplan plans. Pass it as text, e.g. "
                        f"{method}('SELECT COUNT(*) FROM t', epsilon=0.5).")
    return bind_params(sql, params, style)


def bind_params(sql: str, params: Sequence[Any] | Mapping[str, Any] | None, style: Style) -> str:
    """``sql`` with its placeholders replaced by the SQL literals of ``params``."""
    if not isinstance(sql, str):
        raise ParameterError(f"the query must be a SQL string, got {type(sql).__name__}")
    if params is None and "?" not in sql and (style.named != "$" or "$" not in sql):
        return sql
    tokens = _tokens(sql)
    if style.named == ":" and params is not None and any(
            t.token_type == TokenType.PARAMETER for t in tokens):
        raise ParameterError("the query has a $ parameter, which the DB-API does not read: use "
                             "? placeholders (paramstyle qmark) with a sequence, or :name with "
                             f"a mapping, e.g. {style.call.format('[30]')}.")
    if params is None:
        n = sum(t.token_type == TokenType.PLACEHOLDER for t in tokens)
        named = _named_slots(tokens, style) if style.named == "$" else []
        if n or named:
            shown = f"{n} ? placeholder(s)" if n else f"the placeholder ${named[0][2]}"
            example = "[value]" if n or named[0][2].isdigit() else repr({named[0][2]: 30})
            fix = style.none or (f"Pass them with it, as {style.call.format(example)}, or "
                                 "write each value in place of its placeholder")
            raise ParameterError(f"the query has {shown} but no parameters were given: each "
                                 f"placeholder needs a value. {fix}.")
        return sql
    if isinstance(params, Mapping):
        slots = _by_name(tokens, style, params, sql)
    elif isinstance(params, (str, bytes)) or not isinstance(params, Sequence):
        raise ParameterError(
            f"parameters must be a sequence (for ? placeholders) or a mapping (for "
            f"{style.named}name placeholders), got {type(params).__name__} (a "
            f"{type(params).__name__} is not read as a list of values): pass e.g. "
            f"{style.call.format('[30]')}.")
    else:
        slots = _positional(sql, tokens, style, params)
    return _substitute(sql, tokens, slots)


def _substitute(sql: str, tokens: list[Token], slots: list[tuple[Token, Token, Any]]) -> str:
    out: list[str] = []
    pos, expected = 0, []
    lit_tokens: dict[int, list[Any]] = {}
    replaced = {id(a) for a, _, _ in slots} | {id(b) for _, b, _ in slots}
    for a, b, value in sorted(slots, key=lambda s: s[0].start):
        lit = literal(value)
        left = " " if a.start > 0 and _glues(sql[a.start - 1]) else ""
        right = " " if b.end + 1 < len(sql) and _glues(sql[b.end + 1]) else ""
        out += [sql[pos:a.start], left, lit, right]
        pos = b.end + 1
        lit_tokens[id(a)] = [t.token_type for t in _tokens(lit)]
    out.append(sql[pos:])
    bound = "".join(out)
    for t in tokens:  # the safety check: same tokens, each placeholder replaced by its literal
        if id(t) in lit_tokens:
            expected += lit_tokens[id(t)]
        elif id(t) not in replaced:
            expected.append(t.token_type)
    if [t.token_type for t in _tokens(bound)] != expected:
        raise InternalError("parameter substitution changed the query's structure; refused")
    return bound
