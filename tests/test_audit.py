"""The report audit file (privplan.audit): offline verification, and tampering detection."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from privplan.audit import FORMAT, canonical_hash, verify_audit
from privplan.cli.report import EXIT_AUDIT_FAILED, main
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.report import ReportSpec, run_report

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "reports"


def _run(base: Path, fixture: str) -> Path:
    """Run a fixture report in ``base``; return its output directory."""
    shutil.copy(FIXTURES / fixture, base / fixture)
    shutil.copy(demo_policy_path(), base / "policy.yaml")
    write_demo_database(base / "demo.duckdb", rows=20_000)
    # (the ledger inside the output directory, so a copy of it carries its ledger along)
    run_report(ReportSpec.load(base / fixture), base / "out", ledger=base / "out" / "ledger.sqlite",
               progress=False)
    return base / "out"


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = _run(tmp_path_factory.mktemp("audit"), "demo_small.yaml")
    (out.parent / "demo.duckdb").unlink()  # verification must not need the database
    return out


@pytest.fixture(scope="module")
def advanced_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("audit_adv"), "demo_advanced.yaml")


@pytest.fixture()
def work(report_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the report (results, ledger, audit) a test may tamper with."""
    dst = tmp_path / "out"
    shutil.copytree(report_dir, dst)
    return dst


def load(d: Path) -> dict[str, Any]:
    return json.loads((d / "audit.json").read_text())


def save(d: Path, doc: dict[str, Any], *, rehash: bool) -> Path:
    if rehash:  # a forger who recomputes the file's own hash
        doc["sha256"] = canonical_hash(doc)
    path = d / "audit.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def failed(d: Path, **kw: Any) -> set[str]:
    result = verify_audit(d / "audit.json", **kw)
    assert not result.ok
    return {c.name for c in result.failures()}


def test_audit_verifies_offline(report_dir: Path) -> None:
    assert not (report_dir.parent / "demo.duckdb").exists()
    result = verify_audit(report_dir / "audit.json")
    assert result.ok, str(result)
    names = {c.name: c for c in result.checks}
    assert set(names) == {"format", "integrity", "decode", "tables", "regions", "noise",
                          "replan", "queries", "total", "files", "ledger"}
    assert "recomposed offline with compose" in names["total"].detail
    assert "10 result files" in names["files"].detail  # 5 queries x (parquet, csv)


def test_audit_contents(report_dir: Path) -> None:
    doc = load(report_dir)
    assert doc["format"] == FORMAT and doc["complete"] is True
    q = doc["queries"][0]
    m = q["mechanisms"][0]
    assert m["region_sql"] == "age < 18" or "age" in m["region_sql"]
    assert m["mechanism"]["region"]["boxes"]  # the exact serialised region
    assert m["noise"]["type"] == "discrete_laplace" and "/" in m["noise"]["scale"]
    assert m["cost"]["encoded"]["kind"] == "PureDP"
    assert set(q["files"]) == {"parquet", "csv"} and len(q["files"]["csv"]["sha256"]) == 64
    comp = doc["composition"]
    assert comp["method"] == "basic" and comp["within_budget"] is True and comp["rule"]
    assert doc["ledger"]["path"] == "ledger.sqlite"


@pytest.mark.parametrize("rehash", [False, True])
def test_tampered_cost_fails(work: Path, rehash: bool) -> None:
    doc = load(work)
    m = doc["queries"][1]["mechanisms"][0]
    m["mechanism"]["cost"]["weights"] = ["1/1000"]  # claim less was spent
    m["cost"]["encoded"]["weights"] = ["1/1000"]
    save(work, doc, rehash=rehash)
    bad = failed(work)
    assert {"noise", "replan", "ledger"} <= bad
    assert ("integrity" in bad) is not rehash


@pytest.mark.parametrize("rehash", [False, True])
def test_tampered_region_fails(work: Path, rehash: bool) -> None:
    doc = load(work)
    region = doc["queries"][0]["mechanisms"][0]["mechanism"]["region"]
    region["boxes"] = [[["age", {"null": False, "intervals": [
        [{"int": "200"}, {"int": "300"}, True, True]]}]]]  # a region no record is in
    save(work, doc, rehash=rehash)
    assert {"regions", "replan", "ledger"} <= failed(work)


def test_tampered_region_with_matching_text_fails(work: Path) -> None:
    doc = load(work)
    mech = doc["queries"][0]["mechanisms"][0]
    mech["mechanism"]["region"]["boxes"] = [[["age", {"null": False, "intervals": [
        [{"int": "200"}, {"int": "300"}, True, True]]}]]]
    mech["region_sql"] = "age BETWEEN 200 AND 300"
    save(work, doc, rehash=True)
    bad = failed(work)
    assert "regions" not in bad and {"replan", "ledger"} <= bad


