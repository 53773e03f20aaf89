"""Smoke test for ``benchmarks/fresh_session.py``: it runs end to end and writes the expected
JSON. ``--quick --repeat 1`` with a small many-keys case, in a subprocess, the database and
the results in a temporary directory. No assertions on time — only on the output's shape and
that fresh sessions reused the plans shared by the process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "fresh_session.py"
CASES = ["file row-level", "file user-level", "open connection row-level",
         "open connection user-level", "2,000 keys x 5,000 rows",
         "file user-level, 20,000 rows"]


def test_fresh_session_quick_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "fresh_session.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--repeat", "1", "--keys", "2000",
         "--big-rows", "5000", "--out", str(out), "--data-dir", str(tmp_path / "data")],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "target" in proc.stdout
    data = json.loads(out.read_text())
    assert data["benchmark"] == "fresh_session" and data["repeat"] == 1
    assert [r["case"] for r in data["results"]] == CASES
    for r in data["results"]:
        assert len(r["dp_times_s"]) == len(r["plain_times_s"]) == 1
        assert r["dp_median_s"] > 0 and r["plain_median_s"] > 0 and r["first_s"] > 0
    assert data["shared_plan_hits"] >= len(CASES)  # (every timed session after the first)
    # the floors: the engine calls a fresh session made (DuckDB's own query log) include the
    # statement it ran and the catalog reads, and replaying them took time
    for r in data["results"][2:5]:
        calls = r["engine_calls"]
        assert any(c.startswith("DESCRIBE") for c in calls)
        assert calls[-1].startswith("SELECT") and "__privplan_rows_per_key" in calls[-1]
        assert r["statement_median_s"] > 0 and r["noise_median_s"] > 0
    # on the file: the setting, the process's kept copy restored at user level (the second
    # fresh session made it), the statement (over the copy at user level)
    row, user = data["results"][:2]
    assert row["engine_calls"][0] == user["engine_calls"][0] == (
        "SET python_enable_replacements = false")
    assert user["engine_calls"][1].startswith("(restore __privplan_shared_")
    assert "__privplan_shared_" in user["engine_calls"][-1]
    assert "__privplan_shared_" not in row["engine_calls"][-1]
    for r in (row, user):
        assert r["statement_median_s"] > 0 and r["noise_median_s"] > 0
