"""Planned queries shared by the sessions of a process: a fresh session pays what a warm one pays.

A session's own cache (:mod:`privplan.session.plan_cache`) is keyed by the policy *object* and
the engine's generation, so a session opened per query (the CLI, a DB-API connection per
request, a pool) planned every query afresh. This cache holds the admitted plans of every
DuckDB session of the process, keyed by what planning reads that is not the engine:

* the policy's *content* (:func:`policy_key`: the frozen policy itself, compared by value, with
  the type of every value in it, so a policy loaded again from the same file or an equal
  object hits, and one that differs in anything — a bound, a type, a public value — misses);
* the session's privacy definition, its ``prepare`` flag, the engine's class and dialect;
* the exact query text and budget keywords (each value with its type), as the session cache.

and, checked on every lookup against the *reusing* session, everything planning read from the
engine and the session's catalog (:class:`PlanReads` records it while a query is planned): each
private table's name in the engine, its stored column types and the typed view over them
(:meth:`SessionCatalog.typed_table`, which also runs that session's once-per-table NOT NULL
check), the NOT NULL facts of its schema, the columns of the public tables the policy lists
without columns, and which copy of a core's bounded rows it reads: none (the reusing session
must hold none either), or the process's shared copy (:mod:`privplan.engines.shared_copies`,
named for the file as opened, the policy and the SELECT: the reusing session must read that
very copy; a plan over a session's own copy is not shared). A plan is reused only if every
one of these reads gives the same answer in the reusing session: the key is everything
planning read, or nothing is cached.

What a cached plan holds that belongs to the session that planned it, and how it is not leaked:

* the ledger's query id: renamed to the reusing session's next id
  (:func:`~privplan.session.plan_cache.with_query_id`, as the session cache does);
* the engine relations of long public key domains (``GroupKey.domain_table``, in the planning
  session's private work database): the reusing session's engine makes its own relation of
  the same public values and the admission is :meth:`~privplan.gate.Admission.relocated` to
  it (the old name cannot survive: it is replaced as a whole name in every statement);
* session copies, per-unit views, stand-ins: plans reading a copy or defining a per-unit view
  are not shared; stand-in names depend on the table name only.

Why this is safe (the privacy argument, as for the session cache):

* What is *released* is unchanged: the plan is the very object planning returned for the same
  inputs (planning is deterministic and a function of the query text, the budget keywords, the
  policy and the schema, all of which match); noise is drawn afresh after the charge.
* What is *charged* is unchanged: each session's charge is composed against *its own* ledger
  at charging time by its own accountant (nothing of the accounting is shared); the specs are
  renamed to that ledger's next query id.
* No check that depends on the data or the ledger is skipped: the reusing session binds every
  statement to its engine, runs the outer-query check and its own NOT NULL check once per
  table, and charges, runs and checks every answer as before. The gate's verdict is kept:
  the statements are the same text over tables of the same stored types.
* Plans that read public *data* (joins with public tables) or define engine views are never
  shared (:func:`~privplan.session.plan_cache.cacheable`); nor are PLD sessions' plans (their
  noise is calibrated to the session's budget).
* Timing depends on no row: a hit depends on the text, the keywords, the policy and the schema.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from privplan.engines.duckdb_engine import DuckDBEngine
from privplan.gate import Admission
from privplan.lru import LRU
from privplan.planning.passes import bounded_select
from privplan.process_memory import kept
from privplan.session.catalog import PublicColumns
from privplan.session.plan_cache import cacheable, frozen_value

__all__ = ["MAX_SHARED", "PlanReads", "SharedPlans", "policy_key", "shared_plans"]

MAX_SHARED = 512


class PlanReads:
    """What one planning run read from the session's catalog and engine, recorded as it reads.

    It stands in for the catalog (:class:`~privplan.planning.passes.SourceCatalog`), the
    public reads (:class:`~privplan.planning.passes.PublicReads`) and the copies lookup of
    :class:`~privplan.planning.passes.Binding`, forwarding every call. ``facts``: the reads to
    replay in another session; ``domains``: the long-domain relations made (name, values);
    ``shareable``: False once planning read public data or found a session copy."""

    def __init__(self, catalog: Any, engine: Any) -> None:
        self.catalog, self.engine = catalog, engine
        self.facts: list[tuple[str, Any, Any]] = []
        self.domains: dict[str, tuple[Any, ...]] = {}
        self.shareable = True

    # -- the catalog ---------------------------------------------------------------------
    def typed_table(self, table: Any) -> tuple[str, dict[str, str]]:
        found = self.catalog.typed_table(table)
        self.facts.append(("typed", table, (found[0], dict(found[1]))))
        return found

    def stand_in_view(self, table: Any, stand_ins: dict[str, dict[str, str]]) -> str:
        return self.catalog.stand_in_view(table, stand_ins)

    def check_portable(self, core: Any, types: dict[str, str]) -> None:
        self.catalog.check_portable(core, types)

    def schema_not_null(self, table: Any) -> frozenset[str]:
        found: frozenset[str] = self.catalog.schema_not_null(table)
        self.facts.append(("not_null", table, found))
        return found

    def public_columns(self) -> PublicColumns:
        return PublicColumns(self.catalog, lambda name, found: self.facts.append(
            ("public", name, found)))

    def copies(self, select_sql: str) -> str | None:
        made: str | None = self.engine.materialized(select_sql)
        shared = getattr(self.engine, "reads_shared", None)  # (DuckDB's: shared_copies)
        if made is not None and shared is not None and shared(made):
            # (the process's copy: its name and rows are those of every session that holds
            # it — the same file as opened, policy and SELECT — so the plan is shared, on
            # condition that the reusing session reads that very copy too)
            self.facts.append(("copy", select_sql, made))
        elif made is not None:
            self.shareable = False  # (a session copy: its name and rows are this session's)
        return made

    # -- the engine's public reads ---------------------------------------------------------
    def table_sql(self, table: Any) -> str:
        return self.engine.table_sql(table)

    def columns(self, table_sql: str) -> dict[str, str]:
        self.shareable = False  # (a public table's schema: read per session)
        return self.engine.columns(table_sql)

    def fetch_public(self, sql: str) -> list[tuple[Any, ...]]:
        self.shareable = False  # (public rows: they may change without the schema moving)
        return self.engine.fetch_public(sql)

    def domain_table(self, values: list[Any]) -> str:
        name: str = self.engine.domain_table(values)
        self.domains[name] = tuple(values)
        return name


def _replay(sess: Any, facts: tuple[tuple[str, Any, Any], ...]) -> bool:
    """Whether every read planning made gives the same answer in ``sess`` (in the order made:
    a read may raise, as it would have while planning, e.g. a NOT NULL column holding NULL)."""
    catalog = sess.catalog
    for kind, arg, answer in facts:
        if kind == "typed":
            found = catalog.typed_table(arg)
            now: Any = (found[0], dict(found[1]))
        elif kind == "not_null":
            now = catalog.schema_not_null(arg)
        elif kind == "copy":
            now = sess.engine.materialized(arg)  # (adopts the process's copy, as planning did)
        else:
            found = catalog.public_table_columns(arg)
            now = None if found is None else frozenset(found)
        if now != answer:
            return False
    return True


_FINGERPRINTS: dict[int, tuple[weakref.ref[Any], Hashable]] = {}
_FP_LOCK = threading.Lock()


def _types(value: Any) -> Hashable:
    """The type of every value inside ``value`` (policies compare ``1 == 1.0 == True``)."""
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value), tuple(_types(getattr(value, f.name)) for f in fields(value)))
    if isinstance(value, Mapping):
        return (type(value), tuple((type(k), _types(v)) for k, v in value.items()))
    if isinstance(value, (tuple, list, frozenset, set)):
        kinds = set(map(type, value))
        if kinds <= {str, int, float, bool, type(None)}:
            return (type(value), tuple(map(type, value)) if len(kinds) > 1 else tuple(kinds))
        return (type(value), tuple(_types(v) for v in value))
    return type(value).__qualname__


class _PolicyKey:
    """A policy's content as a key: equal when the policies are equal (by value, the frozen
    dataclasses' equality) and so are the types of all their values; its hash computed once
    (hashing a policy walks every public value)."""

    __slots__ = ("_hash", "policy", "types")

    def __init__(self, policy: Any) -> None:
        self.policy, self.types = policy, _types(policy)
        self._hash = hash((policy, self.types))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _PolicyKey) and self._hash == other._hash and (
            self.policy is other.policy
            or (self.types == other.types and self.policy == other.policy))


def policy_key(policy: Any) -> Hashable:
    """The policy's content as a key (:class:`_PolicyKey`), made once per policy object."""
    with _FP_LOCK:
        held = _FINGERPRINTS.get(id(policy))
        if held is not None and held[0]() is policy:
            return held[1]
    key = _PolicyKey(policy)
    with _FP_LOCK:
        _FINGERPRINTS[id(policy)] = (weakref.ref(policy), key)
        weakref.finalize(policy, _FINGERPRINTS.pop, id(policy), None)
    return key


