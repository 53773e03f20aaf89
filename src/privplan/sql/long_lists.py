"""Reading a long ``IN`` list of plain literals as a whole, before the parser sees it.

Parsing, copying and walking one syntax node per value makes planning slow for lists of many
thousands of values. Before parsing, a scan of the text finds each ``IN ( ... )`` whose items
are all plain integer literals (``-?[0-9]+``, within BIGINT) or all plain quoted strings
(``''`` the only escape), with at least :data:`MIN_VALUES` items, and puts a placeholder name
in its place; after parsing, each placeholder must be the only item of an ``IN`` and becomes
the list node of :mod:`privplan.analysis.literal_lists` (the values, and the text as written).
Anything else -- a placeholder elsewhere, a parse error, text the scan does not model (block
comments, dollar quotes, backslashes) -- and the statement is parsed as written instead.

A list of more than :data:`MAX_VALUES` items is refused before planning (nothing is charged).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from privplan.analysis.literal_lists import LiteralList, list_node, literal_lists_on
from privplan.errors import UnsupportedQueryError

__all__ = ["MAX_VALUES", "MIN_VALUES", "ScannedLists", "attach_lists", "engine_list_sql",
           "scan_lists"]

MIN_VALUES = 100
"""Shorter lists are parsed as literal nodes (the scan pays off only for long ones)."""

MAX_VALUES = 1_000_000
"""The most values one IN list may have; a longer list is refused."""

_PREFIX = "__privplan_list_"
_SP = r"[ \t\r\n]*"
_INT = r"-?[0-9]+"
_STR = r"'(?:[^']|'')*'"
_INT_LIST = re.compile(rf"\({_SP}{_INT}(?:{_SP},{_SP}{_INT})*{_SP}\)")
_STR_LIST = re.compile(rf"\({_SP}{_STR}(?:{_SP},{_SP}{_STR})*{_SP}\)")
_STR_ITEM = re.compile(_STR)
# what the scan steps over (strings, quoted names, line comments) and what it looks for
_NEXT = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|\bIN(?=[ \t\r\n]*\()""",
                   re.IGNORECASE)
_OPEN = re.compile(_SP + r"\(")
_COUNT = re.compile(rf"\((?:{_SP}(?:{_INT}|{_STR}){_SP},)+")  # a long literal prefix (refusal)
_BIGINT = 2**63


@dataclass(frozen=True)
class _Found:
    start: int  # the list's "(" in the original text
    end: int  # after its ")"
    values: LiteralList


@dataclass(frozen=True)
class ScannedLists:
    """The statement with each long list replaced by a placeholder, and the lists."""

    text: str
    found: tuple[_Found, ...]


def scan_lists(sql: str) -> ScannedLists | None:
    """The long literal lists of ``sql`` (None: none, or text the scan does not model).

    Refuses a literal list longer than :data:`MAX_VALUES` even when lists are parsed as nodes."""
    if "/*" in sql or "$" in sql or "\\" in sql or _PREFIX in sql:
        return None
    found: list[_Found] = []
    pos = 0
    while (m := _NEXT.search(sql, pos)) is not None:
        pos = m.end()
        if m.group(0)[0] in "'\"-":
            continue
        paren = _OPEN.match(sql, pos)
        assert paren is not None  # (the lookahead saw it)
        start = paren.end() - 1
        item = _list_at(sql, start)
        if item is None:
            _refuse_if_too_long(sql, start)
            continue
        found.append(item)
        pos = item.end
    if not found or not literal_lists_on():
        return None
    parts, last = [], 0
    for i, f in enumerate(found):
        parts += [sql[last:f.start], f"({_PREFIX}{i})"]
        last = f.end
    parts.append(sql[last:])
    return ScannedLists("".join(parts), tuple(found))


def _list_at(sql: str, start: int) -> _Found | None:
    for pattern, kind in ((_INT_LIST, "int"), (_STR_LIST, "str")):
        m = pattern.match(sql, start)
        if m is None:
            continue
        text = m.group(0)
        if kind == "int":
            values: tuple[object, ...] = tuple(int(v) for v in text[1:-1].split(","))
            if any(not -_BIGINT <= v < _BIGINT for v in values):  # type: ignore[operator]
                return None
        else:
            values = tuple(s[1:-1].replace("''", "'") for s in _STR_ITEM.findall(text))
        if len(values) > MAX_VALUES:
            _refuse(sql, start, len(values))
        if len(values) < MIN_VALUES:
            return None
        return _Found(start, m.end(), LiteralList(kind, values, text))  # type: ignore[arg-type]
    return None


