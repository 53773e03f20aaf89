"""``privplan users add`` and ``privplan serve`` as a user runs them: a real process, a real
psql, Ctrl-C; bad inputs are one line, exit 2, and change nothing."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from privplan.cli import main
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.server.users import load_users

SRC = str(Path(__file__).resolve().parents[2] / "src")


def run(argv: list[str], stdin: str = "", monkeypatch: pytest.MonkeyPatch | None = None
        ) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    if monkeypatch is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_users_add_reads_the_password_from_stdin_or_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    users = tmp_path / "users.json"
    code, out, err = run(["users", "add", str(users), "alice", "--epsilon", "1", "--delta",
                          "1e-6"], "s3cret\n", monkeypatch)
    assert code == 0, err
    assert "added user 'alice'" in out and "must fit" in out
    secret = tmp_path / "pw.txt"
    secret.write_text("other secret\n")
    code, _, err = run(["users", "add", str(users), "bob", "--rho", "0.5", "--password-file",
                        str(secret)])
    assert code == 0, err
    loaded = load_users(users)
    assert loaded["alice"].budget == {"epsilon": 1.0, "delta": 1e-6}
    assert loaded["bob"].budget == {"rho": 0.5}
    assert "s3cret" not in users.read_text() and "other secret" not in users.read_text()


@pytest.mark.parametrize(("argv", "why"), [
    (["alice", "--epsilon", "1"], "already in users file"),
    (["carol"], "say the analyst's budget"),
    (["carol", "--epsilon", "1", "--rho", "1"], "names no privacy definition"),
    (["carol", "--epsilon", "-1"], "invalid budget"),
    (["bad name", "--epsilon", "1"], "user name"),
    (["carol", "--epsilon", "1", "--password-file", "/no/such/file"], "cannot be read"),
])
def test_a_failing_users_add_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             argv: list[str], why: str) -> None:
    users = tmp_path / "users.json"
    assert run(["users", "add", str(users), "alice", "--epsilon", "1"], "pw\n",
               monkeypatch)[0] == 0
    before = users.read_bytes()
    code, _, err = run(["users", "add", str(users), *argv], "pw\n", monkeypatch)
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1, err
    assert users.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users.json"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("cli-serve")
    db = write_demo_database(folder / "d.duckdb", rows=500)
    users = folder / "users.json"
    subprocess.run([sys.executable, "-m", "privplan.cli", "users", "add", str(users), "alice",
                    "--epsilon", "1"], input="pw\n", text=True, check=True,
                   env=dict(os.environ, PYTHONPATH=SRC), capture_output=True)
    return {"db": str(db), "users": str(users), "policy": str(demo_policy_path()),
            "dir": str(folder)}


@pytest.mark.parametrize(("extra", "why"), [
    (["--users", "/no/such/users.json", "--total-epsilon", "1"], "does not exist"),
    (["--total-epsilon", "1", "--tls-cert", "/no/cert.pem"], "go together"),
    (["--total-epsilon", "1", "--tls-cert", "/no/c.pem", "--tls-key", "/no/k.pem"],
     "cannot be loaded"),
    (["--total-epsilon", "1", "--listen", "localhost"], "HOST:PORT"),
    (["--total-epsilon", "1", "--total-rho", "1"], "name no privacy definition"),
    ([], "no total budget given"),
    (["--total-epsilon", "1", "--tls-required"], "--tls-required needs"),
])
def test_serve_refuses_bad_inputs_in_one_line_and_creates_no_ledger(
        files: dict[str, str], extra: list[str], why: str) -> None:
    ledger = Path(files["dir"]) / "never.ledger.sqlite"
    argv = ["serve", "--database", files["db"], "--policy", files["policy"], "--ledger",
            str(ledger), "--users", files["users"], "--listen", "127.0.0.1:0"]
    argv += extra  # (a second --users replaces the first, as argparse does)
    code, _, err = run(argv)
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1, err
    assert not ledger.exists()


def _serve(files: dict[str, str], ledger: Path, *extra: str) -> subprocess.Popen[str]:
    """``privplan serve`` as a process on a free port (its first stderr line says which)."""
    return subprocess.Popen(
        [sys.executable, "-m", "privplan.cli", "serve", "--database", files["db"], "--policy",
         files["policy"], "--ledger", str(ledger), "--users", files["users"], "--listen",
         "127.0.0.1:0", "--total-epsilon", "2", *extra],
        env=dict(os.environ, PYTHONPATH=SRC), stderr=subprocess.PIPE, text=True)


def test_serve_stops_on_sigterm_and_closes_its_ledgers(files: dict[str, str]) -> None:
    ledger = Path(files["dir"]) / "term.ledger.sqlite"
    proc = _serve(files, ledger)
    try:
        assert proc.stderr is not None
        assert "serving on" in proc.stderr.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()
    assert code == 0
    assert not Path(f"{ledger}-wal").exists()  # (closed: SQLite folds its WAL in on close)


@pytest.mark.slow
def test_serve_answers_psql_and_stops_on_ctrl_c(files: dict[str, str]) -> None:
    ledger = Path(files["dir"]) / "served.ledger.sqlite"
    proc = _serve(files, ledger, "--statement-timeout", "7.5", "--max-connections-per-user", "3")
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"serving on 127\.0\.0\.1:(\d+)", line)
        assert found, line
        done = subprocess.run(
            ["psql", f"host=127.0.0.1 port={found.group(1)} user=alice dbname=d sslmode=disable",
             "-X", "-A", "-t", "-c", "SET privplan.epsilon = 0.5", "-c",
             "SELECT COUNT(*) AS n FROM visits", "-c", "SHOW statement_timeout", "-c",
             "SHOW privplan.remaining"],
            env=dict(os.environ, PGPASSWORD="pw"), capture_output=True, text=True, timeout=60,
            check=False)
        assert done.returncode == 0, done.stderr
        # (alice's own remaining: ε = 1 of her own, not the total's 2)
        assert done.stdout.split()[-2:] == ["7500ms", "ε=0.5"]
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()
    assert code == 0
