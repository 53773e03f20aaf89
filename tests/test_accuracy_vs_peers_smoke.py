"""Smoke test for ``benchmarks/accuracy_vs_peers.py``: privplan alone runs end to end and
writes the expected JSON.

Runs ``--quick --peers none`` (2,000 rows, 3 repetitions, no peer environments needed) in a
subprocess, with the results file in a temporary directory. No assertions on accuracy beyond
"finite, not negative, and positive where noise cannot round to zero".
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "accuracy_vs_peers.py"

WORKLOADS = {"grouped_count", "grouped_sum", "grouped_avg", "filtered_count", "filtered_sum",
             "session", "disjoint_session", "session_rewritten", "user_count", "user_sum"}
PRIVPLAN = ("privplan", "privplan (ε,δ)")


def test_accuracy_vs_peers_quick_privplan_only(tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--peers", "none", "--out", str(out)],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MAE" in proc.stdout

    data = json.loads(out.read_text())
    assert data["benchmark"] == "accuracy_vs_peers"
    top = {"rows", "repeat", "machine", "git", "data", "privacy", "systems", "workloads"}
    assert top <= set(data)
    assert data["quick"] is True and data["repeat"] == 3 and data["rows"] == 2_000
    assert {"cpus", "platform", "python", "privplan"} <= set(data["machine"])
    assert data["privacy"]["epsilon_total"] == 1.0
    assert set(data["privacy"]["per_query"]) == WORKLOADS
    assert set(data["systems"]) == set(PRIVPLAN)
    assert all(s["status"] == "ok" and s["versions"]["privplan"] for s in data["systems"].values())

    assert {w["id"] for w in data["workloads"]} == WORKLOADS
    for w in data["workloads"]:
        capped = [m for m in w["metrics"] if m["metric"].endswith("vs capped truth")]
        # user level is measured against the exact answer and against the capped one
        assert len(capped) == (len(w["metrics"]) // 2 if w["unit"] == "patient" else 0)
        assert all(m["cap_effect_mean_abs"] >= 0 for m in capped)
        for m in w["metrics"]:
            assert m["released_values"] >= 1 and m["truth_basis"]
            for name in PRIVPLAN:
                r = m["results"][name]
                assert {"mae", "ci95", "per_rep_mae", "missing_values"} <= set(r)
                assert len(r["per_rep_mae"]) == 3 and r["missing_values"] == 0
                assert math.isfinite(r["mae"]) and r["mae"] >= 0
                assert r["ci95"][0] <= r["mae"] <= r["ci95"][1]
                if "SUM" in m["metric"] or "AVG" in m["metric"]:
                    # noise on a 0.01 grid with scale >= 1000: an exact answer is ~impossible
                    assert r["mae"] > 0
            # no peer ran, so there is nothing to compare with
            assert m["ratio_privplan_vs_best_pure_peer"] is None
