"""Every fenced Python and shell block of README.md runs as written, in order, after the
README's own first command, in a fresh virtual environment.

The slow test copies the checkout (its tracked and unignored files) into a temporary
directory, makes a venv there (``python -m venv``; packages from the registry, pip's cache
allowed), runs the README's first command in the copy — ``pip install ".[plot,parquet]" &&
privplan demo`` — and then every block in order, each its own subprocess, in that one
directory: exit 0, and per block something it must have printed or written. The README's
second command (``pip install -e ".[test]" && python -m pytest``) is the suite this test belongs
to (CI runs it through ``.ci/run``): it is checked to be there and not run.

What the blocks expect to find, as the README says where it comes from: ``sales.csv`` (the
user's CSV file: made here, with the columns the quick start names) and ``policy.yaml`` (the
README's policy block, saved as the file). The PostgreSQL and Spark blocks need what the
README names beside them: the engines' extra (installed here, ``pip install
".[postgres,spark]"``, just before them — pyspark is ~450 MB, so it is not part of the first
command; pip's cache makes it a copy), a PostgreSQL server whose ``clinic`` database has a
``visits`` table readable by ``analyst`` (a throw-away server, tests/servers/, reached by the
block's URL as written through libpq's ``PGPORT``), and a Java runtime (the block makes its own
local SparkSession). Without psycopg, PostgreSQL's binaries or Java the test is skipped locally
and fails under CI (tests/servers/__init__.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SETUP = ['pip install ".[plot,parquet]" && privplan demo',
         'pip install -e ".[test]" && python -m pytest']
RUN = {"python", "bash", "sh"}
NOT_CODE = {"yaml": "a policy file (the Python blocks read it saved as policy.yaml)"}
ENGINE_EXTRAS = 'pip install ".[postgres,spark]"'
PNG = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # where the block's first line of code is in README.md

    def __str__(self) -> str:
        return f"README.md line {self.line} ({self.lang})"


def readme_blocks(readme: Path = README) -> list[Block]:
    text = readme.read_text(encoding="utf-8")
    found = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.DOTALL | re.MULTILINE):
        found.append(Block(m.group(1), m.group(2), text.count("\n", 0, m.start(2)) + 1))
    return found


# what a block must have printed (substrings of its stdout) or written (files), found by a
# fragment of its code
EXPECT: dict[str, tuple[list[str], list[str]]] = {
    "sales.csv": (["n_low", "avg_high", "ε=0.5"], ["sales.png"]),
    "Policy.from_yaml": (["Mechanisms:", "PureDP(epsilon=1.5) PureDP(epsilon=1.5)"], []),
    "COPY demo.visits": ([], ["visits.parquet"]),
    "visits.dp.configure": (["PureDP(epsilon=3.5) PureDP(epsilon=0.5)"],
                            ["visits-budget.sqlite"]),
    "postgresql://": (["rows=4", "hospital"], ["budget.sqlite"]),
    "SparkSession": (["rows=4", "hospital"], []),
    "users add users.json": (["hospital|n", "this answer cost ε=0.25", "('ε=0.25',)"],
                             ["server.ledger.sqlite"]),
    "privplan explain": (["Mechanisms:", '"halfwidth_95"', "hash chain intact"],
                         ["budget.png", "copy.sqlite"]),
}


def test_every_block_is_run_or_declared_not_code() -> None:
    """A new block's language must be decided: run (Python, shell) or named as not code."""
    blocks = readme_blocks()
    assert blocks and blocks[0].lang == "bash"
    assert blocks[0].code.splitlines() == SETUP  # (the README starts with the two commands)
    assert README.read_text(encoding="utf-8").startswith("```bash\n" + "\n".join(SETUP))
    for block in blocks:
        assert block.lang in RUN or block.lang in NOT_CODE, (
            f"{block}: a ```{block.lang} block is neither run ({sorted(RUN)}) nor declared "
            f"not code (NOT_CODE); decide which in {Path(__file__).name}")
    runnable = [b for b in blocks[1:] if b.lang in RUN]
    for fragment in EXPECT:
        assert any(fragment in b.code for b in runnable), f"no README block has {fragment!r}"


# ============================================================================== the slow run


