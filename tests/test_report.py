"""Batch reports (privplan.report, privplan.cli.report): spec, plan, run, outputs, CLI."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import yaml

from privplan.accounting.definitions import ZCDP, ApproxDP, PureDP
from privplan.accounting.solver import compose
from privplan.audit import verify_audit
from privplan.cli import EXIT_BUDGET, EXIT_USAGE
from privplan.cli.report import EXIT_AUDIT_FAILED, add_report_commands, main
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.errors import BudgetExceededError, PolicyError
from privplan.planning.shapes import shape
from privplan.report import (
    ReportSpec,
    column_errors,
    open_session,
    plan_report,
    run_report,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "reports"
PUMS = ROOT / "benchmarks" / "data"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("db") / "demo.duckdb", rows=20_000)


def workspace(tmp: Path, demo_db: Path, *fixtures: str) -> Path:
    """A directory with the fixture specs, the demo policy and the demo database."""
    for f in fixtures:
        shutil.copy(FIXTURES / f, tmp / f)
    shutil.copy(demo_policy_path(), tmp / "policy.yaml")
    (tmp / "demo.duckdb").symlink_to(demo_db)
    return tmp


# ============================================================================== spec


def test_spec_loads_with_paths_relative_to_the_file(tmp_path: Path, demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    spec = ReportSpec.load(ws / "demo_small.yaml")
    assert spec.name == "small"
    assert spec.database == str(ws.resolve() / "demo.duckdb")
    assert spec.budget == PureDP(1)
    assert [q.name for q in spec.queries] == ["kids", "adults", "seniors", "by_hospital",
                                              "insured"]
    assert spec.query("seniors").weight == 2.0
    assert spec.query("insured").target_error == 20.0
    assert spec.outputs == ("parquet", "csv") and spec.sha256
    assert ReportSpec.load(ws / "demo_small.yaml", database="x.duckdb").database == "x.duckdb"


def test_spec_mapping_form_and_budgets() -> None:
    spec = ReportSpec.from_dict({
        "database": ":memory:", "policy": {"tables": {"t": {"privacy_unit": "row",
                                                            "columns": {"x": {"type": "int"}}}}},
        "budget": {"epsilon": "0.5", "delta": "1e-6"},
        "queries": {"a": "SELECT COUNT(*) FROM t", "b": {"sql": "SELECT COUNT(*) FROM t",
                                                        "target_error": {"N": 3}}}})
    assert spec.budget == ApproxDP("0.5", "1e-6")
    assert [q.name for q in spec.queries] == ["a", "b"]
    assert spec.queries[1].target_error == {"n": 3.0}
    assert ReportSpec.from_dict({**_minimal(), "budget": {"rho": 0.1}}).budget == ZCDP("0.1")


def _minimal() -> dict:
    return {"database": ":memory:", "policy": "p.yaml", "budget": {"epsilon": 1},
            "queries": [{"name": "a", "sql": "SELECT COUNT(*) FROM t"}]}


@pytest.mark.parametrize(("change", "message"), [
    ({"budjet": 1}, "did you mean `budget`"),
    ({"budget": {"epsilon": 1, "rho": 1}}, "takes epsilon"),
    ({"budget": {"epsilon": 0}}, "positive"),
    ({"budget": 1.0}, "is a mapping"),
    ({"objective": "min"}, "objective"),
    ({"composition": "advanced"}, "needs an \\(ε, δ\\) budget"),
    ({"queries": []}, "empty"),
    ({"queries": [{"name": "a b", "sql": "x"}]}, "letters, digits"),
    ({"queries": [{"name": "a", "sql": "x"}, {"name": "A", "sql": "y"}]}, "named twice"),
    ({"queries": [{"name": "a", "sql": "x", "weight": 0}]}, "weight"),
    ({"queries": [{"name": "a", "sql": "x", "target_error": -1}]}, "positive"),
    ({"queries": [{"name": "a", "sqll": "x"}]}, "did you mean `sql`"),
    ({"outputs": ["xlsx"]}, "outputs"),
])
def test_spec_errors_say_what_is_wrong(change: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        ReportSpec.from_dict({**_minimal(), **change})


def test_missing_spec_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        ReportSpec.load(tmp_path / "nope.yaml")


# ============================================================================== plan


def test_plan_shows_structure_allocation_errors_and_total(tmp_path: Path, demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    plan = plan_report(ReportSpec.load(ws / "demo_small.yaml"))
    s = plan.allocation.structure
    assert ("kids", "adults") in s.disjoint and ("kids", "seniors") in s.disjoint
    assert ("adults", "seniors") in s.disjoint
    assert ("kids", "by_hospital") in s.overlapping and ("seniors", "insured") in s.overlapping
    assert set(s.groups) == {("kids", "by_hospital", "insured"),
                             ("adults", "by_hospital", "insured"),
                             ("seniors", "by_hospital", "insured")}
    by = {q.query.name: q for q in plan.queries}
    # the three disjoint age bands share the same cells with the two global queries only
    total = plan.report_total.cost
    assert total <= PureDP(1) and total.epsilon == pytest.approx(1, abs=1e-4)
    assert plan.sequential.epsilon > 1.5  # what sequential composition would charge
    # expected errors per output column, as the result will report them
    cols = {e.column: e for e in by["adults"].errors}
    assert cols["n"].std > 0 and cols["total_cost"].halfwidth_95 > cols["total_cost"].std
    assert {e.column for e in by["by_hospital"].errors} == {"n", "mean_cost"}
    assert by["insured"].targets_met is True
    assert by["insured"].errors[0].std <= 20.0
    # each age band shares its cell with the two global queries only, so the three bands get
    # the same budget; the seniors' weight 2 pulls budget away from the global queries
    assert by["seniors"].budget == by["kids"].budget == by["adults"].budget
    light = plan_report(ReportSpec.from_dict(
        {**yaml.safe_load((ws / "demo_small.yaml").read_text()),
         "queries": [{**q.query.to_dict(), "weight": 1.0} for q in plan.queries]}, base_dir=ws))
    assert by["seniors"].budget > light.queries[2].budget
    assert by["by_hospital"].budget < light.queries[3].budget
    text = str(plan)
    for part in ("Overlap structure", "Allocation and expected errors", "95% ±",
                 "Sequential composition would charge", "disjoint"):
        assert part in text
    data = json.loads(plan.to_json())
    assert data["within_budget"] is True and len(data["queries"]) == 5
    assert data["structure"]["disjoint_pairs"]


def test_optimised_allocation_beats_the_equal_split(tmp_path: Path, demo_db: Path) -> None:
    """Acceptance: disjoint and overlapping queries; lower objective at no higher cost."""
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    with open_session(ReportSpec.load(ws / "demo_small.yaml")) as sess:
        plan = plan_report(ReportSpec.load(ws / "demo_small.yaml"), session=sess)
        tables = {t.name: t.table_model() for t in sess.policy.private_tables()}
    a = plan.allocation
    assert a.structure.disjoint and a.structure.overlapping
    assert a.objective_value < a.equal_split.objective_value
    assert plan.report_total.cost <= PureDP(1)
    assert a.equal_split.composed <= PureDP(1) and a.equal_split.sequential <= PureDP(1)
    # the real planned mechanisms, composed by the solver, are within the budget
    assert compose(plan.specs(), tables, PureDP).cost <= PureDP(1)


def test_unreachable_target_is_refused(tmp_path: Path, demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db)
    spec = ReportSpec.from_dict({
        "database": "demo.duckdb", "policy": "policy.yaml", "budget": {"epsilon": 0.1},
        "queries": [{"name": "a", "sql": "SELECT COUNT(*) AS n FROM visits",
                     "target_error": 1}]}, base_dir=ws)
    with pytest.raises(BudgetExceededError, match="cannot be met even with the whole budget"):
        plan_report(spec)


def test_bad_query_names_the_query(tmp_path: Path, demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db)
    spec = ReportSpec.from_dict({
        "database": "demo.duckdb", "policy": "policy.yaml", "budget": {"epsilon": 1},
        "queries": [{"name": "bad", "sql": "SELECT * FROM visits"}]}, base_dir=ws)
    with pytest.raises(Exception, match="report query `bad`"):
        plan_report(spec)


# ============================================================================== run


def test_fifty_query_report_end_to_end(tmp_path: Path, demo_db: Path) -> None:
    """Acceptance: a 50-query report over the demo data runs, and its audit verifies."""
    ws = workspace(tmp_path, demo_db, "demo_monthly_50.yaml")
    spec = ReportSpec.load(ws / "demo_monthly_50.yaml")
    assert len(spec.queries) == 50
    run = run_report(spec, ws / "out", progress=False)  # (its speed: benchmarks/, not here)
    assert run.ledger_path == ws / "demo_monthly_50.ledger.sqlite" and run.ledger_path.exists()
    assert run.total <= PureDP(1)
    assert run.plan.sequential.epsilon > 2 * run.total.epsilon  # disjointness pays off
    for q in spec.queries:
        pq = pd.read_parquet(run.files[q.name]["parquet"])
        csv = pd.read_csv(run.files[q.name]["csv"])
        assert len(pq) == len(csv) == len(run.results[q.name].df) >= 1
        # one answer shape everywhere: the files hold what Result.with_intervals() shows
        shown = run.results[q.name].with_intervals()
        assert list(pq.columns) == list(csv.columns) == list(shown.columns)
        pd.testing.assert_frame_equal(pq, shown.reset_index(drop=True), check_dtype=False)
    # the expected errors of the plan are those the results report
    for pq in run.plan.queries:
        acc = run.results[pq.query.name].accuracy
        for e in pq.errors:
            assert acc[e.column].std == e.std
    audit = json.loads(run.audit_path.read_text())
    assert audit["complete"] and len(audit["queries"]) == 50
    assert audit["composition"]["within_budget"] is True
    result = verify_audit(run.audit_path)
    assert result.ok, str(result)
    assert {c.name for c in result.checks} >= {"integrity", "regions", "noise", "replan",
                                               "total", "files", "ledger"}


def test_report_files_hold_intervals_unless_switched_off(tmp_path: Path, demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    spec = ReportSpec.load(ws / "demo_small.yaml")
    assert spec.intervals is True and spec.to_dict()["intervals"] is True
    run = run_report(spec, ws / "with", progress=False)
    by_hospital = pd.read_csv(run.files["by_hospital"]["csv"])
    assert list(by_hospital.columns) == ["hospital", "n", "n_low", "n_high", "mean_cost",
                                         "mean_cost_low", "mean_cost_high"]
    assert (by_hospital["n_low"] < by_hospital["n"]).all()
    assert (by_hospital["n"] < by_hospital["n_high"]).all()
    plain = replace(spec, intervals=False, ledger=str(ws / "second.ledger.sqlite"))
    run = run_report(plain, ws / "without", progress=False)
    assert list(pd.read_csv(run.files["by_hospital"]["csv"]).columns) == [
        "hospital", "n", "mean_cost"]
    with pytest.raises(PolicyError, match="`intervals` is true"):
        ReportSpec.from_dict({"database": "demo.duckdb", "policy": "policy.yaml",
                              "budget": {"epsilon": 1}, "queries": {"a": "SELECT 1"},
                              "intervals": "yes"}, base_dir=ws)


def test_run_refuses_a_directory_with_a_report(tmp_path: Path, demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    spec = ReportSpec.load(ws / "demo_small.yaml")
    run_report(spec, ws / "out", progress=False)
    with pytest.raises(PolicyError, match="already holds a report"):
        run_report(spec, ws / "out", progress=False)


def test_shared_ledger_history_is_charged_against(tmp_path: Path, demo_db: Path) -> None:
    import privplan as pp

    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    ledger = ws / "shared.sqlite"
    with pp.connect(ws / "demo.duckdb", policy=ws / "policy.yaml", budget=pp.PureDP(1),
                    ledger=ledger) as sess:
        sess.sql("SELECT COUNT(*) FROM visits WHERE age < 18", epsilon=0.5)
    spec = ReportSpec.load(ws / "demo_small.yaml", ledger=str(ledger))
    plan = plan_report(spec)
    assert plan.total_before == PureDP("0.5")
    kids = next(q for q in plan.queries if q.query.name == "kids")
    assert kids.budget.epsilon < 0.5 + 1e-9  # the children's cell holds 0.5 already
    run = run_report(spec, ws / "out", progress=False)
    assert run.total <= PureDP(1)
    assert verify_audit(run.audit_path).ok
    with pytest.raises(BudgetExceededError):  # the next period needs a new ledger
        plan_report(spec)


def test_pums_report_with_smartnoise_metadata(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "pums_quarterly.yaml", tmp_path)
    for f in ("PUMS.csv", "PUMS.yaml"):
        shutil.copy(PUMS / f, tmp_path)
    spec = ReportSpec.load(tmp_path / "pums_quarterly.yaml")
    run = run_report(spec, tmp_path / "out", progress=False)
    by = {q.query.name: q for q in run.plan.queries}
    # max objective, zCDP: young (weight 3) gets 3 times a race query's ρ; the races are disjoint
    assert by["young"].budget.rho == pytest.approx(3 * by["race_1"].budget.rho, rel=1e-6)
    assert ("race_1", "race_2") in run.plan.allocation.structure.disjoint
    assert run.total == ZCDP("0.5") or run.total <= ZCDP("0.5")
    assert verify_audit(run.audit_path).ok


def test_advanced_composition_report(tmp_path: Path, demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db, "demo_advanced.yaml")
    spec = ReportSpec.load(ws / "demo_advanced.yaml")
    run = run_report(spec, ws / "out", progress=False)
    plan = run.plan
    assert plan.report_total.cost <= spec.budget
    assert "advanced composition" in plan.report_total.rule
    # the ledger sums (its budget is that figure); the audit claims the advanced total
    assert run.total == plan.basic_total.cost
    audit = json.loads(run.audit_path.read_text())
    assert audit["composition"]["method"] == "advanced"
    assert verify_audit(run.audit_path).ok
    by = {q.query.name: q for q in plan.queries}
    assert by["by_age_90s"].budget.delta > 0 and by["stay_0"].budget.delta == 0
    with pytest.raises(PolicyError, match="new ledger"):  # (the default: beside the spec)
        run_report(spec, ws / "out2", progress=False)


# ============================================================================== CLI, progress


def test_cli_plan_run_and_verify(tmp_path: Path, demo_db: Path,
                                 capsys: pytest.CaptureFixture) -> None:
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    spec = str(ws / "demo_small.yaml")
    assert main(["report", "plan", spec]) == 0
    assert "Allocation and expected errors" in capsys.readouterr().out
    assert main(["report", "plan", spec, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["report"] == "small"
    out = ws / "out"
    assert main(["report", "run", spec, "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert Path(summary["audit"]).exists() and set(summary["results"]) >= {"kids", "insured"}
    assert main(["audit", "verify", str(out / "audit.json")]) == 0
    assert "VERIFIED" in capsys.readouterr().out
    (out / "results" / "kids.csv").write_text("n\n0\n")
    assert main(["audit", "verify", str(out / "audit.json")]) == EXIT_AUDIT_FAILED
    assert "FAILED" in capsys.readouterr().out
    assert main(["report", "plan", str(ws / "nope.yaml")]) == EXIT_USAGE
    assert main(["report", "run", spec, "--out", str(ws / "o2")]) == EXIT_BUDGET
    assert "budget" in capsys.readouterr().err  # the same (default) ledger is spent


def test_running_a_report_again_charges_the_same_budget(tmp_path: Path, demo_db: Path) -> None:
    """A re-run into a new directory used to get a new OUT/ledger.sqlite: a second full budget.
    The default ledger is now beside the spec: the re-run is refused, nothing more is spent."""
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    spec = ReportSpec.load(ws / "demo_small.yaml")
    first = run_report(spec, ws / "january", progress=False)
    assert first.ledger_path == ws / "demo_small.ledger.sqlite"
    with pytest.raises(BudgetExceededError):
        run_report(spec, ws / "february", progress=False)
    import privplan as pp
    with pp.connect(ws / "demo.duckdb", policy=ws / "policy.yaml", budget=pp.PureDP(1),
                    ledger=first.ledger_path) as s:
        assert s.spent() == first.total and len(s.ledger.entries()) == len(spec.queries)


def test_a_duplicated_key_in_a_spec_is_refused(tmp_path: Path, demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    text = (ws / "demo_small.yaml").read_text().replace(
        "budget: {epsilon: 1.0}", "budget: {epsilon: 1.0}\nbudget: {epsilon: 100}")
    (ws / "twice.yaml").write_text(text)
    with pytest.raises(PolicyError, match=r"twice.yaml.*duplicate key 'budget' at line 7 "
                                          r"\(first at line 6\)"):
        ReportSpec.load(ws / "twice.yaml")


def test_a_missing_parquet_writer_is_found_before_anything_is_charged(
        tmp_path: Path, demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    spec = ReportSpec.load(ws / "demo_small.yaml")
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)  # not installed
    with pytest.raises(PolicyError, match="needs the pyarrow package.*Nothing was charged"):
        run_report(spec, ws / "out", progress=False)
    assert not spec.ledger_path().exists()


def test_an_unwritable_output_directory_is_found_before_anything_is_charged(
        tmp_path: Path, demo_db: Path) -> None:
    import os
    ws = workspace(tmp_path, demo_db, "demo_small.yaml")
    spec = ReportSpec.load(ws / "demo_small.yaml")
    out = ws / "out"
    out.mkdir()
    out.chmod(0o555)
    try:
        if os.access(out, os.W_OK):  # root ignores permissions: a file where the dir would be
            out.chmod(0o755)
            out.rmdir()
            out.write_text("not a directory")
        with pytest.raises(PolicyError, match="Nothing was charged"):
            run_report(spec, out, progress=False)
    finally:
        if out.is_dir():
            out.chmod(0o755)
    assert not spec.ledger_path().exists()


def test_add_report_commands_wires_into_a_parser() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="privplan")
    sub = parser.add_subparsers(dest="command", required=True)
    add_report_commands(sub)
    args = parser.parse_args(["report", "run", "s.yaml", "--out", "d", "--no-progress"])
    assert args.func.__name__ == "cmd_report_run" and args.no_progress
    args = parser.parse_args(["audit", "verify", "a.json", "--no-files"])
    assert args.func.__name__ == "cmd_audit_verify" and args.no_files


def test_column_errors_match_result_accuracy(tmp_path: Path, demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db)
    spec = ReportSpec.from_dict({"database": "demo.duckdb", "policy": "policy.yaml",
                                 "budget": {"epsilon": 5}, "queries": {"a": "SELECT 1"}},
                                base_dir=ws)
    with open_session(spec) as sess:
        sql = ("SELECT hospital, COUNT(*) AS n, SUM(cost) AS c, AVG(cost) AS m FROM visits "
               "GROUP BY hospital")
        errors = column_errors(sess._plan(shape(sql, {"epsilon": 1}, sess.policy, sess.kind)))
        res = sess.sql(sql, epsilon=1)
    for e in errors:
        assert res.accuracy[e.column].std == e.std
        assert res.accuracy[e.column].halfwidth == e.halfwidth_95


def test_a_report_with_quantiles_runs_and_its_audit_verifies(tmp_path: Path,
                                                             demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db)
    spec = ReportSpec.from_dict({
        "database": "demo.duckdb", "policy": "policy.yaml", "budget": {"epsilon": 1},
        "queries": {
            "kids": "SELECT COUNT(*) AS n FROM visits WHERE age < 18",
            "medians": "SELECT hospital, MEDIAN(cost) AS m, COUNT(*) AS n FROM visits "
                       "GROUP BY hospital",
            "longest": "SELECT MAX(length_of_stay) AS longest FROM visits WHERE age >= 65"}},
        base_dir=ws)
    plan = plan_report(spec, ledger=None)
    errors = {e.column: e for e in next(q for q in plan.queries
                                        if q.query.name == "medians").errors}
    assert errors["m"].std is None and "rows of rank" in errors["m"].method
    assert "m: with 95% probability within" in str(plan)
    run = run_report(spec, ws / "out", progress=False)
    medians = pd.read_csv(run.files["medians"]["csv"])
    assert list(medians.columns) == ["hospital", "m", "n", "n_low", "n_high"]
    assert medians["m"].between(0, 20000).all() and (medians["m"] % 50 == 0).all()
    result = verify_audit(run.audit_path)
    assert result.ok, str(result)
    record = next(m for q in json.loads(run.audit_path.read_text())["queries"]
                  for m in q["mechanisms"] if m["measure"] == "quantile")
    assert record["noise"]["type"] == "exponential" and record["rank_error_95"] > 0


def test_a_report_with_a_per_unit_query_runs_and_its_audit_verifies(tmp_path: Path,
                                                                    demo_db: Path) -> None:
    ws = workspace(tmp_path, demo_db)
    shutil.copy(Path(demo_policy_path()).with_name("policy_patients.yaml"),
                ws / "patients.yaml")
    spec = ReportSpec.from_dict({
        "database": "demo.duckdb", "policy": "patients.yaml", "budget": {"epsilon": 2},
        "queries": {
            "patients": "SELECT COUNT(*) AS n FROM (SELECT patient_id FROM visits "
                        "GROUP BY patient_id) AS p",
            "visits": "SELECT COUNT(*) AS n FROM visits"}}, base_dir=ws)
    plan = plan_report(spec, ledger=None)
    patients = next(q for q in plan.queries if q.query.name == "patients")
    assert [e.std for e in patients.errors] and patients.errors[0].std is not None
    run = run_report(spec, ws / "out", progress=False)
    assert run.total <= PureDP(2)
    result = verify_audit(run.audit_path)
    assert result.ok, str(result)
    assert "2 queries re-planned" in next(c.detail for c in result.checks if c.name == "replan")
