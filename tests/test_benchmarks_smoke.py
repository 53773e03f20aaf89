"""Smoke test for ``benchmarks/overhead.py``: it runs end to end and writes the expected JSON.

Runs ``--quick --repeat 1`` (100k rows, then the fixed cost at 1k rows) in a subprocess, with the database cache and the results
file in a temporary directory. No assertions on time — only on the shape of the output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "overhead.py"

RESULT_KEYS = {
    "rows",
    "workload",
    "sql",
    "repeat",
    "dp_median_s",
    "plain_median_s",
    "ratio",
    "dp_times_s",
    "plain_times_s",
    "dp_breakdown_median_s",
    "explain_median_s",
    "dp_output_rows",
    "plain_output_rows",
}
WORKLOADS = {"grouped_count_sum_avg", "filtered_sum", "case_band_grouped", "filter_pair"}
FIXED_WORKLOADS = {"grouped_count_sum_avg", "filtered_sum", "case_band_grouped", "ordered_top3"}


def test_overhead_quick_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "results" / "overhead.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--repeat",
            "1",
            "--out",
            str(out),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ratio" in proc.stdout

    data = json.loads(out.read_text())
    assert data["benchmark"] == "overhead"
    assert data["rows"] == [100_000]
    assert data["repeat"] == 1
    assert set(data["prepare_s"]) == {"100000"} and data["prepare_s"]["100000"] > 0
    assert {"cpus", "platform", "python", "duckdb"} <= set(data["machine"])
    assert data["machine"]["cpus"] is None or data["machine"]["cpus"] >= 1

    results = data["results"]
    assert {r["workload"] for r in results} == WORKLOADS
    for r in results:
        assert RESULT_KEYS <= set(r), sorted(RESULT_KEYS - set(r))
        assert r["rows"] == 100_000
        assert len(r["dp_times_s"]) == len(r["plain_times_s"]) == 1
        assert r["dp_median_s"] > 0 and r["plain_median_s"] > 0
        assert r["ratio"] is not None and r["ratio"] > 0
        # the default session on the file `privplan prepare` ran on
        assert r["prepared_file_ratio"] is not None and r["prepared_file_ratio"] > 0
        # the DP answer has the same shape as the plain one (public groups are all released)
        assert r["dp_output_rows"] == r["plain_output_rows"]
        breakdown = r["dp_breakdown_median_s"]
        if breakdown is not None:  # None only if privplan's internals were renamed
            assert set(breakdown) == set(data["phases"])
            assert all(v >= 0 for v in breakdown.values())

    # long IN lists: explain and answer times per kind and length (--quick: 1k and 10k)
    assert {(r["kind"], r["values"]) for r in data["in_lists"]} == {
        (k, n) for k in ("int", "str") for n in (1_000, 10_000)}
    assert all(r["explain_median_s"] > 0 and r["answer_median_s"] > 0 for r in data["in_lists"])
    # the fixed cost per query at 1k rows: every workload, every phase, non-negative
    fixed = data["fixed_cost"]
    assert {r["workload"] for r in fixed} == FIXED_WORKLOADS
    for r in fixed:
        assert r["rows"] == 1_000 and r["dp_median_s"] > 0 and r["plain_median_s"] > 0
        assert set(r["phases_median_s"]) == set(data["fixed_cost_phases"])
        assert all(v >= 0 for v in r["phases_median_s"].values())
        assert len(r["dp_times_s"]) == len(r["plain_times_s"]) == r["repeat"]
    assert "fixed cost per query" in proc.stdout

    # many public keys: time and memory per key count (--quick: 1k and 10k over 100k rows)
    assert [(r["keys"], r["rows"]) for r in data["many_keys"]] == [(1_000, 100_000),
                                                                    (10_000, 100_000)]
    for r in data["many_keys"]:
        assert r["released_rows"] == r["keys"]  # every declared key, zero-filled
        assert r["explain_s"] > 0 and r["answer_s"] > 0 and r["peak_mb"] > 0

    # the cache is kept out of git
    assert (tmp_path / "data" / ".gitignore").read_text().strip().endswith("*")


SESSION_CAPACITY = ROOT / "benchmarks" / "session_capacity.py"


def test_session_capacity_quick_writes_json(tmp_path: Path) -> None:
    """``session_capacity.py --quick --peers none``: every workload and rule in the JSON, counts
    admitted by asking (no peers; the PLD rows may be unavailable or n/a)."""
    out = tmp_path / "session_capacity.json"
    proc = subprocess.run(
        [sys.executable, str(SESSION_CAPACITY), "--quick", "--peers", "none", "--out", str(out)],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PLD/additive" in proc.stdout
    data = json.loads(out.read_text())
    assert data["benchmark"] == "session_capacity"
    assert data["budget"] == {"epsilon": 1.0, "delta": 1e-6}
    assert data["cap"] == 300 and data["peers"] == []
    assert {"gaussian_sigma", "laplace_scale", "sensitivity"} <= set(data["noise"])
    rules = {"additive", "advanced", "gdp_session", "pld_session", "pld_batch"}
    assert set(data["rules"]) == rules
    ws = {w["id"]: w for w in data["workloads"]}
    assert set(ws) == {"gaussian_overlapping", "laplace_overlapping", "gaussian_half_disjoint",
                       "laplace_half_disjoint"}
    for w in ws.values():
        assert set(w["results"]) == rules
        assert {"pld_over_additive", "pld_over_best_peer", "best_peer"} <= set(w["ratios"])
        for r in w["results"].values():
            assert "status" in r and "admitted" in r
            assert r["admitted"] is None or 0 <= r["admitted"] <= data["cap"]
        assert w["results"]["additive"]["admitted"] > 0  # always measurable
    # Laplace, scale 20 (ε = 0.05 per query): the additive session admits 20 overlapping
    assert ws["laplace_overlapping"]["results"]["additive"]["admitted"] == 20
    # disjoint slices cost less than whole-table queries: more are admitted
    for noise in ("gaussian", "laplace"):
        assert (ws[f"{noise}_half_disjoint"]["results"]["additive"]["admitted"]
                > ws[f"{noise}_overlapping"]["results"]["additive"]["admitted"])
    gdp = ws["gaussian_overlapping"]["results"]["gdp_session"]["admitted"]
    assert gdp > ws["gaussian_overlapping"]["results"]["additive"]["admitted"]


ENGINES = ROOT / "benchmarks" / "engines.py"


def test_engines_tiny_writes_json(tmp_path: Path) -> None:
    """``engines.py --sizes 2000 --repeat 1 --engines duckdb postgres`` (a throw-away
    PostgreSQL server; Spark is left out, its start alone takes ~12 s): one row per engine and
    query, DP and plain times, and PostgreSQL's exact answers equal to DuckDB's."""
    from tests.servers.postgres_server import _bin_dir

    engines = ["duckdb", "postgres"] if _bin_dir() is not None else ["duckdb"]
    out = tmp_path / "engines.json"
    proc = subprocess.run(
        [sys.executable, str(ENGINES), "--sizes", "2000", "--repeat", "1", "--engines", *engines,
         "--out", str(out), "--data-dir", str(tmp_path / "data")],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "DP/plain" in proc.stdout
    data = json.loads(out.read_text())
    assert data["benchmark"] == "engines" and data["sizes"] == [2000] and data["repeat"] == 1
    assert [(r["engine"], r["query"]) for r in data["results"]] == [
        (e, q) for e in engines for q in ("grouped_count", "grouped_sum_avg",
                                          "grouped_count_avg", "filtered_count",
                                          "grouped_median")]
    for r in data["results"]:
        assert r["rows"] == 2000
        assert r["plain_median_s"] > 0 and r["stmt_median_s"] > 0 and r["dp_median_s"] > 0
        assert r["dp_over_plain"] > 0 and len(r["dp_times_s"]) == 1
        assert r["prepared_median_s"] > 0 and len(r["prepared_times_s"]) == 1
        assert r["engine_statements"]
        assert r["dp_output_rows"] == r["plain_output_rows"]
        if r["engine"] != "duckdb":
            assert r["matches_duckdb"] == {"plain": True, "stmt": True}
    # user level (DuckDB, PostgreSQL): plain, a fresh session's first answer, later ones, and
    # on PostgreSQL a session that inlines the bounded rows
    assert [(r["engine"], r["query"]) for r in data["user_level_results"]] == [
        (e, q) for e in engines for q in ("user_grouped_count", "user_sum_avg")]
    for r in data["user_level_results"]:
        assert r["plain_median_s"] > 0 and r["first_over_plain"] > 0
        assert r["later_over_plain"] > 0 and len(r["later_times_s"]) == 1
        assert ("inline_over_plain" in r) == (r["engine"] == "postgres")
    assert "later/pl." in proc.stdout


QUANTILE_TIMING = ROOT / "benchmarks" / "quantile_timing.py"


def test_quantile_timing_tiny_writes_json(tmp_path: Path) -> None:
    """``quantile_timing.py`` on a 50-cell grid, 20 timings per neighbour: both samplers'
    classifier accuracies and the speed rows in the JSON (no assertion on the figures)."""
    out = tmp_path / "quantile_timing.json"
    proc = subprocess.run(
        [sys.executable, str(QUANTILE_TIMING), "--timings", "20", "--cells", "50",
         "--speed-repeat", "2", "--out", str(out)],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "held-out acc." in proc.stdout
    data = json.loads(out.read_text())
    assert data["benchmark"] == "quantile_timing"
    assert [r["sampler"] for r in data["timing_channel"]] == [
        "exponential race (now)", "rejection sampler (before)"]
    for r in data["timing_channel"]:
        assert r["timings_per_side"] == 20 and r["cells"] == 50
        assert 0 <= r["accuracy_held_out"] <= 1 and 0.5 <= r["accuracy_in_sample"] <= 1
        assert r["median_us_12_rows"] > 0 and r["median_us_11_rows"] > 0
    assert [r["groups"] for r in data["speed"]] == [1, 5, 20]
    assert all(r["new_ms"] > 0 and r["old_ms"] > 0 for r in data["speed"])


DEFAULT_SESSION = ROOT / "benchmarks" / "default_session.py"


def test_default_session_tiny_writes_json(tmp_path: Path) -> None:
    """``default_session.py --rows 2000 --repeat 1``: every shape with its ratios, and the
    default session's copy really made (its second query) — no assertion on time."""
    out = tmp_path / "default_session.json"
    proc = subprocess.run(
        [sys.executable, str(DEFAULT_SESSION), "--rows", "2000", "--repeat", "1",
         "--out", str(out), "--data-dir", str(tmp_path / "data")],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    shapes = {r["shape"] for r in data["results"]}
    assert shapes == {"grouped COUNT", "SUM+AVG", "filtered COUNT"}
    for r in data["results"]:
        assert r["rows"] == 2000 and r["default_ratio"] > 0 and r["never_ratio"] > 0
        assert r["copy_s"] > 0 and r["first_s"] > 0
