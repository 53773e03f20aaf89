"""Writing a report's audit file: the record of every query, mechanism, cost and result file.

:func:`build_audit` turns a report run (its spec, plan, charged queries, ledger history and
result files) into the ``audit.json`` document described in :mod:`privplan.audit`, sealed with
:func:`canonical_hash`; :func:`write_audit` writes it atomically. The encoders here (``_noise``,
``_file_hash``, ``_recompose``) are shared with :mod:`privplan.audit.verify`, which must read
back exactly what was written.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privplan.accounting.allocation import advanced_total
from privplan.accounting.allocation.pld import pld_total
from privplan.accounting.model import TableModel
from privplan.accounting.solver import compose
from privplan.analysis.region_sql import region_to_sql
from privplan.ledger.codec import encode_cost, encode_mechanism
from privplan.mechanisms.exponential import ExponentialMechanism
from privplan.mechanisms.noise import DiscreteGaussian, DiscreteLaplace, RoundedGaussian

FORMAT = "privplan-report-audit-1"


def canonical_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``doc`` without its ``sha256`` field."""
    body = {k: v for k, v in doc.items() if k != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _cost(c: Any) -> dict[str, Any]:
    return {"encoded": encode_cost(c), "describe": c.describe()}


def _noise(noise: Any) -> dict[str, Any]:
    if isinstance(noise, DiscreteLaplace):
        s = noise.scale
        return {"type": "discrete_laplace", "scale": f"{s.numerator}/{s.denominator}"}
    if isinstance(noise, DiscreteGaussian):
        s = noise.sigma2
        return {"type": "discrete_gaussian", "sigma2": f"{s.numerator}/{s.denominator}"}
    if isinstance(noise, RoundedGaussian):
        s = noise.sigma
        return {"type": "rounded_gaussian", "sigma": f"{s.numerator}/{s.denominator}"}
    if isinstance(noise, ExponentialMechanism):
        e = noise.epsilon
        out: dict[str, Any] = {"type": "exponential",
                               "epsilon": f"{e.numerator}/{e.denominator}"}
        if noise.monotone:  # exp(-ε·U/Δ) (MIN/MAX under add/remove): the re-plan must agree
            out["monotone"] = True
        return out
    raise TypeError(f"unknown noise {noise!r}")


def _table_models(tables: Mapping[str, TableModel]) -> dict[str, Any]:
    return {name: {"neighbourhood": m.neighbourhood, "max_rows": m.unit.max_rows,
                   "unit_level_columns": sorted(m.unit.unit_level_columns)}
            for name, m in tables.items()}


def _mechanism_record(spec: Any, planned: Any) -> dict[str, Any]:
    from privplan.mechanisms.accuracy import interval_halfwidth

    scale = float(planned.measure.scale)
    if planned.measure.kind == "quantile":  # its error is in rows of rank, not column units
        m = planned.measure
        return {
            "id": spec.id, "label": spec.label, "table": spec.table,
            "region_sql": region_to_sql(spec.region), "mechanism": encode_mechanism(spec),
            "measure": m.kind, "sensitivity": m.sensitivity, "value_scale": str(m.scale),
            "quantile": str(m.quantile), "candidates": [m.lo, m.hi],
            "noise": _noise(planned.noise), "noise_describe": planned.noise.describe(),
            "noise_std": None, "halfwidth_95": None,
            "rank_error_95": planned.noise.rank_error(m.hi - m.lo + 1, m.sensitivity,
                                                      m.quantile),
            "threshold": None, "cost": _cost(spec.cost),
        }
    return {
        "id": spec.id, "label": spec.label, "table": spec.table,
        "region_sql": region_to_sql(spec.region),
        "mechanism": encode_mechanism(spec),
        "measure": planned.measure.kind,
        "sensitivity": planned.measure.sensitivity,
        "value_scale": str(planned.measure.scale),
        "noise": _noise(planned.noise), "noise_describe": planned.noise.describe(),
        "noise_std": planned.noise.std() * scale,
        "halfwidth_95": float(interval_halfwidth(planned.noise)) * scale,
        "threshold": planned.threshold,
        "cost": _cost(spec.cost),
    }


def build_audit(*, spec: Any, plan: Any, charged: Sequence[tuple[Any, Any, Any]],
                files: Mapping[str, Mapping[str, Path]], history: Sequence[Any], total: Any,
                tables: Mapping[str, TableModel] | None, policy: Any, ledger_path: Path,
                ledger_budget: Any, out_dir: Path, complete: bool) -> dict[str, Any]:
    """The audit document of a report run (see :mod:`privplan.audit`)."""
    from privplan import __version__

    tables = dict(tables) if tables is not None else {
        t.name: t.table_model() for t in policy.private_tables()}
    queries = [_query_record(pq, res, entry, files, out_dir) for pq, res, entry in charged]
    report_specs = [spec_m for _, _, entry in charged for spec_m in entry.mechanisms]
    composition = _composition_record(spec, plan, report_specs, tables, total)
    alloc = plan.allocation
    doc: dict[str, Any] = {
        "format": FORMAT,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "privplan_version": __version__,
        "complete": complete,
        "report": {"name": spec.name, "spec": spec.source, "spec_sha256": spec.sha256,
                   "database": spec.database, "objective": spec.objective,
                   "composition": spec.composition},
        "budget": _cost(spec.budget),
        "ledger": {"path": os.path.relpath(ledger_path, out_dir) if _under(ledger_path, out_dir)
                   else str(ledger_path),
                   "budget": _cost(ledger_budget)},
        "policy": policy.to_dict(),
        "tables": _table_models(tables),
        "allocation": {
            "objective_value": alloc.objective_value,
            "equal_split_objective_value": alloc.equal_split.objective_value,
            "model_exact": alloc.model_exact,
            "structure": alloc.structure.to_dict(),
            "sequential_total": _cost(plan.sequential),
        },
        "history": [{"query_id": e.query_id, "sql": e.sql,
                     "mechanisms": [encode_mechanism(m) for m in e.mechanisms]}
                    for e in history],
        "queries": queries,
        "composition": composition,
    }
    doc["sha256"] = canonical_hash(json.loads(json.dumps(doc, default=str)))
    return doc



def _query_record(pq: Any, res: Any, entry: Any, files: Mapping[str, Mapping[str, Path]],
                  out_dir: Path) -> dict[str, Any]:
    """One charged query: its budget, costs, mechanisms (checked against the plan), accuracy
    and result files."""
    by_measure = {p.measure.id: p for p in pq.planned.measures}
    mechs = []
    for spec_m in entry.mechanisms:
        p = by_measure[spec_m.id.split(".", 1)[1]]
        if (p.spec.region, p.spec.cost, p.spec.partition) != (
                spec_m.region, spec_m.cost, spec_m.partition):
            from privplan.errors import InternalError

            raise InternalError(f"{spec_m.id}: the charged mechanism differs from the plan")
        mechs.append(_mechanism_record(spec_m, p))
    file_rec = {fmt: {"path": path.relative_to(out_dir).as_posix(), "sha256": _file_hash(path),
                      "bytes": path.stat().st_size}
                for fmt, path in files.get(pq.query.name, {}).items()}
    return {
        "name": pq.query.name, "sql": pq.query.sql, "query_id": entry.query_id,
        "weight": pq.query.weight,
        "target_error": (dict(pq.query.target_error) if isinstance(pq.query.target_error,
                                                                     Mapping)
                         else pq.query.target_error),
        "budget": _cost(pq.budget), "fraction": pq.fraction,
        "relative_variance": pq.relative_variance,
        "query_cost": _cost(res.query_cost), "marginal": _cost(entry.marginal),
        "mechanisms": mechs,
        "accuracy": {c: {"std": a.std, "halfwidth_95": a.halfwidth, "method": a.method}
                     for c, a in res.accuracy.items()},
        "rows": len(res.df), "files": file_rec,
    }


def _composition_record(spec: Any, plan: Any, report_specs: Sequence[Any],
                        tables: Mapping[str, TableModel], total: Any) -> dict[str, Any]:
    """The composed totals claimed: the ledger's (basic) or the report's advanced total, each
    with the other figure, and whether it is within the budget."""
    kind = type(spec.budget)
    report_basic = _recompose(report_specs, tables, kind)
    composition: dict[str, Any] = {"method": spec.composition}
    if spec.composition in ("advanced", "pld"):
        if spec.composition == "advanced":
            dp = plan.allocation.delta_prime
            adv = advanced_total(report_specs, tables, dp)
        else:  # the PLD figure is at the budget's δ
            dp = spec.budget.exact_delta
            adv = pld_total(report_specs, tables, dp)
        composition.update({
            "delta_prime" if spec.composition == "advanced" else "delta":
                f"{dp.numerator}/{dp.denominator}",
            "total": _cost(adv.cost), "rule": adv.rule, "exact": adv.exact,
            "witness": list(adv.witness), "witness_detail": adv.witness_detail,
            "basic_total": _cost(report_basic.cost), "basic_rule": report_basic.rule,
            "basic_exact": report_basic.exact,
            "ledger_total": _cost(total.cost),
            "within_budget": bool(adv.cost <= spec.budget),
            "scope": "the report's mechanisms (the ledger was new)",
        })
    else:
        composition.update({
            "total": _cost(total.cost), "rule": total.rule, "exact": total.exact,
            "witness": list(total.witness), "witness_detail": total.witness_detail,
            "report_total": _cost(report_basic.cost), "report_rule": report_basic.rule,
            "report_exact": report_basic.exact,
            "within_budget": bool(total.cost <= spec.budget),
            "scope": "the ledger's history and the report's mechanisms",
        })
    return composition


_LIMITS = (1_000_000, 10_000_000)  # search nodes for recomposition: exact whenever feasible


def _recompose(specs: Sequence[Any], tables: Mapping[str, TableModel], kind: type) -> Any:
    """compose() with a large search allowance (a batch check can afford it), larger again if
    the first answer is only a proven bound."""
    c = None
    for limit in _LIMITS:
        c = compose(list(specs), tables, kind, exact_limit=limit)
        if c.exact:
            break
    return c


def _under(path: Path, base: Path) -> bool:
    try:
        Path(path).resolve().relative_to(Path(base).resolve())
        return True
    except ValueError:
        return False


def write_audit(path: Path, doc: Mapping[str, Any]) -> None:
    """Write atomically (temporary file, fsync, rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        json.dump(doc, f, indent=2, default=str, ensure_ascii=False, allow_nan=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
