"""ORDER BY / LIMIT / OFFSET of a flat outer query, sorted in numpy
(:class:`privplan.rewrite.postprocess.FlatOrder`), against DuckDB's post-processing statement.

Oracle: each query is answered with noise off over random tables (string keys with non-ASCII
text and the empty string, 64-bit integers, dates, booleans, NULL in each), and the session's
noisy columns are captured. The released frame must equal what DuckDB returns for the outer
query (:func:`post_select`) over the same noisy table with one more sort key, the row's
position in key order, appended: that is the order FlatOrder promises (DuckDB's own order of
rows with equal sort keys is unspecified). Where DuckDB's plain statement happens to give the
same frame (no ties), intervals and accuracy must equal the DuckDB path's too.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlglot import exp

import privplan as pp
import privplan.assemble as assemble_module
import privplan.rewrite.postprocess as postprocess_module
import privplan.session.session as session_module
from privplan.engines.post_processor import post_process
from privplan.rewrite.postprocess import flat_order, layout, post_select, with_derived
from privplan.testing import noise_disabled

POLICY = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
    "s": {"type": "str"},
    "i": {"type": "int", "lower": -2**40, "upper": 2**40,
          "public_values": [-3, 0, 7, 2**40]},
    "d": {"type": "date", "public_values": ["2021-03-04", "1999-12-31", "2024-02-29"]},
    "b": {"type": "bool"},
    "x": {"type": "float", "lower": 0, "upper": 10, "resolution": 1},
}}}})

QUERIES = [
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY n DESC",
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY n DESC LIMIT 2",
    "SELECT i, b, COUNT(*) AS n FROM t GROUP BY i, b ORDER BY b NULLS FIRST, n DESC, i",
    "SELECT b, i, COUNT(*) AS n FROM t GROUP BY b, i ORDER BY i DESC NULLS LAST, b DESC",
    "SELECT d, AVG(x) AS a FROM t GROUP BY d ORDER BY a NULLS FIRST",
    "SELECT d, b, SUM(x) AS total FROM t GROUP BY d, b ORDER BY total DESC, d LIMIT 4 OFFSET 1",
    "SELECT s, COUNT(*) AS n FROM t GROUP BY s ORDER BY s DESC",
    "SELECT s, COUNT(*) AS n FROM t GROUP BY s ORDER BY t.s NULLS FIRST",
    "SELECT s AS label, COUNT(*) FROM t GROUP BY s ORDER BY COUNT(*), s",
    "SELECT i AS b, b AS i, COUNT(*) AS n FROM t GROUP BY i, b ORDER BY i, b DESC",
    "SELECT i, d, AVG(x) AS a, COUNT(*) AS n FROM t GROUP BY i, d ORDER BY d DESC, a",
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i LIMIT 3",
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i OFFSET 2",
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY n LIMIT 0",
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY SUM(x) DESC, i",
    "SELECT b, COUNT(*) AS n FROM t GROUP BY b ORDER BY n OFFSET 100",
]


def _table(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    pools: dict[str, list[Any]] = {
        "s": ["a", "B", "é", "Z", "", "ab", "zz", None],
        "i": [-3, 0, 7, 2**40, None],
        "d": [dt.date(2021, 3, 4), dt.date(1999, 12, 31), dt.date(2024, 2, 29), None],
        "b": [True, False, None],
    }
    cols = {c: [pool[k] for k in rng.integers(0, len(pool), n)] for c, pool in pools.items()}
    x = rng.integers(0, 11, n).astype(float)
    x[rng.random(n) < 0.3] = np.nan
    return pd.DataFrame({
        "s": pd.Series(cols["s"], dtype=object),
        "i": pd.array(cols["i"], dtype="Int64"),
        "d": pd.Series(cols["d"], dtype=object),
        "b": pd.array(cols["b"], dtype="boolean"),
        "x": x,
    })


def _stable_reference(core: Any, frame: pd.DataFrame) -> pd.DataFrame:
    """DuckDB's outer query over the noisy table, ties broken by position in key order."""
    table = with_derived(core, frame).assign(__pos=np.arange(len(frame)))
    select = post_select(core, "__noisy0", hidden=False)
    order = select.args.get("order") or exp.Order(expressions=[])
    order.append("expressions", exp.Ordered(this=exp.column("__pos")))
    select.set("order", order)
    return post_process(select.sql(dialect="duckdb"), {"__noisy0": table})


