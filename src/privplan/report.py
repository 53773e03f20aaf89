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
    composition: basic                 # (ε, δ) only: `advanced` (see accounting/allocation.py)
    delta_prime: 1e-7                  # advanced only: the δ' of advanced composition
    ledger: ledger.sqlite              # optional; default: <spec>.ledger.sqlite beside the spec
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

Running (:func:`run_report`) charges every query through a :class:`~privplan.session.Session`
with the spec's ledger (default ``<spec>.ledger.sqlite`` beside the spec file, so a re-run
charges the same budget), writes each result as Parquet and CSV
under ``OUT/results/`` and an audit file ``OUT/audit.json`` (:mod:`privplan.audit`) that
``privplan audit verify`` re-checks offline.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from privplan.accounting.allocation import (
    Allocation,
    Demand,
    advanced_total,
    allocate,
    noise_exponent,
)
from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP, as_fraction
from privplan.accounting.solver import Composition, compose
from privplan.errors import BudgetExceededError, InternalError, PolicyError, PrivplanError
from privplan.explain import explain_planned
from privplan.mechanisms.accuracy import interval_halfwidth
from privplan.planner import PlannedQuery
from privplan.policy import Policy, load_strict_yaml

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

_SPEC_KEYS = ("name", "description", "database", "register", "policy", "policy_format", "budget",
              "objective", "composition", "delta_prime", "ledger", "outputs", "intervals",
              "queries")
_QUERY_KEYS = ("name", "sql", "weight", "target_error")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
_OUTPUTS = ("parquet", "csv")
_VERIFY_STEPS = 40  # scale-downs tried if the real accountant disagrees with the model
REPORT_EXACT_LIMIT = 1_000_000
"""Search nodes the report session's accountant may use per admission (the interactive default
is much smaller). A report is a batch job: a larger search only makes the composed cost tighter
(the solver's answer is a proven upper bound whatever the limit)."""
_SHRINK = Fraction(1, 10**8)


# ============================================================================== the spec


@dataclass(frozen=True)
class ReportQuery:
    """One named query of a report."""

    name: str
    sql: str
    weight: float = 1.0
    target_error: float | Mapping[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "sql": self.sql, "weight": self.weight}
        if self.target_error is not None:
            out["target_error"] = (dict(self.target_error)
                                   if isinstance(self.target_error, Mapping) else self.target_error)
        return out


