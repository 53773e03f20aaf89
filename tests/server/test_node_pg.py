"""node-postgres (the npm package ``pg``) against the real server (tests/server/conftest.py):
``tests/server/clients/node_pg.js`` run with ``node``. SCRAM over TLS, table lists from
``information_schema`` and ``pg_catalog`` (the empty replica), a DP GROUP BY by the simple
query protocol and a parameterised one by the extended protocol, the cost NOTICEs, and the
over-budget error (code 53000) that charges nothing.

Where ``pg`` comes from: ``PRIVPLAN_NODE_MODULES``, a ``node_modules`` directory holding it
(.ci/run installs it there), else ``npm install --prefix <tmp> pg@8`` once per test session
(npm's own cache keeps the download). Without node/npm (or when the install fails) the test
is skipped locally and fails under CI."""

from __future__ import annotations

import os
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from tests.server.conftest import PASSWORDS, Running
from tests.servers import missing

SCRIPT = Path(__file__).parent / "clients" / "node_pg.js"
FIX = "install node and npm (apt-get install nodejs npm), or set PRIVPLAN_NODE_MODULES"


@pytest.fixture(scope="session")
def node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``node_modules`` directory holding ``pg``."""
    if shutil.which("node") is None:
        missing("node", "node is not on the PATH", FIX)
    given = os.environ.get("PRIVPLAN_NODE_MODULES")
    if given:
        if not (Path(given) / "pg" / "package.json").is_file():
            missing("node", f"PRIVPLAN_NODE_MODULES={given} holds no pg package", FIX)
        return Path(given)
    if shutil.which("npm") is None:
        missing("node", "npm is not on the PATH", FIX)
    prefix = tmp_path_factory.mktemp("node_pg")
    done = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                           "pg@8"], capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        missing("node", f"npm install pg failed: {done.stderr.strip()[-500:]}", FIX)
    return prefix / "node_modules"


@pytest.mark.slow
@pytest.mark.parametrize("verified", [False, True], ids=["tls-unverified", "tls-verified"])
def test_node_postgres_over_tls_simple_extended_notice_and_refusal(
        running: Running, node_modules: Path, verified: bool) -> None:
    before = running.spent() or Fraction(0)
    env = dict(os.environ, NODE_PATH=str(node_modules))
    ca = [str(running.folder / "server.crt")] if verified else []  # (the self-signed cert)
    done = subprocess.run(["node", str(SCRIPT), running.host, str(running.port), "alice",
                           PASSWORDS["alice"], *ca], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "connected tls"
    assert [x for x in lines if x.startswith("table ")] == ["table hospitals", "table visits"]
    assert [x for x in lines if x.startswith("relation ")] == [
        "relation hospitals", "relation visits"]
    for kind in ("simple", "param"):
        rows = [x.split(" ") for x in lines if x.startswith(kind + " ")]
        assert [r[1] for r in rows] == ["A", "B", "C", "D"], lines
        assert all(r[2].lstrip("-").isdigit() for r in rows)
    costs = [x for x in lines if x.startswith("notice NOTICE privplan: this answer cost ")]
    assert len(costs) == 2 and all("cost ε=0.5;" in x for x in costs), lines
    (refused,) = [x for x in lines if x.startswith(("refused ", "over budget"))]
    assert refused.startswith("refused 53000 ") and "budget exceeded" in refused
    assert lines[-1] == "after 1"
    # exactly the two answers charged: the catalog queries and the refusal spent nothing
    assert running.spent() == before + 2 * Fraction(1, 2)
