"""Session: a policy, an engine and a ledger; ``sql()``, ``explain()``, ``spent()``, ``remaining()``.

The order of work in :meth:`Session.sql` is the privacy argument (docs/DESIGN.md §2; §9 follows
it step by step):

1. parse, validate and plan from the query text, the policy and the schema only
   (data-independent; query parameters are public values, bound into the text as literals
   first: ``privplan.sql.params``);
2. split the query's budget over its mechanisms and calibrate their noise
   (:mod:`privplan.planning.costs`);
3. write and bind the engine statements and pass them through the pre-charge gate
   (:mod:`privplan.gate`): a failure up to here spends nothing;
4. charge (:meth:`Session._charge`): in one ledger transaction, compose the mechanisms with the
   ledger's history, refuse with :class:`BudgetExceededError` if the total would exceed the
   budget, and record them;
5. only then run the statements, add noise, post-process and return.

Privacy: nothing reads a private row before _charge commits a charge the gate admitted.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import duckdb

from privplan.accounting.accountant import Accountant
from privplan.accounting.definitions import (
    GDP,
    KINDS,
    ZCDP,
    ApproxDP,
    PureDP,
    budget_keywords,
    constructors,
)
from privplan.accounting.model import MechanismSpec, TableModel
from privplan.arguments import accepts, checked_arguments
from privplan.assemble import NoisyColumns, assemble, noisy_columns
from privplan.boundary import log, privplan_errors
from privplan.engines.judge import judge
from privplan.engines.open import open_engine
from privplan.engines.recognise import check_database, refuse_engine_keyword
from privplan.errors import BudgetExceededError, PolicyError
from privplan.explain import Explanation, explain_planned
from privplan.gate import Admission, admit
from privplan.ledger.store import LedgerEntry
from privplan.planning.costs import PlannedMeasure, PlannedQuery
from privplan.planning.engine_semantics import check_one_row_per_key, make_core_total
from privplan.planning.options import QueryOptions
from privplan.planning.passes import Binding
from privplan.planning.plan import plan_query
from privplan.planning.query_budget import query_budget
from privplan.planning.shapes import Shaped, route, shape
from privplan.policy import Policy
from privplan.result import Result
from privplan.rewrite.engine_sql import COUNT_KINDS
from privplan.rewrite.per_unit_sql import derived_view_sql
from privplan.rewrite.statement import engine_statement
from privplan.session.account import Account, shared_account
from privplan.session.catalog import SessionCatalog
from privplan.session.copies import SessionCopies
from privplan.session.inputs import as_policy as _as_policy
from privplan.session.inputs import data_file as _data_file
from privplan.session.plan_cache import PlanCache, plan_key, planned_again_if_changed, reuse
from privplan.session.pld import pld_accounting
from privplan.session.shared_plans import PlanReads, SharedPlans, policy_key, shared_plans
from privplan.session.subqueries import explain_nested, sql_nested
from privplan.sql.bigquery import QUERY_OPTIONS
from privplan.sql.builder import build_plan
from privplan.sql.params import Style, bind_query
from privplan.sql.parse import with_list_fallback
from privplan.sql.per_unit import PerUnit
from privplan.sql.plan import CorePlan
from privplan.views.session import SessionViews

B = TypeVar("B", PureDP, ApproxDP, ZCDP, GDP)
"""The session's privacy definition: every cost and total of a session is a value of it."""
Num = float | Fraction | Decimal
"""A budget parameter (an int is a float to a type checker)."""
Clamps = Mapping[str, tuple[float, float]]
Params = Sequence[Any] | Mapping[str, Any]
"""Query parameters: a sequence for ``?`` / ``$1`` placeholders, a mapping for ``$name``."""
QUERY_KEYWORDS = (*budget_keywords(), "budget", *QUERY_OPTIONS)
_PARAMS = Style(call="sess.sql(q, params={})", named="$")
_EXPLAIN_PARAMS = Style(call="sess.explain(q, params={})", named="$")


