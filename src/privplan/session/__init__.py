"""A session: a policy, an engine and a ledger (:mod:`privplan.session.session`); its catalog,
inputs, ledger accounting, PLD accounting, plan cache, subqueries and ``prepare`` live beside
it in this package."""

from __future__ import annotations

from privplan.session.session import Session, connect

__all__ = ["Session", "connect"]