@dataclass(frozen=True)
class ReportSpec:
    """A parsed report spec; see the module docstring for the YAML format."""

    name: str
    database: str
    policy: str | Mapping[str, Any]
    budget: Any
    queries: tuple[ReportQuery, ...]
    policy_format: str = "privplan"
    objective: str = "weighted_sum"
    composition: str = "basic"
    delta_prime: Fraction | None = None
    register: Mapping[str, str] = field(default_factory=dict)
    ledger: str | None = None
    outputs: tuple[str, ...] = _OUTPUTS
    intervals: bool = True
    description: str = ""
    source: str | None = None  # the spec file
    sha256: str | None = None  # of the spec file's text

    def ledger_path(self, out_dir: str | Path | None = None) -> Path:
        """The ledger a run charges: the spec's ``ledger``, else one beside the spec file
        (``<spec>.ledger.sqlite``), so running the report again, into a new directory, charges
        the same budget. A spec without a file (built in Python) uses ``OUT/ledger.sqlite``."""
        if self.ledger:
            return Path(self.ledger)
        if self.source:
            src = Path(self.source)
            return src.with_name(src.stem + ".ledger.sqlite")
        if out_dir is None:
            raise PolicyError("this report spec has no file and no `ledger`: name one")
        return Path(out_dir) / "ledger.sqlite"

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, *, database: str | None = None,
             ledger: str | None = None) -> ReportSpec:
        """Read a spec file; ``database``/``ledger`` override the file's (paths as given)."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as err:
            raise PolicyError(f"cannot read the report spec '{p}': {err.strerror}") from None
        try:  # (duplicate keys refused, as in policies: `budget:` twice kept the last one)
            data = load_strict_yaml(text)
        except PolicyError as err:
            raise PolicyError(f"report spec '{p}': {err}") from None
        spec = cls.from_dict(data, base_dir=p.resolve().parent, default_name=p.stem)
        spec = replace(spec, source=str(p), sha256=hashlib.sha256(text.encode()).hexdigest())
        if database is not None:
            spec = replace(spec, database=str(database))
        if ledger is not None:
            spec = replace(spec, ledger=str(ledger))
        return spec

    @classmethod
    def from_dict(cls, data: Any, *, base_dir: str | Path | None = None,
                  default_name: str = "report") -> ReportSpec:
        """Validate a spec mapping; relative paths are taken from ``base_dir``."""
        if not isinstance(data, Mapping):
            raise PolicyError("a report spec must be a mapping with keys "
                              f"{', '.join(_SPEC_KEYS)}")
        _check_keys(data, _SPEC_KEYS, "report spec")
        base = Path(base_dir) if base_dir is not None else None

        def path(value: Any, what: str) -> str:
            if not isinstance(value, str) or not value:
                raise PolicyError(f"report spec: `{what}` must be a path")
            if value == ":memory:" or base is None or Path(value).is_absolute():
                return value
            return str(base / value)

        for key in ("database", "policy", "budget", "queries"):
            if key not in data:
                raise PolicyError(f"report spec: `{key}` is required")
        policy = data["policy"]
        if not isinstance(policy, Mapping):
            policy = path(policy, "policy")
        policy_format = data.get("policy_format", "privplan")
        if policy_format not in ("privplan", "smartnoise"):
            raise PolicyError("report spec: `policy_format` must be privplan or smartnoise")
        register = data.get("register") or {}
        if not isinstance(register, Mapping):
            raise PolicyError("report spec: `register` maps table names to CSV/Parquet paths")
        objective = data.get("objective", "weighted_sum")
        if objective not in ("max", "weighted_sum"):
            raise PolicyError(f"report spec: `objective` must be max or weighted_sum, got "
                              f"{objective!r}")
        composition = data.get("composition", "basic")
        if composition not in ("basic", "advanced"):
            raise PolicyError("report spec: `composition` must be basic or advanced")
        budget = parse_budget(data["budget"])
        if composition == "advanced" and not isinstance(budget, ApproxDP):
            raise PolicyError("report spec: `composition: advanced` needs an (ε, δ) budget "
                              "({epsilon: ..., delta: ...})")
        dp = data.get("delta_prime")
        delta_prime = _fraction(dp, "delta_prime") if dp is not None else None
        outputs = data.get("outputs", list(_OUTPUTS))
        if isinstance(outputs, str):
            outputs = [outputs]
        if not isinstance(outputs, list) or not outputs or any(o not in _OUTPUTS for o in outputs):
            raise PolicyError("report spec: `outputs` is a list of parquet and/or csv")
        intervals = data.get("intervals", True)
        if not isinstance(intervals, bool):
            raise PolicyError(f"report spec: `intervals` is true (each noisy column followed by "
                              f"its 95% interval, the default) or false, got {intervals!r}")
        return cls(
            name=str(data.get("name") or default_name),
            description=str(data.get("description") or ""),
            database=path(data["database"], "database"),
            policy=policy, policy_format=policy_format, budget=budget,
            queries=_parse_queries(data["queries"]), objective=objective,
            composition=composition, delta_prime=delta_prime,
            register={str(k): path(v, f"register.{k}") for k, v in register.items()},
            ledger=path(data["ledger"], "ledger") if data.get("ledger") else None,
            outputs=tuple(dict.fromkeys(outputs)), intervals=intervals,
        )

    def load_policy(self) -> Policy:
        if self.policy_format == "smartnoise":
            return Policy.from_smartnoise_yaml(self.policy)
        if isinstance(self.policy, Mapping):
            return Policy.from_dict(self.policy)
        return Policy.from_yaml(self.policy)

    def query(self, name: str) -> ReportQuery:
        for q in self.queries:
            if q.name == name:
                return q
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "description": self.description, "database": self.database,
            "register": dict(self.register),
            "policy": self.policy if isinstance(self.policy, str) else dict(self.policy),
            "policy_format": self.policy_format, "budget": budget_dict(self.budget),
            "objective": self.objective, "composition": self.composition,
            "delta_prime": str(self.delta_prime) if self.delta_prime is not None else None,
            "ledger": self.ledger, "outputs": list(self.outputs),
            "intervals": self.intervals, "queries": [q.to_dict() for q in self.queries],
            "source": self.source, "sha256": self.sha256,
        }


def _check_keys(data: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    import difflib

    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            raise PolicyError(f"{where}: unknown key `{key}`{hint}; allowed: {', '.join(allowed)}")


def _fraction(value: Any, what: str) -> Fraction:
    try:
        x = as_fraction(value, what)
    except (TypeError, ValueError) as err:
        raise PolicyError(f"report spec: {err}") from None
    if x < 0:
        raise PolicyError(f"report spec: {what} must be non-negative")
    return x


def parse_budget(value: Any) -> Any:
    """``{epsilon}``, ``{epsilon, delta}``, ``{rho}`` or ``{mu}`` → a privacy value."""
    if not isinstance(value, Mapping):
        raise PolicyError("report spec: `budget` is a mapping such as {epsilon: 1.0}, "
                          "{epsilon: 1.0, delta: 1e-6}, {rho: 0.5} or {mu: 1.0}")
    _check_keys(value, ("epsilon", "delta", "rho", "mu"), "report spec budget")
    keys = set(value)
    try:
        if keys == {"epsilon"}:
            out: Any = PureDP(_fraction(value["epsilon"], "epsilon"))
        elif keys == {"epsilon", "delta"}:
            out = ApproxDP(_fraction(value["epsilon"], "epsilon"),
                           _fraction(value["delta"], "delta"))
        elif keys == {"rho"}:
            out = ZCDP(_fraction(value["rho"], "rho"))
        elif keys == {"mu"}:
            out = GDP(_fraction(value["mu"], "mu"))
        else:
            raise PolicyError("report spec: `budget` takes epsilon (with optional delta), rho or "
                              f"mu — got {', '.join(sorted(keys)) or 'nothing'}")
    except ValueError as err:
        raise PolicyError(f"report spec budget: {err}") from None
    if out.is_zero():
        raise PolicyError("report spec: the budget must be positive")
    return out


def budget_dict(b: Any) -> dict[str, str]:
    names = {PureDP: ("epsilon",), ApproxDP: ("epsilon", "delta"), ZCDP: ("rho",), GDP: ("mu",)}
    return {n: str(p) for n, p in zip(names[type(b)], b._params)}


def _parse_queries(raw: Any) -> tuple[ReportQuery, ...]:
    items: list[Mapping[str, Any]] = []
    if isinstance(raw, Mapping):
        for name, body in raw.items():
            if isinstance(body, str):
                items.append({"name": name, "sql": body})
            elif isinstance(body, Mapping):
                if "name" in body and body["name"] != name:
                    raise PolicyError(f"report query `{name}`: its `name` says {body['name']!r}")
                items.append({**body, "name": name})
            else:
                raise PolicyError(f"report query `{name}`: give its SQL or {{sql: ..., weight: ...}}")
    elif isinstance(raw, list):
        for i, body in enumerate(raw):
            if not isinstance(body, Mapping):
                raise PolicyError(f"report query #{i + 1}: each query is a mapping with name and sql")
            items.append(body)
    else:
        raise PolicyError("report spec: `queries` is a list of {name, sql, ...} or a mapping")
    if not items:
        raise PolicyError("report spec: `queries` is empty. List at least one query, e.g. "
                          "`queries: [{name: n, sql: SELECT COUNT(*) AS n FROM t}]`.")
    out: list[ReportQuery] = []
    seen: set[str] = set()
    for i, body in enumerate(items):
        where = f"report query #{i + 1}"
        _check_keys(body, _QUERY_KEYS, where)
        name = body.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise PolicyError(f"{where}: `name` must be letters, digits, _ or - (it names the "
                              f"result files), got {name!r}")
        if name.lower() in seen:
            raise PolicyError(f"report query `{name}` is named twice (names are case-insensitive)")
        seen.add(name.lower())
        sql = body.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise PolicyError(f"report query `{name}`: `sql` is required")
        weight = body.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (
                math.isfinite(weight) and weight > 0):
            raise PolicyError(f"report query `{name}`: `weight` must be a positive number")
        target = body.get("target_error")
        if target is not None:
            if isinstance(target, Mapping):
                target = {str(k).lower(): _positive(v, f"{name}.target_error.{k}")
                          for k, v in target.items()}
                if not target:
                    raise PolicyError(f"report query `{name}`: `target_error` is empty")
            else:
                target = _positive(target, f"{name}.target_error")
        out.append(ReportQuery(name=name, sql=sql.strip(), weight=float(weight),
                               target_error=target))
    return tuple(out)


def _positive(v: Any, what: str) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise PolicyError(f"report spec: {what} must be a positive number") from None
    if not (math.isfinite(x) and x > 0):
        raise PolicyError(f"report spec: {what} must be a positive number")
    return x


# ============================================================================== expected errors


@dataclass(frozen=True)
class ColumnError:
    """Expected noise of one output column (from the plan, data-independent)."""

    column: str
    std: float | None
    halfwidth_95: float | None
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "std": self.std, "halfwidth_95": self.halfwidth_95,
                "method": self.method}


def column_errors(planned: PlannedQuery) -> list[ColumnError]:
    """Noise std and 95% half-width per output column, as ``Result.accuracy`` will report them
    (COUNT/SUM columns; AVG/VAR/STDDEV get per-row intervals from their noisy parts)."""
    from privplan.rewrite.postprocess import output_items

    by_id = {p.measure.id: p for p in planned.measures}
    out = []
    for _, name, use in output_items(planned.plan.cores[0]):
        if use is None:
            continue
        if use.func == "quantile":
            p = by_id[use.quantile]  # type: ignore[index]
            m = p.measure
            rank = p.noise.rank_error(m.hi - m.lo + 1, m.sensitivity, m.quantile)
            out.append(ColumnError(name, None, None, f"{p.noise.describe()}; with 95% "
                                   f"probability within {rank:.3g} rows of rank"))
            continue
        if use.func in ("count", "sum"):
            mid = use.count if use.sum is None else use.sum
            assert mid is not None  # (a count or sum use names its measure)
            p = by_id[mid]
            scale = abs(float(p.measure.scale) * float(use.multiplier))
            out.append(ColumnError(name, p.noise.std() * scale,
                                   interval_halfwidth(p.noise) * scale, p.noise.describe()))
        else:
            parts = [by_id[m] for m in (use.count, use.sum, use.sum_sq) if m is not None]
            desc = "; ".join(f"{p.measure.label}: std "
                             f"{p.noise.std() * float(p.measure.scale):.4g}" for p in parts)
            out.append(ColumnError(name, None, None,
                                   f"{use.func.upper()} from noisy parts ({desc}); per-row "
                                   "95% interval in the result"))
    return out


def _targets(q: ReportQuery, errors: Sequence[ColumnError]) -> dict[str, tuple[float, float]]:
    """column -> (std at the reference budget, target) for the query's target error."""
    if q.target_error is None:
        return {}
    with_std = {e.column.lower(): e for e in errors if e.std is not None}
    if isinstance(q.target_error, Mapping):
        out = {}
        for col, tgt in q.target_error.items():
            if col not in with_std:
                raise PolicyError(
                    f"report query `{q.name}`: target_error names column '{col}', which is not "
                    f"a COUNT/SUM output column (those are: {', '.join(with_std) or 'none'})")
            out[col] = (with_std[col].std or 0.0, float(tgt))
        return out
    if not with_std:
        raise PolicyError(f"report query `{q.name}`: target_error needs a COUNT or SUM output "
                          "column (AVG/VAR/STDDEV have per-row intervals only)")
    return {c: (e.std or 0.0, float(q.target_error)) for c, e in with_std.items()}


