"""A default DuckDB session copies a row-level table on its own from the second query, only
where the table's rows cannot change, and never changes an answer or a charge by it.

Oracles: the same queries in a session that never copies (``prepare=False``) and one that
copies on the first query (``prepare=True``), noise off — identical answers, identical ledger
costs; the statements each session ran (which read the copy); a copy that cannot be made (a
real DuckDB error: the engine's work database attached read only) — the answer is the inline
statement's, nothing more is charged, and the session stops trying.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled

POLICY = {"tables": {"t": {"privacy_unit": "row", "columns": {
    "g": {"type": "str", "public_values": ["a", "b", "c"]},
    "x": {"type": "float", "lower": -10, "upper": 30, "resolution": 0.5},
    "n": {"type": "int", "lower": 0, "upper": 7}}}}}

QUERIES = [
    "SELECT g, SUM(x) AS s, AVG(n) AS a FROM t GROUP BY g ORDER BY g",
    "SELECT g, COUNT(*) AS c FROM t GROUP BY g ORDER BY g",
    "SELECT COUNT(*) AS c FROM t WHERE n > 2",
    "SELECT g, AVG(x) FILTER (WHERE n > 2) AS v, VAR_POP(x) AS w FROM t GROUP BY g ORDER BY g",
    "SELECT SUM(n) AS s FROM t WHERE x BETWEEN 0 AND 12",
]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A DuckDB file with adversarial values: out of bounds, infinities, NaN, NULL."""
    path = tmp_path / "d.duckdb"
    xs = [-1e308, -11.0, -10.25, -0.75, 0.25, 1.25, 2.75, 29.75, 30.25, 1e300, math.inf,
          -math.inf, math.nan, None, 7.5, 12.0] * 5
    ns = [None, -3, 0, 1, 2, 3, 4, 7, 8, 2**40, 5, 6, 3, 4, None, 1] * 5
    df = pd.DataFrame({"g": (["a", "b", "c", None] * 20)[:len(xs)], "x": xs,
                       "n": pd.array(ns, dtype="Int64")})
    con = duckdb.connect(str(path))
    con.register("df", df)
    con.execute("CREATE TABLE t AS SELECT g, x::DOUBLE AS x, n::BIGINT AS n FROM df")
    con.close()
    return path


def _answers(database: object, prepare: bool | None, *, register: bool = False,
             share: bool = True) -> tuple[list[pd.DataFrame], list[str], list[object], pp.Session]:
    """Every query answered twice in order (noise off) in one session; the statements the
    engine ran and each ledger entry's cost. ``share=False``: the session's copies are its
    own, not the process's (``privplan.engines.shared_copies``)."""
    sess = pp.connect(database, policy=POLICY, budget=pp.PureDP(1e6),  # type: ignore[arg-type]
                      prepare=prepare)
    if not share:
        sess.engine.share_copies(None)  # type: ignore[attr-defined]
    if register:
        sess.register("t", duckdb.connect(str(database), read_only=True).table("t").df())
    ran: list[str] = []
    real = sess.engine.run
    sess.engine.run = lambda st: ran.append(st) or real(st)  # type: ignore[method-assign]
    with noise_disabled():
        out = [sess.sql(q, epsilon=1).df for q in QUERIES + QUERIES]
    costs = [(e.mechanisms, e.marginal, e.total_after) for e in sess.ledger.entries()]
    return out, ran, costs, sess


def _reads_copy(statement: str) -> bool:
    """A session's own copy, or one shared by the process's sessions (shared_copies)."""
    return "__privplan_work_" in statement or "__privplan_shared_" in statement


def test_a_default_file_session_copies_from_the_second_query_with_the_same_answers(
        db: Path) -> None:
    never, never_ran, never_costs, s0 = _answers(db, False)
    first, first_ran, first_costs, s1 = _answers(db, True)
    for s in (s0, s1):  # (else the default session would read s1's copy from its first query)
        s.close()
    auto, auto_ran, auto_costs, s2 = _answers(db, None)
    for a, b, c in zip(never, first, auto, strict=True):
        pd.testing.assert_frame_equal(a, b)
        pd.testing.assert_frame_equal(a, c)
    assert never_costs == first_costs == auto_costs  # (copies change no charge)
    assert not any(map(_reads_copy, never_ran))
    assert all(map(_reads_copy, first_ran))
    # the default: the first query reads the table; from the second on, the copy
    assert not _reads_copy(auto_ran[0]) and all(map(_reads_copy, auto_ran[1:]))
    assert len(s2.engine._adopted) == 1  # type: ignore[attr-defined]  # (one shared copy)
    s2.close()


