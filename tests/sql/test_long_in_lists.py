"""Long IN lists of plain literals read as a whole (privplan.sql.long_lists): an oracle.

The same query planned with the list read as a whole and with the list as literal nodes
(``literal_lists_off``, the ordinary path) must give the same explanation and, with noise off,
the same answer, equal to plain DuckDB's. Lists of a few hundred values (the fast path starts
at ``MIN_VALUES``); the timing at 100k values is in benchmarks/overhead.py, not here.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from pathlib import Path

import duckdb
import pytest
from sqlglot import exp

import privplan as pp
from privplan.analysis.literal_lists import literal_list, literal_lists_off
from privplan.analysis.predicates.literals import _Const
from privplan.analysis.predicates.three_valued import _Analyser, _ColumnRef
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.errors import UnsupportedQueryError
from privplan.sql import long_lists, parse
from privplan.sql.parse import parse_statement
from privplan.testing import noise_disabled

INTS = ", ".join(str(v) for v in [*range(-40, 160, 2), 7, 7, 9223372036854775807, -5])
STRS = ", ".join(["'A'", "'O''Brien'", "'é'", "''", "'C'", "'A'", "'x,y'"]
                 + [f"'v{i}'" for i in range(200)])
SPREAD = ", ".join(str(3 * i) for i in range(3000))

QUERIES = [
    f"SELECT COUNT(*) FROM visits WHERE age IN ({INTS})",
    f"SELECT COUNT(*) FROM visits WHERE age NOT IN ({SPREAD})",
    f"SELECT hospital, COUNT(*) FROM visits WHERE hospital IN ({STRS}) GROUP BY hospital",
    f"SELECT COUNT(*) FROM visits WHERE hospital NOT IN ({STRS}) AND age > 30",
    f"SELECT COUNT(*) FROM visits WHERE cost IN ({INTS})",
    f"SELECT COUNT(*) FILTER (WHERE age IN ({INTS})) AS n FROM visits",
    f"SELECT COUNT(*) FROM visits WHERE age + 1 IN ({INTS})",
    f"SELECT COUNT(*) FROM visits WHERE age IN ({INTS}) OR hospital = 'B'",
    f"SELECT COUNT(*) FROM visits\nWHERE age IN ({INTS})\n  AND sex IN ({STRS})",
    f"SELECT COUNT(*) FROM visits WHERE age IN ({INTS}) AND hospital IN ({STRS})",
]
REFUSED = [  # refused the same way on both paths, with the same position
    f"SELECT COUNT(*) FROM visits WHERE hospital IN ({INTS})",
    f"SELECT COUNT(*) FROM visits WHERE age IN ({STRS})",  # 'A' is no integer
    f"SELECT COUNT(*) FROM visits WHERE age IN ({INTS})\n  AND nosuch(age) = 1",
    f"SELECT COUNT(*) FROM visits WHERE age IN ({INTS}) AND",
]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("lists") / "d.duckdb", rows=3_000)


def _session(db: Path) -> pp.Session:
    return pp.connect(db, policy=pp.Policy.from_yaml(demo_policy_path()), budget=pp.PureDP(100))


def _run(db: Path, sql: str) -> tuple[str, object, list[str]]:
    s = _session(db)
    try:
        explained = str(s.explain(sql, epsilon=1))
        _, statements = s.plan(sql, {"epsilon": 1})
        with noise_disabled():
            answer = s.sql(sql, epsilon=1).df().to_dict("list")
        return explained, answer, statements
    finally:
        s.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_same_explanation_and_answer_as_literal_nodes(db: Path, sql: str) -> None:
    fast = _run(db, sql)
    with literal_lists_off():
        slow = _run(db, sql)
    assert fast[:2] == slow[:2]
    plain = duckdb.connect(str(db), read_only=True)
    try:
        expected = plain.execute(sql).fetchall()
    finally:
        plain.close()
    answer = fast[1]
    assert isinstance(answer, dict)
    rows = sorted(zip(*answer.values(), strict=True))
    # public groups are released zero-filled; plain SQL has no row for an empty group
    assert [r for r in rows if r[-1] != 0 or r in expected] == sorted(expected)


def test_the_list_is_read_as_a_whole_and_sent_as_one_constant(db: Path) -> None:
    sql = f"SELECT COUNT(*) FROM visits WHERE age IN ({INTS}) AND hospital IN ({STRS})"
    tree = parse_statement(sql)
    lists = [literal_list(n) for n in tree.find_all(exp.In)]
    assert all(v is not None for v in lists) and len(lists) == 2
    assert not list(tree.find_all(exp.Literal))  # no node per value
    assert tree.sql(dialect="duckdb") == parse_statement(sql).sql(dialect="duckdb")
    with literal_lists_off():
        assert tree.sql(dialect="duckdb") == parse_statement(sql).sql(dialect="duckdb")
    statement = _run(db, sql)[2][0]
    assert statement.count("STRING_SPLIT") == 2 and "'O''Brien'" not in statement


@pytest.mark.parametrize("sql", REFUSED)
def test_refused_alike(db: Path, sql: str) -> None:
    messages = []
    for off in (False, True):
        s = _session(db)
        try:
            with pytest.raises((UnsupportedQueryError, pp.errors.ParseError)) as err:
                if off:
                    with literal_lists_off():
                        s.explain(sql, epsilon=1)
                else:
                    s.explain(sql, epsilon=1)
            messages.append(str(err.value))
        finally:
            s.close()
    assert messages[0] == messages[1]


@pytest.mark.parametrize("sql", [
    f"SELECT COUNT(*) FROM visits WHERE hospital = 'IN ({INTS})'",
    f"SELECT COUNT(*) FROM visits WHERE age = 1 -- IN ({INTS})\n",
    f'SELECT COUNT(*) AS "IN ({INTS})" FROM visits',
    f"SELECT COUNT(*) FROM visits WHERE age IN ({INTS}, 1.5)",  # mixed: literal nodes
    f"SELECT COUNT(*) FROM visits WHERE age IN ({INTS}, NULL)",
])
def test_lists_the_scan_does_not_model_stay_literal_nodes(sql: str) -> None:
    tree = parse_statement(sql)
    assert all(literal_list(n) is None for n in tree.find_all(exp.In))
    with literal_lists_off():
        assert tree == parse_statement(sql)


def test_a_list_over_the_limit_is_refused_before_any_charge(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(long_lists, "MAX_VALUES", 150)
    monkeypatch.setattr(parse, "_TREES", OrderedDict())  # (texts parsed under the real limit)
    s = _session(db)
    try:
        for values in (SPREAD, STRS, SPREAD + ", 1.5"):
            with pytest.raises(UnsupportedQueryError, match=r"IN list of .* at most 150"):
                s.sql(f"SELECT COUNT(*) FROM visits WHERE age IN ({values})", epsilon=1)
        assert s.spent() == pp.PureDP(0)
        assert not s.ledger.entries()
    finally:
        s.close()


def test_point_sets_equal_the_general_path() -> None:
    rng = random.Random(19)
    analyser = _Analyser({"x": "int", "s": "str"})
    for _ in range(300):
        n = rng.randint(1, 40)
        ints = [_Const("int", rng.randint(-30, 30)) for _ in range(n)]
        col = _ColumnRef("x", "int")
        assert analyser.in_constants(col, ints) == analyser.in_constants_general(col, ints)
        strs = [_Const("str", rng.choice(["", "a", "b", "ab", "O'B", "é", "z", "aa", " "]))
                for _ in range(n)]
        col = _ColumnRef("s", "str")
        assert analyser.in_constants(col, strs) == analyser.in_constants_general(col, strs)
