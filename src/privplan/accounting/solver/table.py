"""Per-table solvers and the composition of several tables.

:class:`TableSolver` composes one table's mechanisms incrementally (only what new regions can
change is searched) and exports its state for durable checkpoints; :func:`compose` adds the
table maxima (one person may be in every private table).

Privacy: a table's total never drops below its mechanisms' composition; tables' maxima add up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np

from privplan.accounting.definitions import PrivacyValue
from privplan.accounting.model import (
    MechanismSpec,
    TableModel,
)
from privplan.accounting.solver.atoms import (
    _ARRAYS,
    _PER_MECH,
    DEFAULT_EXACT_LIMIT,
    Axis,
    Cell,
    Cell2,
    _Best,
    _disjoint,
    _MechColumns,
    _Mechs,
    _Scale,
)
from privplan.accounting.solver.explain import _detail, _rule, _witness
from privplan.accounting.solver.instance import _Instance
from privplan.accounting.solver.records import _max_cell
from privplan.accounting.solver.replace import _max_pair
from privplan.accounting.solver.search import _Budget
from privplan.accounting.solver.units import _max_unit
from privplan.analysis.sets import Value
from privplan.errors import PolicyError

Why = tuple[tuple[str, ...], str, str]


"""An explanation: witness mechanism ids, what the worst pair is, the rule applied."""


class _Explained:
    """An explanation given, or made on first use (naming the witness of a long history takes
    milliseconds that a charge, which only compares costs, need not pay)."""

    __slots__ = ("_make", "_why")

    def __init__(self, why: Why | None, make: Callable[[], Why] | None) -> None:
        self._why, self._make = why, make

    def _explained(self) -> Why:
        if self._why is None:
            assert self._make is not None
            self._why, self._make = self._make(), None
        return self._why

    @property
    def witness(self) -> tuple[str, ...]:
        return self._explained()[0]

    @property
    def rule(self) -> str:
        return self._explained()[2]


class Composition(_Explained):
    """The composed cost of a set of mechanisms, and why.

    ``cost`` is a privacy value of the inputs' kind (``kind.zero()`` when nothing was released);
    ``witness`` holds the ids of the mechanisms a worst neighbouring pair affects (for (ε, δ):
    the pair that maximises ε); ``exact`` is False when a proven upper bound was used. The
    explanation (``witness``, ``witness_detail``, ``rule``) may be made when first read.
    """

    __slots__ = ("cost", "exact")

    def __init__(self, cost: Any, witness: tuple[str, ...] = (), witness_detail: str = "",
                 exact: bool = True, rule: str = "", *,
                 explain: Callable[[], Why] | None = None) -> None:
        super().__init__(None if explain else (tuple(witness), witness_detail, rule), explain)
        self.cost, self.exact = cost, exact

    @property
    def witness_detail(self) -> str:
        return self._explained()[1]

    def _key(self) -> tuple[Any, ...]:
        return (self.cost, self.exact, *self._explained())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Composition) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.cost, self.exact))

    def __repr__(self) -> str:
        return (f"Composition(cost={self.cost!r}, witness={self.witness!r}, "
                f"witness_detail={self.witness_detail!r}, exact={self.exact!r}, "
                f"rule={self.rule!r})")


def compose(
    mechanisms: Sequence[MechanismSpec],
    tables: Mapping[str, TableModel],
    kind: type[PrivacyValue],
    *,
    exact_limit: int = DEFAULT_EXACT_LIMIT,
) -> Composition:
    """The cost of releasing all ``mechanisms`` together, by the general composition theorem.

    Raises ``TypeError`` when a cost is not of ``kind`` and :class:`PolicyError` when a
    mechanism's table has no model in ``tables``. See the module docstring for the rules.
    """
    _check_kinds(mechanisms, kind)
    by_table: dict[str, list[MechanismSpec]] = {}
    for m in mechanisms:
        by_table.setdefault(m.table, []).append(m)
    costs = []
    for name, ms in by_table.items():
        solver = TableSolver(name, _table_model(tables, name), kind, exact_limit=exact_limit)
        costs.append(solver.extended(ms).cost)
    return combine_tables(costs, kind)


class TableCost(_Explained):
    """One table's composed weights (per coordinate of the kind) and their explanation."""

    __slots__ = ("exact", "table", "weights")

    def __init__(self, table: str, weights: tuple[Fraction, ...], witness: tuple[str, ...] = (),
                 detail: str = "", exact: bool = True, rule: str = "", *,
                 explain: Callable[[], Why] | None = None) -> None:
        super().__init__(None if explain else (tuple(witness), detail, rule), explain)
        self.table, self.weights, self.exact = table, weights, exact

    @property
    def detail(self) -> str:
        return self._explained()[1]


