"""The audit file of a report run, and its offline verification.

``audit.json`` records, for every released query, its SQL and budget, and for every mechanism
its region (readable SQL *and* the exact serialised region of :mod:`privplan.ledger_codec`), its
partition, sensitivity, noise (exact parameters) and cost; the mechanisms the ledger held before
the report; the composed total with the rule used; and the SHA-256 of every result file.

:func:`verify_audit` re-checks it without the database:

1. ``format`` and ``integrity`` — the file's own SHA-256 over its canonical JSON (catches edits
   and corruption; it is not a signature: whoever can rewrite the file can recompute it);
2. ``decode`` — every mechanism, cost and budget decodes exactly;
3. ``regions`` — the SQL text of every region is the text of its serialised region;
4. ``noise`` — every cost is what its noise costs (ε = Δ/t for discrete Laplace, ρ = Δ²/2σ² for
   discrete Gaussian; partition selection: its threshold keeps a one-unit group out with
   probability ≥ 1 − δ);
5. ``replan`` — every query, re-planned from its SQL, the recorded policy and its budget,
   gives exactly the recorded mechanisms and noise (queries joining public tables need the
   database for the join keys and are skipped, with a note);
6. ``queries`` — each query's own mechanisms compose within its budget;
7. ``total`` — the history and the report's mechanisms, recomposed with
   :func:`privplan.accounting.solver.compose` (or, for ``composition: advanced``,
   :func:`privplan.accounting.allocation.advanced_total`), give exactly the claimed totals, and
   the total is within the budget;
8. ``files`` — every result file's SHA-256 matches;
9. ``ledger`` (when the ledger file is given or found next to the audit) — the ledger's entries
   hold exactly the recorded history and query mechanisms.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from privplan.accounting.allocation import advanced_total
from privplan.accounting.definitions import ApproxDP
from privplan.accounting.model import TableModel, UnitModel
from privplan.accounting.solver import compose
from privplan.analysis.region_sql import region_to_sql
from privplan.ledger_codec import decode_cost, decode_mechanism, encode_cost, encode_mechanism
from privplan.mechanisms.exponential import ExponentialMechanism
from privplan.mechanisms.noise import DiscreteGaussian, DiscreteLaplace

__all__ = ["FORMAT", "AuditCheck", "AuditResult", "build_audit", "canonical_hash",
           "verify_audit", "write_audit"]

FORMAT = "privplan-report-audit-1"


# ============================================================================== writing


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
    if isinstance(noise, ExponentialMechanism):
        e = noise.epsilon
        return {"type": "exponential", "epsilon": f"{e.numerator}/{e.denominator}"}
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
    """The audit document of a report run (see the module docstring)."""
    from privplan import __version__

    tables = dict(tables) if tables is not None else {
        t.name: t.table_model() for t in policy.private_tables()}
    queries = []
    report_specs = []
    for pq, res, entry in charged:
        by_measure = {p.measure.id: p for p in pq.planned.measures}
        mechs = []
        for spec_m in entry.mechanisms:
            p = by_measure[spec_m.id.split(".", 1)[1]]
            if (p.spec.region, p.spec.cost, p.spec.partition) != (
                    spec_m.region, spec_m.cost, spec_m.partition):
                from privplan.errors import InternalError

                raise InternalError(f"{spec_m.id}: the charged mechanism differs from the plan")
            mechs.append(_mechanism_record(spec_m, p))
            report_specs.append(spec_m)
        file_rec = {fmt: {"path": path.relative_to(out_dir).as_posix(), "sha256": _file_hash(path),
                          "bytes": path.stat().st_size}
                    for fmt, path in files.get(pq.query.name, {}).items()}
        queries.append({
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
        })
    kind = type(spec.budget)
    report_basic = _recompose(report_specs, tables, kind)
    composition: dict[str, Any] = {"method": spec.composition}
    if spec.composition == "advanced":
        dp = plan.allocation.delta_prime
        adv = advanced_total(report_specs, tables, dp)
        composition.update({
            "delta_prime": f"{dp.numerator}/{dp.denominator}",
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


# ============================================================================== verification


@dataclass(frozen=True)
class AuditCheck:
    name: str
    ok: bool
    detail: str
    skipped: bool = False


@dataclass
class AuditResult:
    """The outcome of :func:`verify_audit`: ``ok`` when no check failed."""

    path: str
    checks: list[AuditCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def failures(self) -> list[AuditCheck]:
        return [c for c in self.checks if not c.ok]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok,
                "checks": [{"name": c.name, "ok": c.ok, "skipped": c.skipped, "detail": c.detail}
                           for c in self.checks]}

    def __str__(self) -> str:
        lines = [f"Audit {self.path}: {'VERIFIED' if self.ok else 'FAILED'}"]
        for c in self.checks:
            mark = "skip" if c.skipped else ("ok" if c.ok else "FAIL")
            lines.append(f"  [{mark:>4}] {c.name}: {c.detail}")
        return "\n".join(lines)


class _Fail(Exception):
    pass


def verify_audit(path: str | Path, *, ledger: str | Path | None = None, check_files: bool = True,
                 replan: bool = True) -> AuditResult:
    """Re-check an audit file offline (no database). See the module docstring for the checks."""
    path = Path(path)
    out = AuditResult(str(path))

    def add(name: str, ok: bool, detail: str, skipped: bool = False) -> None:
        out.checks.append(AuditCheck(name, ok, detail, skipped))

    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        add("format", False, f"cannot read the audit file: {err}")
        return out
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        add("format", False, f"not a privplan report audit (format {doc.get('format')!r})"
            if isinstance(doc, dict) else "not a JSON object")
        return out
    add("format", True, FORMAT + ("" if doc.get("complete") else
                                  " (the run was interrupted: partial report)"))
    claimed = doc.get("sha256")
    actual = canonical_hash(doc)
    add("integrity", claimed == actual,
        "the file's SHA-256 matches its content" if claimed == actual else
        f"the file was modified after it was written (SHA-256 {actual[:16]}… != recorded "
        f"{str(claimed)[:16]}…)")

    # -- decode ----------------------------------------------------------------------------------
    try:
        budget = decode_cost(doc["budget"]["encoded"])
        kind = type(budget)
        tables = {name: TableModel(t["neighbourhood"],
                                   UnitModel(int(t["max_rows"]),
                                             frozenset(t["unit_level_columns"])))
                  for name, t in doc["tables"].items()}
        history = [decode_mechanism(m) for e in doc["history"] for m in e["mechanisms"]]
        queries = []
        for q in doc["queries"]:
            qb = decode_cost(q["budget"]["encoded"])
            mechs = [(rec, decode_mechanism(rec["mechanism"])) for rec in q["mechanisms"]]
            queries.append((q, qb, mechs))
        comp = doc["composition"]
        claimed_total = decode_cost(comp["total"]["encoded"])
    except (KeyError, TypeError, ValueError, ArithmeticError) as err:
        add("decode", False, f"the audit cannot be decoded: {type(err).__name__}: {err}")
        return out
    except Exception as err:  # noqa: BLE001 - a verifier reports whatever fails (LedgerError...)
        add("decode", False, f"the audit cannot be decoded: {err}")
        return out
    n_mech = sum(len(m) for _, _, m in queries)
    add("decode", True, f"{len(queries)} queries, {n_mech} mechanisms, {len(history)} earlier "
        "mechanisms decoded")
    bad = [f"{q['name']}: {type(b).__name__}" for q, b, _ in queries if type(b) is not kind]
    bad += [m.id for _, _, ms in queries for _, m in ms if type(m.cost) is not kind]
    if bad:
        add("decode", False, f"costs of another privacy definition than the budget: {bad[:5]}")
        return out
    if "policy" in doc:
        try:
            from privplan.policy import Policy

            policy = Policy.from_dict(doc["policy"])
            models = {t.name: t.table_model() for t in policy.private_tables()}
        except Exception as err:  # noqa: BLE001 - reported as a failed check
            add("tables", False, f"the recorded policy does not load: {err}")
            policy, models = None, None
        if models is not None:
            from privplan.sql.virtual_tables import is_virtual, table_model

            assert policy is not None
            for n in tables:  # joins and per-unit tables: their models follow from their names
                if n not in models and is_virtual(n):
                    with contextlib.suppress(Exception):  # (no base table: it disagrees)
                        models[n] = table_model(policy, n)
            same = all(models.get(n) == m for n, m in tables.items())
            add("tables", same, "table models agree with the recorded policy" if same else
                "the `tables` section disagrees with the recorded policy")
    else:
        policy = None

    # -- regions ---------------------------------------------------------------------------------
    wrong = [m.id for _, _, ms in queries for rec, m in ms
             if region_to_sql(m.region) != rec.get("region_sql")]
    add("regions", not wrong, "every region's SQL text is its serialised region" if not wrong
        else f"region text and serialised region disagree for {', '.join(wrong[:5])}")

    # -- noise -----------------------------------------------------------------------------------
    wrong = []
    for _, _, ms in queries:
        for rec, m in ms:
            problem = _noise_problem(rec, m, kind)
            if problem:
                wrong.append(f"{m.id} ({problem})")
    add("noise", not wrong, "every cost is what its noise costs" if not wrong
        else "; ".join(wrong[:5]))

    # -- replan ----------------------------------------------------------------------------------
    if replan:
        _check_replan(queries, policy, add)

    # -- per query -------------------------------------------------------------------------------
    over = []
    for q, qb, ms in queries:
        c = compose([m for _, m in ms], tables, kind).cost
        if not c <= qb:
            over.append(f"{q['name']}: {c.describe()} > {qb.describe()}")
    add("queries", not over, "each query's mechanisms compose within its budget" if not over
        else "; ".join(over[:5]))

    # -- total -----------------------------------------------------------------------------------
    report = [m for _, _, ms in queries for _, m in ms]
    try:
        _check_total(doc, comp, history, report, tables, kind, budget, claimed_total, add)
    except Exception as err:  # noqa: BLE001 - reported as a failed check
        add("total", False, f"recomposition failed: {type(err).__name__}: {err}")

    # -- files -----------------------------------------------------------------------------------
    if check_files:
        base = path.parent
        wrong, n = [], 0
        for q, _, _ in queries:
            if not q.get("files") and doc.get("complete"):
                wrong.append(f"{q['name']}: no result file listed")
            for rec in q.get("files", {}).values():
                n += 1
                fp = base / rec["path"]
                if not fp.exists():
                    wrong.append(f"{rec['path']} is missing")
                elif _file_hash(fp) != rec["sha256"]:
                    wrong.append(f"{rec['path']} was modified (SHA-256 differs)")
        add("files", not wrong, f"{n} result files match their SHA-256" if not wrong
            else "; ".join(wrong[:5]))

    # -- ledger ----------------------------------------------------------------------------------
    lpath = Path(ledger) if ledger is not None else None
    if lpath is None:
        rec = doc.get("ledger", {}).get("path")
        if rec and not Path(rec).is_absolute() and (path.parent / rec).exists():
            lpath = path.parent / rec
    if lpath is None:
        add("ledger", True, "no ledger file given (pass --ledger to cross-check)", skipped=True)
    else:
        _check_ledger(lpath, doc, add)
    return out


def _noise_problem(rec: Mapping[str, Any], m: Any, kind: type) -> str:
    noise = rec.get("noise") or {}
    try:
        delta_s = int(rec["sensitivity"])
        if noise.get("type") == "discrete_laplace":
            mech: Any = DiscreteLaplace(Fraction(noise["scale"]))
        elif noise.get("type") == "discrete_gaussian":
            mech = DiscreteGaussian(Fraction(noise["sigma2"]))
        elif noise.get("type") == "exponential":  # its cost is a function of ε alone
            expected = ExponentialMechanism(Fraction(noise["epsilon"])).cost(kind)
            return "" if expected == m.cost else (
                f"cost {m.cost.describe()} but the exponential mechanism costs "
                f"{expected.describe()}")
        else:
            return f"unknown noise {noise.get('type')!r}"
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        return f"bad noise record: {err}"
    if rec.get("threshold") is not None:
        if not isinstance(m.cost, ApproxDP) or not isinstance(mech, DiscreteLaplace):
            return "partition selection must be discrete Laplace with an (ε, δ) cost"
        eps = mech.epsilon(delta_s)
        if m.cost.exact_epsilon != eps:
            return f"ε {m.cost.epsilon:.6g} but the noise gives {float(eps):.6g}"
        t = float(mech.scale)
        p = math.exp(-1.0 / t)
        a = int(rec["threshold"]) - delta_s
        if a < 0 or p ** a / (1 + p) > float(m.cost.exact_delta) * (1 + 1e-9):
            return "the selection threshold is too low for the recorded δ"
        return ""
    expected = mech.cost(delta_s, kind, **({"delta": 0} if kind is ApproxDP else {}))
    if expected != m.cost:
        return f"cost {m.cost.describe()} but the noise costs {expected.describe()}"
    return ""


def _check_replan(queries: Sequence[tuple[Any, Any, Any]], policy: Any, add: Any) -> None:
    if policy is None:
        add("replan", True, "no policy recorded: queries not re-planned", skipped=True)
        return
    from privplan.planner import plan_costs
    from privplan.sql.builder import build_plan
    from privplan.sql.parse import parse_statement
    from privplan.sql.per_unit import split_per_unit

    wrong, skipped, n = [], [], 0
    for q, qb, ms in queries:
        try:
            sql, used = q["sql"], policy
            found = split_per_unit(sql, policy)
            if found is not None:  # over its derived table, as the session planned it
                sql = found.outer_sql
                used = replace(policy, tables={**policy.tables, found.table.name: found.table})
            plan = build_plan(sql, parse_statement(sql), used, {})
            if any(core.joins for core in plan.cores):
                skipped.append(q["name"])
                continue
            pq = plan_costs(plan, qb, used, query_id=q["query_id"])
        except Exception as err:  # noqa: BLE001 - reported as a failed check
            wrong.append(f"{q['name']}: cannot be re-planned ({type(err).__name__}: {err})")
            continue
        n += 1
        got = {p.spec.id: (encode_mechanism(p.spec), _noise(p.noise), p.measure.sensitivity,
                           p.threshold) for p in pq.measures}
        rec = {m.id: (encode_mechanism(m), r.get("noise"), r.get("sensitivity"),
                      r.get("threshold")) for r, m in ms}
        if got != rec:
            diff = sorted(set(got) ^ set(rec)) or [k for k in got if got[k] != rec.get(k)]
            wrong.append(f"{q['name']}: re-planned mechanisms differ ({', '.join(diff[:3])})")
    detail = (f"{n} queries re-planned from SQL, policy and budget: identical mechanisms"
              if not wrong else "; ".join(wrong[:5]))
    if skipped:
        detail += f"; skipped (joins with public tables need the database): {', '.join(skipped)}"
    add("replan", not wrong, detail)


def _agrees(recomposed: Any, claimed: Any, claimed_exact: bool, what: str,
            problems: list[str], notes: list[str]) -> None:
    """An exact recomposition must equal the claim (or lie below a claim that was itself only a
    proven bound); a recomposition that is only a bound proves nothing about equality."""
    if recomposed.exact:
        if recomposed.cost == claimed or (not claimed_exact and recomposed.cost <= claimed):
            return
        problems.append(f"recomposed {what} {recomposed.cost.describe()} != claimed "
                        f"{claimed.describe()}")
    else:
        notes.append(f"{what}: the solver's search limit was reached; its proven bound "
                     f"{recomposed.cost.describe()}")


def _check_total(doc: Mapping[str, Any], comp: Mapping[str, Any], history: list[Any],
                 report: list[Any], tables: Mapping[str, TableModel], kind: type, budget: Any,
                 claimed: Any, add: Any) -> None:
    method = comp.get("method", "basic")
    problems: list[str] = []
    notes: list[str] = []
    if method == "advanced":
        if history:
            add("total", False, "advanced composition is only valid on a new ledger, but the "
                "audit lists earlier charges")
            return
        dp = Fraction(comp["delta_prime"])
        adv = advanced_total(report, tables, dp)
        if adv.cost != claimed:
            problems.append(f"recomposed (advanced) {adv.cost.describe()} != claimed "
                            f"{claimed.describe()}")
        _agrees(_recompose(report, tables, kind), decode_cost(comp["basic_total"]["encoded"]),
                bool(comp.get("basic_exact", True)), "total with sums", problems, notes)
        total = adv
    else:
        total = _recompose(history + report, tables, kind)
        _agrees(total, claimed, bool(comp.get("exact", True)), "total", problems, notes)
        if "report_total" in comp:
            _agrees(_recompose(report, tables, kind),
                    decode_cost(comp["report_total"]["encoded"]),
                    bool(comp.get("report_exact", True)), "report total", problems, notes)
    if not claimed <= budget:
        problems.append(f"claimed total {claimed.describe()} exceeds the budget "
                        f"{budget.describe()}")
    if not total.cost <= budget:
        problems.append(f"recomposed total {total.cost.describe()} exceeds the budget "
                        f"{budget.describe()}")
    if bool(comp.get("within_budget")) != bool(claimed <= budget):
        problems.append("`within_budget` is wrong")
    how = "advanced_total" if method == "advanced" else "compose"
    add("total", not problems, "; ".join(problems) or
        f"recomposed offline with {how}: {total.cost.describe()} [{total.rule}] within "
        f"{budget.describe()}" + (f" ({'; '.join(notes)})" if notes else ""))


def _check_ledger(lpath: Path, doc: Mapping[str, Any], add: Any) -> None:
    from privplan.ledger import SQLiteLedger

    try:
        led = SQLiteLedger(lpath)
        try:
            entries = {e.query_id: e for e in led.entries()}
        finally:
            led.close()
    except Exception as err:  # noqa: BLE001 - reported as a failed check
        add("ledger", False, f"cannot read the ledger '{lpath}': {err}")
        return
    wrong = []
    recorded = [(e["query_id"], e["sql"], e["mechanisms"]) for e in doc["history"]]
    recorded += [(q["query_id"], q["sql"], [r["mechanism"] for r in q["mechanisms"]])
                 for q in doc["queries"]]
    for qid, sql, mechs in recorded:
        e = entries.get(qid)
        if e is None:
            wrong.append(f"{qid} is not in the ledger")
            continue
        if e.sql != sql or [encode_mechanism(m) for m in e.mechanisms] != mechs:
            wrong.append(f"{qid} differs from the ledger")
    add("ledger", not wrong, f"{len(recorded)} entries match the ledger '{lpath}'" if not wrong
        else "; ".join(wrong[:5]))
