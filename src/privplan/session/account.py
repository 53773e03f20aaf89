"""An account: a ledger, the budget its entries must fit, and the accounting built from it.

A session charges every answer to its own account (its ledger and budget), and to any further
accounts it was given: ``privplan serve`` gives each analyst's sessions the analyst's account
(their own ledger, their budget) on top of the data's total, so an answer is released only if
it fits both, and every analyst's answers compose in the total (analysts may collude).

One account may be shared by several sessions of a process (the server shares one per ledger
file by all its connections): its accounting is then built and kept up once, not once per
session, and every read and charge holds the account's lock. Two sessions charging the same
accounts take their locks in the same order (the extra accounts first, in the order given,
then the session's own), so they cannot deadlock.

The rule (DESIGN.md §6, invariant 9): the accountant holds exactly what the ledger has
*committed*. Entries another process committed are read inside a ledger transaction (a charge,
or the sync of ``spent()``/``explain``); the accountant they make is *staged* and replaces the
account's only when that transaction commits. A refusal, an exception or a failed COMMIT drops
it, and the next transaction reads the same entries again: counting them once in memory and
again on the next read would inflate ``spent()`` and refuse queries that fit.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from privplan.accounting.accountant import Accountant
from privplan.accounting.model import MechanismSpec, TableModel
from privplan.analysis.regions import conform_region
from privplan.errors import PolicyError
from privplan.explain import MAX_HISTORY, queries_of
from privplan.ledger.checkpoint import decode_states, encode_states
from privplan.ledger.memory import policy_fingerprint
from privplan.ledger.store import open_ledger
from privplan.sql.per_unit import MARK
from privplan.sql.virtual_tables import table_model as virtual_table_model


def shared_account(account: Account, kind: type, budget: Any, policy: Any) -> Account:
    """``account``, checked to fit a session of ``kind`` over ``policy`` (and, when ``budget``
    is given, with that budget: the session's own account). An account of another privacy
    definition or policy would compose costs that mean something else: refused."""
    if account.kind is not kind:
        raise PolicyError(f"{account.name}'s budget is {account.budget.describe()}, of another "
                          f"privacy definition than the session's ({kind.__name__}). Fix: give "
                          "every account a budget of the session's definition.")
    if budget is not None and account.budget != budget:
        raise PolicyError(f"the session's budget {budget.describe()} is not that of the "
                          f"account it shares ({account.budget.describe()}).")
    if policy_fingerprint(account.policy) != policy_fingerprint(policy):
        raise PolicyError(f"{account.name} was opened with another policy than the session's: "
                          "its ledger's entries are charged under that policy. Fix: open the "
                          "session with the same policy.")
    return account


class Account:
    """A ledger and its budget (see the module docstring).

    ``name`` says whose account it is in messages ("the session", "analyst alice", "the
    data's total"); ``disclose=False`` keeps its figures out of a refusal (the server's total:
    what every analyst spent together would tell one analyst about the others' queries)."""

    def __init__(self, ledger: Any, budget: Any, policy: Any, *,
                 exact_limit: int | None = None, name: str = "the session",
                 disclose: bool = True) -> None:
        self.ledger = ledger
        self.budget = budget
        self.kind = type(budget)
        self.policy = policy
        self.name = name
        self.disclose = disclose
        self.lock = threading.RLock()
        # a larger exact_limit lets the solver search longer before it falls back to a proven
        # (looser) upper bound; it can only tighten the charge, never lower it below the truth
        self._exact_limit = exact_limit
        self._tables: dict[str, TableModel] = {}
        self._accountant: Accountant | None = None  # built on first use (see `accountant`)
        if hasattr(ledger, "on_failure"):
            # a failed durable write drops the in-memory accounting: it is rebuilt from the file
            ledger.on_failure(self._drop_accounting)

    @classmethod
    def open(cls, ledger: Any, budget: Any, policy: Any, **options: Any) -> Account:
        """An account over ``ledger`` (anything :func:`~privplan.ledger.store.open_ledger`
        takes), reserved for it and bound to ``budget`` and ``policy`` (a ledger bound to
        another budget or policy is refused: its entries would mean something else)."""
        store = open_ledger(ledger)
        try:
            store.claim()
            store.bind(budget, policy)
        except BaseException:
            if store is not ledger:  # (opened here; a ledger object given stays its owner's)
                with contextlib.suppress(Exception):
                    store.close()
            raise
        return cls(store, budget, policy, **options)

    def close(self) -> None:
        self.ledger.close()

    # -- the accounting --------------------------------------------------------------------
    @property
    def accountant(self) -> Accountant:
        """The composed cost of everything in the ledger, built on first use: opening a session
        and asking ``spent()`` need only the ledger's verified record (fast for a long ledger);
        planning a query needs every recorded mechanism, admitted here in one composition."""
        with self.lock:
            if self._accountant is None:
                self._tables = {t.name: t.table_model() for t in self.policy.private_tables()}
                self._accountant = self._restored() or Accountant(
                    self._tables, self.kind, **self._exact())
                self.sync()
            return self._accountant

    def _exact(self) -> dict[str, int]:
        return {"exact_limit": self._exact_limit} if self._exact_limit is not None else {}

    def spent(self) -> Any:
        """The composed cost of everything this account's ledger records (by any session of
        any process). Before it has been built, the total its last verified entry recorded."""
        with self.lock:
            if self._accountant is None:
                recorded = self.ledger.recorded_total()
                return recorded if recorded is not None else self.kind.zero()
            self.sync()
            return self.accountant.total.cost

    def remaining(self) -> Any:
        return self.budget - self.spent()

    def exceeded(self, before: Any, after: Any) -> str:
        """What a refusal by this account says (a session's own says more: views/session)."""
        if not self.disclose:
            return (f"budget exceeded: this query would go beyond {self.name}'s budget. "
                    "Nothing was spent. Why: that budget bounds what all answers together may "
                    "reveal about anyone. Fix: use a smaller budget for the query, or ask the "
                    "data's owner.")
        return (f"budget exceeded: {self.name} has spent {before.describe()} of "
                f"{self.budget.describe()}; this query would add {(after - before).describe()} "
                f"(composed total {after.describe()}). Nothing was spent. Why: the budget "
                "bounds what all of its answers together may reveal about anyone. Fix: use a "
                "smaller budget for the query, or a query disjoint from earlier ones.")

    def ensure_table(self, table: Any) -> None:
        """Give the accountant the model of a virtual (joined) table the first time it is seen."""
        with self.lock:
            accountant = self.accountant  # (built first: building resets the table models)
            if table.name not in self._tables:
                self._tables[table.name] = table.table_model()
                accountant.add_table(table.name, table.table_model())

    def table_models(self) -> dict[str, TableModel]:
        with self.lock:
            self.accountant  # noqa: B018 - built first: building resets the models
            return dict(self._tables)

    def _restored(self) -> Accountant | None:
        """The accounting of the ledger's first entries from its checkpoint (see
        :mod:`privplan.ledger.checkpoint`), or None when there is none or it does not fit
        this account (then the whole ledger is admitted instead: same total, slower)."""
        found = getattr(self.ledger, "checkpoint", lambda: None)()
        if found is None:
            return None
        seq, blob = found
        try:
            states = decode_states(blob)
            for st in states:
                if st.table not in self._tables and ("+" in st.table or MARK in st.table):
                    self._tables[st.table] = self._virtual_model(st.table)
            restored = Accountant.restore(self._tables, self.kind, states,
                                          lambda table: self._specs_through(seq, table),
                                          **self._exact())
        except Exception:  # noqa: BLE001 - any checkpoint that cannot be used is only a lost cache
            return None
        self.ledger.resume(seq)
        return restored

    def _specs_through(self, seq: int, table: str) -> list[MechanismSpec]:
        """The mechanisms on ``table`` of ledger entries 1..``seq`` (verified from the chain's
        root when read), as the account admits them (see :meth:`catch_up`)."""
        types = self._policy_types(table)
        return [replace(m, region=conform_region(m.region, types))
                for m in self.ledger.mechanisms_through(seq) if m.table == table]

    def save_checkpoint(self) -> None:
        """After a charge: store the accounting as the ledger's checkpoint when enough entries
        have passed since the last one. A failure loses only the cache, never a charge (which
        was committed before), so it is not raised."""
        save = getattr(self.ledger, "save_checkpoint", None)
        if save is None or self._accountant is None:
            return

        def export(seq: int) -> bytes:
            # Called by the ledger under its lock, with the entry the checkpoint will name:
            # the account's accounting is read *there*, not before. A commit moves both the
            # ledger's last entry and the account's accounting under that lock; read earlier
            # (as it was, outside every lock), another session sharing the account could
            # commit in between — catching up another process's charges, which replaces the
            # accounting — and the checkpoint would name entries its state never composed: a
            # process resuming from it would under-charge. (The account's lock, held too,
            # now also keeps this process's sessions from charging in between.)
            accountant = self._accountant
            if accountant is None:  # (dropped after a failed write: nothing consistent to save)
                raise LookupError("no accounting to save")
            blob = encode_states(accountant.export_state())
            self._continue_from(accountant, seq, blob)
            return blob

        # any failure loses only the cache: the charge was committed and the answer is owed;
        # the account's lock first, then the ledger's (the order of a charge)
        with self.lock, contextlib.suppress(Exception):
            save(export)

    def _continue_from(self, accountant: Accountant, seq: int, blob: bytes) -> None:
        """After exporting ``accountant``, the state of entry ``seq`` (under the ledger's lock:
        no charge can commit meanwhile), continue from that state restored, as a new session
        would: the very solver that was saved (:mod:`privplan.ledger.checkpoint`), whose
        mechanisms are held as columns and read from the ledger only if ever needed. A
        long-lived account (a server's) otherwise kept every mechanism since it opened as
        objects that each admission copies and each checkpoint walks in Python: its charges
        slowed with its history while a new session's did not. Restored from the bytes just
        written (not the states in memory), so it is exactly what a new session would read.
        If the state cannot be restored, or its total differs (it cannot, but a restored state
        is used only where it provably equals the one it replaces), the account keeps its
        own. The caller holds the account's lock (no session is
        giving the accounting a table model meanwhile, which a restored state would lack)."""
        with contextlib.suppress(Exception):
            restored = Accountant.restore(self._tables, self.kind, decode_states(blob),
                                          lambda table: self._specs_through(seq, table),
                                          **self._exact())
            if restored.total.cost == accountant.total.cost:  # (it must be the same)
                self._accountant = restored

    def _drop_accounting(self) -> None:
        """After a failed durable write: forget the in-memory accounting (it follows the file)."""
        self._accountant = None

    def sync(self) -> None:
        with self.lock, self.ledger.charging() as txn:
            self.catch_up(txn)

    def catch_up(self, txn: Any) -> Accountant | None:
        """The accountant with the entries committed since we last looked (by this or another
        process) admitted, all in one admission: composing them at once gives the same total
        as one by one (the solver is exact, or the same proven bound), in far less time for a
        long ledger. Staged: it becomes the account's accountant when ``txn`` commits (see the
        module docstring). None when the accountant is not built yet (it reads the whole
        ledger when it is). The caller holds :attr:`lock`."""
        current = self._accountant
        if current is None:
            return None
        mechanisms = self.conformed(txn.unseen_mechanisms(), current)
        if not mechanisms:
            return current
        staged = current.staged(mechanisms)

        def adopt() -> None:
            if self._accountant is current:  # (not dropped or rebuilt meanwhile)
                self._accountant = staged
        txn.on_commit(adopt)
        return staged

    def conformed(self, specs: Iterable[MechanismSpec],
                  accountant: Accountant | None = None) -> list[MechanismSpec]:
        """Recorded (or about to be recorded) mechanisms as the account admits them: tables
        first met here get their model, and an entry written before join keys were typed
        (values of another type than the column, e.g. dates on a timestamp column) is widened,
        not a crash."""
        specs = list(specs)
        if accountant is not None:
            self.know_tables(specs, accountant)
        out, types = [], {}
        for m in specs:
            if m.table not in types:
                types[m.table] = self._policy_types(m.table)
            out.append(replace(m, region=conform_region(m.region, types[m.table])))
        return out

    def know_tables(self, specs: Iterable[MechanismSpec], accountant: Accountant) -> None:
        """Give ``accountant`` the model of each virtual table ``specs`` read that it does not
        know yet (a private join ``a+b``, a per-unit table), rebuilt from the table's name."""
        for m in specs:
            if m.table not in self._tables and MARK in m.table:
                self._tables[m.table] = model = self._virtual_model(m.table)
                accountant.add_table(m.table, model)
            elif m.table not in self._tables and "+" in m.table:
                self.ensure_table(self._joined_table(m.table))

    def history(self) -> dict[str, list[Any]]:
        """``explain``'s history: the mechanisms of the last queries it compares one by one
        (:data:`~privplan.explain.MAX_HISTORY`), read from the ledger's last entries — never
        the whole history (the accountant composes with all of it through its checkpoint)."""
        return queries_of(self.conformed(self.ledger.recent_mechanisms(MAX_HISTORY)))

    def recorded(self, ids: Iterable[str]) -> list[MechanismSpec]:
        """The recorded mechanisms of these ids (those of earlier queries), read from their
        ledger entries only."""
        ids = set(ids)
        queries = {i.split(".", 1)[0] for i in ids}
        return [m for m in self.conformed(self.ledger.mechanisms_of(queries)) if m.id in ids]

    def _policy_types(self, table: str) -> dict[str, str]:
        """The policy type of each column of a (possibly joined) table."""
        if MARK in table:
            return {}  # (a derived table's regions are kept as recorded)
        try:
            policy = (self._joined_table(table) if "+" in table else self.policy.table(table))
        except PolicyError:
            return {}
        return {n: c.type for n, c in policy.columns.items()}

    def _virtual_model(self, name: str) -> TableModel:
        """The accountant's model of a table the policy does not list: a join of two private
        tables (``a+b``), or a derived per-unit table (``t/per-unit/...``: one row per unit of
        t, add/remove; rebuilt from the name alone when a ledger is replayed)."""
        return virtual_table_model(self.policy, name)

    def _joined_table(self, name: str) -> Any:
        left, _, right = name.partition("+")
        from privplan.sql.joins import _virtual_table

        return _virtual_table(self.policy.table(left), self.policy.table(right))
