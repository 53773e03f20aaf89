"""Per-unit pre-aggregation (``SELECT AVG(s) FROM (SELECT pid, SUM(x) AS s FROM t GROUP BY
pid)``): noise off it equals DuckDB on the bounded rows; removing any one unit moves each
mechanism's exact input by at most its sensitivity (the engine as judge); costs compose as a
table of its own; a ledger replays it; what cannot be analysed is refused and spends nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.errors import PolicyError, UnsupportedQueryError
from privplan.testing import noise_disabled

K = 3


def _policy(neighbourhood: str = "add_remove") -> pp.Policy:
    return pp.Policy.from_dict({"tables": {"t": {
        "privacy_unit": "pid", "max_rows_per_unit": K, "neighbourhood": neighbourhood,
        "columns": {
            "pid": {"type": "int"},
            "sex": {"type": "str", "public_values": ["F", "M"], "unit_level": True},
            "x": {"type": "int", "lower": 0, "upper": 10},
            "y": {"type": "float", "lower": -1, "upper": 1},
            "grp": {"type": "str", "public_values": ["a", "b"]},
            "free": {"type": "int"},
        }}}})


def _data(units: int = 40, seed: int = 3) -> pd.DataFrame:
    """At most K rows per unit, values inside the bounds: bounding and clamping change
    nothing, so plain DuckDB over the same rows is the exact answer."""
    rng = np.random.default_rng(seed)
    rows = []
    for pid in range(units):
        sex = rng.choice(["F", "M"])
        for _ in range(int(rng.integers(1, K + 1))):
            rows.append({"pid": pid, "sex": sex, "x": int(rng.integers(0, 11)),
                         "y": float(rng.uniform(-1, 1)), "grp": rng.choice(["a", "b"]),
                         "free": int(rng.integers(0, 5))})
    return pd.DataFrame(rows)


def _session(frame: pd.DataFrame, ledger: Path | None = None,
             policy: pp.Policy | None = None) -> pp.Session:
    sess = pp.connect(policy=policy or _policy(), budget=pp.PureDP(100), ledger=ledger)
    sess.register("t", frame)
    return sess


QUERIES = [
    "SELECT AVG(s) AS a, COUNT(*) AS n FROM (SELECT pid, SUM(x) AS s FROM t GROUP BY pid) AS u",
    "SELECT sex, SUM(s) AS total FROM (SELECT pid, sex, SUM(x) AS s FROM t GROUP BY pid, sex) "
    "AS u GROUP BY sex ORDER BY sex",
    "SELECT COUNT(*) AS busy FROM (SELECT pid, COUNT(*) AS visits FROM t WHERE grp = 'a' "
    "GROUP BY pid) AS u WHERE visits >= 2",
    "SELECT SUM(m) AS s, SUM(lo) AS l FROM (SELECT pid, MAX(x) AS m, MIN(y) AS lo FROM t "
    "GROUP BY pid) AS u",
]


@pytest.mark.parametrize("sql", QUERIES + [
    "SELECT grp, AVG(a) AS a, SUM(s) AS total, SUM(c) AS n FROM (SELECT pid, grp, AVG(x) AS a, "
    "SUM(x) AS s, COUNT(*) AS c FROM t GROUP BY pid, grp) AS u GROUP BY grp ORDER BY grp",
    "SELECT COUNT(*) AS pairs, SUM(s) AS total FROM (SELECT pid, grp, SUM(x) AS s FROM t "
    "WHERE x > 2 GROUP BY pid, grp) AS u",
])
def test_noise_off_equals_duckdb_on_the_same_rows(sql: str) -> None:
    frame = _data()
    with _session(frame) as sess, noise_disabled():
        got = sess.sql(sql, epsilon=1).df
    con = duckdb.connect()
    con.register("t", frame)
    want = con.execute(sql).df()
    assert list(got.columns) == list(want.columns)
    for col in want.columns:
        if not pd.api.types.is_numeric_dtype(want[col]):
            assert got[col].tolist() == want[col].tolist()
        else:
            np.testing.assert_allclose(got[col].astype(float), want[col].astype(float),
                                       atol=2e-3, err_msg=col)  # (float sums on their grid)


def test_a_unit_with_more_rows_counts_only_its_bounded_rows() -> None:
    frame = pd.concat([_data(units=5), pd.DataFrame(
        {"pid": 99, "sex": "F", "x": 10, "y": 0.0, "grp": "a", "free": 0}, index=range(8))])
    with _session(frame) as sess, noise_disabled():
        got = sess.sql("SELECT SUM(s) AS s FROM (SELECT pid, SUM(x) AS s FROM t GROUP BY pid) "
                       "AS u WHERE s >= 30", epsilon=1).df
    assert got["s"].tolist() == [30]  # unit 99: K rows of 10, not 8


@pytest.mark.parametrize("sql", QUERIES[:3])
def test_removing_any_unit_moves_each_input_by_at_most_its_sensitivity(sql: str) -> None:
    frame = _data(units=25, seed=8)
    with _session(frame) as sess:
        plan = sess.explain(sql, epsilon=1)
        with noise_disabled():
            full = sess.sql(sql, epsilon=1).df
    sens = {m.label: m.sensitivity_in_units for m in plan.mechanisms}
    worst: dict[str, float] = {}
    for pid in frame["pid"].unique():
        with _session(frame[frame["pid"] != pid]) as sess, noise_disabled():
            less = sess.sql(sql, epsilon=1).df
        for col in full.columns:
            if pd.api.types.is_numeric_dtype(full[col]) and col != "a":  # (AVG: not an input)
                moved = float(np.max(np.abs(full[col].astype(float) - less[col].astype(float))))
                worst[col] = max(worst.get(col, 0.0), moved)
    assert worst and all(v <= max(sens.values()) + 1e-9 for v in worst.values()), (worst, sens)
    assert max(worst.values()) > 0


def test_costs_compose_as_a_table_of_its_own(tmp_path: Path) -> None:
    frame = _data()
    ledger = tmp_path / "l.sqlite"
    inner = "(SELECT pid, SUM(x) AS s FROM t GROUP BY pid) AS u"
    with _session(frame, ledger) as sess:
        plan = sess.explain(f"SELECT COUNT(*) AS n FROM {inner}", epsilon=1)
        assert plan.sql == f"SELECT COUNT(*) AS n FROM {inner}"  # as written
        assert plan.mechanisms[0].sensitivity == 1  # one derived row per unit
        assert plan.mechanisms[0].noise == "discrete Laplace, scale 1"
        assert sess.sql(f"SELECT COUNT(*) AS n FROM {inner} WHERE s < 10",
                        epsilon=1).cost == pp.PureDP(1)
        # the same derived table, a disjoint outer WHERE: parallel composition
        assert sess.sql(f"SELECT COUNT(*) AS n FROM {inner} WHERE s >= 10",
                        epsilon=1).cost == pp.PureDP(0)
        # the base table: a unit is in both tables, so the costs add
        assert sess.sql("SELECT COUNT(*) FROM t", epsilon=1).cost == pp.PureDP(1)
        assert sess.spent() == pp.PureDP(2)
    # another session replays the ledger: same total, and the derived table is known again
    with _session(frame, ledger) as again:
        assert again.spent() == pp.PureDP(2)
        assert again.sql(f"SELECT SUM(s) AS s FROM {inner} WHERE s >= 10",
                         epsilon=1).cost == pp.PureDP(1)  # overlaps the s >= 10 count
        assert again.spent() == pp.PureDP(3)
    rows = sqlite3.connect(ledger).execute("SELECT sql FROM entries ORDER BY seq").fetchall()
    assert rows[0][0].startswith("SELECT COUNT(*) AS n FROM (SELECT pid")  # as written


@pytest.mark.parametrize("sql, error, fragment", [
    ("SELECT AVG(s) FROM (SELECT pid, lower(grp) AS g, SUM(x) AS s FROM t "
     "GROUP BY pid, lower(grp)) AS u", UnsupportedQueryError, "plain columns"),
    ("SELECT AVG(s) FROM (SELECT pid, SUM(x) AS s FROM t GROUP BY pid HAVING SUM(x) > 1) AS u",
     UnsupportedQueryError, "HAVING"),
    ("SELECT AVG(s) FROM (SELECT pid, SUM(x) FROM t GROUP BY pid) AS u",
     UnsupportedQueryError, "named with AS"),
    ("SELECT AVG(s) FROM (SELECT pid, SUM(free) AS s FROM t GROUP BY pid) AS u",
     UnsupportedQueryError, "bounds"),
    ("SELECT AVG(s) FROM (SELECT pid, SUM(x + 1) AS s FROM t GROUP BY pid) AS u",
     UnsupportedQueryError, "one column"),
    ("SELECT AVG(s) FROM (SELECT pid, SUM(x) AS s FROM t WHERE random() < 0.5 GROUP BY pid) "
     "AS u", UnsupportedQueryError, "non-deterministic"),
    ("SELECT AVG(s) FROM (SELECT pid, SUM(x) AS s FROM t WHERE nope > 1 GROUP BY pid) AS u",
     UnsupportedQueryError, "nope"),
    ("SELECT pid, s FROM (SELECT pid, SUM(x) AS s FROM t GROUP BY pid) AS u",
     UnsupportedQueryError, "releases no aggregate"),
])
def test_refusals_say_why_and_spend_nothing(sql: str, error: type, fragment: str,
                                            tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    with _session(_data(), ledger) as sess:
        with pytest.raises(error, match=fragment):
            sess.sql(sql, epsilon=1)
        with pytest.raises(error, match=fragment):
            sess.explain(sql, epsilon=1)
    assert sqlite3.connect(ledger).execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0


def test_replace_neighbours_are_refused() -> None:
    with _session(_data(), policy=_policy("replace")) as sess, pytest.raises(
            UnsupportedQueryError, match="replace"):
        sess.sql("SELECT AVG(s) FROM (SELECT pid, SUM(x) AS s FROM t GROUP BY pid) AS u",
                 epsilon=1)
    assert PolicyError  # (imported for the refusal table's classes)


def test_ledger_verify_recomputes_a_total_with_derived_tables(tmp_path: Path) -> None:
    from privplan.ledger.verify import verify_ledger

    ledger = tmp_path / "l.sqlite"
    with _session(_data(), ledger) as sess:
        sess.sql("SELECT COUNT(*) AS n FROM (SELECT pid FROM t GROUP BY pid) AS u", epsilon=1)
        sess.sql("SELECT SUM(x) FROM t", epsilon=1)
    result = verify_ledger(ledger, policy=_policy())
    assert result.ok, str(result)
    assert "ε=2" in str(result)


# ------------------------------------------------------- one derived row per unit and group



def _groups_policy(groups: int) -> pp.Policy:
    raw = _policy().to_dict()
    raw["tables"]["t"]["max_groups_per_unit"] = groups
    return pp.Policy.from_dict(raw)


def test_per_group_sensitivity_is_one_row_per_group_and_m_groups() -> None:
    """With max_groups_per_unit = 1 a unit keeps one (unit, group) row; grouped by grp, each
    group's count moves by at most 1 when a unit leaves (engine as judge), and explain says
    sensitivity 1; ungrouped, a unit's K = 3 derived rows may all change one count."""
    frame = _data(units=25, seed=8)
    grouped = ("SELECT grp, COUNT(*) AS n FROM (SELECT pid, grp, SUM(x) AS s FROM t "
               "GROUP BY pid, grp) AS u GROUP BY grp ORDER BY grp")
    with _session(frame, policy=_groups_policy(1)) as sess:
        plan = sess.explain(grouped, epsilon=1)
        assert [m.noise for m in plan.mechanisms] == ["discrete Laplace, scale 1"]
        with noise_disabled():
            full = sess.sql(grouped, epsilon=1).df
    assert int(full["n"].sum()) == 25  # one (unit, group) row per unit
    for pid in frame["pid"].unique():
        with _session(frame[frame["pid"] != pid], policy=_groups_policy(1)) as sess, \
                noise_disabled():
            less = sess.sql(grouped, epsilon=1).df
        assert int((full["n"] - less["n"]).abs().sum()) == 1
    with _session(frame) as sess:
        total = sess.explain("SELECT COUNT(*) AS n FROM (SELECT pid, grp, SUM(x) AS s FROM t "
                             "GROUP BY pid, grp) AS u", epsilon=1)
    # no max_groups_per_unit: a unit has up to K (unit, group) rows, all in the one count
    assert [m.noise for m in total.mechanisms] == [f"discrete Laplace, scale {K}"]


def test_per_group_tables_replay_from_the_ledger(tmp_path: Path) -> None:
    from privplan.ledger.verify import verify_ledger

    frame = _data()
    ledger = tmp_path / "l.sqlite"
    sql = ("SELECT grp, SUM(s) AS total FROM (SELECT pid, grp, SUM(x) AS s FROM t "
           "GROUP BY pid, grp) AS u GROUP BY grp")
    with _session(frame, ledger, policy=_groups_policy(2)) as sess:
        first = sess.sql(sql, epsilon=1).cost
        spent = sess.spent()
    with _session(frame, ledger, policy=_groups_policy(2)) as again:
        assert again.spent() == spent
        assert again.sql(sql, epsilon=1).cost == first
    result = verify_ledger(ledger, policy=_groups_policy(2))
    assert result.ok, str(result)
