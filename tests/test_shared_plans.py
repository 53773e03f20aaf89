"""Plans shared by the sessions of a process (:mod:`privplan.session.shared_plans`).

Oracles: the number of times the planner builds a plan from the query text (``build_plan``
calls); with noise off, the answer of a session planned afresh and the plain SQL; each
session's own ledger. A fresh session with an equal policy over the same schema plans nothing;
anything planning reads that differs (a policy bound, a column's stored type, the privacy
definition, ``prepare``, the NOT NULL check's data) is planned (or refused) afresh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
import privplan.planning.plan as plan_module
from privplan.errors import PolicyError
from privplan.session.shared_plans import shared_plans
from privplan.testing import noise_disabled

SQL = "SELECT g, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY g"


def _policy(upper: int = 100, keys: int = 3, nullable: bool = True) -> dict[str, Any]:
    return {"tables": {"t": {"privacy_unit": "row", "columns": {
        "g": {"type": "str", "public_values": [f"g{i}" for i in range(keys)]},
        "x": {"type": "int", "lower": 0, "upper": upper, "nullable": nullable}}}}}


def _frame(keys: int = 3, rows: int = 500, dtype: str = "int64") -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"g": [f"g{i}" for i in rng.integers(0, keys, rows)],
                         "x": rng.integers(0, 100, rows).astype(dtype)})


def _session(df: pd.DataFrame, policy: Any, **kwargs: Any) -> Any:
    con = duckdb.connect()
    con.register("t", df)
    kwargs.setdefault("budget", pp.PureDP(10))
    return pp.connect(con, policy=policy, **kwargs)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The query texts planned from scratch."""
    texts: list[str] = []
    real = plan_module.build_plan

    def build(sql: str, *args: Any, **kwargs: Any) -> Any:
        texts.append(sql)
        return real(sql, *args, **kwargs)

    monkeypatch.setattr(plan_module, "build_plan", build)
    return texts


def _answer(sess: Any, sql: str = SQL, **budget: Any) -> pd.DataFrame:
    with noise_disabled():
        df = sess.sql(sql, **(budget or {"epsilon": 1})).df
    return df.sort_values("g").reset_index(drop=True)


def test_a_fresh_session_with_an_equal_policy_plans_nothing(built: list[str]) -> None:
    df = _frame()
    with _session(df, _policy()) as first:
        planned = _answer(first)
    with _session(df, pp.Policy.from_dict(_policy())) as second:  # (an equal, new object)
        reused = _answer(second)
        assert second.spent() == pp.PureDP(1)
    assert built == [SQL] and shared_plans.hits == 1
    pd.testing.assert_frame_equal(planned, reused, check_exact=True)
    plain = duckdb.query_df(df, "d", "SELECT g, COUNT(*) AS n, SUM(x) AS s FROM d GROUP BY g "
                            "ORDER BY g").df()
    assert planned["n"].tolist() == plain["n"].tolist()
    assert planned["s"].tolist() == plain["s"].tolist()


@pytest.mark.parametrize("change", ["bound", "stored type", "definition", "prepare", "text",
                                    "budget"])
def test_anything_planning_reads_that_differs_is_planned_afresh(
        change: str, built: list[str]) -> None:
    df = _frame()
    with _session(df, _policy()) as first:
        _answer(first)
    policy, frame, kwargs, sql, budget = _policy(), df, {}, SQL, {"epsilon": 1}
    if change == "bound":
        policy = _policy(upper=50)
    elif change == "stored type":
        frame = _frame(dtype="int32")
    elif change == "definition":
        kwargs, budget = {"budget": pp.ZCDP(10)}, {"rho": 1}
    elif change == "prepare":
        kwargs = {"prepare": True}
    elif change == "text":
        sql = SQL + " "
    else:
        budget = {"epsilon": 1.0}
    with _session(frame, policy, **kwargs) as second:
        _answer(second, sql, **budget)
    assert len(built) == 2 and shared_plans.hits == 0


def test_a_table_registered_again_with_other_types_is_planned_afresh(built: list[str]) -> None:
    with _session(_frame(), _policy()) as first:
        _answer(first)
        first.register("t", _frame(dtype="float64"))  # (x stored as DOUBLE now)
        _answer(first)
    assert len(built) == 2
    with _session(_frame(dtype="float64"), _policy()) as second:
        _answer(second)
    assert len(built) == 2 and shared_plans.hits == 1  # (the DOUBLE plan, shared)


def test_each_session_charges_its_own_ledger_exactly(tmp_path: Path,
                                                     built: list[str]) -> None:
    df = _frame()
    with _session(df, _policy(), ledger=tmp_path / "a.ledger") as a:
        a.sql(SQL, epsilon=1)
        a.sql(SQL, epsilon=2)
        a_entries = a.ledger.entries()
        assert a.spent() == pp.PureDP(3)
    with _session(df, _policy(), ledger=tmp_path / "b.ledger") as b:
        b.sql(SQL, epsilon=2)
        b_entries = b.ledger.entries()
        assert b.spent() == pp.PureDP(2)
    assert built == [SQL, SQL]  # (epsilon=1 and epsilon=2 in a; b reuses the second)
    assert [e.query_id for e in a_entries] == ["q1", "q2"]
    assert [e.query_id for e in b_entries] == ["q1"]
    assert all(m.id.startswith("q1.") for m in b_entries[0].mechanisms)
    assert b_entries[0].marginal == a_entries[1].marginal == pp.PureDP(2)


