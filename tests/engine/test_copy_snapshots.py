"""A user-level table's shared copy outlives the DuckDB instance that made it
(``engines/copy_snapshots.py``): fresh sessions on a file, each opening and closing the file,
read the per-unit bounded rows from the process's copy instead of bounding every row again.

Oracles: the engine itself — the first fresh session's answer (the admitted inline per-unit
statement, noise off) for every later one; ``EXCEPT ALL`` between a restored copy and the
table it was made from, for every storage type; the file changed on disk is a different file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.engines import copy_snapshots
from privplan.engines import duckdb_engine as engine_module
from privplan.session.shared_plans import shared_plans
from privplan.testing import noise_disabled

POLICY = demo_policy_path().with_name("policy_patients.yaml")
SQL = ("SELECT hospital, department, COUNT(*) AS n, AVG(cost) AS c, SUM(age) AS a "
       "FROM visits WHERE insured GROUP BY hospital, department")


def _fresh(path: Path, runs: list[str], sql: str = SQL) -> tuple[pd.DataFrame, Any]:
    """One fresh session on the file (opened and closed), noise off: its answer and cost, the
    statements it ran appended to ``runs``."""
    with pp.connect(path, policy=POLICY, budget=pp.PureDP(1000)) as sess, noise_disabled():
        res = sess.sql(sql, epsilon=1)
        return res.df, res.cost


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    runs: list[str] = []
    run = engine_module.DuckDBEngine.run

    def recorded(self: Any, sql: str) -> Any:
        runs.append(sql)
        return run(self, sql)

    monkeypatch.setattr(engine_module.DuckDBEngine, "run", recorded)
    return runs


def _shared(sql: str) -> bool:
    return "__privplan_shared_" in sql


def test_fresh_sessions_read_the_process_copy_after_its_instance_ended(
        tmp_path: Path, statements: list[str]) -> None:
    path = write_demo_database(tmp_path / "d.duckdb", rows=600)
    answers = [_fresh(path, statements) for _ in range(5)]
    first, cost = answers[0]
    # the first runs the admitted inline statement; the second (the process's second query
    # over these rows) makes the shared copy and keeps it; the later ones, each on a DuckDB
    # instance of its own (the file opened afresh, every earlier session closed), read it
    assert [_shared(s) for s in statements] == [False, True, True, True, True]
    assert len(copy_snapshots.snapshots) == 1
    for df, charged in answers[1:]:
        assert df.equals(first) and charged == cost
    assert first["n"].sum() > 0
    # planned once over the copy, then shared: the last two fresh sessions planned nothing
    assert shared_plans.hits >= 3


def test_a_changed_file_is_another_file(tmp_path: Path, statements: list[str]) -> None:
    path = write_demo_database(tmp_path / "d.duckdb", rows=600)
    for _ in range(3):
        before, _ = _fresh(path, statements)
    assert _shared(statements[-1]) and len(copy_snapshots.snapshots) == 1
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO visits SELECT visit_id + 100000, 999999, 'A', 'oncology', "
                "visit_date, age, sex, cost, length_of_stay, TRUE FROM visits LIMIT 1")
    con.close()
    after, _ = _fresh(path, statements)
    assert not _shared(statements[-1])  # (the new file's rows: bounded inline again)
    got = after.set_index(["hospital", "department"])["n"]
    was = before.set_index(["hospital", "department"])["n"]
    assert got.loc[("A", "oncology")] == was.loc[("A", "oncology")] + 1
    assert got.drop(("A", "oncology")).equals(was.drop(("A", "oncology")))


def test_a_copy_over_the_memory_budget_is_not_kept(
        tmp_path: Path, statements: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_snapshots, "MAX_BYTES", 1000)
    path = write_demo_database(tmp_path / "d.duckdb", rows=600)
    answers = [_fresh(path, statements)[0] for _ in range(3)]
    assert len(copy_snapshots.snapshots) == 0
    # (each later fresh session makes the copy again: the process's second query and on)
    assert [_shared(s) for s in statements] == [False, True, True]
    assert answers[1].equals(answers[0]) and answers[2].equals(answers[0])


TYPED = [
    "i::BIGINT", "i::INTEGER", "i::TINYINT", "(i - 50)::SMALLINT", "i::UBIGINT",
    "(i::HUGEINT - 50) * 100000000000000000000", "i::UHUGEINT * 1000000000000000000000",
    "(i / 7)::DECIMAL(18,3)", "(i * 1.5)::DECIMAL(38,10)", "i / 3", "(i / 3)::FLOAT",
    ("CASE i % 4 WHEN 0 THEN 'nan'::DOUBLE WHEN 1 THEN -0.0 WHEN 2 THEN 'inf'::DOUBLE "
     "ELSE NULL END"),
    "i % 2 = 0", "DATE '2024-01-01' + i::INTEGER",
    "TIMESTAMP '2024-01-01 00:00:00.123456' + INTERVAL (i) HOUR",
    "TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL (i) MINUTE",
    "'2024-01-01'::TIMESTAMP_NS", "'2024-01-01'::TIMESTAMP_S",
    "TIME '01:02:03' + INTERVAL (i) SECOND", "INTERVAL (i) DAY",
    "chr((65 + i % 26)::INTEGER) || 'é\U0001f600'",
    "(chr((65 + i % 26)::INTEGER) || ' x') COLLATE \"binary\"", "'A' COLLATE nocase",
    "'\\xAA\\x00'::BLOB", "[i, NULL, i + 1]", "{'a': i, 'b': 'x'}", "MAP {'k': i}",
    "uuid()::VARCHAR IS NOT NULL", "gen_random_uuid() IS NULL", "NULL::INTEGER",
    "'a'::ENUM_T", "i::BIT", "i::VARINT", "[i]::INTEGER[1]", "union_value(n := i)",
]


@pytest.mark.parametrize("expression", TYPED)
def test_every_storage_type_is_restored_to_the_same_rows_or_not_kept(
        tmp_path: Path, expression: str) -> None:
    """The engine as judge: a copy kept for the process gives, restored in another DuckDB
    instance, the very rows of the table it was made from (``EXCEPT ALL`` both ways, the
    same column types); a type whose values would not survive is not kept at all."""
    path = tmp_path / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TYPE ENUM_T AS ENUM ('a', 'b')")
    con.execute(f"CREATE TABLE src AS SELECT i, {expression} AS v FROM range(100) r(i)")
    con.close()
    con = duckdb.connect(str(path), read_only=True)
    con.execute("ATTACH ':memory:' AS __privplan_shared_t1 (COMPRESS, READ_WRITE)")
    con.execute("CREATE TABLE __privplan_shared_t1.rows AS SELECT * FROM src")
    kept = copy_snapshots.keep(con, ("key", expression), "__privplan_shared_t1")
    con.close()
    if not kept:
        assert len(copy_snapshots.snapshots) == 0
        return
    con = duckdb.connect(str(path), read_only=True)
    assert copy_snapshots.restore(con, ("key", expression), "__privplan_shared_t2")
    types = [con.execute(f"DESCRIBE SELECT * FROM {t}").fetchall()
             for t in ("src", "__privplan_shared_t2.rows")]
    ((missing,),) = con.execute(
        "SELECT (SELECT count(*) FROM (SELECT * FROM src EXCEPT ALL SELECT * FROM "
        "__privplan_shared_t2.rows)) + (SELECT count(*) FROM (SELECT * FROM "
        "__privplan_shared_t2.rows EXCEPT ALL SELECT * FROM src))").fetchall()
    ready = con.execute("SELECT count(*) FROM __privplan_shared_t2.ready").fetchall()
    con.close()
    assert types[0] == types[1] and missing == 0 and ready == [(0,)]


def test_restoring_what_is_not_kept_attaches_nothing(tmp_path: Path) -> None:
    con = duckdb.connect()
    assert not copy_snapshots.restore(con, ("never", "kept"), "__privplan_shared_t3")
    assert con.execute("SELECT count(*) FROM duckdb_databases() "
                       "WHERE database_name = '__privplan_shared_t3'").fetchall() == [(0,)]


def test_a_failure_keeping_or_restoring_changes_nothing_but_time(
        tmp_path: Path, statements: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Keeping runs after a charge and restoring may: whatever goes wrong there (here an
    engine error and a MemoryError, injected) must not fail a query — the session makes the
    copy again or reads the table inline, with the same answers."""
    path = write_demo_database(tmp_path / "d.duckdb", rows=600)
    first, _ = _fresh(path, statements)

    def out_of_memory(*_: Any) -> bool:
        raise MemoryError("injected")

    monkeypatch.setattr(copy_snapshots, "_same_rows", out_of_memory)
    second, _ = _fresh(path, statements)  # (makes the copy; keeping it fails)
    assert len(copy_snapshots.snapshots) == 0 and _shared(statements[-1])
    monkeypatch.undo()
    third, _ = _fresh(path, statements)  # (makes it again, and keeps it)
    assert len(copy_snapshots.snapshots) == 1

    def engine_error(*_: Any) -> None:
        raise duckdb.IOException("injected")

    monkeypatch.setattr(copy_snapshots, "_fill", engine_error)
    fourth, _ = _fresh(path, statements)  # (restoring fails: made again, after the charge)
    assert _shared(statements[-1])
    for df in (second, third, fourth):
        assert df.equals(first)
    con = duckdb.connect(str(path), read_only=True)  # (nothing left attached anywhere)
    assert con.execute("SELECT count(*) FROM duckdb_databases() "
                       "WHERE database_name LIKE '__privplan%'").fetchall() == [(0,)]
    con.close()