# ============================================================================== the plan


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
        return json.dumps(self.to_dict(), indent=2, default=str)

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
        if self.spec.composition == "advanced":
            lines.append(f"  by the general theorem with sums: {self.basic_total.cost.describe()}")
        lines.append(f"Sequential composition would charge: {self.sequential.describe()}")
        if self.spec.composition == "advanced":
            lines.append(f"Ledger: a new ledger whose budget is the summed figure "
                         f"{self.basic_total.cost.describe()} (its accountant adds ε and δ); the "
                         f"audit claims the advanced total {self.report_total.cost.describe()}")
        else:
            lines.append(f"Ledger: {self.total_before.describe()} -> "
                         f"{self.projected.cost.describe()} of {self.budget.describe()}")
        for n in list(a.notes) + self.notes:
            lines.append(f"Note: {n}")
        return "\n".join(lines)


def _first(b: Any) -> str:
    """The allocated parameter of a budget (ε, ρ or μ) for display."""
    return b.describe().split(",")[0]


def open_session(spec: ReportSpec, *, ledger: Any = None, budget: Any = None) -> Any:
    """A session on the spec's database and policy (tables registered) with ``ledger``."""
    from privplan.ledger import open_ledger
    from privplan.session import connect

    policy = spec.load_policy()
    led = open_ledger(ledger)
    sess = connect(spec.database, policy=policy, budget=budget or spec.budget, ledger=led,
                   exact_limit=REPORT_EXACT_LIMIT)
    try:
        for name, path in spec.register.items():
            sess.register(name, path)
    except BaseException:
        sess.close()
        raise
    return sess