def test_no_copy_on_its_own_where_the_rows_can_change(db: Path) -> None:
    """A caller's connection, or a registered DataFrame (even over a file privplan opened):
    the caller can change the rows, so only prepare=True makes a snapshot."""
    con = duckdb.connect(str(db), read_only=True)
    _, ran, _, sess = _answers(con, None)
    assert not any(map(_reads_copy, ran))
    sess.close()
    _, ran, _, sess = _answers(db, None, register=True)
    assert not any(map(_reads_copy, ran))
    sess.close()
    con.close()


def test_a_copy_that_cannot_be_made_changes_no_answer_and_no_charge(
        db: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A real DuckDB error while making the copy (a view already holds its name in the work
    database, so CREATE OR REPLACE TABLE fails): the query answers by its admitted inline
    statement, is charged once, and the session stops trying."""
    never, _, never_costs, s0 = _answers(db, False)
    s0.close()
    _, _, _, named = _answers(db, True, share=False)
    (copy,) = named.engine._materialized  # type: ignore[attr-defined]  # (named by its SELECT)
    named.close()
    sess = pp.connect(db, policy=POLICY, budget=pp.PureDP(1e6))
    sess.engine.share_copies(None)  # type: ignore[attr-defined]  # (its own work database)
    ran: list[str] = []
    real = sess.engine.run
    sess.engine.run = lambda st: ran.append(st) or real(st)  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="privplan"), noise_disabled():
        got = [sess.sql(QUERIES[0], epsilon=1).df]
        work = sess.engine._work_database()  # type: ignore[attr-defined]
        sess.engine.con.execute(f"CREATE VIEW {work}.{copy} AS SELECT 1 AS x")  # type: ignore
        got += [sess.sql(q, epsilon=1).df for q in QUERIES[1:] + QUERIES]
    for a, b in zip(never, got, strict=True):
        pd.testing.assert_frame_equal(a, b)
    assert [(e.mechanisms, e.marginal, e.total_after)
            for e in sess.ledger.entries()] == never_costs
    assert not any(map(_reads_copy, ran))
    assert caplog.text.count("could not make the session's copy") == 1
    sess.close()


def test_prepare_must_be_a_bool_or_none(db: Path) -> None:
    with pytest.raises(pp.PolicyError, match="prepare must be True, False or None"):
        pp.connect(db, policy=POLICY, budget=pp.PureDP(1), prepare="yes")  # type: ignore


def test_a_user_level_copy_that_cannot_be_made_leaves_the_session_reading_inline(
        caplog: pytest.LogCaptureFixture) -> None:
    """A user-level table is copied by the session's second query; where that fails (a real
    DuckDB error: a view holds the copy's name in the work database) the answer is the
    admitted inline statement's, each query is charged once, and the session stops trying."""
    from privplan.engines.duckdb_engine import _materialized_name
    from privplan.planning.passes import bounded_select

    policy = {"tables": {"t": {"privacy_unit": "u", "max_rows_per_unit": 2, "columns": {
        "u": {"type": "int"}, "g": {"type": "str", "public_values": ["a", "b"]},
        "x": {"type": "int", "lower": 0, "upper": 9}}}}}
    frame = pd.DataFrame({"u": [i // 3 for i in range(30)], "g": ["a", "b", "a"] * 10,
                          "x": [i % 12 for i in range(30)]})
    sql = "SELECT g, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY g ORDER BY g"
    sess = pp.connect(":memory:", policy=policy, budget=pp.PureDP(100))
    sess.register("t", frame)
    ran: list[str] = []
    real = sess.engine.run
    sess.engine.run = lambda st: ran.append(st) or real(st)  # type: ignore[method-assign]
    planned, _ = sess.plan(sql, {"epsilon": 1})
    name = _materialized_name(bounded_select(planned.plan.cores[0]))
    with caplog.at_level(logging.INFO, logger="privplan"), noise_disabled():
        first = sess.sql(sql, epsilon=1).df
        work = sess.engine._work_database()  # type: ignore[attr-defined]
        sess.engine.con.execute(f"CREATE VIEW {work}.{name} AS SELECT 1 AS x")  # type: ignore
        later = [sess.sql(sql, epsilon=1).df for _ in range(2)]
    for df in later:
        pd.testing.assert_frame_equal(df, first)
    assert not any(map(_reads_copy, ran)) and len(ran) == 3
    assert [e.marginal for e in sess.ledger.entries()] == [sess.ledger.entries()[0].marginal] * 3
    assert caplog.text.count("could not make the session's copy") == 1
    sess.close()
