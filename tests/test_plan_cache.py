"""The session's plan cache (:mod:`privplan.session.plan_cache`) changes nothing but time.

Oracle: every query of ``sql_examples/``, asked twice in one session (the second pass reuses
the cached plans), with the same seeded noise in a session whose cache holds nothing: the same
frames (values, dtypes, names), intervals, accuracy, explanations, errors and ledger entries.
Then: what the cache is keyed by (query text, budget keywords with their types, the policy, the
engine's state) and what it never holds (plans that read public rows or define views, plans
that failed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from test_sql_examples import fmt  # the example-file format shared with the runner

import privplan as pp
import privplan.planning.plan as plan_module
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.engines.file_catalog import file_catalog
from privplan.errors import PrivplanError
from privplan.session.plan_cache import PlanCache, frozen_value
from privplan.session.shared_plans import SharedPlans
from privplan.testing import noise_disabled, seeded_noise

GROUPED = ("SELECT hospital, COUNT(*) AS n, SUM(cost) AS s, AVG(cost) AS c FROM visits "
           "GROUP BY hospital")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("plan_cache") / "demo.duckdb", rows=2_000)


def _entries(sess: Any) -> list[tuple[Any, ...]]:
    return [(e.query_id, e.sql, e.mechanisms, e.marginal, e.total_after)
            for e in sess.ledger.entries()]


def _answer_twice(example: Any, db: Path, *, cache: bool, prepare: bool) -> tuple[list[Any], Any]:
    sess = fmt.open_session(example, db)
    sess.prepare = prepare
    if not cache:
        sess._plans = PlanCache(0)  # holds nothing: every query is planned afresh
        sess._shared = SharedPlans(0)  # (nor does the process's)
    out: list[Any] = []
    try:
        for rep in range(2):
            for q in example.queries:
                kwargs = q.budget_kwargs()
                try:
                    explained = sess.explain(q.sql, **kwargs)
                    with seeded_noise(1000 + q.index + 100 * rep):
                        res = sess.sql(q.sql, **kwargs)
                    out.append((explained, res))
                except PrivplanError as err:
                    out.append((type(err), str(err)))
        return out, _entries(sess)
    finally:
        sess.close()


@pytest.mark.parametrize("prepare", [False, True], ids=["default", "prepared"])
@pytest.mark.parametrize("path", fmt.example_files(), ids=lambda p: p.name)
def test_cached_plans_answer_like_fresh_ones(path: Path, prepare: bool, demo_db: Path) -> None:
    example = fmt.parse_file(path)
    cached, cached_ledger = _answer_twice(example, demo_db, cache=True, prepare=prepare)
    fresh, fresh_ledger = _answer_twice(example, demo_db, cache=False, prepare=prepare)
    assert cached_ledger == fresh_ledger
    for a, b in zip(cached, fresh, strict=True):
        if not isinstance(a[1], pp.Result) or not isinstance(b[1], pp.Result):
            assert a == b
            continue
        assert a[0] == b[0]  # explain
        ra, rb = a[1], b[1]
        pd.testing.assert_frame_equal(ra.df, rb.df, check_exact=True, obj=path.name)
        pd.testing.assert_frame_equal(ra.intervals, rb.intervals, check_exact=True)
        assert ra.accuracy == rb.accuracy
        assert ra.explanation == rb.explanation
        assert ra.cost == rb.cost and ra.query_cost == rb.query_cost


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The query texts the session plans from scratch (build_plan calls)."""
    built: list[str] = []
    real = plan_module.build_plan

    def build(sql: str, *args: Any, **kwargs: Any) -> Any:
        built.append(sql)
        return real(sql, *args, **kwargs)

    monkeypatch.setattr(plan_module, "build_plan", build)
    return built


def _session(db: Path, **kwargs: Any) -> Any:
    return pp.connect(db, policy=demo_policy_path(), budget=pp.PureDP(1e6), **kwargs)


