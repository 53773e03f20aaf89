"""Tests of the privacy policy: fixtures for every error case, round trips, SmartNoise metadata.

Bad fixtures live in ``tests/fixtures/policies/{bad,sn_bad}_*.yaml``; each starts with
``# expect: fragment | fragment | ...`` lines naming what the error must say (what, where, fix).
Files starting with ``sn_`` are SmartNoise metadata.
"""

from __future__ import annotations

import datetime as dt
import string
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privplan.accounting.model import TableModel, UnitModel
from privplan.errors import PolicyError, UnsupportedQueryError
from privplan.mechanisms.grid import Grid, check_no_overflow
from privplan.policy import COLUMN_TYPES, ColumnPolicy, Policy, TablePolicy

FIXTURES = Path(__file__).parent / "fixtures" / "policies"
PUMS = Path(__file__).resolve().parent / "fixtures" / "pums"  # copies of the shared PUMS sample
BAD = sorted(FIXTURES.glob("bad_*.yaml")) + sorted(FIXTURES.glob("sn_bad_*.yaml"))
GOOD = sorted(FIXTURES.glob("good_*.yaml")) + sorted(FIXTURES.glob("sn_good_*.yaml"))


def _load(path: Path) -> Policy:
    if path.name.startswith("sn_"):
        return Policy.from_smartnoise_yaml(path)
    return Policy.from_yaml(path)


def _expected(path: Path) -> list[str]:
    frags: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("# expect:"):
            frags += [f.strip() for f in line.removeprefix("# expect:").split(" | ")]
    return frags


# ---- fixtures ------------------------------------------------------------------------------


def test_fixtures_exist() -> None:
    assert len(BAD) >= 40 and len(GOOD) >= 4
    for path in BAD:
        assert _expected(path), f"{path.name} states no `# expect:` fragments"


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_policy_is_refused_with_a_clear_error(path: Path) -> None:
    with pytest.raises(PolicyError) as info:
        _load(path)
    msg = str(info.value)
    assert msg.startswith(str(path)), "the error names the file"
    for frag in _expected(path):
        assert frag in msg, f"{frag!r} not in:\n{msg}"
    assert "Why:" in msg and "Fix:" in msg, msg


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_good_policy_round_trips(path: Path) -> None:
    policy = _load(path)
    assert Policy.from_dict(policy.to_dict()) == policy
    assert Policy.from_yaml(policy.to_yaml()) == policy
    assert hash(Policy.from_dict(policy.to_dict())) == hash(policy)


# ---- the example policy: every column setting once --------------------------------------


@pytest.fixture
def design() -> Policy:
    return Policy.from_yaml(FIXTURES / "good_design_example.yaml")


def test_design_example_values(design: Policy) -> None:
    visits = design.table("visits")
    assert list(design.tables) == ["visits", "hospitals"]
    assert visits.privacy_unit == "patient_id" and not visits.is_row_level
    assert (visits.max_rows_per_unit, visits.max_groups_per_unit) == (10, 3)
    assert visits.neighbourhood == "add_remove" and visits.source == "visits.parquet"
    assert visits.column("hospital").public_values == ("A", "B", "C", "D")
    assert visits.column("insured").public_values == (False, True)
    assert visits.column("insured").nullable is False
    age = visits.column("age")
    assert (age.lower, age.upper) == (0, 120) and type(age.lower) is int and age.unit_level
    cost = visits.column("cost")
    assert cost.require_bounds("SUM(cost)", "visits") == (0.0, 10000.0)
    assert type(cost.lower) is float and cost.resolution == Fraction(1, 100)
    vd = visits.column("visit_date")
    assert (vd.lower, vd.upper) == (dt.date(2020, 1, 1), dt.date(2024, 12, 31))
    assert visits.column("patient_id").unit_level, "the privacy-unit column is unit-level"
    assert visits.unit_level_columns() == frozenset({"patient_id", "age"})
    assert visits.table_model() == TableModel(
        "add_remove", UnitModel(10, frozenset({"patient_id", "age"}))
    )
    hospitals = design.table("hospitals")
    assert hospitals.public and hospitals.columns == {}
    assert design.private_tables() == (visits,) and design.public_tables() == (hospitals,)


