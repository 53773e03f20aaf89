"""The README's quick start runs as written, on a CSV file with the columns it names."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quick_start_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture) -> None:
    section = README.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)  # type: ignore[union-attr]
    assert len(code.strip().splitlines()) < 10  # (the promise: under 10 lines)
    rng = np.random.default_rng(0)
    pd.DataFrame({"region": rng.choice(["north", "south"], 500),
                  "amount": rng.uniform(0, 600, 500).round(2)}).to_csv(
        tmp_path / "sales.csv", index=False)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README quick start", "exec"), {})  # noqa: S102 - the README's own code
    out = capsys.readouterr().out
    assert "n_low" in out and "avg_high" in out and "ε=0.5" in out
    assert (tmp_path / "sales.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