def _capture(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any, Any]]:
    seen: list[tuple[Any, Any, Any]] = []
    real = session_module.assemble

    def capture(planned: Any, frames: Any) -> Any:
        answer = real(planned, frames)
        seen.append((planned, frames, answer))
        return answer

    monkeypatch.setattr(session_module, "assemble", capture)
    return seen


@pytest.mark.parametrize("seed", range(6))
def test_flat_order_equals_duckdb_with_ties_in_key_order(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture(monkeypatch)
    sess = pp.connect(":memory:", policy=POLICY, budget=pp.ApproxDP(10_000, 0.5))
    same_as_plain = 0
    try:
        sess.register("t", _table(seed))
        with noise_disabled():
            for sql in QUERIES:
                sess.sql(sql, epsilon=1, delta=1e-6)
                planned, frames, (df, intervals, accuracy) = seen[-1]
                core = planned.plan.cores[0]
                assert layout(core)[1] is not None and flat_order(core).active, sql
                reference = _stable_reference(core, frames[0].frame())
                pd.testing.assert_frame_equal(df, reference, check_exact=True, obj=sql)
                # DuckDB's own path (its tie order): where it gives the same frame, the
                # intervals and accuracy carried through the hidden columns must agree too
                monkeypatch.setattr(assemble_module, "FLAT_OUTPUT", False)
                plain_df, plain_intervals, plain_accuracy = assemble_module.assemble(
                    planned, frames)
                monkeypatch.setattr(assemble_module, "FLAT_OUTPUT", True)
                if plain_df.equals(df):
                    same_as_plain += 1
                    pd.testing.assert_frame_equal(intervals, plain_intervals, check_exact=True,
                                                  obj=sql)
                    assert accuracy == plain_accuracy, sql
    finally:
        sess.close()
    assert same_as_plain >= len(QUERIES) // 2  # (the interval check really ran)


def test_integers_beyond_double_precision_keep_their_order() -> None:
    """Nullable 64-bit integer keys 2^53, 2^53 + 1, 2^53 + 2 (equal as doubles) sort as
    DuckDB sorts them."""
    big = 2**53
    policy = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
        "k": {"type": "int", "lower": 0, "upper": 2**60,
              "public_values": [big, big + 1, big + 2]}}}}})
    sess = pp.connect(":memory:", policy=policy, budget=pp.PureDP(100))
    try:
        sess.register("t", pd.DataFrame({"k": pd.array([big + 1, big, None, big + 2],
                                                       dtype="Int64")}))
        with noise_disabled():
            for sql, want in [
                ("SELECT k, COUNT(*) AS n FROM t GROUP BY k ORDER BY k DESC", [2, 1, 0]),
                ("SELECT k, COUNT(*) AS n FROM t GROUP BY k ORDER BY k", [0, 1, 2]),
            ]:
                got = sess.sql(sql, epsilon=1).df
                assert [int(v) - big for v in got["k"]] == want, sql
    finally:
        sess.close()