def test_row_level_replace_values() -> None:
    p = Policy.from_yaml(FIXTURES / "good_row_level_replace.yaml")
    census = p.table("pums.CENSUS")
    assert census.name == "census" and census.schema == "PUMS" and census.rows == 1000
    assert census.is_row_level and census.neighbourhood == "replace"
    assert census.table_model() == TableModel("replace", UnitModel(1, frozenset()))
    assert census.column("AGE").public_values == (10, 20)
    assert census.column("income").lower == -1000.0 and census.column("income").upper == 5e5
    assert census.column("income").public_values == (0.0, 1.5)
    assert census.column("sex") == ColumnPolicy("sex", "int")
    seen = census.column("seen_at")
    assert seen.lower == dt.datetime(2019, 12, 31, 22, 0), "aware timestamps become naive UTC"
    assert seen.upper == dt.datetime(2024, 12, 31)
    day = census.column("day")
    assert (day.lower, day.upper) == (dt.date(2020, 1, 1), dt.date(2024, 12, 31))


# ---- lookups -------------------------------------------------------------------------------


def test_table_lookup_is_case_insensitive_and_schema_aware(design: Policy) -> None:
    assert design.table("VISITS") is design.table("visits")
    assert design.table("main.visits") is design.table("visits"), "no schema: any qualifier"
    assert design.table('"Visits"').name == "visits"
    with pytest.raises(PolicyError) as info:
        design.table("vists")
    msg = str(info.value)
    for frag in (
        "table 'vists' is not in the policy",
        "known tables: visits, hospitals",
        "did you mean 'visits'?",
        "public: true",
    ):
        assert frag in msg


def test_table_lookup_checks_a_declared_schema() -> None:
    p = Policy.from_smartnoise_yaml(PUMS / "PUMS.yaml")
    assert p.table("PUMS.PUMS") is p.table("pums") is p.table("db.pums.pums")
    with pytest.raises(PolicyError, match="declared in schema 'PUMS', not 'other'"):
        p.table("other.PUMS")


def test_column_lookup_error(design: Policy) -> None:
    with pytest.raises(PolicyError) as info:
        design.table("visits").column("cots")
    msg = str(info.value)
    for frag in (
        "column 'cots' of table 'visits' is not in the policy",
        "known columns: patient_id, hospital, age, cost, visit_date, insured",
        "did you mean 'cost'?",
        "tables.visits.columns",
    ):
        assert frag in msg


def test_require_bounds_errors() -> None:
    with pytest.raises(PolicyError) as info:
        ColumnPolicy("cost", "float").require_bounds("SUM(cost)", "visits")
    assert str(info.value).startswith(
        "SUM(cost) needs bounds: column 'cost' of table 'visits' has no lower/upper in the policy."
    )
    assert "`cost: {type: float, lower: 0, upper: 10000}`" in str(info.value)
    assert "privplan clamps values to them" in str(info.value)
    with pytest.raises(PolicyError, match=r"has no upper .*lower: 5, upper: 100\}"):
        ColumnPolicy("age", "int", lower=5).require_bounds("AVG(age)", "visits")
    with pytest.raises(PolicyError, match="has type str"):
        ColumnPolicy("name", "str").require_bounds("SUM(name)", "visits")


def test_table_model_of_public_table_is_refused(design: Policy) -> None:
    with pytest.raises(PolicyError, match="'hospitals' is public"):
        design.table("hospitals").table_model()


# ---- sources -------------------------------------------------------------------------------


def test_from_yaml_accepts_text_and_paths(tmp_path: Path) -> None:
    text = "tables:\n  t:\n    columns:\n      x: {type: int}\n"
    (tmp_path / "p.yaml").write_text(text)
    expected = Policy.from_yaml(text)
    assert Policy.from_yaml(tmp_path / "p.yaml") == expected
    assert Policy.from_yaml(str(tmp_path / "p.yaml")) == expected
    assert Policy.from_yaml("tables: {t: {columns: {x: {type: int}}}}") == expected