def _plan_query(sess: Any, q: ReportQuery, budget: Any) -> PlannedQuery:
    """Plan one report query with every check ``sess.sql`` runs before its charge, so a report
    whose query would fail without looking at the data is refused before any query is run."""
    try:
        return sess.plan(q.sql, {"budget": budget})[0]
    except PrivplanError as err:
        raise type(err)(f"report query `{q.name}`: {err}") from None


def plan_report(spec: ReportSpec, *, session: Any = None, ledger: Any = None) -> ReportPlan:
    """Plan ``spec`` (nothing is spent). Uses ``session`` if given, else opens one with
    ``ledger`` (default: the spec's ledger if that file exists, else an in-memory one)."""
    if session is not None:
        return _plan_in(session, spec)
    if ledger is None and (spec.ledger or spec.source) and spec.ledger_path().exists():
        ledger = str(spec.ledger_path())
    with open_session(spec, ledger=ledger) as sess:
        return _plan_in(sess, spec)


def _plan_in(sess: Any, spec: ReportSpec) -> ReportPlan:
    if type(sess.budget) is not type(spec.budget):
        raise PolicyError("the session's budget is of another privacy definition than the report's")
    before = sess.spent()
    history_entries = sess.ledger.entries()
    history = list(sess.accountant.mechanisms())
    kind = type(spec.budget)
    p = noise_exponent(kind)
    tables = {t.name: t.table_model() for t in sess.policy.private_tables()}

    # -- every query at the whole budget: its mechanisms per unit budget, its reference errors --
    demands, targets_ref = [], []
    for q in spec.queries:
        ref = _plan_query(sess, q, spec.budget)
        errors = _targets(q, column_errors(ref))
        kappa = 1.0
        if errors:
            kappa = _required_fraction(sess, q, spec.budget, errors) ** (2 * p)
        targets_ref.append(errors)
        demands.append(Demand(name=q.name, mechanisms=tuple(m.spec for m in ref.measures),
                              reference=spec.budget, weight=q.weight, kappa=kappa,
                              required=bool(errors)))
    # (planning registers the models of virtual tables: private joins, per-unit tables)
    tables = {**tables, **sess.table_models()}
    alloc = allocate(demands, tables, spec.budget, objective=spec.objective,  # type: ignore[arg-type]
                     history=history, composition=spec.composition,  # type: ignore[arg-type]
                     delta_prime=spec.delta_prime)

    # -- plan at the allocated budgets and verify with the session's real accountant ----------
    budgets = list(alloc.budgets)
    notes: list[str] = []
    for step in range(_VERIFY_STEPS + 1):
        planned = [_plan_query(sess, q, b) for q, b in zip(spec.queries, budgets)]
        per_query = [[replace(m.spec, id=f"{q.name}:{m.spec.id}") for m in pq.measures]
                     for q, pq in zip(spec.queries, planned)]
        specs = [m for ms in per_query for m in ms]
        # what the session's accountant will say, admission after admission, during the run
        acc, refused = copy.copy(sess.accountant), None
        for q, ms in zip(spec.queries, per_query):
            projected = acc.admit(list(ms))
            if spec.composition == "basic" and not projected.cost <= spec.budget:
                refused = q.name
                break
        basic = compose(specs, tables, kind, exact_limit=REPORT_EXACT_LIMIT) if history \
            else projected
        if spec.composition == "advanced":
            assert alloc.delta_prime is not None
            report_total = advanced_total(specs, tables, alloc.delta_prime)
            got = report_total.cost
        else:
            report_total = basic
            got = projected.cost
        if refused is None and got <= spec.budget:
            break
        if step == _VERIFY_STEPS:
            raise InternalError("the report's budgets could not be fitted to the budget with the "
                                "session's accountant")
        over = max(Fraction(g) / Fraction(c) for g, c in zip(got.weights(), spec.budget.weights())
                   if c > 0)
        factor = min(1 / over, Fraction(1)) * (1 - _SHRINK * 2**step)
        budgets = [_scaled(b, factor) for b in budgets]
        if step == 0:
            notes.append("budgets were scaled down so that the session's accountant confirms the "
                         "total is within the budget"
                         + ("" if projected.exact else
                            " (its composition solver returned a proven upper bound: it reached "
                            "its search limit)"))
    w_total = Fraction(spec.budget.weights()[0])
    queries = []
    for q, b, pq, ref_targets in zip(spec.queries, budgets, planned, targets_ref):
        col_errors = column_errors(pq)
        frac = float(Fraction(b.weights()[0]) / w_total)
        by_col = {e.column.lower(): e for e in col_errors}
        targets = {c: ((by_col[c].std or 0.0), t) for c, (_, t) in ref_targets.items()}
        expl = explain_planned(pq, sess.accountant.total, sess.accountant.total, spec.budget)
        queries.append(PlannedReportQuery(
            query=q, budget=b, fraction=frac,
            relative_variance=(max((s / t) ** 2 for s, t in targets.values()) if targets
                               else max(frac, 1e-300) ** (-2 * p)),
            planned=pq, explanation=expl, errors=col_errors, targets=targets))
    missed = [q.query.name for q in queries if q.targets_met is False]
    if missed:
        notes.append(f"the noise of {', '.join(missed)} is slightly above the target error: "
                     "the budgets had to be rounded or scaled down to fit the accountant")
    return ReportPlan(spec=spec, allocation=alloc, queries=queries, report_total=report_total,
                      basic_total=basic, total_before=before, projected=projected,
                      history=tuple(history_entries), notes=notes)