class Session(SessionViews, Generic[B]):
    """A private database session. Create with :func:`privplan.connect`.

    Generic in its privacy definition (``Session[PureDP]`` …), so that a type checker catches a
    query budget or a cost read of another kind (``rho=`` on a pure-DP session,
    ``spent().rho``), as the session itself refuses them at run time."""

    @privplan_errors
    def __init__(
        self,
        database: str | Path | duckdb.DuckDBPyConnection,
        *,
        policy: Policy | str | Path | Mapping[str, Any],
        budget: B,
        ledger: Any = None,
        exact_limit: int | None = None,
        prepare: bool | None = None,
        composition: str = "additive",
        accounts: Sequence[Account] = (),
    ) -> None:
        self.policy = _as_policy(policy)
        if prepare is not None and not isinstance(prepare, bool):
            raise PolicyError(
                f"prepare must be True, False or None (the default), got {prepare!r}. True: "
                "copy each table on its first query; False: never copy a row-level table; "
                "None: copy it from the second query where its rows cannot change.")
        self._session_copies = SessionCopies(prepare)  # (which copies queries read)
        self._told_clamping = False  # (see _note_clamping)
        # answers' explanations whose worst case is not written yet (see Explanation.settle)
        self._unsettled: list[weakref.ref[Explanation]] = []
        if type(budget) not in KINDS:
            raise PolicyError(
                f"budget must be a privacy value: {constructors()}; got {budget!r}. Why: a bare "
                "number does not say which privacy definition the session composes under.")
        # composition="pld": an (ε, δ) budget held as the μ-GDP budget that implies it, so
        # releases compose by their exact (Gaussian) privacy-loss distributions
        self.pld = pld_accounting(budget, composition)
        if self.pld is not None:
            budget = self.pld.mu  # type: ignore[assignment]  # (the session is a GDP session)
        self.budget: B = budget
        self.kind: type[B] = type(budget)
        data_file = _data_file(database, self.policy)
        if data_file is None:
            check_database(database)  # (what it is, before anything is opened)
        # the engine before the ledger: a database that cannot be opened leaves no ledger file
        self.engine = open_engine(":memory:" if data_file is not None else database)
        try:
            if data_file is not None:
                self.engine.register(data_file[0], data_file[1])
            self._owns_account = not isinstance(ledger, Account)
            self.account: Account = (
                shared_account(ledger, type(budget), budget, self.policy) if isinstance(ledger, Account)
                else Account.open(ledger, budget, self.policy, exact_limit=exact_limit))
            self.accounts: tuple[Account, ...] = tuple(
                shared_account(a, type(budget), None, self.policy) for a in accounts)
        except BaseException:
            self.engine.close()
            raise
        self.ledger = self.account.ledger
        self.catalog = SessionCatalog(self.engine, self.policy)  # (stored types, typed views)
        share = getattr(self.engine, "share_copies", None)
        if share is not None:  # (copies shared by the process's sessions of an equal policy)
            share(policy_key(self.policy))
        self._plans = PlanCache()  # planned queries by text, budget, policy and engine state
        self._shared = shared_plans  # the process's plans, by policy content and schema

    @property
    def prepare(self) -> bool | None:
        """``connect``'s ``prepare``: True, False, or None (the default: see
        :mod:`privplan.session.copies`); a key of the cached plans."""
        return self._session_copies.prepare

    @prepare.setter
    def prepare(self, value: bool | None) -> None:
        self._session_copies.prepare = value

    # -- public API ------------------------------------------------------------------------
    @privplan_errors
    def register(self, name: str, data: Any) -> None:
        """Expose a DataFrame (zero-copy) or a CSV/Parquet path as the policy table ``name``."""
        table = self.policy.table(name)
        self.engine.register(table.name, data)
        self.catalog.forget(table.name)

    @overload
    def explain(self: Session[PureDP], sql: str, *, params: Params | None = ...,
                epsilon: Num | None = ...,
                budget: PureDP | None = ..., max_groups_contributed: int | None = ...,
                clamps: Clamps | None = ...) -> Explanation: ...
    @overload
    def explain(self: Session[ApproxDP], sql: str, *, params: Params | None = ...,
                epsilon: Num | None = ...,
                delta: Num | None = ..., budget: ApproxDP | None = ...,
                max_groups_contributed: int | None = ..., clamps: Clamps | None = ...
                ) -> Explanation: ...
    @overload
    def explain(self: Session[ZCDP], sql: str, *, params: Params | None = ...,
                rho: Num | None = ...,
                budget: ZCDP | None = ..., max_groups_contributed: int | None = ...,
                clamps: Clamps | None = ...) -> Explanation: ...
    @overload
    def explain(self: Session[GDP], sql: str, *, params: Params | None = ...,
                mu: Num | None = ..., budget: GDP | None = ...,
                max_groups_contributed: int | None = ..., clamps: Clamps | None = ...
                ) -> Explanation: ...
    @privplan_errors
    @accepts(*QUERY_KEYWORDS)
    def explain(self, sql: str, *, params: Params | None = None, **budget: Any) -> Explanation:
        """Plan ``sql`` and show what it would cost and how accurate it would be. Spends nothing.

        It runs every check :meth:`sql` runs before its charge, so the two agree on which
        queries are admissible. For an outer query over a DP subquery it explains the
        subquery (the outer query is post-processing: it costs nothing). ``params=``: as
        for :meth:`sql`."""
        sql = bind_query(sql, params, _EXPLAIN_PARAMS)
        nested = route(sql, self.policy)
        if nested is not None:
            return explain_nested(self, nested, budget, sql)
        planned, _ = self.plan(sql, budget)
        account = self.reported
        with account.lock:
            account.sync()
            specs = [m.spec for m in planned.measures]
            account.know_tables(specs, account.accountant)
            preview = account.accountant.preview(specs)
            return self._explanation(planned, preview, account.accountant.total,
                                     history=account.history())

    def query_value(self, budget: Mapping[str, Any]) -> Any:
        """A query's budget keywords as a value of the session's privacy definition (in a PLD
        session, the μ its Gaussian noise is calibrated to: see :mod:`privplan.session.pld`)."""
        if self.pld is not None:
            return self.pld.query_budget(budget)
        return query_budget(self.kind, **budget)

    # (one signature per privacy definition: the budget keywords of the session's kind only;
    # none at all is right for a BigQuery-syntax query, which carries its own)
    @overload
    def sql(self: Session[PureDP], sql: str, *, params: Params | None = ...,
            epsilon: Num | None = ...,
            budget: PureDP | None = ..., max_groups_contributed: int | None = ...,
            clamps: Clamps | None = ...) -> Result[PureDP]: ...
    @overload
    def sql(self: Session[ApproxDP], sql: str, *, params: Params | None = ...,
            epsilon: Num | None = ...,
            delta: Num | None = ..., budget: ApproxDP | None = ...,
            max_groups_contributed: int | None = ..., clamps: Clamps | None = ...
            ) -> Result[ApproxDP]: ...
    @overload
    def sql(self: Session[ZCDP], sql: str, *, params: Params | None = ...,
            rho: Num | None = ..., budget: ZCDP | None = ...,
            max_groups_contributed: int | None = ..., clamps: Clamps | None = ...
            ) -> Result[ZCDP]: ...
    @overload
    def sql(self: Session[GDP], sql: str, *, params: Params | None = ...,
            mu: Num | None = ..., budget: GDP | None = ...,
            max_groups_contributed: int | None = ..., clamps: Clamps | None = ...
            ) -> Result[GDP]: ...
    @privplan_errors
    @accepts(*QUERY_KEYWORDS)
    def sql(self, sql: str, *, params: Params | None = None, **budget: Any) -> Result[Any]:
        """Answer ``sql`` with DP, charging the composed cost before anything is released.

        ``budget``: ``epsilon=`` (and ``delta=``), ``rho=``, ``mu=`` or ``budget=``; and
        optionally ``max_groups_contributed=m``, a per-query bound on the groups one unit adds
        to (enforced by the rewrite; it can only tighten the policy's), and ``clamps={column:
        (lo, hi)}``, bounds inside the policy's for this query's SUM/AVG/VAR of a column
        (BigQuery's ``CLAMPED BETWEEN``). ``params=``: values for the query's placeholders, as
        DuckDB takes them (a sequence for ``?`` or ``$1``, a mapping for ``$name``); they are
        public values, bound as SQL literals before anything is planned or charged
        (:mod:`privplan.sql.params`), so the query costs what it costs with the literals."""
        sql = bind_query(sql, params, _PARAMS)
        nested = route(sql, self.policy)
        if nested is not None:
            return sql_nested(self, nested, budget)
        admission = self._admit(sql, budget)
        planned, statements = admission.planned, admission.statements
        marginal, explanation = self._charge(admission, sql)
        # -- run, noise, post-process ---------------------------------------------------------
        frames = [self._run_core(core, planned.for_core(i), stmt)
                  for i, (core, stmt) in enumerate(zip(planned.plan.cores, statements))]
        # (the bounded copy of a user-level table is made only now, after the charge)
        df, intervals, accuracy = assemble(planned, frames)
        return Result(df=df, cost=marginal, query_cost=planned.composition.cost,
                      accuracy=accuracy, intervals=intervals, explanation=explanation)

    def _charge(self, admission: Admission, sql: str) -> tuple[Any, Explanation]:
        """The one charge of the session: an admitted query (it crossed the pre-charge gate,
        :mod:`privplan.gate`) composed with every account's ledger and recorded in each,
        atomically per ledger, before anything is run. Returns the marginal cost and the
        explanation of the account the session reports (:attr:`reported`).

        With further accounts (an analyst's, on top of the data's total), every account is
        locked and checked before anything is written to any: the query is refused by the
        first whose budget it would exceed, spending nothing anywhere. Their transactions
        then commit one after another (the session's own first); a crash in between leaves
        one charged and another not, with nothing released: the answer is run only after
        every COMMIT, so no release is ever charged to fewer accounts than it must be."""
        planned = admission.planned
        for ref in self._unsettled:
            if (earlier := ref()) is not None:  # (an answer the caller still holds)
                earlier.settle()
        self._unsettled.clear()
        accounts = (*self.accounts, self.account)  # (the lock order of every session)
        for account in accounts:
            account.accountant  # noqa: B018 - built (from the whole ledger) before the locks
        charged: list[tuple[Account, Any, Accountant, str, list[MechanismSpec], Any, Any]] = []
        # -- atomic check-and-charge (every ledger commits before anything is released) -------
        with ExitStack() as stack:
            for account in accounts:
                stack.enter_context(account.lock)
                txn = stack.enter_context(account.ledger.charging())
                accountant = account.catch_up(txn) or account.accountant  # (staged)
                query_id = txn.next_query_id()
                specs = [_named(m.spec, query_id + m.spec.id[len(planned.query_id):])
                         for m in planned.measures]
                account.know_tables(specs, accountant)
                before, preview = accountant.total, accountant.preview(specs)
                if not preview.cost <= account.budget:
                    raise BudgetExceededError(
                        self._exceeded(before.cost, preview.cost)
                        if account is self.account and not self.accounts
                        else account.exceeded(before.cost, preview.cost))
                charged.append((account, txn, accountant, query_id, specs, before, preview))
            for account, txn, accountant, query_id, specs, before, preview in charged:
                txn.append(LedgerEntry(query_id=query_id, sql=sql, mechanisms=tuple(specs),
                                       marginal=preview.cost - before.cost,
                                       total_after=preview.cost))
                # admitted in memory only once the entry is durable (after the COMMIT); if
                # the COMMIT fails, the ledger raises and the account's accounting is rebuilt
                txn.on_commit(partial(accountant.admit, specs))  # (the staged one)
        for account in accounts:
            account.save_checkpoint()
        shown = next(c for c in charged if c[0] is self.reported)
        _, _, _, query_id, _, before, preview = shown
        explanation = self._explanation(planned, preview, before)
        self._unsettled.append(weakref.ref(explanation))
        marginal = preview.cost - before.cost
        log.info("charged %s: %s (composed total %s of %s)", query_id,
                 marginal.describe(), preview.cost.describe(), self.reported.budget.describe())
        return marginal, explanation

    @privplan_errors
    def spent(self) -> B:
        """The composed cost of everything released so far (general composition theorem),
        including what other sessions sharing this ledger have charged. Before this session has
        planned anything it is the total the ledger's last (verified) entry recorded."""
        spent: B = self.account.spent()
        return spent

    @privplan_errors
    def remaining(self) -> B:
        return self.budget - self.spent()

    @property
    def reported(self) -> Account:
        """The account whose figures this session shows (costs, explanations): its own, or
        the first further account it charges (the server's analyst, whose answers must not
        show what the data's total holds: that would tell one analyst about the others)."""
        return self.accounts[0] if self.accounts else self.account

    @property
    def accountant(self) -> Accountant:
        """The accounting of the session's own ledger (see :class:`Account`)."""
        return self.account.accountant

    def _sync(self) -> None:
        self.account.sync()

    _closed = False

    def close(self) -> None:
        """Close the ledger and engine (a caller's connection stays open); later queries fail."""
        self._closed = True
        self.engine.close()
        if self._owns_account:  # (a shared account is closed by whoever opened it)
            self.account.close()

    def _require_open(self) -> None:
        if self._closed:
            raise PolicyError("this session is closed: close() released its engine and "
                              "ledger, so it answers no more queries. Open a new one with "
                              "pp.connect(...).")

    def __enter__(self) -> Session[B]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------
    def _explanation(self, planned: PlannedQuery, preview: Any, before: Any,
                     history: dict[str, list[Any]] | None = None) -> Explanation:
        """``history`` is given by ``explain`` only (outside any ledger transaction): then a
        PLD session's note also reads the earlier mechanisms, for the additive comparison."""
        shown: Explanation = explain_planned(planned, preview, before, self.reported.budget,
                                             history=history)
        if self.pld is None:
            return shown
        worst = None
        if history is not None:
            by_id = {p.spec.id: p.spec for p in planned.measures}
            by_id.update((m.id, m) for m in self.reported.recorded(
                i for i in preview.witness if i not in by_id))
            worst = [by_id[i] for i in preview.witness if i in by_id]
        return replace(shown, notes=(*shown.notes, self.pld.note(preview.cost, worst)))

    def table_models(self) -> dict[str, TableModel]:
        """The accountant's model of every private table it knows: the policy's, and the
        virtual ones planning has met (joins of private tables, per-unit tables)."""
        return self.account.table_models()

    def plan(self, sql: str, budget: Mapping[str, Any]) -> tuple[PlannedQuery, list[str]]:
        """Plan one DP query with every check :meth:`sql` runs before its charge (the
        pre-charge gate included), and the engine statements that would answer it. Spends
        nothing and reads no private row: the one planning entry point of ``explain``, ``sql``
        and reports."""
        admission = self._admit(sql, budget)
        return admission.planned, list(admission.statements)

    @with_list_fallback
    @planned_again_if_changed
    def _admit(self, sql: str, budget: Mapping[str, Any]) -> Admission:
        """Plan ``sql`` and pass it through the pre-charge gate (:mod:`privplan.gate`): the
        admission :meth:`_charge` requires. A query over a per-unit pre-aggregation is planned
        over its derived table (see :meth:`_per_unit`). A query admitted before in the same
        state is reused with the gate's verdict (:mod:`privplan.session.plan_cache`)."""
        self._require_open()
        if (cached := self._plans.get(key := plan_key(self, sql, budget), self.policy)) is not None:
            return reuse(self, cached)
        shared = self._shared.get(process_key := SharedPlans.key(self, sql, budget), self)
        # (the lookup may have adopted the process's copy, moving the engine's generation: what
        # is cached from here on is keyed by the engine as it is now)
        generation, key = self.engine.generation, plan_key(self, sql, budget)
        if shared is not None:  # planned by another session over the same schema (see there)
            self._plans.put(key, self.policy, shared)
            return reuse(self, shared)
        shaped = shape(sql, budget, self.policy, self.kind)  # (the front doors, in order)
        if shaped.per_unit is not None:
            self._define_per_unit(shaped.per_unit)
        reads = PlanReads(self.catalog, self.engine)
        admission = self._prepare(shaped, shown=sql, reads=reads)
        if shaped.per_unit is None and self.engine.generation == generation:
            self._plans.put(key, self.policy, admission)  # (see plan_cache)
            self._shared.put(process_key, reads, admission)  # (see shared_plans)
        return admission

    def _define_per_unit(self, found: PerUnit) -> None:
        """The derived table of a per-unit pre-aggregation (:mod:`privplan.sql.per_unit`),
        defined in the engine: a view over the base table's bounded rows (its inner WHERE
        checked and made total like any WHERE), and its view over the gate's stand-ins in
        the catalog. Reads no row."""
        inner = build_plan(found.source, found.where_statement(), self.policy,
                           self.catalog.public_columns()).cores[0]  # (errors point at source)
        table_sql, types = self.catalog.typed_table(found.base)
        inner = make_core_total(replace(inner, table_sql=table_sql, source_types=types),
                                judge(), found.source)
        self.engine.create_view(found.table.name, derived_view_sql(found, inner))
        stand_ins: dict[str, dict[str, str]] = {}
        over = replace(inner, table_sql=self.catalog.stand_in_view(found.base, stand_ins))
        self.catalog.derived(found.table.name, derived_view_sql(found, over), stand_ins)

    def _prepare(self, shaped: Shaped, *, shown: str, reads: PlanReads | None = None
                 ) -> Admission:
        """Everything before the charge, from the query text, the policy and the schema only
        (DESIGN.md invariant 8: a failure here spends nothing): plan, build and bind the
        engine statements, and admit them through the gate (engine statements over stand-in
        rows, privplan's own processing of their answers, the outer query on stand-in noisy
        answers). ``shaped``: the query after the front doors (its policy: the session's, or
        a copy with a derived table); ``shown``: the query as written (explain shows it);
        ``reads``: records what planning reads from the catalog and engine (shared_plans)."""
        planned = self._plan(shaped, reads)
        planned = replace(planned, plan=replace(planned.plan, sql=shown))
        statements = [self._engine_sql(core, planned.for_core(i))
                      for i, core in enumerate(planned.plan.cores)]
        schemas = [self.engine.bind(stmt) for stmt in statements]
        return admit(self.engine, planned, statements, schemas)

    def _plan(self, shaped: Shaped, reads: PlanReads | None = None) -> PlannedQuery:
        """The query after the front doors, planned: its options and budget read from its
        keywords, and :func:`~privplan.planning.plan.plan_query` with this session's binding
        (the accountant learns the virtual tables it reads). Every read of the catalog and
        the engine goes through ``reads``, which records it (a fresh recorder when none is
        given: the shared plans only need it from :meth:`plan`)."""
        reads = reads if reads is not None else PlanReads(self.catalog, self.engine)
        options, budget = QueryOptions.from_keywords(shaped.keywords)
        value = self.query_value(budget)
        binding = Binding(sql=shaped.text, catalog=reads, public=reads,
                          judge=judge(), copies=reads.copies)
        planned, effects = plan_query(
            shaped.text, options, value, policy=shaped.policy,
            public_columns=reads.public_columns(),
            query_id=self.ledger.next_query_id(), binding=binding,
            schema_not_null=reads.schema_not_null)
        for table in effects.virtual_tables:  # a private join's or a per-unit table's model
            self._ensure_table(table)
        return planned

    def _ensure_table(self, table: Any) -> None:
        """Give every account's accountant the model of a virtual (joined) table."""
        for account in (*self.accounts, self.account):
            account.ensure_table(table)

    def _engine_sql(self, core: CorePlan, planned: list[PlannedMeasure]) -> str:
        types = {n: c.type for n, c in core.table_policy.columns.items()}
        measures = [p.measure for p in planned]
        return engine_statement(core, types, measures, self.engine.dialect)

    def _note_clamping(self, core: CorePlan, planned: list[PlannedMeasure]) -> None:
        """Say once per session (an INFO log) that a default DuckDB session computes SUM grids
        in every statement, and what makes it faster. Decided from the plan alone (a row-level
        core read from the table itself, a measure on a grid), never from a row."""
        if self._told_clamping or self.engine.dialect != "duckdb" or not any(
                p.measure.kind not in COUNT_KINDS for p in planned) or (
                self._session_copies.automatic(core, self.engine)) or self.prepare is False:
            return
        self._told_clamping = True
        logging.getLogger("privplan").info(
            "this session puts every row of %s onto its SUM grid in each statement (2-5x the "
            "plain query on a large table): its rows can change while the session is open (a "
            "registered object, a file source or a caller's connection), so the session makes "
            "no copy of them on its own; pp.connect(..., prepare=True) copies them on the first "
            "query, `privplan prepare DB --policy P` once for a DuckDB file (README, Speed)",
            core.table)

    def _run_core(self, core: CorePlan, planned: list[PlannedMeasure], stmt: str
                  ) -> NoisyColumns:
        # the copy (bounded rows, SUM grids) is a deterministic function of the data and the
        # policy, so it is kept for the session and later queries read it directly (made only
        # now, after the charge: see session.copies)
        made = self._session_copies.copy_for(core, self.engine)
        if made is not None:
            stmt = self._engine_sql(replace(core, table_sql=made, prebounded=True), planned)
        elif not core.prebounded:
            self._note_clamping(core, planned)
        exact = self.engine.run(stmt)
        columns = dict(exact.items())
        check_one_row_per_key(core, columns)  # (before any noise is drawn)
        return noisy_columns(core, planned, exact, columns=columns)



