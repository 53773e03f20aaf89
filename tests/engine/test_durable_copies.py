"""Durable copies (`privplan prepare`): a fresh session reads the bounded rows made once.

Oracles: the same query in a session without the copies (same answers with seeded noise, same
charges, same explanation), plain DuckDB over the changed file (a stale copy is ignored), and
the engine's own record of which tables it made.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

import privplan as pp
from privplan.cli import main as cli_main
from privplan.demo.data import write_demo_database
from privplan.engines.durable_copies import copies_path
from privplan.session.prepare import prepare_copies
from privplan.testing import noise_disabled, seeded_noise

POLICY = Path(pp.__file__).parent / "demo" / "policy_patients.yaml"
QUERIES = [
    "SELECT hospital, COUNT(*) AS n, SUM(cost) AS s FROM visits GROUP BY hospital",
    "SELECT AVG(length_of_stay) AS a FROM visits WHERE age >= 65",
    "SELECT COUNT(DISTINCT patient_id) AS p FROM visits WHERE insured",
]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("durable") / "visits.duckdb"
    write_demo_database(db, rows=5_000)
    return db


@pytest.fixture()
def db(source: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "visits.duckdb"
    shutil.copy(source, copy)
    return copy


ROW_LEVEL = Path(pp.__file__).parent / "demo" / "policy.yaml"
ROW_QUERIES = [
    "SELECT department, COUNT(*) AS n, AVG(cost) AS c, COUNT(cost) AS k FROM visits "
    "GROUP BY department",
    "SELECT SUM(cost) FILTER (WHERE age >= 65) AS old, AVG(length_of_stay) AS los, "
    "VARIANCE(age) AS v FROM visits WHERE insured",
    "SELECT hospital, SUM(cost) AS s FROM visits WHERE cost > 100 GROUP BY hospital",
]


def _made(engine: object) -> bool:
    """Whether the session made a copy (its own, or the process's: shared_copies)."""
    return bool(engine._materialized or engine._adopted)  # type: ignore[attr-defined]


def _answers(db: Path, seed: int, policy: Path = POLICY, queries: list[str] = QUERIES
             ) -> tuple[list, list, list[str]]:
    frames, costs, noises = [], [], []
    with pp.connect(db, policy=policy, budget=pp.PureDP(100)) as sess:
        for i, sql in enumerate(queries):
            with seeded_noise(seed + i):
                res = sess.sql(sql, epsilon=1)
            frames.append(res.df.to_dict("list"))
            costs.append(res.cost)
            noises.append([m.noise for m in res.explanation.mechanisms])
        made_own = _made(sess.engine)
    return frames, costs, noises + [["made its own copy" if made_own else "read durable"]]


def test_a_fresh_session_reads_the_copies_and_answers_the_same(db: Path) -> None:
    without = _answers(db, 7)
    assert without[2][-1] == ["made its own copy"]
    assert prepare_copies(db, POLICY) == ["visits"]
    assert copies_path(db).exists()
    with_copies = _answers(db, 7)
    assert with_copies[2][-1] == ["read durable"]
    assert with_copies[:2] == without[:2]
    assert with_copies[2][:-1] == without[2][:-1]


def test_a_default_row_level_session_reads_the_grids_and_answers_the_same(db: Path) -> None:
    """Row level: a default session clamps every row in its first statement and makes its own
    copy with the SUM grids from its second query (session/copies.py: the file's rows cannot
    change while it is open); after ``prepare`` it reads the stored SUM grids instead from the
    first query, with the same answers, charges and noise, and makes no copy of its own."""
    without = _answers(db, 11, ROW_LEVEL, ROW_QUERIES)
    assert without[2][-1] == ["made its own copy"]
    assert prepare_copies(db, ROW_LEVEL) == ["visits"]
    with pp.connect(db, policy=ROW_LEVEL, budget=pp.PureDP(100)) as sess:
        ran: list[str] = []
        real = sess.engine.run
        sess.engine.run = lambda st: ran.append(st) or real(st)  # type: ignore[method-assign]
        sess.sql(ROW_QUERIES[0], epsilon=1)
        alias = sess.engine.durable[0]
    assert f"FROM {alias}." in ran[0] and "SUM(__grid_cost)" in ran[0]
    assert "CASE" not in ran[0]  # (no row clamped again)
    with_copies = _answers(db, 11, ROW_LEVEL, ROW_QUERIES)
    assert with_copies[2][-1] == ["read durable"]
    assert with_copies[:2] == without[:2] and with_copies[2][:-1] == without[2][:-1]


def test_noise_free_answers_match_the_bounding_done_in_session(db: Path) -> None:
    with noise_disabled(), pp.connect(db, policy=POLICY, budget=pp.PureDP(100)) as sess:
        expected = [sess.sql(q, epsilon=1).df.to_dict("list") for q in QUERIES]
    prepare_copies(db, POLICY)
    with noise_disabled(), pp.connect(db, policy=POLICY, budget=pp.PureDP(100)) as sess:
        got = [sess.sql(q, epsilon=1).df.to_dict("list") for q in QUERIES]
        assert sess.engine.durable is not None and not _made(sess.engine)
    assert got == expected


def test_a_changed_database_makes_the_copies_stale(db: Path) -> None:
    prepare_copies(db, POLICY)
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM visits WHERE hospital = 'A'")
    con.close()
    with noise_disabled(), pp.connect(db, policy=POLICY, budget=pp.PureDP(100)) as sess:
        assert sess.engine.durable is None  # ignored: the file changed since prepare
        query = "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital"
        res = sess.sql(query, epsilon=1)  # (the first query reads the bounded rows inline)
        assert not _made(sess.engine)
        again = sess.sql(query, epsilon=1)
        assert _made(sess.engine)  # bounded afresh, from the data as it is now
    assert again.df["hospital"].tolist() == res.df["hospital"].tolist()
    counts = dict(zip(res.df["hospital"], res.df["n"], strict=True))
    assert counts.get("A", 0) == 0
    prepare_copies(db, POLICY)  # made again: used again
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(100)) as sess:
        assert sess.engine.durable is not None


