"""Optimal composition inside every maximal co-affected set (option ``composition="pld"``).

A report's parameters are fixed before any answer is seen, so any valid composition theorem may
be applied to the worst affected set (CSF'24 §VI). :func:`pld_total` composes, per maximal
co-affected set (:func:`~privplan.accounting.allocation.arrangement.co_affected_sets`), the
canonical (ε, δ) pair of every affected group (:mod:`privplan.accounting.pld`): that pair
dominates *any* mechanism of that cost, so nothing about the noise is assumed.

Units of several rows: ``Event.mechanisms[i] = v`` counts one-group-*one-row* costs. For a flat
cost that is v groups (v mechanisms). For a cost growing with rows, r rows of a unit in one group
are *one* mechanism at r times the sensitivity, of cost (rε, r·e^{(r−1)ε}·δ) (group privacy),
never r independent copies (a Laplace at shift r puts half its loss mass at rε). Which groups a
unit fills is not known, so the ε of every *maximal* arrangement (partitions of the rows into at
most m groups of at most c rows; fewer rows are dominated: a row more in a group or a group more
only adds loss) is computed and the largest taken; when there are too many, the event falls back
to the basic sum.

Privacy: groups enter as dominating (ε, δ) pairs, r rows as one release; the worst arrangement wins.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from itertools import combinations_with_replacement, product
from typing import cast

from privplan.accounting import pld
from privplan.accounting.allocation.arrangement import DEFAULT_CELL_LIMIT, _multiplicity
from privplan.accounting.allocation.interface import Event
from privplan.accounting.allocation.worst_sets import worst_set_total
from privplan.accounting.definitions import ApproxDP, Number
from privplan.accounting.model import MechanismSpec, TableModel, growth_factor
from privplan.accounting.solver import Composition
from privplan.errors import PolicyError

_MAX_ARRANGEMENTS = 256  # arrangement combinations composed per event before the basic sum
Pairs = tuple[tuple[Fraction, Fraction], ...]


def pld_total(
    mechanisms: Sequence[MechanismSpec], tables: Mapping[str, TableModel], delta: Number,
    *, limit: int = DEFAULT_CELL_LIMIT, interval: float = pld.DEFAULT_INTERVAL,
) -> Composition:
    """The composed (ε, δ) cost of a *non-adaptive* batch, by PLD composition inside every
    maximal co-affected set, at the report's ``delta``.

    Per table (δ split evenly over the tables, whose bounds add: one person may be in each):
    max over the events of min{PLD ε at δ, Σε when Σδ <= δ}. For each neighbouring pair both
    bounds hold (the parameters were fixed in advance), the affected set is inside an event and
    the profile only grows with the set, so the result is never below the truth.
    """
    n_tables = len({m.table for m in mechanisms})
    target = Fraction(delta) / max(n_tables, 1)
    if mechanisms and not 0 < target < 1:
        raise PolicyError(f"PLD composition needs 0 < δ < 1, got {float(Fraction(delta)):.3g}")
    cache: dict[Pairs, float] = {}

    def cost(ev: Event, specs: Sequence[MechanismSpec], model: TableModel
             ) -> tuple[Fraction, Fraction]:
        return event_cost(ev, specs, model, target, interval, cache)

    def basic(ev: Event, specs: Sequence[MechanismSpec], model: TableModel
              ) -> tuple[Fraction, Fraction]:
        return _basic(ev, specs, model.unit.max_rows)  # (valid for the event as well)

    rule = ("optimal composition by privacy-loss distributions (canonical (ε, δ) pairs, "
            f"pessimistic grid h = {interval:g}) inside every maximal co-affected set, at "
            f"δ = {float(Fraction(delta)):.3g}{' split evenly over the tables' if n_tables > 1 else ''}"
            "; parameters fixed before any answer (planned batch); general composition theorem "
            "across sets (CSF'24 Thm IV.11)")
    return worst_set_total(mechanisms, tables, theorem="PLD composition", rule=rule,
                           event_cost=cost, limit=limit, upper=basic)


def event_cost(ev: Event, specs: Sequence[MechanismSpec], model: TableModel, target: Fraction,
               interval: float = pld.DEFAULT_INTERVAL,
               cache: dict[Pairs, float] | None = None) -> tuple[Fraction, Fraction]:
    """A valid (ε, δ) for every change the event covers: the PLD ε at ``target`` (the max over
    the arrangements of the units' rows), or the basic sum when that is smaller (and its δ fits)
    or when there are too many arrangements."""
    cache = {} if cache is None else cache
    be, bd = _basic(ev, specs, model.unit.max_rows)
    choices = [_group_choices(specs[i], v, model) for i, v in ev.mechanisms.items()]
    if math.prod(len(c) for c in choices) > _MAX_ARRANGEMENTS:
        return be, bd
    worst = 0.0
    for combo in product(*choices):
        pairs = tuple(sorted(p for part in combo for p in part))
        if pairs not in cache:
            counts = Counter(pairs)
            cache[pairs] = pld.compose_counts(dict(counts), interval).epsilon_for_delta(
                float(target))
        worst = max(worst, cache[pairs])
    if bd <= target and be <= Fraction(worst):
        return be, bd
    if math.isinf(worst):
        return be, bd  # the PLD cannot reach δ: the basic pair (its δ may exceed the target)
    return Fraction(worst), target


def _basic(ev: Event, specs: Sequence[MechanismSpec], k: int) -> tuple[Fraction, Fraction]:
    """Σε and Σδ as the basic model charges them (v one-row costs), with group privacy's
    e^{(c−1)ε} on δ for rows sharing a group (c = the most rows one group can hold)."""
    e, d = Fraction(0), Fraction(0)
    for i, v in ev.mechanisms.items():
        cost = cast(ApproxDP, specs[i].cost)
        e += v * cost.exact_epsilon
        if cost.exact_delta:
            c = _rows_cap(specs[i], k)
            grow = Fraction(math.exp(float((c - 1) * cost.exact_epsilon)) * (1 + 1e-12))
            d += v * cost.exact_delta * (grow if c > 1 and specs[i].growth != "flat" else 1)
    return e, d


def _rows_cap(spec: MechanismSpec, k: int) -> int:
    """The most rows of one unit one group of ``spec`` can hold."""
    p = spec.partition
    return min(p.max_rows_per_group or k, k) if p is not None else k


def _group_choices(spec: MechanismSpec, v: int, model: TableModel) -> list[Pairs]:
    """The possible group costs (canonical pairs) one change makes mechanism ``spec`` pay."""
    cost = cast(ApproxDP, spec.cost)
    one = (cost.exact_epsilon, cost.exact_delta)
    k = model.unit.max_rows
    if k == 1 or spec.growth == "flat":
        return [(one,) * v]
    mult = max(_multiplicity(spec, model), 1)
    units = max(1, v // mult)
    arrangements = list(_arrangements(spec, model))
    out: list[Pairs] = []
    for pick in combinations_with_replacement(arrangements, units):
        out.append(tuple(_group_pair(spec, r) for rows in pick for r in rows))
        if len(out) > _MAX_ARRANGEMENTS:
            break
    return out


def _group_pair(spec: MechanismSpec, rows: int) -> tuple[Fraction, Fraction]:
    """r rows of one unit in one group: one mechanism at r times the sensitivity, (φ(r)ε,
    r·e^{(r−1)ε}·δ) by group privacy (δ rounded up)."""
    cost = cast(ApproxDP, spec.cost)
    e = growth_factor(spec.growth, rows) * cost.exact_epsilon
    d = cost.exact_delta
    if d and rows > 1:
        d = min(Fraction(1), rows * d * Fraction(
            math.exp(float((rows - 1) * cost.exact_epsilon)) * (1 + 1e-12)))
    return e, d


def _arrangements(spec: MechanismSpec, model: TableModel) -> Iterator[tuple[int, ...]]:
    """Every maximal way a unit's rows can sit in ``spec``'s groups: partitions of
    K = min(k, m·c) into at most m parts of at most c (one part when unpartitioned or the key is
    unit-level). Stops after _MAX_ARRANGEMENTS + 1 (the caller then falls back)."""
    k = model.unit.max_rows
    p = spec.partition
    if p is None:
        yield (k,)
        return
    c = min(p.max_rows_per_group or k, k)
    same = p.key_columns is not None and set(p.key_columns) <= set(model.unit.unit_level_columns)
    m = 1 if same else (p.max_groups_per_unit or k)
    total = min(k, m * c)
    for count, parts in enumerate(_partitions(total, c, m)):
        yield parts
        if count >= _MAX_ARRANGEMENTS:
            return


def _partitions(n: int, cap: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Partitions of n into at most ``parts`` parts, each at most ``cap``, non-increasing."""
    if n == 0:
        yield ()
        return
    if parts == 0:
        return
    for first in range(min(n, cap), 0, -1):
        if first * parts < n:
            break
        for rest in _partitions(n - first, first, parts - 1):
            yield (first,) + rest