def _refuse_if_too_long(sql: str, start: int) -> None:
    """A list of more than MAX_VALUES literals (of mixed kinds, say) is refused too."""
    m = _COUNT.match(sql, start)
    if m is not None and m.group(0).count(",") >= MAX_VALUES:
        _refuse(sql, start, m.group(0).count(","))


def _refuse(sql: str, start: int, n: int) -> None:
    line = sql.count("\n", 0, start) + 1
    col = start - (sql.rfind("\n", 0, start) + 1) + 1
    raise UnsupportedQueryError(
        f"IN list of {n:,}+ values refused at line {line}, column {col}: privplan plans IN "
        f"lists of at most {MAX_VALUES:,} values (each value is part of the query's region "
        "and of the statement the engine runs). Split the list over several queries, or put "
        "the values in a public table and join it.")


def attach_lists(tree: exp.Expr, scanned: ScannedLists, sql: str) -> bool:
    """Put each list in its ``IN`` of ``tree`` (parsed from ``scanned.text``) and move the
    recorded positions of the nodes after it back to ``sql`` (the text as written). False if
    a placeholder is anywhere but alone in an ``IN`` list: then parse ``sql`` as written."""
    seen: dict[int, exp.Column] = {}
    for col in tree.find_all(exp.Column):
        name = col.name
        if not name.startswith(_PREFIX):
            continue
        parent = col.parent
        if (col.table or not isinstance(parent, exp.In) or parent.expressions != [col]
                or any(parent.args.get(k) for k in ("query", "unnest", "field"))
                or name in seen):
            return False
        seen[int(name[len(_PREFIX):])] = col
    if sorted(seen) != list(range(len(scanned.found))):
        return False
    for i, col in seen.items():
        parent = col.parent
        assert isinstance(parent, exp.In)
        parent.set("expressions", [])
        parent.set("field", list_node(scanned.found[i].values))
    _move_positions(tree, scanned, sql)
    return True


def _move_positions(tree: exp.Expr, scanned: ScannedLists, sql: str) -> None:
    """Token positions (offset, line, column) recorded on the parsed nodes, from the text with
    placeholders to the text as written, so error messages point at the right place."""
    text = scanned.text
    shifts = []  # per list: where its placeholder ends, and the shifts after it
    delta = lines = 0
    for i, f in enumerate(scanned.found):
        mod_end = f.end - delta - (f.end - f.start) + len(f"({_PREFIX}{i})")
        delta += (f.end - f.start) - len(f"({_PREFIX}{i})")
        lines += sql.count("\n", f.start, f.end)
        col_shift = (f.end - sql.rfind("\n", 0, f.end)) - (mod_end - text.rfind("\n", 0, mod_end))
        shifts.append((mod_end, delta, lines, col_shift))
    for node in tree.walk():
        meta = node._meta
        if not meta or "start" not in meta:
            continue
        start = meta["start"]
        after = [s for s in shifts if s[0] <= start]
        if not after:
            continue
        mod_end, d, n_lines, col_shift = after[-1]
        same_line = text.find("\n", mod_end, start) == -1
        meta["start"], meta["end"] = start + d, meta["end"] + d
        if "line" in meta:
            meta["line"] += n_lines
        if same_line and "col" in meta:
            meta["col"] += col_shift


# subjects an integer list compares with exactly as BIGINTs (a REAL subject would be compared
# as REAL with an IN list but as DOUBLE with BIGINTs; HUGEINT and DECIMAL are left as written)
_INT_SUBJECTS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "DOUBLE"})
_SEPARATORS = ("\x1f", "\x1e", "\x1d", "\x1c", ",", "|", "\t")


def engine_list_sql(values: LiteralList, subject_type: str) -> str | None:
    """``( ... )`` to follow ``IN`` in the engine's statement: one string constant split into
    the values, which the engine reads far faster than a list of literals, or None (keep the
    list as written). Only where the two compare alike: integers against an integer or DOUBLE
    subject (both read as BIGINT, then the usual common type), strings against a VARCHAR
    subject; with no NULL item, ``x IN (SELECT ...)`` is TRUE, FALSE or NULL exactly when the
    list is."""
    kind = subject_type.upper()
    if values.kind == "int" and kind in _INT_SUBJECTS:
        body = ",".join(map(str, values.values))
        return f"(SELECT UNNEST(CAST(STRING_SPLIT('{body}', ',') AS BIGINT[])))"
    if values.kind == "str" and kind == "VARCHAR":
        joined = "".join(values.values)
        sep = next((c for c in _SEPARATORS if c not in joined), None)
        if sep is None:
            return None
        body = sep.join(values.values).replace("'", "''")
        return f"(SELECT UNNEST(STRING_SPLIT('{body}', CHR({ord(sep)}))))"
    return None
