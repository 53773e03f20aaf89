"""Batch reports: the same named queries every period, planned together.

A report spec (YAML) names a database, a policy, a total budget, an objective and the queries::

    name: monthly                      # optional; default: the file's stem
    database: hospital.duckdb          # DuckDB file (relative to this file) or ":memory:"
    register:                          # optional: tables exposed from CSV/Parquet files
      PUMS: data/PUMS.csv
    policy: policy.yaml                # privplan policy (relative to this file) ...
    policy_format: privplan            # ... or `smartnoise` for SmartNoise SQL metadata
    budget: {epsilon: 1.0}             # or {epsilon: 1, delta: 1e-6}, {rho: 0.5}, {mu: 1}
    objective: weighted_sum            # or max  (of the queries' relative variances)
    composition: basic                 # (ε, δ) only: `advanced` or `pld` (privplan.accounting.allocation)
    delta_prime: 1e-7                  # advanced only: the δ' of advanced composition
    ledger: ledger.sqlite              # optional; default: beside the spec, named after it
                                       # without its extension (monthly.yaml -> monthly.ledger.sqlite)
    outputs: [parquet, csv]            # result formats (default both)
    intervals: true                    # each noisy column followed by its 95% interval
                                       # (<col>_low, <col>_high); false: values only
    queries:
      - name: visits_by_hospital       # letters, digits, _ and - (it names the result files)
        sql: SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital
        weight: 2                      # optional (default 1)
      - name: children
        sql: SELECT COUNT(*) AS n FROM visits WHERE age < 18
        target_error: 25               # optional: noise std every count/sum column must reach
                                       # (or {column: std}); a hard requirement

``queries`` may also be a mapping from name to ``{sql, weight, target_error}`` (or to the SQL).

Planning (:func:`plan_report`) plans every query from its text and the policy (nothing is read
from the data), finds which queries a single neighbouring change can affect together (the cells
of the region arrangement), and chooses per-query budgets with
:func:`privplan.accounting.allocation.allocate`: disjoint queries each get the whole budget,
overlapping ones share it so that the objective is minimal. The *relative variance* of a query is
its noise variance divided by the variance it would have alone with the whole budget (or by its
target error squared). The budgets are then verified with the session's real accountant (the
composed total with the ledger's history must be within the budget; budgets are scaled down by a
tiny factor if rounding pushed over — never above).

Running (:func:`run_report`) charges every query through a :class:`~privplan.session.session.Session`
with the spec's ledger (default: beside the spec file, ``monthly.yaml`` ->
``monthly.ledger.sqlite``, so a re-run charges the same budget), writes each result as Parquet
and CSV under ``OUT/results/`` and an audit file ``OUT/audit.json`` (:mod:`privplan.audit`) that
``privplan audit verify`` re-checks offline.

The package is cut along those steps: :mod:`~privplan.report.spec` (the spec file),
:mod:`~privplan.report.expected_errors` (each column's noise, read from the plan),
:mod:`~privplan.report.plan` (the plan's records and printout), :mod:`~privplan.report.planning`
(the budget split and its verification), :mod:`~privplan.report.running` (charging and the
audit) and :mod:`~privplan.report.outputs` (the result files).
"""

from __future__ import annotations

from privplan.report.expected_errors import ColumnError, column_errors
from privplan.report.plan import PlannedReportQuery, ReportPlan
from privplan.report.planning import REPORT_EXACT_LIMIT as REPORT_EXACT_LIMIT
from privplan.report.planning import open_session, plan_report
from privplan.report.running import ReportRun, run_report
from privplan.report.spec import ReportQuery, ReportSpec
from privplan.report.spec import budget_dict as budget_dict
from privplan.report.spec import parse_budget as parse_budget

__all__ = [
    "ColumnError",
    "PlannedReportQuery",
    "ReportPlan",
    "ReportQuery",
    "ReportRun",
    "ReportSpec",
    "column_errors",
    "open_session",
    "plan_report",
    "run_report",
]
