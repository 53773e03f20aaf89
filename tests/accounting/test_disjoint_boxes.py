"""``_disjoint`` skips a box equal to an earlier one, and returns exactly what the plain
subtraction returns (the same pieces, in the same order)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from privplan.accounting.solver.atoms import Cell2, _disjoint, _subtract


def _plain(rows: list[Cell2]) -> list[Cell2]:
    """The subtraction without the skip (every box subtracted from the pieces kept so far)."""
    out: list[Cell2] = []
    for b in rows:
        pieces = [b]
        for r in out:
            pieces = [q for p in pieces for q in _subtract(p, r)]
            if not pieces:
                break
        out.extend(pieces)
    return out


def _box(rng: random.Random, d: int) -> Cell2:
    out = []
    for _ in range(d):
        lo = rng.randrange(6)
        out.append((lo, lo + rng.randrange(4)))
    return tuple(out)


def test_repeated_boxes_give_the_same_pieces_in_the_same_order() -> None:
    rng = random.Random(7)
    for _ in range(300):
        d = rng.randrange(1, 4)
        distinct = [_box(rng, d) for _ in range(rng.randrange(1, 12))]
        rows = [rng.choice(distinct) for _ in range(rng.randrange(1, 30))]
        assert _disjoint(rows) == _plain(rows)


def test_a_group_by_s_boxes_repeated_per_aggregate() -> None:
    groups = [((g, g), (0, 9)) for g in range(5)]
    narrowed = [((g, g), (1, 9)) for g in range(5)]
    rows = groups + narrowed + groups  # COUNT, SUM over non-NULL, and AVG's count again
    assert _disjoint(rows) == _plain(rows) == groups


BOX = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 4)).map(lambda t: (t[0], t[0] + t[1])),
               min_size=2, max_size=2).map(tuple)


@settings(max_examples=60, deadline=None)
@given(st.lists(BOX, min_size=65, max_size=150))
def test_disjoint_pieces_as_before_with_many_boxes(rows: list[Any]) -> None:
    """The same pieces, in the same order, whether many boxes (the overlap index) or few."""
    assert _disjoint(rows) == _plain(rows)
    assert _disjoint(rows[:5]) == _plain(rows[:5])
