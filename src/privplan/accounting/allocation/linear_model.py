"""The linear model of the composed cost: one constraint row per event of the arrangement.

Giving query q the budget b_q scales its mechanisms linearly, so per table the composed cost is
the max over events of Σ_q b_q · a_q(e) plus what the history charges (CSF'24 Thms IV.11, IV.12),
each coefficient capped by what q alone can cost; tables add (one person may be in every private
table). :func:`_build_model` writes these rows in fractions of the budget's weight;
:func:`_exact_total` computes the composed cost from exact events in exact fractions (the linear
model *is* the cost there, so no solver call is needed).

Privacy: each row bounds what its event costs, capped only by what the query alone can cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from privplan.accounting.allocation.arrangement import co_affected_sets
from privplan.accounting.allocation.interface import Demand, Event
from privplan.accounting.definitions import PrivacyValue
from privplan.accounting.model import MechanismSpec, TableModel
from privplan.accounting.solver import Composition, compose
from privplan.errors import PolicyError


@dataclass
class _Table:
    """One table's mechanisms (the demands' first, then the history's) and their events."""

    name: str
    model: TableModel
    specs: list[MechanismSpec]
    owners: list[int | None]  # the demand each mechanism belongs to (None: history)
    events: list[Event]
    exact: bool


def _arrangement(demands: Sequence[Demand], history: Sequence[MechanismSpec],
                 tables: Mapping[str, TableModel], limit: int) -> tuple[list[_Table], list[str]]:
    by_table: dict[str, tuple[list[MechanismSpec], list[int | None]]] = {}
    for q, d in enumerate(demands):
        for m in d.mechanisms:
            specs, owners = by_table.setdefault(m.table, ([], []))
            specs.append(m)
            owners.append(q)
    for m in history:
        specs, owners = by_table.setdefault(m.table, ([], []))
        specs.append(m)
        owners.append(None)
    out, notes = [], []
    for name, (specs, owners) in by_table.items():
        if name not in tables:
            raise PolicyError(f"table {name!r} has no neighbourhood/unit model in the policy")
        tm = tables[name]
        events, exact = co_affected_sets(specs, tm, limit=limit)
        if not exact:
            if events and events[0].kind == "everything":
                notes.append(f"{name}: too many cells to pair up under replace; every query on "
                             "it is first treated as overlapping every other, then the budgets "
                             "are scaled to the exact composed cost")
            elif tm.neighbourhood == "replace":
                notes.append(f"{name}: replace neighbourhood: pairs of cells, conservative where "
                             "two records must share a group (budgets then scaled to the exact "
                             "composed cost)")
            elif tm.unit.max_rows > 1:
                notes.append(f"{name}: units of up to {tm.unit.max_rows} rows: cells of the "
                             "unit-level columns, conservative (budgets then scaled to the exact "
                             "composed cost)")
            else:
                notes.append(f"{name}: the region arrangement has too many cells; some columns' "
                             "constraints were ignored, so more queries count as overlapping "
                             "than do (budgets then scaled to the exact composed cost)")
        out.append(_Table(name, tm, specs, owners, events, exact))
    return out, notes


@dataclass
class _Model:
    """Constraint rows per table: Σ_q A[r, q] x_q + h[r] <= t_table, Σ t <= 1 (normalised)."""

    tables: list[str]
    A: list[np.ndarray]  # per table: (rows, n)
    h: list[np.ndarray]  # per table: (rows,)
    events: list[list[Event]]
    exact: bool


