"""A session asking the same question again skips the single-record search when the previous
worst record reaches the bound (``records._still_the_max``), and still composes exactly.

Oracle: ``compose`` of every admitted mechanism from scratch (no incremental path, no
shortcut) after every round; and the shortcut must really be taken on the repeated rounds,
and not taken when a new query's regions miss the previous worst record.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from unittest import mock

import pytest

from privplan.accounting.accountant import Accountant
from privplan.accounting.definitions import PureDP
from privplan.accounting.model import MechanismSpec, Partition, TableModel, UnitModel
from privplan.accounting.solver import compose, records
from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet, Interval

TABLES = {"t": TableModel("add_remove", UnitModel(1, frozenset()))}


def _spec(i: str, eps: int, box: Box, keys: tuple[str, ...] | None = None) -> MechanismSpec:
    partition = Partition(keys) if keys else None
    return MechanismSpec(i, "t", Region((box,)), PureDP(Fraction(eps)), partition)


def _dashboard() -> list[MechanismSpec]:
    """A grouped COUNT/SUM/AVG by hospital, and a filtered SUM (age >= 65)."""
    every = Box.of({})
    adults = Box.of({"age": ColumnSet.of([Interval(65, None, True, False)])})
    return [_spec("count", 1, every, ("hospital",)), _spec("sum", 2, every, ("hospital",)),
            _spec("old", 3, adults)]


def _taken(calls: list[bool]) -> mock._patch:  # type: ignore[type-arg]
    real = records._still_the_max

    def spy(*args: object) -> object:
        out = real(*args)  # type: ignore[arg-type]
        calls.append(out is not None)
        return out

    return mock.patch.object(records, "_still_the_max", spy)


@pytest.mark.parametrize("rounds", [2, 6])
def test_repeated_question_composes_as_from_scratch(rounds: int) -> None:
    acc = Accountant(TABLES, PureDP, exact_limit=10**7)
    admitted: list[MechanismSpec] = []
    calls: list[bool] = []
    with _taken(calls):
        for r in range(rounds):
            batch = [replace(m, id=f"q{r}.{m.id}") for m in _dashboard()]
            total = acc.admit(batch)
            admitted += batch
            scratch = compose(admitted, TABLES, PureDP, exact_limit=10**7)
            assert total.cost == scratch.cost and total.exact == scratch.exact
            assert total.cost == PureDP(Fraction(6 * (r + 1)))  # one record in all of them
    assert calls and all(calls)  # (every round after the first skipped the search)


def test_a_question_missing_the_worst_record_searches() -> None:
    """After the dashboard, a query on young rows only: the old worst record (age >= 65) is not
    in it, so the bound is not reached there; the search runs and finds the true max."""
    acc = Accountant(TABLES, PureDP, exact_limit=10**7)
    first = _dashboard()
    acc.admit(first)
    young = _spec("young", 10, Box.of({"age": ColumnSet.of([Interval(None, 30, False, False)])}))
    calls: list[bool] = []
    with _taken(calls):
        total = acc.admit([young])
    assert calls == [False]
    assert total.cost == compose([*first, young], TABLES, PureDP, exact_limit=10**7).cost
    assert total.cost == PureDP(Fraction(13))  # count + sum + young (3 + 10)
