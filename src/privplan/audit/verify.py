"""Verifying a report's audit file offline: the checks ``privplan audit verify`` runs.

:func:`verify_audit` reads an ``audit.json`` written by :mod:`privplan.audit.record` and re-checks
it without the database (the nine checks are listed in :mod:`privplan.audit`): the file's hash,
that every record decodes, that regions, noise and costs agree, that the queries re-plan to the
same mechanisms, that the totals recompose, that the result files and the ledger match. Each
check is reported in an :class:`AuditResult`, failed or passed, rather than raised.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from privplan.accounting.allocation import advanced_total
from privplan.accounting.allocation.pld import pld_total
from privplan.accounting.model import TableModel, UnitModel
from privplan.accounting.solver import compose
from privplan.analysis.region_sql import region_to_sql
from privplan.audit.record import FORMAT, _file_hash, _noise, _recompose, canonical_hash
from privplan.ledger.codec import decode_cost, decode_mechanism, encode_mechanism
from privplan.mechanisms.exponential import ExponentialMechanism
from privplan.mechanisms.noise import DiscreteGaussian, DiscreteLaplace, RoundedGaussian


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


def verify_audit(path: str | Path, *, ledger: str | Path | None = None, check_files: bool = True,
                 replan: bool = True) -> AuditResult:
    """Re-check an audit file offline (no database). See :mod:`privplan.audit` for the checks."""
    path = Path(path)
    out = AuditResult(str(path))

    def add(name: str, ok: bool, detail: str, skipped: bool = False) -> None:
        out.checks.append(AuditCheck(name, ok, detail, skipped))

    doc = _read(path, add)
    if doc is None:
        return out
    decoded = _decode(doc, add)
    if decoded is None:
        return out
    budget, kind, tables, history, queries, comp, claimed_total = decoded
    policy = _check_tables(doc, tables, add) if "policy" in doc else None
    _check_regions(queries, add)
    _check_noise(queries, kind, add)
    if replan:
        _check_replan(queries, policy, add)
    _check_queries(queries, tables, kind, add)
    report = [m for _, _, ms in queries for _, m in ms]
    try:
        _check_total(doc, comp, history, report, tables, kind, budget, claimed_total, add)
    except Exception as err:  # noqa: BLE001 - reported as a failed check
        add("total", False, f"recomposition failed: {type(err).__name__}: {err}")
    if check_files:
        _check_files(path.parent, doc, queries, add)
    lpath = _ledger_file(path, doc, ledger)
    if lpath is None:
        add("ledger", True, "no ledger file given (pass --ledger to cross-check)", skipped=True)
    else:
        _check_ledger(lpath, doc, add)
    return out


def _read(path: Path, add: Any) -> dict[str, Any] | None:
    """The audit document after the ``format`` and ``integrity`` checks (None: not an audit)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        add("format", False, f"cannot read the audit file: {err}")
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        add("format", False, f"not a privplan report audit (format {doc.get('format')!r})"
            if isinstance(doc, dict) else "not a JSON object")
        return None
    add("format", True, FORMAT + ("" if doc.get("complete") else
                                  " (the run was interrupted: partial report)"))
    claimed = doc.get("sha256")
    actual = canonical_hash(doc)
    add("integrity", claimed == actual,
        "the file's SHA-256 matches its content" if claimed == actual else
        f"the file was modified after it was written (SHA-256 {actual[:16]}… != recorded "
        f"{str(claimed)[:16]}…)")
    return doc


_Queries = list[tuple[Any, Any, list[tuple[Any, Any]]]]  # (record, budget, [(record, mechanism)])
_Decoded = tuple[Any, type, dict[str, TableModel], list[Any], _Queries, Any, Any]


def _decode(doc: Mapping[str, Any], add: Any) -> _Decoded | None:
    """The ``decode`` check: budget, table models, history, queries, composition and claimed
    total, decoded exactly (None when something does not decode)."""
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
        return None
    except Exception as err:  # noqa: BLE001 - a verifier reports whatever fails (LedgerError...)
        add("decode", False, f"the audit cannot be decoded: {err}")
        return None
    n_mech = sum(len(m) for _, _, m in queries)
    add("decode", True, f"{len(queries)} queries, {n_mech} mechanisms, {len(history)} earlier "
        "mechanisms decoded")
    bad = [f"{q['name']}: {type(b).__name__}" for q, b, _ in queries if type(b) is not kind]
    bad += [m.id for _, _, ms in queries for _, m in ms if type(m.cost) is not kind]
    if bad:
        add("decode", False, f"costs of another privacy definition than the budget: {bad[:5]}")
        return None
    return budget, kind, tables, history, queries, comp, claimed_total


def _check_tables(doc: Mapping[str, Any], tables: Mapping[str, TableModel], add: Any) -> Any:
    """The ``tables`` check against the recorded policy; returns that policy (None: it does
    not load)."""
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
    return policy


def _check_regions(queries: _Queries, add: Any) -> None:
    wrong = [m.id for _, _, ms in queries for rec, m in ms
             if region_to_sql(m.region) != rec.get("region_sql")]
    add("regions", not wrong, "every region's SQL text is its serialised region" if not wrong
        else f"region text and serialised region disagree for {', '.join(wrong[:5])}")


