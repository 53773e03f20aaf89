"""A session's accounting of its ledger: the accountant, built from the ledger (its checkpoint
and later entries), kept up with what other processes charge, and saved back as a checkpoint.

The rule (DESIGN.md §6, invariant 9): the accountant holds exactly what the ledger has
*committed*. Entries another process committed are read inside a ledger transaction (a charge,
or the sync of ``spent()``/``explain``); the accountant they make is *staged* and replaces the
session's only when that transaction commits. A refusal, an exception or a failed COMMIT drops
it, and the next transaction reads the same entries again: counting them once in memory and
again on the next read would inflate ``spent()`` and refuse queries that fit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from privplan.accounting.accountant import Accountant
from privplan.accounting.model import MechanismSpec, TableModel
from privplan.analysis.regions import conform_region
from privplan.errors import PolicyError
from privplan.explain import MAX_HISTORY, queries_of
from privplan.ledger.checkpoint import decode_states, encode_states
from privplan.sql.per_unit import MARK


class SessionLedger:
    """The ledger side of a :class:`~privplan.session.session.Session` (its base class)."""

    ledger: Any  # (set by Session.__init__, with the attributes below)
    policy: Any
    kind: Any
    _exact_limit: int | None
    _tables: dict[str, TableModel]
    _accountant: Accountant | None

    @property
    def accountant(self) -> Accountant:
        """The composed cost of everything in the ledger, built on first use: opening a session
        and asking ``spent()`` need only the ledger's verified record (fast for a long ledger);
        planning a query needs every recorded mechanism, admitted here in one composition."""
        if self._accountant is None:
            self._tables = {t.name: t.table_model() for t in self.policy.private_tables()}
            self._accountant = self._restored() or Accountant(self._tables, self.kind, **(
                {"exact_limit": self._exact_limit} if self._exact_limit is not None else {}))
            self._sync()
        return self._accountant

    def _restored(self) -> Accountant | None:
        """The accounting of the ledger's first entries from its checkpoint (see
        :mod:`privplan.ledger.checkpoint`), or None when there is none or it does not fit
        this session (then the whole ledger is admitted instead: same total, slower)."""
        found = getattr(self.ledger, "checkpoint", lambda: None)()
        if found is None:
            return None
        seq, blob = found
        try:
            states = decode_states(blob)
            for st in states:
                if st.table not in self._tables and ("+" in st.table or MARK in st.table):
                    self._tables[st.table] = self._virtual_model(st.table)
            exact = {"exact_limit": self._exact_limit} if self._exact_limit is not None else {}
            restored = Accountant.restore(self._tables, self.kind, states,
                                          lambda table: self._specs_through(seq, table), **exact)
        except Exception:  # noqa: BLE001 - any checkpoint that cannot be used is only a lost cache
            return None
        self.ledger.resume(seq)
        return restored

    def _specs_through(self, seq: int, table: str) -> list[MechanismSpec]:
        """The mechanisms on ``table`` of ledger entries 1..``seq`` (verified from the chain's
        root when read), as the session admits them (see :meth:`_catch_up`)."""
        types = self._policy_types(table)
        return [replace(m, region=conform_region(m.region, types))
                for m in self.ledger.mechanisms_through(seq) if m.table == table]

    def _save_checkpoint(self) -> None:
        """After a charge: store the accounting as the ledger's checkpoint when enough entries
        have passed since the last one. A failure loses only the cache, never a charge (which
        was committed before), so it is not raised."""
        save = getattr(self.ledger, "save_checkpoint", None)
        if save is None or self._accountant is None:
            return
        accountant = self._accountant
        # any failure loses only the cache: the charge was committed and the answer is owed
        with contextlib.suppress(Exception):
            save(lambda: encode_states(accountant.export_state()))

    def _drop_accounting(self) -> None:
        """After a failed durable write: forget the in-memory accounting (it follows the file)."""
        self._accountant = None

    def _sync(self) -> None:
        with self.ledger.charging() as txn:
            self._catch_up(txn)

    def _catch_up(self, txn: Any) -> Accountant | None:
        """The accountant with the entries committed since we last looked (by this or another
        process) admitted, all in one admission: composing them at once gives the same total
        as one by one (the solver is exact, or the same proven bound), in far less time for a
        long ledger. Staged: it becomes the session's accountant when ``txn`` commits (see the
        module docstring). None when the accountant is not built yet (it reads the whole
        ledger when it is)."""
        current = self._accountant
        if current is None:
            return None
        mechanisms = self._conformed(txn.unseen_mechanisms(), current)
        if not mechanisms:
            return current
        staged = current.staged(mechanisms)

        def adopt() -> None:
            if self._accountant is current:  # (not dropped or rebuilt meanwhile)
                self._accountant = staged
        txn.on_commit(adopt)
        return staged

    def _conformed(self, specs: Iterable[MechanismSpec],
                   accountant: Accountant | None = None) -> list[MechanismSpec]:
        """Recorded mechanisms as the session admits them: tables first met here get their
        model, and an entry written before join keys were typed (values of another type than
        the column, e.g. dates on a timestamp column) is widened, not a crash."""
        out, types = [], {}
        for m in specs:
            if accountant is not None and m.table not in self._tables and MARK in m.table:
                self._tables[m.table] = model = self._virtual_model(m.table)
                accountant.add_table(m.table, model)
            elif accountant is not None and m.table not in self._tables and "+" in m.table:
                self._ensure_table(self._joined_table(m.table))
            if m.table not in types:
                types[m.table] = self._policy_types(m.table)
            out.append(replace(m, region=conform_region(m.region, types[m.table])))
        return out

    def _history(self) -> dict[str, list[Any]]:
        """``explain``'s history: the mechanisms of the last queries it compares one by one
        (:data:`~privplan.explain.MAX_HISTORY`), read from the ledger's last entries — never
        the whole history (the accountant composes with all of it through its checkpoint)."""
        return queries_of(self._conformed(self.ledger.recent_mechanisms(MAX_HISTORY)))

    def _recorded(self, ids: Iterable[str]) -> list[MechanismSpec]:
        """The recorded mechanisms of these ids (those of earlier queries), read from their
        ledger entries only."""
        ids = set(ids)
        queries = {i.split(".", 1)[0] for i in ids}
        return [m for m in self._conformed(self.ledger.mechanisms_of(queries)) if m.id in ids]

    def _policy_types(self, table: str) -> dict[str, str]:
        """The policy type of each column of a (possibly joined) table."""
        if MARK in table:
            return {}  # (a derived table's regions are kept as recorded)
        try:
            policy = (self._joined_table(table) if "+" in table else self.policy.table(table))
        except PolicyError:
            return {}
        return {n: c.type for n, c in policy.columns.items()}

    # (defined by Session)
    def _virtual_model(self, name: str) -> TableModel:
        raise NotImplementedError

    def _ensure_table(self, table: Any) -> None:
        raise NotImplementedError

    def _joined_table(self, name: str) -> Any:
        raise NotImplementedError
