"""The command line: demo end to end, query/explain, exit codes and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privplan.cli import EXIT_BUDGET, EXIT_USAGE, main
from privplan.demo.data import demo_policy_path, write_demo_database


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("cli") / "d.duckdb", rows=5_000)


def test_demo_runs_and_shows_the_saving(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["demo", "--dir", str(tmp_path), "--rows", "20000"]) == 0
    out = capsys.readouterr().out
    assert "Budget ledger" in out
    assert "q3: added ε=0 " in out  # the seniors' query is disjoint from the children's
    assert "Spent ε=3 of ε = 3.0" in out
    assert "would be ε = 4" in out
    assert (tmp_path / "hospital.duckdb").exists()


def test_query_json(db: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["query", "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital",
                 "--database", str(db), "--policy", str(demo_policy_path()),
                 "--total", "2", "--epsilon", "1", "--json", "--no-ledger"])
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert [r["hospital"] for r in payload["rows"]] == ["A", "B", "C", "D"]
    assert payload["cost"] == "ε=1"
    # the same answer shape as Result.with_intervals(): value, then its 95% interval
    half = payload["accuracy"]["n"]["halfwidth_95"]
    assert list(payload["rows"][0]) == ["hospital", "n", "n_low", "n_high"]
    assert all(r["n_low"] == r["n"] - half and r["n_high"] == r["n"] + half
               for r in payload["rows"])


def test_query_text_shows_intervals(db: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["query", "SELECT COUNT(*) AS n FROM visits", "--database", str(db),
                 "--policy", str(demo_policy_path()), "--total", "2", "--epsilon", "1",
                 "--no-ledger"])
    assert code == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header == ["n", "n_low", "n_high"]


def test_explain_text(db: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["explain", "SELECT COUNT(*) FROM visits WHERE age < 18", "--database", str(db),
                 "--policy", str(demo_policy_path()), "--total", "2", "--epsilon", "0.5",
                 "--no-ledger"])
    assert code == 0
    out = capsys.readouterr().out
    assert "age <= 17" in out or "age < 18" in out
    assert "Marginal cost against the ledger: ε=0.5" in out


def test_errors_are_one_line_with_exit_codes(db: Path, capsys: pytest.CaptureFixture) -> None:
    base = ["--database", str(db), "--policy", str(demo_policy_path()), "--total", "1",
            "--no-ledger"]
    assert main(["query", "SELECT * FROM visits", *base, "--epsilon", "1"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "\nprivplan: UnsupportedQueryError: SELECT * refused" in err
    assert main(["query", "SELECT COUNT(*) FROM visits", *base, "--epsilon", "2"]) == EXIT_BUDGET
    assert "budget exceeded" in capsys.readouterr().err


def test_budget_command_reads_a_ledger(db: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture) -> None:
    ledger = str(tmp_path / "l.sqlite")
    base = ["--database", str(db), "--policy", str(demo_policy_path()), "--ledger", ledger]
    assert main(["query", "SELECT COUNT(*) FROM visits WHERE age < 18", *base,
                 "--total", "2", "--epsilon", "0.5"]) == 0
    # the ledger remembers its budget: no --total needed any more
    assert main(["query", "SELECT COUNT(*) FROM visits WHERE age > 70", *base,
                 "--epsilon", "0.5"]) == 0
    capsys.readouterr()
    assert main(["budget", "--ledger", ledger, "--policy", str(demo_policy_path()),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["spent"] == "ε=0.5" and out["remaining"] == "ε=1.5" and out["budget"] == "ε=2"
    assert [q["added"] for q in out["queries"]] == ["ε=0.5", "ε=0"]


# ------------------------------------------------------------------ budgets never change silently


def _fresh_db(tmp_path: Path) -> Path:
    return write_demo_database(tmp_path / "d.duckdb", rows=2_000)


@pytest.mark.parametrize(("flags", "message"), [
    ([], "say how much privacy budget this query may use"),
    (["--epsilon", "0.5", "--rho", "0.1"], "--epsilon and --rho are two privacy definitions"),
    (["--rho", "0.1", "--delta", "1e-6"], "--delta and --total-delta go with --epsilon"),
    (["--epsilon", "0.5", "--delta", "1e-6"], "--total-delta is required with --delta"),
])
def test_query_budget_flags_are_required_and_exclusive(
        tmp_path: Path, capsys: pytest.CaptureFixture, flags: list[str], message: str) -> None:
    """No silent ε = 1, and no zCDP run reading --total as ρ: each is refused, nothing spent
    and no ledger written."""
    db = _fresh_db(tmp_path)
    code = main(["query", "SELECT COUNT(*) FROM visits", "--database", str(db),
                 "--policy", str(demo_policy_path()), "--total", "1", *flags])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and "Nothing was spent" in err, err
    assert not (tmp_path / "d.ledger.sqlite").exists()


def test_calls_without_ledger_share_the_default_one(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    """Each call used to start a new budget (run it ten times: ten budgets). The default ledger
    beside the database keeps one, announced when it is created."""
    db = _fresh_db(tmp_path)
    base = ["--database", str(db), "--policy", str(demo_policy_path()), "--json"]
    q = "SELECT COUNT(*) FROM visits"
    assert main(["explain", q, *base, "--total", "1", "--epsilon", "0.6"]) == 0
    assert "no ledger at" in capsys.readouterr().err
    assert not (tmp_path / "d.ledger.sqlite").exists()  # explain spends nothing, writes nothing
    assert main(["query", q, *base, "--total", "1", "--epsilon", "0.6"]) == 0
    captured = capsys.readouterr()
    assert f"new budget ledger {tmp_path / 'd.ledger.sqlite'}" in captured.err
    assert json.loads(captured.out)["spent"] == "ε=0.6"
    assert main(["query", q, *base, "--epsilon", "0.6"]) == EXIT_BUDGET  # 1.2 > 1
    assert "budget exceeded" in capsys.readouterr().err
    assert main(["query", q, *base, "--epsilon", "0.4"]) == 0
    assert json.loads(capsys.readouterr().out)["spent"] == "ε=1"


def test_no_ledger_says_the_budget_is_forgotten(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    db = _fresh_db(tmp_path)
    assert main(["query", "SELECT COUNT(*) FROM visits", "--database", str(db), "--policy",
                 str(demo_policy_path()), "--total", "1", "--epsilon", "1", "--no-ledger"]) == 0
    assert "forgotten when the command ends" in capsys.readouterr().err
    assert not (tmp_path / "d.ledger.sqlite").exists()
