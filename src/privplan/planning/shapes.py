"""The front doors into the core, as one ordered tuple: query shapes rewritten into a core query.

privplan's planner answers one shape, an aggregate SELECT over one private table (and UNION
ALLs of them). Other shapes are rewritten into it before planning, and each such rewrite is a
step of :data:`SHAPES`, run in this order by :func:`shape` and nowhere else:

1. BigQuery's per-unit, per-group aggregation (``AVG`` or contribution bounds with a privacy
   unit in a ``DIFFERENTIAL_PRIVACY`` clause): a per-unit pre-aggregation query
   (:mod:`privplan.sql.bigquery_per_group`);
2. a per-unit pre-aggregation (``SELECT AVG(s) FROM (SELECT uid, SUM(x) AS s … GROUP BY
   uid)``): the outer query over a derived table, added to a copy of the policy
   (:mod:`privplan.sql.per_unit`); the session defines the derived table's view (an effect it
   performs, read from :attr:`Shaped.per_unit`);
3. BigQuery's ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(...)``: the clause cut out, checked
   against the policy (which always wins), its ε and δ becoming the budget
   (:mod:`privplan.sql.bigquery`).

Before them, :func:`route` sends an outer query over DP subqueries to its own path (each inner
query is planned through the doors on its own: :mod:`privplan.session.subqueries`). After them
the statement is parsed once (TOP and long literal lists are read by the parser itself:
:mod:`privplan.sql.parse`) and planned (:func:`privplan.planning.plan.plan_query`).

Privacy: every door is a function of the query text, the policy and the session's definition
only; a rewrite may only tighten what the policy allows (the clause's options are checked).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from privplan.sql.bigquery import apply_dp_clause
from privplan.sql.bigquery_per_group import per_group_query
from privplan.sql.nesting import Nested, split_outer
from privplan.sql.per_unit import PerUnit, split_per_unit

__all__ = ["SHAPES", "Shaped", "route", "shape"]


@dataclass(frozen=True)
class Shaped:
    """A query after the doors: the statement to plan, its keywords (budget and options), the
    policy it is planned under (the session's, or a copy with a derived per-unit table), and
    the per-unit derived table the session must define first (None: none)."""

    text: str
    keywords: Mapping[str, Any]
    policy: Any
    kind: type
    per_unit: PerUnit | None = None


def _per_group(s: Shaped) -> Shaped:
    found = per_group_query(s.text, s.policy, s.kind, s.keywords)
    return s if found is None else replace(s, text=found[0], keywords=found[1])


def _per_unit(s: Shaped) -> Shaped:
    found = split_per_unit(s.text, s.policy)
    if found is None:
        return s
    policy = replace(s.policy, tables={**s.policy.tables, found.table.name: found.table})
    return replace(s, text=found.outer_sql, policy=policy, per_unit=found)


def _dp_clause(s: Shaped) -> Shaped:
    text, keywords = apply_dp_clause(s.text, s.policy, s.kind, s.keywords)
    return replace(s, text=text, keywords=keywords)


SHAPES: tuple[Callable[[Shaped], Shaped], ...] = (_per_group, _per_unit, _dp_clause)
"""The doors, in order: each may rely on what the ones before it rewrote."""


def shape(sql: str, keywords: Mapping[str, Any], policy: Any, kind: type) -> Shaped:
    """``sql`` through every door of :data:`SHAPES`, in order."""
    shaped = Shaped(text=sql, keywords=keywords, policy=policy, kind=kind)
    for door in SHAPES:
        shaped = door(shaped)
    return shaped


def route(sql: str, policy: Any) -> Nested | None:
    """The inner DP queries and the outer query of an outer query over DP subqueries, or None
    for a query the doors take (a per-unit pre-aggregation is one: its subquery is not a DP
    query of its own)."""
    return split_outer(sql) if split_per_unit(sql, policy) is None else None
