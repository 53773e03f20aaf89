"""``column IN (constants)`` when every item is an exact point: the canonical sets directly.

The general path (:meth:`_Analyser.in_constants`) builds one interval per item over exact
fractions, sorts and merges them, takes the complement and canonicalises both, which is slow for
lists of many thousands of values. When the items are integers (none widened) on an int column,
or strings on a str column, each item is exactly one value of the column, and both sets follow
from the sorted distinct values alone: the TRUE-set is the values (runs of consecutive integers
as closed intervals), the FALSE-set every other non-NULL value. The result is the same canonical
:class:`ColumnSet` the general path gives (checked against it in the tests).

Privacy: for exact points the fast path gives the general path's sets exactly, or is not taken.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import cast

from privplan.analysis.predicates.literals import _Const
from privplan.analysis.sets import ColumnSet, Interval

__all__ = ["exact_list_sets", "exact_point_sets"]


def exact_point_sets(ctype: str, consts: Sequence[_Const]) -> tuple[ColumnSet, ColumnSet] | None:
    """(TRUE-set, FALSE-set) of ``column IN (consts)`` in canonical form, or None when an
    item is not an exact point of the column (then the general path applies)."""
    if not consts:
        return None
    if ctype == "int" and all(c.kind == "int" and not c.widen for c in consts):
        return _int_sets(sorted({cast(int, c.value) for c in consts}))
    if ctype == "str" and all(c.kind == "str" for c in consts):
        return _str_sets(sorted({cast(str, c.value) for c in consts}))
    return None


def exact_list_sets(ctype: str, kind: str, values: Sequence[object]
                    ) -> tuple[ColumnSet, ColumnSet] | None:
    """:func:`exact_point_sets` of a list read as a whole (plain items of one ``kind``, "int"
    or "str", none widened, no NULL), without a constant per item; None when the kind is not
    the column's (then the general path applies)."""
    if not values or kind != ctype or kind not in ("int", "str"):
        return None
    if kind == "int":
        return _int_sets(sorted({cast(int, v) for v in values}))
    return _str_sets(sorted({cast(str, v) for v in values}))


def _int_sets(values: list[int]) -> tuple[ColumnSet, ColumnSet]:
    """Runs of consecutive integers; the gaps between them are the FALSE-set."""
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    true = tuple(Interval(a, b) for a, b in runs)
    gaps = [Interval(None, runs[0][0] - 1)]
    gaps += [Interval(b + 1, a - 1) for (_, b), (a, _) in itertools.pairwise(runs)]
    gaps.append(Interval(runs[-1][1] + 1, None))
    return ColumnSet(true, False), ColumnSet(tuple(gaps), False)


def _str_sets(values: list[str]) -> tuple[ColumnSet, ColumnSet]:
    """The strings as points; the open gaps between them (none below '', the least string)."""
    true = tuple(Interval(v, v) for v in values)
    gaps = [] if values[0] == "" else [Interval(None, values[0], False, False)]
    gaps += [Interval(a, b, False, False) for a, b in itertools.pairwise(values)]
    gaps.append(Interval(values[-1], None, False, False))
    return ColumnSet(true, False), ColumnSet(tuple(gaps), False)
