"""The sessions of one process share a bounded copy of a table (privplan.engines.shared_copies)
only where it is exactly the copy each would have made: the same file state, the same policy.

Oracles: the statements each session ran (which database they read: a session's own work
database, or a shared one); the DuckDB instance's attached databases (how many copies exist);
the answers and ledger costs of a session that never copies (``prepare=False``), noise off.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.engines.shared_copies import registry
from privplan.testing import noise_disabled

POLICY: dict[str, Any] = {"tables": {"t": {"privacy_unit": "row", "columns": {
    "g": {"type": "str", "public_values": ["a", "b", "c"]},
    "x": {"type": "float", "lower": -10, "upper": 30, "resolution": 0.5},
    "n": {"type": "int", "lower": 0, "upper": 7}}}}}
WIDER: dict[str, Any] = {"tables": {"t": {**POLICY["tables"]["t"], "columns": {
    **POLICY["tables"]["t"]["columns"],
    "x": {"type": "float", "lower": -10, "upper": 40, "resolution": 0.5}}}}}
SUM = "SELECT g, SUM(x) AS s, AVG(n) AS a FROM t GROUP BY g ORDER BY g"
COUNT = "SELECT COUNT(*) AS c FROM t WHERE n > 2"


def _write(path: Path, rows: int, shift: float = 0.0) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE OR REPLACE TABLE t AS SELECT (['a', 'b', 'c', NULL])[i % 4 + 1] AS g, "
                f"(i % 50) - 12.25 + {shift} AS x, (i % 11)::BIGINT - 1 AS n FROM range(?) r(i)",
                [rows])
    con.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "d.duckdb"
    _write(path, 400)
    return path


class Recorded:
    """A default session whose engine statements are recorded."""

    def __init__(self, database: Path, policy: dict[str, Any] = POLICY,
                 prepare: bool | None = None) -> None:
        self.session = pp.connect(database, policy=policy, budget=pp.PureDP(1e6),
                                  prepare=prepare)
        self.ran: list[str] = []
        real = self.session.engine.run
        self.session.engine.run = (  # type: ignore[method-assign]
            lambda st: self.ran.append(st) or real(st))

    def ask(self, sql: str) -> pd.DataFrame:
        with noise_disabled():
            return self.session.sql(sql, epsilon=1).df

    def shared_read(self) -> str | None:
        """The shared copy the last statement read, if any."""
        found = [w for w in self.ran[-1].split() if w.startswith("__privplan_shared_")]
        return found[0].split(".")[0] if found else None

    def costs(self) -> list[object]:
        return [(e.mechanisms, e.marginal, e.total_after)
                for e in self.session.ledger.entries()]


def _attached(session: pp.Session) -> list[str]:
    rows = session.engine.con.execute(  # type: ignore[attr-defined]
        "SELECT database_name FROM duckdb_databases() "
        "WHERE database_name LIKE '__privplan_shared_%'").fetchall()
    return sorted(r[0] for r in rows)


def test_a_copy_made_by_one_session_is_read_by_another_with_the_same_answers(
        db: Path) -> None:
    never = Recorded(db, prepare=False)
    expected = [never.ask(q) for q in (SUM, COUNT, SUM)]
    never.session.close()
    first, second = Recorded(db), Recorded(db)
    first.ask(SUM)
    assert first.shared_read() is None  # (a default session: the first query reads the table)
    first.ask(SUM)
    made = first.shared_read()
    assert made is not None  # (the second made the process's copy)
    got = [second.ask(q) for q in (SUM, COUNT, SUM)]
    assert second.shared_read() == made  # read from its first query: nothing made again
    assert _attached(second.session) == [made]  # one copy for the two sessions
    assert not second.session.engine._materialized  # type: ignore[attr-defined]
    for a, b in zip(expected, got, strict=True):
        pd.testing.assert_frame_equal(a, b)
    assert second.costs() == never.costs()  # (a copy changes no charge)
    ((key, _),) = second.session.engine._adopted.values()  # type: ignore[attr-defined]
    assert registry.users(key) == 2
    first.session.close()
    assert second.ask(SUM) is not None and second.shared_read() == made  # (still attached)
    second.session.close()
    assert registry.users(key) == 0


def test_the_last_session_reading_a_copy_detaches_it(db: Path) -> None:
    first, second, keeper = Recorded(db), Recorded(db), Recorded(db, prepare=False)
    first.ask(COUNT)
    first.ask(COUNT)
    second.ask(COUNT)
    made = second.shared_read()
    assert made is not None
    ((key, _),) = second.session.engine._adopted.values()  # type: ignore[attr-defined]
    assert registry.users(key) == 2
    first.session.close()
    assert registry.users(key) == 1 and _attached(keeper.session) == [made]
    second.session.close()
    assert registry.users(key) == 0 and _attached(keeper.session) == []
    keeper.session.close()


def test_no_copy_is_shared_between_sessions_of_different_bounds(db: Path) -> None:
    narrow, wide = Recorded(db), Recorded(db, WIDER)
    narrow.ask(SUM)
    narrow.ask(SUM)
    wide.ask(SUM)
    assert wide.shared_read() is None  # (its first query reads the table: no copy of its own)
    wide.ask(SUM)
    assert {narrow.shared_read(), wide.shared_read()} == set(_attached(wide.session))
    assert narrow.shared_read() != wide.shared_read()
    never = Recorded(db, WIDER, prepare=False)
    pd.testing.assert_frame_equal(wide.ask(SUM), never.ask(SUM))
    for r in (narrow, wide, never):
        r.session.close()


def test_an_equal_policy_from_another_object_shares(db: Path) -> None:
    first = Recorded(db)
    first.ask(COUNT)
    first.ask(COUNT)
    copy: dict[str, Any] = {"tables": {"t": dict(POLICY["tables"]["t"])}}
    second = Recorded(db, copy)
    second.ask(COUNT)
    assert second.shared_read() == first.shared_read() is not None
    first.session.close()
    second.session.close()


def test_a_changed_file_gets_a_copy_of_its_own(db: Path) -> None:
    """Rewritten between sessions (its instance closed), the file is a new key: the new
    session makes a new copy, of the new rows. Replaced on disk while a session holds the old
    one (DuckDB's instance still reads the old file), a session opened then has another
    identity and reads no copy made under the old one."""
    first = Recorded(db)
    first.ask(SUM)
    first.ask(SUM)
    old = first.shared_read()
    first.session.close()
    _write(db, 600, shift=3.0)
    later = Recorded(db)
    later.ask(SUM)
    got = later.ask(SUM)
    assert later.shared_read() not in (None, old)
    never = Recorded(db, prepare=False)
    pd.testing.assert_frame_equal(got, never.ask(SUM))
    never.session.close()

    replacement = db.with_name("new.duckdb")
    _write(replacement, 300, shift=5.0)
    os.replace(replacement, db)  # (a new inode at the same path)
    other = Recorded(db)
    other.ask(SUM)
    assert other.shared_read() is None
    other.ask(SUM)
    assert other.shared_read() not in (None, later.shared_read())
    later.session.close()
    other.session.close()


def test_a_session_with_a_registered_table_shares_nothing(db: Path) -> None:
    first = Recorded(db)
    first.ask(COUNT)
    first.ask(COUNT)
    assert first.shared_read() is not None
    second = Recorded(db)
    second.session.register("t", first.session.engine.con.execute(  # type: ignore[attr-defined]
        "SELECT * FROM t").df())
    second.ask(COUNT)
    second.ask(COUNT)
    assert second.shared_read() is None and not any(
        "__privplan_shared_" in s for s in second.ran)
    first.session.close()
    second.session.close()


def test_concurrent_sessions_make_one_copy(db: Path) -> None:
    sessions = [Recorded(db) for _ in range(4)]
    for r in sessions:
        r.ask(COUNT)
    errors: list[BaseException] = []

    def second(r: Recorded) -> None:
        try:
            r.ask(COUNT)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=second, args=(r,)) for r in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({r.shared_read() for r in sessions}) == 1
    assert len(_attached(sessions[0].session)) == 1
    for r in sessions:
        r.session.close()


def test_a_shared_copy_that_cannot_be_made_changes_no_answer_and_no_charge(
        db: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A real DuckDB error while making the shared copy (a database already attached under its
    name): the query answers by its admitted inline statement, is charged once, nothing is
    left attached for the copy, and the session stops trying."""
    never = Recorded(db, prepare=False)
    expected = [never.ask(q) for q in (COUNT, COUNT, SUM)]
    never.session.close()
    sess = Recorded(db)
    sess.ask(COUNT)
    engine: Any = sess.session.engine
    key = engine._share_key(next(iter(_selects(sess))))
    alias = registry.alias(key)
    engine.con.execute(f"ATTACH ':memory:' AS {alias} (READ_WRITE)")
    with caplog.at_level(logging.INFO, logger="privplan"):
        got = [expected[0], sess.ask(COUNT), sess.ask(SUM)]
    for a, b in zip(expected, got, strict=True):
        pd.testing.assert_frame_equal(a, b)
    assert sess.costs() == never.costs()
    assert not any("__privplan_shared_" in s or "__privplan_work_" in s for s in sess.ran)
    assert caplog.text.count("could not make the session's copy") == 1
    assert _attached(sess.session) == []
    sess.session.close()


def _selects(r: Recorded) -> list[str]:
    """The SELECT of the copy the session's COUNT query would make."""
    from privplan.planning.passes import bounded_select

    planned, _ = r.session.plan(COUNT, {"epsilon": 1})
    return [bounded_select(core) for core in planned.plan.cores]
