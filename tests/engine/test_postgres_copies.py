"""A PostgreSQL session's bounded copies (:mod:`privplan.engines.postgres_copies`), on a real server.

Judged by the same-answers oracle with noise off: every user-level answer of a session that
makes its copy equals the answer of a session that inlines the bounded SELECT in every statement
(as before copies) and DuckDB's, the first query of the session and the later ones alike. The
copy is made once per session, on its second query over the table (the ``INSERT`` that fills
it counted among the statements the engine ran; the first query reads the SELECT inline, and a
session that asks once makes none), read by every later statement instead of the table, and dropped when the session
closes (the server's catalog says so). A copy that cannot be made (a role without ``TEMP``) and
one lost with its connection change no answer and raise nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled
from tests.servers import need
from tests.servers.postgres_server import load_frame

psycopg = need("psycopg")

TYPES = {"pid": "BIGINT", "grp": "VARCHAR", "age": "BIGINT", "x": "BIGINT", "cost": "DOUBLE"}
QUERIES = [
    "SELECT grp, COUNT(*) AS v FROM t GROUP BY grp",
    "SELECT grp, SUM(x) AS s, AVG(cost) AS c FROM t GROUP BY grp",
    "SELECT COUNT(DISTINCT pid) AS v FROM t WHERE age < 50",
    "SELECT SUM(cost) AS v FROM t WHERE grp = 'a' AND x > 0",
    "SELECT grp, COUNT(*) FILTER (WHERE x > 0) AS v FROM t GROUP BY grp",
    "SELECT age, COUNT(*) AS v FROM t GROUP BY age",
]


def _policy(groups: int | None = None) -> pp.Policy:
    table: dict[str, Any] = {
        "privacy_unit": "pid", "max_rows_per_unit": 3,
        "columns": {
            "pid": {"type": "int"},
            "grp": {"type": "str", "public_values": ["a", "b", "c", "É"]},
            "age": {"type": "int", "lower": 0, "upper": 100, "unit_level": True,
                    "public_values": list(range(0, 101, 10))},
            "x": {"type": "int", "lower": -5, "upper": 10},
            "cost": {"type": "float", "lower": 0, "upper": 100},
        },
    }
    if groups is not None:
        table["max_groups_per_unit"] = groups
    return pp.Policy.from_dict({"tables": {"t": table}})


def _frame() -> pd.DataFrame:
    """Units of 1-6 rows (unit 0 a heavy contributor; unit 3 breaks "age is unit level"), rows
    that tie on every column but the unit, and a NULL unit."""
    rng = np.random.Generator(np.random.PCG64(11))
    rows: list[tuple[Any, ...]] = []
    for pid in range(40):
        n = int(rng.integers(1, 7)) if pid else 30
        age = int(rng.integers(0, 11)) * 10
        for _ in range(n):
            rows.append((pid, "abcÉ"[int(rng.integers(0, 4))],
                         age if pid != 3 else int(rng.integers(0, 11)) * 10,
                         int(rng.integers(-20, 30)), float(rng.integers(0, 4000)) / 8))
    rows += [(50, "a", 10, 1, 1.0)] * 4 + [(None, "b", 20, 2, 2.0)]
    return pd.DataFrame(rows, columns=list(TYPES), dtype=object)


@pytest.fixture(scope="module")
def url(pg_url: str) -> str:
    load_frame(pg_url, "t", _frame(), TYPES)
    return pg_url


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE t (" + ", ".join(f"{c} {t}" for c, t in TYPES.items()) + ")")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)",
                    [list(r) for r in _frame().itertuples(index=False)])
    yield con
    con.close()


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(list(df.columns), ignore_index=True, na_position="last")


def _answers(sess: pp.Session, queries: list[str]) -> list[pd.DataFrame]:
    out = []
    for q in queries:
        with noise_disabled():
            out.append(_sorted(sess.sql(q, epsilon=1).df))
    return out


class _Statements:
    """Every statement text the engine sends the server (``_execute`` of the real engine)."""

    def __init__(self, sess: pp.Session) -> None:
        engine = sess.engine
        self.texts: list[str] = []
        real = engine._execute  # type: ignore[attr-defined]

        def execute(con: Any, pg_sql: str) -> Any:
            self.texts.append(pg_sql)
            return real(con, pg_sql)

        engine._execute = execute  # type: ignore[attr-defined]

    def fills(self) -> list[str]:
        return [t for t in self.texts if t.startswith('INSERT INTO pg_temp."__privplan_copy_')]


def _copies_on_server(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as con:
        row = con.execute("SELECT count(*) FROM pg_class WHERE relpersistence = 't' AND "
                          "relname LIKE '\\_\\_privplan\\_copy\\_%'").fetchone()
    return int(row[0]) if row else -1


def _no_copies_left(url: str) -> bool:
    """(A closed connection's backend drops its temporary tables as it exits: soon after.)"""
    deadline = time.monotonic() + 10
    while _copies_on_server(url) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _copies_on_server(url) == 0


@pytest.mark.invariant(7)
@pytest.mark.parametrize("groups", [None, 2])
def test_answers_with_the_copy_are_the_inlined_ones_and_duckdbs(
        url: str, duck: duckdb.DuckDBPyConnection, groups: int | None) -> None:
    policy = _policy(groups)
    twice = QUERIES + QUERIES  # (the first query reads inline, the second makes the copy)
    with pp.connect(url, policy=policy, budget=pp.PureDP(1e6)) as sess:
        statements = _Statements(sess)
        copied = _answers(sess, twice)
        assert len(statements.fills()) == 1  # (made once per session)
    with pp.connect(url, policy=policy, budget=pp.PureDP(1e6)) as sess:
        sess.engine._copies.disabled = True  # type: ignore[attr-defined]  # (as before copies)
        statements = _Statements(sess)
        inlined = _answers(sess, twice)
        assert statements.fills() == []
    with pp.connect(duck, policy=policy, budget=pp.PureDP(1e6)) as sess:
        on_duckdb = _answers(sess, twice)
    for q, a, b, c in zip(twice, copied, inlined, on_duckdb):
        pd.testing.assert_frame_equal(a, b, obj=q)
        pd.testing.assert_frame_equal(a, c, obj=q)
    assert _no_copies_left(url)


def test_made_once_read_by_later_statements_dropped_on_close(url: str) -> None:
    sess = pp.connect(url, policy=_policy(), budget=pp.PureDP(1e6))
    ran: list[str] = []
    real = sess.engine.run

    def run(sql: str) -> pd.DataFrame:
        ran.append(sql)
        return real(sql)

    sess.engine.run = run  # type: ignore[method-assign]
    statements = _Statements(sess)
    try:
        _answers(sess, QUERIES)
        (fill,) = statements.fills()
        assert " WITH NO DATA" in next(t for t in statements.texts if t.startswith("CREATE TEMP"))
        assert _copies_on_server(url) == 1
        # the first statement reads the table inline; from the second on (the copy is made
        # after the second query's charge, then its statement reads it) every one reads the copy
        first, *later = ran
        assert 'pg_temp."__privplan_copy_' not in first and '"t"' in first  # (inline)
        assert later and all('pg_temp."__privplan_copy_' in s and '"t"' not in s for s in later)
        before = len(statements.texts)
        _answers(sess, QUERIES[:2])
        assert statements.fills() == [fill] and len(statements.texts) > before
    finally:
        sess.close()
    assert _no_copies_left(url)


def test_a_session_that_asks_once_makes_no_copy(url: str) -> None:
    """The CLI or a connection per request: one user-level query reads the SELECT inline (the
    copy would cost about twice that statement) and creates nothing on the server."""
    with pp.connect(url, policy=_policy(), budget=pp.PureDP(1e6)) as sess:
        statements = _Statements(sess)
        _answers(sess, QUERIES[:1])
        assert statements.fills() == []
        assert not any(t.startswith("CREATE TEMP") for t in statements.texts)
        assert _copies_on_server(url) == 0
        _answers(sess, QUERIES[1:2])  # (the second query over the table makes it)
        assert len(statements.fills()) == 1 and _copies_on_server(url) == 1
    assert _no_copies_left(url)


def test_on_a_callers_connection_the_copies_are_dropped_and_it_stays_open(url: str) -> None:
    con = psycopg.connect(url, autocommit=True)
    try:
        with pp.connect(con, policy=_policy(), budget=pp.PureDP(1e6)) as sess:
            _answers(sess, QUERIES[:2])
            (name,) = con.execute("SELECT relname FROM pg_class WHERE relpersistence = 't' AND "
                                  "relname LIKE '\\_\\_privplan\\_copy\\_%'").fetchone() or ()
        assert not con.closed
        assert con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert con.execute(f"SELECT to_regclass('pg_temp.\"{name}\"')").fetchone() == (None,)
        assert con.execute("SHOW transaction_read_only").fetchone() == ("off",)
    finally:
        con.close()


def test_reads_stay_read_only_beside_the_copy(url: str) -> None:
    with pp.connect(url, policy=_policy(), budget=pp.PureDP(1e6)) as sess:
        _answers(sess, QUERIES[:2])
        engine = sess.engine
        for sql in ("CREATE TABLE written AS SELECT 1 AS x", "DELETE FROM t"):
            with pytest.raises(pp.ExecutionError):
                engine.run(sql)
    with psycopg.connect(url) as con:
        assert con.execute("SELECT to_regclass('written')").fetchone() == (None,)
        assert con.execute("SELECT count(*) FROM t").fetchone() == (len(_frame()),)


def test_a_role_without_temp_gets_the_same_answers_inline(url: str) -> None:
    """No ``TEMP`` privilege: making the copy fails (a failure that does not depend on the
    data) and the session inlines, raising nothing and answering the same."""
    base, _, _ = url.rpartition("/")
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE DATABASE privplan_notemp")
    load_frame(f"{base}/privplan_notemp", "t", _frame(), TYPES)
    with psycopg.connect(f"{base}/privplan_notemp", autocommit=True) as con:
        con.execute("CREATE ROLE reader LOGIN")
        con.execute("REVOKE TEMP ON DATABASE privplan_notemp FROM PUBLIC")
        con.execute("GRANT SELECT ON t TO reader")
    reader = base.replace("postgres@", "reader@") + "/privplan_notemp"
    with pp.connect(reader, policy=_policy(), budget=pp.PureDP(1e6)) as sess:
        statements = _Statements(sess)
        got = _answers(sess, QUERIES)
        assert statements.fills() == [] and sess.engine._copies.disabled  # type: ignore
        assert any(t.startswith("CREATE TEMP") for t in statements.texts)  # (tried once)
        assert sum(t.startswith("CREATE TEMP") for t in statements.texts) == 1
        assert sess.spent() == pp.PureDP(len(QUERIES))
    with pp.connect(url, policy=_policy(), budget=pp.PureDP(1e6)) as sess:
        want = _answers(sess, QUERIES)
    for q, a, b in zip(QUERIES, got, want):
        pd.testing.assert_frame_equal(a, b, obj=q)


def _terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        while con.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                          (pid,)).fetchone() != (0,) and time.monotonic() < deadline:
            time.sleep(0.01)


def test_a_copy_lost_with_its_connection(url: str) -> None:
    """The backend terminated: a statement already built over the copy reads its SELECT
    inline on the new connection; the next query makes the copy again; the answers stay."""
    with pp.connect(url, policy=_policy(), budget=pp.PureDP(1e6)) as sess:
        want = _answers(sess, QUERIES)
        engine: Any = sess.engine
        (select, ref), = engine._copies.made.items()
        over_copy = f"SELECT grp, COUNT(*) AS n FROM {ref} AS b GROUP BY grp"
        inline = f"SELECT grp, COUNT(*) AS n FROM ({select}) AS b GROUP BY grp"
        before = _sorted(engine.run(over_copy))
        pd.testing.assert_frame_equal(before, _sorted(engine.run(inline)))
        _terminate(url, engine._con.info.backend_pid)
        pd.testing.assert_frame_equal(_sorted(engine.run(over_copy)), before)
        assert engine._copies.made == {}
        statements = _Statements(sess)
        got = _answers(sess, QUERIES)
        assert len(statements.fills()) == 1
    for q, a, b in zip(QUERIES, got, want):
        pd.testing.assert_frame_equal(a, b, obj=q)
