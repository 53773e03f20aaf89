"""Smoke test for ``benchmarks/server.py``: a real ``privplan serve`` process under a real
``pgbench`` for a few seconds (``--quick``: 10k rows, 2 clients); only the JSON's shape, no
failed transaction, and every admitted query charged are asserted (no timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "server.py"


@pytest.mark.slow
def test_server_benchmark_quick_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "server.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out), "--data-dir",
         str(tmp_path / "data")],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert data["benchmark"] == "server" and data["clients"] == 2
    server, ledger = data["server"], data["ledger"]
    assert server["returncode"] == 0 and server["failed"] == 0
    assert server["errors_in_output"] == 0
    assert server["transactions"] > 0 and server["logged_transactions"] == server["transactions"]
    assert ledger["verify_ok"] and ledger["total_equals_entries_times_epsilon"]
    assert data["charges_match"]
    assert {"latency_p50_s", "latency_p99_s", "tps"} <= set(server)
    assert {"latency_p50_s", "latency_p99_s", "transactions"} <= set(data["in_process"])
    assert data["ratio_p50_server_in_process"] > 0
    pooled = data["in_process_shared_accounts"]
    assert pooled["shared_accounts"] and not pooled["errors"] and pooled["transactions"] > 0
    one = data["one_client"]
    assert len(one["rounds"]) == 2 and one["failed"] == 0
    assert all(p["ratio_p50"] > 0 and not p["in_process"]["errors"] for p in one["rounds"])
    assert data["ratio_p50_server_1_client_in_process_1_thread"] == pytest.approx(
        sorted(p["ratio_p50"] for p in one["rounds"])[0] / 2
        + sorted(p["ratio_p50"] for p in one["rounds"])[1] / 2)
