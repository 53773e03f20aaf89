"""Box groups carried forward as an instance grows equal the groups made from scratch.

The single-record search merges rows with equal boxes (``records._distinct_rows``) by ids kept
as the instance grows (:mod:`privplan.accounting.solver.box_groups`). New boundary values move
atoms and new columns widen every old row; the ids must still mark exactly the rows whose
boxes are equal. Oracle: the groups computed from scratch over the grown instance's rows.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privplan.accounting.solver.box_groups import BoxGroups, box_groups
from privplan.accounting.solver.instance import _Instance

from .test_solver_bruteforce import Case, cases


def _partition(ids: np.ndarray) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for row, g in enumerate(ids.tolist()):
        groups.setdefault(g, []).append(row)
    return sorted(groups.values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(unit=False), st.integers(1, 3))
def test_carried_groups_equal_groups_from_scratch(case: Case, times: int) -> None:
    # the mechanisms one at a time, each asked ``times`` times (equal boxes to merge), with
    # the groups made at every step, so each extension carries them forward
    specs = [replace(m, id=f"{m.id}.r{i}") for m in case.mechs for i in range(times)]
    inst = _Instance.empty(1, 1 << 20)
    for spec in specs:
        box_groups(inst)
        inst = inst.extend([spec])[0]
        carried = inst.box_groups
        assert carried is not None
        scratch = BoxGroups.of(inst.lo, inst.hi)
        assert _partition(carried.ids) == _partition(scratch.ids)
        # every row's box is the box of its group's first row
        first = np.array(carried.first)[carried.ids]
        assert (inst.lo == inst.lo[first]).all() and (inst.hi == inst.hi[first]).all()
