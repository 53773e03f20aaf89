"""Progress bars (privplan.views.progress): drawn on a terminal only, quiet elsewhere, and never a row
count: the engine's bar shows DuckDB's percentage and the elapsed time."""

from __future__ import annotations

import io
import re
import sys

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.views import progress
from privplan.views.progress import Progress, enabled_for, execute_with_progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_is_drawn_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIVPLAN_PROGRESS", raising=False)
    quiet = io.StringIO()
    bar = Progress(3, stream=quiet)
    bar.update(1, "x")
    bar.close()
    assert quiet.getvalue() == ""
    tty = Tty()
    bar = Progress(4, desc="monthly", stream=tty)
    bar.update(2, "half")
    bar.close()
    drawn = tty.getvalue()
    assert "monthly" in drawn and "2/4" in drawn and "half" in drawn
    assert enabled_for(quiet, True) and not enabled_for(tty, False)


def test_the_environment_switches_bars_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVPLAN_PROGRESS", "0")
    tty = Tty()
    assert not enabled_for(tty)
    bar = Progress(2, stream=tty)
    bar.update(1)
    bar.close()
    assert tty.getvalue() == ""


def test_the_engine_bar_shows_percentages_and_the_same_answer() -> None:
    con = duckdb.connect()
    sql = "SELECT count(*) AS n, sum(hash(i) % 1000) AS s FROM range(120000000) t(i)"
    plain = con.execute(sql).fetchall()
    tty = Tty()
    shown = execute_with_progress(con, sql, desc="copy", stream=tty, delay=0).fetchall()
    assert shown == plain
    drawn = tty.getvalue()
    percents = [int(p) for p in re.findall(r"copy:\s+(\d+)%", drawn)]
    assert percents and percents == sorted(percents)
    # never a row count: only percentages, the bar and the elapsed time are drawn
    assert "120000000" not in drawn and "rows" not in drawn
    assert re.fullmatch(r"[\rcopy:0-9% |#\s]*", re.sub(r"\d\d:\d\d", "", drawn))


def test_a_fast_statement_draws_nothing() -> None:
    con = duckdb.connect()
    tty = Tty()
    assert execute_with_progress(con, "SELECT 42", desc="copy", stream=tty).fetchall() == [(42,)]
    assert tty.getvalue() == ""  # (its bar waits for ENGINE_DELAY seconds)


def test_the_session_copy_of_a_table_has_a_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIVPLAN_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "ENGINE_DELAY", 0.0)
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    frame = pd.DataFrame({"pid": [i // 3 for i in range(3000)], "x": [i % 7 for i in range(3000)]})
    policy = pp.Policy.from_dict({"tables": {"t": {
        "privacy_unit": "pid", "max_rows_per_unit": 2,
        "columns": {"pid": {"type": "int"}, "x": {"type": "int", "lower": 0, "upper": 10}}}}})
    with pp.connect(policy=policy, budget=pp.PureDP(1)) as session:
        session.register("t", frame)
        session.sql("SELECT COUNT(*) AS n FROM t", epsilon=0.5)
        assert "making the session's copy" not in tty.getvalue()  # (the first reads inline)
        session.sql("SELECT COUNT(*) AS n FROM t", epsilon=0.5)  # (the second makes the copy)
    drawn = tty.getvalue()
    assert "making the session's copy of the table" in drawn
    assert "3000" not in drawn and "1000" not in drawn  # (rows and units: never shown)
