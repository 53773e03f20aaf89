"""One query's plan, from its text to its costs: the one planning function every caller uses.

``Session`` (its ``sql``, ``explain`` and reports, through ``Session.plan``) and the ledger
audit (:mod:`privplan.audit.verify`, which re-plans recorded queries to check their
mechanisms) call :func:`plan_query`. It parses the text once (:func:`~privplan.sql.parse.
parse_statement`), builds the frozen cores (:func:`~privplan.sql.builder.build_plan`), applies
the query's options (:class:`~privplan.planning.options.QueryOptions`), binds each core through
the ordered :data:`~privplan.planning.passes.PASSES` when a :class:`~privplan.planning.passes.
Binding` is given (the session; the audit has no database and plans from the text and the
policy alone), and splits the budget over the mechanisms (:func:`~privplan.planning.costs.
plan_costs`). It performs no effect: what the caller must do (give the accountant the model of
a virtual table) is returned in :class:`Effects`.

Privacy: the plan and its costs are a function of the query text, the policy, the schema and
public tables only (invariant 2); nothing here reads a private row or charges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from privplan.planning.costs import PlannedQuery, plan_costs
from privplan.planning.options import QueryOptions
from privplan.planning.passes import Binding, bind_core
from privplan.sql.builder import build_plan
from privplan.sql.joins import PublicColumnsLookup
from privplan.sql.parse import parse_statement
from privplan.sql.per_unit import MARK

__all__ = ["Effects", "plan_query"]


@dataclass(frozen=True)
class Effects:
    """What the caller of :func:`plan_query` must do before the charge: give the accountant
    the model of each virtual table the plan reads (a join of two private tables, a per-unit
    derived table; their TablePolicy objects)."""

    virtual_tables: tuple[Any, ...] = ()


def plan_query(sql: str, options: QueryOptions, value: Any, *, policy: Any,
               public_columns: PublicColumnsLookup, query_id: str,
               binding: Binding | None = None,
               schema_not_null: Callable[[Any], frozenset[str]] | None = None
               ) -> tuple[PlannedQuery, Effects]:
    """The planned query (mechanisms, noise, costs within ``value``, the query's budget in the
    session's definition) and the effects its caller performs."""
    plan = build_plan(sql, parse_statement(sql), policy, public_columns,
                      clamps=options.clamps, listed_keys_first=options.listed_groups,
                      schema_not_null=schema_not_null)
    cores = tuple(options.apply(core) for core in plan.cores)
    if binding is not None:
        cores = tuple(bind_core(core, binding) for core in cores)
    virtual = tuple(core.table_policy for core in cores
                    if core.private_join is not None or MARK in core.table)
    planned = plan_costs(replace(plan, cores=cores), value, policy, query_id=query_id)
    return planned, Effects(virtual_tables=virtual)
