"""The PostgreSQL JDBC driver (Debian's ``libpostgresql-jdbc-java``) against the real server
(tests/server/conftest.py): ``tests/server/clients/Jdbc.java`` is compiled with ``javac`` and
run with ``java``. SCRAM over TLS, ``DatabaseMetaData.getTables``, ``getColumns``,
``getPrimaryKeys``, ``getImportedKeys``, ``getIndexInfo`` (JDBC's pg_catalog queries, answered
from the empty replica), a DP GROUP BY through a PreparedStatement (extended protocol,
one parameter), the cost NOTICE as a SQLWarning, and the over-budget SQLException (53000) that
charges nothing. Without java/javac or the driver the test is skipped locally and fails under
CI (.ci/run installs them)."""

from __future__ import annotations

import os
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from tests.server.conftest import PASSWORDS, Running
from tests.servers import missing

SOURCE = Path(__file__).parent / "clients" / "Jdbc.java"
DRIVER_FIX = "apt-get install libpostgresql-jdbc-java (and a JDK: javac, java)"


def driver() -> Path:
    """The driver's jar (``PRIVPLAN_JDBC_JAR``, else Debian's path), or skip/fail."""
    jar = Path(os.environ.get("PRIVPLAN_JDBC_JAR", "/usr/share/java/postgresql.jar"))
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            missing("jdbc", f"{tool} is not on the PATH", DRIVER_FIX)
    if not jar.is_file():
        missing("jdbc", f"the PostgreSQL JDBC driver is not at {jar}", DRIVER_FIX)
    return jar


@pytest.mark.slow
@pytest.mark.parametrize("verified", [False, True], ids=["tls-unverified", "tls-verified"])
def test_jdbc_driver_over_tls_metadata_prepared_notice_and_refusal(
        running: Running, tmp_path: Path, verified: bool) -> None:
    jar = driver()
    subprocess.run(["javac", "-cp", str(jar), "-d", str(tmp_path), str(SOURCE)],
                   check=True, capture_output=True, text=True, timeout=120)
    before = running.spent() or Fraction(0)
    ca = [str(running.folder / "server.crt")] if verified else []  # (the self-signed cert)
    done = subprocess.run(["java", "-cp", f"{jar}{os.pathsep}{tmp_path}", "Jdbc",
                           running.host, str(running.port), "alice", PASSWORDS["alice"], *ca],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "connected 15.0 (privplan)"
    tables = [line.split(" ", 1)[1] for line in lines if line.startswith("table ")]
    assert tables == ["main.hospitals", "main.visits"]  # the policy's tables (DuckDB's schema)
    columns = [line.split(" ")[1:] for line in lines if line.startswith("column ")]
    assert columns[:3] == [["visit_id", "int8"], ["patient_id", "int8"],
                           ["hospital", "varchar"]]
    assert ["age", "int8"] in columns and ["cost", "float8"] in columns
    assert "keys 0" in lines  # (no key or index in the replica: no constraint is published)
    assert "set" in lines
    rows = [line.split(" ") for line in lines if line.startswith("row ")]
    assert [r[1] for r in rows] == ["A", "B", "C", "D"]
    assert all(r[2].lstrip("-").isdigit() for r in rows)
    notices = [line for line in lines if line.startswith("notice ")]
    assert len(notices) == 1 and "privplan: this answer cost ε=0.5" in notices[0], lines
    (refused,) = [line for line in lines if line.startswith(("refused ", "over budget"))]
    assert refused.startswith("refused 53000 ") and "budget exceeded" in refused
    assert lines[-1] == "after 1"
    # exactly the one answer charged: the metadata query and the refusal spent nothing
    assert running.spent() == before + Fraction(1, 2)
