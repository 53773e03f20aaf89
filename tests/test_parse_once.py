"""sqlglot parses a query's text once per answer: the plan is made from one tree.

Each text-level front door (parameters, BigQuery's DP clause, TOP, long lists) works on tokens
and the statement is parsed once; the pre-charge gate parses only expressions privplan wrote
itself (its checks of engine SQL over stand-in rows), which are not counted here. Counted by
wrapping sqlglot's ``Parser.parse`` for the duration of one ``Session.sql``.

Queries over DP subqueries and over a per-unit pre-aggregation are parsed once too: their
parts' trees are taken from the statement's tree (:mod:`privplan.sql.derive`; that each equals
the parse of its text is ``tests/sql/test_derive.py``). The outer query over DP subqueries is
post-processing run by DuckDB as written; the gate probes it on stand-in answers with its own
parse, like the other engine SQL it checks (not counted).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlglot.parser import Parser

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.session.shared_plans import shared_plans
from privplan.sql.parse import _TREES


@pytest.fixture(autouse=True)
def _no_earlier_parse() -> None:
    """Each test starts with empty process-wide caches of plans and of parsed trees.

    Another test in the same worker may have planned or parsed the same text (a server test
    refusing ``SELECT COUNT(*) FROM visits`` over budget kept its tree in
    ``privplan.sql.parse._TREES``, 64 texts by recency): it would be reused here and nothing
    parsed (correctly), which is not what these tests count — CI failed so, twice. The reuse
    itself is ``tests/test_plan_cache.py``.
    """
    shared_plans.clear()
    _TREES.clear()


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("parse") / "demo.duckdb"
    write_demo_database(db, rows=500)
    return db


@pytest.fixture
def session(demo_file: Path) -> Iterator[pp.Session]:
    """A session of each test's own (its plan cache holds only what the test planned)."""
    with pp.connect(str(demo_file), policy=demo_policy_path(),
                    budget=pp.ApproxDP(1000, 1e-3)) as s:
        yield s


@contextmanager
def counted() -> Iterator[list[str]]:
    """The texts sqlglot parses meanwhile, except the gate's own expression checks."""
    texts: list[str] = []
    original = Parser.parse

    def parse(self: Parser, raw_tokens: list, sql: str | None = None) -> list:
        caller = [f.filename for f in traceback.extract_stack()[:-1] if "privplan" in f.filename]
        if not caller or f"privplan{Path('/').as_posix()}gate" not in caller[-1].replace("\\", "/"):
            texts.append(sql or "")
        return original(self, raw_tokens, sql)

    Parser.parse = parse  # type: ignore[method-assign]
    try:
        yield texts
    finally:
        Parser.parse = original  # type: ignore[method-assign]


QUERIES = [
    "SELECT COUNT(*) FROM visits",
    "SELECT department, COUNT(*) AS n, AVG(cost) AS c FROM visits WHERE age > 30 "
    "GROUP BY department",
    "SELECT hospital, SUM(cost) AS s FROM visits GROUP BY hospital HAVING COUNT(*) > 5 "
    "ORDER BY hospital",
    "SELECT COUNT(*) FROM visits WHERE hospital = 'A' UNION ALL "
    "SELECT COUNT(*) FROM visits WHERE hospital = 'B'",
    "SELECT TOP 2 department, COUNT(*) AS n FROM visits GROUP BY department ORDER BY n DESC",
    "SELECT COUNT(*) FROM visits WHERE age IN (" + ", ".join(str(i) for i in range(300)) + ")",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) department, COUNT(*) AS n "
    "FROM visits GROUP BY department",
]


NESTED = [
    "SELECT department, n FROM (SELECT department, COUNT(*) AS n FROM visits GROUP BY "
    "department) AS x WHERE n > 3 ORDER BY department",
    "WITH a AS (SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital) "
    "SELECT * FROM a ORDER BY n",
    "SELECT a.n - b.n AS d FROM (SELECT COUNT(*) AS n FROM visits WHERE age > 30) a, "
    "(SELECT COUNT(*) AS n FROM visits WHERE age <= 30) b",
    "SELECT * FROM (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) sex, "
    "COUNT(*) AS n FROM visits GROUP BY sex) x",
    "SELECT * FROM (SELECT COUNT(*) AS n FROM visits WHERE age IN (1, 2)) x",
    "SELECT * FROM (SELECT department, COUNT(*) AS n FROM visits GROUP BY department "
    "ORDER BY n DESC) x",
]
PER_UNIT = [
    "SELECT AVG(s) AS a FROM (SELECT patient_id, SUM(cost) AS s FROM visits GROUP BY "
    "patient_id)",
    "SELECT sex, SUM(tot) AS t FROM (SELECT patient_id, sex, SUM(length_of_stay) AS tot "
    "FROM visits WHERE age > 20 GROUP BY patient_id, sex) AS q GROUP BY sex",
]


@pytest.fixture(scope="module")
def patients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pp.Session]:
    db = tmp_path_factory.mktemp("parse") / "demo.duckdb"
    write_demo_database(db, rows=500)
    policy = Path(pp.__file__).parent / "demo" / "policy_patients.yaml"
    with pp.connect(str(db), policy=policy, budget=pp.ApproxDP(1000, 1e-3)) as s:
        yield s


@pytest.mark.parametrize("sql", NESTED)
def test_one_parse_per_outer_query_over_dp_subqueries(session: pp.Session, sql: str) -> None:
    budget = {} if "DIFFERENTIAL_PRIVACY" in sql else {"epsilon": 1, "delta": 1e-6}
    with counted() as first:
        session.sql(sql, **budget)
    assert len(first) == 1, first
    with counted() as again:
        session.sql(sql, **budget)
    assert again == []


@pytest.mark.parametrize("sql", PER_UNIT)
def test_one_parse_per_query_over_a_per_unit_table(patients: pp.Session, sql: str) -> None:
    with counted() as first:
        patients.sql(sql, epsilon=1, delta=1e-6)
    assert len(first) == 1, first
    with counted() as again:
        patients.sql(sql, epsilon=1, delta=1e-6)
    assert again == []


@pytest.mark.parametrize("sql", QUERIES)
def test_one_parse_per_query(session: pp.Session, sql: str) -> None:
    budget = {} if "DIFFERENTIAL_PRIVACY" in sql else {"epsilon": 1, "delta": 1e-6}
    with counted() as first:
        session.sql(sql, **budget)
    assert len(first) == 1, first
    with counted() as again:  # the same text again: its plan is reused, nothing is parsed
        session.sql(sql, **budget)
    assert again == []


def test_the_count_sees_parses(session: pp.Session) -> None:
    """The wrapper counts what sqlglot parses (a counter that saw nothing would always pass)."""
    import sqlglot

    with counted() as texts:
        sqlglot.parse_one("SELECT 1")
    assert texts == ["SELECT 1"]