def test_a_copy_left_attached_with_no_reader_never_answers(
        tmp_path: Path, statements: list[str]) -> None:
    """A copy stays attached after its last reader only if that reader's DETACH failed; a
    later session does not look for it (no reader: ~0.8 ms saved) but restoring over it fails,
    detaches it, and the session reads inline or restores afresh. Here the stale database holds
    wrong rows, on an instance a plain connection keeps alive: they never reach an answer."""
    from privplan.engines.shared_copies import registry

    path = write_demo_database(tmp_path / "d.duckdb", rows=600)
    first, _ = _fresh(path, statements)
    for _ in range(2):  # (the second makes the copy and keeps it)
        _fresh(path, statements)
    (key,) = list(copy_snapshots.snapshots._entries)
    alias = registry.alias(key)
    assert registry.users(key) == 0
    keeper = duckdb.connect(str(path), read_only=True)  # (the instance outlives the sessions)
    keeper.execute(f"ATTACH ':memory:' AS {alias} (READ_WRITE)")
    keeper.execute(f"CREATE TABLE {alias}.rows AS SELECT * FROM visits LIMIT 0")
    keeper.execute(f"CREATE TABLE {alias}.ready (x INTEGER)")
    try:
        for _ in range(2):
            df, _ = _fresh(path, statements)
            assert df.equals(first)
        assert _shared(statements[-1])
        # (the stale database was detached, the restored one released with its last reader)
        assert keeper.execute("SELECT count(*) FROM duckdb_databases() WHERE database_name "
                              "= ?", [alias]).fetchall() == [(0,)]
    finally:
        keeper.close()


