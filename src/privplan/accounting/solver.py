"""The composition solver: what a set of released mechanisms costs *together* (CSF'24).

By the general composition theorem (Guerra-Balboa et al., CSF 2024, Thms IV.1/IV.11/V.2/V.5) a
neighbouring pair of databases pays only for the mechanisms whose input it changes, so

    cost = max over neighbouring pairs  of  compose{ c_i : mechanism i affected by the pair }.

``compose`` sums the additive weights of the privacy definition (ε; ε and δ; ρ; μ², see
:mod:`privplan.accounting.definitions`). Over pairs we take the componentwise max of the summed
weights: every pair's loss is dominated by it, so it is a valid upper bound (for one-weight kinds
it is exactly the max). Costs are calibrated to any change of one unit's contribution to a
mechanism's input, so the solver only decides *which* mechanisms a pair affects:

* add/remove, one row per unit: a record x affects {i : x in R_i}; a GROUP BY pays one group
  (x is in exactly one; Thms IV.6, IV.12).
* replace, one row per unit: x changes into x' != x; affected = {i : x in R_i or x' in R_i}; a
  GROUP BY holding both pays two groups (c_g + c_h, Cor IV.13) unless the keys cannot differ.
* units of up to k rows (add/remove): a unit is a set S of <= k records agreeing on the unit-level
  columns; a GROUP BY pays c_i * min(m, #groups of S) (Example IV.5). Exact by branch and bound on
  small instances, else the proven bound described at :func:`_max_unit`. Replace with k > 1 is
  bounded by removing S plus adding S' (twice the add/remove value), never claimed exact.
* several tables: one person may appear in every private table, so the table maxima are *summed*
  (conservative: it assumes the worst pair in every table can belong to the same person).

How: every column a region constrains (or a GROUP BY keys on) is cut into *atoms* (NULL, every
endpoint value, the open pieces between them; :class:`_Axis`). A region becomes disjoint boxes
of atom-index ranges, and the max over records becomes a max over cells, found by branch and
bound (:func:`_bb`) with 1-D sweep bounds. Weights are searched as floats; whenever the weights
have a common denominator D with D * sum < 2**50 (every realistic cost: 0.1, 1e-5, ...) the
floats are exact integers, otherwise near-ties are re-evaluated in Fractions. When the search
budget (``exact_limit``, see :data:`DEFAULT_EXACT_LIMIT`) runs out the answer is a proven upper
bound and ``exact`` is False. The returned cost is never below the exact value.

Modelling assumptions (each can only over-charge): an open atom (an interval between two named
values, or "everything else") holds at least k values, and every cell holds at least k records
(tables have columns no predicate names), so e.g. ``x in (3, 4)`` on an int column is treated as
non-empty. A column whose values cannot be ordered (mixed types) loses its constraints (regions
grow) and GROUP BY keys on it are treated as opaque.

>>> from privplan.accounting.definitions import PureDP
>>> from privplan.accounting.model import MechanismSpec, TableModel
>>> from privplan.analysis.regions import Region
>>> from privplan.analysis.sets import ColumnSet
>>> q = [MechanismSpec(f"q{g}", "t", Region.column("grp", ColumnSet.points([g])), PureDP(0.5))
...      for g in "ab"]
>>> compose(q, {"t": TableModel()}, PureDP).cost
PureDP(epsilon=0.5)
>>> compose(q, {"t": TableModel("replace")}, PureDP).cost
PureDP(epsilon=1.0)
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from itertools import chain, product
from typing import Any

import numpy as np

from privplan.accounting.model import (
    GROWTHS,
    MechanismSpec,
    TableModel,
    growth_factor,
    row_multiplier,
    unit_multiplier,
)
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet, Value
from privplan.errors import InternalError, PolicyError

__all__ = ["DEFAULT_EXACT_LIMIT", "Composition", "SolverState", "TableSolver", "compose",
           "model_key"]

DEFAULT_EXACT_LIMIT = 10_000
"""Search work one composition (or admission) may spend before settling for a proven bound:
branch-and-bound nodes, weighted by the rows they sweep (about a second at worst)."""

_EXACT_INT_LIMIT = 2**50  # scaled integer weights below this add exactly in float64
_MAX_ROWS_PER_BOX = 4096  # a box's IN-lists multiply out to at most this many rows
_NEG_INF = float("-inf")

Cell = tuple[int, ...]


# ============================================================================== public result


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
    kind: type,
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


# ============================================================================== per-table costs


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


def combine_tables(costs: Sequence[TableCost], kind: type) -> Composition:
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


def _check_kinds(mechanisms: Iterable[MechanismSpec], kind: type) -> None:
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


@dataclass(frozen=True)
class _Best:
    """The worst pair found for one weight coordinate: its exact value and witness cells."""

    value: Fraction
    exact: bool
    cells: tuple[Cell, ...] = ()  # one cell (a record), two (a replace pair) or a unit's rows
    bound_note: str = ""  # why the value is a bound, when it is one


def model_key(model: TableModel) -> tuple[str, int, tuple[str, ...]]:
    """A table model as plain values, the same in every process (a checkpoint is only restored
    under the model it was computed for)."""
    return (model.neighbourhood, model.unit.max_rows, tuple(sorted(model.unit.unit_level_columns)))


@dataclass(frozen=True)
class SolverState:
    """A :class:`TableSolver` as plain values and arrays, without its mechanisms' specs.

    What a durable checkpoint stores (:mod:`privplan.ledger_checkpoint`) so that a new session
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


_ARRAYS = ("lo", "hi", "row_mech", "part", "full", "wf", "narrow")
_PER_MECH = ("max_groups", "growth", "row_cap")  # int per mechanism, -1 for "no limit"


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
        kind: type,
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
        domains = _disjoint(new_rows) if incremental else [inst.full_box_tuple()]
        single, pair, unit = [], [], []

        def moved(b: _Best) -> _Best:
            return _Best(b.value, b.exact, tuple(inst.remap(c) for c in b.cells), b.bound_note)

        ucols = frozenset(
            inst.col_index[c] for c in self.model.unit.unit_level_columns if c in inst.col_index
        )
        for j in range(self._q):
            prev = moved(self._single[j]) if incremental else None
            s = _max_cell(inst, j, domains, prev, budget)
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
                        domains if incremental else None,
                        s,
                        prev_u,
                        budget,
                        bound_budget,
                    )
                )
                continue
            if self.model.neighbourhood == "replace":
                prev_p = moved(self._pair[j]) if incremental else None
                pair.append(_max_pair(inst, j, domains if incremental else None, s, prev_p, budget))
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
    def from_state(cls, state: SolverState, model: TableModel, kind: type,
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
        inst.axes = tuple(_Axis(list(v)) for v in state.axes)
        inst.poisoned = frozenset(state.poisoned)
        inst.cell_maps = ((None,) * d, 0)
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


# ============================================================================== atoms and rows


class _Unorderable(Exception):
    """A column's values cannot be sorted together (mixed types, NaN)."""


def _sorted_values(values: Iterable[Value]) -> list[Value]:
    try:
        distinct = set(values)
        if any(v != v for v in distinct):  # noqa: PLR0124 - NaN is unequal to itself
            raise _Unorderable
        return sorted(distinct)
    except TypeError as exc:
        raise _Unorderable from exc


class _Axis:
    """The atoms of one column, as indices.

    With distinct endpoint values v_0 < ... < v_{n-1} named by any region: atom 0 is NULL, atom
    2j+2 is the single value v_j, atom 2j+1 is the open gap just below v_j and atom 2n+1 is
    (v_{n-1}, +inf). Even atoms hold exactly one value; odd atoms are assumed to hold many.
    Every region's set on the column is a union of atoms, so one representative per atom
    decides membership for all its values.
    """

    __slots__ = ("_index", "size", "values")

    def __init__(self, values: list[Value]) -> None:
        self.values = values
        self.size = 2 * len(values) + 2
        self._index: dict[Value, int] | None = None

    def _pos(self, v: Value) -> int:
        j = bisect_left(self.values, v)
        if j >= len(self.values) or not self.values[j] == v:
            raise InternalError(f"value {v!r} missing from the column's atoms")
        return j

    def _positions(self, n: int) -> Callable[[Value], int]:
        """The position of a value: by bisection, or for a set of many intervals (a long IN
        list, a large public domain) by a dict made once per axis. Axis values are distinct
        and totally ordered, so equal values (1, 1.0, Decimal(1)) are one value either way."""
        if n < 64:
            return self._pos
        if self._index is None:
            self._index = {v: j for j, v in enumerate(self.values)}
        index = self._index

        def pos(v: Value) -> int:
            j = index.get(v)
            return self._pos(v) if j is None else j
        return pos

    def ranges(self, cs: ColumnSet) -> list[tuple[int, int]]:
        """The set as sorted, disjoint, non-adjacent ranges of atom indices."""
        out: list[tuple[int, int]] = [(0, 0)] if cs.null else []
        at = self._positions(len(cs.intervals))
        for iv in cs.intervals:
            lo = 1 if iv.lo is None else 2 * at(iv.lo) + (2 if iv.lo_closed else 3)
            hi = (
                self.size - 1
                if iv.hi is None
                else 2 * at(iv.hi) + (2 if iv.hi_closed else 1)
            )
            if lo > hi:
                continue
            if out and out[-1][1] + 1 >= lo:
                out[-1] = (out[-1][0], max(out[-1][1], hi))
            else:
                out.append((lo, hi))
        return out

    def merged(self, new: Iterable[Value]) -> tuple[_Axis, np.ndarray, np.ndarray] | None:
        """The axis with ``new`` endpoints added and old-to-new atom maps (lower, upper ends).

        Returns None when nothing is added. An old point maps to its new point; an old gap
        splits into a run of new atoms, whose first index maps range starts and last maps
        range ends, so a range of old atoms maps to the same set of values.
        """
        old = self.values
        known = set(old)
        added = [v for v in _sorted_values(new) if v not in known]
        if not added:
            return None
        # both lists are sorted: insert the new values in place of sorting everything again
        try:
            at = [bisect_left(old, a) for a in added]
        except TypeError as exc:  # a new value of another type than the column's
            raise _Unorderable from exc
        values: list[Value] = []
        prev = 0
        for a, i in zip(added, at):
            values.extend(old[prev:i])
            values.append(a)
            prev = i
        values.extend(old[prev:])
        axis = _Axis(values)
        n = len(old)
        ins = np.array(at, dtype=np.int64)
        pos = np.arange(n, dtype=np.int64) + np.cumsum(np.bincount(ins, minlength=n + 1))[:n]
        map_lo = np.empty(self.size, dtype=np.int64)
        map_hi = np.empty(self.size, dtype=np.int64)
        map_lo[0] = map_hi[0] = 0
        map_lo[2::2] = map_hi[2::2] = 2 * pos + 2
        map_lo[1] = 1
        map_lo[3::2] = 2 * pos + 3
        map_hi[1::2][:n] = 2 * pos + 1
        map_hi[-1] = axis.size - 1
        return axis, map_lo, map_hi

    def describe(self, column: str, atom: int) -> str:
        if atom == 0:
            return f"{column} IS NULL"
        j, odd = divmod(atom - 1, 2)
        if odd:
            return f"{column} = {self.values[j]!r}"
        lo = self.values[j - 1] if j > 0 else None
        hi = self.values[j] if j < len(self.values) else None
        if lo is None and hi is None:
            return f"{column} IS NOT NULL"
        if lo is None:
            return f"{column} < {hi!r}"
        if hi is None:
            return f"{column} > {lo!r}"
        return f"{lo!r} < {column} < {hi!r}"


@dataclass(frozen=True)
class _Mech:
    id: str
    wx: tuple[Fraction, ...]  # exact additive weights
    part: int  # 0: no partition, 1: keys are columns, 2: opaque keys
    keys: tuple[int, ...]  # instance column indices of the key columns (part == 1)
    max_groups: int | None
    full: bool  # region is the whole domain
    growth: int = 0  # index in GROWTHS: 0 flat, 1 linear, 2 square
    row_cap: int | None = None  # a unit's rows per group (partition), None: no limit


@dataclass
class _MechColumns:
    """Mechanisms restored from a checkpoint, as columns: a :class:`_Mech` is made only when
    one is read, and the specs are loaded (by the caller's loader) only when asked for."""

    ids: list[str]
    wx_idx: np.ndarray
    wx_table: list[tuple[Fraction, ...]]
    keys_idx: np.ndarray
    keys_table: list[tuple[int, ...]]
    max_groups: np.ndarray  # -1: no limit
    part: np.ndarray
    full: np.ndarray
    load_specs: Callable[[], Sequence[MechanismSpec]]
    made: dict[int, _Mech]
    growth: np.ndarray
    row_cap: np.ndarray  # -1: no limit
    loaded: list[MechanismSpec] | None = None
    id_objects: np.ndarray | None = None

    def get(self, i: int) -> _Mech:
        m = self.made.get(i)
        if m is None:
            g, c = int(self.max_groups[i]), int(self.row_cap[i])
            m = self.made[i] = _Mech(
                self.ids[i], self.wx_table[int(self.wx_idx[i])], int(self.part[i]),
                self.keys_table[int(self.keys_idx[i])], None if g < 0 else g, bool(self.full[i]),
                int(self.growth[i]), None if c < 0 else c)
        return m

    def id_array(self) -> np.ndarray:
        """The ids as an array of objects (indexed many at a time to name witnesses)."""
        if self.id_objects is None:
            self.id_objects = np.array(self.ids, dtype=object)
        return self.id_objects

    def specs(self) -> list[MechanismSpec]:
        if self.loaded is None:
            specs = list(self.load_specs())
            if [m.id for m in specs] != self.ids:
                raise InternalError("the specs loaded for a restored solver are not the "
                                    "mechanisms it was saved with")
            self.loaded = specs
        return self.loaded


class _Mechs:
    """An instance's mechanisms in admission order, immutable; :meth:`plus` shares the old part.

    A restored solver's first mechanisms are a :class:`_MechColumns` (read lazily); the ones
    admitted since are plain :class:`_Mech` with their specs."""

    __slots__ = ("_base", "_n0", "_tail", "_tail_specs")

    def __init__(self, base: _MechColumns | None, tail: tuple[_Mech, ...],
                 tail_specs: tuple[MechanismSpec, ...]) -> None:
        self._base = base
        self._n0 = len(base.ids) if base is not None else 0
        self._tail = tail
        self._tail_specs = tail_specs

    @classmethod
    def empty(cls) -> _Mechs:
        return cls(None, (), ())

    def __len__(self) -> int:
        return self._n0 + len(self._tail)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, i: int | np.integer[Any]) -> _Mech:
        if i < self._n0:
            assert self._base is not None
            return self._base.get(int(i))
        return self._tail[i - self._n0]

    def __iter__(self) -> Iterator[_Mech]:
        for i in range(self._n0):
            assert self._base is not None
            yield self._base.get(i)
        yield from self._tail

    def ids(self, indices: Iterable[int]) -> tuple[str, ...]:
        """The ids of the mechanisms at ``indices`` (without making restored ones)."""
        idx = np.asarray(indices, dtype=np.int64)
        if self._base is None or not idx.size:
            return tuple(self._tail[i].id for i in idx.tolist())
        base = self._base.id_array()
        n0, tail = self._n0, self._tail
        head = base[idx[idx < n0]].tolist()
        return (*head, *(tail[i - n0].id for i in idx[idx >= n0].tolist()))

    def key_columns(self, indices: Sequence[int]) -> set[int]:
        """The key columns of the mechanisms at ``indices`` (without making restored ones)."""
        idx = np.asarray(indices, dtype=np.int64)
        out: set[int] = set()
        if self._base is not None:
            head = idx[idx < self._n0]
            for k in np.unique(self._base.keys_idx[head]).tolist():
                out.update(self._base.keys_table[k])
        for i in idx[idx >= self._n0].tolist():
            out.update(self._tail[i - self._n0].keys)
        return out

    def plus(self, added: Sequence[_Mech], specs: Sequence[MechanismSpec]) -> _Mechs:
        return _Mechs(self._base, self._tail + tuple(added), self._tail_specs + tuple(specs))

    def specs(self) -> list[MechanismSpec]:
        head = self._base.specs() if self._base is not None else []
        return [*head, *self._tail_specs]

    def columns(self) -> tuple[list[str], list[int], list[tuple[Fraction, ...]], list[int],
                               list[tuple[int, ...]], dict[str, list[int]]]:
        """ids, weight-tuple index, weight tuples, key-tuple index, key tuples, and the ints per
        mechanism of :data:`_PER_MECH` (-1: no limit): the columnar form a checkpoint stores."""
        wx_table: dict[tuple[Fraction, ...], int] = {}
        keys_table: dict[tuple[int, ...], int] = {}
        ids: list[str] = []
        wx_idx: list[int] = []
        keys_idx: list[int] = []
        per: dict[str, list[int]] = {name: [] for name in _PER_MECH}
        b = self._base
        if b is not None:
            wx_table = {w: i for i, w in enumerate(b.wx_table)}
            keys_table = {k: i for i, k in enumerate(b.keys_table)}
            ids.extend(b.ids)
            wx_idx.extend(b.wx_idx.tolist())
            keys_idx.extend(b.keys_idx.tolist())
            per["max_groups"].extend(b.max_groups.tolist())
            per["growth"].extend(b.growth.tolist())
            per["row_cap"].extend(b.row_cap.tolist())
        for m in self._tail:
            ids.append(m.id)
            wx_idx.append(wx_table.setdefault(m.wx, len(wx_table)))
            keys_idx.append(keys_table.setdefault(m.keys, len(keys_table)))
            per["max_groups"].append(-1 if m.max_groups is None else m.max_groups)
            per["growth"].append(m.growth)
            per["row_cap"].append(-1 if m.row_cap is None else m.row_cap)
        return ids, wx_idx, list(wx_table), keys_idx, list(keys_table), per


