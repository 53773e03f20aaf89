"""Trees derived from a statement's one parse are the trees sqlglot gives their texts.

An outer query over DP subqueries, and a query over a per-unit pre-aggregation, are planned as
several texts (each inner query; the outer query over the derived table), and each text's tree
is taken from the statement's one parse (:mod:`privplan.sql.derive`) instead of parsing it
again. The oracle is sqlglot itself: every tree kept for a derived text must equal the parse of
that text — the same nodes and the same recorded positions (error messages point with them).
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.policy import Policy
from privplan.sql import parse
from privplan.sql.bigquery import without_clauses
from privplan.sql.derive import Edit, moved, spliced
from privplan.sql.nesting import split_outer
from privplan.sql.per_unit import split_per_unit

PATIENTS = Path(pp.__file__).parent / "demo" / "policy_patients.yaml"

NESTED = [
    "SELECT department, n FROM (SELECT department, COUNT(*) AS n FROM visits GROUP BY "
    "department) AS x WHERE n > 3",
    "WITH a AS (SELECT department, COUNT(*) AS n FROM visits GROUP BY department)\n"
    "SELECT * FROM a ORDER BY n",
    "SELECT a.n - b.n AS d FROM (SELECT COUNT(*) AS n FROM visits WHERE age > 30) a,\n"
    "  (\n    SELECT COUNT(*) AS n\n    FROM visits\n    WHERE age <= 30\n  ) b",
    "SELECT * FROM (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) "
    "department, COUNT(*) AS n FROM visits GROUP BY department) x",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) COUNT(*) AS n FROM visits "
    "WHERE sex = 'F' UNION ALL SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) "
    "COUNT(*) AS n FROM visits WHERE sex = 'M' ORDER BY n",
    "WITH q AS (SELECT hospital, AVG(cost) AS c FROM visits WHERE age IN ("
    + ", ".join(str(i) for i in range(0, 100, 3)) + ") GROUP BY hospital), "
    "r AS (SELECT hospital, c * 2 AS d FROM q) SELECT * FROM r WHERE d > 1",
    "SELECT x.hospital, x.n / y.total AS share FROM (SELECT hospital, COUNT(*) AS n FROM "
    "visits GROUP BY hospital) x CROSS JOIN (SELECT COUNT(*) AS total FROM visits) y",
    "SELECT * FROM (SELECT department, VAR(cost) AS v, STD(age) AS s FROM visits GROUP BY "
    "department) t",
    # inner queries whose last token records no position (a parenthesis, DESC)
    "SELECT * FROM (SELECT COUNT(*) AS n FROM visits WHERE age IN (1, 2)) x",
    "SELECT * FROM (SELECT department, COUNT(*) AS n FROM visits GROUP BY department "
    "ORDER BY n DESC) x",
    "SELECT * FROM (SELECT COUNT(*) AS n FROM (SELECT age FROM visits WHERE age > 3)) x",
]

PER_UNIT = [
    "SELECT AVG(s) AS a FROM (SELECT patient_id, SUM(cost) AS s FROM visits GROUP BY "
    "patient_id)",
    "SELECT sex, SUM(tot) AS t\nFROM (\n  SELECT patient_id, sex, SUM(length_of_stay) AS tot\n"
    "  FROM visits WHERE age > 20 GROUP BY patient_id, sex\n) AS q\nGROUP BY sex ORDER BY sex",
    "SELECT TOP 3 n, COUNT(*) AS k FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY "
    "patient_id) \"Per\" GROUP BY n ORDER BY n",
    "SELECT COUNT(*) AS busy FROM (SELECT patient_id, COUNT(*) AS v FROM visits WHERE "
    "hospital IN ('A', 'B') GROUP BY patient_id) u WHERE v >= 2",
]


def positions(tree: exp.Expr) -> list[tuple[str, Any]]:
    return [(type(n).__name__, dict(n._meta)) for n in tree.walk() if n._meta]


def kept_trees(run: Any) -> dict[str, exp.Expression]:
    """The trees the parse cache holds after ``run()``, by text (the cache starts empty)."""
    before = parse._TREES
    parse._TREES = OrderedDict()
    try:
        run()
        return {key[0]: tree for key, tree in parse._TREES.items()}
    finally:
        parse._TREES = before


def assert_as_parsed(kept: dict[str, exp.Expression], derived: list[str]) -> None:
    for text in derived:
        assert text in kept, (text, list(kept))
        fresh = parse._parsed_or_scanned(text, parse.DEFAULT_DIALECT)
        assert kept[text] == fresh, text
        assert positions(kept[text]) == positions(fresh), text


@pytest.mark.parametrize("sql", NESTED)
def test_inner_queries_are_their_own_parse(sql: str) -> None:
    policy = Policy.from_yaml(demo_policy_path())
    found: list[Any] = []
    kept = kept_trees(lambda: found.append(split_outer(sql)))
    nested = found[0]
    assert nested is not None
    assert_as_parsed(kept, [without_clauses(inner) for inner in nested.inners])
    assert policy is not None


@pytest.mark.parametrize("sql", PER_UNIT)
def test_the_outer_query_over_a_per_unit_table_is_its_own_parse(sql: str) -> None:
    policy = Policy.from_yaml(PATIENTS)
    found: list[Any] = []
    kept = kept_trees(lambda: found.append(split_per_unit(sql, policy)))
    per_unit = found[0]
    assert per_unit is not None
    assert per_unit.outer_sql != sql and per_unit.table.name in per_unit.outer_sql
    assert_as_parsed(kept, [per_unit.outer_sql])
    # the inner WHERE's statement: the parse of its text, positions in the statement as written
    assert per_unit.where_statement() == parse._parsed_or_scanned(per_unit.where_sql, "duckdb")


def test_moved_positions_are_those_of_the_new_text() -> None:
    text = "SELECT a,\n  bb FROM t WHERE c > 1"
    tree = parse.parse_statement(text)
    edits = [Edit(0, 0, "\n\n  "), Edit(text.index("t WHERE"), text.index("t WHERE") + 1,
                                           "long_name")]
    new = spliced(text, edits)
    assert new == "\n\n  SELECT a,\n  bb FROM long_name WHERE c > 1"
    where = moved(tree.args["where"], new, edits)
    assert positions(where) == positions(parse._parsed(new, "duckdb").args["where"])
    with pytest.raises(ValueError, match="edited span"):
        moved(tree.args["from_"], new, edits)


def test_an_error_in_a_subquery_points_into_the_subquery(tmp_path: Path) -> None:
    """The message for a refused inner query is the one it gets when sent alone: its place
    counted in its own text, from the derived tree's moved positions."""
    db = tmp_path / "demo.duckdb"
    write_demo_database(db, rows=200)
    inner = "SELECT department,\n  COUNT(*) AS n FROM visits\n  WHERE nope > 3 GROUP BY department"
    with pp.connect(str(db), policy=demo_policy_path(), budget=pp.PureDP(10)) as s:
        with pytest.raises(pp.PrivplanError) as alone:
            s.sql(inner, epsilon=1)
        with pytest.raises(pp.PrivplanError) as nested:
            s.sql(f"SELECT * FROM (\n    {inner}) AS x WHERE n > 1", epsilon=1)
        assert s.spent() == pp.PureDP(0)
    assert "line 3, column 9" in str(alone.value)
    assert str(alone.value) in str(nested.value)
