"""Helpers shared by the benchmark scripts: timing, machine description, atomic JSON output.

The scripts are run as ``python benchmarks/<name>.py``, so this folder is on ``sys.path``.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

import privplan as pp

HERE = Path(__file__).resolve().parent
# the peers' virtual environments, one per peer, outside the repository (see README.md)
PEER_ENVS = Path(os.environ.get("PRIVPLAN_PEER_ENVS", HERE.parent.parent / "peer-envs"))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call, after a garbage collection."""
    gc.collect()
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds for a table cell ("-" when missing)."""
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def machine_info() -> dict[str, Any]:
    con = duckdb.connect(":memory:")
    try:
        threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    finally:
        con.close()
    return {
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "duckdb_threads": threads,
        "pandas": pd.__version__,
        "numpy": np.__version__,
        "privplan": pp.__version__,
    }


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` atomically (a reader never sees half a file) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    print(f"wrote {path}")


def git_revision() -> dict[str, Any]:
    """The repository's commit, and whether privplan's tracked sources (``src/``) differ from
    it (``None`` outside git)."""
    def git(*cmd: str) -> str | None:
        proc = subprocess.run(["git", *cmd], cwd=HERE, capture_output=True, text=True,
                              check=False)
        return proc.stdout.strip() if proc.returncode == 0 else None
    changed = git("status", "--porcelain", "--untracked-files=no", "--", str(HERE.parent / "src"))
    return {"commit": git("rev-parse", "HEAD"), "src_modified": None if changed is None
            else bool(changed)}


def prepared_file(db: Path, policy: Any) -> tuple[Path, float | None]:
    """A second name for the DuckDB file ``db`` (a hard link: the same bytes, no copy) with
    ``privplan prepare``'s durable copies made for ``policy`` beside it, so that a *default*
    session opened on it reads them while sessions on ``db`` itself do not (the copies file is
    found by the database's name). Returns the path and the seconds ``prepare`` took (None when
    the copies were there already, for the file as it is: a session then reads them)."""
    from privplan.engines.durable_copies import copies_path, open_copies
    from privplan.session.prepare import prepare_copies

    twin = db.with_name(db.stem + ".prepared" + db.suffix)
    if twin.exists() and not os.path.samefile(twin, db):
        twin.unlink()  # (db was generated again since)
    if not twin.exists():
        os.link(db, twin)
    if copies_path(twin).exists():
        con = duckdb.connect(str(twin), read_only=True)
        try:
            if open_copies(con, twin) is not None:
                return twin, None
        finally:
            con.close()
    start = time.perf_counter()
    prepare_copies(twin, policy)
    return twin, time.perf_counter() - start


def exported(db: Path, out: Path, select_sql: str, options: str) -> Path:
    """The rows of ``select_sql`` on the DuckDB file ``db`` written to ``out`` by DuckDB's
    ``COPY ... TO`` with ``options`` (written aside, then renamed), kept while newer than
    ``db``: the CSV and Parquet inputs of the engines and peers that do not read DuckDB."""
    if out.exists() and out.stat().st_mtime >= db.stat().st_mtime:
        return out
    tmp = out.with_name(out.name + ".tmp")
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute(f"COPY ({select_sql}) TO '{tmp}' ({options})")
    finally:
        con.close()
    tmp.replace(out)
    return out
