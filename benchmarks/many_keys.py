"""Many public group keys: connect, explain and answer time and memory of one grouped query.

A DuckDB table of ``rows`` rows with a text key ``k`` drawn from ``keys`` public values (all
declared as the column's ``public_values``) and an int ``x`` in [0, 100]; the query is
``SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY k`` (every declared key is released).
Each case runs in a fresh process, so its peak memory is its own: ``before_connect_mb`` is the
process (Python, DuckDB and the table) before ``privplan.connect``; ``peak_mb`` the peak after
the answer; ``privplan_mb`` the difference, privplan's own share.

Run alone: ``python benchmarks/many_keys.py KEYS ROWS`` prints one JSON object. Used by
``overhead.py`` (``--many-keys``). Never asserts on time.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

KEYS = [10_000, 100_000]
QUICK_KEYS = [1_000, 10_000]
ROWS = 1_000_000
QUICK_ROWS = 100_000
SQL = "SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY k"


def _peak_mb() -> float:
    """This process's peak resident memory. On Linux from VmHWM (the high-water mark of this
    address space): ``ru_maxrss`` is inherited from the parent across fork and exec, so a case
    started by a big parent (``overhead.py`` after making a 10M-row database) read the
    parent's peak."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def run_case(n_keys: int, rows: int) -> dict[str, Any]:
    """One case in this process (see the module docstring)."""
    import duckdb
    import numpy as np
    import pandas as pd

    import privplan as pp

    rng = np.random.default_rng(1)
    keys = [f"k{i:06d}" for i in range(n_keys)]
    df = pd.DataFrame({"k": np.array(keys, dtype=object)[rng.integers(0, n_keys, rows)],
                       "x": rng.integers(0, 100, rows)})
    policy = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
        "k": {"type": "str", "public_values": keys, "nullable": False},
        "x": {"type": "int", "lower": 0, "upper": 100, "nullable": False}}}}})
    con = duckdb.connect()
    con.register("t_df", df)
    con.execute("CREATE TABLE t AS SELECT * FROM t_df")
    con.unregister("t_df")
    del df
    before = _peak_mb()
    start = time.perf_counter()
    sess = pp.connect(con, policy=policy, budget=pp.PureDP(100))
    connect_s = time.perf_counter() - start
    start = time.perf_counter()
    sess.explain(SQL, epsilon=1)
    explain_s = time.perf_counter() - start
    start = time.perf_counter()
    released = len(sess.sql(SQL, epsilon=1).df)
    answer_s = time.perf_counter() - start
    start = time.perf_counter()
    sess.sql(SQL, epsilon=1)
    second_s = time.perf_counter() - start
    peak = _peak_mb()
    sess.close()
    return {"keys": n_keys, "rows": rows, "connect_s": connect_s, "explain_s": explain_s,
            "answer_s": answer_s, "second_answer_s": second_s, "released_rows": released,
            "before_connect_mb": before, "peak_mb": peak, "privplan_mb": peak - before}


def measure(sizes: list[int], rows: int) -> list[dict[str, Any]]:
    """Each case in a fresh process (its own peak memory)."""
    out = []
    for n in sizes:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(n), str(rows)],
                              check=True, capture_output=True, text=True)
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        r = out[-1]
        print(f"  many keys {n:,} x {rows:,} rows: connect {r['connect_s'] * 1000:.0f} ms, "
              f"explain {r['explain_s'] * 1000:.0f} ms, answer {r['answer_s'] * 1000:.0f} ms, "
              f"privplan {r['privplan_mb']:.0f} MB", flush=True)
    return out


def print_table(results: list[dict[str, Any]]) -> None:
    print(f"\n{'keys':>8}  {'rows':>10}  {'connect ms':>10}  {'explain ms':>10}  "
          f"{'answer ms':>9}  {'2nd ms':>7}  {'privplan MB':>11}  {'peak MB':>7}")
    for r in results:
        print(f"{r['keys']:>8,}  {r['rows']:>10,}  {r['connect_s'] * 1000:>10.0f}  "
              f"{r['explain_s'] * 1000:>10.0f}  {r['answer_s'] * 1000:>9.0f}  "
              f"{r['second_answer_s'] * 1000:>7.0f}  {r['privplan_mb']:>11.0f}  "
              f"{r['peak_mb']:>7.0f}")
    print("GROUP BY a text key with that many public values, one run each in a fresh process; "
          "privplan MB = peak - before connect (the table and pandas excluded); 2nd = a second "
          "answer in the same session. Target (reported, not asserted): explain and answer under "
          "1 s and privplan under 300 MB at 100,000 keys.")


if __name__ == "__main__":
    print(json.dumps(run_case(int(sys.argv[1]), int(sys.argv[2]))))
