"""A session's cache of planned queries: the data-independent planning of a query text, done once.

Planning (parse, validate, plan, make total, split the budget and calibrate noise, generate the
engine statements) is a function of the query text, the budget keywords, the policy and the
engine's *schema* only (DESIGN.md invariant 2: it reads no private row). A session that asks the
same question again (a dashboard, a notebook re-run, a report) can reuse that work. The cache
holds the planned query and its engine statements, keyed by everything planning reads:

* the exact query text and budget keywords (each value with its type: ``epsilon=1`` and
  ``epsilon=1.0`` are two keys, so a keyword refused for its type is refused again);
* the policy object (by identity: a session given another policy plans afresh);
* the session's privacy definition and its ``prepare`` flag;
* the engine's generation (:attr:`~privplan.engines.duckdb_engine.DuckDBEngine.generation`),
  which moves with every change the session makes to what the engine exposes: a table
  registered (new data, new types: the session's caches of column types and NOT NULL checks are
  reset at the same time), a derived view defined, a bounded copy made or dropped.

Why this is safe (the privacy argument):

* What is *released* is unchanged: the cached plan is the very object planning returned for
  the same inputs (planning is deterministic); noise is drawn afresh after the charge, from the
  same calibrated mechanisms, for every answer.
* What is *charged* is unchanged: the charge is composed against the ledger *at charging time*
  by the accountant (not cached); the cached specs are given the query id the ledger assigns
  now (:func:`with_query_id`), exactly as a fresh plan's would be.
* No check that depends on the data or the ledger is skipped: the budget check, the charge,
  the key-uniqueness check on the engine's answer and everything after the charge run for every
  query. The checks planning does once per table and session (NOT NULL columns, column types)
  were already done once per session before this cache; an error in planning caches nothing.
  The engine statement is still bound before every charge (a table changed outside the
  session is caught there: the Spark engine compares the schema of every table it described
  with the schema now and raises SchemaChanged, and the query is planned again over column
  types read afresh, :func:`planned_again_if_changed`).
* Plans that read public *data* (joins with public tables: their key stability fixes the
  sensitivity) or define engine views (per-unit subqueries) are never cached: public tables
  may change between queries without the engine's generation moving.
* Timing does not depend on the data: whether a query hits the cache depends only on its text,
  its budget keywords and the session's state, never on a row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from privplan.engines.base import SchemaChanged
from privplan.gate import Admission
from privplan.gate.outer import check_outer_query
from privplan.lru import LRU
from privplan.planning.costs import PlannedQuery
from privplan.sql.per_unit import MARK

MAX_ENTRIES = 256


def frozen_value(value: Any) -> Hashable | None:
    """A hashable stand-in for a budget keyword's value that tells apart what planning could
    tell apart (the value *and* its type; mappings and sequences element by element), or None
    when the value has no such stand-in (then the query is not cached)."""
    if isinstance(value, Mapping):
        items = []
        for k, v in value.items():
            frozen = frozen_value(v)
            if frozen is None:
                return None
            items.append((type(k), k, frozen))
        try:
            return ("map", type(value), tuple(sorted(items, key=repr)))
        except TypeError:
            return None
    if isinstance(value, (list, tuple)):
        parts = [frozen_value(v) for v in value]
        if any(p is None for p in parts):
            return None
        return ("seq", type(value), tuple(parts))
    try:
        hash(value)
    except TypeError:
        return None
    return (type(value), value)


@dataclass(frozen=True)
class _Entry:
    policy: Any  # held, so the id in the key cannot be reused by another object
    admission: Admission


class PlanCache(LRU[_Entry]):
    """Planned queries of one session by :meth:`key`, least recently used dropped first."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        super().__init__(max_entries)

    @staticmethod
    def key(sql: str, budget: Mapping[str, Any], *, policy: Any, kind: type, prepare: bool | None,
            generation: int) -> Hashable | None:
        """The key of a planning request, or None when it cannot be cached."""
        frozen = frozen_value(dict(budget))
        if frozen is None:
            return None
        return (sql, frozen, id(policy), kind, prepare, generation)

    def get(self, key: Hashable | None, policy: Any) -> Admission | None:
        if key is None:
            return None
        entry = self._found(key)
        return None if entry is None or entry.policy is not policy else entry.admission

    def put(self, key: Hashable | None, policy: Any, admission: Admission) -> None:
        if key is None or not cacheable(admission.planned):
            return
        self._store(key, _Entry(policy, admission))


def cacheable(planned: PlannedQuery) -> bool:
    """Whether a plan depends on the query text, the policy and the engine's schema alone: not
    when a core joins a public table (whose rows planning reads, see
    :mod:`privplan.planning.public_joins`)."""
    return all(not core.joins for core in planned.plan.cores)


def with_query_id(planned: PlannedQuery, query_id: str) -> PlannedQuery:
    """``planned`` with its mechanisms named after ``query_id`` (the ledger's next query), as
    planning it afresh now would name them. The plan and the noise are shared (read only).
    The query's own composition is kept: only its cost and rule are read (answers, explain,
    reports), which do not name mechanisms."""
    if planned.query_id == query_id:
        return planned
    cut = len(planned.query_id)
    measures = tuple(replace(p, spec=replace(p.spec, id=query_id + p.spec.id[cut:]))
                     for p in planned.measures)
    return replace(planned, query_id=query_id, measures=measures)


def plan_key(sess: Any, sql: str, budget: Mapping[str, Any]) -> Hashable | None:
    """The cache key of ``sess.plan(sql, budget)`` (see :meth:`PlanCache.key`)."""
    return PlanCache.key(sql, budget, policy=sess.policy, kind=sess.kind,
                         prepare=sess.prepare, generation=sess.engine.generation)


def reuse(sess: Any, admission: Admission) -> Admission:
    """A cached admission of ``sess`` with the pre-charge steps that do not depend on the query
    text alone run again: the accountant knows the plan's virtual tables (it may have been
    rebuilt from the ledger since), every statement binds to the engine as it is now and the
    outer query passes on stand-ins of the types it binds to, and the mechanisms are named
    after the ledger's next query. The gate's verdict on the statements is kept: they are the
    same statements over tables of the same storage types (the engine's generation, in the
    key, moves with any change the session can see)."""
    planned = admission.planned
    for core in planned.plan.cores:
        if core.private_join is not None or MARK in core.table:
            sess._ensure_table(core.table_policy)
    check_outer_query(planned, [sess.engine.bind(stmt) for stmt in admission.statements])
    return admission.renamed(with_query_id(planned, sess.ledger.next_query_id()))


F = TypeVar("F", bound=Callable[..., Any])


def planned_again_if_changed(plan: F) -> F:
    """``Session.plan``, planned once more when binding finds that a table changed since the
    session described it (SchemaChanged, before any charge): the session's column types are
    read afresh and the engine's generation has moved (no cached plan is reused), so nothing
    is planned or charged with stale types. A table that changes again meanwhile is a
    refusal (SchemaChanged is an UnsupportedQueryError)."""
    @functools.wraps(plan)
    def planned(sess: Any, sql: str, budget: Mapping[str, Any]) -> Any:
        try:
            return plan(sess, sql, budget)
        except SchemaChanged:
            sess.catalog.forget()
            return plan(sess, sql, budget)
    return planned  # type: ignore[return-value]