def _check_noise(queries: _Queries, kind: type, add: Any) -> None:
    wrong = []
    for _, _, ms in queries:
        for rec, m in ms:
            problem = _noise_problem(rec, m, kind)
            if problem:
                wrong.append(f"{m.id} ({problem})")
    add("noise", not wrong, "every cost is what its noise costs" if not wrong
        else "; ".join(wrong[:5]))


def _check_queries(queries: _Queries, tables: Mapping[str, TableModel], kind: type,
                   add: Any) -> None:
    over = []
    for q, qb, ms in queries:
        c = compose([m for _, m in ms], tables, kind).cost
        if not c <= qb:
            over.append(f"{q['name']}: {c.describe()} > {qb.describe()}")
    add("queries", not over, "each query's mechanisms compose within its budget" if not over
        else "; ".join(over[:5]))


def _check_files(base: Path, doc: Mapping[str, Any], queries: _Queries, add: Any) -> None:
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


def _ledger_file(path: Path, doc: Mapping[str, Any], ledger: str | Path | None) -> Path | None:
    """The ledger to cross-check: ``ledger`` if given, else the recorded relative path if that
    file exists next to the audit."""
    lpath = Path(ledger) if ledger is not None else None
    if lpath is None:
        rec = doc.get("ledger", {}).get("path")
        if rec and not Path(rec).is_absolute() and (path.parent / rec).exists():
            lpath = path.parent / rec
    return lpath


def _noise_problem(rec: Mapping[str, Any], m: Any, kind: type) -> str:
    noise = rec.get("noise") or {}
    try:
        delta_s = int(rec["sensitivity"])
        if noise.get("type") == "discrete_laplace":
            mech: Any = DiscreteLaplace(Fraction(noise["scale"]))
        elif noise.get("type") == "discrete_gaussian":
            mech = DiscreteGaussian(Fraction(noise["sigma2"]))
        elif noise.get("type") == "rounded_gaussian":
            mech = RoundedGaussian(Fraction(noise["sigma"]))
        elif noise.get("type") == "exponential":  # its cost is a function of ε alone
            if noise.get("monotone") and Fraction(rec["quantile"]) not in (0, 1):
                return "only a 0- or 1-quantile's utility is monotone"
            expected = ExponentialMechanism(Fraction(noise["epsilon"])).cost(kind)
            return "" if expected == m.cost else (
                f"cost {m.cost.describe()} but the exponential mechanism costs "
                f"{expected.describe()}")
        else:
            return f"unknown noise {noise.get('type')!r}"
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        return f"bad noise record: {err}"
    if rec.get("threshold") is not None:
        if m.cost.delta_or_none() is None or not isinstance(mech, DiscreteLaplace):
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
    expected = mech.cost(delta_s, kind, delta=0)  # (spends no δ)
    if expected != m.cost:
        return f"cost {m.cost.describe()} but the noise costs {expected.describe()}"
    return ""


def _check_replan(queries: Sequence[tuple[Any, Any, Any]], policy: Any, add: Any) -> None:
    if policy is None:
        add("replan", True, "no policy recorded: queries not re-planned", skipped=True)
        return
    from privplan.planning.options import QueryOptions
    from privplan.planning.plan import plan_query
    from privplan.sql.per_unit import split_per_unit

    wrong, skipped, n = [], [], 0
    for q, qb, ms in queries:
        try:
            sql, used = q["sql"], policy
            found = split_per_unit(sql, policy)
            if found is not None:  # over its derived table, as the session planned it
                sql = found.outer_sql
                used = replace(policy, tables={**policy.tables, found.table.name: found.table})
            # the session's own planning, from the text and the policy alone (no database:
            # no binding passes, so joins with public tables cannot be re-planned here)
            pq, _ = plan_query(sql, QueryOptions(), qb, policy=used, public_columns={},
                               query_id=q["query_id"])
            if any(core.joins for core in pq.plan.cores):
                skipped.append(q["name"])
                continue
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
    if method in ("advanced", "pld"):
        if history:
            add("total", False, f"{method} composition is only valid on a new ledger, but the "
                "audit lists earlier charges")
            return
        if method == "advanced":
            adv = advanced_total(report, tables, Fraction(comp["delta_prime"]))
        else:
            adv = pld_total(report, tables, Fraction(comp["delta"]))
        if adv.cost != claimed:
            problems.append(f"recomposed ({method}) {adv.cost.describe()} != claimed "
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
    how = {"advanced": "advanced_total", "pld": "pld_total"}.get(method, "compose")
    add("total", not problems, "; ".join(problems) or
        f"recomposed offline with {how}: {total.cost.describe()} [{total.rule}] within "
        f"{budget.describe()}" + (f" ({'; '.join(notes)})" if notes else ""))


def _check_ledger(lpath: Path, doc: Mapping[str, Any], add: Any) -> None:
    from privplan.ledger.store import SQLiteLedger

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
