"""A report's plan: what it would release, how its budget is split, what it costs.

:class:`ReportPlan` (one :class:`PlannedReportQuery` per query) is the answer of
:func:`privplan.report.plan_report` and what ``privplan report plan`` prints (``str``) or dumps
(``to_json``); a run keeps it for the audit file. It holds results only; how they are found is
in :mod:`privplan.report.planning`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from privplan.accounting.allocation import Allocation
from privplan.accounting.solver import Composition
from privplan.planning.costs import PlannedQuery
from privplan.report.expected_errors import ColumnError
from privplan.report.spec import ReportQuery, ReportSpec, budget_dict


@dataclass
class PlannedReportQuery:
    query: ReportQuery
    budget: Any
    fraction: float
    relative_variance: float
    planned: PlannedQuery
    explanation: Any
    errors: list[ColumnError]
    targets: dict[str, tuple[float, float]]  # column -> (expected std, target)

    @property
    def targets_met(self) -> bool | None:
        if not self.targets:
            return None
        return all(std <= tgt * (1 + 1e-6) for std, tgt in self.targets.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.query.to_dict(),
            "budget": self.budget.describe(), "budget_exact": budget_dict(self.budget),
            "fraction": self.fraction, "relative_variance": self.relative_variance,
            "query_cost": self.planned.composition.cost.describe(),
            "query_rule": self.planned.composition.rule,
            "columns": [e.to_dict() for e in self.errors],
            "targets": {c: {"expected_std": s, "target": t} for c, (s, t) in self.targets.items()},
            "targets_met": self.targets_met,
            "mechanisms": [m.to_dict() for m in self.explanation.mechanisms],
        }


@dataclass
class ReportPlan:
    """What a report would release, how its budget is split, what it costs, how accurate it is."""

    spec: ReportSpec
    allocation: Allocation
    queries: list[PlannedReportQuery]
    report_total: Composition  # the report's own mechanisms, composed (advanced: advanced)
    basic_total: Composition  # the same by the general theorem with sums
    total_before: Any  # what the ledger held before
    projected: Composition  # the ledger's total with the report (the session's accountant)
    history: tuple[Any, ...] = ()  # the ledger's entries before the report
    notes: list[str] = field(default_factory=list)

    @property
    def budget(self) -> Any:
        return self.spec.budget

    @property
    def sequential(self) -> Any:
        total = type(self.budget).zero()
        for q in self.queries:
            total = total + q.budget
        return total

    def specs(self) -> list[Any]:
        """Every mechanism of the report, with ids unique across queries."""
        return [replace(m.spec, id=f"{q.query.name}:{m.spec.id}")
                for q in self.queries for m in q.planned.measures]

    def to_dict(self) -> dict[str, Any]:
        a = self.allocation
        return {
            "report": self.spec.name, "database": self.spec.database,
            "budget": self.budget.describe(), "objective": self.spec.objective,
            "composition": self.spec.composition,
            "structure": a.structure.to_dict(),
            "queries": [q.to_dict() for q in self.queries],
            "objective_value": a.objective_value,
            "equal_split": {"objective_value": a.equal_split.objective_value,
                            "budget_each": a.equal_split.budgets[0].describe(),
                            "composed": a.equal_split.composed.describe()},
            "uniform": {"objective_value": a.uniform.objective_value,
                        "budget_each": a.uniform.budgets[0].describe(),
                        "composed": a.uniform.composed.describe()},
            "report_total": self.report_total.cost.describe(),
            "report_rule": self.report_total.rule,
            "basic_total": self.basic_total.cost.describe(),
            "sequential_total": self.sequential.describe(),
            "total_before": self.total_before.describe(),
            "projected_total": self.projected.cost.describe(),
            "within_budget": bool(self.projected.cost <= self.budget)
            if self.spec.composition == "basic" else bool(self.report_total.cost <= self.budget),
            "model_exact": a.model_exact,
            "notes": list(a.notes) + list(self.notes),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str, ensure_ascii=False)

    def __str__(self) -> str:
        a, s = self.allocation, self.allocation.structure
        head = (f"Report '{self.spec.name}': {len(self.queries)} queries over "
                f"{self.spec.database}; budget {self.budget.describe()}; objective "
                f"{self.spec.objective} of relative variances")
        lines = [head]
        lines.append("")
        lines.append("Overlap structure (one neighbouring change can affect these together):")
        lines += [f"  {{{', '.join(g)}}}" for g in s.groups[:20]]
        if len(s.groups) > 20:
            lines.append(f"  ... {len(s.groups) - 20} more groups (see --json)")
        n_pairs = len(s.overlapping) + len(s.disjoint)
        lines.append(f"  pairs: {len(s.disjoint)} of {n_pairs} disjoint (compose by max), "
                     f"{len(s.overlapping)} overlapping (add up); "
                     f"{len(s.components)} independent component(s)")
        for q in self.queries:
            over = s.overlaps_of(q.query.name)
            text = ", ".join(over[:8]) + (f", ... ({len(over)})" if len(over) > 8 else "")
            lines.append(f"  {q.query.name}: overlaps {text or 'nothing'}; disjoint from "
                         f"{len(s.disjoint_from(q.query.name))}")
        lines.append("")
        lines.append("Allocation and expected errors:")
        width = max(len(q.query.name) for q in self.queries)
        for q in self.queries:
            errs = "; ".join(
                f"{e.column}: std {e.std:.4g}, 95% ±{e.halfwidth_95:.4g}" if e.std is not None
                else f"{e.column}: {e.method.split('; ', 1)[1]}" if "rows of rank" in e.method
                else f"{e.column}: per-row interval" for e in q.errors)
            tgt = ""
            if q.targets:
                tgt = "  [target met]" if q.targets_met else "  [TARGET MISSED]"
            lines.append(f"  {q.query.name:<{width}}  {q.budget.describe():<22} "
                         f"({q.fraction:6.1%})  rel.var {q.relative_variance:8.3g}  {errs}{tgt}")
        lines.append("")
        lines.append(f"Objective ({self.spec.objective}): {a.objective_value:.4g}; equal split "
                     f"under sequential composition ({_first(a.equal_split.budgets[0])} each): "
                     f"{a.equal_split.objective_value:.4g}")
        lines.append(f"Report cost (composed): {self.report_total.cost.describe()}  "
                     f"[{self.report_total.rule}]")
        if self.spec.composition in ("advanced", "pld"):
            lines.append(f"  by the general theorem with sums: {self.basic_total.cost.describe()}")
        lines.append(f"Sequential composition would charge: {self.sequential.describe()}")
        if self.spec.composition in ("advanced", "pld"):
            lines.append(f"Ledger: a new ledger whose budget is the summed figure "
                         f"{self.basic_total.cost.describe()} (its accountant adds ε and δ); the "
                         f"audit claims the {self.spec.composition} total "
                         f"{self.report_total.cost.describe()}")
        else:
            lines.append(f"Ledger: {self.total_before.describe()} -> "
                         f"{self.projected.cost.describe()} of {self.budget.describe()}")
        for n in list(a.notes) + self.notes:
            lines.append(f"Note: {n}")
        return "\n".join(lines)


def _first(b: Any) -> str:
    """The allocated parameter of a budget (ε, ρ or μ) for display."""
    return b.describe().split(",")[0]