def _copy_checkout(dest: Path) -> None:
    """The checkout's tracked and unignored files (as a clone would have them, with the work
    tree's edits), or the whole tree without caches where git is unavailable."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], cwd=ROOT, capture_output=True,
                                check=True, timeout=60).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
            ".git", "__pycache__", "*.egg-info", "build", "privplan-demo", ".*_cache"))
        return
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


@dataclass
class Shell:
    """Runs commands in the copy of the checkout with the venv first on PATH."""

    work: Path
    env: dict[str, str]
    scripts: Path
    took: list[str]

    def run(self, block: Block, index: int, timeout: float,
            extra_env: dict[str, str] | None = None) -> str:
        script = self.scripts / f"block{index:02d}.{'py' if block.lang == 'python' else 'sh'}"
        script.write_text(block.code, encoding="utf-8")
        cmd = (["python", str(script)] if block.lang == "python"
               else ["bash", "-e", "-o", "pipefail", str(script)])
        env = {**self.env, **(extra_env or {})}
        started = time.perf_counter()
        done = subprocess.run(cmd, cwd=self.work, env=env, capture_output=True, text=True,
                              timeout=timeout)
        self.took.append(f"line {block.line}: {time.perf_counter() - started:.0f} s")
        assert done.returncode == 0, (
            f"{block} failed (exit {done.returncode}):\n{block.code}\n--- stdout\n"
            f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-5000:]}")
        return done.stdout


def _venv(root: Path) -> dict[str, str]:
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1",
               PRIVPLAN_PROGRESS="0")
    return env


def _sales_csv(path: Path) -> None:
    """The quick start's input, as the user would have it: region and amount columns."""
    rng = np.random.default_rng(0)
    pd.DataFrame({"region": rng.choice(["north", "south"], 50_000),
                  "amount": rng.uniform(0, 600, 50_000).round(2)}).to_csv(path, index=False)


@pytest.fixture(scope="module")
def clinic() -> Iterator[int]:
    """A throw-away PostgreSQL server (its port); the ``clinic`` database is filled later,
    from the demo's visits, by :func:`_fill_clinic`."""
    from tests.servers import missing
    from tests.servers.postgres_server import start_or_skip

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        missing("pyspark", "no Java runtime for the README's Spark block",
                "install a JDK 17 or later (apt-get install openjdk-17-jre-headless)")
    server = start_or_skip()
    try:
        yield server.port
    finally:
        server.stop()


def _fill_clinic(port: int, demo_db: Path) -> None:
    """``clinic.visits`` (the policy's columns of the demo's visits), readable by ``analyst``."""
    import duckdb
    import psycopg

    from tests.servers.postgres_server import load_frame

    base = f"postgresql://postgres@127.0.0.1:{port}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as con:
        con.execute("CREATE DATABASE clinic")
        con.execute("CREATE ROLE analyst LOGIN")
    with duckdb.connect(str(demo_db), read_only=True) as con:
        frame = con.sql("SELECT hospital, age, cost FROM visits").df()
    load_frame(f"{base}/clinic", "visits", frame,
               {"hospital": "VARCHAR", "age": "INTEGER", "cost": "DOUBLE"})
    with psycopg.connect(f"{base}/clinic", autocommit=True) as con:
        con.execute("GRANT SELECT ON visits TO analyst")


@pytest.mark.slow
def test_readme_blocks_run_as_written(tmp_path: Path, clinic: int,
                                      record_property: Callable[[str, object], None]) -> None:
    work, scripts = tmp_path / "privplan", tmp_path / "scripts"
    scripts.mkdir()
    _copy_checkout(work)
    shell = Shell(work, _venv(tmp_path), scripts, [])
    blocks = readme_blocks(work / "README.md")  # (the copy's: what the venv runs)
    first = Block("bash", SETUP[0], blocks[0].line)  # (SETUP[1] is this suite: not run here)
    out = shell.run(first, 0, timeout=1200)
    assert "Sequential composition" in out and (work / "privplan-demo/hospital.duckdb").exists()
    (policy,) = [b for b in blocks if b.lang == "yaml"]
    (work / "policy.yaml").write_text(policy.code, encoding="utf-8")
    _sales_csv(work / "sales.csv")
    engines_ready = False
    for index, block in enumerate(blocks[1:], start=1):
        if block.lang not in RUN:
            continue
        needs_engine = "postgresql://" in block.code or "SparkSession" in block.code
        if needs_engine and not engines_ready:
            shell.run(Block("bash", ENGINE_EXTRAS, block.line), 99, timeout=1200)
            _fill_clinic(clinic, work / "privplan-demo/hospital.duckdb")
            engines_ready = True
        out = shell.run(block, index, timeout=600, extra_env={"PGPORT": str(clinic)})
        for fragment, (printed, written) in EXPECT.items():
            if fragment in block.code:
                for text in printed:
                    assert text in out, f"{block}: {text!r} not in its output:\n{out[-3000:]}"
                for name in written:
                    assert (work / name).is_file(), f"{block} did not write {name}"
    assert (work / "sales.png").read_bytes()[:8] == PNG
    assert (work / "budget.png").read_bytes()[:8] == PNG
    record_property("summary", "README blocks, seconds each (a fresh venv): "
                    + ", ".join(shell.took))
