"""Why a composition costs what it does: the witness mechanisms, the worst pair (or unit)
in words, and the rule that was applied.

Privacy: explanations read the search's cells and the regions, never data, and change no cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from privplan.accounting.solver.atoms import Cell, _Best
from privplan.accounting.solver.instance import _Instance


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
    keys = set(inst.mechs.key_columns(relevant))
    cols = set(keys)
    chosen = np.zeros(len(inst.mechs), dtype=bool)
    chosen[relevant] = True
    rows = chosen[inst.row_mech]
    constrained = (inst.lo[rows] > 0) | (inst.hi[rows] < inst.sizes - 1)
    cols.update(np.flatnonzero(constrained.any(axis=0)).tolist())
    # a group key's value is its group (one atom); any other column's is the range it is in
    parts = [inst.axes[c].describe(inst.columns[c], cell[c]) if c in keys else
             inst.axes[c].describe_run(inst.columns[c], *_run(inst, rows, c, cell[c]))
             for c in sorted(cols)]
    return "any record" if not parts else "a record with " + ", ".join(parts)


def _run(inst: _Instance, rows: np.ndarray, c: int, atom: int) -> tuple[int, int]:
    """The widest run of atoms around ``atom`` of column ``c`` that every box of ``rows``
    treats alike (all inside it or all outside): the record's value described as the whole
    range the queries name (``age <= 17``), not one atom of it (``age < 17``)."""
    if atom == 0:
        return 0, 0
    lo, hi = inst.lo[rows, c], inst.hi[rows, c]
    inside = (lo <= atom) & (atom <= hi)
    below, above = hi < atom, lo > atom
    first = max(1, int(lo[inside].max(initial=1)), int(hi[below].max(initial=0)) + 1)
    last = min(int(inst.sizes[c]) - 1, int(hi[inside].min(initial=inst.sizes[c] - 1)),
               int(lo[above].min(initial=inst.sizes[c])) - 1)
    return first, last


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
