"""A session's answer to an outer query over DP subqueries (:mod:`privplan.sql.nesting`).

Each inner query is a DP query of its own — planned with every pre-charge check, charged,
noised — and the outer query runs over their noisy answers only, on the post-processing
connection (post-processing: free of privacy cost, and it cannot reach a private row). Before
the first charge, every inner query is planned, the outer query runs on stand-in answers of
their types, and (for several) their composed total is checked against the budget together:
a statement refused for a reason that does not depend on the data spends nothing (DESIGN.md
invariant 8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pandas as pd

from privplan.assemble import assemble, noisy_frame
from privplan.engines.post_processor import PostProcessor, post_process, post_processor
from privplan.errors import (
    BudgetExceededError,
    PolicyError,
    PostProcessingError,
    UnsupportedQueryError,
)
from privplan.explain import Explanation, explain_planned
from privplan.gate.outer import check_post_processing
from privplan.planning.costs import PlannedQuery
from privplan.result import Result
from privplan.sql.bigquery import QUERY_OPTIONS
from privplan.sql.nesting import Nested, inner_name

__all__ = ["explain_nested", "sql_nested"]


def inner_budgets(sess: Any, nested: Nested, budget: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each inner query's budget keywords. One inner query gets the statement's budget.
    Several: each BigQuery clause query carries its own (OPTIONS), and queries without a
    clause share the statement's budget in equal parts (sequential composition: the parts add
    up to it, so the statement never costs more than its budget; disjoint subqueries then cost
    less, by the general theorem). A statement mixing the two is refused: in BigQuery a SELECT
    without the clause reads raw rows."""
    if len(nested.inners) == 1:
        return [dict(budget)]
    clauses = nested.clauses()
    if all(clauses):
        return [dict(budget) for _ in nested.inners]
    if any(clauses):
        plain = nested.inners[clauses.index(False)]
        raise UnsupportedQueryError(
            "subqueries with and without a DIFFERENTIAL_PRIVACY clause in one statement: "
            f"`{plain[:80]}` has none, so in BigQuery it would read raw rows, while privplan "
            "answers every subquery privately. Give every subquery a clause, or none (the "
            "statement's budget is then shared among them).")
    rest = {k: v for k, v in budget.items() if k in QUERY_OPTIONS}
    value = sess.query_value({k: v for k, v in budget.items() if k not in QUERY_OPTIONS})
    part = value.scale(Fraction(1, len(nested.inners)))
    return [{**rest, "budget": part} for _ in nested.inners]


def check_nested(sess: Any, nested: Nested, budget: Mapping[str, Any]) -> list[PlannedQuery]:
    """Plan every inner query (each through the pre-charge gate) and check the outer query on
    stand-in answers of theirs (their columns and types; zeros, both signs, extremes, NULL:
    :func:`privplan.gate.outer.check_post_processing`, every part of it on its own) before
    anything is charged: an outer query that fails on any answer (unknown column, wrong types)
    spends nothing."""
    variants: list[dict[str, pd.DataFrame | None]] = [
        {} for _ in range(PostProcessor.SAMPLE_VARIANTS)]
    plans: list[PlannedQuery] = []
    for i, (inner, part) in enumerate(zip(nested.inners, inner_budgets(sess, nested, budget))):
        try:
            planned, statements = sess.plan(inner, part)
        except (UnsupportedQueryError, PolicyError) as err:
            raise type(err)(
                "subquery (or WITH query) refused: an outer query may post-process the answer "
                "of a DP subquery, and this subquery is not a DP query privplan answers: "
                f"{err}") from None
        schemas = [sess.engine.bind(stmt) for stmt in statements]
        for v, tables in enumerate(variants):
            frames = [noisy_frame(core, planned.for_core(j),
                                  post_processor().sample(schema, v), draw=False)
                      for j, (core, schema) in enumerate(zip(planned.plan.cores, schemas))]
            try:
                tables[inner_name(i)], _, _ = assemble(planned, frames)
            except PostProcessingError:
                tables[inner_name(i)] = None  # (no answer of this shape: not a stand-in)
        plans.append(planned)
    usable = [{n: v for n, v in t.items() if v is not None} for t in variants
              if all(v is not None for v in t.values())]
    try:
        check_post_processing(nested.outer, usable)
    except UnsupportedQueryError as err:
        raise UnsupportedQueryError(
            f"the outer query fails on any answer of its DP subquery: {err} Fix the outer "
            "query: it reads the subquery's output columns by their names or aliases.") from None
    return plans