@pytest.mark.parametrize(("what", "mutate", "check"), [
    ("total", lambda d: d["composition"]["total"]["encoded"].update(weights=["1/2"]), "total"),
    ("within", lambda d: d["composition"].update(within_budget=False), "total"),
    ("budget", lambda d: d["queries"][2]["budget"]["encoded"].update(weights=["1/1"]), "replan"),
    ("drop", lambda d: d["queries"][3]["mechanisms"].pop(), "replan"),
    ("sql", lambda d: d["queries"][0].update(sql="SELECT COUNT(*) AS n FROM visits"), "replan"),
])
def test_other_tampering_fails(work: Path, what: str, mutate: Callable[[dict], None],
                               check: str) -> None:
    doc = load(work)
    mutate(doc)
    save(work, doc, rehash=True)
    assert check in failed(work), what


def test_result_files_are_checked(work: Path) -> None:
    (work / "results" / "kids.csv").write_text("n\n123\n")
    assert failed(work) == {"files"}
    assert verify_audit(work / "audit.json", check_files=False).ok
    (work / "results" / "kids.parquet").unlink()
    assert "files" in failed(work)


def test_ledger_cross_check(work: Path, tmp_path: Path) -> None:
    import privplan as pp

    db = write_demo_database(tmp_path / "demo.duckdb", rows=2_000)
    other = tmp_path / "other.sqlite"  # a ledger whose q1 was charged for another query
    with pp.connect(db, policy=demo_policy_path(), budget=pp.PureDP(1), ledger=other) as sess:
        sess.sql("SELECT COUNT(*) AS n FROM visits WHERE age < 18", epsilon=0.5)
    assert "ledger" in failed(work, ledger=other)
    (work / "ledger.sqlite").unlink()
    result = verify_audit(work / "audit.json")
    assert result.ok and next(c for c in result.checks if c.name == "ledger").skipped


def test_not_an_audit(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"format": "something-else"}')
    r = verify_audit(tmp_path / "a.json")
    assert not r.ok and r.failures()[0].name == "format"
    (tmp_path / "b.json").write_text("{not json")
    assert not verify_audit(tmp_path / "b.json").ok
    assert not verify_audit(tmp_path / "missing.json").ok


def test_partial_report_is_flagged(work: Path) -> None:
    doc = load(work)
    doc["complete"] = False
    save(work, doc, rehash=True)
    result = verify_audit(work / "audit.json")
    assert result.ok
    assert "interrupted" in result.checks[0].detail


def test_advanced_audit_verifies_and_detects_a_changed_delta_prime(advanced_dir: Path,
                                                                   tmp_path: Path) -> None:
    result = verify_audit(advanced_dir / "audit.json")
    assert result.ok, str(result)
    assert "advanced_total" in next(c for c in result.checks if c.name == "total").detail
    work = tmp_path / "out"
    shutil.copytree(advanced_dir, work)
    doc = load(work)
    doc["composition"]["delta_prime"] = "1/1000"  # a larger δ' would allow a smaller ε
    save(work, doc, rehash=True)
    assert "total" in failed(work)


def test_gaussian_dp_audit_records_rounded_gaussian_noise(tmp_path: Path) -> None:
    out = _run(tmp_path, "demo_gdp.yaml")
    result = verify_audit(out / "audit.json")
    assert result.ok, str(result)
    doc = load(out)
    noises = [m["noise"] for q in doc["queries"] for m in q["mechanisms"]]
    assert noises and all(n["type"] == "rounded_gaussian" for n in noises), noises
    first = noises[0]
    first["sigma"] = str(Fraction(first["sigma"]) / 2)  # half the noise: μ doubles
    save(out, doc, rehash=True)
    assert "noise" in failed(out)


def test_cli_verify_exit_codes(work: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", "verify", str(work / "audit.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    doc = load(work)
    doc["composition"]["total"]["encoded"]["weights"] = ["1/3"]
    save(work, doc, rehash=False)
    assert main(["audit", "verify", str(work / "audit.json")]) == EXIT_AUDIT_FAILED
    out = capsys.readouterr().out
    assert "FAILED" in out and "[FAIL] integrity" in out


def test_pld_audit_verifies_and_detects_a_changed_delta_or_total(tmp_path: Path) -> None:
    out = _run(tmp_path, "demo_pld.yaml")
    result = verify_audit(out / "audit.json")
    assert result.ok, str(result)
    assert "pld_total" in next(c for c in result.checks if c.name == "total").detail
    doc = load(out)
    doc["composition"]["delta"] = "1/1000"  # a larger δ would allow a smaller ε
    save(out, doc, rehash=True)
    assert "total" in failed(out)
