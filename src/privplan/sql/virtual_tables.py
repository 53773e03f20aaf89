"""The accountant's model of a table that the policy does not list but planning makes: a join
of two private tables on their unit (``a+b``, :mod:`privplan.sql.joins`) or a per-unit table
(``t/per-unit/<hash>[/rows=m]``, :mod:`privplan.sql.per_unit`). Each is a function of its name and the
policy, so a ledger or an audit can be replayed without the query that made it."""

from __future__ import annotations

from typing import Any

from privplan.accounting.model import TableModel, UnitModel
from privplan.sql.per_unit import MARK, derived_model_columns, derived_rows


def table_model(policy: Any, name: str) -> TableModel:
    """The model of table ``name``: the policy's table, a join, or a per-unit table."""
    if MARK in name:  # one row (or /rows=m) per unit of the base table, add/remove
        base = policy.table(name.split(MARK)[0])
        return TableModel("add_remove", UnitModel(derived_rows(name),
                                                  derived_model_columns(base)))
    if "+" in name:
        from privplan.sql.joins import _virtual_table

        left, _, right = name.partition("+")
        return _virtual_table(policy.table(left), policy.table(right)).table_model()
    return policy.table(name).table_model()


def is_virtual(name: str) -> bool:
    """Whether ``name`` is a table planning makes (a join or a per-unit table)."""
    return MARK in name or "+" in name
