"""A long ``IN`` list of plain literals, carried as one value beside the syntax tree.

``x IN (v1, ..., vn)`` with thousands of values would be thousands of syntax nodes, copied and
walked many times while a query is planned. When every value is a plain integer literal, or
every value a plain quoted string, the parser (:mod:`privplan.sql.long_lists`) reads the list
as a whole instead: the ``In`` node gets no item nodes and one ``Var`` in its ``field``
argument, whose text is the list as written (so the SQL renders as before) and which holds a
:class:`LiteralList` of the values. Copies share it (it is immutable).

Every part of the analysis that reads ``IN`` lists asks :func:`literal_list` first and treats
the values exactly as the literal nodes they stand for; a part that cannot prove it does so
raises :class:`ListFallback`, and the query is planned again with every list as literal nodes.
A part that knows nothing of the form sees an ``IN`` that is not a list, the conservative case.

Privacy: a list read as one value means exactly its literals; a part unsure of it falls back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from sqlglot import exp

__all__ = ["ListFallback", "LiteralList", "list_node", "literal_list", "literal_lists_off",
           "literal_lists_on"]

ListKind = Literal["int", "str"]
_KEY = "privplan_values"  # the Var's argument holding the values


@dataclass(frozen=True, eq=False)
class LiteralList:
    """The values of a literal list, in the order written (duplicates kept).

    ``kind`` "int": every item an integer literal (optionally negative) within BIGINT;
    "str": every item a quoted string (``values`` hold the strings, quotes undone). ``text`` is
    the list as written, parentheses included."""

    kind: ListKind
    values: tuple[Any, ...]
    text: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LiteralList) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __deepcopy__(self, memo: dict[int, Any]) -> LiteralList:
        return self  # immutable: copies of a tree share it


class ListFallback(Exception):
    """A part of planning met a literal list it does not handle exactly: plan again with the
    list as literal nodes (the ordinary path)."""


def list_node(values: LiteralList) -> exp.Var:
    """The node an ``In`` holds in ``field`` for ``values``; it renders the list as written."""
    return exp.Var(this=values.text, **{_KEY: values})


def literal_list(node: exp.Expr) -> LiteralList | None:
    """The values of ``node`` when it is an ``IN`` over a literal list read as a whole."""
    if not isinstance(node, exp.In):
        return None
    holder = node.args.get("field")
    if isinstance(holder, exp.Var):
        values = holder.args.get(_KEY)
        if isinstance(values, LiteralList):
            return values
    return None


_ENABLED: ContextVar[bool] = ContextVar("privplan_literal_lists", default=True)


def literal_lists_on() -> bool:
    """Whether the parser may read long literal lists as a whole (see the module docstring)."""
    return _ENABLED.get()


@contextlib.contextmanager
def literal_lists_off() -> Iterator[None]:
    """Within the block every list is parsed as literal nodes (the fallback; tests)."""
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)
