"""``privplan prepare``: make a database's durable copies (see
:mod:`privplan.engines.durable_copies`) once: the bounded rows of its user-level tables, and
the rows of its row-level tables with their SUM grids (what a prepared session copies)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privplan.accounting.definitions import PureDP
from privplan.engines.durable_copies import file_stamp, write_copies
from privplan.errors import PolicyError
from privplan.planning.passes import bounded_select
from privplan.rewrite.engine_sql import stored_grids
from privplan.session.session import connect

__all__ = ["prepare_copies"]


def prepare_copies(database: str | Path, policy: Any) -> list[str]:
    """Make the durable copies of every private table of ``policy`` in ``database`` (a
    DuckDB file), replacing earlier ones; returns the tables copied. Spends no budget and
    releases nothing: the copies are private rows, written beside the database.

    Each copy is made by the very statement a session would run (planned here as a prepared
    session plans a query over the table: a user-level table's bounded rows, a row-level
    table's rows with each bounded numeric column on its SUM grid), and the file's stamp is
    read before anything is read and checked after; if the database changed meanwhile,
    nothing is kept and :class:`~privplan.errors.PolicyError` says to run it again."""
    db = Path(database)
    if not db.is_file():
        raise PolicyError(f"privplan prepare needs a DuckDB file; '{db}' is not one")
    stamp = file_stamp(db)
    with connect(db, policy=policy, budget=PureDP(1), prepare=True) as sess:
        sess.engine.forget_durable()  # (plan from the table itself, not from older copies)
        selects = _copy_selects(sess, [t.name for t in sess.policy.private_tables()])
        if selects:
            write_copies(sess.engine.con, db, stamp, selects)  # type: ignore[attr-defined]
    return [table for table, _ in selects]


def _copy_selects(sess: Any, tables: Sequence[str]) -> list[tuple[str, str]]:
    """The statement that makes each table's copy, as a prepared session plans it (a row-level
    table without a bounded numeric column has no grid to store: its copy would be the table)."""
    out: list[tuple[str, str]] = []
    for table in tables:
        planned, _ = sess.plan(f'SELECT COUNT(*) FROM "{table}"', {"epsilon": 1})
        out.extend((table, bounded_select(core)) for core in planned.plan.cores
                   if core.unit is not None or stored_grids(core))
    return out