def test_a_long_domain_is_read_from_the_reusing_sessions_own_relation(
        built: list[str]) -> None:
    keys = 1_500  # (a relation of the engine: DOMAIN_TABLE_MIN)
    df = _frame(keys=keys, rows=3_000)
    with _session(df, _policy(keys=keys)) as first:
        planned = _answer(first)
        work = first.engine._work_database()
    with _session(df, _policy(keys=keys)) as second:  # (the first's relations are gone)
        reused = _answer(second)
        statements = second.plan(SQL, {"epsilon": 1})[1]
        assert work not in "".join(statements)
        assert second.engine._work_database() in "".join(statements)
    assert built == [SQL] and shared_plans.hits == 1
    assert len(reused) == keys
    pd.testing.assert_frame_equal(planned, reused, check_exact=True)


def _sql_table(rows: str) -> Any:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (g VARCHAR, x BIGINT)")  # (no NOT NULL in the schema)
    con.execute(f"INSERT INTO t VALUES {rows}")
    return con


def test_the_not_null_check_runs_in_the_reusing_session(built: list[str]) -> None:
    with pp.connect(_sql_table("('g0', 1), ('g1', 2)"), policy=_policy(nullable=False),
                    budget=pp.PureDP(10)) as first:
        _answer(first)
    # the same schema, so the plan is found; the data contradicts `nullable: false`
    with pp.connect(_sql_table("('g0', 1), ('g1', NULL)"), policy=_policy(nullable=False),
                    budget=pp.PureDP(10)) as second:
        with pytest.raises(PolicyError, match="nullable: false"):
            second.sql(SQL, epsilon=1)
        assert second.spent() == pp.PureDP(0)
    with pp.connect(_sql_table("('g0', 1), ('g1', 3)"), policy=_policy(nullable=False),
                    budget=pp.PureDP(10)) as third:
        _answer(third)
    assert built == [SQL] and shared_plans.hits == 1


def test_plans_reading_a_session_copy_are_not_shared(built: list[str]) -> None:
    other = "SELECT COUNT(*) AS n FROM t"
    df = _frame()
    with _session(df, _policy(), prepare=True) as first:
        _answer(first)  # (planned before the copy is made: shared)
        with noise_disabled():
            first.sql(other, epsilon=1)  # (reads the session's copy: not shared)
    with _session(df, _policy(), prepare=True) as second:
        _answer(second)
        with noise_disabled():
            counted = second.sql(other, epsilon=1).df
    assert built == [SQL, other, other] and shared_plans.hits == 1
    assert counted["n"].tolist() == [len(df)]


def test_a_user_level_plan_is_shared_and_answers_alike(built: list[str]) -> None:
    policy = _policy()
    policy["tables"]["t"]["privacy_unit"] = "u"
    policy["tables"]["t"]["max_rows_per_unit"] = 2
    policy["tables"]["t"]["columns"]["u"] = {"type": "int"}
    df = _frame().assign(u=lambda d: d.index // 3)
    with _session(df, policy) as first:
        planned = _answer(first)
    with _session(df, policy) as second:
        reused = _answer(second)
    assert built == [SQL] and shared_plans.hits == 1
    pd.testing.assert_frame_equal(planned, reused, check_exact=True)


def _described(con: Any) -> list[str]:
    """The DESCRIBE statements DuckDB's query log recorded since logging was enabled."""
    return [m for (m,) in con.execute(
        "SELECT message FROM duckdb_logs WHERE type = 'QueryLog' AND message LIKE 'DESCRIBE%'"
    ).fetchall()]


def test_a_public_table_is_described_only_by_the_queries_that_join_it(
        tmp_path: Path, built: list[str]) -> None:
    """The policy's public tables listed without columns are described when a query joins
    one, not for every query (on a connection the caller holds, every plan's reads are
    described afresh per session: each public table cost a DESCRIBE per query). A shared plan
    that joins none depends on none: the caller dropping the public table changes nothing for
    it, and a query joining it is refused as before."""
    from privplan.demo.data import demo_policy_path, write_demo_database

    path = write_demo_database(tmp_path / "d.duckdb", rows=400)
    con = duckdb.connect(str(path))
    plain = "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital"
    joined = ("SELECT h.region, COUNT(*) AS n FROM visits v JOIN hospitals h "
              "ON v.hospital = h.hospital GROUP BY h.region")
    con.execute("CALL enable_logging('QueryLog')")
    try:
        answers = []
        for _ in range(2):
            with pp.connect(con, policy=demo_policy_path(), budget=pp.PureDP(10)) as sess, \
                    noise_disabled():
                answers.append(sess.sql(plain, epsilon=1).df)
        assert not any("hospitals" in d for d in _described(con))
        assert len(built) == 1 and answers[1].equals(answers[0])
        with pp.connect(con, policy=demo_policy_path(), budget=pp.PureDP(10)) as sess, \
                noise_disabled():
            by_region = sess.sql(joined, epsilon=1).df
        assert any("hospitals" in d for d in _described(con))
        expected = con.execute(joined).df()
        assert sorted(zip(by_region["region"], by_region["n"])) == sorted(
            zip(expected["region"], expected["n"]))
        con.execute("DROP TABLE hospitals")
        with pp.connect(con, policy=demo_policy_path(), budget=pp.PureDP(10)) as sess, \
                noise_disabled():
            res = sess.sql(plain, epsilon=1)
            assert res.df.equals(answers[0])
            with pytest.raises(pp.errors.PrivplanError):
                sess.sql(joined, epsilon=1)
            assert sess.account.spent() == res.cost  # (the refused join spent nothing)
        assert len(built) == 3  # (the plain plan planned once, shared after the DROP too)
    finally:
        con.execute("CALL disable_logging()")
        con.close()
