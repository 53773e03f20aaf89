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
endpoint value, the open pieces between them; :class:`Axis`). A region becomes disjoint boxes
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

Privacy: the composed cost is the max over neighbouring pairs, or a proven bound above it.

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

from privplan.accounting.solver.atoms import DEFAULT_EXACT_LIMIT
from privplan.accounting.solver.table import (
    Composition,
    SolverState,
    TableSolver,
    compose,
    model_key,
)

__all__ = ["DEFAULT_EXACT_LIMIT", "Composition", "SolverState", "TableSolver", "compose",
           "model_key"]
