"""Joins of a private table with public tables: exact results without noise, regions mapped
through the public table, stability checks, and refusals."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.testing import noise_disabled


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_demo_database(tmp_path_factory.mktemp("joins") / "d.duckdb", rows=5_000)
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE staff AS SELECT * FROM (VALUES ('A', 'x'), ('A', 'y'), ('B', 'z')) "
                "AS t(hospital, name)")
    con.close()
    return path


def _session(db: Path, budget: object = None) -> pp.Session:
    d = pp.Policy.from_yaml(demo_policy_path()).to_dict()
    d["tables"]["staff"] = {"public": True}
    return pp.connect(db, policy=pp.Policy.from_dict(d), budget=budget or pp.PureDP(10))


ORACLE_CASES = [
    "SELECT h.region, COUNT(*) AS n FROM visits v JOIN hospitals h ON v.hospital = h.hospital "
    "GROUP BY h.region ORDER BY h.region",
    "SELECT h.region, SUM(v.length_of_stay) AS s FROM visits v JOIN hospitals h "
    "ON v.hospital = h.hospital WHERE h.beds > 200 AND v.age < 40 GROUP BY h.region "
    "ORDER BY h.region",
    "SELECT COUNT(*) AS n FROM visits JOIN hospitals USING (hospital) WHERE region = 'North'",
    "SELECT h.region, COUNT(*) AS n FROM visits v LEFT JOIN hospitals h "
    "ON v.hospital = h.hospital GROUP BY h.region ORDER BY h.region",
]


@pytest.mark.parametrize("sql", ORACLE_CASES)
def test_noise_off_equals_plain_sql(db: Path, sql: str) -> None:
    with _session(db) as s, noise_disabled():
        got = s.sql(sql, epsilon=1).df
    con = duckdb.connect(str(db), read_only=True)
    want = con.execute(sql.replace("v.length_of_stay", "LEAST(v.length_of_stay, 30)")).df()
    con.close()
    # public groups with no rows are released as (noisy) zeros; plain SQL omits them
    got = got[got.iloc[:, -1] != 0].reset_index(drop=True) if len(got) != len(want) else got
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_public_predicates_become_private_regions(db: Path) -> None:
    with _session(db) as s:
        q = ("SELECT COUNT(*) FROM visits v JOIN hospitals h ON v.hospital = h.hospital "
             "WHERE h.region = '{}'")
        assert s.sql(q.format("North"), epsilon=1).cost == pp.PureDP(1)
        plan = s.explain(q.format("South"), epsilon=1)
        assert plan.mechanisms[0].region == "hospital = 'B'"
        assert s.sql(q.format("South"), epsilon=1).cost == pp.PureDP(0)  # disjoint: A vs B
        # a public predicate the analyzer cannot map (LEFT JOIN: NULLs) stays conservative
        left = s.explain("SELECT COUNT(*) FROM visits v LEFT JOIN hospitals h "
                         "ON v.hospital = h.hospital WHERE h.region = 'East'", epsilon=1)
        assert left.marginal == pp.PureDP(1)


def test_group_by_a_public_column_uses_the_public_domain(db: Path) -> None:
    with _session(db) as s, noise_disabled():
        df = s.sql("SELECT h.region, COUNT(*) AS n FROM visits v JOIN hospitals h "
                   "ON v.hospital = h.hospital WHERE v.hospital = 'A' GROUP BY h.region "
                   "ORDER BY h.region", epsilon=1).df
    assert df["region"].tolist() == ["East", "North", "South", "West"]  # all public keys
    assert (df.set_index("region")["n"].drop("North") == 0).all()


def test_keys_from_one_public_table_are_its_rows_not_their_cross_product(db: Path) -> None:
    """GROUP BY two columns of one public table releases the table's (distinct) rows of them,
    zero-filled, as DuckDB's plain join gives where rows exist: not every region with every
    hospital."""
    sql = ("SELECT h.region, h.hospital, COUNT(*) AS n FROM visits v JOIN hospitals h "
           "ON v.hospital = h.hospital GROUP BY h.region, h.hospital ORDER BY h.region, "
           "h.hospital")
    con = duckdb.connect(str(db), read_only=True)
    pairs = con.execute("SELECT DISTINCT region, hospital FROM hospitals "
                        "ORDER BY region, hospital").fetchall()
    plain = {(r, h): n for r, h, n in con.execute(sql).fetchall()}
    con.close()
    with _session(db) as s, noise_disabled():
        got = s.sql(sql, epsilon=1).df
        keys_only = s.sql("SELECT h.region, h.hospital FROM visits v JOIN hospitals h "
                          "ON v.hospital = h.hospital GROUP BY h.region, h.hospital",
                          epsilon=1).df
    assert list(zip(got["region"], got["hospital"])) == pairs
    assert got["n"].tolist() == [plain.get(p, 0) for p in pairs]
    assert sorted(zip(keys_only["region"], keys_only["hospital"])) == pairs


REFUSED = [
    ("SELECT COUNT(*) FROM visits v JOIN staff s ON v.hospital = s.hospital",
     pp.UnsupportedQueryError, "not unique"),
    ("SELECT SUM(h.beds) FROM visits v JOIN hospitals h ON v.hospital = h.hospital",
     pp.UnsupportedQueryError, "public table's column"),
    ("SELECT COUNT(*) FROM visits v JOIN hospitals h ON v.hospital <> h.hospital",
     pp.UnsupportedQueryError, "JOIN condition"),
    ("SELECT COUNT(*) FROM visits v JOIN hospitals h ON v.hospital = h.hospital "
     "GROUP BY hospital", pp.UnsupportedQueryError, "ambiguous column"),
    ("SELECT COUNT(*) FROM visits a JOIN visits b ON a.visit_id = b.visit_id",
     pp.UnsupportedQueryError, "JOIN of private tables"),
    ("SELECT COUNT(*) FROM visits v RIGHT JOIN hospitals h ON v.hospital = h.hospital",
     pp.UnsupportedQueryError, "RIGHT"),
    ("SELECT COUNT(*) FROM visits v CROSS JOIN hospitals h", pp.UnsupportedQueryError, "JOIN"),
]


@pytest.mark.parametrize("sql,error,fragment", REFUSED)
def test_refused_joins(db: Path, sql: str, error: type, fragment: str) -> None:
    with _session(db) as s:
        with pytest.raises(error, match=fragment):
            s.sql(sql, epsilon=1)
        assert s.spent() == pp.PureDP(0)


# ---------------------------------------------------------------- two private tables, one unit


@pytest.fixture(scope="module")
def unit_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pp.Policy]:
    path = write_demo_database(tmp_path_factory.mktemp("pj") / "d.duckdb", rows=3_000)
    con = duckdb.connect(str(path))
    # patients: one row per patient, plus a duplicate row for some (data breaking the policy)
    con.execute("CREATE TABLE patients AS SELECT patient_id, any_value(age) AS age, "
                "CASE WHEN patient_id % 3 = 0 THEN 'north' ELSE 'south' END AS area "
                "FROM visits GROUP BY patient_id "
                "UNION ALL SELECT patient_id, 1, 'north' FROM visits WHERE patient_id % 50 = 1")
    con.close()
    d = pp.Policy.from_yaml(demo_policy_path().parent / "policy_patients.yaml").to_dict()
    d["tables"]["patients"] = {
        "privacy_unit": "patient_id", "max_rows_per_unit": 1,
        "columns": {"patient_id": {"type": "int"},
                    "age": {"type": "int", "lower": 0, "upper": 100},
                    "area": {"type": "str", "public_values": ["north", "south"]}}}
    return path, pp.Policy.from_dict(d)


def test_private_join_on_the_unit_bounds_after_the_join(unit_db) -> None:
    path, policy = unit_db
    with pp.connect(path, policy=policy, budget=pp.PureDP(10)) as s, noise_disabled():
        res = s.sql("SELECT p.area, COUNT(*) AS n FROM visits v JOIN patients p "
                    "ON v.patient_id = p.patient_id GROUP BY p.area ORDER BY p.area", epsilon=1)
        assert list(res.df.columns) == ["area", "n"]
        # bounding after the join: at most k_visits * k_patients = 10 joined rows per patient,
        # each moving a count by 1: one-row cost ε/10, noise scale 10
        assert res.explanation.mechanisms[0].sensitivity == 1
        assert res.explanation.mechanisms[0].cost == pp.PureDP("1/10")
        assert res.explanation.mechanisms[0].noise == "discrete Laplace, scale 10"
        assert res.explanation.mechanisms[0].partition == "patients.area"
        con = duckdb.connect(str(path), read_only=True)
        per_patient = con.execute(
            "SELECT v.patient_id, COUNT(*) FROM visits v JOIN patients p "
            "ON v.patient_id = p.patient_id GROUP BY 1").fetchall()
        con.close()
        assert res.df["n"].sum() == sum(min(c, 10) for _, c in per_patient)


def test_private_join_columns_of_a_one_row_table_split_units(unit_db) -> None:
    """patients has one row per unit, so its columns are unit level in the join: disjoint
    filters on them compose in parallel, and GROUP BY area costs one group."""
    path, policy = unit_db
    with pp.connect(path, policy=policy, budget=pp.PureDP(10)) as s:
        q = ("SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
             "WHERE p.area = '{}'")
        assert s.sql(q.format("north"), epsilon=1).cost == pp.PureDP(1)
        assert s.sql(q.format("south"), epsilon=1).cost == pp.PureDP(0)
        plan = s.explain("SELECT p.area, COUNT(*) FROM visits v JOIN patients p "
                         "ON v.patient_id = p.patient_id GROUP BY p.area", epsilon=1)
        # one row costs ε/10 (10 joined rows per unit), all of them in the unit's one group
        assert plan.mechanisms[0].cost == pp.PureDP("1/10")
        assert plan.mechanisms[0].noise == "discrete Laplace, scale 10"
        # the joined table is accounted on its own and added to the others
        assert s.sql("SELECT COUNT(*) FROM visits", epsilon=1).cost == pp.PureDP(1)
    with pp.connect(path, policy=policy, budget=pp.PureDP(10)) as s:  # reload from a ledger
        assert s.spent() == pp.PureDP(0)


@pytest.mark.parametrize("sql,fragment", [
    ("SELECT COUNT(*) FROM visits v JOIN patients p ON v.visit_id = p.patient_id",
     "only be joined on their privacy units"),
    ("SELECT COUNT(*) FROM visits v LEFT JOIN patients p ON v.patient_id = p.patient_id",
     "outer JOIN"),
    ("SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
     "WHERE age > 3", "ambiguous column 'age'"),
])
def test_private_join_refusals(unit_db, sql: str, fragment: str) -> None:
    path, policy = unit_db
    with pp.connect(path, policy=policy, budget=pp.PureDP(10)) as s:
        with pytest.raises(pp.UnsupportedQueryError, match=fragment):
            s.sql(sql, epsilon=1)


def test_private_join_ledger_survives_a_restart(unit_db, tmp_path: Path) -> None:
    path, policy = unit_db
    ledger = tmp_path / "l.sqlite"
    q = "SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id"
    with pp.connect(path, policy=policy, budget=pp.PureDP(10), ledger=ledger) as s:
        s.sql(q, epsilon=1)
    with pp.connect(path, policy=policy, budget=pp.PureDP(10), ledger=ledger) as s:
        assert s.spent() == pp.PureDP(1)
        assert s.sql(q + " WHERE p.area = 'north'", epsilon=1).cost == pp.PureDP(1)