def test_sort_key_types_left_to_duckdb_still_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sort key of a type FlatOrder does not sort (object arrays, e.g. DECIMAL keys as Python
    Decimals; here every type, by making the sort codes unavailable) falls back to DuckDB's
    statement: the answer equals the one with the flat path off."""
    policy = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
        "k": {"type": "str", "public_values": ["a", "b", "c"]}}}}})
    sess = pp.connect(":memory:", policy=policy, budget=pp.PureDP(100))
    calls: list[str] = []
    real = assemble_module.post_process
    monkeypatch.setattr(assemble_module, "post_process",
                        lambda sql, tables: calls.append(sql) or real(sql, tables))
    try:
        sess.register("t", pd.DataFrame({"k": list("aabbbc")}))
        sql = "SELECT k, COUNT(*) AS n FROM t GROUP BY k ORDER BY n DESC, k"
        with noise_disabled():
            fast = sess.sql(sql, epsilon=1).df
            assert len(calls) == 1  # the stand-in check only: the answer was sorted in numpy
            monkeypatch.setattr(postprocess_module, "_sort_codes", lambda values, rows: None)
            fallback = sess.sql(sql, epsilon=1).df
            assert len(calls) == 2  # (the check is not repeated for the same query)
            monkeypatch.setattr(assemble_module, "FLAT_OUTPUT", False)
            slow = sess.sql(sql, epsilon=1).df
        for other in (fallback, slow):
            pd.testing.assert_frame_equal(fast, other, check_exact=True)
        assert list(fast["k"]) == ["b", "a", "c"]
    finally:
        sess.close()


def test_orders_not_taken_flat() -> None:
    """Positions, expressions and non-constant or negative LIMITs are left to DuckDB."""
    sess = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    try:
        sess.register("t", _table(0))
        for sql, flat in [
            ("SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY 2", False),
            ("SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY n * -1", False),
            ("SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY COUNT(*) + 1", False),
            ("SELECT i, COUNT(*) AS n FROM t GROUP BY i LIMIT 1 + 1", False),
            ("SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY i LIMIT 2", True),
        ]:
            core = sess.plan(sql, {"epsilon": 1})[0].plan.cores[0]
            assert (layout(core)[1] is not None) is flat, sql
        with pytest.raises(pp.UnsupportedQueryError, match="cannot be negative"):
            sess.plan("SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY n LIMIT -1",
                      {"epsilon": 1})  # (DuckDB, on the stand-ins, before any charge)
    finally:
        sess.close()


@pytest.mark.parametrize("sql", [
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i",
    "SELECT i, b, COUNT(*) AS n FROM t GROUP BY i, b",
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY n DESC",
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i ORDER BY i LIMIT 5",
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i HAVING COUNT(*) > 0",
])
def test_released_dtype_does_not_tell_a_dropped_null_group(sql: str) -> None:
    """Two tables that differ in one row: a NULL key or the key 3, each a group of one that
    partition selection drops. The engine's frame has a nullable key column only with the NULL
    group; the released frames (the same two groups) must not differ, dtypes included."""
    policy = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
        "i": {"type": "int", "lower": 0, "upper": 100}, "b": {"type": "bool"}}}}})
    answers = []
    for last in (None, 3):
        sess = pp.connect(":memory:", policy=policy, budget=pp.ApproxDP(100, 1e-3))
        try:
            sess.register("t", pd.DataFrame({
                "i": pd.array([1] * 500 + [2] * 500 + [last], dtype="Int64"),
                "b": pd.array([True] * 1001, dtype="boolean")}))
            with noise_disabled():
                answers.append(sess.sql(sql, epsilon=1, delta=1e-6).df)
        finally:
            sess.close()
    assert len(answers[0]) >= 2
    pd.testing.assert_frame_equal(answers[0], answers[1], check_exact=True)


@pytest.mark.parametrize("seed", range(8))
def test_key_order_equals_the_dataframe_sort(seed: int) -> None:
    """The noise path's key order (one stable argsort per key column) against pandas'
    ``sort_values(keys, na_position="last", kind="stable")`` over engine frames with every
    key type DuckDB returns (text with non-ASCII, nullable integers, doubles with NaN and
    -0.0, dates, booleans, NULL in each), in random row order with repeated keys."""
    import duckdb

    rng = np.random.default_rng(seed)
    con = duckdb.connect()
    try:
        con.register("rs", pd.DataFrame({"r": rng.integers(0, 1000, int(rng.integers(2, 300)))}))
        frame = con.execute("""
            SELECT CASE WHEN r % 7 = 0 THEN NULL ELSE ['a', 'B', 'é', '', 'ab'][r % 5 + 1]
                   END AS __k0,
                   CASE WHEN r % 5 = 1 THEN NULL ELSE (r % 3)::BIGINT - 1 END AS __k1,
                   CASE WHEN r % 6 = 2 THEN 'NaN'::DOUBLE WHEN r % 6 = 3 THEN -0.0
                        WHEN r % 6 = 4 THEN NULL ELSE r % 2 END AS __k2,
                   CASE WHEN r % 4 = 0 THEN NULL ELSE DATE '2020-01-01' + (r % 3)::INT END
                        AS __k3,
                   CASE WHEN r % 3 = 0 THEN NULL ELSE r % 2 = 0 END AS __k4
            FROM rs""").df()
    finally:
        con.close()
    for width in range(1, 6):
        names = [f"__k{i}" for i in rng.permutation(5)[:width]]
        sub = frame[names].rename(columns={n: f"__k{i}" for i, n in enumerate(names)})
        want = np.asarray(sub.sort_values(list(sub.columns), na_position="last",
                                          kind="stable").index)
        got = assemble_module._key_order(dict(sub.items()), width)
        assert (np.arange(len(sub)) if got is None else got).tolist() == want.tolist(), names
