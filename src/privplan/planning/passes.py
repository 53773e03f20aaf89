"""The pre-charge binding passes: one ordered tuple, each a pure step from a core to a new one.

A core as the builder makes it (:func:`privplan.sql.builder.build_plan`) comes from the query
text and the policy alone. Before anything is charged it is bound to what the engine will
really compute (DESIGN.md invariant 7): the source it reads (the typed view of a private table,
or of two joined on their unit) and the gate's stand-in source beside it, the public joins'
schemas, total versions of every expression the engine evaluates (the engine as judge), the
portable subset of a remote engine, the public joins' stability and domains, and each public
key domain as the engine types it. :data:`PASSES` lists these steps in their order; each takes
a frozen :class:`~privplan.sql.plan.CorePlan` and the :class:`Binding` and returns a new one
(sqlglot's optimizer ``RULES``, read as a pipeline). The pre-charge gate (:mod:`privplan.gate`)
judges what the last pass returns.

What a pass may read is what :class:`Binding` offers: the catalog's stored types and stand-in
views, the public tables (their schemas and rows: public data), the judge (DuckDB over
literals) and the session's existing copies. None reads a private row.

Privacy: every pass is a function of the query text, the policy, the schema and public tables
only, and only narrows what the engine may compute (invariants 2, 7, 8).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from privplan.planning.engine_semantics import (
    describe_public_joins,
    make_core_total,
    type_public_domains,
)
from privplan.planning.public_joins import resolve_public_joins
from privplan.planning.reads import DomainJudge, DomainTables, PublicCatalog
from privplan.rewrite.engine_sql import bounded_source, private_join_source
from privplan.sql.plan import CorePlan

__all__ = ["PASSES", "Binding", "PublicReads", "SourceCatalog", "bind_core", "bounded_select"]


class SourceCatalog(Protocol):
    """What the source pass reads from a session's catalog (:mod:`privplan.session.catalog`)."""

    def typed_table(self, table: Any) -> tuple[str, dict[str, str]]: ...

    def stand_in_view(self, table: Any, stand_ins: dict[str, dict[str, str]]) -> str: ...

    def check_portable(self, core: CorePlan, types: dict[str, str]) -> None: ...


class PublicReads(PublicCatalog, DomainTables, Protocol):
    """The engine's reads of public tables the passes use (schemas, rows, long domains)."""


@dataclass(frozen=True)
class Binding:
    """What the passes may read. ``sql``: the query as planned (error locations); ``catalog``:
    stored types and stand-in views; ``public``: the engine's reads of public tables (schemas,
    ``fetch_public``, the long-domain relation); ``judge``: DuckDB over literals;
    ``copies``: the session's existing copy of a bounded SELECT, or None."""

    sql: str
    catalog: SourceCatalog
    public: PublicReads
    judge: DomainJudge
    copies: Callable[[str], str | None]


def _source(core: CorePlan, b: Binding) -> CorePlan:
    """The source the engine reads (the policy table's typed view, or two private tables
    joined on their unit) and the gate's stand-in source beside it, with its column types."""
    stand_ins: dict[str, dict[str, str]] = {}
    if core.private_join is not None:
        left, right = core.private_join
        table_sql, types = private_join_source(left, b.catalog.typed_table(left), right,
                                               b.catalog.typed_table(right))
        stand_in = private_join_source(
            left, (b.catalog.stand_in_view(left, stand_ins), {}), right,
            (b.catalog.stand_in_view(right, stand_ins), {}))[0]
    else:
        table_sql, types = b.catalog.typed_table(core.table_policy)
        stand_in = b.catalog.stand_in_view(core.table_policy, stand_ins)
    return replace(core, table_sql=table_sql, stand_in_sql=stand_in,
                   stand_in_tables=stand_ins, source_types=types)


def _public_schemas(core: CorePlan, b: Binding) -> CorePlan:
    return describe_public_joins(core, b.public) if core.joins else core


def _total(core: CorePlan, b: Binding) -> CorePlan:
    return make_core_total(core, b.judge, b.sql)


def _portable(core: CorePlan, b: Binding) -> CorePlan:
    b.catalog.check_portable(core, dict(core.source_types))  # (PostgreSQL, Spark: see there)
    return core


def _public_joins(core: CorePlan, b: Binding) -> CorePlan:
    return resolve_public_joins(core, b.public) if core.joins else core


def _domains(core: CorePlan, b: Binding) -> CorePlan:
    return type_public_domains(core, b.judge, b.sql, b.public)


def _session_copy(core: CorePlan, b: Binding) -> CorePlan:
    """The session's copy of the core's bounded rows, once made, is read directly (at row
    level a default session's only copies are durable ones: ``privplan prepare``)."""
    made = b.copies(bounded_select(core))
    return core if made is None else replace(core, table_sql=made, prebounded=True)


PASSES: tuple[Callable[[CorePlan, Binding], CorePlan], ...] = (
    _source, _public_schemas, _total, _portable, _public_joins, _domains, _session_copy)
"""The binding steps, in order: each may rely on what the ones before it settled."""


def bounded_select(core: CorePlan) -> str:
    """The SELECT that makes the core's session copy (its bounded rows); also the key under
    which the engine keeps it."""
    return bounded_source(core).removeprefix("(").removesuffix(")")


def bind_core(core: CorePlan, binding: Binding) -> CorePlan:
    """``core`` through every pass of :data:`PASSES`, in order."""
    for step in PASSES:
        core = step(core, binding)
    return core
