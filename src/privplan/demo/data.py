"""Deterministic synthetic hospital-visits dataset for demos, tests and benchmarks.

Everything is drawn from one explicitly seeded ``numpy.random.Generator(PCG64(seed))``,
so the same ``(rows, seed)`` always yields identical data (on the same numpy version),
and generation is fully vectorised (200k rows take a fraction of a second, 10M rows
are feasible).

Tables
------
``visits`` (private, one row per visit):
    visit_id BIGINT (1..n, in date order), patient_id BIGINT (about n/4 patients; most
    have 1-5 visits, a few heavy users have 50-1000), hospital VARCHAR (A-D, uneven
    shares, each patient has a home hospital), department VARCHAR (age dependent;
    pediatrics is mostly age < 18), visit_date DATE (2023-01-01..2024-12-31, winter
    peak, fewer weekend visits, slight growth), age INTEGER 0..100 and sex VARCHAR F/M
    (both constant per patient), cost DOUBLE (lognormal, department/age/hospital
    dependent, ~0.5% outliers above 20000, ~1% NULL), length_of_stay INTEGER (0..30,
    ~0.2% above 30), insured BOOLEAN.

``hospitals`` (public): hospital, region, beds.

In the DataFrame returned by :func:`generate_visits`, ``visit_date`` is
``datetime64[s]`` (midnight), NULL costs are ``NaN`` and strings use pandas' default
string dtype; :func:`write_demo_database` stores them as DATE / NULL / VARCHAR.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "DATE_MAX",
    "DATE_MIN",
    "DEFAULT_ROWS",
    "DEFAULT_SEED",
    "DEPARTMENTS",
    "HOSPITALS",
    "SEXES",
    "demo_policy_path",
    "generate_hospitals",
    "generate_visits",
    "write_demo_database",
]

DEFAULT_ROWS = 200_000
DEFAULT_SEED = 20240601

HOSPITALS = ("A", "B", "C", "D")
DEPARTMENTS = ("cardiology", "emergency", "oncology", "orthopedics", "pediatrics")
SEXES = ("F", "M")
DATE_MIN = "2023-01-01"
DATE_MAX = "2024-12-31"

VISITS_COLUMNS = (
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
)

# --- model parameters -------------------------------------------------------------

_HOSPITAL_SHARES = np.array([0.40, 0.30, 0.20, 0.10])
_HOME_HOSPITAL_LOYALTY = 0.85  # share of a patient's visits at their home hospital
_HOSPITAL_COST_FACTOR = np.array([1.10, 1.00, 0.95, 0.85])

_HEAVY_USER_SHARE = 0.0005  # fraction of patients who are heavy users
_HEAVY_MIN, _HEAVY_MAX = 50, 1000  # visits per heavy user (log-uniform)
_HEAVY_MAX_FRACTION = 0.10  # heavy users get at most this share of all visits

# Department probabilities per patient group (columns follow DEPARTMENTS).
_GROUP_CHILD, _GROUP_ADULT, _GROUP_SENIOR, _GROUP_HEAVY = 0, 1, 2, 3
_DEPT_PROBS = np.array(
    [
        [0.02, 0.20, 0.01, 0.07, 0.70],  # age < 18
        [0.20, 0.38, 0.12, 0.29, 0.01],  # 18..64
        [0.38, 0.27, 0.20, 0.15, 0.00],  # 65+
        [0.35, 0.10, 0.45, 0.10, 0.00],  # heavy users (chronic conditions)
    ]
)
_INSURED_PROB = np.array([0.93, 0.85, 0.97, 0.96])

# Cost: lognormal median and log-sd per department.
_COST_MEDIAN = np.array([1200.0, 600.0, 2500.0, 1500.0, 250.0])
_COST_SIGMA = np.array([0.70, 0.80, 0.65, 0.70, 0.60])
_COST_OUTLIER_SHARE = 0.005
_COST_OUTLIER_RANGE = (25_000.0, 250_000.0)
_COST_NULL_SHARE = 0.01

# Length of stay: Poisson mean per department (before the age factor).
_LOS_MEAN = np.array([3.0, 0.4, 5.0, 2.5, 1.0])
_LOS_CAP = 30
_LOS_OUTLIER_SHARE = 0.002
_LOS_OUTLIER_RANGE = (31, 120)

_HOSPITAL_TABLE = {
    "hospital": ["A", "B", "C", "D"],
    "region": ["North", "South", "East", "West"],
    "beds": [620, 410, 250, 120],
}


def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _visits_per_patient(
    rng: np.random.Generator, rows: int, n_patients: int
) -> tuple[np.ndarray, int]:
    """Visit counts (>= 1 each) summing exactly to ``rows``, and the number of heavy
    users (who come first)."""
    budget = int(rows * _HEAVY_MAX_FRACTION)
    n_heavy = 0
    if budget >= _HEAVY_MIN:
        n_heavy = max(1, round(n_patients * _HEAVY_USER_SHARE))
        n_heavy = min(n_heavy, budget // _HEAVY_MIN, n_patients - 1)
    log_heavy = rng.uniform(np.log(_HEAVY_MIN), np.log(_HEAVY_MAX + 1), size=n_heavy)
    heavy = np.floor(np.exp(log_heavy)).astype(np.int64)
    if heavy.sum() > budget:  # small tables: shrink heavy users but keep them >= 50
        heavy = np.maximum(_HEAVY_MIN, (heavy * (budget / heavy.sum())).astype(np.int64))

    n_ordinary = n_patients - n_heavy
    rest = rows - int(heavy.sum()) - n_ordinary  # extra visits beyond the first one
    # Gamma-distributed propensities make the extra visits negative-binomial:
    # most ordinary patients end up with 1-5 visits, a few with 10-20.
    weights = rng.gamma(2.0, 1.0, size=n_ordinary)
    extra = rng.multinomial(rest, weights / weights.sum())
    return np.concatenate([heavy, 1 + extra]), n_heavy


def _day_probabilities() -> tuple[np.ndarray, np.ndarray]:
    """Days since DATE_MIN and their sampling probabilities (seasonal, weekly, trend)."""
    days = np.arange(
        np.datetime64(DATE_MIN, "D"), np.datetime64(DATE_MAX, "D") + 1, dtype="datetime64[D]"
    )
    offset = (days - days[0]).astype(np.int64)
    day_of_year = (days - days.astype("datetime64[Y]")).astype(np.int64)
    weekday = (days.astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
    w = 1.0 + 0.25 * np.cos(2.0 * np.pi * (day_of_year - 15) / 365.25)  # winter peak
    w *= np.where(weekday >= 5, 0.7, 1.0)  # fewer weekend visits
    w *= 1.0 + 0.08 * offset / offset[-1]  # slow growth
    return offset, w / w.sum()


_CATEGORICAL_RESOLUTION = 10_000  # probabilities are used in steps of 1/10000


def _categorical(
    rng: np.random.Generator, probs: np.ndarray, size: int, rows: np.ndarray | None = None
) -> np.ndarray:
    """Draw category codes from ``probs`` (1-d), or from ``probs[rows[i]]`` per draw (2-d).

    Uses a lookup table indexed by a uniform integer in [0, 10000): one small-table gather
    per draw, exact for probabilities that are multiples of 1/10000 (all of ours are).
    """
    probs = np.atleast_2d(probs)
    steps = np.rint(np.cumsum(probs, axis=1) * _CATEGORICAL_RESOLUTION).astype(np.int64)
    cells = np.arange(_CATEGORICAL_RESOLUTION)
    table = np.stack([np.searchsorted(row, cells, side="right") for row in steps])
    table = np.minimum(table, probs.shape[1] - 1).astype(np.int8)
    u = rng.integers(0, _CATEGORICAL_RESOLUTION, size=size)
    if rows is None:
        return table[0, u]
    return table[rows, u]


def _strings(values: tuple[str, ...], codes: np.ndarray) -> pd.Series:
    """A pandas default-dtype string column ``values[codes]``, built fast when possible."""
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is optional
        pa = None
    if pa is not None and pd.StringDtype().storage == "pyarrow":
        strings = pa.array(values, type=pa.large_string()).take(pa.array(codes))
        return pd.Series(strings, dtype="str")
    return pd.Series(np.asarray(values, dtype=object)[codes], dtype="str")


def generate_visits(rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """Return the synthetic ``visits`` table with ``rows`` rows (deterministic in ``seed``)."""
    # (long on purpose: one sequence of random draws, whose order fixes the dataset per seed)
    rows = int(rows)
    if rows < 0:
        raise ValueError(f"rows must be non-negative, got {rows}")
    rng = _rng(seed)
    n_patients = max(1, rows // 4) if rows else 0

    # --- patients -------------------------------------------------------------------
    counts, n_heavy = (
        _visits_per_patient(rng, rows, n_patients) if rows else (np.zeros(0, dtype=np.int64), 0)
    )
    # Age: a mixture of children, adults and seniors; heavy users are older.
    kind = _categorical(rng, np.array([0.20, 0.55, 0.25]), n_patients)
    age = np.where(
        kind == 0,
        rng.integers(0, 18, size=n_patients),
        np.where(
            kind == 1,
            rng.normal(42.0, 13.0, size=n_patients),
            rng.normal(76.0, 8.0, size=n_patients),
        ),
    )
    age[:n_heavy] = rng.normal(65.0, 12.0, size=n_heavy)
    age = np.clip(np.rint(age), 0, 100).astype(np.int32)
    sex = (rng.random(n_patients) < 0.48).astype(np.int8)  # 0 = F, 1 = M
    home = _categorical(rng, _HOSPITAL_SHARES, n_patients)
    group = np.where(age < 18, _GROUP_CHILD, np.where(age < 65, _GROUP_ADULT, _GROUP_SENIOR))
    group = group.astype(np.int8)
    group[:n_heavy] = _GROUP_HEAVY
    # Patient ids are a random permutation, so heavy users are not ids 1..k.
    patient_id = rng.permutation(n_patients).astype(np.int64) + 1

    # --- visits, directly in final (date) order ---------------------------------------
    # Visits are i.i.d. given the patient, so drawing the sorted multiset of dates
    # (multinomial day counts) and giving the patients' visits a random order is the same
    # as drawing a date per visit and sorting by date, without the sort.
    offsets, day_p = _day_probabilities()
    day = np.repeat(offsets, rng.multinomial(rows, day_p))
    pidx = np.repeat(np.arange(n_patients), counts)[rng.permutation(rows)]
    v_group = group[pidx]
    v_age = age[pidx]

    hospital = np.where(
        rng.random(rows) < _HOME_HOSPITAL_LOYALTY,
        home[pidx],
        _categorical(rng, _HOSPITAL_SHARES, rows),
    )
    department = _categorical(rng, _DEPT_PROBS, rows, v_group)

    age_factor = 1.0 + v_age / 150.0
    cost = np.exp(
        np.log(_COST_MEDIAN)[department] + _COST_SIGMA[department] * rng.standard_normal(rows)
    )
    cost *= age_factor * _HOSPITAL_COST_FACTOR[hospital]
    outlier = rng.random(rows) < _COST_OUTLIER_SHARE
    lo, hi = np.log(_COST_OUTLIER_RANGE[0]), np.log(_COST_OUTLIER_RANGE[1])
    cost[outlier] = np.exp(rng.uniform(lo, hi, size=int(outlier.sum())))
    cost = np.round(np.maximum(cost, 5.0), 2)
    cost[rng.random(rows) < _COST_NULL_SHARE] = np.nan

    los = np.minimum(rng.poisson(_LOS_MEAN[department] * age_factor), _LOS_CAP)
    los_outlier = rng.random(rows) < _LOS_OUTLIER_SHARE
    los[los_outlier] = rng.integers(
        _LOS_OUTLIER_RANGE[0], _LOS_OUTLIER_RANGE[1] + 1, size=int(los_outlier.sum())
    )

    insured = rng.random(rows) < _INSURED_PROB[v_group]

    return pd.DataFrame(
        {
            "visit_id": np.arange(1, rows + 1, dtype=np.int64),
            "patient_id": patient_id[pidx],
            "hospital": _strings(HOSPITALS, hospital),
            "department": _strings(DEPARTMENTS, department),
            "visit_date": np.datetime64(DATE_MIN, "s") + day * np.int64(86_400),
            "age": v_age,
            "sex": _strings(SEXES, sex[pidx]),
            "cost": cost,
            "length_of_stay": los.astype(np.int32),
            "insured": insured,
        },
        copy=False,
    )


def generate_hospitals() -> pd.DataFrame:
    """Return the small public ``hospitals`` table (hospital, region, beds)."""
    return pd.DataFrame(
        {
            "hospital": pd.Series(_HOSPITAL_TABLE["hospital"], dtype="str"),
            "region": pd.Series(_HOSPITAL_TABLE["region"], dtype="str"),
            "beds": np.array(_HOSPITAL_TABLE["beds"], dtype=np.int32),
        }
    )


_VISITS_SELECT = """
SELECT CAST(visit_id AS BIGINT) AS visit_id,
       CAST(patient_id AS BIGINT) AS patient_id,
       CAST(hospital AS VARCHAR) AS hospital,
       CAST(department AS VARCHAR) AS department,
       CAST(visit_date AS DATE) AS visit_date,
       CAST(age AS INTEGER) AS age,
       CAST(sex AS VARCHAR) AS sex,
       CAST(cost AS DOUBLE) AS cost,
       CAST(length_of_stay AS INTEGER) AS length_of_stay,
       CAST(insured AS BOOLEAN) AS insured