def test_a_repeated_query_is_planned_once_and_charged_every_time(
        demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = _counting(monkeypatch)
    # (prepare=False: a default session makes its copy on the second query, and the plans
    # over the copy are new ones: session/copies.py)
    sess = _session(demo_db, prepare=False)
    with noise_disabled():
        first = sess.sql(GROUPED, epsilon=1)
        second = sess.sql(GROUPED, epsilon=1)
        explained = sess.explain(GROUPED, epsilon=1)
    assert len(built) == 1
    pd.testing.assert_frame_equal(first.df, second.df, check_exact=True)
    entries = sess.ledger.entries()
    assert [e.query_id for e in entries] == ["q1", "q2"]
    # the mechanisms are named after the query that charged them, as a fresh plan's are
    assert all(m.id.startswith("q2.") for m in entries[1].mechanisms)
    assert all(m.id.startswith("q3.") for m in explained.mechanisms)
    assert sess.spent() == pp.PureDP(2)
    sess.close()


def test_the_key_is_the_text_and_every_budget_keyword_with_its_type(
        demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = _counting(monkeypatch)
    sess = _session(demo_db)
    sess.explain(GROUPED, epsilon=1)
    sess.explain(GROUPED, epsilon=1)
    sess.explain(GROUPED, epsilon=1.0)  # equal, but of another type: planned again
    sess.explain(GROUPED, epsilon=2)
    sess.explain(GROUPED, epsilon=2, clamps={"cost": (0, 100)})
    sess.explain(GROUPED, epsilon=2, clamps={"cost": (0, 100)})
    sess.explain(GROUPED, epsilon=2, clamps={"cost": (0, 200)})
    sess.explain(GROUPED + " ", epsilon=2)
    assert len(built) == 6
    sess.close()


def test_register_a_new_policy_and_a_session_copy_each_invalidate(
        demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = _counting(monkeypatch)
    sess = _session(demo_db, prepare=True)
    sql = "SELECT COUNT(*) AS n FROM visits"
    with noise_disabled():
        n = sess.sql(sql, epsilon=1).df["n"].iloc[0]  # planned; the copy is made after
        sess.sql(sql, epsilon=1)  # planned again: it now reads the copy
        sess.sql(sql, epsilon=1)
        assert len(built) == 2
        sess.register("visits", pd.DataFrame({"visit_id": [1, 2], "patient_id": [1, 2],
                                              "hospital": ["A", "B"],
                                              "department": ["oncology"] * 2,
                                              "visit_date": pd.to_datetime(["2023-01-01"] * 2),
                                              "age": [30, 40], "sex": ["F", "M"],
                                              "cost": [1.0, 2.0], "length_of_stay": [1, 2],
                                              "insured": [True, False]}))
        assert sess.sql(sql, epsilon=1).df["n"].iloc[0] == 2 != n
        assert len(built) == 3
        sess.policy = pp.Policy.from_yaml(demo_policy_path())  # equal, but another object
        sess.explain(sql, epsilon=1)
        assert len(built) == 4
    sess.close()


def test_a_refused_query_is_refused_every_time(demo_db: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    built = _counting(monkeypatch)
    sess = _session(demo_db)
    for _ in range(2):
        with pytest.raises(pp.PolicyError, match="needs bounds"):
            sess.sql("SELECT SUM(visit_id) FROM visits", epsilon=1)
    assert len(built) == 2 and sess.ledger.entries() == ()
    sess.close()


def test_plans_that_read_public_rows_or_define_views_are_not_cached(demo_db: Path) -> None:
    sess = _session(demo_db)
    joined = ("SELECT h.region, COUNT(*) AS n FROM visits v JOIN hospitals h "
              "ON v.hospital = h.hospital GROUP BY h.region")
    for _ in range(2):
        sess.explain(joined, epsilon=1)  # (its public key's stability is read from the rows)
    assert len(sess._plans) == 0
    sess.explain(GROUPED, epsilon=1)
    assert len(sess._plans) == 1
    sess.close()
    example = fmt.parse_file(next(p for p in fmt.example_files() if p.name.startswith("25_")))
    sess = fmt.open_session(example, demo_db)
    per_unit = ("SELECT COUNT(*) AS patients FROM (SELECT patient_id FROM visits "
                "GROUP BY patient_id) AS p")
    for _ in range(2):
        sess.explain(per_unit, epsilon=1)  # (defines the derived view in the engine)
    assert len(sess._plans) == 0
    sess.close()


def test_a_rebuilt_accountant_still_composes_a_cached_plan(demo_db: Path,
                                                           tmp_path: Path) -> None:
    sess = _session(demo_db, ledger=tmp_path / "ledger.sqlite")
    with noise_disabled():
        sess.sql(GROUPED, epsilon=1)
        sess.ledger._forget()  # as after a failed durable write: rebuilt from the file
        sess.sql(GROUPED, epsilon=1)
    assert sess.account._accountant is not None and sess.spent() == pp.PureDP(2)
    sess.close()


def test_a_file_ledger_names_cached_mechanisms_by_its_own_query_ids(
        demo_db: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    for _ in range(2):  # two sessions on one ledger: the second continues its numbering
        sess = _session(demo_db, ledger=ledger)
        with noise_disabled():
            sess.sql(GROUPED, epsilon=1)
            sess.sql(GROUPED, epsilon=1)
        sess.close()
    sess = _session(demo_db, ledger=ledger)
    ids = [e.query_id for e in sess.ledger.entries()]
    assert ids == ["q1", "q2", "q3", "q4"]
    for e in sess.ledger.entries():
        assert all(m.id.startswith(e.query_id + ".") for m in e.mechanisms)
    sess.close()


def test_frozen_values_tell_types_apart_and_refuse_what_they_cannot_hash() -> None:
    assert frozen_value(1) != frozen_value(1.0) != frozen_value(True)
    assert frozen_value({"a": (0, 1)}) == frozen_value({"a": (0, 1)})
    assert frozen_value({"a": (0, 1)}) != frozen_value({"a": [0, 1]})
    assert frozen_value({"a": {1, 2}}) is None  # (a set: unhashable, never cached)
    assert PlanCache.key("q", {"epsilon": object()}, policy=None, kind=pp.PureDP,
                         prepare=False, generation=0) is not None
    assert PlanCache.key("q", {"clamps": {"c": {0}}}, policy=None, kind=pp.PureDP,
                         prepare=False, generation=0) is None


class _Counting:
    """A DuckDB connection that counts the statements bound (``sql``) and described."""

    def __init__(self, con: Any) -> None:
        self._con, self.bound, self.described = con, 0, 0

    def sql(self, text: str, *args: Any) -> Any:
        self.bound += 1
        return self._con.sql(text, *args)

    def execute(self, text: str, *args: Any) -> Any:
        self.described += text.startswith("DESCRIBE")
        return self._con.execute(text, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def _counted_answer(sess: Any) -> tuple[_Counting, pd.DataFrame]:
    sess.engine.con = counting = _Counting(sess.engine.con)
    with noise_disabled():
        df = sess.sql(GROUPED, epsilon=1).df
    sess.engine.con = counting._con
    return counting, df


def test_fresh_sessions_on_a_file_describe_and_bind_nothing_another_did(
        demo_db: Path, tmp_path: Path) -> None:
    """A fresh session on a DuckDB file opened read only by privplan reads what an earlier
    session of the process described and bound (``file_catalog``): the same catalog, so the
    same answers. Not on a caller's connection to that very file (the caller may alter it),
    not with a table registered, and not once the file changed (another identity)."""
    file_catalog.clear()
    first, answer = _counted_answer(_session(demo_db))
    assert first.bound >= 1 and first.described >= 1
    fresh = _session(demo_db)
    again, same = _counted_answer(fresh)
    fresh.close()
    assert (again.bound, again.described) == (0, 0)
    pd.testing.assert_frame_equal(same, answer)
    con = duckdb.connect(str(demo_db), read_only=True)
    caller = pp.connect(con, policy=demo_policy_path(), budget=pp.PureDP(10))
    theirs, _ = _counted_answer(caller)
    assert theirs.bound >= 1 and theirs.described >= 1
    caller.close()
    con.close()
    registered = _session(demo_db)
    registered.register("visits", duckdb.connect(str(demo_db), read_only=True).execute(
        "SELECT * FROM visits").df())
    mine, _ = _counted_answer(registered)
    registered.close()
    assert mine.bound >= 1 and mine.described >= 1
    changed = tmp_path / "changed.duckdb"
    write_demo_database(changed, rows=2_000)
    _counted_answer(_session(changed))  # (known for the process: the file as it is now)
    rw = duckdb.connect(str(changed))
    rw.execute("ALTER TABLE visits ADD COLUMN extra INTEGER")
    rw.close()
    after, _ = _counted_answer(_session(changed))
    assert after.bound >= 1 and after.described >= 1  # (the new file: described afresh)


def test_binding_is_reused_only_while_no_one_can_change_the_catalog(demo_db: Path) -> None:
    """A cached plan's statement is bound again before every charge, except where nothing can
    have changed what it binds to: a database file the session opened read only itself (the
    file lock keeps writers out), with no table registered, in the same engine generation."""
    file_catalog.clear()  # (else another test's session on the file bound it for the process)
    sess = _session(demo_db)
    with noise_disabled():
        sess.sql(GROUPED, epsilon=1)
        bound = dict(sess.engine._bound)
        assert len(bound) == 1 and next(iter(bound))[0] == sess.engine.generation
        sess.sql(GROUPED, epsilon=1)
        assert sess.engine._bound == bound  # (read, not bound again)
        frame = duckdb.connect(str(demo_db), read_only=True).execute(
            "SELECT * FROM visits").df()
        sess.register("visits", frame)  # the caller's object: it may change in place
        sess.sql(GROUPED, epsilon=1)
        assert sess.engine._bound == bound  # nothing cached while a table is registered
    sess.close()
    con = duckdb.connect(str(demo_db), read_only=True)
    shared = pp.connect(con, policy=demo_policy_path(), budget=pp.PureDP(10))
    with noise_disabled():
        shared.sql(GROUPED, epsilon=1)
        shared.sql(GROUPED, epsilon=1)
    assert shared.engine._bound == {}  # the caller's connection: they may alter the table
    shared.close()
    con.close()
