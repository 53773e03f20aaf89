"""The outer query (HAVING, ORDER BY, LIMIT, expressions, UNION ALL) before the charge.

The outer query runs after the charge over the noisy answer only (post-processing of DP
outputs), so a failure there reveals nothing about the rows. It still must not fail on *every*
answer: that failure does not depend on the data, and such a query must be refused for free
(DESIGN.md invariant 8). Two checks, over stand-in noisy answers of the engine statements' types
(:meth:`~privplan.engines.post_processor.PostProcessor.sample`: zeros, both signs, each type's
extremes, NULL, strings that read as numbers and ones that do not):

* the outer query as it runs after the charge (:func:`~privplan.assemble.outer_query`), on each
  stand-in answer alone: refused when it fails on every one;
* every sub-expression of each outer SELECT (its items, WHERE/HAVING, ORDER BY, LIMIT and
  OFFSET) on its own, over all stand-in answers: a short circuit cannot hide a part that fails
  on any value (``HAVING n > 1 AND n < 'a'`` with a stand-in ``n = 0`` never evaluated
  ``n < 'a'``); refused when one fails on every stand-in answer.

A part that fails on some answers only (``CAST(key AS INT)`` over text keys) is admitted: its
failure after the charge depends on noisy values alone.

Privacy: an outer query, or any part of it, that fails on every stand-in answer is refused for free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import sqlglot
from sqlglot import exp

from privplan.assemble import noisy_frame, outer_query
from privplan.engines.post_processor import PostProcessor, post_process, post_processor
from privplan.errors import PostProcessingError, UnsupportedQueryError
from privplan.gate.expressions import sub_expressions
from privplan.planning.costs import PlannedQuery
from privplan.process_memory import kept
from privplan.rewrite.postprocess import flat_order, layout, post_sql

__all__ = ["check_outer_query", "check_post_processing"]

_CHECKED: dict[tuple[Any, ...], bool] = {}
_CHECKED_MAX = 1024
kept(__name__, _CHECKED.clear)


def check_outer_query(planned: PlannedQuery, schemas: list[list[tuple[str, str]]]) -> None:
    """Check the outer query of ``planned`` (see the module doc). An outer query that is only
    keys and aggregates runs no SQL (its flat path is privplan's own code, which the gate runs
    over stand-in engine answers) and is not checked here; one checked before with the same
    statement types is not checked again."""
    plan = planned.plan
    if len(plan.cores) == 1 and layout(plan.cores[0])[1] \
            and not flat_order(plan.cores[0]).active:
        return
    key = (plan.sql, tuple(tuple(s) for s in schemas),
           tuple((p.measure.id, p.measure.scale) for p in planned.measures))
    if key in _CHECKED:
        return
    variants = [[noisy_frame(core, planned.for_core(i), post_processor().sample(schema, v),
                             draw=False)
                 for i, (core, schema) in enumerate(zip(plan.cores, schemas))]
                for v in range(PostProcessor.SAMPLE_VARIANTS)]
    _refuse_if_always_fails(lambda frames: outer_query(planned, frames), variants)
    single = len(plan.cores) == 1
    for i, core in enumerate(plan.cores):
        name = f"__noisy{i}"
        rows = [_derived(core, frames[i]) for frames in variants]
        _probe_parts(post_sql(core, name, hidden=single), {name: rows})
    if len(_CHECKED) >= _CHECKED_MAX:
        _CHECKED.clear()
    _CHECKED[key] = True


def check_post_processing(sql: str, variants: Sequence[Mapping[str, pd.DataFrame]]) -> None:
    """The same two checks for a post-processing statement ``sql`` over named stand-in
    tables, one mapping per stand-in answer (an outer query over DP subqueries)."""
    if not variants:
        return
    _refuse_if_always_fails(lambda tables: post_process(sql, dict(tables)), variants)
    names = list(variants[0]) if variants else []
    _probe_parts(sql, {n: [v[n] for v in variants] for n in names})


def _derived(core: Any, frame: pd.DataFrame) -> pd.DataFrame:
    from privplan.rewrite.postprocess import with_derived

    return with_derived(core, frame)


def _refuse_if_always_fails(run: Callable[[Any], Any], variants: Sequence[Any]) -> None:
    first: PostProcessingError | None = None
    for variant in variants:
        try:
            run(variant)
            return
        except PostProcessingError as err:
            first = first or err
    raise _refusal(str(first))


def _probe_parts(sql: str, tables: Mapping[str, list[pd.DataFrame]]) -> None:
    """Every sub-expression of each SELECT of ``sql`` that reads one stand-in table, on its own
    in that SELECT's context (its FROM, GROUP BY and output names; no WHERE, HAVING, ORDER BY
    or LIMIT to cut rows first), over all stand-in rows; refused when one fails on every
    row."""
    try:
        tree = sqlglot.parse_one(sql, dialect="duckdb")
    except sqlglot.errors.SqlglotError:
        return  # (the whole query was run on the stand-ins above)
    for select in list(tree.find_all(exp.Select)):
        source = select.args.get("from_") or select.args.get("from")
        table = source.this if source is not None else None
        if not isinstance(table, exp.Table) or select.args.get("joins") \
                or table.name not in tables:
            continue
        frames = tables[table.name]
        _check_cuts(select, table.name, frames[0])
        parts = sub_expressions(_parts_of(select))
        if parts:
            _probe_select(select, table.name, list(parts), frames)


def _parts_of(select: exp.Select) -> list[exp.Expression]:
    roots: list[exp.Expression] = []
    for item in select.expressions:
        roots.append(item.this if isinstance(item, exp.Alias) else item)
    for arg in ("where", "having", "qualify"):
        node = select.args.get(arg)
        if node is not None:
            roots.append(node.this)
    order = select.args.get("order")
    if order is not None:
        roots.extend(o.this if isinstance(o, exp.Ordered) else o for o in order.expressions)
    return [r for r in roots if not isinstance(r, exp.Star)]


def _check_cuts(select: exp.Select, name: str, frame: pd.DataFrame) -> None:
    """LIMIT and OFFSET are evaluated only once a row reaches them (a HAVING that keeps no
    stand-in row hid ``LIMIT 1e20``): each must be a count DuckDB can read (a whole number
    from 0 to 2^63 - 1), checked on its own."""
    for arg in ("limit", "offset"):
        node = select.args.get(arg)
        value = node.expression if node is not None else None
        options = node.args.get("limit_options") if node is not None else None
        if value is None or (options is not None and options.args.get("percent")):
            continue
        text = value.sql(dialect="duckdb")
        try:
            (count,) = post_process(f"SELECT CAST(({text}) AS BIGINT) AS n FROM {name} LIMIT 1",
                                    {name: frame}).iloc[0]
        except (PostProcessingError, IndexError):
            count = None
        if count is None or pd.isna(count) or count < 0:
            raise _refusal(f"{arg.upper()} {text} is not a count from 0 to 2^63 - 1")


def _probe_select(select: exp.Select, name: str, parts: list[str],
                  frames: list[pd.DataFrame]) -> None:
    """All parts in one statement over all stand-in rows (the common case); on a failure,
    each part over each stand-in row alone, refusing a part that fails on all of them."""
    every = pd.concat(frames, ignore_index=True)

    def run(texts: list[str], frame: pd.DataFrame) -> bool:
        try:
            post_process(_in_context(select, texts), {name: frame})
            return True
        except PostProcessingError:
            return False

    if run(parts, every):
        return
    for part in reversed(parts):  # (innermost first: the message names the smallest part)
        if not run([part], every) and not any(run([part], f) for f in frames):
            raise _refusal(f"`{part}` fails on every stand-in answer")


def _in_context(select: exp.Select, parts: list[str]) -> str:
    """``select`` with ``parts`` as extra outputs (after its own: DuckDB lets a part name an
    output by its alias), without what cuts rows before them (WHERE, HAVING, QUALIFY, ORDER
    BY, LIMIT, OFFSET, DISTINCT)."""
    probe = select.copy()
    for arg in ("where", "having", "qualify", "order", "limit", "offset", "distinct"):
        probe.set(arg, None)
    extra = [exp.alias_(sqlglot.parse_one(p, dialect="duckdb"), f"__part{i}")
             for i, p in enumerate(parts)]
    probe.set("expressions", [*probe.expressions, *extra])
    return probe.sql(dialect="duckdb")


def _refusal(what: str) -> UnsupportedQueryError:
    return UnsupportedQueryError(
        f"{what} (checked on stand-in values before anything was spent: it would fail on any "
        "answer). Fix the outer query: column positions, LIMIT/OFFSET values, the types "
        "compared in HAVING, the columns of each UNION ALL branch.")