def test_a_statement_over_a_copy_is_bound_once_per_process_where_the_copy_is_read(
        tmp_path: Path, statements: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Binding a text that names a shared copy (``__privplan_shared_N``) answers the same in
    every engine reading that copy (the name means one key's columns): the fresh sessions after
    the first over a restored copy bind nothing; an engine that does not read the copy named
    gets no kept answer (it binds, and fails, as before)."""
    from privplan.engines.file_catalog import file_catalog

    path = write_demo_database(tmp_path / "d.duckdb", rows=600)
    bound: list[str] = []
    bind = duckdb.DuckDBPyConnection.sql

    def recorded(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        bound.append(query)
        return bind(self, query, *args, **kwargs)

    monkeypatch.setattr(duckdb.DuckDBPyConnection, "sql", recorded)
    answers = []
    for _ in range(5):
        bound.clear()
        answers.append(_fresh(path, statements)[0])
    assert _shared(statements[-1]) and answers[-1].equals(answers[0])
    assert not any(_shared(q) for q in bound)  # (the fifth bound no statement over the copy)
    shared_text = statements[-1]
    with pp.connect(path, policy=POLICY, budget=pp.PureDP(1000)) as sess:
        engine = sess.engine
        assert not engine.shared_aliases()
        assert file_catalog.key(engine, "bind", shared_text) is None
        assert file_catalog.key(engine, "bind", "SELECT 1") is not None
        with pytest.raises(pp.errors.UnsupportedQueryError):
            engine.bind(shared_text)  # (not attached to this instance: binding fails)


def _killed_writer(path: Path, statement: str) -> None:
    """A process that commits ``statement`` to the file and is killed before any checkpoint:
    its change stays in the write-ahead log, the file itself untouched."""
    import os
    import subprocess
    import sys

    before = os.stat(path)
    code = (f"import duckdb, os\ncon = duckdb.connect({str(path)!r})\n"
            "con.execute(\"SET checkpoint_threshold = '1GB'\")\n"
            f"con.execute({statement!r})\nos._exit(0)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    after = os.stat(path)
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    assert Path(f"{path}.wal").exists()


def test_a_writer_killed_before_its_checkpoint_changes_the_file_state(
        tmp_path: Path, statements: list[str]) -> None:
    """Injected fault: rows committed by a writer killed before its checkpoint live only in the
    write-ahead log, which a read-only connection replays. The process's copy, binds and
    plans were kept for the file as it was; a session after the kill reads the new rows (the
    file's identity includes its log), and a change of schema in the log is refused before the
    charge instead of failing after it."""
    path = write_demo_database(tmp_path / "d.duckdb", rows=600)
    for _ in range(3):
        before, _ = _fresh(path, statements)
    assert _shared(statements[-1]) and len(copy_snapshots.snapshots) == 1
    _killed_writer(path, "INSERT INTO visits SELECT visit_id + 100000, 999999, 'A', "
                         "'oncology', visit_date, age, sex, cost, length_of_stay, TRUE "
                         "FROM visits LIMIT 1")
    after, _ = _fresh(path, statements)
    assert not _shared(statements[-1])  # (the new state's rows: bounded inline)
    got = after.set_index(["hospital", "department"])["n"]
    was = before.set_index(["hospital", "department"])["n"]
    assert got.loc[("A", "oncology")] == was.loc[("A", "oncology")] + 1
    _killed_writer(path, "ALTER TABLE visits RENAME COLUMN cost TO cost_usd")
    with pp.connect(path, policy=POLICY, budget=pp.PureDP(1000)) as sess:
        with pytest.raises(pp.errors.PolicyError, match="cost"):
            sess.sql(SQL, epsilon=1)
        assert sess.account.spent() == pp.PureDP(0)


def test_fresh_sessions_in_threads_restore_read_and_release_the_copy_alike(
        tmp_path: Path, statements: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Concurrent starts: threads each opening fresh sessions on the file (one DuckDB instance
    while any of them is open, a new one when all are closed), so restoring, adopting and
    detaching the process's copy interleave in every order the scheduler finds. Every answer
    is the inline one (noise off), nothing fails, and nothing is left attached."""
    import threading

    path = write_demo_database(tmp_path / "d.duckdb", rows=600)
    first, _ = _fresh(path, [])
    _fresh(path, [])  # (the process's second query: the copy made and kept)
    assert len(copy_snapshots.snapshots) == 1
    answers: list[pd.DataFrame] = []
    errors: list[BaseException] = []
    restored: list[bool] = []
    restore = copy_snapshots.restore

    def counted(*args: Any) -> bool:
        restored.append(restore(*args))
        return restored[-1]

    monkeypatch.setattr(copy_snapshots, "restore", counted)

    def worker() -> None:
        for _ in range(6):
            try:
                answers.append(_fresh(path, [])[0])
            except BaseException as err:  # noqa: BLE001 - reported below
                errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]
    assert len(answers) == 24 and all(df.equals(first) for df in answers)
    # (the threads restored the copy, and read it: every statement after the first two)
    assert any(restored) and all(_shared(s) for s in statements[2:])
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM duckdb_databases() "
                           "WHERE database_name LIKE '__privplan%'").fetchall() == [(0,)]
    finally:
        con.close()


def test_the_kept_copies_are_bounded_by_bytes_least_recently_used_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_snapshots, "MAX_BYTES", 100)
    kept = copy_snapshots._Snapshots()
    snap = {name: copy_snapshots._Snapshot("(x INTEGER);", None, 40) for name in "abc"}
    kept.put("a", snap["a"])
    kept.put("b", snap["b"])
    assert kept.get("a") is snap["a"]  # (a used last: b is the oldest now)
    kept.put("c", snap["c"])  # (120 bytes: one must go)
    assert kept.get("b") is None and kept.get("a") is snap["a"] and kept.get("c") is snap["c"]
    assert len(kept) == 2