def _prune(A: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop duplicate rows, and dominated rows (another row is >= everywhere) when there are
    not too many to compare; returns the kept indices (in order)."""
    if len(A) <= 1:
        return A, h, np.arange(len(A))
    M = np.hstack((A, h[:, None]))
    _, first = np.unique(M, axis=0, return_index=True)
    idx = np.sort(first)
    if len(idx) <= 1500:
        order = idx[np.argsort(-M[idx].sum(axis=1), kind="stable")]
        kept: list[int] = []
        K = np.zeros((0, M.shape[1]))
        for r in order.tolist():
            if len(K) and np.any(np.all(K >= M[r] - 1e-15, axis=1)):
                continue
            kept.append(r)
            K = np.vstack((K, M[r][None, :]))
        idx = np.array(sorted(kept))
    return A[idx], h[idx], idx


def _unit_weight(d: Demand, m: MechanismSpec, j: int) -> Fraction:
    """Mechanism m's weight j per unit of its query's budget weight j."""
    ref = Fraction(d.reference.weights()[j])
    return Fraction(m.cost.weights()[j]) / ref if ref > 0 else Fraction(0)


def _build_model(arr: Sequence[_Table], demands: Sequence[Demand], kind: type[PrivacyValue],
                 budget_w: Fraction, j: int, *, prune: bool = True) -> _Model:
    """The linear model of coordinate j (fractions of the budget's weight ``budget_w``)."""
    n = len(demands)
    model = _Model([], [], [], [], all(t.exact for t in arr))
    for t in arr:
        units = [_unit_weight(demands[q], m, j) if q is not None
                 else Fraction(m.cost.weights()[j]) for m, q in zip(t.specs, t.owners)]
        raw_rows = np.zeros((len(t.events), n))
        hist = np.zeros(len(t.events))
        for r, ev in enumerate(t.events):
            for i, v in ev.mechanisms.items():
                q = t.owners[i]
                if q is None:
                    hist[r] += float(v * units[i])
                else:
                    raw_rows[r, q] += float(v * units[i])
        hist /= float(budget_w)
        # caps: a change never costs a query more than the query alone can cost
        if t.exact:
            caps = raw_rows.max(axis=0) if len(raw_rows) else np.zeros(n)
            h_cap = float(hist.max()) if len(hist) else 0.0
        else:
            caps = np.zeros(n)
            for q in sorted({q for q in t.owners if q is not None}):
                own = [m for m, o in zip(t.specs, t.owners) if o == q]
                w = Fraction(compose(own, {t.name: t.model}, kind).cost.weights()[j])
                ref = Fraction(demands[q].reference.weights()[j])
                caps[q] = float(w / ref) if ref > 0 else 0.0
            hs = [m for m, o in zip(t.specs, t.owners) if o is None]
            h_cap = (float(Fraction(compose(hs, {t.name: t.model}, kind).cost.weights()[j])
                           / budget_w) if hs else 0.0)
        A = np.minimum(raw_rows, caps[None, :])
        h = np.minimum(hist, h_cap)
        if prune:
            A, h, kept = _prune(A, h)
        else:
            kept = np.arange(len(A))
        model.tables.append(t.name)
        model.A.append(A)
        model.h.append(h)
        model.events.append([t.events[i] for i in kept.tolist()])
    return model


_EXACT_RULE = ("general composition theorem: max over the cells of the region arrangement of the "
               "sum of the mechanisms one record affects (CSF'24 Thm IV.11; a GROUP BY pays one "
               "group, Thm IV.12)")


def _exact_total(arr: Sequence[_Table], costs: Sequence[Sequence[PrivacyValue]],
                 kind: type[PrivacyValue]) -> Composition:
    """The composed cost from exact events (add/remove, one row per unit): per table the max
    over cells of the summed weights, per coordinate; tables add. ``costs[t][i]`` is the cost of
    mechanism i of table t."""
    q = len(kind.zero().weights())
    totals = [Fraction(0)] * q
    witness: list[str] = []
    for t, cs in zip(arr, costs):
        if not t.events:
            continue
        ws = [c.weights() for c in cs]
        approx = np.array([[sum(float(ws[i][j]) * v for i, v in ev.mechanisms.items())
                            for j in range(q)] for ev in t.events])
        for j in range(q):
            col = approx[:, j]
            top = float(col.max())
            best, arg = Fraction(0), -1
            for r in np.flatnonzero(col >= top - 1e-9 * max(top, 1e-300)).tolist():
                val = sum((Fraction(ws[i][j]) * v for i, v in t.events[r].mechanisms.items()),
                          Fraction(0))
                if val > best or arg < 0:
                    best, arg = val, r
            totals[j] += best
            if j == 0 and arg >= 0:
                witness += [t.specs[i].id for i in t.events[arg].mechanisms]
    if not witness and not any(totals):
        return Composition(kind.zero(), (), "nothing released", True, "no mechanisms")
    rule = _EXACT_RULE + ("; summed over tables" if len(arr) > 1 else "")
    return Composition(kind.from_weights(tuple(totals)), tuple(witness),
                       f"the worst cell affects {len(witness)} mechanism(s)", True, rule)