def combine_tables(costs: Sequence[TableCost], kind: type[PrivacyValue]) -> Composition:
    """Sum the tables' maxima: one person may appear in every private table (conservative)."""
    if not costs:
        return Composition(kind.zero(), (), "nothing released", True, "no mechanisms")
    # (weights first: a table's witness is only worked out when its weights are all zero)
    if all(not any(c.weights) and c.exact and not c.witness for c in costs):
        return Composition(
            kind.zero(), (), "no record is in any mechanism's region", True, "empty regions"
        )
    costs = [c for c in costs if any(c.weights) or not c.exact or c.witness]
    weights = tuple(sum(ws, Fraction(0)) for ws in zip(*(c.weights for c in costs)))
    exact = all(c.exact for c in costs)

    def explain() -> Why:
        if len(costs) == 1:  # (one table's witness holds each mechanism once)
            return costs[0].witness, costs[0].detail, costs[0].rule
        witness = tuple(dict.fromkeys(i for c in costs for i in c.witness))
        detail = "; ".join(f"in {c.table}: {c.detail}" for c in costs)
        rule = (
            "; ".join(f"{c.table}: {c.rule}" for c in costs)
            + "; summed over tables (one person may appear in every private table)"
        )
        return witness, detail, rule

    return Composition(kind.from_weights(weights), exact=exact, explain=explain)


def _check_kinds(mechanisms: Iterable[MechanismSpec], kind: type[PrivacyValue]) -> None:
    for m in mechanisms:
        if not isinstance(m.cost, kind):
            raise TypeError(
                f"mechanism {m.id!r} costs {type(m.cost).__name__}, but this composition is in "
                f"{kind.__name__}: convert the cost first (privplan.accounting.conversions)"
            )


def _table_model(tables: Mapping[str, TableModel], name: str) -> TableModel:
    try:
        return tables[name]
    except KeyError:
        raise PolicyError(
            f"table {name!r} has no neighbourhood/unit model in the policy; declare it so its "
            "privacy cost can be composed"
        ) from None


def model_key(model: TableModel) -> tuple[str, int, tuple[str, ...]]:
    """A table model as plain values, the same in every process (a checkpoint is only restored
    under the model it was computed for)."""
    return (model.neighbourhood, model.unit.max_rows, tuple(sorted(model.unit.unit_level_columns)))


@dataclass(frozen=True)
class SolverState:
    """A :class:`TableSolver` as plain values and arrays, without its mechanisms' specs.

    What a durable checkpoint stores (:mod:`privplan.ledger.checkpoint`) so that a new session
    resumes the composition where the ledger's entries left it instead of re-solving them all.
    ``arrays`` holds ``lo``, ``hi``, ``row_mech`` (per atom-box row), ``part``, ``full``, ``wf``,
    ``wx_idx``, ``keys_idx``, ``max_groups``, ``growth``, ``row_cap`` (per mechanism) and
    ``narrow`` (per column);
    ``bests`` the worst pair found per weight coordinate for each neighbourhood search, as
    (value, exact, cells, note).
    """

    table: str
    kind: str
    exact_limit: int
    model: tuple[str, int, tuple[str, ...]]
    columns: tuple[str, ...]
    axes: tuple[tuple[Value, ...], ...]
    poisoned: tuple[str, ...]
    headroom: int
    widened: bool
    notes: tuple[str, ...]
    scales: tuple[tuple[int | None, int, float], ...]
    ids: list[str]
    wx_table: list[tuple[Fraction, ...]]
    keys_table: list[tuple[int, ...]]
    arrays: Mapping[str, np.ndarray]
    bests: Mapping[str, tuple[tuple[Fraction, bool, tuple[Cell, ...], str], ...]]