def _scaled(b: Any, factor: Fraction) -> Any:
    """``b`` with its additive weights (ε, δ; ρ; μ²) multiplied by ``factor`` (rounded down)."""
    from privplan.accounting.allocation import round_down
    from privplan.accounting.definitions import sqrt_fraction

    if type(b) is GDP:
        return GDP(round_down(sqrt_fraction(b.weights()[0] * factor, round_up=False)))
    return type(b).from_weights(tuple(round_down(w * factor) for w in b.weights()))


def _required_fraction(sess: Any, q: ReportQuery, budget: Any,
                       targets: Mapping[str, tuple[float, float]]) -> float:
    """The smallest fraction f of the budget's weight at which every target column's noise std
    (of the real, discrete noise) is at most its target; a small margin is added for rounding."""
    def met(f: float) -> bool:
        pq = _plan_query(sess, q, _scaled(budget, Fraction(f)))
        stds = {e.column.lower(): e.std for e in column_errors(pq)}
        return all((stds.get(c) or 0.0) <= t for c, (_, t) in targets.items())

    if not met(1.0):
        worst = max(targets.items(), key=lambda kv: kv[1][0] / kv[1][1])
        raise BudgetExceededError(
            f"report query `{q.name}`: its target error {worst[1][1]:g} on '{worst[0]}' cannot be "
            f"met even with the whole budget {budget.describe()} (noise std {worst[1][0]:.4g}). "
            "Loosen the target or raise the budget.")
    p = noise_exponent(type(budget))
    guess = max(max((s / t) ** (1 / p) for s, t in targets.values()), 1e-12)
    lo, hi = guess / 2, 1.0
    if met(lo):
        return min(1.0, lo * (1 + 1e-6))
    for _ in range(40):
        if hi / lo < 1 + 1e-7:
            break
        mid = math.sqrt(lo * hi)
        if met(mid):
            hi = mid
        else:
            lo = mid
    return min(1.0, hi * (1 + 1e-6))


