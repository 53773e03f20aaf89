"""A long public domain of one kind (strings, or integers within BIGINT) is passed to the judge
as one list and written into the engine statement as one list literal (a very long one is kept
in an engine table instead), cast once per value: it must mean exactly what the value-by-value
form means. Oracles: the engine itself (the plain
GROUP BY with noise off, zero-filled over the domain) and the value-by-value form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

import privplan as pp
from privplan.planning import engine_semantics
from privplan.session.shared_plans import shared_plans
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
            monkeypatch: pytest.MonkeyPatch, table: bool = False) -> dict[Any, int]:
    if not uniform:
        monkeypatch.setattr(engine_semantics, "_uniform_kind", lambda values: None)
    monkeypatch.setattr(engine_semantics, "DOMAIN_TABLE_MIN", 1 if table else 10**9)
    shared_plans.clear()  # (the threshold is a constant planning reads: plan afresh)
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
    # the same list kept in an engine table (as a long domain is) means the same again
    assert _answer(path, policy_type, values, True, monkeypatch, table=True) == listed
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


def _keys_database(path: Path, keys: list[Any], column_type: str) -> None:
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t (k {column_type}, x BIGINT)")
    # every third key absent, some keys not in the domain, a few NULLs
    rows = [(keys[i % len(keys)], i % 7) for i in range(0, 4 * len(keys), 3)]
    rows += [(keys[0] + keys[0] if isinstance(keys[0], str) else -1, 1), (None, 2)]
    con.execute("INSERT INTO t SELECT unnest($1), unnest($2)",
                [[k for k, _ in rows], [x for _, x in rows]])
    con.close()


@pytest.mark.parametrize(("policy_type", "column_type", "keys"), [
    ("str", "VARCHAR", [f"k'{i:05d}" for i in range(2500)] + ["é", "e\u0301", ""]),
    ("int", "BIGINT", [3 * i - 2**40 for i in range(2500)] + [2**63 - 1]),
])
def test_many_public_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy_type: str,
                          column_type: str, keys: list[Any]) -> None:
    """A domain of thousands of keys (kept in an engine table): the noise-off answer is the
    plain GROUP BY zero-filled over exactly the declared keys, and the explanation, the
    charges and the answer are those of the domain written inline in the statement. The table
    is made once per session, the statement does not list the keys, and closing the session
    leaves nothing on the caller's connection."""
    path = tmp_path / "k.duckdb"
    _keys_database(path, keys, column_type)
    policy = {"tables": {"t": {"privacy_unit": "row", "columns": {
        "k": {"type": policy_type, "public_values": keys},
        "x": {"type": "int", "lower": 0, "upper": 10}}}}}
    sql = "SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY k"
    runs = []
    for table_min in (engine_semantics.DOMAIN_TABLE_MIN, 10**9):
        monkeypatch.setattr(engine_semantics, "DOMAIN_TABLE_MIN", table_min)
        shared_plans.clear()  # (the threshold is a constant planning reads: plan afresh)
        con = duckdb.connect(str(path))
        with pp.connect(con, policy=policy, budget=pp.PureDP(100)) as s, noise_disabled():
            text = str(s.explain(sql, epsilon=1))
            _, statements = s.plan(sql, {"epsilon": 1})
            df = s.sql(sql, epsilon=1).df
            s.sql(sql, epsilon=1)
            spent = s.spent()
        tables = con.execute("SELECT table_name FROM duckdb_tables() "
                             "WHERE table_name LIKE '__privplan_domain%'").fetchall()
        views = con.execute("SELECT view_name FROM duckdb_views() "  # (the Arrow source too)
                            "WHERE view_name LIKE '__privplan%'").fetchall()
        con.close()
        assert tables == [] and views == []
        runs.append((text, str(spent), df, statements))
    (text, spent, df, statements), (text_inline, spent_inline, df_inline, inline) = runs
    assert text == text_inline and spent == spent_inline
    assert df.equals(df_inline)
    assert len(statements[0]) < 2000 < len(inline[0])
    assert list(df["k"]) == sorted(df["k"]) and df["k"].is_unique
    con = duckdb.connect(str(path), read_only=True)
    key = 'k COLLATE "binary"' if policy_type == "str" else "k"
    plain = {k: (n, s) for k, n, s in con.execute(
        f"SELECT {key}, COUNT(*), SUM(x) FROM t GROUP BY 1").fetchall()}
    con.close()
    got = {k: (int(n), int(s)) for k, n, s in zip(df["k"], df["n"], df["s"])}
    assert got == {k: plain.get(k, (0, 0)) for k in keys}


def test_a_shared_plans_domain_is_prepared_once_and_means_the_same(tmp_path: Path) -> None:
    """A plan shared by fresh sessions holds a long domain as one tuple; its key and Arrow
    values are prepared once per process (``engines/domain_values.py``) and every fresh
    session's engine table made from them answers as the plain GROUP BY does."""
    from privplan.engines import domain_values

    keys = [f"k{i:05d}" for i in range(3000)] + ["é", "e\u0301", ""]
    path = tmp_path / "k.duckdb"
    _keys_database(path, keys, "VARCHAR")
    policy = {"tables": {"t": {"privacy_unit": "row", "columns": {
        "k": {"type": "str", "public_values": keys},
        "x": {"type": "int", "lower": 0, "upper": 10}}}}}
    sql = "SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY k"
    answers, prepared = [], []
    for _ in range(3):  # fresh sessions: the 2nd and 3rd reuse the first's plan
        with pp.connect(path, policy=policy, budget=pp.PureDP(100)) as s, noise_disabled():
            answers.append(s.sql(sql, epsilon=1).df)
        prepared.append(dict(domain_values._KNOWN))
    assert shared_plans.hits == 2
    (values, arrow), = [v for (kind, _), v in prepared[1].items() if kind == "arrow"]
    assert type(values) is tuple and sorted(values) == sorted(keys)
    assert prepared[2].keys() == prepared[1].keys()  # (not prepared again: the same objects)
    assert all(prepared[2][k][1] is prepared[1][k][1] for k in prepared[1])
    assert arrow.column("x").to_pylist() == list(values)
    assert domain_values.arrow_strings(values) is arrow
    assert domain_values.arrow_strings(list(values)) is not arrow  # (a list: afresh)
    assert domain_values.arrow_strings(("a", 1)) is None
    key = domain_values.domain_key
    assert key((1, 2)) == key([1, 2]) and hash(key((1, 2))) == hash(key([1, 2]))
    assert key((1, 2)) != key((True, 2)) and key((1,)) != key((1.0,))  # (types count)
    assert domain_values.arrow_strings(("\ud800",)) is None  # (Arrow cannot encode it)
    con = duckdb.connect(str(path), read_only=True)
    plain = {k: (n, s) for k, n, s in con.execute(
        'SELECT k COLLATE "binary", COUNT(*), SUM(x) FROM t GROUP BY 1').fetchall()}
    con.close()
    for df in answers:
        got = {k: (int(n), int(s)) for k, n, s in zip(df["k"], df["n"], df["s"])}
        assert got == {k: plain.get(k, (0, 0)) for k in keys}
    assert answers[1].equals(answers[0]) and answers[2].equals(answers[0])
