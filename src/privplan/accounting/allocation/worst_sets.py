"""The worst affected set of a planned batch, table by table, for any composition theorem.

:func:`worst_set_total` is the frame :func:`~.advanced.advanced_total` and
:func:`~.pld.pld_total` share: group the (ε, δ) mechanisms by table, take the maximal
co-affected sets of each (:func:`~.arrangement.co_affected_sets`), apply the theorem to each set
(``event_cost``) and keep the largest ε and δ; tables add (one person may be in every table).
Why the max over maximal sets is enough: every bound used grows with the set, and every change a
neighbouring pair makes affects a subset of one event (CSF'24 §VI; general theorem across sets,
Thm IV.11).

Privacy: the max over maximal co-affected sets, tables added, bounds every neighbouring change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

from privplan.accounting.allocation.arrangement import co_affected_sets
from privplan.accounting.allocation.interface import Event
from privplan.accounting.definitions import ApproxDP
from privplan.accounting.model import MechanismSpec, TableModel
from privplan.accounting.solver import Composition
from privplan.errors import PolicyError

Bound = tuple[Fraction, Fraction]
EventCost = Callable[[Event, Sequence[MechanismSpec], TableModel], Bound]


def worst_set_total(
    mechanisms: Sequence[MechanismSpec], tables: Mapping[str, TableModel], *, theorem: str,
    rule: str, event_cost: EventCost, limit: int,
    upper: EventCost | None = None,
) -> Composition:
    """Σ over tables of the componentwise max over events of ``event_cost``.

    ``upper`` (optional) is another valid (ε, δ) of an event, cheap to compute (the basic sum):
    events are visited in decreasing ε of it, and an event whose ``upper`` is componentwise
    within the running maximum is skipped — the maximum is then a valid bound for it already.
    ``theorem`` names the rule in errors; ``rule`` is the composition's explanation (the tables'
    sum appended).
    """
    if not mechanisms:
        return Composition(ApproxDP.zero(), (), "nothing released", True, "no mechanisms")
    for m in mechanisms:
        if m.cost.delta_or_none() is None:  # (the theorems read (ε, δ) costs)
            raise TypeError(f"{theorem} is for ApproxDP costs; {m.id!r} costs "
                            f"{type(m.cost).__name__}")
    by_table: dict[str, list[MechanismSpec]] = {}
    for m in mechanisms:
        by_table.setdefault(m.table, []).append(m)
    eps_total, delta_total = Fraction(0), Fraction(0)
    witness: list[str] = []
    details, all_exact = [], True
    for name, specs in by_table.items():
        if name not in tables:
            raise PolicyError(f"table {name!r} has no neighbourhood/unit model in the policy")
        model = tables[name]
        events, exact = co_affected_sets(specs, model, limit=limit)
        all_exact &= exact
        if upper is not None:
            bounds = {id(ev): upper(ev, specs, model) for ev in events}
            events = sorted(events, key=lambda ev: -bounds[id(ev)][0])
        best_e, best_d = Fraction(0), Fraction(0)
        best_ids: tuple[str, ...] = ()
        for ev in events:
            if upper is not None:
                ue, ud = bounds[id(ev)]
                if ue <= best_e and ud <= best_d:
                    continue  # it cannot raise either maximum
            e, d = event_cost(ev, specs, model)
            if e > best_e or not best_ids:
                best_ids = tuple(specs[i].id for i in ev.mechanisms)
            best_e, best_d = max(best_e, e), max(best_d, d)
        eps_total += best_e
        delta_total += best_d
        witness += list(best_ids)
        details.append(f"in {name}: the worst change affects {len(best_ids)} mechanism(s)")
    if len(by_table) > 1:
        rule += "; summed over tables"
    return Composition(ApproxDP.from_weights((eps_total, delta_total)), tuple(witness),
                       "; ".join(details), all_exact, rule)