# ============================================================================== running


@dataclass
class ReportRun:
    """What ``run_report`` did: the plan, every result, the audit file and the ledger."""

    plan: ReportPlan
    results: dict[str, Any]  # name -> privplan Result
    files: dict[str, dict[str, Path]]  # name -> {format: path}
    audit_path: Path
    ledger_path: Path
    total: Any  # the ledger's composed total after the report
    audit: dict[str, Any]


def run_report(spec: ReportSpec, out: str | Path, *, ledger: str | Path | None = None,
               progress: bool | None = None) -> ReportRun:
    """Plan and run ``spec``, charging a session with the ledger (``ledger``, or
    :meth:`ReportSpec.ledger_path`); write results and ``OUT/audit.json``. Output formats and
    the directory are checked before anything is charged."""
    from privplan.audit import build_audit, write_audit
    from privplan.progress import Progress

    out_dir = Path(out)
    audit_path = out_dir / "audit.json"
    if audit_path.exists():
        raise PolicyError(f"'{out_dir}' already holds a report (audit.json); write each run to a "
                          "new directory")
    _check_writers(spec)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PolicyError(f"cannot create the report directory '{out_dir}': {err.strerror}. "
                          "Nothing was charged. Fix: choose another --out.") from None
    _check_writable(out_dir)
    ledger_path = Path(ledger) if ledger is not None else spec.ledger_path(out_dir)

    if spec.composition == "advanced":
        # plan in memory; the ledger is opened with the basic (summed) total as its budget
        if ledger_path.exists():
            raise PolicyError(
                f"composition: advanced needs a new ledger (its guarantee is for a batch planned "
                f"in advance), but '{ledger_path}' exists. Use a new ledger path.")
        plan = plan_report(spec, ledger=None)
        sess = open_session(spec, ledger=str(ledger_path), budget=plan.basic_total.cost)
    else:
        sess = open_session(spec, ledger=str(ledger_path))
        plan = None
    with sess:
        if plan is None:
            plan = _plan_in(sess, spec)
        history = sess.ledger.entries()
        results: dict[str, Any] = {}
        files: dict[str, dict[str, Path]] = {}
        charged: list[tuple[PlannedReportQuery, Any, Any]] = []  # (query, result, entry)
        bar = Progress(len(plan.queries), desc=spec.name, enabled=progress)
        res_dir = out_dir / "results"
        res_dir.mkdir(exist_ok=True)
        complete = False
        try:
            for i, pq in enumerate(plan.queries):
                bar.update(i, pq.query.name)
                res = _sql(sess, pq)
                entry = _entry_of(sess, res, pq.query.sql)
                results[pq.query.name] = res
                files[pq.query.name] = _write_result(res, res_dir, pq.query.name, spec.outputs,
                                                     intervals=spec.intervals)
                charged.append((pq, res, entry))
            bar.update(len(plan.queries), "done")
            complete = True
        finally:
            bar.close()
            total = sess.accountant.total
            audit = build_audit(spec=spec, plan=plan, charged=charged, files=files,
                                history=history, total=total, tables=sess.table_models(),
                                policy=sess.policy, ledger_path=ledger_path,
                                ledger_budget=sess.budget, out_dir=out_dir, complete=complete)
            write_audit(audit_path, audit)
    return ReportRun(plan=plan, results=results, files=files, audit_path=audit_path,
                     ledger_path=ledger_path, total=total.cost, audit=audit)