def test_missing_path_and_directory(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"policy file '.*nope\.yaml' does not exist.*Fix:"):
        Policy.from_yaml(tmp_path / "nope.yaml")
    with pytest.raises(PolicyError, match="does not exist"):
        Policy.from_yaml("nope.yaml")
    with pytest.raises(PolicyError, match="does not exist"):
        Policy.from_smartnoise_yaml(tmp_path / "nope.yaml")
    with pytest.raises(PolicyError, match="is not a file"):
        Policy.from_yaml(tmp_path)


def test_from_dict_errors_have_no_file_prefix() -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_dict({"tables": {"t": {"columns": {"x": {"type": "int", "uper": 3}}}}})
    assert str(info.value).startswith("t.x (key `tables.t.columns.x.uper`): unknown key 'uper'")


def test_direct_construction_freezes_mappings() -> None:
    t = TablePolicy("t", {"x": ColumnPolicy("x", "int")})
    p = Policy({"t": t})
    assert p.table("T").column("X").type == "int"
    with pytest.raises(TypeError):
        p.tables["u"] = t  # type: ignore[index]
    assert hash(p) == hash(Policy({"t": TablePolicy("t", {"x": ColumnPolicy("x", "int")})}))


# ---- SmartNoise metadata -------------------------------------------------------------------


def _pums_columns(t: TablePolicy) -> None:
    assert (t.name, t.schema, t.rows) == ("pums", "PUMS", 1000)
    assert t.column("age").require_bounds("SUM(age)", "pums") == (0, 100)
    assert t.column("income").require_bounds("SUM(income)", "pums") == (0, 500000)
    assert type(t.column("income").upper) is int
    for c in ("sex", "educ", "race", "married"):
        assert t.column(c).type == "str" and not t.column(c).has_bounds


def test_pums_row_privacy() -> None:
    p = Policy.from_smartnoise_yaml(PUMS / "PUMS.yaml")
    t = p.table("PUMS.PUMS")
    _pums_columns(t)
    assert t.is_row_level and t.max_rows_per_unit == 1 and t.neighbourhood == "add_remove"
    assert list(t.columns) == ["age", "sex", "educ", "race", "income", "married"]
    assert p.notes == ()


@pytest.mark.parametrize("name", ["PUMS_pid.yaml", "PUMS_dup.yaml"])
def test_pums_private_id(name: str) -> None:
    p = Policy.from_smartnoise_yaml(PUMS / name)
    t = p.table("PUMS.PUMS")
    _pums_columns(t)
    assert t.privacy_unit == "pid" and t.max_rows_per_unit == 1  # max_ids, default 1
    assert t.column("pid").unit_level and t.unit_level_columns() == frozenset({"pid"})
    assert t.table_model() == TableModel("add_remove", UnitModel(1, frozenset({"pid"})))


def test_smartnoise_options_are_noted() -> None:
    p = Policy.from_smartnoise_yaml(FIXTURES / "sn_good_options.yaml")
    t = p.table("sales.orders")
    assert (t.privacy_unit, t.max_rows_per_unit, t.rows) == ("customer", 5, 250)
    assert t.column("amount").upper == 999.5 and not t.column("amount").nullable
    assert t.column("region").type == "str" and t.column("paid").type == "bool"
    assert t.column("at").type == "timestamp"
    assert "blob" not in t.columns
    notes = "\n".join(p.notes)
    for frag in (
        "`engine: postgres` ignored",
        "Sales.orders: SmartNoise option `censor_dims: False` ignored",
        "clamp_counts",
        "sample_max_ids",
        "use_dpsu",
        "Sales.orders.amount: SmartNoise `sensitivity: 999.5` ignored",
        "card",
        "missing_value",
        "Sales.orders.blob",
    ):
        assert frag in notes


def test_smartnoise_accepts_a_dict() -> None:
    d = {"": {"s": {"T": {"row_privacy": True, "x": {"type": "float", "lower": 0, "upper": 1}}}}}
    t = Policy.from_smartnoise_yaml(d).table("s.t")
    assert t.is_row_level and t.column("x").upper == 1.0


# ---- property: every valid policy round-trips ----------------------------------------------

_names = st.text(string.ascii_lowercase + "_", min_size=1, max_size=8).filter(
    lambda s: s != "row" and not s.startswith("__"))  # ("__…" is reserved: see below)


