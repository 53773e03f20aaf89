"""Smoke test for ``benchmarks/vs_peers.py``: privplan and plain DuckDB run end to end, every
peer is reported "not installed", and the JSON has the expected shape.

Runs ``--quick`` (100k rows, 2 repetitions) with ``--envs`` pointing at an empty folder, so
the path exercised is the same on every machine (CI has no peer environments), with the data
cache and the results file in a temporary directory. No assertions on time beyond "positive".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "vs_peers.py"

LOCAL = ("plain", "privplan", "privplan prepared", "privplan fresh")
PEERS = ("smartnoise", "smartnoise-sqlite", "qrlew", "opendp", "pipelinedp", "tumult")
QUERIES = ("grouped", "filtered", "user_grouped")
CELL_KEYS = {"rows", "query", "system", "status", "reason", "median_s", "ratio_to_plain", "runs",
             "times_s", "warmup_s", "warmup_counted", "parts_s"}


def test_vs_peers_quick_without_peers(tmp_path: Path) -> None:
    out = tmp_path / "vs_peers.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--envs", str(tmp_path / "no-envs"),
         "--out", str(out), "--data-dir", str(tmp_path / "data")],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "plain DuckDB" in proc.stdout and "not inst." in proc.stdout

    data = json.loads(out.read_text())
    assert data["benchmark"] == "vs_peers" and data["quick"] is True
    assert data["sizes"] == [100_000] and data["repeat"] == 2
    assert data["epsilon"] == 1.0 and list(data["peers"]) == list(PEERS)
    assert {"cpus", "platform", "python", "privplan"} <= set(data["machine"])
    assert set(data["queries"]) == set(QUERIES)
    assert data["queries"]["user_grouped"]["unit"] == "patient_id"
    assert data["queries"]["user_grouped"]["max_rows_per_unit"] == 10
    assert set(data["systems"]) == set(LOCAL) | set(PEERS)
    assert all(data["systems"][p]["status"] == "not installed" for p in PEERS)

    [size] = data["results"]
    assert size["rows"] == 100_000 and size["prepare_s"] > 0
    assert {p: size["loads"][p]["status"] for p in PEERS} == dict.fromkeys(PEERS, "not installed")
    cells = {(c["query"], c["system"]): c for c in size["cells"]}
    assert set(cells) == {(q, s) for q in QUERIES for s in LOCAL + PEERS}
    for q in QUERIES:
        for s in LOCAL:
            c = cells[q, s]
            assert CELL_KEYS <= set(c), sorted(CELL_KEYS - set(c))
            assert c["status"] == "ok" and c["runs"] == 2 and len(c["times_s"]) == 2
            assert c["median_s"] > 0 and c["ratio_to_plain"] > 0 and c["warmup_s"] > 0
        assert cells[q, "plain"]["ratio_to_plain"] == 1.0
        for p in PEERS:
            assert cells[q, p]["status"] == "not installed" and "no virtual environment" in \
                cells[q, p]["reason"]
    # the durable copies of `privplan prepare` are removed after the size
    assert not list((tmp_path / "data").glob("*.privplan-copies"))
