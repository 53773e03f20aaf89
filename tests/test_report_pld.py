"""Reports with `composition: pld` (optimal composition by privacy-loss distributions inside
every maximal co-affected set): more ε per query than basic, the PLD total within the budget
(checked independently with Google's dp-accounting), disjoint structure charged by its worst
set only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from dp_accounting.pld import common as dpa_common
from dp_accounting.pld import privacy_loss_distribution as dpa

from privplan.audit import verify_audit
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.errors import PolicyError
from privplan.report import ReportSpec, plan_report, run_report


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("pld_report")
    write_demo_database(tmp / "demo.duckdb", rows=5_000)
    shutil.copy(demo_policy_path(), tmp / "policy.yaml")
    return tmp


def _spec(ws: Path, composition: str, sqls: list[str], budget: Any = None) -> ReportSpec:
    data = {"name": f"r_{composition}", "database": str(ws / "demo.duckdb"),
            "policy": str(ws / "policy.yaml"),
            "budget": budget or {"epsilon": 1.0, "delta": 1e-6}, "composition": composition,
            "objective": "max",
            "queries": [{"name": f"q{i}", "sql": s} for i, s in enumerate(sqls)]}
    return ReportSpec.from_dict(data)


OVERLAPPING = [f"SELECT COUNT(*) AS n FROM visits WHERE age >= {i}" for i in range(100)]


def test_pld_report_gets_more_epsilon_per_query_within_the_budget(ws: Path) -> None:
    basic = plan_report(_spec(ws, "basic", OVERLAPPING))
    plan = plan_report(_spec(ws, "pld", OVERLAPPING))
    e_basic = [float(q.budget.epsilon) for q in basic.queries]
    e_pld = [float(q.budget.epsilon) for q in plan.queries]
    assert min(e_pld) > 2 * max(e_basic)  # 0.0238 against 0.01
    assert plan.report_total.cost <= plan.budget
    assert "privacy-loss distributions" in plan.report_total.rule
    assert plan.basic_total.cost.epsilon > 2  # summing would be far over the budget
    # independently: a record of age >= 99 is in every query; compose the charged mechanisms'
    # (ε, δ) canonical pairs with dp-accounting (pessimistic) and read ε at the report's δ
    lib = None
    for m in plan.specs():
        p = dpa.from_privacy_parameters(dpa_common.DifferentialPrivacyParameters(
            float(m.cost.epsilon), float(m.cost.delta)), value_discretization_interval=1e-5)
        lib = p if lib is None else lib.compose(p)
    assert lib is not None
    assert lib.get_epsilon_for_delta(1e-6) <= 1.0
    doc = json.loads(plan.to_json())
    assert doc["composition"] == "pld" and doc["within_budget"] is True
    assert doc["basic_total"] != doc["report_total"]
    text = str(plan)
    assert "by the general theorem with sums" in text and "Sequential composition" in text


def test_pld_report_with_disjoint_structure_charges_the_worst_set(ws: Path) -> None:
    sqls = [f"SELECT COUNT(*) AS n FROM visits WHERE age >= {10 * i} AND age < {10 * i + 10}"
            for i in range(10)]
    plan = plan_report(_spec(ws, "pld", sqls))
    worst = max(q.budget.epsilon for q in plan.queries)
    assert worst > 0.9  # disjoint: each query may use (nearly) the whole budget
    assert plan.report_total.cost.epsilon <= worst


def test_pld_report_runs_and_its_audit_verifies(ws: Path) -> None:
    spec = _spec(ws, "pld", OVERLAPPING[:20])
    run = run_report(spec, ws / "out", ledger=ws / "pld.ledger.sqlite", progress=False)
    assert run.plan.report_total.cost <= spec.budget
    audit = json.loads(run.audit_path.read_text())
    assert audit["composition"]["method"] == "pld"
    result = verify_audit(run.audit_path)
    assert result.ok, [c for c in result.checks if not c.ok]
    with pytest.raises(PolicyError, match="new ledger"):
        run_report(spec, ws / "out2", ledger=ws / "pld.ledger.sqlite", progress=False)


@pytest.mark.parametrize(("composition", "budget", "message"), [
    ("optimal", None, "must be basic, advanced or pld, got 'optimal'"),
    ("pld", {"epsilon": 1.0}, "`composition: pld` needs an \\(ε, δ\\) budget"),
])
def test_bad_composition_values_are_clear_errors(ws: Path, composition: str, budget: Any,
                                                 message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        _spec(ws, composition, OVERLAPPING[:2], budget)


def test_cli_plans_runs_and_verifies_a_pld_report(ws: Path, capsys: pytest.CaptureFixture
                                                 ) -> None:
    from privplan.cli import main

    fixture = Path(__file__).parent / "fixtures" / "reports" / "demo_pld.yaml"
    spec = ws / "demo_pld.yaml"
    shutil.copy(fixture, spec)
    assert main(["report", "plan", str(spec), "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["composition"] == "pld"
    out = ws / "pld_out"
    assert main(["report", "run", str(spec), "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    audit = json.loads((out / "audit.json").read_text())
    assert audit["composition"]["method"] == "pld"
    assert main(["audit", "verify", str(out / "audit.json")]) == 0
    assert "VERIFIED" in capsys.readouterr().out
