"""The server's budgets: the data's total, and each analyst's own, shared by its connections.

Every answer a connection releases is charged to two accounts (:class:`~privplan.session.
account.Account`): its analyst's, a ledger of that analyst's answers only, whose composed total
must stay within the budget the users file gives them; and the data's total, the ledger every
analyst's answers compose in (analysts may collude, so the total bounds what all of them learn
together). A query is answered only if it fits both; refused by either, it spends nothing.

One account per ledger file for the whole server: all connections of one analyst share that
analyst's account, and all connections share the total, so each account's accounting is built
once and kept up by its own charges (not rebuilt by each connection from the others' entries).

Where the analysts' ledgers live: a folder next to the total's ledger, named after it with
``.analysts`` appended (``data.ledger`` -> ``data.ledger.analysts/alice.sqlite``), made with
mode 0700 on first use. User names are restricted to letters, digits and ``_ . @ -``, not
starting with ``.`` (:mod:`privplan.server.users`), so a name is always one file in that folder.

Privacy: an analyst sees only their own account's figures (costs, spent, remaining, refusals);
the total's refusal says that the data's total would be exceeded, without figures: what all
analysts spent together would tell one analyst about the others' queries.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

from privplan.accounting.conversions import convert
from privplan.accounting.definitions import build, kind_for
from privplan.errors import PolicyError
from privplan.ledger.store import SQLiteLedger
from privplan.server.users import User
from privplan.session.account import Account

__all__ = ["Accounts", "analyst_budget", "analysts_folder"]


def analysts_folder(ledger: Path) -> Path:
    """The folder of the analysts' ledgers next to the total's ``ledger``."""
    return ledger.with_name(ledger.name + ".analysts")


def analyst_budget(user: User, kind: type) -> Any:
    """``user``'s budget as a value of the server's privacy definition ``kind``: their own
    budget when it is of that definition, or its conversion when that is the same guarantee —
    one that reads no δ and lands on δ = 0 (a pure ε under an (ε, δ) total: (ε, 0)-DP is ε-DP).
    Anything else is refused: a budget converted with a loss (ε to ρ = ε²/2, μ to ρ = μ²/2)
    would bound the analyst by a weaker guarantee than the users file gives them."""
    named = kind_for(user.budget)
    own = build(named, user.budget) if named is not None else None
    if own is not None and type(own) is kind:
        return own
    try:
        as_total = convert(own, kind) if own is not None else None
    except TypeError:
        as_total = None
    if as_total is None or as_total.delta_or_none() != 0:
        raise PolicyError(
            f"analyst {user.name!r} has a budget of another privacy definition "
            f"({user.budget}) than the data's total ({kind.__name__}), which does not convert "
            "to it without a loss. Fix: give every analyst a budget of the total's definition "
            "(remove the user and add them again with the right flags).")
    return as_total


class Accounts:
    """The total's account and each analyst's, opened once per server (see the module
    docstring); ``close`` closes them all."""

    def __init__(self, ledger: Path, total: Any, policy: Any, users: dict[str, User]) -> None:
        self._budgets = {name: analyst_budget(u, type(total)) for name, u in users.items()}
        self._folder = analysts_folder(ledger)
        self._policy = policy
        self._lock = threading.Lock()
        self._analysts: dict[str, Account] = {}
        self.total = Account.open(SQLiteLedger(ledger), total, policy,
                                  name="the data's total", disclose=False)
        try:  # (every analyst's ledger checked now, not at their first connection)
            for name in sorted(self._budgets):
                self.analyst(name)
        except BaseException:
            self.close()
            raise

    def analyst(self, name: str) -> Account:
        """``name``'s account (its ledger created when new), opened once."""
        with self._lock:
            found = self._analysts.get(name)
            if found is None:
                self._folder.mkdir(mode=0o700, exist_ok=True)
                found = Account.open(SQLiteLedger(self._folder / f"{name}.sqlite"),
                                     self._budgets[name], self._policy,
                                     name=f"analyst {name}")
                self._analysts[name] = found
            return found

    def close(self) -> None:
        with self._lock:
            accounts = [*self._analysts.values(), self.total]
            self._analysts.clear()
        for account in accounts:
            with contextlib.suppress(Exception):
                account.close()
