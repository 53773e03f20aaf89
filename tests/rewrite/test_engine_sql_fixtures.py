"""Rewrite fixtures: ``input; expected engine SQL;`` pairs in tests/fixtures/rewrite/*.sql.

Each expected statement is also executed on a small DuckDB table, so a fixture cannot hold SQL
the engine would reject.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from privplan.demo.data import demo_policy_path, generate_visits
from privplan.policy import Policy
from privplan.rewrite.engine_sql import core_sql
from privplan.sql.builder import build_plan
from privplan.sql.parse import parse_statement

FIXTURES = Path(__file__).parent.parent / "fixtures" / "rewrite"


def _pairs() -> list[tuple[str, str]]:
    out = []
    for path in sorted(FIXTURES.glob("*.sql")):
        statements = [s.strip() for s in path.read_text().split(";\n") if s.strip()]
        assert len(statements) % 2 == 0, f"{path.name}: odd number of statements"
        out += [(statements[i], statements[i + 1].rstrip(";")) for i in range(0, len(statements), 2)]
    return out


POLICY = Policy.from_yaml(demo_policy_path())
TYPES = {n: c.type for n, c in POLICY.table("visits").columns.items()}


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.register("visits_df", generate_visits(500))
    c.execute("CREATE TABLE visits AS SELECT * REPLACE (CAST(visit_date AS DATE) AS visit_date) "
              "FROM visits_df")
    return c


@pytest.mark.parametrize("query,expected", _pairs(), ids=lambda s: s[:60])
def test_rewrite(query: str, expected: str, con: duckdb.DuckDBPyConnection) -> None:
    plan = build_plan(query, parse_statement(query), POLICY)
    core = plan.cores[0]
    measures = list(core.measures) + ([core.selection] if core.selection else [])
    assert core_sql(core, TYPES, measures) == expected
    con.execute(expected).fetchall()