@dataclass(frozen=True)
class _Shared:
    facts: tuple[tuple[str, Any, Any], ...]
    domains: tuple[tuple[str, tuple[Any, ...]], ...]
    admission: Admission


class SharedPlans(LRU[_Shared]):
    """Admitted plans shared by the sessions of a process, least recently used dropped first."""

    def __init__(self, max_entries: int = MAX_SHARED) -> None:
        super().__init__(max_entries)
        self.hits = self.misses = 0

    @staticmethod
    def key(sess: Any, sql: str, budget: Mapping[str, Any]) -> Hashable | None:
        """The key of ``sess.plan(sql, budget)``, or None when it is not shared (another
        engine, a PLD session, a keyword without a hashable stand-in)."""
        if type(sess.engine) is not DuckDBEngine or sess.pld is not None:
            return None
        frozen = frozen_value(dict(budget))
        if frozen is None:
            return None
        return (policy_key(sess.policy), sess.kind, sess.prepare, type(sess.engine),
                sess.engine.dialect, sql, frozen)

    def get(self, key: Hashable | None, sess: Any) -> Admission | None:
        """The admission planned under ``key`` by any session, relocated to ``sess``'s engine,
        if every read its planning made gives the same answer in ``sess``."""
        if key is None:
            return None
        entry = self._found(key)
        if entry is None or not _replay(sess, entry.facts):
            self.misses += 1
            return None
        names = {old: sess.engine.domain_table(values) for old, values in entry.domains}
        admission = entry.admission.relocated({o: n for o, n in names.items() if o != n})
        if any(sess.engine.materialized(bounded_select(core)) is not None
               for core in admission.planned.plan.cores):
            self.misses += 1  # (planned afresh: it reads the session's copy)
            return None
        self.hits += 1
        return admission

    def put(self, key: Hashable | None, reads: PlanReads, admission: Admission) -> None:
        if key is None or not reads.shareable or not cacheable(admission.planned):
            return
        used = {k.domain_table for core in admission.planned.plan.cores for k in core.keys}
        entry = _Shared(tuple(reads.facts),
                        tuple((n, v) for n, v in reads.domains.items() if n in used), admission)
        self._store(key, entry)

    def clear(self) -> None:
        super().clear()
        self.hits = self.misses = 0


shared_plans = SharedPlans()
"""The process's one cache of plans shared by sessions."""
kept(__name__, shared_plans.clear)
