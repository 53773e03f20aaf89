"""The engine as judge: each engine statement run over stand-in rows, before the charge.

For every core of a planned query the gate asks the engine itself — the very engine, with the
owner's settings, that will run the statement after the charge — to compute, over a relation
of stand-in rows in place of each private table (:mod:`privplan.gate.stand_ins`):

1. the engine statement as it will run (filters, keys, bounding, clamping, aggregates, the key
   check, the public-domain join);
2. the same statement with every condition removed (WHERE and each FILTER): what comes after a
   filter is then evaluated on *every* stand-in row, not only on the ones the filter keeps;
3. every sub-expression of the user-derived expressions (WHERE, FILTER conditions, group keys
   as released, each measure's per-row input) on its own, over the rows the WHERE reads
   (:mod:`privplan.gate.expressions`): no short circuit hides a branch.

Any error is a refusal, free (nothing has been charged), naming the expression and the engine's
message on the stand-in values (no private row was read, so the message may be shown). What
passes is not a proof — the stand-ins are finitely many values — but it is a second defence,
independent of the allow-lists (:mod:`privplan.sql.totality`, :mod:`privplan.engines.portable`),
that asks the engine rather than a model of it; the enumerating oracle in the tests checks the
two together. The answers of 1 and 2 are real engine answers (to stand-in data), which the gate
then passes through privplan's own processing (:mod:`privplan.gate.in_process`).

Privacy: statements, unfiltered too, and each sub-expression run on stand-ins; errors refuse free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
import sqlglot
from sqlglot import exp

from privplan.engines.base import ProbeFailed, StandIn
from privplan.errors import UnsupportedQueryError
from privplan.gate.expressions import sub_expressions
from privplan.gate.stand_ins import relation_sql
from privplan.rewrite.engine_sql import (
    grid_expression,
    key_sql,
    measure_input_sql,
    row_source,
    stored_grids,
)
from privplan.rewrite.statement import engine_statement
from privplan.sql.plan import CorePlan, Measure

__all__ = ["CoreProbe", "probe_core"]


@dataclass(frozen=True)
class CoreProbe:
    """What the engine answered for one core over stand-in rows: the statement as it will run,
    and without its conditions (frames of the engine statement's columns and types)."""

    answer: pd.DataFrame
    unfiltered: pd.DataFrame


def probe_core(engine: Any, core: CorePlan, measures: list[Measure]) -> CoreProbe:
    """Run the three probes of the module docstring for ``core`` (its ``stand_in_sql`` and
    ``stand_in_tables`` set by planning) on ``engine``; raise a free
    :class:`UnsupportedQueryError` on any failure."""
    assert core.stand_in_sql is not None
    stand_in = replace(core, table_sql=core.stand_in_sql, prebounded=False)
    types = {n: c.type for n, c in core.table_policy.columns.items()}
    exprs = _expressions(stand_in, measures, types)
    together = [cols for cols in exprs.values() if 2 <= len(cols) <= 3]
    relations = {name: _relation(engine, columns, together)
                 for name, columns in core.stand_in_tables.items()}
    statement = engine_statement(stand_in, types, measures, engine.dialect)
    answer = _run(engine, statement, relations, "the engine statement")
    bare = replace(stand_in, where=None,
                   measures=tuple(replace(m, condition=None) for m in stand_in.measures))
    unfiltered = _run(engine, engine_statement(bare, types,
                                               [replace(m, condition=None) for m in measures],
                                               engine.dialect),
                      relations, "the engine statement without its conditions")
    _probe_expressions(engine, exprs, row_source(stand_in), relations)
    return CoreProbe(answer, unfiltered)


def _expressions(core: CorePlan, measures: list[Measure], types: Mapping[str, str]
                 ) -> dict[str, frozenset[str]]:
    """Every sub-expression of the core's user-derived expressions (WHERE, FILTER conditions,
    group keys; see the module doc), and, each as a whole, privplan's own per-row templates
    around them: a key as it is released, each measure's per-row input (the clamp onto the
    grid is one expression whose branches guard one another — NaN and infinities clamp before
    the cast — so its parts are not values of their own; other engines render it as a unit)."""
    roots: list[exp.Expression] = []
    if core.where is not None:
        roots.append(core.where)
    for m in measures:
        if m.condition is not None:
            roots.append(m.condition)
    roots.extend(k.expr for k in core.keys)
    found = sub_expressions(roots)
    wholes = [key_sql(k) for k in core.keys]
    for m in measures:
        value = measure_input_sql(m, types.get(m.column) if m.column else None)
        if value is not None:
            wholes.append(value)
    # every bounded column on its SUM grid: what a session's copy of the table stores (made
    # after the charge, for every such column, measured by this query or not)
    wholes.extend(grid_expression(f'"{c}"', res, lo, hi, types.get(c, "float"))
                  for c, (res, lo, hi) in stored_grids(core).items())
    for text in wholes:
        if text not in found:
            tree = sqlglot.parse_one(text, dialect="duckdb")
            found[text] = frozenset(c.name.lower() for c in tree.find_all(exp.Column))
    return found


def _relation(engine: Any, columns: Mapping[str, str], together: list[frozenset[str]]
              ) -> StandIn:
    values = {c: engine.stand_in_values(t) for c, t in columns.items()}
    return StandIn(relation_sql(values, together, _quoting(engine.dialect),
                                engine.stand_in_rows), dict(columns))


def _quoting(dialect: str) -> Callable[[str], str]:
    if dialect == "spark":
        return lambda name: "`" + name.replace("`", "``") + "`"
    return lambda name: '"' + name.replace('"', '""') + '"'


def _run(engine: Any, statement: str, relations: dict[str, StandIn], what: str
         ) -> pd.DataFrame:
    try:
        frame = engine.probe(statement, relations)
    except ProbeFailed as err:
        raise _refusal(f"{what} fails", err.message) from None
    assert frame is not None
    return frame


def _probe_expressions(engine: Any, exprs: Mapping[str, frozenset[str]], source: str,
                       relations: dict[str, StandIn]) -> None:
    """Evaluate every expression on its own over the stand-in rows: one statement for all
    (the common case); on a failure, each alone, to drop the ones that do not bind on their
    own (see :mod:`privplan.gate.expressions`) and name the one that fails."""
    texts = list(exprs)
    if not texts:
        return
    try:
        engine.probe(_projection(texts, source), relations)
        return
    except ProbeFailed as err:
        first = err
    for text in reversed(texts):  # (innermost first: the message names the smallest part)
        try:
            engine.probe(_projection([text], source), relations)
        except ProbeFailed as err:
            if err.stage == "run":
                raise _refusal(f"`{text}` fails", err.message) from None
    if first.stage == "run":
        raise _refusal("the query's expressions fail together", first.message)


def _projection(texts: list[str], source: str) -> str:
    """Each expression evaluated on every row, inside the engine: its text's length, the
    largest (every engine converts any value to text; the value itself never leaves the
    engine, so a value pandas cannot hold, e.g. DATE 'infinity', fails nothing here, as it
    fails nothing in the real statement)."""
    items = ", ".join(f"max(length(CAST(({t}) AS VARCHAR))) AS __e{i}"
                      for i, t in enumerate(texts))
    return f"SELECT {items} FROM {source}"


def _refusal(what: str, message: str) -> UnsupportedQueryError:
    if len(message) > 240:  # (an engine may quote a stand-in value of 10,000 characters)
        message = message[:240] + "..."
    return UnsupportedQueryError(
        f"query refused before anything was spent: on stand-in rows (values that columns of "
        f"their stored types can hold: NULL, extremes, odd strings and dates), {what} in the "
        f"engine ({message}). Were it to fail on a real row after the charge, the failure "
        "would tell that such a row exists. Make every expression valid for all values of "
        "its columns (TRY_CAST instead of CAST, compare a column with a value of its own "
        "type, an explicit comparison instead of IS TRUE on a non-boolean).")