def _preview_together(sess: Any, plans: list[PlannedQuery], account: Any = None) -> Any:
    """The composed total of ``account`` (the session's reported one by default) if every
    inner query were admitted (nothing is recorded)."""
    account = account if account is not None else sess.reported
    specs = [replace(m.spec, id=f"{m.spec.id}~{i}")
             for i, planned in enumerate(plans) for m in planned.measures]
    with account.lock:
        account.sync()
        account.know_tables(specs, account.accountant)
        return account.accountant.preview(specs)


def explain_nested(sess: Any, nested: Nested, budget: Mapping[str, Any], sql: str
                   ) -> Explanation:
    """``explain`` of an outer query: the inner query's explanation; for several, one
    explanation of all their mechanisms, their costs added (each subquery is charged on its
    own), and the composed total if all were admitted."""
    parts = inner_budgets(sess, nested, budget)
    if len(nested.inners) == 1:
        explained: Explanation = sess.explain(nested.inner, **parts[0])
        check_nested(sess, nested, budget)
        return explained
    plans = check_nested(sess, nested, budget)
    preview = _preview_together(sess, plans)
    before = sess.reported.accountant.total
    each = [explain_planned(p, preview, before, sess.budget) for p in plans]
    query_cost = each[0].query_cost
    for part in each[1:]:
        query_cost = query_cost + part.query_cost
    return replace(each[0], sql=sql, query_cost=query_cost,
                   mechanisms=tuple(m for p in each for m in p.mechanisms),
                   query_rule="each DP subquery is charged on its own; their costs add",
                   notes=tuple(n for p in each for n in p.notes))


def sql_nested(sess: Any, nested: Nested, budget: Mapping[str, Any]) -> Result[Any]:
    """The inner DP queries answered (charged, noised) as usual, then the outer query run over
    their noisy answers alone: post-processing, free of privacy cost. Several inner queries
    are checked against the budget together first, then charged one after another (each its
    own ledger entry) before anything is released. The per-column accuracy describes the
    inner answers (the outer may reshape them)."""
    plans = check_nested(sess, nested, budget)
    for account in ((*sess.accounts, sess.account) if len(plans) > 1 else ()):
        preview = _preview_together(sess, plans, account)
        if preview.cost <= account.budget:
            continue
        if account is not sess.account or sess.accounts:
            raise BudgetExceededError(account.exceeded(account.spent(), preview.cost))
        raise BudgetExceededError(
            f"budget exceeded: the session has spent {sess.spent().describe()} of "
            f"{sess.budget.describe()}; this statement's {len(plans)} DP subqueries would "
            f"bring the composed total to {preview.cost.describe()}. Nothing was spent. Why: "
            "the budget bounds what all of the session's answers together may reveal "
            "about anyone. Fix: use smaller budgets, or fewer subqueries.")
    answers = [sess.sql(inner, **part) for inner, part in
               zip(nested.inners, inner_budgets(sess, nested, budget))]
    df = post_process(nested.outer, {inner_name(i): a.df for i, a in enumerate(answers)})
    cost, query_cost = answers[0].cost, answers[0].query_cost
    for a in answers[1:]:
        cost, query_cost = cost + a.cost, query_cost + a.query_cost
    note = ("the outer query post-processes the DP "
            + ("subquery's answer" if len(answers) == 1 else "subqueries' answers")
            + "; accuracy and intervals are those of the subquery's columns")
    accuracy: dict[str, Any] = {}
    for i, a in enumerate(answers):
        for column, info in a.accuracy.items():
            accuracy[column if column not in accuracy else f"{column} (subquery {i + 1})"] = info
    return Result(df=df, cost=cost, query_cost=query_cost, accuracy=accuracy,
                  intervals=pd.DataFrame(index=df.index), explanation=answers[0].explanation,
                  notes=[n for a in answers for n in a.notes] + [note])
