"""Budget allocation for a planned batch of queries (a report), under the general composition theorem.

A report runs the same queries every period, with parameters fixed before any answer is seen.
Giving query q the budget b_q scales every mechanism of q linearly (the planner splits a query's
budget over its own mechanisms through the composition theorem, :mod:`privplan.planning.costs`), so with
u_i the cost of mechanism i per unit of its query's budget, the composed cost is

    cost(b) = max over neighbouring changes e of  Σ_q b_q · a_q(e)   (+ what the ledger already holds)

with a_q(e) = Σ_{i of q affected by e} v_i(e) · u_i (v_i = how many groups of i the change pays,
CSF'24 Thms IV.11, IV.12, Cor. IV.13, Example IV.5), capped by q's own composed unit cost (a change
never costs q more than q alone can cost: that is what the planner calibrated to). Only *maximal*
sets of co-affected mechanisms matter (coefficients grow with the set), so one linear constraint
per cell of the region arrangement is enough:

* add/remove, one row per unit: the cells of the arrangement of all regions. Every column a
  region constrains is cut into atoms (NULL, each end point, the open gaps between them, as the
  solver does); each atom's *coverage class* is the set of region boxes containing it; a cell is
  one atom per column and holds the AND of its classes. Only classes maximal within their column
  can form a maximal cell, so the maximal cells are found among products of those
  (:func:`co_affected_sets`). Exact — the linear model *is* the composed cost, which is then
  computed from the cells in exact fractions (no solver call needed).
* replace: a change moves a record between two cells, so the events are pairs of maximal cells
  (a GROUP BY holding both pays two groups); conservative where the solver knows the two records
  must share a group key (the cap above mostly repairs that).
* units of k > 1 rows: a unit stays inside one cell of the unit-level columns; it may meet every
  mechanism meeting that cell, as much as :func:`~privplan.accounting.model.unit_multiplier`
  allows (a flat GROUP BY min(m, k) groups; a cost growing with rows k or more). Conservative.
* several private tables: table maxima add (one person may be in every table): an epigraph
  variable per table.
* more than ``cell_limit`` products: the column with most classes is merged (its constraints are
  ignored, so regions only grow) until few enough remain — conservative, never optimistic.

Variance: a query's noise std scales as 1/b (Laplace, pure DP / the ε of (ε, δ)) or 1/sqrt(b)
(Gaussian, ρ; for μ-GDP in the weight μ²). With κ_q the query's relative variance at the whole
budget (1, or (std / target_error)² when a target is given) and w_q its weight, the relative
variance is r_q = κ_q (B / b_q)^{2p}, p = 1 or 1/2. Objectives:

* ``max``: minimise max_q w_q r_q — a linear program (maximise s with b_q ≥ s·(w_q κ_q)^{1/2p});
  ties are then broken by the weighted sum, so leftover budget (e.g. in disjoint cells) is used;
* ``weighted_sum``: minimise Σ_q w_q r_q — convex (Σ c/b^{2p} over a polyhedron), SLSQP started
  from the max-min point (feasible).

Targets are hard: b_q ≥ B κ_q^{1/2p}; if the constraints cannot hold, BudgetExceededError says
how much budget they need. The optimum is never worse than the best *uniform* allocation (it is
kept as a safety net), and so never worse than the equal split B/n of sequential composition.

Fitting: the fractions are turned into exact budgets (rounded down to 5 significant digits,
which keeps the charged costs on a small-denominator grid the solver composes exactly), composed
with the ledger's history — from the cells when they are exact, else with
:func:`~privplan.accounting.solver.compose` — and scaled to fit: down if rounding pushed over, up
when a conservative model left budget unused (the cost is homogeneous in the budgets without a
history: one step; else a short bisection). The caller must still verify with its real
accountant (privplan.report.planning simulates the session's admissions).

(ε, δ) reports (:class:`ApproxDP`): counts and sums use Laplace noise, so ε is allocated as above;
δ is only needed by partition selection and is split evenly over the queries that select
(as much as every cell allows). Option ``composition="advanced"``: since a report's parameters are
fixed in advance, any valid composition theorem may be applied to the *worst affected set*
(CSF'24 §VI; GCE) — :func:`advanced_total` uses
ε' = min{Σε, ½Σε² + sqrt(2 ln(1/δ')Σε²)} (:func:`~privplan.accounting.conversions.
advanced_composition`) per maximal co-affected set, with δ' set aside from the δ budget. The
allocation then solves the basic and the advanced model (a convex quadratic constraint per cell)
and improves the better one by re-choosing, per cell, the branch that binds less. This is *not*
what a session's adaptive accountant does (it sums), so it is only allowed on a fresh ledger;
the audit file records both figures. Option ``composition="pld"`` (:mod:`.pld`,
:func:`~privplan.accounting.allocation.pld.pld_total`) composes the canonical (ε, δ) pairs of
every maximal co-affected set optimally with privacy-loss distributions
(:mod:`privplan.accounting.pld`); the allocation is the basic one, scaled up by bisection while
the PLD total fits. The same restrictions apply.

This package is pure: no engine, no pandas, no duckdb. Its modules, in the order a call runs:
:mod:`.interface` (inputs and outputs), :mod:`.arrangement` (co-affected sets),
:mod:`.linear_model` (the constraint rows, the exact composed cost), :mod:`.structure`
(overlapping and disjoint queries), :mod:`.optimisation` (LP and SLSQP), :mod:`.budgets`
(exact budgets, fitting), :mod:`.advanced` (advanced composition) and :mod:`.entry`
(:func:`allocate`).

Privacy: events over-approximate what one change affects, so allocations never under-charge.
"""

from __future__ import annotations

from privplan.accounting.allocation.advanced import advanced_total
from privplan.accounting.allocation.arrangement import DEFAULT_CELL_LIMIT, co_affected_sets
from privplan.accounting.allocation.entry import allocate
from privplan.accounting.allocation.interface import (
    Allocation,
    Baseline,
    Demand,
    Event,
    Structure,
    noise_exponent,
    round_down,
)

__all__ = [
    "DEFAULT_CELL_LIMIT",
    "Allocation",
    "Baseline",
    "Demand",
    "Event",
    "Structure",
    "advanced_total",
    "allocate",
    "co_affected_sets",
    "noise_exponent",
    "round_down",
]