@checked_arguments
def connect(
    database: str | Path | duckdb.DuckDBPyConnection = ":memory:",
    *,
    policy: Policy | str | Path | Mapping[str, Any],
    budget: B,
    ledger: Any = None,
    exact_limit: int | None = None,
    prepare: bool | None = None,
    composition: str = "additive",
    engine: None = None,
) -> Session[B]:
    """Open a DP session over ``database``: a DuckDB file path, ':memory:' or a duckdb
    connection (the embedded engine); a CSV or Parquet file or glob (a policy with one private
    table); a ``postgresql://`` URL or psycopg connection; or a SparkSession (tables of its
    catalog). See :func:`privplan.engines.open.open_engine`. The engine follows ``database``:
    there is no ``engine=`` keyword (it is refused with the call for the engine asked for), and
    anything else (a mistyped URL, the word "spark", a ``SparkSession.builder``) is refused
    saying what it is (:mod:`privplan.engines.recognise`).

    ``prepare=True`` trades a one-off cost for speed in long sessions: the first query over a
    private table makes a compressed in-memory copy of it with every bounded numeric column
    already clamped to its SUM grid (user-level tables get such a copy of their bounded rows
    anyway, from the session's second query over them), so later queries do not clamp every
    row again. The copy is a snapshot: changes to
    the table after it was made are not seen by the session (``register`` makes a new one).
    The default (``prepare=None``) makes that copy itself from the second query over a table
    whose rows cannot change while the session is open (a DuckDB file privplan opened, read
    only), where the copy is the table; ``prepare=False`` never copies a row-level table
    (:mod:`privplan.session.copies`).

    ``composition="pld"`` (for ``budget=ApproxDP(ε, δ)``): compose releases by their exact
    privacy-loss distributions over the worst affected set instead of adding ε and δ — Gaussian
    noise, each query given ``mu=`` or its own ``epsilon=``/``delta=``; ``spent()`` is then a
    μ-GDP value and ``session.pld.as_approx(...)`` its (ε, δ) reading (see
    :mod:`privplan.session.pld`).
    """
    refuse_engine_keyword(engine)
    return Session(database, policy=policy, budget=budget, ledger=ledger,
                   exact_limit=exact_limit, prepare=prepare, composition=composition)


def _named(spec: MechanismSpec, mechanism_id: str) -> MechanismSpec:
    """``spec`` named ``mechanism_id``: the very (frozen) object when it is already named so,
    as a fresh session's first query over a shared plan is, so that its accountant starts from
    the solver made for those specs (:func:`~privplan.accounting.solver.first_extension.
    first_solver`)."""
    return spec if spec.id == mechanism_id else replace(spec, id=mechanism_id)