FROM {src}
"""

_HOSPITALS_SELECT = """
SELECT CAST(hospital AS VARCHAR) AS hospital,
       CAST(region AS VARCHAR) AS region,
       CAST(beds AS INTEGER) AS beds
FROM {src}
"""


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def write_demo_database(
    path: str | os.PathLike[str], rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED
) -> Path:
    """Create (or overwrite) a DuckDB file with tables ``visits`` and ``hospitals``.

    The file is written under a temporary name and moved into place, so an existing
    database at ``path`` is replaced only once the new one is complete.
    """
    import duckdb

    path = Path(path)
    visits = generate_visits(rows, seed)
    hospitals = generate_hospitals()

    tmp = path.with_name(path.name + ".tmp")
    for stale in (tmp, Path(str(tmp) + ".wal")):
        _remove(stale)
    con = duckdb.connect(str(tmp))
    try:
        con.execute("SET enable_progress_bar = false")
        con.register("__privplan_demo_visits", visits)
        con.register("__privplan_demo_hospitals", hospitals)
        con.execute("CREATE TABLE visits AS " + _VISITS_SELECT.format(src="__privplan_demo_visits"))
        con.execute(
            "CREATE TABLE hospitals AS " + _HOSPITALS_SELECT.format(src="__privplan_demo_hospitals")
        )
        con.unregister("__privplan_demo_visits")
        con.unregister("__privplan_demo_hospitals")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    # A write-ahead log left by the old database must not be replayed onto the new one.
    _remove(Path(str(path) + ".wal"))
    os.replace(tmp, path)
    return path


def demo_policy_path() -> Path:
    """Path of the demo ``policy.yaml`` shipped inside the package."""
    return Path(__file__).resolve().with_name("policy.yaml")
