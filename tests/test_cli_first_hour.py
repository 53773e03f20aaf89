"""The command line's first hour (issue #36): --version, argument mistakes said as privplan's
one-line errors, JSON that people and programs can read (UTF-8, ISO 8601 times, the same
budget fields everywhere), the default ledger's name as help says it, a mistyped ledger offered
the one beside the database, and a ledger's fixed budget said truthfully."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import sqlite3
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from privplan.cli.commands import EXIT_BUDGET, EXIT_USAGE, build_parser, default_ledger, main
from privplan.cli.run import flag_words
from privplan.demo.data import demo_policy_path, write_demo_database

POLICY = str(demo_policy_path())
Q = "SELECT COUNT(*) AS n FROM visits"
SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("first") / "data.duckdb", rows=1_000)


def _run(argv: list[str], cwd: Path | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            code = main(argv)
        except SystemExit as exc:  # (--version and --help exit as argparse does)
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def _cli(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run([sys.executable, "-m", "privplan.cli", *argv], cwd=cwd, env=environ,
                          capture_output=True, timeout=300, check=False)


def _entries(ledger: Path) -> int:
    with contextlib.closing(sqlite3.connect(ledger)) as con:
        return int(con.execute("SELECT COUNT(*) FROM entries").fetchone()[0])


# ------------------------------------------------------------------ --version and argument errors


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    code, out, _ = _run(["--version"])
    assert code == 0 and out.strip() == f"privplan {metadata.version('privplan')}"
    p = _cli("--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.decode().strip() == out.strip()


def test_a_missing_flag_is_one_privplan_line_with_exit_2(db: Path, tmp_path: Path) -> None:
    """`privplan prepare` without --policy: argparse's bare usage block is gone; the line says
    what is missing, why the command needs it and what to add."""
    code, out, err = _run(["prepare", str(db)])
    assert code == EXIT_USAGE and out == ""
    assert err.splitlines() == [(
        "privplan: PolicyError: missing required argument --policy for `privplan prepare` "
        "(--policy: the policy says which tables are private and how far each value may reach; "
        "privplan never guesses it). Fix: add --policy policy.yaml (`privplan prepare --help` "
        "shows every option).")]
    p = _cli("prepare", str(db), cwd=tmp_path)  # (the real command: same line, same status)
    assert p.returncode == EXIT_USAGE and p.stderr.decode().strip() == err.strip()
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("argv", "words"), [
    (["query", Q, "--database", "d", "--policy", "p", "--epsilonn", "1"],
     ["unknown option --epsilonn", "did you mean --epsilon?"]),
    (["query", Q, "--database", "d", "--policy", "p", "--epsilon", "x"],
     ["--epsilon 'x' is not a number", "e.g. --epsilon 0.5"]),
    (["qeury"], ["unknown command 'qeury'", "did you mean privplan query?"]),
    (["report"], ["no command given to `privplan report`", "add one of plan, run"]),
    ([], ["no command given to `privplan`", "add one of demo"]),
])
def test_argument_mistakes_name_the_flag_and_the_fix(argv: list[str], words: list[str]) -> None:
    code, _, err = _run(argv)
    assert code == EXIT_USAGE and len(err.strip().splitlines()) == 1, err
    assert err.startswith("privplan: PolicyError: ") and all(w in err for w in words), err


def test_help_is_still_help() -> None:
    code, out, _ = _run(["query", "--help"])
    assert code == 0 and "--epsilon" in out


# --------------------------------------------------------------------------------------- JSON


def test_every_json_output_is_utf8_with_iso_times_and_the_same_budget_fields(
        db: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "l.ledger.sqlite"
    base = ["--database", str(db), "--policy", POLICY, "--ledger", str(ledger)]
    code, out, _ = _run(["query", Q, *base, "--total", "1", "--epsilon", "0.25", "--json"])
    assert code == 0
    query = json.loads(out)
    assert "\\u" not in out and '"ε=0.25"' in out
    code, out, _ = _run(["budget", "--ledger", str(ledger), "--policy", POLICY, "--json"])
    budget = json.loads(out)
    assert "\\u" not in out
    # query --json says budget, spent and remaining as budget --json does
    assert {k: query[k] for k in ("budget", "spent", "remaining")} == {
        k: budget[k] for k in ("budget", "spent", "remaining")} == {
        "budget": "ε=1", "spent": "ε=0.25", "remaining": "ε=0.75"}
    when = dt.datetime.fromisoformat(budget["queries"][0]["time"])
    assert when.utcoffset() == dt.timedelta(0)
    assert abs((dt.datetime.now(dt.UTC) - when).total_seconds()) < 600
    for argv in (["explain", Q, *base, "--epsilon", "0.25", "--json"],
                 ["ledger", "verify", str(ledger), "--json"]):
        code, out, _ = _run(argv)
        assert code == 0 and "\\u" not in out and "ε=" in out, argv
        json.loads(out)


def test_json_is_written_as_utf8_where_stdout_is_ascii(db: Path, tmp_path: Path) -> None:
    """A terminal or pipe whose encoding is ASCII: --json still writes UTF-8 (JSON's encoding),
    and the text output shows ε as an escape rather than failing after the charge."""
    ascii_env = {"PYTHONIOENCODING": "ascii"}
    p = _cli("query", Q, "--database", str(db), "--policy", POLICY, "--total", "1",
             "--epsilon", "0.5", "--json", cwd=tmp_path, env=ascii_env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.decode("utf-8"))["remaining"] == "ε=0.5"
    p = _cli("query", Q, "--database", str(db), "--policy", POLICY, "--epsilon", "0.25",
             cwd=tmp_path, env=ascii_env)
    assert p.returncode == 0 and b"\\u03b5=0.25" in p.stdout, p.stderr
    assert _entries(default_ledger(db)) == 2
    default_ledger(db).unlink()


# ------------------------------------------------------------------------------ the ledgers


def test_the_default_ledger_is_named_as_help_says(db: Path) -> None:
    """Help promises `data.duckdb -> data.ledger.sqlite` beside the database, which is the name
    privplan has always used (another would strand existing ledgers and start a new budget)."""
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["query"]
    help_text = next(a.help for a in sub._actions if a.dest == "ledger")
    assert "data.duckdb -> data.ledger.sqlite" in (help_text or "")
    assert default_ledger(db) == db.with_name("data.ledger.sqlite")
    assert default_ledger("x/data.duckdb") == Path("x/data.ledger.sqlite")


def test_a_mistyped_ledger_is_offered_the_one_beside_the_database(db: Path,
                                                                  tmp_path: Path) -> None:
    (tmp_path / "data.duckdb").symlink_to(db)
    base = ["--database", "data.duckdb", "--policy", POLICY]
    assert _run(["query", Q, *base, "--total", "1", "--epsilon", "0.25"], tmp_path)[0] == 0
    assert (tmp_path / "data.ledger.sqlite").exists()
    # no --total: refused, the existing ledger offered by its flag
    code, _, err = _run(["query", Q, *base, "--epsilon", "0.25", "--ledger", "dat.ledger.sqlite"],
                        tmp_path)
    assert code == EXIT_USAGE and "did you mean --ledger ./data.ledger.sqlite?" in err, err
    code, _, err = _run(["budget", "--ledger", "data.ledger.sqlit", "--policy", POLICY,
                         "--database", "data.duckdb"], tmp_path)
    assert code == EXIT_USAGE and "did you mean --ledger ./data.ledger.sqlite?" in err, err
    assert "ledger=" not in err
    # explain spends nothing: a missing --ledger is an empty history, made into no file
    code, _, err = _run(["explain", Q, *base, "--epsilon", "0.25", "--total", "1", "--ledger",
                         "dat.ledger.sqlite"], tmp_path)
    assert code == 0 and "did you mean --ledger ./data.ledger.sqlite?" in err, err
    assert not (tmp_path / "dat.ledger.sqlite").exists()
    # with --total a new ledger is a new, whole budget: made, and said with the offer
    code, _, err = _run(["query", Q, *base, "--epsilon", "0.25", "--total", "1", "--ledger",
                         "other.sqlite"], tmp_path)
    assert code == 0 and "new budget ledger other.sqlite" in err
    assert "did you mean --ledger ./data.ledger.sqlite?" in err
    assert _entries(tmp_path / "data.ledger.sqlite") == 1


def test_a_ledgers_budget_is_fixed_and_said_in_flags(db: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "fixed.sqlite"
    base = ["query", Q, "--database", str(db), "--policy", POLICY, "--ledger", str(ledger)]
    assert _run([*base, "--total", "1", "--epsilon", "0.25"])[0] == 0
    before = ledger.read_bytes()
    code, _, err = _run([*base, "--total", "5", "--epsilon", "0.25"])
    assert code == EXIT_USAGE and "--total says ε=5" in err and "leave out --total" in err
    assert "new ledger" in err and "Nothing was spent" in err
    code, _, err = _run([*base, "--rho", "0.1"])
    assert code == EXIT_USAGE and "with --epsilon" in err and "rho=" not in err, err
    assert ledger.read_bytes() == before and _entries(ledger) == 1


def test_a_database_url_has_no_default_ledger(tmp_path: Path) -> None:
    code, _, err = _run(["query", Q, "--database", "postgresql://u@localhost/db", "--policy",
                         POLICY, "--total", "1", "--epsilon", "0.5"], tmp_path)
    assert code == EXIT_USAGE and "pass --ledger FILE" in err, err
    assert not list(tmp_path.rglob("*")), "a ledger was created under a URL-shaped path"


def test_library_messages_name_flags_on_the_command_line(db: Path) -> None:
    code, _, err = _run(["query", "SELECT patient_id, COUNT(*) FROM visits GROUP BY patient_id",
                         "--database", str(db), "--policy", POLICY, "--no-ledger", "--total", "1",
                         "--epsilon", "0.5"])
    assert code == EXIT_USAGE and "pass --epsilon and --delta" in err
    assert "epsilon=" not in err and "pp.ApproxDP" not in err
    assert flag_words("pass delta= with epsilon= (e.g. delta=1e-6); write OPTIONS(epsilon=1, "
                      "delta=1e-5)") == ("pass --delta with --epsilon (e.g. --delta 1e-6); write "
                                         "OPTIONS(epsilon=1, delta=1e-5)")


# ------------------------------------------------------------------------------------ reports


def test_a_spent_report_ledger_says_what_can_really_be_done(db: Path, tmp_path: Path) -> None:
    spec = tmp_path / "monthly.yaml"
    spec.write_text(f"database: {db}\npolicy: {POLICY}\nbudget: {{epsilon: 1}}\n"
                    f"queries: [{{name: a, sql: {Q}}}]\n")
    code, out, err = _run(["report", "run", str(spec), "--out", str(tmp_path / "o1"),
                           "--no-progress", "--json"])
    assert code == 0, err
    assert "new budget ledger" in err
    summary = json.loads(out)
    assert (summary["total"], summary["spent"], summary["remaining"]) == ("ε=1", "ε=1", "ε=0")
    ledger = tmp_path / "monthly.ledger.sqlite"
    before = ledger.read_bytes()
    code, _, err = _run(["report", "run", str(spec), "--out", str(tmp_path / "o2"),
                         "--no-progress"])
    assert code == EXIT_BUDGET and "no budget is left" in err
    assert "larger budget" not in err and "raise the budget" not in err
    assert "new ledger" in err and "--ledger NEW.ledger.sqlite" in err
    spec.write_text(spec.read_text().replace("epsilon: 1", "epsilon: 2"))
    code, _, err = _run(["report", "plan", str(spec)])
    assert code == EXIT_USAGE and "`budget:` {epsilon: 2} differs from ε=1" in err
    assert "set `budget:` back to {epsilon: 1}" in err
    code, _, err = _run(["report", "plan", str(spec), "--ledger", str(tmp_path / "nope.sqlite")])
    assert code == EXIT_USAGE and "did you mean --ledger" in err
    assert not (tmp_path / "nope.sqlite").exists()  # planning makes no ledger
    assert ledger.read_bytes() == before
    code, out, _ = _run(["audit", "verify", str(tmp_path / "o1" / "audit.json"), "--json",
                         "--no-replan"])
    assert code == 0 and json.loads(out)["ok"] is True
