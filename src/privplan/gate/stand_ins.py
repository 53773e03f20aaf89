"""The stand-in rows of one private table: a relation the engine computes from edge values.

A private table is replaced, in every statement the gate probes, by a relation of the same
columns and *storage* types whose rows are made of each column's edge values
(:mod:`privplan.gate.edge_values`, converted by the engine itself). Which combinations:

* every value of every column, the other columns at an ordinary value (each column's first
  value that is not NULL);
* the full product of the values of each set of columns that one probed expression reads
  together (``a + b`` fails on a pair of values, not on either alone), up to
  :data:`MAX_PRODUCT` rows a set, else the product of every pair in the set;
* a diagonal: row i holds each column's i-th value (cycled), so every column varies at once.

Each column's values come from a :class:`Values` relation ``(i, v)`` — an inline ``VALUES``
list, or a table the engine made once for the storage type — and the combinations are crossed
by the engine (``CROSS JOIN``), so the text grows with the number of columns, not of rows: the
same SQL reads in DuckDB, PostgreSQL and Spark (only identifier quoting differs).

Privacy: stand-in rows are edge values crossed as expressions read them, never a private row.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

from privplan.engines.base import Values

__all__ = ["MAX_PRODUCT", "Values", "inline_values", "relation_sql"]

MAX_PRODUCT = 20_000
"""Most rows one set of columns contributes as a full product."""


def inline_values(literals: Sequence[str]) -> Values:
    """A :class:`Values` written out as a ``VALUES`` list of ``literals`` (NULL first)."""
    rows = ", ".join(f"({i}, {v})" for i, v in enumerate(literals))
    ordinary = next((v for v in literals[1:]), literals[0])
    return Values(f"(SELECT * FROM (VALUES {rows}) AS __vl(i, v))", len(literals), ordinary)


def relation_sql(values: Mapping[str, Values], together: Iterable[frozenset[str]],
                 quote: Callable[[str], str],
                 keep: Callable[[str], str] = lambda select: select) -> str:
    """The stand-in relation over the columns of ``values``, with the products of
    ``together`` (sets of columns read by one expression). ``quote``: the engine's identifier
    quoting; ``keep``: how the engine holds the part that depends on the columns' types alone
    (the singletons and the diagonal, the same for every query over the table) — a SELECT in,
    a SELECT over the same rows out (DuckDB: a table made once, see
    :meth:`~privplan.engines.duckdb_engine.DuckDBEngine.stand_in_rows`)."""
    columns = list(values)
    singletons = [_product(columns, values, [c], quote) for c in columns]
    fixed = keep(" UNION ALL ".join([*singletons, _diagonal(columns, values, quote)]))
    branches = [fixed]
    seen: set[frozenset[str]] = set()
    for group in _groups(columns, values, together):
        if len(group) > 1 and group not in seen:
            seen.add(group)
            branches.append(_product(columns, values, sorted(group, key=columns.index), quote))
    return " UNION ALL ".join(branches)


def _groups(columns: list[str], values: Mapping[str, Values],
            together: Iterable[frozenset[str]]) -> list[frozenset[str]]:
    out = [frozenset([c]) for c in columns]
    for group in together:
        group = frozenset(c for c in group if c in values)
        if len(group) < 2:
            continue
        size = 1
        for c in group:
            size *= values[c].count
        if size <= MAX_PRODUCT or len(group) == 2:
            out.append(group)
        else:
            out.extend(frozenset(p) for p in itertools.combinations(sorted(group), 2))
    return out


def _product(columns: list[str], values: Mapping[str, Values], group: list[str],
             quote: Callable[[str], str]) -> str:
    lists = [f"{values[c].rows} AS __sv{n}" for n, c in enumerate(group)]
    items = [f"__sv{group.index(c)}.v AS {quote(c)}" if c in group
             else f"{values[c].ordinary} AS {quote(c)}" for c in columns]
    return f"SELECT {', '.join(items)} FROM {' CROSS JOIN '.join(lists)}"


def _diagonal(columns: list[str], values: Mapping[str, Values],
              quote: Callable[[str], str]) -> str:
    longest = max(columns, key=lambda c: values[c].count)
    joins = " ".join(f"JOIN {values[c].rows} AS __sv{n} ON __sv{n}.i = __sd.i % "
                     f"{values[c].count}" for n, c in enumerate(columns))
    items = ", ".join(f"__sv{n}.v AS {quote(c)}" for n, c in enumerate(columns))
    return f"SELECT {items} FROM {values[longest].rows} AS __sd {joins}"
