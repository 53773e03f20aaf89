"""PEP 249 parameters (``paramstyle = "qmark"``): ``?`` placeholders replaced by SQL literals
before privplan reads the statement, so what is analysed, charged and run is exactly the
statement with its values in place (a value can never become SQL: each is one literal)."""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from itertools import pairwise
from typing import Any

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from privplan.dbapi_errors import DataError, InternalError, NotSupportedError, ProgrammingError

__all__ = ["bind_parameters"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _tokens(sql: str) -> list[Token]:
    try:
        return list(DuckDB().tokenizer_class().tokenize(sql))
    except TokenError as err:
        raise ProgrammingError(f"could not read the SQL: {err}") from None


def _literal(value: Any) -> str:
    """``value`` as a SQL literal, rendered by sqlglot (never by formatting the raw value)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(f"parameter {value!r} is not a finite number; SQL has no literal for it")
    if isinstance(value, Decimal) and not value.is_finite():
        raise DataError(f"parameter {value!r} is not a finite number")
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise NotSupportedError("binary parameters are not supported (no private column is "
                                "binary): pass str, int, float, Decimal, bool, date or datetime")
    if not isinstance(value, (type(None), bool, int, float, Decimal, str, _dt.date, _dt.time)):
        raise ProgrammingError(
            f"parameter of type {type(value).__name__} is not supported: pass None, bool, int, "
            "float, Decimal, str, datetime.date, datetime.time or datetime.datetime")
    if isinstance(value, str) and "\x00" in value:
        raise DataError("string parameter contains a NUL character")
    text = exp.convert(value).sql(dialect="duckdb")
    if text.startswith("-"):
        text = f"({text})"  # so "x-?" cannot become "x--1" (a comment)
    return text


def _glues(ch: str) -> bool:
    """Could ``ch`` merge with an adjacent literal into another token? (Then pad with a space.)"""
    return ch.isalnum() or ch in "_-/*.:$@#?'\"`"


def bind_parameters(sql: str, parameters: Sequence[Any] | Mapping[str, Any] | None) -> str:
    """Substitute ``?`` (sequence) or ``:name`` (mapping) placeholders with SQL literals.

    Positions come from sqlglot's tokenizer, literals from sqlglot; the result is checked to
    tokenize as the original with each placeholder replaced by one literal.
    """
    if not isinstance(sql, str):
        raise ProgrammingError(f"the operation must be a SQL string, got {type(sql).__name__}")
    if parameters is None and "?" not in sql and ":" not in sql:
        return sql
    tokens = _tokens(sql)
    qmarks = [t for t in tokens if t.token_type == TokenType.PLACEHOLDER]
    dollars = [t for t in tokens if t.token_type == TokenType.PARAMETER]
    if dollars and parameters is not None:
        raise ProgrammingError("use ? placeholders (paramstyle qmark) or :name with a mapping; "
                               "$-parameters are not supported")
    if parameters is None:
        if qmarks:
            raise ProgrammingError(
                f"the query has {len(qmarks)} ? placeholder(s) but no parameters were given; "
                "a ? left in the query is no value privplan can check or run. Pass them with "
                "it, as execute(sql, [value])")
        return sql
    slots: list[tuple[Token, Token, Any]] = []  # (first token, last token, value)
    if isinstance(parameters, Mapping):
        if qmarks:
            raise ProgrammingError("parameters are a mapping but the query uses ? placeholders; "
                                   "use :name placeholders with a mapping, or pass a sequence")
        for a, b in pairwise(tokens):
            if a.token_type == TokenType.COLON and b.start == a.end + 1 and \
                    _NAME.fullmatch(b.text) and b.token_type != TokenType.IDENTIFIER:
                if b.text not in parameters:
                    raise ProgrammingError(
                        f"no value given for the placeholder :{b.text} (the parameters name "
                        f"{', '.join(map(str, parameters)) or 'nothing'}); a placeholder left "
                        "in the query is no value privplan can check or run. Pass "
                        f"execute(sql, {{'{b.text}': value}}), one key per :name")
                slots.append((a, b, parameters[b.text]))
        if not slots and parameters:
            raise ProgrammingError("parameters were given but the query has no :name placeholder")
    else:
        if isinstance(parameters, (str, bytes)) or not isinstance(parameters, Sequence):
            raise ProgrammingError("parameters must be a sequence (for ? placeholders) or a "
                                   f"mapping (for :name placeholders), got "
                                   f"{type(parameters).__name__}")
        if len(qmarks) != len(parameters):
            raise ProgrammingError(
                f"the query has {len(qmarks)} ? placeholder(s) but {len(parameters)} "
                "parameter(s) were given to execute(); each ? takes the value at its position, "
                "so the counts must match. Pass one value per ?, in order: execute(sql, "
                f"[{', '.join(f'v{i + 1}' for i in range(min(len(qmarks), 3)))}"
                f"{', ...' if len(qmarks) > 3 else ''}])")
        slots = [(t, t, v) for t, v in zip(qmarks, parameters)]
    out, pos, expected = [], 0, []
    lit_tokens = {}
    replaced = {id(a) for a, _, _ in slots} | {id(b) for _, b, _ in slots}
    for a, b, value in slots:
        lit = _literal(value)
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


