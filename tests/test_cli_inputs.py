"""Every ``privplan`` subcommand given a missing, binary, unreadable or odd path, or a
negative count: one line on stderr, exit status 2 (1 for ``ledger verify``'s findings), no
traceback, nothing created or spent. The reviewers' cases: ``report plan <binary file>``
(UnicodeDecodeError), ``demo --dir <existing file>`` (FileExistsError), ``demo --rows -5``,
``demo --dir`` with a NUL byte."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import privplan as pp
from privplan.cli import main
from privplan.demo.data import demo_policy_path, write_demo_database


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("inputs")
    db = write_demo_database(d / "d.duckdb", rows=500)
    ledger = d / "l.sqlite"
    pp.connect(db, policy=demo_policy_path(), budget=pp.PureDP(1), ledger=ledger).close()
    (d / "binary").write_bytes(bytes(range(256)) * 4)
    (d / "dir").mkdir()
    (d / "spec.yaml").write_text("name: r\n")
    return {"db": str(db), "policy": str(demo_policy_path()), "ledger": str(ledger),
            "binary": str(d / "binary"), "dir": str(d / "dir"), "missing": str(d / "nope"),
            "nul": str(d / "a\x00b"), "spec": str(d / "spec.yaml"), "tmp": str(d)}


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # (argparse's usage error)
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


BAD = ("binary", "dir", "missing", "nul")
Q = "SELECT COUNT(*) FROM visits"


def _cases(f: dict[str, str]) -> list[tuple[str, list[str]]]:
    cases: list[tuple[str, list[str]]] = [
        ("demo --dir <existing file>", ["demo", "--dir", f["binary"], "--rows", "100"]),
        ("demo --dir NUL", ["demo", "--dir", f["nul"], "--rows", "100"]),
        ("demo --rows -5", ["demo", "--dir", f["dir"], "--rows", "-5"]),
        ("demo --rows 0", ["demo", "--dir", f["dir"], "--rows", "0"]),
        ("demo --rows x", ["demo", "--dir", f["dir"], "--rows", "x"]),
        ("query --total -5", ["query", Q, "--database", f["db"], "--policy", f["policy"],
                              "--no-ledger", "--total", "-5", "--epsilon", "0.1"]),
        ("query --epsilon -1", ["query", Q, "--database", f["db"], "--policy", f["policy"],
                                "--no-ledger", "--total", "1", "--epsilon", "-1"]),
        ("ledger backup to an existing file", ["ledger", "backup", f["ledger"], f["binary"]]),
        ("ledger backup into a missing dir", ["ledger", "backup", f["ledger"],
                                              f["missing"] + "/x.sqlite"]),
        ("ledger seal without a key", ["ledger", "seal", f["ledger"]]),
        ("ledger migrate --from-format-1 without policy",
         ["ledger", "migrate", f["ledger"], "--from-format-1"]),
        ("budget --plot into a missing dir", ["budget", "--ledger", f["ledger"], "--policy",
                                              f["policy"], "--plot", f["missing"] + "/p.png"]),
        ("report run --out <existing file>", ["report", "run", f["spec"], "--out",
                                              f["binary"]]),
    ]
    for bad in BAD:
        p = f[bad]
        cases += [
            (f"query --database {bad}", ["query", Q, "--database", p, "--policy", f["policy"],
                                         "--no-ledger", "--total", "1", "--epsilon", "0.1"]),
            (f"query --policy {bad}", ["query", Q, "--database", f["db"], "--policy", p,
                                       "--no-ledger", "--total", "1", "--epsilon", "0.1"]),
            *([] if bad == "missing" else [  # (a missing ledger is a new one)
                (f"query --ledger {bad}", ["query", Q, "--database", f["db"], "--policy",
                                           f["policy"], "--ledger", p, "--total", "1",
                                           "--epsilon", "0.1"])]),
            (f"explain --policy {bad}", ["explain", Q, "--database", f["db"], "--policy", p,
                                         "--no-ledger", "--epsilon", "0.1", "--total", "1"]),
            (f"budget --ledger {bad}", ["budget", "--ledger", p, "--policy", f["policy"]]),
            (f"budget --policy {bad}", ["budget", "--ledger", f["ledger"], "--policy", p]),
            (f"budget --database {bad}", ["budget", "--ledger", f["ledger"], "--policy",
                                          f["policy"], "--database", p]),
            (f"prepare {bad}", ["prepare", p, "--policy", f["policy"]]),
            (f"prepare --policy {bad}", ["prepare", f["db"], "--policy", p]),
            (f"ledger verify {bad}", ["ledger", "verify", p]),
            (f"ledger verify --policy {bad}", ["ledger", "verify", f["ledger"], "--policy", p]),
            (f"ledger backup {bad}", ["ledger", "backup", p, f["tmp"] + "/copy.sqlite"]),
            (f"ledger seal {bad}", ["ledger", "seal", p]),
            (f"ledger migrate {bad}", ["ledger", "migrate", p]),
            (f"report plan {bad}", ["report", "plan", p]),
            (f"report plan --database {bad}", ["report", "plan", f["spec"], "--database", p]),
            (f"report run {bad}", ["report", "run", p, "--out", f["tmp"] + "/out"]),
            (f"audit verify {bad}", ["audit", "verify", p]),
            (f"audit verify --ledger {bad}", ["audit", "verify", f["spec"], "--ledger", p]),
        ]
    return cases


def test_every_subcommand_refuses_bad_paths_and_counts_in_one_line(
        files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIVPLAN_LEDGER_KEY", raising=False)
    monkeypatch.delenv("PRIVPLAN_LEDGER_KEY_FILE", raising=False)
    before = sorted(os.listdir(files["tmp"]))
    ledger = Path(files["ledger"]).read_bytes()
    problems = []
    for label, argv in _cases(files):
        code, out, err = _run(argv)
        # (``ledger verify`` and ``audit verify`` report what they found: exit 1)
        found = label.startswith(("ledger verify ", "audit verify ")) and code == 1
        if code != 2 and not found or "Traceback" in out + err:
            problems.append(f"{label}: exit {code}, stderr {err.strip()[-300:]!r}")
        elif found and not out.strip() or not found and not 0 < len(
                err.strip().splitlines()) <= 2:
            problems.append(f"{label}: not a short message: {out!r} {err!r}")
    assert not problems, "\n".join(problems)
    assert sorted(os.listdir(files["tmp"])) == before, "a bad input created a file"
    assert Path(files["ledger"]).read_bytes() == ledger


UNREADABLE = """
    import contextlib, io, os, sys
    from privplan.cli import build_parser, main
    build_parser()  # (imports every subcommand's module while they can be read)
    if os.geteuid() == 0:  # root reads anything: run as nobody
        os.setgid(65534)
        os.setuid(65534)
    for argv in sys.argv[1:]:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                code = main(argv.split("|"))
            except SystemExit as exc:
                code = exc.code
        print(code, "Traceback" in err.getvalue(), err.getvalue().strip().splitlines()[:1])
"""


def test_unreadable_files_are_named(files: dict[str, str]) -> None:
    """A file this user may not read: named, exit 2, no traceback."""
    shared = Path(tempfile.mkdtemp(prefix="privplan-cli-"))
    try:
        shared.chmod(0o755)
        secret = shared / "secret.yaml"
        secret.write_text("tables: {}\n")
        secret.chmod(0o000)
        db = shared / "d.duckdb"
        shutil.copy(files["db"], db)
        db.chmod(0o644)
        runs = ["|".join(a) for a in (
            ["query", Q, "--database", str(db), "--policy", str(secret), "--no-ledger",
             "--total", "1", "--epsilon", "0.1"],
            ["ledger", "verify", str(secret)],
            ["report", "plan", str(secret)],
            ["prepare", str(db), "--policy", str(secret)])]
        p = subprocess.run([sys.executable, "-c", _dedent(UNREADABLE), *runs],
                           capture_output=True, text=True, timeout=300, check=False)
        lines = p.stdout.strip().splitlines()
        assert len(lines) == len(runs), p.stdout + p.stderr
        for line in lines:
            assert line.startswith("2 False") and "permission denied" in line, line
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _dedent(code: str) -> str:
    import textwrap

    return textwrap.dedent(code)
