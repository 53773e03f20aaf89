"""privplan logs charges, refusals and session copies on the "privplan" logger (INFO)."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

import privplan as pp

POLICY = pp.Policy.from_dict({"tables": {"t": {
    "privacy_unit": "pid", "max_rows_per_unit": 2, "columns": {
        "pid": {"type": "int"}, "x": {"type": "int", "lower": 0, "upper": 10}}}}})


def test_charges_refusals_and_copies_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(2))
    s.register("t", pd.DataFrame({"pid": [1, 1, 2], "x": [1, 2, 3]}))
    with caplog.at_level(logging.INFO, logger="privplan"):
        s.sql("SELECT COUNT(*) FROM t", epsilon=1)
        s.sql("SELECT COUNT(*) FROM t", epsilon=0.5)  # (a user-level copy: the second query)
        with pytest.raises(pp.BudgetExceededError):
            s.sql("SELECT SUM(x) FROM t", epsilon=5)
    text = [r.getMessage() for r in caplog.records if r.name == "privplan"]
    assert any(m.startswith("charged q1: ε=1 (composed total ε=1 of ε=2)") for m in text), text
    assert any("session's copy" in m for m in text), text
    assert any(m.startswith("sql refused (BudgetExceededError): budget exceeded") for m in text)


def test_quiet_by_default(capsys: pytest.CaptureFixture) -> None:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(2))
    s.register("t", pd.DataFrame({"pid": [1], "x": [1]}))
    s.sql("SELECT COUNT(*) FROM t", epsilon=1)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