@dataclass(frozen=True)
class _Scale:
    """How one weight coordinate is searched in floats.

    ``denom`` set: every weight times ``denom`` is an integer and their sum is below 2**50, so
    float sums are exact and ties can be pruned. Otherwise floats carry a relative error far
    below ``tol`` and near-ties are re-evaluated exactly.
    """

    denom: int | None
    total: int  # sum of the scaled numerators (exact mode) else 0
    tol: float

    def above(self, x: float) -> float:
        """Threshold for "may beat x": strictly more (exact mode) or within tolerance."""
        return x + 0.5 if self.denom is not None else x - self.tol

    def keep(self, v: float, best: float) -> bool:
        return v >= best - 0.5 if self.denom is not None else v >= best - self.tol

    def to_float(self, x: Fraction) -> float:
        return float(x * self.denom) if self.denom is not None else float(x)

    def exact(self, v: float) -> Fraction:
        if self.denom is None:
            raise InternalError("float value without an exact scale")
        return Fraction(round(v), self.denom)

    def upper(self, v: float) -> Fraction:
        """An exact number >= the true value of a float bound."""
        if self.denom is not None:
            return Fraction(math.ceil(v - 0.25), self.denom)
        return Fraction(v) + Fraction(self.tol)


def _make_scale(wx: Sequence[Fraction], n_rows: int, headroom: int) -> tuple[_Scale, np.ndarray]:
    """Exact-integer scale when the weights allow (sums of up to ``headroom`` x the total stay
    below 2**53, e.g. a replace pair or a unit of k rows), else floats with a tolerance."""
    denom = 1
    for x in wx:
        denom = denom * x.denominator // math.gcd(denom, x.denominator)
        if denom > _EXACT_INT_LIMIT:
            break
    if denom <= _EXACT_INT_LIMIT:
        nums = [x.numerator * (denom // x.denominator) for x in wx]
        total = sum(nums)
        if total * headroom < _EXACT_INT_LIMIT:
            return _Scale(denom, total, 0.0), np.array(nums, dtype=np.float64)
    wf = np.array([float(x) for x in wx], dtype=np.float64)
    return _Scale(None, 0, _tolerance(wf, n_rows, headroom)), wf


def _tolerance(wf: np.ndarray, n_rows: int, headroom: int) -> float:
    rel = max(4e-9, 64.0 * headroom * (n_rows + 16) * 2.0**-53)
    return rel * float(wf.sum()) + 1e-300


def _extend_scale(
    sc: _Scale,
    wf: np.ndarray,
    wx_all: Callable[[], Sequence[Fraction]],
    new: Sequence[Fraction],
    n_rows: int,
    headroom: int,
) -> tuple[_Scale, np.ndarray]:
    """The scale with ``new`` weights appended; rescales in place of a full rebuild when exact.

    Float weights stay floats as weights are added (the common denominator and the total only
    grow), so their floats are appended: the same array :func:`_make_scale` would build.
    """
    if sc.denom is None:
        out = np.concatenate((wf, np.array([float(x) for x in new], dtype=np.float64)))
        return _Scale(None, 0, _tolerance(out, n_rows, headroom)), out
    denom = sc.denom
    for x in new:
        denom = denom * x.denominator // math.gcd(denom, x.denominator)
    if denom <= _EXACT_INT_LIMIT:
        factor = denom // sc.denom
        nums = [x.numerator * (denom // x.denominator) for x in new]
        total = sc.total * factor + sum(nums)
        if total * headroom < _EXACT_INT_LIMIT:
            out = np.concatenate((wf * factor, np.array(nums, dtype=np.float64)))
            return _Scale(denom, total, 0.0), out
    return _make_scale(wx_all(), n_rows, headroom)


def _subtract(p: Cell2, r: Cell2) -> list[Cell2]:
    """Box difference p \\ r on atom-index ranges: at most 2 pieces per column, disjoint."""
    if any(a[1] < b[0] or b[1] < a[0] for a, b in zip(p, r)):
        return [p]
    out: list[Cell2] = []
    cur = list(p)
    for c, ((lo, hi), (rlo, rhi)) in enumerate(zip(p, r)):
        if lo < rlo:
            piece = list(cur)
            piece[c] = (lo, rlo - 1)
            out.append(tuple(piece))
            lo = rlo
        if hi > rhi:
            piece = list(cur)
            piece[c] = (rhi + 1, hi)
            out.append(tuple(piece))
            hi = rhi
        cur[c] = (lo, hi)
    return out


Cell2 = tuple[tuple[int, int], ...]  # a box of atom-index ranges, one (lo, hi) per column


def _disjoint(rows: Iterable[Cell2]) -> list[Cell2]:
    """Disjoint boxes with the same union."""
    out: list[Cell2] = []
    for b in rows:
        pieces = [b]
        for r in out:
            pieces = [q for p in pieces for q in _subtract(p, r)]
            if not pieces:
                break
        out.extend(pieces)
    return out


class _Instance:
    """One table's mechanisms as disjoint boxes of atom-index ranges (immutable)."""

    columns: tuple[str, ...]
    col_index: dict[str, int]
    axes: tuple[_Axis, ...]
    poisoned: frozenset[str]
    mechs: _Mechs
    part: np.ndarray
    full: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    row_mech: np.ndarray
    scales: tuple[_Scale, ...]
    wf: np.ndarray  # (mechanisms, coordinates) search weights
    narrow: np.ndarray  # per column: how many rows constrain it (orders row filtering)
    cell_maps: tuple[tuple[np.ndarray | None, ...], int]  # from the instance this extended
    headroom: int  # largest multiple of the total weight a search value can reach
    widened: bool
    notes: tuple[str, ...]

    @classmethod
    def empty(cls, q: int, headroom: int, poisoned: frozenset[str] = frozenset()) -> _Instance:
        inst = object.__new__(cls)
        inst.headroom = headroom
        inst.columns, inst.col_index, inst.axes, inst.poisoned = (), {}, (), poisoned
        inst.mechs = _Mechs.empty()
        inst.part = np.zeros(0, dtype=np.int8)
        inst.full = np.zeros(0, dtype=bool)
        inst.lo = np.zeros((0, 0), dtype=np.int64)
        inst.hi = np.zeros((0, 0), dtype=np.int64)
        inst.row_mech = np.zeros(0, dtype=np.int64)
        inst.scales = tuple(_Scale(1, 0, 0.0) for _ in range(q))
        inst.wf = np.zeros((0, q), dtype=np.float64)
        inst.narrow = np.zeros(0, dtype=np.int64)
        inst.widened, inst.notes = False, ()
        inst.cell_maps = ((), 0)
        return inst

    def remap(self, cell: Cell) -> Cell:
        """A cell of the instance this one extended, in this one's atoms (same old hits).

        Old columns map through the atom maps of the extension; new columns, which no old
        region constrains, get their first open atom.
        """
        maps, added = self.cell_maps
        moved = tuple(int(m[a]) if m is not None else a for a, m in zip(cell, maps))
        return moved + (1,) * added

    @property
    def sizes(self) -> np.ndarray:
        return np.array([a.size for a in self.axes], dtype=np.int64)

    def full_box(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(len(self.axes), dtype=np.int64), self.sizes - 1

    def full_box_tuple(self) -> Cell2:
        return tuple((0, a.size - 1) for a in self.axes)

    # -- building ------------------------------------------------------------------------------
    def extend(self, specs: Sequence[MechanismSpec]) -> tuple[_Instance, bool, list[Cell2]]:
        """A new instance with ``specs`` added, whether old rows changed, and the new rows.

        Old rows change only when a column becomes unorderable: its constraints are dropped
        everywhere (regions grow), so the caller must search from scratch.
        """
        poisoned = self.poisoned
        while True:
            try:
                inst, new_rows = self._extend(specs, poisoned)
            except _UnorderableColumn as bad:
                poisoned = poisoned | {bad.column}
                continue
            return inst, poisoned != self.poisoned and bool(self.mechs), new_rows

    def specs(self) -> list[MechanismSpec]:
        return self.mechs.specs()

    def _extend(
        self, specs: Sequence[MechanismSpec], poisoned: frozenset[str]
    ) -> tuple[_Instance, list[Cell2]]:
        if poisoned != self.poisoned:
            return _Instance.empty(len(self.scales), self.headroom, poisoned)._extend(
                [*self.specs(), *specs], poisoned
            )
        new_values: dict[str, list[Value]] = {}
        seen_regions: set[int] = set()  # specs of one query often share one region object
        for m in specs:
            if id(m.region) not in seen_regions:
                seen_regions.add(id(m.region))
                for box in m.region.boxes:
                    for col, cs in box.constraints:
                        if col in poisoned:
                            continue
                        vals = new_values.setdefault(col, [])
                        for iv in cs.intervals:
                            if iv.lo is not None:
                                vals.append(iv.lo)
                            if iv.hi is not None:
                                vals.append(iv.hi)
            if m.partition is not None and m.partition.key_columns is not None:
                for col in m.partition.key_columns:
                    if col not in poisoned:
                        new_values.setdefault(col, [])
        columns = list(self.columns)
        axes = list(self.axes)
        remaps: list[tuple[int, np.ndarray, np.ndarray]] = []  # old columns whose atoms moved
        cell_maps: list[np.ndarray | None] = [None] * len(columns)
        new_tops: list[int] = []  # last atom of each new column
        for col, vals in new_values.items():
            if col in self.col_index:
                c = self.col_index[col]
                try:
                    merged = axes[c].merged(vals)
                except _Unorderable:
                    raise _UnorderableColumn(col) from None
                if merged is not None:
                    axes[c], map_lo, map_hi = merged
                    remaps.append((c, map_lo, map_hi))
                    cell_maps[c] = map_lo  # an old gap's first new atom is a gap too
            else:
                try:
                    axis = _Axis(_sorted_values(vals))
                except _Unorderable:
                    raise _UnorderableColumn(col) from None
                columns.append(col)
                axes.append(axis)
                new_tops.append(axis.size - 1)
        inst = object.__new__(_Instance)
        inst.headroom = self.headroom
        inst.columns = tuple(columns)
        inst.col_index = {c: i for i, c in enumerate(columns)}
        inst.axes = tuple(axes)
        inst.poisoned = poisoned
        inst.cell_maps = (tuple(cell_maps), len(columns) - len(self.columns))
        notes = list(self.notes)
        widened = self.widened
        new_rows: list[Cell2] = []
        new_row_mech: list[int] = []
        added: list[_Mech] = []
        region_rows: dict[int, tuple[list[Cell2], bool]] = {}
        for m in specs:
            idx = len(self.mechs) + len(added)
            got = region_rows.get(id(m.region))
            if got is None:
                got = region_rows[id(m.region)] = inst._rows_of(m.region)
            rows, wide = got
            if wide:
                widened = True
                notes.append(f"{m.id}: long IN-lists were replaced by their range")
            if poisoned and any(c in poisoned for b in m.region.boxes for c in b.columns):
                widened = True
                notes.append(f"{m.id}: constraints on unorderable columns were dropped")
            new_rows.extend(rows)
            new_row_mech.extend([idx] * len(rows))
            added.append(inst._mech_of(m, rows))
        d = len(columns)
        narrow = np.concatenate((self.narrow, np.zeros(len(new_tops), dtype=np.int64)))
        arr = np.zeros((0, d, 2), dtype=np.int64)
        if new_rows:
            flat = chain.from_iterable(chain.from_iterable(new_rows))
            arr = np.fromiter(flat, dtype=np.int64, count=2 * d * len(new_rows))
            arr = arr.reshape(len(new_rows), d, 2)
            narrow = narrow + ((arr[:, :, 0] > 0) | (arr[:, :, 1] < inst.sizes - 1)).sum(axis=0)
        inst.lo, inst.hi = lo, _ = self._grown(arr, remaps, new_tops)
        inst.narrow = narrow
        inst.row_mech = np.concatenate((self.row_mech, np.array(new_row_mech, dtype=np.int64)))
        inst.mechs = mechs = self.mechs.plus(added, specs)
        inst.part = np.concatenate((self.part, np.array([m.part for m in added], dtype=np.int8)))
        inst.full = np.concatenate((self.full, np.array([m.full for m in added], dtype=bool)))
        inst.widened, inst.notes = widened, tuple(dict.fromkeys(notes))
        scales, cols = [], []
        n_rows = lo.shape[0]
        for j, sc in enumerate(self.scales):
            s, w = _extend_scale(
                sc,
                self.wf[:, j],
                lambda j=j: [m.wx[j] for m in mechs],
                [m.wx[j] for m in added],
                n_rows,
                self.headroom,
            )
            scales.append(s)
            cols.append(w)
        inst.scales = tuple(scales)
        inst.wf = np.stack(cols, axis=1) if cols else np.zeros((len(mechs), 0))
        return inst, new_rows

    def _grown(self, arr: np.ndarray, remaps: Sequence[tuple[int, np.ndarray, np.ndarray]],
               new_tops: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``lo``/``hi`` of the extended instance, made in one allocation: the old rows with
        their moved atoms remapped and the new columns spanning all their atoms (no old region
        constrains them), then the new rows ``arr``. The old instance keeps its own arrays."""
        if not remaps and not new_tops and not arr.shape[0]:
            return self.lo, self.hi
        n, d_old = self.lo.shape
        d = d_old + len(new_tops)
        out = []
        for old, side, fill in ((self.lo, 0, np.zeros(len(new_tops), dtype=np.int64)),
                                (self.hi, 1, np.array(new_tops, dtype=np.int64))):
            a = np.empty((n + arr.shape[0], d), dtype=np.int64)
            a[:n, :d_old] = old
            for c, map_lo, map_hi in remaps:
                a[:n, c] = (map_lo if side == 0 else map_hi)[old[:, c]]
            a[:n, d_old:] = fill
            a[n:] = arr[:, :, side]
            out.append(a)
        return out[0], out[1]

    def _rows_of(self, region: Region) -> tuple[list[Cell2], bool]:
        """Disjoint atom-index boxes whose union is the region (or a superset: flag True)."""
        rows: list[Cell2] = []
        wide = False
        free = [[(0, axis.size - 1)] for axis in self.axes]
        for box in region.boxes:
            per_col = list(free)  # a column the box does not constrain (or unorderable): all
            seen: set[int] = set()
            for col, cs in box.constraints:
                c = self.col_index.get(col)
                if c is None or c in seen:  # unorderable column; or a repeat (the first counts)
                    continue
                seen.add(c)
                if not cs.is_full():
                    per_col[c] = self.axes[c].ranges(cs)
            if any(not rs for rs in per_col):
                continue
            while math.prod(len(rs) for rs in per_col) > _MAX_ROWS_PER_BOX:
                c = max(range(len(per_col)), key=lambda i: len(per_col[i]))
                per_col[c] = [(per_col[c][0][0], per_col[c][-1][1])]
                wide = True
            rows.extend(product(*per_col))
        if len(region.boxes) > 1:
            rows = _disjoint(rows)
        return rows, wide

    def _mech_of(self, m: MechanismSpec, rows: list[Cell2]) -> _Mech:
        full_row = self.full_box_tuple()
        full = any(r == full_row for r in rows)
        p = m.partition
        growth = GROWTHS.index(m.growth)
        wx = tuple(m.cost.weights())  # type: ignore[attr-defined]
        if p is None:
            return _Mech(m.id, wx, 0, (), None, full, growth)
        cap = p.max_rows_per_group
        if p.key_columns is None or any(c in self.poisoned for c in p.key_columns):
            return _Mech(m.id, wx, 2, (), p.max_groups_per_unit, full, growth, cap)
        keys = tuple(sorted({self.col_index[c] for c in p.key_columns}))
        return _Mech(m.id, wx, 1, keys, p.max_groups_per_unit, full, growth, cap)

    # -- evaluation ----------------------------------------------------------------------------
    def _order(self, cols: Iterable[int]) -> list[int]:
        """Columns to filter rows on, most often constrained first (rows drop out soonest)."""
        return sorted(cols, key=lambda c: -int(self.narrow[c]))

    def rows_meeting(self, lo_box: np.ndarray, hi_box: np.ndarray,
                     within: np.ndarray | None = None) -> np.ndarray | None:
        """Indices (ascending) of the rows meeting a box; None when it is the whole domain.

        Only the columns the box constrains are tested, one at a time on the rows still in,
        starting with the column most rows constrain: the same rows as testing every column
        of every row, in a fraction of the work when the box is narrow.
        """
        top = self.sizes - 1
        cols = [c for c in range(len(self.axes)) if lo_box[c] > 0 or hi_box[c] < top[c]]
        if not cols:
            return within
        idx: np.ndarray | None = within  # (rows known to contain every row meeting the box)
        for c in self._order(cols):
            a, b = int(lo_box[c]), int(hi_box[c])
            if idx is None:
                idx = np.flatnonzero((self.lo[:, c] <= b) & (self.hi[:, c] >= a))
            else:
                idx = idx[(self.lo[idx, c] <= b) & (self.hi[idx, c] >= a)]
            if not idx.size:
                break
        assert idx is not None
        return idx

    def hit_mask(self, cell: Cell) -> np.ndarray:
        """Which mechanisms' regions hold the records of ``cell`` (bool per mechanism)."""
        out = np.zeros(len(self.mechs), dtype=bool)
        if len(self.mechs):
            c = np.asarray(cell, dtype=np.int64)
            rows = self.rows_meeting(c, c)
            out[self.row_mech if rows is None else self.row_mech[rows]] = True
        return out

    def forced_same(self, i: int, a: Cell, b: Cell) -> bool:
        """Must records in cells a and b fall in the same group of partition i (Cor IV.13)?

        Only when the keys are columns, a and b share the atom of every key column, and each of
        those atoms is a single value (even index). Opaque keys can always differ.
        """
        m = self.mechs[i]
        if m.part != 1:
            return False
        return all(a[k] == b[k] and a[k] % 2 == 0 for k in m.keys)


class _UnorderableColumn(Exception):
    def __init__(self, column: str) -> None:
        super().__init__(column)
        self.column = column


# ============================================================================== branch and bound


class _Budget:
    """Search work left (nodes, weighted by their size); at zero, searches return bounds."""

    __slots__ = ("left",)

    def __init__(self, n: int) -> None:
        self.left = n

    def take(self, cost: int = 1) -> bool:
        if self.left <= 0:
            return False
        self.left -= cost
        return True


def _sparse(rows: int, atoms: int) -> bool:
    """Sweep only the atoms where one of ``rows`` rows starts or ends, not all ``atoms``?

    Both ways give the same floats (see :func:`_sweep`); this only picks the cheaper.
    """
    return 4 * rows + 64 < atoms


def _sweep(
    lo_c: np.ndarray, hi_c: np.ndarray, w: np.ndarray, lo_box: int, hi_box: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """1-D sweep on one column: the maximal runs of atoms of [lo_box, hi_box] covered by the
    same rows, as (starts, ends, weight of the rows covering the run).

    Rows must lie within the box on this column (the search keeps them so). The weight is a
    running sum of row starts minus row ends over the atoms, which changes only where a row
    starts or ends. When those atoms are few next to the column's, the sum runs over them
    alone: the atoms skipped add exact zeros, so the floats are the same either way.
    """
    size = hi_box - lo_box + 1
    a = lo_c - lo_box
    b = hi_c - lo_box + 1  # one past the row's last atom
    if not _sparse(a.size, size):
        diff = np.bincount(a, w, minlength=size + 1)
        diff -= np.bincount(b, w, minlength=size + 1)
        prof = np.cumsum(diff[:size])
        events = np.bincount(a, minlength=size + 1)[:size]
        events += np.bincount(b, minlength=size + 1)[:size]
        events[0] = 1
        starts = np.flatnonzero(events)
        weights = prof[starts]
    else:
        starts = np.unique(np.concatenate((a, b, np.zeros(1, dtype=a.dtype))))
        starts = starts[starts < size]
        n = starts.size
        diff = np.bincount(np.searchsorted(starts, a), w, minlength=n + 1)
        diff -= np.bincount(np.searchsorted(starts, b), w, minlength=n + 1)
        weights = np.cumsum(diff[:n])
    ends = np.append(starts[1:] - 1, size - 1)
    return starts + lo_box, ends + lo_box, weights


_GRID_LIMIT = 1 << 21  # cells of one 2-D sweep


def _child_maxima(
    lo: np.ndarray,
    hi: np.ndarray,
    w: np.ndarray,
    c: int,
    starts: np.ndarray,
    c2: int,
    lo_box: np.ndarray,
    hi_box: np.ndarray,
) -> np.ndarray:
    """For runs of column c (given by sorted-or-not starts), the 1-D maximum on column c2.

    A 2-D sweep (difference grid over run x atom) of the rows: each child's max on c2 is a
    valid bound for it (a cell weighs no more than its run on c2). Falls back to +inf (no
    tightening) when the grid would be too large. When few atoms of c2 start or end a row,
    the grid keeps only those: every other atom repeats its left neighbour's sums (exact
    zeros are added), or is 0 before the first, so the maxima are the same floats.
    """
    order = np.argsort(starts)
    s_sorted = starts[order]
    n_runs = len(starts)
    size = int(hi_box[c2] - lo_box[c2] + 1)
    if (n_runs + 1) * (size + 1) > _GRID_LIMIT:
        return np.full(n_runs, np.inf)
    r_lo = np.searchsorted(s_sorted, lo[:, c], side="left")
    r_hi = np.searchsorted(s_sorted, hi[:, c], side="right")  # exclusive
    keep = r_lo < r_hi
    r_lo, r_hi, ww = r_lo[keep], r_hi[keep], w[keep]
    a_lo = lo[keep, c2] - lo_box[c2]
    a_hi = hi[keep, c2] - lo_box[c2] + 1  # exclusive
    atoms, zero_lead = size, False  # grid columns whose maximum counts; a 0 column before them
    if _sparse(a_lo.size, size):
        pts = np.unique(np.concatenate((a_lo, a_hi)))
        zero_lead = not pts.size or bool(pts[0] > 0)
        a_lo, a_hi = np.searchsorted(pts, a_lo), np.searchsorted(pts, a_hi)
        atoms, size = int(np.searchsorted(pts, size)), pts.size
    width = size + 1
    grid = np.bincount(r_lo * width + a_lo, ww, minlength=(n_runs + 1) * width)
    grid -= np.bincount(r_lo * width + a_hi, ww, minlength=(n_runs + 1) * width)
    grid -= np.bincount(r_hi * width + a_lo, ww, minlength=(n_runs + 1) * width)
    grid += np.bincount(r_hi * width + a_hi, ww, minlength=(n_runs + 1) * width)
    grid = grid.reshape(n_runs + 1, width)
    np.cumsum(grid, axis=0, out=grid)
    np.cumsum(grid, axis=1, out=grid)
    maxima = grid[:n_runs, :atoms].max(axis=1) if atoms else np.zeros(n_runs)
    if zero_lead:
        maxima = np.maximum(maxima, 0.0)
    out = np.empty(n_runs)
    out[order] = maxima
    return out


def _rep(lo_box: np.ndarray, hi_box: np.ndarray) -> Cell:
    """One atom per column of a box, preferring an open (many-valued) atom where there is one."""
    return tuple(
        int(s) if s == e or s % 2 == 1 else int(s) + 1
        for s, e in zip(lo_box.tolist(), hi_box.tolist())
    )


Leaf = Callable[[float, np.ndarray, np.ndarray], None]


def _bb(
    lo: np.ndarray,
    hi: np.ndarray,
    w: np.ndarray,
    lo_box: np.ndarray,
    hi_box: np.ndarray,
    eligible: np.ndarray,
    thr: Callable[[], float],
    leaf: Leaf,
    budget: _Budget,
    tags: np.ndarray | None = None,
    floor: Callable[[np.ndarray], float] | None = None,
) -> float:
    """Branch and bound for the heaviest cells of weighted boxes inside one search box.

    ``lo``/``hi`` are rows inside the box (one per region piece, weight ``w``); rows of one
    mechanism are disjoint, so a cell's weight is the sum of the rows holding it. The search
    cuts ``eligible`` columns into runs; ``leaf(value, box)`` is called for every box uniform on
    the eligible columns whose value reaches ``thr()`` (read afresh, as the caller raises it).
    A node's bound is the smallest over columns of its 1-D sweep maximum: a cell's weight never
    exceeds the weight of its run on any column. With ``floor``, a node also needs
    ``floor(tags of the rows covering all of it)``: callers pass a threshold that only grows
    with that set (and depends on nothing else), so it holds for the whole subtree. Returns
    the largest bound of the nodes the budget cut off (-inf if none), a proven bound on what
    was not searched.

    A row covering a node covers its whole subtree, so a node hands its children only its
    partial rows and carries the covering ones as a count, their tags and their weight. That
    weight is their sum in row order, as summing the node's rows would give: a running total
    when the weights are integers (exact in any order), else summed again from the covering
    rows' indices in row order, so every float the search compares is the same.
    """
    exact_sums = bool(np.all(w == np.floor(w))) and float(np.abs(w).sum()) < 2.0**53
    w_all = w
    everywhere = bool(eligible.all())
    no_tags = np.zeros(0, dtype=np.int64)

    def node(
        lo: np.ndarray,
        hi: np.ndarray,
        w: np.ndarray,
        ridx: np.ndarray | None,  # row indices (float weights only)
        tags: np.ndarray | None,
        lo_box: np.ndarray,
        hi_box: np.ndarray,
        n_cov: int,  # rows covering the node, carried from above
        cov_sum: float,  # their weight (integer weights)
        cov_idx: np.ndarray,  # their indices, ascending (float weights)
        cov_tags: list[np.ndarray],
    ) -> float:
        partial = (lo > lo_box) | (hi < hi_box)
        if not everywhere:
            partial &= eligible
        prow = partial.any(axis=1)
        covering = ~prow
        if covering.any():
            n_cov += int(np.count_nonzero(covering))
            if ridx is None:
                cov_sum += float(w[covering].sum())
            else:
                cov_idx = np.sort(np.concatenate((cov_idx, ridx[covering])))
            if tags is not None:
                cov_tags = [*cov_tags, tags[covering]]
        cert = cov_sum if ridx is None else float(w_all[cov_idx].sum())
        extra = _NEG_INF
        if floor is not None and tags is not None:
            extra = floor(np.concatenate(cov_tags) if cov_tags else no_tags)

        def t() -> float:
            return max(thr(), extra)

        if not prow.any():
            if cert >= t():
                leaf(cert, lo_box, hi_box)
            return _NEG_INF
        lp, hp, wp = lo[prow], hi[prow], w[prow]
        rp = None if ridx is None else ridx[prow]
        tp = None if tags is None else tags[prow]
        cols = np.flatnonzero(partial[prow].any(axis=0)).tolist()
        threshold = t() - cert
        chosen: tuple[int, float, int, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        bound = math.inf
        for c in cols:
            runs = _sweep(lp[:, c], hp[:, c], wp, int(lo_box[c]), int(hi_box[c]))
            mx = float(runs[2].max())
            bound = min(bound, mx)
            if mx < threshold:
                return _NEG_INF
            width = int((runs[1] - runs[0] + 1)[runs[2] >= threshold].sum())  # branching, roughly
            if chosen is None or (width, mx) < (chosen[0], chosen[1]):
                chosen = (width, mx, c, runs)
        assert chosen is not None
        _, _, c, (st, en, va) = chosen
        bound += cert
        if not budget.take(1 + (n_cov + lp.shape[0]) // 2048):  # work grows with the rows swept
            return bound
        va = va + cert
        last = len(cols) == 1
        if not last:  # tighten every child's bound at once: its 1-D maxima on the other columns
            alive = np.flatnonzero(va >= t())
            if alive.size > 4:
                for c2 in cols:
                    if c2 != c:
                        va[alive] = np.minimum(
                            va[alive],
                            cert + _child_maxima(lp, hp, wp, c, st[alive], c2, lo_box, hi_box),
                        )
        order = np.argsort(-va, kind="stable").tolist()
        opened = _NEG_INF
        lc, hc = lp[:, c], hp[:, c]
        for r in order:
            v = float(va[r])
            if v < t():
                break
            lo2, hi2 = lo_box.copy(), hi_box.copy()
            lo2[c], hi2[c] = st[r], en[r]
            if last:
                leaf(v, lo2, hi2)
                continue
            if not budget.take():  # every call costs: most are pruned after their sweeps
                opened = max(opened, v)
                break
            m = (lc <= st[r]) & (hc >= st[r])  # the partial rows meeting the run (all of it)
            opened = max(
                opened,
                node(
                    lp[m],
                    hp[m],
                    wp[m],
                    None if rp is None else rp[m],
                    None if tp is None else tp[m],
                    lo2,
                    hi2,
                    n_cov,
                    cert,
                    cov_idx,
                    cov_tags,
                ),
            )
        return opened

    return node(
        lo,
        hi,
        w,
        None if exact_sums else np.arange(w.size),
        tags,
        lo_box,
        hi_box,
        0,
        0.0,
        np.zeros(0, dtype=np.int64),
        [],
    )


def _meeting(
    inst: _Instance, box: Cell2, within: np.ndarray | None = None
) -> tuple[np.ndarray | slice, np.ndarray, np.ndarray, np.ndarray]:
    """Rows meeting ``box`` (an index), clipped to it; and the box as arrays. ``within``: rows
    known to include every row meeting the box (those meeting a box around it)."""
    lo_box = np.array([b[0] for b in box], dtype=np.int64)
    hi_box = np.array([b[1] for b in box], dtype=np.int64)
    m = inst.rows_meeting(lo_box, hi_box, within)
    if m is None:  # the whole domain: every row, already inside it
        return slice(None), inst.lo, inst.hi, np.stack((lo_box, hi_box))
    lo = np.maximum(inst.lo[m], lo_box)
    hi = np.minimum(inst.hi[m], hi_box)
    return m, lo, hi, np.stack((lo_box, hi_box))


def _rows_around(inst: _Instance, domains: Sequence[Cell2]) -> np.ndarray | None:
    """For several domains (an admission of many regions), the rows meeting the box around
    them all: each domain's rows are then found among these, not among every row."""
    if len(domains) < 2:
        return None
    lo = np.array([min(d[c][0] for d in domains) for c in range(len(inst.axes))], dtype=np.int64)
    hi = np.array([max(d[c][1] for d in domains) for c in range(len(inst.axes))], dtype=np.int64)
    return inst.rows_meeting(lo, hi)


# ============================================================================== add/remove, k = 1


def _max_cell(
    inst: _Instance, j: int, domains: Sequence[Cell2], prev: _Best | None, budget: _Budget
) -> _Best:
    """max over records x in the domains of sum{c_i : x in R_i}, with the previous best.

    Add/remove with one row per unit: adding or removing x changes exactly the mechanisms whose
    region holds x (CSF'24 Thm IV.11); a GROUP BY changes one group (Thm IV.12), so it counts
    once. Exact unless the budget ran out (then a proven bound, exact=False).
    """
    sc = inst.scales[j]
    if prev is None:
        prev = _Best(Fraction(0), True)
    if not inst.mechs or not inst.wf[:, j].any():
        return prev
    best = [sc.to_float(prev.value)]
    cands: list[tuple[float, Cell]] = []

    def thr() -> float:
        return sc.above(best[0])

    def leaf(v: float, lo_box: np.ndarray, hi_box: np.ndarray) -> None:
        best[0] = max(best[0], v)
        cands.append((v, _rep(lo_box, hi_box)))

    w_rows = inst.wf[inst.row_mech, j]
    everything = np.ones(len(inst.axes), dtype=bool)
    opened = _NEG_INF
    within = _rows_around(inst, domains)
    for dom in domains:
        m, lo, hi, box = _meeting(inst, dom, within)
        opened = max(opened, _bb(lo, hi, w_rows[m], box[0], box[1], everything, thr, leaf, budget))
    out = prev
    seen: set[bytes] = set()
    for v, cell in cands:
        if not sc.keep(v, best[0]):
            continue
        hits = inst.hit_mask(cell)
        key = hits.tobytes()
        if key in seen:
            continue
        seen.add(key)
        value = sum((inst.mechs[i].wx[j] for i in np.flatnonzero(hits)), Fraction(0))
        if sc.denom is not None and value != sc.exact(v):
            raise InternalError(f"max-cell search value {v} disagrees with exact {value}")
        if value > out.value:  # above the old best (even a bound): exact unless cut below
            out = _Best(value, True, (cell,))
    return _with_open(out, sc, opened)


def _with_open(best: _Best, sc: _Scale, opened: float) -> _Best:
    """Raise ``best`` to the bound of the nodes the search budget cut off, if any."""
    if opened == _NEG_INF:
        return best
    bound = sc.upper(opened)
    note = "the search limit was reached"
    if bound > best.value:
        return _Best(bound, False, best.cells, note)
    return best


# ============================================================================== replace, k = 1


def _max_pair(
    inst: _Instance,
    j: int,
    domains: Sequence[Cell2] | None,
    single: _Best,
    prev: _Best | None,
    budget: _Budget,
) -> _Best:
    """max over ordered pairs x != x' (x in the domains) of the weight of replacing x by x'.

    Replace (bounded DP) with one row per unit: the change affects {i : x in R_i or x' in R_i};
    a GROUP BY holding both pays two groups (c_g + c_h, Cor IV.13) unless x, x' must share the
    key (:meth:`_Instance.forced_same`); x' may lie in x's own cell (cells hold many records).
    So V(a, b) = w(a) + w(b) - S(a, b), S = plain mechanisms both hit + GROUP BYs both hit
    with a forced common key. Since S >= F (plain mechanisms over the whole domain) and
    w <= W* (the add/remove maximum), a pair beating ``best`` has both cells heavier than
    tau = best - W* + F: the search enumerates those cells (:func:`_bb` with threshold tau,
    rising as ``best`` does) and evaluates each new one against all earlier ones at once.
    With ``domains`` (incremental), one cell of the pair must lie in them: those cells are
    enumerated first, then partners anywhere. One cell per search leaf suffices: moving a
    cell within its leaf to an open atom only unpins keys, which never lowers V.
    """
    sc = inst.scales[j]
    if prev is None:
        prev = _Best(Fraction(0), True)
    if not inst.mechs or not inst.wf[:, j].any():
        return prev
    # V(a, b) <= w(a) + w(b) - F <= 2 W* - F: a bound that holds whatever is searched
    cap = 2 * single.value - sum(
        (inst.mechs[i].wx[j] for i in np.flatnonzero((inst.part == 0) & inst.full).tolist()),
        Fraction(0),
    )
    cap_note = "the search limit was reached; bounded by twice the heaviest record"
    if prev.value >= cap:  # already at the cap (totals never decrease): nothing to search
        return _Best(cap, prev.exact and prev.value == cap, prev.cells, prev.bound_note or cap_note)
    wf = inst.wf[:, j]
    w_star = sc.to_float(single.value) + (0.0 if sc.denom is not None else sc.tol)
    plain_full = float(wf[(inst.part == 0) & inst.full].sum())
    best0 = max(sc.to_float(prev.value), 0.0)
    pairs = _PairTable(inst, wf, sc, best0, w_star, plain_full, budget)
    everything = np.ones(len(inst.axes), dtype=bool)
    w_rows = wf[inst.row_mech]
    full_lo, full_hi = inst.full_box()
    opened = _NEG_INF

    plain = inst.part == 0
    full_plain = plain & inst.full

    # Partner bounds: every record of a search node hits the plain mechanisms C covering the
    # whole node, so its partner adds at most PB(C) = max_b sum{c_i : i not in C, b in R_i}.
    # C is cut down to a few heavy mechanisms (those of the heaviest record) so that PB is
    # computed (a max-cell search without C) for few sets; any subset of C gives a valid bound.
    tracked = full_plain.copy()
    if single.cells:
        heavy = np.flatnonzero(inst.hit_mask(single.cells[0]) & plain)
        tracked[heavy[np.argsort(-wf[heavy], kind="stable")][:_TRACKED]] = True
    partner_cache: dict[bytes, float] = {}

    def partner_bound(cert_tags: np.ndarray) -> float:
        dropped = np.zeros(len(inst.mechs), dtype=bool)
        dropped[cert_tags] = True
        dropped &= tracked
        dropped |= full_plain  # certain everywhere
        key = np.packbits(dropped).tobytes()
        if key not in partner_cache:
            if not (dropped & ~full_plain).any():
                partner_cache[key] = w_star - plain_full
            else:
                partner_cache[key] = _max_weight_bound(
                    inst, wf, sc, ~dropped[inst.row_mech], budget
                )
        return partner_cache[key]

    def a_floor(cert_tags: np.ndarray) -> float:  # w(a) + PB(C) must beat best
        return sc.above(pairs.best - partner_bound(cert_tags))

    def enumerate_cells(
        lo: np.ndarray,
        hi: np.ndarray,
        tags: np.ndarray,
        box: tuple[np.ndarray, np.ndarray],
        thr: Callable[[], float],
        floor: Callable[[np.ndarray], float],
        partner: float,
        keep: bool,
        pair: bool,
    ) -> None:
        """Cells above thr() and floor(); pair each with the table; a cut adds partner."""
        nonlocal opened

        def leaf(v: float, lb: np.ndarray, hb: np.ndarray) -> None:
            pairs.add(v, _rep(lb, hb), keep=keep, pair=pair)

        o = _bb(lo, hi, wf[tags], box[0], box[1], everything, thr, leaf, budget, tags, floor)
        if o != _NEG_INF:
            opened = max(opened, o + partner - plain_full)

    def tau() -> float:  # no pair with a cell this light beats best (partner <= W* - F)
        return sc.above(pairs.best - w_star + plain_full)

    rm = inst.row_mech
    if domains is None:
        if single.cells:  # a good first pair: the heaviest record and its best partner
            pairs.seed(single.cells[0], w_rows)
        # 1. heavy cells (> (best + F) / 2), every pair among them
        enumerate_cells(
            inst.lo,
            inst.hi,
            rm,
            (full_lo, full_hi),
            lambda: max(tau(), sc.above((pairs.best + plain_full) / 2)),
            a_floor,
            w_star,
            keep=True,
            pair=True,
        )
        # 2. lighter cells: a pair beating best needs a heavy partner, already in the table
        if pairs.size:
            enumerate_cells(
                inst.lo,
                inst.hi,
                rm,
                (full_lo, full_hi),
                tau,
                a_floor,
                w_star,
                keep=False,
                pair=True,
            )
    else:
        # 1. cells in the new regions heavy enough to be in a better pair
        for dom in domains:
            m, lo, hi, box = _meeting(inst, dom)
            enumerate_cells(
                lo, hi, rm[m], (box[0], box[1]), tau, a_floor, w_star, keep=True, pair=True
            )  # pairs inside them count: best rises
        # 2. their partners anywhere (pairs inside the new regions included); a partner in a
        # node whose covering plain mechanisms are C adds to a at most w(a) - (a's part of C)
        if pairs.size:
            top = pairs.max_weight()

            def b_floor(cert_tags: np.ndarray) -> float:
                common = np.zeros(len(inst.mechs), dtype=bool)
                common[cert_tags] = True
                common &= plain
                return sc.above(pairs.best - pairs.max_minus(common))

            enumerate_cells(
                inst.lo,
                inst.hi,
                rm,
                (full_lo, full_hi),
                lambda: sc.above(pairs.best - top + plain_full),
                b_floor,
                top,
                keep=False,
                pair=True,
            )
    opened = max(opened, pairs.opened)
    out = prev
    done: set[tuple[Cell, Cell]] = set()
    for v, a, b in pairs.cands:
        if not sc.keep(v, pairs.best) or (a, b) in done:
            continue
        done.add((a, b))
        value = _pair_value(inst, j, a, b)
        if sc.denom is not None and value != sc.exact(v):
            raise InternalError(f"pair search value {v} disagrees with exact {value}")
        if value > out.value:  # W* only prunes: an over-estimate of it costs time, not truth
            out = _Best(value, True, (a, b))
    out = _with_open(out, sc, opened)
    if cap < out.value:
        out = _Best(cap, False, out.cells, cap_note)
    return out


_TRACKED = 8  # heavy mechanisms whose coverage the replace search uses in partner bounds


def _max_weight_bound(
    inst: _Instance, wf: np.ndarray, sc: _Scale, rows: np.ndarray, budget: _Budget
) -> float:
    """An upper bound (float, safe in both scales) on the heaviest cell of the given rows."""
    best = [0.0]

    def leaf(v: float, lb: np.ndarray, hb: np.ndarray) -> None:
        best[0] = max(best[0], v)

    lo_box, hi_box = inst.full_box()
    everything = np.ones(len(inst.axes), dtype=bool)
    o = _bb(
        inst.lo[rows],
        inst.hi[rows],
        wf[inst.row_mech[rows]],
        lo_box,
        hi_box,
        everything,
        lambda: sc.above(best[0]),
        leaf,
        budget,
    )
    return max(best[0], o) + (0.0 if sc.denom is not None else sc.tol)


class _PairTable:
    """Heavy cells found so far, and the best replace pair among them (vectorised).

    For a new cell x against kept cells b: V = w(x) + w(b) - S(x, b), where S sums the plain
    mechanisms x hits that b hits too, and the GROUP BYs x hits with a pinned key that b hits
    with the same key atoms.
    """

    def __init__(
        self,
        inst: _Instance,
        wf: np.ndarray,
        sc: _Scale,
        best: float,
        w_star: float,
        plain_full: float,
        budget: _Budget,
    ) -> None:
        self.inst, self.wf, self.sc, self.best = inst, wf, sc, best
        self.w_star, self.plain_full = w_star, plain_full
        self.budget = budget
        self.cells: list[Cell] = []
        d, m = len(inst.axes), len(inst.mechs)
        self._cells = np.zeros((16, d), dtype=np.int64)
        self._weights = np.zeros(16, dtype=np.float64)
        self._hits = np.zeros((16, m), dtype=bool)
        self.cands: list[tuple[float, Cell, Cell]] = []
        self.opened = _NEG_INF

    @property
    def size(self) -> int:
        return len(self.cells)

    def max_weight(self) -> float:
        return float(self._weights[: self.size].max())

    def max_minus(self, common: np.ndarray) -> float:
        """max over kept cells a of w(a) - sum{c_i : i in ``common``, a hits i}."""
        n = self.size
        ids = np.flatnonzero(common)
        ws = self._weights[:n]
        if ids.size:
            ws = ws - self._hits[:n][:, ids].astype(np.float64) @ self.wf[ids]
        return float(ws.max())

    def _append(self, x: Cell, v: float, hx: np.ndarray) -> None:
        n = self.size
        if n == len(self._weights):  # grow by doubling: appends stay O(1) amortised
            self._cells = np.vstack((self._cells, np.zeros_like(self._cells)))
            self._weights = np.concatenate((self._weights, np.zeros_like(self._weights)))
            self._hits = np.vstack((self._hits, np.zeros_like(self._hits)))
        self._cells[n], self._weights[n], self._hits[n] = x, v, hx
        self.cells.append(x)

    def seed(self, a: Cell, w_rows: np.ndarray) -> None:
        """Start from a real pair: a and the heaviest cell among the mechanisms a misses."""
        inst, sc = self.inst, self.sc
        ha = inst.hit_mask(a)
        rows = ~ha[inst.row_mech]
        lo_box, hi_box = inst.full_box()
        found: list[tuple[float, Cell]] = [(0.0, a)]

        def leaf(v: float, lb: np.ndarray, hb: np.ndarray) -> None:
            if v > found[-1][0]:
                found.append((v, _rep(lb, hb)))

        everything = np.ones(len(inst.axes), dtype=bool)
        _bb(
            inst.lo[rows],
            inst.hi[rows],
            w_rows[rows],
            lo_box,
            hi_box,
            everything,
            lambda: sc.above(found[-1][0]),
            leaf,
            self.budget,
        )
        b = found[-1][1]
        hb = inst.hit_mask(b)
        value = 0.0
        for i in np.flatnonzero(ha | hb).tolist():
            twice = ha[i] and hb[i] and inst.part[i] and not inst.forced_same(i, a, b)
            value += float(self.wf[i]) * (2 if twice else 1)
        self.best = max(self.best, value)
        self.cands.append((value, a, b))

    def _pinned(self, x: Cell, hx: np.ndarray) -> dict[tuple[int, ...], list[int]]:
        """GROUP BYs x hits whose key atoms x pins, by key columns."""
        out: dict[tuple[int, ...], list[int]] = {}
        for i in np.flatnonzero(hx & (self.inst.part == 1)).tolist():
            keys = self.inst.mechs[i].keys
            if all(x[k] % 2 == 0 for k in keys):
                out.setdefault(keys, []).append(i)
        return out

    def add(self, v: float, x: Cell, *, keep: bool, pair: bool) -> None:
        inst, sc = self.inst, self.sc
        # each evaluation scans the kept cells: charge the budget for that work
        cost = 1 + (self.size * len(self.inst.mechs)) // 131072
        if self.budget.left < cost:
            self.budget.left = 0
            self.opened = max(self.opened, v + self.w_star - self.plain_full)
            return
        self.budget.left -= cost
        hx = inst.hit_mask(x)
        if keep:  # x's own cell holds a second record: (x, x) is a pair, and x joins the table
            self._append(x, v, hx)
        if pair and self.cells:
            n = self.size
            cells, ws, hits = self._cells[:n], self._weights[:n], self._hits[:n]
            near = ws > sc.above(self.best - v + self.plain_full) - (
                1.0 if sc.denom is not None else 0.0
            )  # partners that may beat best: w(b) > best - w(x) + F (ties kept)
            cells, ws, hits = cells[near], ws[near], hits[near]
            idx = np.flatnonzero(near)
            shared = np.zeros(len(ws), dtype=np.float64)
            plain = np.flatnonzero(hx & (inst.part == 0))
            if plain.size:
                shared += hits[:, plain].astype(np.float64) @ self.wf[plain]
            for keys, ids in self._pinned(x, hx).items():
                same = np.all(cells[:, keys] == np.array([x[k] for k in keys]), axis=1)
                shared += same * (hits[:, ids].astype(np.float64) @ self.wf[ids])
            vals = v + ws - shared
            if vals.size:
                r = int(np.argmax(vals))
                if sc.keep(float(vals[r]), self.best):
                    self.best = max(self.best, float(vals[r]))
                    if sc.denom is not None:  # exact sums: the argmax is the one candidate
                        self.cands.append((float(vals[r]), x, self.cells[int(idx[r])]))
                    else:
                        for q in np.flatnonzero(vals >= self.best - sc.tol).tolist():
                            self.cands.append((float(vals[q]), x, self.cells[int(idx[q])]))


def _pair_value(inst: _Instance, j: int, a: Cell, b: Cell) -> Fraction:
    """Exact weight of replacing a record of cell a by one of cell b (Cor IV.13)."""
    ha, hb = inst.hit_mask(a), inst.hit_mask(b)
    total = Fraction(0)
    for i in np.flatnonzero(ha | hb).tolist():
        c = inst.mechs[i].wx[j]
        twice = ha[i] and hb[i] and inst.part[i] != 0 and not inst.forced_same(i, a, b)
        total += 2 * c if twice else c
    return total


# ============================================================================== units of k rows


def _mult(inst: _Instance, k: int, ucols: frozenset[int]) -> np.ndarray:
    """The most one unit of <= k rows can make mechanism i pay, in one-group costs
    (:func:`~privplan.accounting.model.unit_multiplier`; flat: the groups it can touch)."""
    out = np.ones(len(inst.mechs), dtype=np.float64)
    for i, m in enumerate(inst.mechs):
        out[i] = unit_multiplier(
            GROWTHS[m.growth], k, partitioned=bool(m.part),
            same_group=m.part == 1 and set(m.keys) <= ucols,  # every row has the same key
            max_groups=m.max_groups, max_rows_per_group=m.row_cap)
    return out


def _rows_factor(inst: _Instance, k: int, mechs: Iterable[int]) -> int:
    """The largest per-row factor R among ``mechs``: a unit of k rows pays at most k·R times
    its heaviest record (:func:`~privplan.accounting.model.row_multiplier`)."""
    out = 1
    for i in mechs:
        m = inst.mechs[i]
        out = max(out, row_multiplier(GROWTHS[m.growth], k, partitioned=bool(m.part),
                                      max_rows_per_group=m.row_cap))
    return out


def _additive_power(inst: _Instance, k: int) -> int | None:
    """p when every mechanism's cost is one-row cost x r^p for r rows, whatever the groups
    (the same linear or square growth everywhere, no cap on a unit's rows per group), else None.

    Then a unit's weight is at most Σ_i w_i·n_i·k^(p-1) <= k^p x its heaviest record's weight
    (n_i = its rows in R_i; r² <= k·r), and k copies of the heaviest record reach it: they
    share every key, since a cell's records can share any value its atoms allow.
    """
    growths = set()
    for m in inst.mechs:
        if m.growth == 0 or (m.part and m.row_cap is not None and m.row_cap < k):
            return None
        growths.add(m.growth)
    return growths.pop() if len(growths) == 1 else None


def _max_unit(
    inst: _Instance,
    j: int,
    k: int,
    ucols: frozenset[int],
    domains: Sequence[Cell2] | None,
    single: _Best,
    prev: _Best | None,
    budget: _Budget,
    bound_budget: _Budget,
) -> _Best:
    """max over units S (<= k records sharing the unit-level values) of S's weight.

    Add/remove of a unit changes every mechanism a row of S is in; a GROUP BY pays
    c_i * min(m, #groups of S in R_i) (Example IV.5). Units live in *slabs* (one atom per
    unit-level column); per slab the proven bound is min(A, k * B): A = sum of c_i * mult_i over
    the mechanisms meeting the slab (a unit affects no other, nor more groups), B = heaviest
    record of the slab (each row adds at most its own weight). A greedy unit that reaches the
    bound proves it exact; small slabs are searched exactly (:meth:`_UnitCells.search`). With
    ``domains`` only the slabs they meet are searched (others keep ``prev``): a slab's units
    change only if a new region meets it.
    """
    sc = inst.scales[j]
    best = prev if prev is not None else _Best(Fraction(0), True)
    if not inst.mechs or not inst.wf[:, j].any():
        return best
    power = _additive_power(inst, k)
    if power is not None:  # closed form: k copies of the heaviest record
        note = f"{k}^{power} x the heaviest record ({single.bound_note})" if single.bound_note \
            else ""
        return _Best(single.value * k**power, single.exact, single.cells[:1] * k, note)
    mult = _mult(inst, k, ucols)
    state = {"best": best}
    if not ucols:  # one slab: every record; its heaviest record is the add/remove maximum
        full_lo, full_hi = inst.full_box()
        return _unit_slab(
            inst, j, k, ucols, mult, full_lo, full_hi, best, single, budget, bound_budget
        )
    eligible = np.zeros(len(inst.axes), dtype=bool)
    eligible[list(ucols)] = True
    w_slab = (inst.wf[:, j] * mult)[inst.row_mech]

    def thr() -> float:
        return sc.above(sc.to_float(state["best"].value))

    def slab(v: float, lo_box: np.ndarray, hi_box: np.ndarray) -> None:
        state["best"] = _unit_slab(
            inst, j, k, ucols, mult, lo_box, hi_box, state["best"], None, budget, bound_budget
        )

    for dom in domains if domains is not None else [inst.full_box_tuple()]:
        box = tuple(
            (lo, hi) if c in ucols else (0, inst.axes[c].size - 1) for c, (lo, hi) in enumerate(dom)
        )
        m, lo, hi, arr = _meeting(inst, box)
        opened = _bb(lo, hi, w_slab[m], arr[0], arr[1], eligible, thr, slab, bound_budget)
        if opened != _NEG_INF:  # slabs not visited: bounded by their A
            state["best"] = _with_open(state["best"], sc, opened)
    return state["best"]


def _unit_slab(
    inst: _Instance,
    j: int,
    k: int,
    ucols: frozenset[int],
    mult: np.ndarray,
    lo_box: np.ndarray,
    hi_box: np.ndarray,
    best: _Best,
    heaviest: _Best | None,
    budget: _Budget,
    bound_budget: _Budget,
) -> _Best:
    """The best unit of one slab if it beats ``best`` (exact, or its proven bound)."""
    box = tuple(zip(lo_box.tolist(), hi_box.tolist()))
    m, lo, hi, _ = _meeting(inst, box)
    in_slab = np.unique(inst.row_mech[m]).tolist()
    a_exact = sum((inst.mechs[i].wx[j] * int(mult[i]) for i in in_slab), Fraction(0))
    if a_exact <= best.value:
        return best
    if heaviest is None:
        heaviest = _max_cell(inst, j, [box], None, bound_budget)
    per_row = k * _rows_factor(inst, k, in_slab)
    bound = min(a_exact, per_row * heaviest.value)
    if bound <= best.value:
        return best
    note = (
        f"min(sum over the mechanisms a unit can meet, {per_row} x the heaviest record); "
        "the exact search limit was reached"
    )
    fallback = _Best(bound, False, (_rep(lo_box, hi_box),), note)
    if budget.left <= 0:
        return fallback
    # every cell of the slab with weight, while they stay few enough to search
    sc = inst.scales[j]
    wf = inst.wf[:, j]
    cells: list[Cell] = []
    not_unit = np.ones(len(inst.axes), dtype=bool)
    not_unit[list(ucols)] = False
    floor = 0.5 if sc.denom is not None else float(wf[wf > 0].min()) / 2
    limit = _Budget(min(budget.left, 64 + budget.left // 64))  # cells and nodes: small slabs only

    def collect(v: float, lb: np.ndarray, hb: np.ndarray) -> None:
        cells.append(_rep(lb, hb))
        if len(cells) > limit.left:
            limit.left = 0

    opened = _bb(
        lo, hi, wf[inst.row_mech[m]], lo_box, hi_box, not_unit, lambda: floor, collect, limit
    )
    budget.left -= len(cells)
    if opened != _NEG_INF or limit.left <= 0:
        return fallback
    growing = any(inst.mechs[i].growth for i in in_slab)
    table: _UnitCells | _GrowthCells = (
        _GrowthCells(inst, j, ucols, cells) if growing else _UnitCells(inst, j, ucols, cells))
    found: tuple[Fraction, tuple[Cell, ...]] | None = table.greedy(k)
    if found is not None and found[0] < bound:
        found = table.search(k, bound, found, budget)
    if found is None:
        return fallback
    value, chosen = found
    if value <= best.value:
        return best
    if isinstance(table, _GrowthCells) and not table.realizable(
            [table.cells.index(c) for c in chosen]):
        return _Best(value, False, chosen, "mechanisms split free group keys differently; "
                     "each split was taken at its worst")
    return _Best(value, True, chosen)  # proven this slab's maximum, above every earlier one


class _UnitCells:
    """The weighted cells of one slab, for the max-coverage search over units of <= k rows.

    A cell stands for as many records as needed; a record's group in a partition is the
    cell's key atoms, or a group of its own (id -1) when its key can differ from every other
    row's (opaque keys, or an open atom on a key column that is not unit-level).
    """

    def __init__(self, inst: _Instance, j: int, ucols: frozenset[int], cells: list[Cell]) -> None:
        self.inst, self.j, self.cells = inst, j, cells
        self.sc = inst.scales[j]
        self.wf = inst.wf[:, j]
        self.hits = np.array([inst.hit_mask(c) for c in cells], dtype=bool).reshape(
            len(cells), len(inst.mechs)
        )
        self.plain = inst.part == 0
        self.parts = np.flatnonzero(inst.part != 0)
        self.groups = np.full((len(cells), len(inst.mechs)), -1, dtype=np.int64)
        for i in self.parts.tolist():
            keys: dict[Any, int] = {}
            for r, cell in enumerate(cells):
                g = _group_id(inst, i, cell, ucols)
                if g is not None:
                    self.groups[r, i] = keys.setdefault(g, len(keys))
        cap = [m.max_groups for m in inst.mechs]
        self.cap = np.array([c if c is not None else 1 << 30 for c in cap], dtype=np.int64)

    def value(self, chosen: Sequence[int], *, exact: bool) -> Any:
        """Weight of a unit with one row in each chosen cell (repeats are distinct rows)."""
        hits = self.hits[list(chosen)]
        touched = hits.any(axis=0)
        count = np.zeros(len(self.inst.mechs), dtype=np.int64)
        for i in self.parts.tolist():
            rows = hits[:, i]
            g = self.groups[list(chosen), i][rows]
            count[i] = min(
                int(np.count_nonzero(g == -1)) + len(set(g[g >= 0].tolist())), int(self.cap[i])
            )
        mult = np.where(self.plain, touched.astype(np.int64), count)
        ids = np.flatnonzero(mult).tolist()
        if exact:
            return sum((self.inst.mechs[i].wx[self.j] * int(mult[i]) for i in ids), Fraction(0))
        return float(self.wf[ids] @ mult[ids]) if ids else 0.0

    def greedy(self, k: int) -> tuple[Fraction, tuple[Cell, ...]]:
        """Add the row of largest gain, k times: a lower bound, exact if it meets the upper one.

        Gains are vectorised over cells: a plain mechanism not yet touched, and a partition
        below its cap whose group for that row is not taken yet (own groups never are).
        """
        parts = self.parts
        hits_p = self.hits[:, parts]
        groups_p = self.groups[:, parts]
        used = np.zeros(hits_p.shape, dtype=bool)  # the row's group is already in the unit
        count = np.zeros(len(parts), dtype=np.int64)
        open_plain = self.plain.copy()
        chosen: list[int] = []
        for _ in range(k):
            gain = self.hits[:, open_plain].astype(np.float64) @ self.wf[open_plain]
            if parts.size:
                room = (count < self.cap[parts]).astype(np.float64) * self.wf[parts]
                gain += (hits_p & ~used).astype(np.float64) @ room
            r = int(np.argmax(gain)) if gain.size else 0
            if not gain.size or gain[r] <= 0:
                break
            chosen.append(r)
            open_plain &= ~self.hits[r]
            new = hits_p[r] & ~used[r]
            count += new
            g = groups_p[r]
            used |= (groups_p == g) & (g >= 0) & hits_p[r]
        return self.value(chosen, exact=True), tuple(self.cells[r] for r in chosen)

    def search(
        self,
        k: int,
        bound: Fraction,
        start: tuple[Fraction, tuple[Cell, ...]],
        budget: _Budget,
    ) -> tuple[Fraction, tuple[Cell, ...]] | None:
        """Exact branch and bound over multisets of <= k cells; None if the budget ran out.

        The unit weight is a coverage function with concave caps, so submodular: r more rows
        add at most the r largest current marginal gains, where a cell counts once at its
        gain and then, for further copies (distinct rows of the same cell), only its gain in
        partitions where each row is a group of its own. Cells are added in index order
        (multisets, not sequences); the search stops when a unit reaches ``bound``.
        """
        sc = self.sc
        exact_ints = sc.denom is not None  # then reaching the bound in floats is exact
        bound_f = sc.to_float(bound)
        parts = self.parts
        hits, hits_p, groups_p = self.hits, self.hits[:, parts], self.groups[:, parts]
        own_p = groups_p == -1
        w_parts, cap_parts = self.wf[parts], self.cap[parts]
        top = [sc.to_float(start[0])]
        cands: list[tuple[float, tuple[int, ...]]] = []
        cut = [False]

        def node(
            last: int,
            chosen: list[int],
            cur: float,
            open_plain: np.ndarray,
            used: np.ndarray,
            count: np.ndarray,
        ) -> None:
            left = k - len(chosen)
            room = (count < cap_parts).astype(np.float64) * w_parts
            gain = hits[last:, open_plain].astype(np.float64) @ self.wf[open_plain]
            again = np.zeros_like(gain)
            if parts.size:
                gain += (hits_p[last:] & ~used[last:]).astype(np.float64) @ room
                again = (hits_p[last:] & own_p[last:]).astype(np.float64) @ room
            items = np.sort(np.concatenate((gain, np.repeat(again, left - 1))))[::-1]
            if cur + float(items[:left].sum()) < sc.above(top[0]):
                return
            rest = float(items[: left - 1].sum())  # what rows after the next can add
            for idx in np.argsort(-gain, kind="stable").tolist():
                if cut[0] or (exact_ints and top[0] >= bound_f):
                    return
                v = cur + float(gain[idx])
                if gain[idx] <= 0 or v + rest < sc.above(top[0]):
                    return  # sorted by gain: no later cell does better
                if not budget.take():
                    cut[0] = True
                    return
                c = last + idx
                nxt = [*chosen, c]
                if sc.keep(v, top[0]):
                    top[0] = max(top[0], v)
                    cands.append((v, tuple(nxt)))
                if left > 1:
                    g = groups_p[c]
                    node(
                        c,
                        nxt,
                        v,
                        open_plain & ~hits[c],
                        used | ((groups_p == g) & (g >= 0) & hits_p[c]),
                        count + (hits_p[c] & ~used[c]),
                    )

        node(
            0,
            [],
            0.0,
            self.plain.copy(),
            np.zeros(hits_p.shape, dtype=bool),
            np.zeros(len(parts), dtype=np.int64),
        )
        out = start
        for v, idxs in cands:
            if sc.keep(v, top[0]):
                value = self.value(idxs, exact=True)
                if sc.denom is not None and value != sc.exact(v):
                    raise InternalError(f"unit search value {v} disagrees with exact {value}")
                if value > out[0]:
                    out = (value, tuple(self.cells[r] for r in idxs))
        if cut[0] and out[0] < bound:
            return None  # unfinished, and not at the bound: no proof it is the maximum
        return out


class _GrowthCells:
    """The weighted cells of one slab, when some cost grows with a unit's rows in a group.

    A unit is a multiset of cells (one entry per row). Mechanism i pays w_i · Σ φ_i(r_g) over
    the (at most m) groups it gives most, with r_g capped at the rows a unit may keep per group
    (:func:`~privplan.accounting.model.growth_factor`). A row whose key is fixed by its cell
    is in that cell's group; rows whose key may take values no other cell's can (an open atom
    of a non-unit-level key column, or opaque keys) form a *pool* per key-atom tuple, which the
    adversary splits into groups as it likes: singletons for flat costs (more groups), groups
    filled to the cap for linear and square ones (φ(r)/r does not decrease, so the filled
    split majorises every other). Each mechanism's split is chosen on its own, which can only
    over-charge. Exact search by branch and bound with the bound Σ_i w_i·Ψ_i(n_i + rows left)
    (Ψ_i: the most n rows can make i pay, :func:`unit_multiplier`), which holds for any split.
    """

    _BIG = 1 << 30

    def __init__(self, inst: _Instance, j: int, ucols: frozenset[int], cells: list[Cell]) -> None:
        self.inst, self.j, self.cells = inst, j, cells
        self.sc = inst.scales[j]
        self.wf = inst.wf[:, j]
        n = len(inst.mechs)
        self.hits = np.array([inst.hit_mask(c) for c in cells], dtype=bool).reshape(len(cells), n)
        self.active = [i for i in np.flatnonzero(self.hits.any(axis=0)).tolist()
                       if self.wf[i] > 0 or inst.mechs[i].wx[j] > 0]
        self.groups = np.zeros((len(cells), n), dtype=np.int64)  # >= 0 fixed, < 0 pools
        self.mechs = {i: inst.mechs[i] for i in self.active}
        for i in self.active:
            m = self.mechs[i]
            if not m.part:
                continue
            ids: dict[Any, int] = {}
            for r, cell in enumerate(cells):
                g = _group_id(inst, i, cell, ucols)
                if g is None:  # free: pooled with the rows of the same key atoms
                    pool = ("pool", tuple(cell[c] for c in m.keys)) if m.part == 1 else ("pool",)
                    self.groups[r, i] = -2 - ids.setdefault(pool, len(ids))
                else:
                    self.groups[r, i] = ids.setdefault(("fixed", g), len(ids))

    def _mult_of(self, i: int, counts: Mapping[int, int], chunk: int | None = 0) -> int:
        """What mechanism i pays (in one-group costs) for a unit with ``counts`` rows per
        group id (pools: negative ids), its pools split the worst way for i (``chunk`` 0),
        or into groups of ``chunk`` rows (None: one row each)."""
        m = self.mechs[i]
        growth = GROWTHS[m.growth]
        if not m.part:
            return growth_factor(growth, sum(counts.values()))
        cap = m.row_cap if m.row_cap is not None else self._BIG
        if chunk == 0:
            chunk = None if growth == "flat" else cap
        sizes: list[int] = []
        for gid, r in counts.items():
            if gid >= 0:
                sizes.append(min(r, cap))
            elif chunk is None:
                sizes.extend([1] * r)
            else:
                full, rest = divmod(r, chunk)
                sizes.extend([min(chunk, cap)] * full + ([min(rest, cap)] if rest else []))
        values = sorted((growth_factor(growth, x) for x in sizes), reverse=True)
        return sum(values[: m.max_groups] if m.max_groups is not None else values)

    def realizable(self, chosen: Sequence[int]) -> bool:
        """Can one choice of key values split every pool as :meth:`_mult_of` assumes?

        Yes when one split serves every mechanism with >= 2 of the unit's rows in a pool: one
        row per group (every free key value distinct) or all in one group (one value per free
        key column) for any keys, or groups of c rows when those mechanisms share their key
        columns. Otherwise the value is only an upper bound.
        """
        pooled = {i: c for i, c in self._counts(chosen).items()
                  if self.mechs[i].part and any(g < 0 and r >= 2 for g, r in c.items())}
        if not pooled:
            return True
        wanted = {i: self._mult_of(i, c) for i, c in pooled.items()}
        chunks: set[int | None] = {None, self._BIG}
        if len({(self.mechs[i].part, self.mechs[i].keys) for i in pooled}) == 1:
            chunks |= {self.mechs[i].row_cap for i in pooled if self.mechs[i].row_cap}
        return any(all(self._mult_of(i, c, chunk) == wanted[i] for i, c in pooled.items())
                   for chunk in chunks)

    def _counts(self, chosen: Sequence[int]) -> dict[int, dict[int, int]]:
        out: dict[int, dict[int, int]] = {i: {} for i in self.active}
        for r in chosen:
            for i in np.flatnonzero(self.hits[r]).tolist():
                if i in out:
                    g = int(self.groups[r, i])
                    out[i][g] = out[i].get(g, 0) + 1
        return out

    def value(self, chosen: Sequence[int], *, exact: bool) -> Any:
        """Weight of a unit with one row in each chosen cell (repeats are distinct rows)."""
        mult = {i: self._mult_of(i, c) for i, c in self._counts(chosen).items() if c}
        if exact:
            return sum((self.inst.mechs[i].wx[self.j] * v for i, v in mult.items()), Fraction(0))
        return float(sum(float(self.wf[i]) * v for i, v in mult.items()))

    def _gains(self, counts: dict[int, dict[int, int]], mults: dict[int, int],
               first: int = 0) -> np.ndarray:
        """The weight one more row in each cell (from index ``first``) adds to the unit."""
        gain = np.zeros(len(self.cells) - first)
        hits, groups = self.hits[first:], self.groups[first:]
        for i in self.active:
            col = hits[:, i]
            if not col.any():
                continue
            gids = groups[:, i]
            for g in np.unique(gids[col]).tolist():
                after = dict(counts[i])
                after[g] = after.get(g, 0) + 1
                delta = self._mult_of(i, after) - mults[i]
                if delta:
                    gain[col & (gids == g)] += float(self.wf[i]) * delta
        return gain

    def _add(self, counts: dict[int, dict[int, int]], mults: dict[int, int],
             r: int) -> tuple[dict[int, dict[int, int]], dict[int, int]]:
        counts = dict(counts)
        mults = dict(mults)
        for i in np.flatnonzero(self.hits[r]).tolist():
            if i in counts:
                g = int(self.groups[r, i])
                counts[i] = {**counts[i], g: counts[i].get(g, 0) + 1}
                mults[i] = self._mult_of(i, counts[i])
        return counts, mults

    def greedy(self, k: int) -> tuple[Fraction, tuple[Cell, ...]]:
        """Add the row of largest gain, k times: a unit, so a lower bound on the maximum."""
        counts: dict[int, dict[int, int]] = {i: {} for i in self.active}
        mults = {i: 0 for i in self.active}
        chosen: list[int] = []
        for _ in range(k):
            gain = self._gains(counts, mults)
            if not gain.size or gain.max() <= 0:
                break
            r = int(np.argmax(gain))
            chosen.append(r)
            counts, mults = self._add(counts, mults, r)
        return self.value(chosen, exact=True), tuple(self.cells[r] for r in chosen)

    def _ceiling(self, k: int, counts: dict[int, dict[int, int]], mults: dict[int, int],
                 first: int, left: int) -> float:
        """An upper bound on any unit extending the current one with ``left`` rows taken from
        cells ``first``...: mechanism i can at most reach Ψ_i(its rows + left)."""
        reach = self.hits[first:].any(axis=0)
        total = 0.0
        for i in self.active:
            if not reach[i] or left == 0:
                total += float(self.wf[i]) * mults[i]
                continue
            m = self.mechs[i]
            n = min(k, sum(counts[i].values()) + left)
            total += float(self.wf[i]) * unit_multiplier(
                GROWTHS[m.growth], n, partitioned=bool(m.part), max_groups=m.max_groups,
                max_rows_per_group=m.row_cap)
        return total

    def search(
        self,
        k: int,
        bound: Fraction,
        start: tuple[Fraction, tuple[Cell, ...]],
        budget: _Budget,
    ) -> tuple[Fraction, tuple[Cell, ...]] | None:
        """Exact branch and bound over multisets of <= k cells; None if the budget ran out."""
        sc = self.sc
        top = [sc.to_float(start[0])]
        bound_f = sc.to_float(bound)
        cands: list[tuple[float, tuple[int, ...]]] = []
        cut = [False]
        exact_ints = sc.denom is not None

        def node(first: int, chosen: list[int], cur: float,
                 counts: dict[int, dict[int, int]], mults: dict[int, int]) -> None:
            left = k - len(chosen)
            if left == 0 or self._ceiling(k, counts, mults, first, left) < sc.above(top[0]):
                return
            gain = self._gains(counts, mults, first)
            for idx in np.argsort(-gain, kind="stable").tolist():
                if cut[0] or (exact_ints and top[0] >= bound_f):
                    return
                if not budget.take():
                    cut[0] = True
                    return
                c = first + idx
                nxt = [*chosen, c]
                v = cur + float(gain[idx])
                if sc.keep(v, top[0]):
                    top[0] = max(top[0], v)
                    cands.append((v, tuple(nxt)))
                node(c, nxt, v, *self._add(counts, mults, c))

        node(0, [], 0.0, {i: {} for i in self.active}, {i: 0 for i in self.active})
        out = start
        for v, idxs in cands:
            if sc.keep(v, top[0]):
                value = self.value(idxs, exact=True)
                if value > out[0]:
                    out = (value, tuple(self.cells[r] for r in idxs))
        if cut[0] and out[0] < bound:
            return None  # unfinished, and not at the bound: no proof it is the maximum
        return out


def _group_id(inst: _Instance, i: int, cell: Cell, ucols: frozenset[int]) -> Any:
    """Group of a record of ``cell`` in partition i, or None for a group no other row shares.

    Keys of rows in an open atom of a non-unit-level key column can all differ (chosen so);
    opaque keys can always differ; otherwise the key is fixed by the cell's atoms (a
    unit-level column holds one value for the whole unit, whatever its atom).
    """
    m = inst.mechs[i]
    if m.part == 2 or any(cell[c] % 2 == 1 and c not in ucols for c in m.keys):
        return None
    return tuple(cell[c] for c in m.keys)


# ============================================================================== explanations


def _witness(inst: _Instance, best: _Best) -> tuple[int, ...]:
    if not best.cells:
        return ()
    hits = np.zeros(len(inst.mechs), dtype=bool)
    for cell in best.cells:
        if len(cell) == len(inst.axes):
            hits |= inst.hit_mask(cell)
    return tuple(np.flatnonzero(hits).tolist())


def _describe_cell(inst: _Instance, cell: Cell, relevant: Iterable[int]) -> str:
    relevant = list(relevant)
    cols = inst.mechs.key_columns(relevant)
    chosen = np.zeros(len(inst.mechs), dtype=bool)
    chosen[relevant] = True
    rows = chosen[inst.row_mech]
    constrained = (inst.lo[rows] > 0) | (inst.hi[rows] < inst.sizes - 1)
    cols.update(np.flatnonzero(constrained.any(axis=0)).tolist())
    parts = [inst.axes[c].describe(inst.columns[c], cell[c]) for c in sorted(cols)]
    return "any record" if not parts else "a record with " + ", ".join(parts)


def _detail(
    inst: _Instance,
    best: _Best,
    witness: tuple[int, ...],
    k: int,
    replace: bool,
) -> str:
    ids = _some_ids(inst, witness)
    if best.bound_note and not best.cells:
        return f"upper bound ({best.bound_note})"
    if not best.cells:
        return "no record affects any mechanism"
    cells = [c for c in best.cells if len(c) == len(inst.axes)]
    if k > 1:
        described = [_describe_cell(inst, c, witness).removeprefix("a record with ")
                     for c in cells]
        rows = "; ".join(
            f"{described.count(d)} x {d}" if described.count(d) > 1 else d
            for d in dict.fromkeys(described)
        )
        what = f"a unit of up to {k} rows ({rows})"
        if best.bound_note:
            return f"{what} near a record affecting {ids} (upper bound: {best.bound_note})"
        text = f"{what} affects {ids}"
        return text + ("; replace is charged as removing it and adding another" if replace else "")
    if replace and len(cells) == 2:
        a, b = cells
        ha, hb = inst.hit_mask(a), inst.hit_mask(b)
        twice = [
            inst.mechs[i].id
            for i in witness
            if ha[i] and hb[i] and inst.part[i] and not inst.forced_same(i, a, b)
        ]
        da = _describe_cell(inst, a, witness).removeprefix("a record with ")
        db = _describe_cell(inst, b, witness).removeprefix("a record with ")
        text = f"replacing a record ({da}) by another ({db}) affects {ids}"
        if twice:
            text += f"; it moves between two groups of {', '.join(twice)}"
    else:
        text = f"{_describe_cell(inst, cells[0], witness)} affects {ids}"
    if best.bound_note:
        text += f" (upper bound: {best.bound_note})"
    return text


_IDS_SHOWN = 12


def _some_ids(inst: _Instance, witness: Sequence[int]) -> str:
    """The witness's mechanism ids for a message: all of a few, the first of many."""
    if not witness:
        return "nothing"
    shown = ", ".join(inst.mechs.ids(witness[:_IDS_SHOWN]))
    more = len(witness) - _IDS_SHOWN
    return shown if more <= 0 else f"{len(witness):,} mechanisms ({shown} and {more:,} more)"


def _rule(inst: _Instance, best: _Best, witness: tuple[int, ...], k: int, replace: bool) -> str:
    partitions = any(inst.mechs[i].part for i in witness)
    if k > 1:
        growths = {inst.mechs[i].growth for i in witness}
        paid = []
        if 0 in growths:
            paid.append("min(m, groups touched) per GROUP BY")
        if growths & {1, 2}:
            power = "r" if 1 in growths else "r²"
            paid.append(f"{power} x the one-row cost for r of its rows in a mechanism's input "
                        "(per group, at most m groups)")
        rule = (
            f"units of up to {k} rows: a unit affects the mechanisms its rows meet and pays "
            + " and ".join(paid or ["nothing"]) + " (Thm IV.11, Example IV.5)"
        )
        if replace:
            rule += "; replace bounded by removing one unit and adding another (2x)"
    elif replace:
        rule = (
            "bounded DP (replace): a changed record affects the mechanisms of its old and its "
            "new value (Thm IV.11)"
        )
        if partitions:
            rule += "; a GROUP BY pays the two groups it moves between (Cor IV.13)"
    elif len(witness) == len(inst.mechs):
        rule = "sequential composition: one record can affect every mechanism (Thm IV.3)"
    else:
        rule = (
            "parallel composition: a record affects only the mechanisms whose region holds it "
            "(Thm IV.11)"
        )
        if partitions:
            rule += "; a GROUP BY pays one group (Thm IV.12)"
    if best.bound_note:
        rule = "proven upper bound (" + best.bound_note + "): " + rule
    return rule
