"""The solver's encoding of one table: every column a region constrains is cut into *atoms*
(NULL, each named value, the open gaps between them: :class:`Axis`); mechanisms are kept as
columns of weights, key columns and contribution bounds (:class:`_Mechs`, lazily restored
from a checkpoint); each weight coordinate is searched in floats on an exact-integer scale
when the weights allow (:class:`_Scale`); :class:`_Best` is the worst pair found so far.

Privacy: atoms split columns at every named value; float weights are exact, or near-ties rechecked.
"""

from __future__ import annotations

import math
import typing
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from privplan.accounting.model import (
    MechanismSpec,
)
from privplan.analysis.sets import ColumnSet, Value
from privplan.errors import InternalError

DEFAULT_EXACT_LIMIT = 10_000


"""Search work one composition (or admission) may spend before settling for a proven bound:
branch-and-bound nodes, weighted by the rows they sweep (about a second at worst)."""


_EXACT_INT_LIMIT = 2**50  # scaled integer weights below this add exactly in float64


_MAX_ROWS_PER_BOX = 4096  # a box's IN-lists multiply out to at most this many rows


def widen_to_limit(per_col: list[list[tuple[int, int]]], limit: int = _MAX_ROWS_PER_BOX) -> bool:
    """Merge the column with most ranges into its hull until the box's ranges multiply out to
    at most ``limit`` rows (in place); whether anything was widened. A hull holds its ranges,
    so the box only grows: the solver and the allocator can only over-charge by it."""
    wide = False
    while math.prod(len(rs) for rs in per_col) > limit:
        c = max(range(len(per_col)), key=lambda i: len(per_col[i]))
        per_col[c] = [(per_col[c][0][0], per_col[c][-1][1])]
        wide = True
    return wide


_NEG_INF = float("-inf")


Cell = tuple[int, ...]


@dataclass(frozen=True)
class _Best:
    """The worst pair found for one weight coordinate: its exact value and witness cells."""

    value: Fraction
    exact: bool
    cells: tuple[Cell, ...] = ()  # one cell (a record), two (a replace pair) or a unit's rows
    bound_note: str = ""  # why the value is a bound, when it is one


_ARRAYS = ("lo", "hi", "row_mech", "part", "full", "wf", "narrow")


_PER_MECH = ("max_groups", "growth", "row_cap")  # int per mechanism, -1 for "no limit"


class Unorderable(Exception):
    """A column's values cannot be sorted together (mixed types, NaN)."""


def sorted_atom_values(values: Iterable[Value]) -> list[Value]:
    """The distinct values in order; of equal values (1, 1.0) the first given is kept.

    Sorted before deduplicating: a stable sort keeps equal values in their given order, so the
    first of each run is the one ``set`` would keep, and values that come mostly in order (a
    region's interval ends) sort in linear time."""
    try:
        given = list(values)
        distinct = set(given)
        if any(v != v for v in distinct):  # noqa: PLR0124 - NaN is unequal to itself
            raise Unorderable
        ordered = sorted(given)
    except TypeError as exc:
        raise Unorderable from exc
    if len(ordered) == len(distinct):
        return ordered
    out = ordered[:1]
    for v in ordered[1:]:
        if v != out[-1]:
            out.append(v)
    return out


class Axis:
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
        if len(cs.intervals) >= 64:
            points = self._point_ranges(cs)
            if points is not None:
                return points
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

    def _point_ranges(self, cs: ColumnSet) -> list[tuple[int, int]] | None:
        """:meth:`ranges` of a set of single values (a long IN list, a public domain), one
        lookup per value; None when some interval is not a single value. The point v_j is atom
        2j+2; two points' atoms have a gap atom between them and NULL's atom 0 is two below
        the first point's, so no two ranges merge and each point is its own range."""
        values = cs.finite_values()
        if values is None:
            return None
        if self._index is None:
            self._index = {v: j for j, v in enumerate(self.values)}
        looked: list[int | None] = list(map(self._index.get, values))
        found = [self._pos(v) if j is None else j for v, j in zip(values, looked)] if (
            None in looked) else looked  # (an equal value of another type: by bisection)
        atoms = [2 * j + 2 for j in typing.cast(list[int], found)]
        out: list[tuple[int, int]] = [(0, 0)] if cs.null else []
        out.extend(zip(atoms, atoms))
        return out

    def merged(self, new: Iterable[Value]) -> tuple[Axis, np.ndarray, np.ndarray] | None:
        """The axis with ``new`` endpoints added and old-to-new atom maps (lower, upper ends).

        Returns None when nothing is added. An old point maps to its new point; an old gap
        splits into a run of new atoms, whose first index maps range starts and last maps
        range ends, so a range of old atoms maps to the same set of values.
        """
        old = self.values
        known = self._index if self._index is not None else set(old)
        # (the known values dropped before sorting: a query over a 100,000-value public domain
        # names the same values every time, and sorted them all again on every charge)
        added = sorted_atom_values(v for v in new if v not in known)
        if not added:
            return None
        # both lists are sorted: insert the new values in place of sorting everything again
        try:
            at = [bisect_left(old, a) for a in added]
        except TypeError as exc:  # a new value of another type than the column's
            raise Unorderable from exc
        values: list[Value] = []
        prev = 0
        for a, i in zip(added, at):
            values.extend(old[prev:i])
            values.append(a)
            prev = i
        values.extend(old[prev:])
        axis = Axis(values)
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

    def describe_run(self, column: str, first: int, last: int) -> str:
        """The atoms ``first..last`` as one condition on ``column`` (``age <= 17``,
        ``8 <= length_of_stay < 12``); one atom as :meth:`describe` says it."""
        if first == last or first == 0:
            return self.describe(column, first)
        j, point = divmod(first - 1, 2)  # a point is atom 2j + 2, a gap before it 2j + 1
        low = (self.values[j], ">=") if point else (
            (self.values[j - 1], ">") if j > 0 else None)
        k, point = divmod(last - 1, 2)
        high = (self.values[k], "<=") if point else (
            (self.values[k], "<") if k < len(self.values) else None)
        if low is None and high is None:
            return f"{column} IS NOT NULL"
        if low is None:
            return f"{column} {high[1]} {high[0]!r}"  # type: ignore[index]
        if high is None:
            return f"{column} {low[1]} {low[0]!r}"
        flip = {">=": "<=", ">": "<"}
        return f"{low[0]!r} {flip[low[1]]} {column} {high[1]} {high[0]!r}"

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


