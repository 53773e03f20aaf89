"""Tests for the deterministic synthetic demo dataset (privplan.demo.data)."""

from __future__ import annotations

import datetime as dt
import time

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml

from privplan.demo.data import (
    DEFAULT_ROWS,
    demo_policy_path,
    generate_hospitals,
    generate_visits,
    write_demo_database,
)

ROWS = 20_000
HOSPITALS = ["A", "B", "C", "D"]
DEPARTMENTS = ["cardiology", "emergency", "oncology", "orthopedics", "pediatrics"]
VISITS_COLUMNS = [
    "visit_id",
    "patient_id",
    "hospital",
    "department",
    "visit_date",
    "age",
    "sex",
    "cost",
    "length_of_stay",
    "insured",
]


@pytest.fixture(scope="module")
def visits() -> pd.DataFrame:
    return generate_visits(ROWS)


@pytest.fixture(scope="module")
def visits_default() -> pd.DataFrame:
    start = time.perf_counter()
    df = generate_visits()
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"generating {DEFAULT_ROWS} rows took {elapsed:.2f}s"
    return df


# --- determinism -------------------------------------------------------------------


def test_same_seed_gives_identical_frames(visits: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(visits, generate_visits(ROWS))
    pd.testing.assert_frame_equal(generate_visits(500, seed=7), generate_visits(500, seed=7))


def test_different_seed_gives_different_frames(visits: pd.DataFrame) -> None:
    other = generate_visits(ROWS, seed=12345)
    assert len(other) == len(visits)
    assert not visits.equals(other)
    assert not np.array_equal(visits["patient_id"].to_numpy(), other["patient_id"].to_numpy())


def test_does_not_touch_global_rng() -> None:
    np.random.seed(0)
    expected = np.random.random(3)
    np.random.seed(0)
    generate_visits(1_000)
    np.testing.assert_array_equal(np.random.random(3), expected)


@pytest.mark.parametrize("rows", [0, 1, 3, 10, 499, 500, 1_001])
def test_row_count_exact_for_small_sizes(rows: int) -> None:
    df = generate_visits(rows)
    assert len(df) == rows
    assert list(df.columns) == VISITS_COLUMNS
    assert df["visit_id"].tolist() == list(range(1, rows + 1))


def test_negative_rows_rejected() -> None:
    with pytest.raises(ValueError):
        generate_visits(-1)


# --- columns, types and ranges -------------------------------------------------------


def test_columns_and_dtypes(visits: pd.DataFrame) -> None:
    assert list(visits.columns) == VISITS_COLUMNS
    assert len(visits) == ROWS
    assert visits["visit_id"].dtype == np.int64
    assert visits["patient_id"].dtype == np.int64
    assert visits["age"].dtype == np.int32
    assert visits["length_of_stay"].dtype == np.int32
    assert visits["cost"].dtype == np.float64
    assert visits["insured"].dtype == np.bool_
    assert pd.api.types.is_datetime64_dtype(visits["visit_date"])
    for col in ("hospital", "department", "sex"):
        assert pd.api.types.is_string_dtype(visits[col]), col
        assert visits[col].notna().all(), col


def test_ids(visits: pd.DataFrame) -> None:
    assert visits["visit_id"].tolist() == list(range(1, ROWS + 1))
    n_patients = visits["patient_id"].nunique()
    assert n_patients == ROWS // 4
    assert visits["patient_id"].min() >= 1
    assert visits["patient_id"].max() == n_patients  # ids are 1..n_patients


def test_categorical_values(visits: pd.DataFrame) -> None:
    assert set(visits["hospital"]) == set(HOSPITALS)
    assert set(visits["department"]) == set(DEPARTMENTS)
    assert set(visits["sex"]) == {"F", "M"}
    shares = visits["hospital"].value_counts(normalize=True)
    assert shares["A"] > shares["B"] > shares["C"] > shares["D"]  # uneven shares


def test_dates_in_range_and_sorted(visits: pd.DataFrame) -> None:
    dates = visits["visit_date"]
    assert dates.min() >= pd.Timestamp("2023-01-01")
    assert dates.max() <= pd.Timestamp("2024-12-31")
    assert (dates == dates.dt.normalize()).all()
    assert dates.is_monotonic_increasing  # visit_id follows the date
    by_month = dates.dt.month.value_counts()
    assert by_month[1] > 1.2 * by_month[7]  # winter peak


def test_patient_level_columns_are_constant(visits: pd.DataFrame) -> None:
    per_patient = visits.groupby("patient_id")[["age", "sex"]].nunique()
    assert (per_patient == 1).all().all()
    assert visits["age"].between(0, 100).all()


def test_pediatrics_mostly_children(visits: pd.DataFrame) -> None:
    ped = visits.loc[visits["department"] == "pediatrics", "age"]
    assert (ped < 18).mean() > 0.9
    other = visits.loc[visits["department"] != "pediatrics", "age"]
    assert (other < 18).mean() < 0.2


def test_cost_distribution(visits: pd.DataFrame) -> None:
    cost = visits["cost"]
    null_share = cost.isna().mean()
    assert 0.006 < null_share < 0.014
    present = cost.dropna()
    assert (present > 0).all()
    assert (present > 20_000).sum() > 0  # clamping at the policy bound must matter
    assert 0.002 < (present > 20_000).mean() < 0.012
    assert present.between(50, 5000).mean() > 0.8
    medians = visits.groupby("department")["cost"].median()
    assert medians["oncology"] > medians["emergency"] > medians["pediatrics"]


def test_length_of_stay(visits: pd.DataFrame) -> None:
    los = visits["length_of_stay"]
    assert los.min() >= 0
    assert (los <= 30).mean() > 0.99
    assert (los > 30).any()
    means = visits.groupby("department")["length_of_stay"].mean()
    assert means["oncology"] > means["emergency"]


def test_insured_is_mixed(visits: pd.DataFrame) -> None:
    assert 0.7 < visits["insured"].mean() < 0.99


def test_visits_per_patient_default_size(visits_default: pd.DataFrame) -> None:
    assert len(visits_default) == DEFAULT_ROWS
    counts = visits_default["patient_id"].value_counts()
    assert len(counts) == DEFAULT_ROWS // 4
    assert counts.min() >= 1
    assert counts.between(1, 5).mean() > 0.7  # most patients have 1-5 visits
    heavy = counts[counts >= 50]
    assert len(heavy) >= 1  # heavy users, needed for user-level privacy tests
    assert heavy.max() <= 1000


# --- hospitals, database, policy ---------------------------------------------------------


def test_hospitals_table() -> None:
    h = generate_hospitals()
    assert list(h.columns) == ["hospital", "region", "beds"]
    assert h["hospital"].tolist() == HOSPITALS
    assert set(h["region"]) == {"North", "South", "East", "West"}
    assert h["beds"].dtype == np.int32
    assert (h["beds"] > 0).all()


def test_write_demo_database(tmp_path) -> None:
    path = tmp_path / "demo.duckdb"
    assert write_demo_database(path, rows=5_000) == path
    # Overwrites an existing file.
    result = write_demo_database(str(path), rows=ROWS)
    assert result == path
    assert not (tmp_path / "demo.duckdb.tmp").exists()

    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        assert {"visits", "hospitals"} <= tables
        assert con.execute("SELECT count(*) FROM visits").fetchone()[0] == ROWS
        assert con.execute("SELECT count(*) FROM hospitals").fetchone()[0] == 4
        types = dict(
            con.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'visits' ORDER BY ordinal_position"
            ).fetchall()
        )
        assert list(types) == VISITS_COLUMNS
        assert types == {
            "visit_id": "BIGINT",
            "patient_id": "BIGINT",
            "hospital": "VARCHAR",
            "department": "VARCHAR",
            "visit_date": "DATE",
            "age": "INTEGER",
            "sex": "VARCHAR",
            "cost": "DOUBLE",
            "length_of_stay": "INTEGER",
            "insured": "BOOLEAN",
        }
        nulls, lo, hi = con.execute(
            "SELECT count(*) - count(cost), min(visit_date), max(visit_date) FROM visits"
        ).fetchone()
        assert nulls > 0  # NaN became SQL NULL
        assert lo >= dt.date(2023, 1, 1) and hi <= dt.date(2024, 12, 31)
        joined = con.execute(
            "SELECT count(*) FROM visits JOIN hospitals USING (hospital)"
        ).fetchone()[0]
        assert joined == ROWS
    finally:
        con.close()