def _sql(sess: Any, pq: PlannedReportQuery) -> Any:
    """``sess.sql`` for one report query at its allocated budget."""
    return sess.sql(pq.query.sql, budget=pq.budget)


def _entry_of(sess: Any, res: Any, sql: str) -> Any:
    qid = res.explanation.mechanisms[0].id.split(".")[0]
    for entry in reversed(sess.ledger.entries()):
        if entry.query_id == qid:
            if entry.sql != sql:
                raise InternalError(f"ledger entry {qid} holds another query")
            return entry
    raise InternalError(f"the ledger has no entry {qid} for a query that was just charged")


def _check_writers(spec: ReportSpec) -> None:
    """Every output format can be written, checked before anything is charged (a report that
    charged and then failed on a missing Parquet library spent its budget for nothing)."""
    if "parquet" in spec.outputs:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise PolicyError(
                "report spec: `outputs` includes parquet, which needs the pyarrow package, not "
                "installed here. Nothing was charged. Fix: `pip install pyarrow` (or "
                "`pip install privplan[parquet]`), or set `outputs: [csv]`.") from None


def _check_writable(directory: Path) -> None:
    """The output directory takes files, checked before anything is charged."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".privplan-check-"):
            pass
    except OSError as err:
        raise PolicyError(f"cannot write report results into '{directory}': {err.strerror}. "
                          "Nothing was charged. Fix: choose a writable --out.") from None


def _write_result(res: Any, directory: Path, name: str, outputs: Sequence[str], *,
                  intervals: bool = True) -> dict[str, Path]:
    """Write one result in each format: the same columns as ``Result.with_intervals()`` (each
    noisy column, then its 95% interval where one is known), or the values alone."""
    out = {}
    df = res.with_intervals() if intervals else res.df
    if "parquet" in outputs:
        path = directory / f"{name}.parquet"
        df.to_parquet(path, index=False)
        out["parquet"] = path
    if "csv" in outputs:
        path = directory / f"{name}.csv"
        df.to_csv(path, index=False)
        out["csv"] = path
    return out