def _objects(values: Sequence[Any]) -> np.ndarray:
    """``values`` as a one-dimensional object array (tuples stay elements, not rows)."""
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):  # (one by one: a slice assignment would unpack tuples)
        out[i] = value
    return out


class _Mechs:
    """An instance's mechanisms in admission order, immutable; :meth:`plus` shares the old part.

    A restored solver's first mechanisms are a :class:`_MechColumns` (read lazily); the ones
    admitted since are plain :class:`_Mech` with their specs."""

    __slots__ = ("_base", "_n0", "_tail", "_tail_ids", "_tail_keys", "_tail_specs")

    def __init__(self, base: _MechColumns | None, tail: tuple[_Mech, ...],
                 tail_specs: tuple[MechanismSpec, ...],
                 columns: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self._base = base
        self._n0 = len(base.ids) if base is not None else 0
        self._tail = tail
        self._tail_specs = tail_specs
        # the tail's ids and key tuples as object arrays (grown by plus, not rebuilt): the
        # witness of a session that asked many questions reads them for hundreds of indices
        self._tail_ids, self._tail_keys = columns if columns is not None else (
            _objects([m.id for m in tail]), _objects([m.keys for m in tail]))

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
            return tuple(self._tail_ids[idx].tolist())
        base = self._base.id_array()
        n0 = self._n0
        head = base[idx[idx < n0]].tolist()
        return (*head, *self._tail_ids[idx[idx >= n0] - n0].tolist())

    def key_columns(self, indices: Sequence[int]) -> set[int]:
        """The key columns of the mechanisms at ``indices`` (without making restored ones)."""
        idx = np.asarray(indices, dtype=np.int64)
        out: set[int] = set()
        if self._base is not None:
            head = idx[idx < self._n0]
            for k in np.unique(self._base.keys_idx[head]).tolist():
                out.update(self._base.keys_table[k])
        for keys in set(self._tail_keys[idx[idx >= self._n0] - self._n0].tolist()):
            out.update(keys)
        return out

    def plus(self, added: Sequence[_Mech], specs: Sequence[MechanismSpec]) -> _Mechs:
        columns = (np.concatenate((self._tail_ids, _objects([m.id for m in added]))),
                   np.concatenate((self._tail_keys, _objects([m.keys for m in added]))))
        return _Mechs(self._base, self._tail + tuple(added), self._tail_specs + tuple(specs),
                      columns)

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
    """Disjoint boxes with the same union.

    Each box has every earlier output box subtracted in turn. A box that does not meet ``b``
    leaves every piece of ``b`` as it is, so only the output boxes meeting ``b`` are
    subtracted (found for all of them at once): the same pieces, in linear rather than
    quadratic Python work when the boxes are mostly apart (thousands of public keys). A box
    equal to an earlier one is skipped: the pieces kept so far cover it, so subtracting them
    would leave nothing (the boxes of one GROUP BY's COUNT, SUM and AVG over the same groups
    repeat)."""
    out: list[Cell2] = []
    seen: set[Cell2] = set()
    rows = list(rows)
    ends = _Ends() if len(rows) > 64 else None  # (a few boxes: each pair is tested directly)
    for b in rows:
        if b in seen:
            continue
        seen.add(b)
        pieces = [b]
        for i in range(len(out)) if ends is None else ends.meeting(out, b):
            pieces = [q for p in pieces for q in _subtract(p, out[i])]
            if not pieces:
                break
        out.extend(pieces)
    return out


class _Ends:
    """The lower and upper atoms of a growing list of boxes, as arrays (grown by doubling)."""

    def __init__(self) -> None:
        self.lo = self.hi = np.zeros((0, 0), dtype=np.int64)
        self.filled = 0

    def meeting(self, boxes: list[Cell2], b: Cell2) -> list[int]:
        """Indices (ascending) of the boxes that meet ``b``."""
        n = len(boxes)
        if not n:
            return []
        if self.lo.shape[0] < n:
            size, d = 2 * n, len(b)
            lo, hi = np.empty((size, d), dtype=np.int64), np.empty((size, d), dtype=np.int64)
            if self.filled:
                lo[:self.filled] = self.lo[:self.filled]
                hi[:self.filled] = self.hi[:self.filled]
            self.lo, self.hi = lo, hi
        for i in range(self.filled, n):
            self.lo[i] = [a for a, _ in boxes[i]]
            self.hi[i] = [z for _, z in boxes[i]]
        self.filled = n
        blo = np.array([a for a, _ in b], dtype=np.int64)
        bhi = np.array([z for _, z in b], dtype=np.int64)
        meets = ((self.lo[:n] <= bhi) & (blo <= self.hi[:n])).all(axis=1)
        return np.flatnonzero(meets).tolist()
