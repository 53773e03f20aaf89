"""Which bounded copy a session's query reads, and when a default session makes one itself.

A session copy (:meth:`privplan.engines.duckdb_engine.DuckDBEngine.materialize`) holds a
private table's rows as every statement would compute them inline (:func:`~privplan.planning.
passes.bounded_select`: the per-unit bounded rows at user level; at row level every row with its
SUM-grid columns), so later statements read it instead of clamping every row again: a default
DuckDB session's SUM/AVG went from ~5x the plain query to the prepared session's ~1.1x.

* **A session opened with ``prepare=True``**: the first query over the table makes the copy.
* **User level**, otherwise (the default and ``prepare=False``): from the session's *second*
  charged query over the table — or the *process's* second, where the copy is the process's
  (:mod:`privplan.engines.shared_copies`: a file privplan opened read only; it is then kept
  beyond the DuckDB instance, :mod:`privplan.engines.copy_snapshots`, so that a session per
  query reads it) —; the first reads the per-unit bounded rows inline (the statement
  the gate admitted: the same rows as the copy, chosen by the same portable row order). A user-
  level table is always copied from then on, wherever its rows come from (``connect``'s
  documented snapshot), since reading the per-unit bounded rows inline costs a window over every
  row per statement. Why not the first query: making the copy costs about one inline statement
  more, so a session that asks once (the CLI, a connection per request, a pool) would pay for a
  copy it never reads — at 1k rows ~10 ms of a fresh session's ~28 ms.
* **Row level, ``prepare=False``**: never; every statement reads the table itself.
* **Row level, the default** (``prepare=None``): from the session's *second* charged query over
  the table, and only where its rows **cannot change while the session is open**
  (:meth:`~privplan.engines.duckdb_engine.DuckDBEngine.rows_fixed`: a table of a DuckDB file the
  engine opened itself, read only — DuckDB's file lock keeps every writer out — with nothing
  registered over it). There the copy is the table, so reading it changes no answer, ever; a
  caller's connection, a registered DataFrame or a CSV/Parquet source can change under the
  session, and a copy would be a snapshot the caller did not ask for (``prepare=True`` asks).
  Why the second query: making the copy costs about one clamped statement more, which a session
  that asks once (the CLI, a connection per request) would pay for nothing.

Where the rows are a function of the file and the policy alone (the DuckDB file opened read
only, nothing registered, no view defined), the copy is the process's, not the session's
(:mod:`privplan.engines.shared_copies`): the sessions of a ``privplan serve`` (one per
connection) over an equal policy read one copy, made by the first that needs it; a session may
then read it from its first query, since it is exactly the copy it would have made.

Privacy: whether a copy is made depends on how many charged queries the session ran over that
table, the ``prepare`` argument and the engine's configuration — never on a row. The copy is made
only after the query is charged (``Session._run_core``), holds exactly the rows the admitted
inline statement reads, and a failure making it (memory, disk) is withheld: the default session
then stops making copies and the query runs the admitted inline statement, so a failure changes
the time taken only (DESIGN.md §1: timing is out of scope) and never the answer.
"""

from __future__ import annotations

import logging
from typing import Any

from privplan.errors import ExecutionError
from privplan.planning.passes import bounded_select
from privplan.sql.plan import CorePlan

__all__ = ["SessionCopies"]


class SessionCopies:
    """One session's choice of copies: ``prepare`` as given to ``connect`` (None: the
    default), and how many charged queries read each row-level table inline so far."""

    def __init__(self, prepare: bool | None) -> None:
        self.prepare = prepare
        self._uses: dict[str, int] = {}
        self._failed = False

    def copy_for(self, core: CorePlan, engine: Any) -> str | None:
        """The copy ``core`` reads, made now if it is wanted (after the charge only), or None:
        the statement reads the table itself."""
        if core.prebounded:
            return None
        select = bounded_select(core)
        if self.prepare is True:
            made: str = engine.materialize(select)
            return made
        if not self._wanted(core, select, engine):
            return None
        try:
            made = engine.materialize(select)
        except ExecutionError:
            self._failed = True  # (withheld: the admitted inline statement answers instead)
            logging.getLogger("privplan").info(
                "could not make the session's copy of %s; its queries clamp every row",
                core.table)
            return None
        return made

    def automatic(self, core: CorePlan, engine: Any) -> bool:
        """Whether a default session will copy this core's table on its own (from its second
        query), so that clamping every row now is worth no advice."""
        # (only the DuckDB engine can say its rows are fixed: on PostgreSQL and Spark other
        # clients may change a table while the session is open)
        fixed = getattr(engine, "rows_fixed", None)
        return (self.prepare is None and not self._failed and core.private_join is None
                and fixed is not None and bool(fixed(core.table_policy)))

    def _wanted(self, core: CorePlan, select: str, engine: Any) -> bool:
        """From the second charged query over ``select``'s rows: at user level unless a copy
        failed before (the session then reads the bounded rows inline), at row level where the
        session copies on its own (:meth:`automatic`)."""
        if self._failed or (core.unit is None and not self.automatic(core, engine)):
            return False
        self._uses[select] = uses = self._uses.get(select, 0) + 1
        if core.unit is not None:  # (a copy the process's later sessions read too)
            uses = max(uses, getattr(engine, "process_uses", lambda _: 0)(select))
        return uses >= 2