@st.composite
def _column(draw: st.DrawFn, public: bool) -> dict[str, object]:
    ctype = draw(st.sampled_from(COLUMN_TYPES))
    col: dict[str, object] = {"type": ctype}
    values = {
        "int": st.integers(-(10**12), 10**12),
        "float": st.floats(-1e9, 1e9, allow_nan=False),
        "date": st.dates(),
        "timestamp": st.datetimes(),
        "str": st.text(max_size=5),
        "bool": st.booleans(),
    }[ctype]
    if ctype not in ("str", "bool") and draw(st.booleans()):
        lo, hi = sorted([draw(values), draw(values)])
        col.update(lower=lo, upper=hi)
        if draw(st.booleans()):
            col["public_values"] = [lo, hi]
    elif draw(st.booleans()):
        col["public_values"] = draw(st.lists(values, min_size=1, max_size=4))
    if ctype == "float" and draw(st.booleans()):
        col["resolution"] = draw(st.sampled_from([0.01, 1, "1/3", 0.5]))
        if "lower" in col:  # a valid policy's resolution fits its bounds (checked on load)
            try:
                lo_int, hi_int = Grid(Fraction(col["resolution"])).to_grid_bounds(
                    col["lower"], col["upper"])  # type: ignore[arg-type]
                check_no_overflow(lo_int, hi_int, 1)
            except UnsupportedQueryError:
                del col["resolution"]
    if not public:
        col["unit_level"] = draw(st.booleans())
    col["nullable"] = draw(st.booleans())
    return col


@st.composite
def _policy(draw: st.DrawFn) -> dict[str, object]:
    tables: dict[str, object] = {}
    for name in draw(st.lists(_names, min_size=1, max_size=3, unique=True)):
        public = draw(st.booleans())
        cols = {
            c: draw(_column(public))
            for c in draw(st.lists(_names, min_size=1, max_size=4, unique=True))
        }
        t: dict[str, object] = {"columns": cols}
        if public:
            t["public"] = True
        else:
            unit = draw(st.sampled_from(["row", *cols]))
            t["privacy_unit"] = unit
            t["neighbourhood"] = draw(st.sampled_from(["add_remove", "replace"]))
            if unit != "row":
                t["max_rows_per_unit"] = draw(st.integers(1, 50))
                t["max_groups_per_unit"] = draw(st.none() | st.integers(1, 5))
        if draw(st.booleans()):
            t["rows"] = draw(st.integers(0, 10**6))
        tables[name] = t
    return {"tables": tables}


@settings(max_examples=150, deadline=None)
@given(_policy())
def test_every_valid_policy_round_trips(d: dict[str, object]) -> None:
    p = Policy.from_dict(d)
    assert Policy.from_dict(p.to_dict()) == p
    assert Policy.from_yaml(p.to_yaml()) == p


@pytest.mark.parametrize(("column", "message"), [
    ({"type": "float", "lower": 0, "upper": 5000, "resolution": 0.0001},
     r"resolution 0.0001 does not fit the bounds \[0.0, 5000.0\].*Fix: use `resolution: 0.01`"),
    ({"type": "float", "lower": 0.01, "upper": 0.02, "resolution": 1},
     r"resolution 1.0 does not fit the bounds .*Fix: use `resolution: 1e-08`"),
])
def test_a_resolution_that_does_not_fit_its_bounds_is_refused_on_load(
        column: dict[str, object], message: str) -> None:
    with pytest.raises(PolicyError, match=r"t\.v \(key `tables\.t\.columns\.v\.resolution`\): "
                                          + message):
        Policy.from_dict({"tables": {"t": {"columns": {"v": column}}}})


@pytest.mark.parametrize("where", ["column", "table"])
def test_names_with_two_leading_underscores_are_reserved(where: str) -> None:
    """privplan's engine statements name inner columns and relations `__privplan_order`,
    `__rn`, `__k`…: a policy column (or table) of such a name is refused when the policy is
    read, saying why, before any session exists (it was a bind error at the first query)."""
    column = "__rn" if where == "column" else "x"
    table = "t" if where == "column" else "__privplan_copy_t"
    raw = {"tables": {table: {"privacy_unit": "row", "columns": {
        column: {"type": "int", "lower": 0, "upper": 1}}}}}
    with pytest.raises(PolicyError, match="starts with two underscores"):
        Policy.from_dict(raw)