def _headroom(model: TableModel) -> int:
    """The largest multiple of the total weight a search value can reach: 2 for a replace
    pair, and for a unit of k rows its largest multiplier, k² (one group pays φ(k) = k² under
    square growth; see :func:`~privplan.accounting.model.unit_multiplier`)."""
    k = model.unit.max_rows
    return max(2, k * k if k > 1 else 1)


def _best_counts(model: TableModel, q: int, n: int) -> dict[str, int]:
    """How many worst pairs :meth:`TableSolver.extended` keeps per search (one per weight
    coordinate, for the searches the model needs; none before any mechanism)."""
    k, replace = model.unit.max_rows, model.neighbourhood == "replace"
    if n == 0:
        return {"single": 0, "pair": 0, "unit": 0}
    return {"single": q, "pair": q if k == 1 and replace else 0, "unit": q if k > 1 else 0}


class TableSolver:
    """The composed cost of one table's mechanisms; :meth:`extended` adds more, incrementally.

    The new maximum is max(old, best over what the new mechanisms can change): a record (or,
    under replace, a pair of records) outside every new region keeps its old weight, and a
    unit's weight changes only if a new region meets its slab (its unit-level values). So only
    the new regions are searched, against the old rows that meet them. A change that widens
    old regions (a column turning unorderable) is recomputed from scratch. Solvers are
    immutable: ``extended`` returns a new one.
    """

    def __init__(
        self,
        table: str,
        model: TableModel,
        kind: type[PrivacyValue],
        *,
        exact_limit: int = DEFAULT_EXACT_LIMIT,
    ) -> None:
        self.table = table
        self.model = model
        self.kind = kind
        self.exact_limit = exact_limit
        self._q = len(kind.zero().weights())
        self._inst = _Instance.empty(self._q, _headroom(model))
        self._single: tuple[_Best, ...] = ()
        self._pair: tuple[_Best, ...] = ()
        self._unit: tuple[_Best, ...] = ()

    @property
    def mechanisms(self) -> tuple[MechanismSpec, ...]:
        return tuple(self._inst.mechs.specs())

    def extended(self, new: Sequence[MechanismSpec]) -> TableSolver:
        """A solver for the old mechanisms plus ``new`` (all on this table, of this kind)."""
        _check_kinds(new, self.kind)
        for m in new:
            if m.table != self.table:
                raise ValueError(f"mechanism {m.id!r} is on {m.table!r}, not {self.table!r}")
        if not new:
            return self
        old = self._inst
        inst, rebuilt, new_rows = old.extend(new)
        out = object.__new__(TableSolver)
        out.__dict__.update(self.__dict__)
        out.__dict__.pop("cost", None)  # cached for the old mechanisms
        out._inst = inst
        budget = _Budget(self.exact_limit)
        k = self.model.unit.max_rows
        incremental = bool(old.mechs) and not rebuilt
        # the single-record search: one box around the new rows (see _bounding_box); the
        # unit and pair searches: the new rows' disjoint pieces (made only for them)
        if not incremental:
            around = [inst.full_box_tuple()]
        else:
            around = [_bounding_box(new_rows)] if new_rows else []
        pieces = incremental and (k > 1 or self.model.neighbourhood == "replace")
        domains = _disjoint(new_rows) if pieces else None
        single, pair, unit = [], [], []

        def moved(b: _Best) -> _Best:
            return _Best(b.value, b.exact, tuple(inst.remap(c) for c in b.cells), b.bound_note)

        ucols = frozenset(
            inst.col_index[c] for c in self.model.unit.unit_level_columns if c in inst.col_index
        )
        for j in range(self._q):
            prev = moved(self._single[j]) if incremental else None
            s = _max_cell(inst, j, around, prev, budget,
                          new_from=len(old.mechs) if incremental else None)
            single.append(s)
            if k > 1:  # only slabs a new region meets can change
                prev_u = moved(self._unit[j]) if incremental else None
                bound_budget = _Budget(max(self.exact_limit, 2000))
                unit.append(
                    _max_unit(
                        inst,
                        j,
                        k,
                        ucols,
                        domains,
                        s,
                        prev_u,
                        budget,
                        bound_budget,
                    )
                )
                continue
            if self.model.neighbourhood == "replace":
                prev_p = moved(self._pair[j]) if incremental else None
                pair.append(_max_pair(inst, j, domains, s, prev_p, budget))
        out._single, out._pair, out._unit = tuple(single), tuple(pair), tuple(unit)
        return out

    def export_state(self) -> SolverState:
        """This solver's state as plain values (see :class:`SolverState`)."""
        inst = self._inst
        ids, wx_idx, wx_table, keys_idx, keys_table, per_mech = inst.mechs.columns()
        arrays = {name: getattr(inst, name) for name in _ARRAYS}
        arrays["wx_idx"] = np.array(wx_idx, dtype=np.int64)
        arrays["keys_idx"] = np.array(keys_idx, dtype=np.int64)
        for name, values in per_mech.items():
            arrays[name] = np.array(values, dtype=np.int64)
        return SolverState(
            table=self.table, kind=self.kind.__name__, exact_limit=self.exact_limit,
            model=model_key(self.model), columns=inst.columns,
            axes=tuple(tuple(a.values) for a in inst.axes), poisoned=tuple(sorted(inst.poisoned)),
            headroom=inst.headroom, widened=inst.widened, notes=inst.notes,
            scales=tuple((sc.denom, sc.total, sc.tol) for sc in inst.scales),
            ids=ids, wx_table=wx_table, keys_table=keys_table, arrays=arrays,
            bests={name: tuple((b.value, b.exact, b.cells, b.bound_note) for b in bests)
                   for name, bests in (("single", self._single), ("pair", self._pair),
                                       ("unit", self._unit))})

    @classmethod
    def from_state(cls, state: SolverState, model: TableModel, kind: type[PrivacyValue],
                   load_specs: Callable[[], Sequence[MechanismSpec]], *,
                   exact_limit: int | None = None) -> TableSolver:
        """The solver ``state`` was exported from, for ``model`` and ``kind`` (checked), its
        mechanisms' specs read through ``load_specs`` only if ever needed. Raises
        ``ValueError`` for a state that does not fit (another model, kind, or inconsistent
        shapes): the caller then rebuilds from the mechanisms themselves."""
        if state.kind != kind.__name__ or state.model != model_key(model):
            raise ValueError("the saved state is for another privacy definition or table model")
        out = cls(state.table, model, kind,
                  exact_limit=state.exact_limit if exact_limit is None else exact_limit)
        if state.headroom != out._inst.headroom:
            raise ValueError("the saved state was searched with another float headroom")
        q, d, n = out._q, len(state.columns), len(state.ids)
        if any(name not in state.arrays for name in _PER_MECH):
            raise ValueError("the saved state predates per-row growth")
        a = {name: np.asarray(state.arrays[name]) for name in
             (*_ARRAYS, "wx_idx", "keys_idx", *_PER_MECH)}
        rows = a["lo"].shape[0] if a["lo"].ndim == 2 else -1
        ok = (
            len(state.axes) == d and len(state.scales) == q
            and a["lo"].shape == (rows, d) and a["hi"].shape == (rows, d)
            and a["row_mech"].shape == (rows,) and a["wf"].shape == (n, q)
            and all(a[k].shape == (n,) for k in ("part", "full", "wx_idx", "keys_idx",
                                                   *_PER_MECH))
            and (n == 0 or (0 <= int(a["growth"].min()) and int(a["growth"].max()) < 3))
            and a["narrow"].shape == (d,)
            and all(len(w) == q for w in state.wx_table)
            and all(0 <= k < d for ks in state.keys_table for k in ks)
            and (n == 0 or (0 <= int(a["wx_idx"].min()) and int(a["wx_idx"].max())
                            < len(state.wx_table) and 0 <= int(a["keys_idx"].min())
                            and int(a["keys_idx"].max()) < len(state.keys_table)))
            and (rows == 0 or (0 <= int(a["row_mech"].min()) and int(a["row_mech"].max()) < n))
            and {name: len(bs) for name, bs in state.bests.items()} == _best_counts(model, q, n)
        )
        if not ok:
            raise ValueError("the saved solver state is inconsistent")
        inst = object.__new__(_Instance)
        inst.headroom = state.headroom
        inst.columns = tuple(state.columns)
        inst.col_index = {c: i for i, c in enumerate(inst.columns)}
        inst.axes = tuple(Axis(list(v)) for v in state.axes)
        inst.poisoned = frozenset(state.poisoned)
        inst.cell_maps = ((None,) * d, 0)
        inst.box_groups = None
        inst.widened, inst.notes = state.widened, tuple(state.notes)
        inst.scales = tuple(_Scale(dn, tot, tol) for dn, tot, tol in state.scales)
        for name in _ARRAYS:
            setattr(inst, name, a[name])
        base = _MechColumns(list(state.ids), a["wx_idx"], list(state.wx_table), a["keys_idx"],
                            list(state.keys_table), a["max_groups"], a["part"], a["full"],
                            load_specs, {}, a["growth"], a["row_cap"])
        inst.mechs = _Mechs(base, (), ())
        out._inst = inst
        out._single, out._pair, out._unit = (
            tuple(_Best(v, e, tuple(tuple(c) for c in cells), note)
                  for v, e, cells, note in state.bests.get(name, ()))
            for name in ("single", "pair", "unit"))
        return out

    @cached_property
    def cost(self) -> TableCost:
        """This table's weights per coordinate with the witness of the first non-zero one."""
        inst = self._inst
        replace = self.model.neighbourhood == "replace"
        k = self.model.unit.max_rows
        if not inst.mechs:
            return TableCost(self.table, (Fraction(0),) * self._q, (), "nothing released", True, "")
        if k > 1:
            bests = self._unit
            factor = 2 if replace else 1
            weights = tuple(b.value * factor for b in bests)
            exact = all(b.exact for b in bests) and not replace and not inst.widened
        else:
            bests = self._pair if replace else self._single
            weights = tuple(b.value for b in bests)
            exact = all(b.exact for b in bests) and not inst.widened
        lead = next((b for b in bests if b.value), bests[0])

        def explain() -> Why:
            witness_idx = _witness(inst, lead)
            detail = _detail(inst, lead, witness_idx, k, replace)
            rule = _rule(inst, lead, witness_idx, k, replace)
            if inst.widened:
                rule += "; some regions were over-approximated (" + "; ".join(inst.notes) + ")"
            return inst.mechs.ids(witness_idx), detail, rule

        return TableCost(self.table, weights, exact=exact, explain=explain)


def _bounding_box(rows: Sequence[Cell2]) -> Cell2:
    """The smallest box holding every row: the single-record search's domain after an
    extension. Why searching it is enough and still exact: a record outside every new row is
    in no new region, so its value is what it was (the previous best covers it); the box's
    other records are records like any other, so their values are true values (none is
    over-counted), and the max over a superset of the changed records, with the previous
    best, is the new max. One search instead of one per disjoint piece of the new rows (~0.1
    ms each at small sizes)."""
    return tuple((min(r[c][0] for r in rows), max(r[c][1] for r in rows))
                 for c in range(len(rows[0])))
