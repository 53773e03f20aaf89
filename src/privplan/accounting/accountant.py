"""The incremental accountant: the composed cost of a session, updated per admission.

The total is always the composition theorem applied to *everything* admitted (see
:mod:`privplan.accounting.solver`), maintained per table by a
:class:`~privplan.accounting.solver.TableSolver`. Admitting N to a history H gives
max(old total, best over what N can change): a record (a replace pair, a unit) that no new
region meets affects exactly the mechanisms it did before. So only the new regions are
searched, against the rows of H that meet them; an admission that widens old regions (a column
whose values turn out unorderable) is recomputed from scratch.

Table maxima are summed over tables (one person may be in every private table).

Privacy: the total is the composition of everything admitted; a widened region is recomputed whole.

>>> from privplan.accounting.definitions import PureDP
>>> from privplan.accounting.model import MechanismSpec, TableModel
>>> from privplan.analysis.regions import Region
>>> from privplan.analysis.sets import ColumnSet
>>> acc = Accountant({"t": TableModel()}, PureDP)
>>> for g in "abc":
...     _ = acc.admit([MechanismSpec(g, "t", Region.column("g", ColumnSet.points([g])), PureDP(1))])
>>> acc.total.cost
PureDP(epsilon=1.0)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from privplan.accounting.model import MechanismSpec, TableModel
from privplan.accounting.solver import (
    DEFAULT_EXACT_LIMIT,
    Composition,
    SolverState,
    TableSolver,
)
from privplan.accounting.solver.first_extension import first_solver
from privplan.accounting.solver.table import _check_kinds, _table_model, combine_tables

__all__ = ["Accountant"]


class Accountant:
    """Composed cost of every admitted mechanism, one kind of privacy value per accountant.

    ``preview`` answers "what would the total be" without changing anything; ``admit``
    records the mechanisms and returns the new total. Both raise ``TypeError`` for a cost of
    another kind and :class:`~privplan.errors.PolicyError` for a table without a model.
    """

    def __init__(
        self,
        tables: Mapping[str, TableModel],
        kind: type,
        *,
        exact_limit: int = DEFAULT_EXACT_LIMIT,
    ) -> None:
        self._tables = dict(tables)
        self._kind = kind
        self._exact_limit = exact_limit
        self._solvers: dict[str, TableSolver] = {}
        self._total = combine_tables([], kind)
        self._pending: tuple[object, tuple[MechanismSpec, ...], dict[str, TableSolver],
                             Composition] | None = None

    @property
    def kind(self) -> type:
        return self._kind

    @property
    def total(self) -> Composition:
        """The composed cost of everything admitted so far."""
        return self._total

    def preview(self, new: Sequence[MechanismSpec]) -> Composition:
        """The total if ``new`` were admitted (nothing is recorded)."""
        solvers = self._advance(new)
        total = combine_tables([s.cost for s in solvers.values()], self._kind)
        # kept so that admitting these very specs next (check, then charge) is not solved twice
        self._pending = (self._solvers, tuple(new), solvers, total)
        return total

    def admit(self, new: Sequence[MechanismSpec]) -> Composition:
        """Admit ``new`` and return the new total."""
        pending, self._pending = self._pending, None
        if (pending is not None and pending[0] is self._solvers
                and len(pending[1]) == len(new) and all(a is b for a, b in zip(pending[1], new))):
            _, _, solvers, total = pending  # same history, same spec objects: same answer
        else:
            solvers = self._advance(new)
            total = combine_tables([s.cost for s in solvers.values()], self._kind)
        self._solvers, self._total = solvers, total
        return total

    def staged(self, new: Sequence[MechanismSpec]) -> Accountant:
        """A new accountant holding everything admitted here plus ``new``; this one is left as
        it is. For a transaction's reads: the caller adopts the new accountant only once the
        transaction that read ``new`` has committed (and drops it otherwise), so nothing read in
        a transaction that ended otherwise can be counted twice."""
        out = Accountant(self._tables, self._kind, exact_limit=self._exact_limit)
        out._solvers = self._advance(new)
        out._total = combine_tables([s.cost for s in out._solvers.values()], self._kind)
        return out

    def alone(self, mechanisms: Sequence[MechanismSpec]) -> Composition:
        """The composed cost of ``mechanisms`` with an empty history, under the same table
        models: what one query would cost on its own (the sequential-composition baseline a
        budget plot compares with). Nothing is recorded."""
        fresh = Accountant(self._tables, self._kind, exact_limit=self._exact_limit)
        return fresh.preview(mechanisms)

    def export_state(self) -> list[SolverState]:
        """Every table's solver as plain values, in order of first admission (a checkpoint)."""
        return [s.export_state() for s in self._solvers.values()]

    @classmethod
    def restore(
        cls,
        tables: Mapping[str, TableModel],
        kind: type,
        states: Sequence[SolverState],
        load_specs: Callable[[str], Sequence[MechanismSpec]],
        *,
        exact_limit: int = DEFAULT_EXACT_LIMIT,
    ) -> Accountant:
        """The accountant whose :meth:`export_state` gave ``states``, under ``tables`` and
        ``kind``; a table's specs are read through ``load_specs(table)`` only when needed.

        Its total is the one the saved solvers had computed, so admitting more continues
        exactly as the saving accountant would have. Raises ``ValueError`` when a state does
        not fit (another model or kind): the caller then rebuilds from specs.
        """
        acc = cls(tables, kind, exact_limit=exact_limit)
        for st in states:
            if st.table in acc._solvers:
                raise ValueError("the saved state repeats a table")
            model = _table_model(acc._tables, st.table)
            # (a state saved under another search limit is as valid: every saved maximum is
            # exact or a proven upper bound whatever the limit; later admissions use this one)
            acc._solvers[st.table] = TableSolver.from_state(
                st, model, kind, partial(load_specs, st.table), exact_limit=exact_limit)
        acc._total = combine_tables([s.cost for s in acc._solvers.values()], kind)
        return acc

    def add_table(self, name: str, model: TableModel) -> None:
        """Register a table first seen after construction (e.g. two private tables joined on
        their unit, accounted as a table of its own). A table's model never changes."""
        if name in self._tables and self._tables[name] != model:
            raise ValueError(f"table {name!r} already has another model")
        self._tables[name] = model

    def mechanisms(self) -> tuple[MechanismSpec, ...]:
        """Every admitted mechanism, grouped by table in order of first admission."""
        return tuple(m for s in self._solvers.values() for m in s.mechanisms)

    def _advance(self, new: Sequence[MechanismSpec]) -> dict[str, TableSolver]:
        new = list(new)
        _check_kinds(new, self._kind)
        by_table: dict[str, list[MechanismSpec]] = {}
        for m in new:
            by_table.setdefault(m.table, []).append(m)
        solvers = dict(self._solvers)
        for name, ms in by_table.items():
            solver = solvers.get(name)
            if solver is not None:
                solvers[name] = solver.extended(ms)
                continue
            model = _table_model(self._tables, name)
            solvers[name] = first_solver(  # (a fresh table's: made once for these specs)
                name, model, self._kind, self._exact_limit, ms,
                partial(_fresh_solver, name, model, self._kind, self._exact_limit, ms))
        return solvers


def _fresh_solver(name: str, model: TableModel, kind: type, exact_limit: int,
                  specs: Sequence[MechanismSpec]) -> TableSolver:
    return TableSolver(name, model, kind, exact_limit=exact_limit).extended(specs)
