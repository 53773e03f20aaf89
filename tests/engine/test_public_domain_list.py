"""A long public domain of one kind (strings, or integers within BIGINT) is passed to the judge
as one list and written into the engine statement as one list literal, cast once per value:
it must mean exactly what the value-by-value form means. Oracles: the engine itself (the plain
GROUP BY with noise off, zero-filled over the domain) and the value-by-value form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

import privplan as pp
from privplan import engine_semantics
from privplan.testing import noise_disabled

STRINGS = ["a", "A", "a ", " a", "", "it's", "é", "e\u0301", "ß", "SS", "NULL", "0", "00",
           "\u00e9\u00e9", "x" * 300, "\U0001f600", "k\\n", "a\tb"]
INTS = [0, 1, -1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, -(2**63), 42]


def _database(path: Path, column_type: str, values: list[Any]) -> None:
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t (id BIGINT, key {column_type})")
    rows = [(i, values[i % len(values)]) for i in range(3 * len(values))]
    rows += [(len(rows) + j, None) for j in range(2)]  # NULLs are outside the domain
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    con.close()


def _answer(path: Path, policy_type: str, values: list[Any], uniform: bool,
            monkeypatch: pytest.MonkeyPatch) -> dict[Any, int]:
    if not uniform:
        monkeypatch.setattr(engine_semantics, "_uniform_kind", lambda values: None)
    policy = {"tables": {"t": {"columns": {"id": {"type": "int"},
                                           "key": {"type": policy_type,
                                                   "public_values": values}}}}}
    with pp.connect(path, policy=policy, budget=pp.PureDP(100)) as s, noise_disabled():
        df = s.sql("SELECT key, COUNT(*) AS n FROM t GROUP BY key", epsilon=1).df
    monkeypatch.undo()
    assert df["key"].is_unique, "a key was released twice"
    return {k: int(n) for k, n in zip(df["key"], df["n"])}


@pytest.mark.parametrize(("policy_type", "column_type", "values"), [
    ("str", "VARCHAR", STRINGS),
    ("str", "VARCHAR COLLATE NOCASE", STRINGS),
    ("int", "BIGINT", INTS),
    ("int", "INTEGER", [v for v in INTS if -(2**31) <= v < 2**31]),
])
def test_a_list_domain_means_what_the_values_one_by_one_mean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy_type: str, column_type: str,
        values: list[Any]) -> None:
    assert engine_semantics._uniform_kind(values) == policy_type
    path = tmp_path / "d.duckdb"
    _database(path, column_type, values)
    listed = _answer(path, policy_type, values, True, monkeypatch)
    one_by_one = _answer(path, policy_type, values, False, monkeypatch)
    assert listed == one_by_one
    # the engine as judge: the exact counts in binary collation, every domain value present
    con = duckdb.connect(str(path), read_only=True)
    key = 'key COLLATE "binary"' if policy_type == "str" else "key"
    plain = dict(con.execute(f"SELECT {key}, COUNT(*) FROM t WHERE key IS NOT NULL "
                             "GROUP BY 1").fetchall())
    con.close()
    assert listed == {v: plain.get(v, 0) for v in values}


def test_only_one_kind_of_value_is_listed() -> None:
    assert engine_semantics._uniform_kind(["a", 1]) is None
    assert engine_semantics._uniform_kind([1, True]) is None
    assert engine_semantics._uniform_kind([2**63]) is None
    assert engine_semantics._uniform_kind([1.5]) is None
    assert engine_semantics._uniform_kind([]) is None


def test_judge_keeps_answers_by_value_and_type() -> None:
    """fetch_over answers are kept, keyed by each value's Python type too: 1, 1.0 and True
    are equal as dict keys but DuckDB types them differently."""
    from privplan.engines.judge import judge

    sql = "SELECT typeof(x) FROM unnest($1) AS u(x)"
    j = judge()
    assert j.fetch_over(sql, [1]) == [("INTEGER",)]
    assert j.fetch_over(sql, [True]) == [("BOOLEAN",)]
    assert j.fetch_over(sql, [1.0]) == [("DOUBLE",)]
    assert j.fetch_over(sql, [1]) == [("INTEGER",)]  # kept, and still right
