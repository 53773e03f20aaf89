"""Running a report: every query charged through one session, results and audit written.

:func:`run_report` checks the output directory and formats before anything is charged, plans
(in the session, or in memory for ``composition: advanced``, whose ledger must be new), charges
each query at its allocated budget, writes each result (:mod:`privplan.report.outputs`) and, even
when a query fails midway, the audit file of what was charged (:mod:`privplan.audit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privplan.errors import InternalError, PolicyError
from privplan.report.outputs import _check_writable, _check_writers, _write_result
from privplan.report.plan import PlannedReportQuery, ReportPlan
from privplan.report.planning import _plan_in, open_session, plan_report
from privplan.report.spec import ReportSpec


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
    from privplan.views.progress import Progress

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

    if spec.composition in ("advanced", "pld"):
        # plan in memory; the ledger is opened with the basic (summed) total as its budget
        if ledger_path.exists():
            raise PolicyError(
                f"composition: {spec.composition} needs a new ledger (its guarantee is for a batch planned "
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