def test_database_matches_dataframe(tmp_path, visits: pd.DataFrame) -> None:
    path = write_demo_database(tmp_path / "d.duckdb", rows=ROWS)
    con = duckdb.connect(str(path), read_only=True)
    try:
        db = con.execute(
            "SELECT sum(patient_id), sum(age), count(cost), sum(cost), "
            "sum(length_of_stay), sum(CAST(insured AS INTEGER)) FROM visits"
        ).fetchone()
    finally:
        con.close()
    assert db[0] == visits["patient_id"].sum()
    assert db[1] == visits["age"].sum()
    assert db[2] == visits["cost"].notna().sum()
    assert db[3] == pytest.approx(visits["cost"].sum())
    assert db[4] == visits["length_of_stay"].sum()
    assert db[5] == visits["insured"].sum()


def test_policy_yaml(visits: pd.DataFrame) -> None:
    path = demo_policy_path()
    assert path.is_file()
    assert path.name == "policy.yaml"
    with open(path, encoding="utf-8") as fh:
        policy = yaml.safe_load(fh)
    tables = policy["tables"]
    assert tables["hospitals"] == {"public": True}
    v = tables["visits"]
    assert v["privacy_unit"] == "row"
    assert v["neighbourhood"] == "add_remove"
    assert list(v["columns"]) == VISITS_COLUMNS == list(visits.columns)
    cols = v["columns"]
    assert cols["hospital"]["public_values"] == HOSPITALS
    assert cols["department"]["public_values"] == DEPARTMENTS
    assert cols["sex"]["public_values"] == ["F", "M"]
    assert cols["cost"] == {"type": "float", "lower": 0, "upper": 20000}
    assert cols["visit_date"]["lower"] == dt.date(2023, 1, 1)
    assert cols["visit_date"]["upper"] == dt.date(2024, 12, 31)
    # The data's categorical values are all declared public values.
    for col in ("hospital", "department", "sex"):
        assert set(visits[col]) <= set(cols[col]["public_values"])