def test_another_policy_does_not_read_copies_made_for_this_one(db: Path, tmp_path: Path) -> None:
    prepare_copies(db, POLICY)
    other = tmp_path / "policy.yaml"
    other.write_text(POLICY.read_text().replace("max_rows_per_unit: 10", "max_rows_per_unit: 3"))
    assert other.read_text() != POLICY.read_text()
    with pp.connect(db, policy=other, budget=pp.PureDP(100)) as sess:
        sess.sql(QUERIES[0], epsilon=1)
        sess.sql(QUERIES[0], epsilon=1)  # (a user-level copy is made by the second query)
        assert _made(sess.engine)  # its statement differs: its own copy


def test_a_registered_table_turns_the_copies_off(db: Path) -> None:
    prepare_copies(db, POLICY)
    con = duckdb.connect(str(db), read_only=True)
    frame = con.execute("SELECT * FROM visits WHERE age < 40").df()
    con.close()
    with noise_disabled(), pp.connect(db, policy=POLICY, budget=pp.PureDP(100)) as sess:
        sess.register("visits", frame)  # shadows the file's table
        res = sess.sql("SELECT COUNT(*) AS n FROM visits WHERE age >= 40", epsilon=1)
    assert int(res.df["n"].iloc[0]) == 0


def test_copies_are_not_a_table_analysts_can_query(db: Path) -> None:
    prepare_copies(db, POLICY)
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(100)) as sess:
        alias = sess.engine.durable[0]
        name = next(iter(sess.engine.durable[1]))
        with pytest.raises(pp.PrivplanError):
            sess.sql(f"SELECT COUNT(*) FROM {alias}.{name}", epsilon=1)
        assert sess.spent() == pp.PureDP(0)


def test_a_corrupt_copies_file_is_ignored(db: Path) -> None:
    copies_path(db).write_bytes(b"not a database")
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(100)) as sess:
        assert sess.engine.durable is None
        sess.sql(QUERIES[0], epsilon=1)


def test_a_failed_write_is_a_clear_error_and_leaves_nothing(db: Path) -> None:
    copies_path(db).mkdir()  # the copies' place is taken: the final rename fails
    with pytest.raises(pp.PrivplanError, match="cannot put the copies"):
        prepare_copies(db, POLICY)
    assert sorted(p.name for p in db.parent.iterdir()) == sorted(
        [db.name, copies_path(db).name])  # no temporary file left behind
    with pp.connect(db, policy=POLICY, budget=pp.PureDP(100)) as sess:
        assert sess.engine.durable is None  # (a folder is no copies file)
        sess.sql(QUERIES[0], epsilon=1)


def test_cli_prepare(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["prepare", str(db), "--policy", str(POLICY)]) == 0
    assert "made the copies of visits" in capsys.readouterr().out
    row_level = Path(pp.__file__).parent / "demo" / "policy.yaml"
    assert cli_main(["prepare", str(db), "--policy", str(row_level)]) == 0
    assert "made the copies of visits" in capsys.readouterr().out  # (row level: SUM grids)
    public_only = db.parent / "public.yaml"
    public_only.write_text("tables:\n  hospitals:\n    public: true\n")
    assert cli_main(["prepare", str(db), "--policy", str(public_only)]) == 0
    assert "nothing to prepare" in capsys.readouterr().out
    no_bounds = db.parent / "no_bounds.yaml"  # (row level, no grid: its copy would be the table)
    no_bounds.write_text("tables:\n  visits:\n    columns:\n      hospital: {type: str}\n")
    assert prepare_copies(db, no_bounds) == []
    assert cli_main(["prepare", str(db), "--policy", str(no_bounds)]) == 0
    assert "nothing to prepare" in capsys.readouterr().out


def test_a_closed_session_leaves_no_attachment_behind(db: Path) -> None:
    """Sessions on one file in one process share DuckDB's database instance: each detaches the
    copies it attached when it closes (a server opening a session per request would otherwise
    pile them up)."""
    prepare_copies(db, POLICY)
    keep = duckdb.connect(str(db), read_only=True)  # (holds the shared instance open)
    for _ in range(3):
        with pp.connect(db, policy=POLICY, budget=pp.PureDP(100)) as sess:
            assert sess.engine.durable is not None
            sess.sql(QUERIES[0], epsilon=1)
    names = [r[0] for r in keep.execute("SELECT database_name FROM duckdb_databases()").fetchall()]
    keep.close()
    assert not [n for n in names if n.startswith("__privplan")], names
