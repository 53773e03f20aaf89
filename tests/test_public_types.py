"""Public types: ``mypy --strict`` on a user's script catches a budget of the wrong kind, as the
session refuses it at run time. The session is generic in its privacy definition, so
``connect(..., budget=pp.PureDP(3))`` is a ``Session[PureDP]``: its ``sql`` takes ``epsilon=``
only, and its ``spent()``, ``remaining()`` and ``Result.cost`` are ``PureDP`` values."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import privplan

SCRIPT = '''\
import privplan as pp

s = pp.connect("d.duckdb", policy="p.yaml", budget=pp.PureDP(3))
r = s.sql("SELECT COUNT(*) FROM t", epsilon=0.5)
eps: float = s.spent().epsilon + r.cost.epsilon + s.remaining().epsilon
s.sql("SELECT COUNT(*) FROM t", rho=0.1)  # MISTAKE call-arg
print(s.remaining().rho)  # MISTAKE attr-defined
s.sql("SELECT COUNT(*) FROM t", epsilon="0.5")  # MISTAKE arg-type
pp.connect("d.duckdb", policy="p.yaml", budget=1.0)  # MISTAKE type-var
z = pp.connect("d.duckdb", policy="p.yaml", budget=pp.ZCDP(1))
rho: float = z.sql("SELECT COUNT(*) FROM t", rho=0.2, max_groups_contributed=2).cost.rho
z.sql("SELECT COUNT(*) FROM t", epsilon=1)  # MISTAKE call-arg
z.explain("SELECT COUNT(*) FROM t", mu=1)  # MISTAKE call-arg
a = pp.connect("d.duckdb", policy="p.yaml", budget=pp.ApproxDP(1, 1e-6))
a.sql("SELECT SUM(x) FROM t", epsilon=0.5, delta=1e-7, clamps={"x": (0, 10)})
a.sql("SELECT SUM(x) FROM t", epsilon=0.5, clamps={"x": 10})  # MISTAKE dict-item
g = pp.connect("d.duckdb", policy="p.yaml", budget=pp.GDP(1))
mu: float = g.sql("SELECT COUNT(*) FROM t", mu=0.5).query_cost.mu
bq = s.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) COUNT(*) FROM t")
p1 = s.sql("SELECT COUNT(*) FROM t WHERE age > ?", params=[30], epsilon=0.5).cost.epsilon
p2 = z.explain("SELECT COUNT(*) FROM t WHERE age > $a", params={"a": 30}, rho=0.1)
s.sql("SELECT COUNT(*) FROM t WHERE age > ?", params=30, epsilon=0.5)  # MISTAKE arg-type
'''


@pytest.mark.slow
def test_mypy_strict_catches_a_wrong_budget_kind(tmp_path: Path) -> None:
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    src = Path(privplan.__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "cache"), "--no-color-output", str(script)],
        capture_output=True, text=True, cwd=tmp_path, env={"MYPYPATH": str(src),
                                                           "PATH": "/usr/bin:/bin"})
    found = {(int(line), code) for line, code in re.findall(
        r"user_script\.py:(\d+): error: .*\[([a-z-]+)\]", done.stdout)}
    wanted = {(i, line.split("# MISTAKE ")[1]) for i, line in enumerate(SCRIPT.splitlines(), 1)
              if "# MISTAKE " in line}
    assert found == wanted, done.stdout + done.stderr
