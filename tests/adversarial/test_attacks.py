"""The attack suite: an analyst's attacks on privplan's public interfaces, one table per class.

Every attack is a row in ``data/attacks_*.yaml``; one generic test runs them all. An attack names
a small fixture (a DuckDB connection holding a table of known rows with edge values, the policy,
the session budget and optionally connection settings, a collation, a policy patch), the query
(or a Python-level action: pandas copies, DB-API, CLI, ledger files), and the expected outcome:

* ``refused``: a ``PrivplanError`` of the named class whose message contains ``match``; the
  session's ``spent()`` is unchanged; and ``explain`` refuses the same query with the same class
  (``explain`` and ``sql`` must agree on admissibility). A ``BudgetExceededError`` is the one
  refusal ``explain`` does not share: it must then show ``within_budget`` False.
* ``answered``: with ``privplan.testing.noise_disabled()`` the released rows equal the expected
  ``rows`` or the plain DuckDB answer (``plain``) on a fresh copy of the same data; the charge is
  exactly ``cost`` (``res.cost``, and ``spent()`` grows by exactly that); ``explain`` beforehand
  projected the same marginal cost. Optional checks: released keys are unique (``keys``), the
  rows are sorted (``sorted_by``), the mechanisms ``explain`` lists, the smallest sensitivity a
  fan-out needs (``min_sensitivity``), and, with seeded noise, that the noise actually released
  for one exact aggregate released several times adds up to no more than what was charged
  (``same_aggregate``; see :func:`epsilon_of_std`).
* ``refused`` with ``charged``: a failure after the charge that depends only on the released
  noisy values (a ``PostProcessingError``): charged exactly that, and admissible for ``explain``.
* ``either``: a list of alternatives (a refusal and an answer) for attacks where a correct fix may
  choose either; the alternative is picked by whether ``sql`` raised.

Generic checks on every attack: only ``PrivplanError`` s escape (no raw exception), no error
message quotes the fixture's sentinel value ``SECRET_Zq9`` (errors must not reveal data), and
``explain`` spends nothing.

An attack that currently fails is a bug report, not a test to adjust: the expected outcome is the
correct one.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import decimal
import io
import math
import pickle
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml

import privplan as pp
from privplan import dbapi
from privplan import errors as pp_errors
from privplan.testing import noise_disabled, seeded_noise

DATA = Path(__file__).parent / "data"
SENTINEL = "SECRET_Zq9"
CLASSES = ("duplicate_release", "data_dependent_error", "collation", "public_join_type",
           "pandas_copy", "data_independent_failure", "other")


# ------------------------------------------------------------------------------------------
# fixtures: small tables of known rows with edge values
# ------------------------------------------------------------------------------------------

PEOPLE_ROWS = r"""
(1, 37, 1, 2, 'a',  DATE '2020-01-01', TIMESTAMP '2020-01-01 10:00:00', 1.5, true, '12',
 9223372036854775807, '(', 'day', 0),
(2, 5, 2, 1, 'b', DATE '2021-06-30', TIMESTAMP '2021-06-30 00:00:00', -2.0, false, 'abc',
 -9223372036854775808, 'a.*', 'bogus', 1),
(3, 90, 1, 3, 'A', NULL, NULL, 'nan'::DOUBLE, NULL, NULL, 0, NULL, NULL, NULL),
(4, 64, 2, 0, 'é', DATE '2020-02-29', TIMESTAMP '2020-02-29 23:59:59.999999', 'inf'::DOUBLE,
 true, '007', 1, 'a\', 'month', 2),
(5, 18, 1, 4, 'a ', DATE '2029-12-31', TIMESTAMP '1970-01-01 00:00:00', -0.0, false, ' 5', -1,
 '[a', 'year', -1),
(6, 64, 2, 2, 'SECRET_Zq9', DATE '2000-01-01', TIMESTAMP '2000-01-01 00:00:00', 9.75, true,
 'SECRET_Zq9', 42, 'SECRET_Zq9', 'SECRET_Zq9', 3)
"""


def _people(con: duckdb.DuckDBPyConnection, collation: str | None) -> None:
    coll = f" COLLATE {collation}" if collation else ""
    con.execute(f"""CREATE TABLE t(id INTEGER, age INTEGER, sex INTEGER, educ INTEGER,
        s VARCHAR{coll}, d DATE, ts TIMESTAMP, x DOUBLE, b BOOLEAN, code VARCHAR, big BIGINT,
        pat VARCHAR, unit VARCHAR, z INTEGER)""")
    con.execute("INSERT INTO t VALUES " + PEOPLE_ROWS)


PEOPLE_POLICY = {"tables": {"t": {"privacy_unit": "row", "columns": {
    "age": {"type": "int", "lower": 0, "upper": 100},
    "sex": {"type": "int", "lower": 1, "upper": 2, "public_values": [1, 2]},
    "educ": {"type": "int", "lower": 0, "upper": 4, "public_values": [0, 1, 2, 3, 4]},
    "s": {"type": "str", "public_values": ["a", "A", "b", "a "]},
    "d": {"type": "date", "lower": "2000-01-01", "upper": "2030-01-01"},
    "ts": {"type": "timestamp"},
    "x": {"type": "float", "lower": -10, "upper": 10},
    "b": {"type": "bool"},
    "code": {"type": "str"}, "big": {"type": "int"}, "pat": {"type": "str"},
    "unit": {"type": "str"},
    "z": {"type": "int", "lower": -5, "upper": 5}}}}}


def _strings(con: duckdb.DuckDBPyConnection, collation: str | None) -> None:
    coll = f" COLLATE {collation}" if collation else ""
    con.execute(f"CREATE TABLE c(s VARCHAR{coll}, age INTEGER)")
    con.execute("INSERT INTO c VALUES ('a', 1), ('A', 2), ('b', 3), ('é', 4), ('e', 5), "
                "('B', 6), ('a', 7)")
    con.execute("CREATE TABLE pub(code VARCHAR COLLATE NOCASE, label VARCHAR)")
    con.execute("INSERT INTO pub VALUES ('a', 'lower'), ('b', 'bee')")
    con.execute("CREATE TABLE pub2(code VARCHAR COLLATE NOCASE, label VARCHAR)")
    con.execute("INSERT INTO pub2 VALUES ('a', 'lower'), ('A', 'upper')")


STRINGS_POLICY = {"tables": {
    "c": {"privacy_unit": "row", "columns": {
        "s": {"type": "str", "public_values": ["a", "A", "b", "B", "e", "é"]},
        "age": {"type": "int", "lower": 0, "upper": 10}}},
    "pub": {"public": True}, "pub2": {"public": True}}}


def _joins(con: duckdb.DuckDBPyConnection, collation: str | None) -> None:
    con.execute("CREATE TABLE v(hid BIGINT, hs VARCHAR, tsv TIMESTAMP, dv DATE, age INTEGER)")
    con.execute("""INSERT INTO v VALUES
        (1, '1', TIMESTAMP '2020-01-01 00:00:00', DATE '2020-01-01', 30),
        (2, '2', TIMESTAMP '2020-01-01 10:00:00', DATE '2020-01-02', 40),
        (5, '5', TIMESTAMP '2020-01-02 00:00:00', DATE '2020-01-02', 50),
        (5, '05', TIMESTAMP '2021-01-01 00:00:00', DATE '2262-04-12', 60),
        (3, 'x', NULL, DATE '5877642-06-25', 70)""")
    con.execute("CREATE TABLE hosp(id BIGINT, region VARCHAR)")
    con.execute("INSERT INTO hosp VALUES (1, 'N'), (2, 'S'), (3, 'N'), (5, 'E')")
    con.execute("CREATE TABLE hosp_dup(id BIGINT, region VARCHAR)")
    con.execute("INSERT INTO hosp_dup VALUES (1, 'N'), (1, 'S'), (2, 'S')")
    # unique as text, not as numbers: '5', '05' and ' 5' are all 5 as BIGINT
    con.execute("CREATE TABLE hosp_str(id VARCHAR, region VARCHAR)")
    con.execute("INSERT INTO hosp_str VALUES ('5', 'E'), ('05', 'W'), (' 5', 'Z'), ('1', 'N')")
    con.execute("CREATE TABLE cal(day DATE, label VARCHAR)")
    con.execute("INSERT INTO cal VALUES (DATE '2020-01-01', 'new year'), "
                "(DATE '2020-01-02', 'second'), (DATE '2021-01-01', 'ny21')")
    # unique as timestamps, not as dates
    con.execute("CREATE TABLE calts(t TIMESTAMP, label VARCHAR)")
    con.execute("INSERT INTO calts VALUES (TIMESTAMP '2020-01-02 00:00:00', 'a'), "
                "(TIMESTAMP '2020-01-02 12:00:00', 'b')")


JOINS_POLICY = {"tables": {
    "v": {"privacy_unit": "row", "columns": {
        "hid": {"type": "int"}, "hs": {"type": "str"}, "tsv": {"type": "timestamp"},
        "dv": {"type": "date"}, "age": {"type": "int", "lower": 0, "upper": 100}}},
    "hosp": {"public": True}, "hosp_dup": {"public": True}, "hosp_str": {"public": True},
    "cal": {"public": True}, "calts": {"public": True}}}


def _wide(con: duckdb.DuckDBPyConnection, collation: str | None) -> None:
    con.execute("""CREATE TABLE w(ages VARCHAR, h HUGEINT, ub UBIGINT, dec DECIMAL(38,0),
        f DECIMAL(18,3), d DATE, ts TIMESTAMP, i32 INTEGER, dt VARCHAR)""")
    con.execute("""INSERT INTO w VALUES
     ('37', 170141183460469231731687303715884105727, 18446744073709551615,
      99999999999999999999999999999999999999, 123.456, DATE 'infinity', TIMESTAMP 'infinity',
      2147483647, '2020-01-01'),
     ('abc', -170141183460469231731687303715884105728, 0, -5, -0.001, DATE '-infinity',
      TIMESTAMP '-infinity', -2147483648, 'not a date'),
     (' 5', 5, 5, 5, 5.0, DATE '294248-01-01', TIMESTAMP '294247-01-10 04:00:54', 0,
      '2021-02-29'),
     ('5', 1, 1, 1, 1.0, DATE '5877642-06-25', TIMESTAMP '2020-01-01 00:00:00', 1, NULL),
     (NULL, 0, 9223372036854775808, 0, NULL, DATE '2020-01-01', NULL, NULL,
      '2020-01-01 10:00:00')""")


WIDE_POLICY = {"tables": {"w": {"privacy_unit": "row", "columns": {
    "ages": {"type": "int", "lower": 0, "upper": 100},
    "h": {"type": "int", "lower": -10, "upper": 10},
    "ub": {"type": "int", "lower": 0, "upper": 10},
    "dec": {"type": "int", "lower": -10, "upper": 10},
    "f": {"type": "float", "lower": -1000, "upper": 1000},
    "d": {"type": "date"}, "ts": {"type": "timestamp"},
    "i32": {"type": "int", "lower": 0, "upper": 10}, "dt": {"type": "date"}}}}}


def _crowd(con: duckdb.DuckDBPyConnection, collation: str | None) -> None:
    con.execute("CREATE TABLE u(pid INTEGER, age INTEGER, city VARCHAR, cost DOUBLE, "
                "sex INTEGER, day DATE)")
    # 300 people with two rows each in one common city; three rare rows of two people
    con.execute("INSERT INTO u SELECT i % 300, 30, 'common', 10.0, 1 + i % 2, "
                "DATE '2020-01-01' + CAST(i % 3 AS INTEGER) FROM range(600) r(i)")
    con.execute("INSERT INTO u VALUES (1000, 99, 'SECRET_Zq9', 5.0, 1, DATE '1999-12-31'), "
                "(1000, 99, 'SECRET_Zq9', 5.0, 1, DATE '1999-12-31'), "
                "(1001, 98, 'SECRET_Zq9x', 1.0, 2, DATE '1999-11-30')")


CROWD_POLICY = {"tables": {"u": {"privacy_unit": "pid", "max_rows_per_unit": 2, "columns": {
    "pid": {"type": "int"}, "age": {"type": "int", "lower": 0, "upper": 100},
    "city": {"type": "str"}, "cost": {"type": "float", "lower": 0, "upper": 100},
    "sex": {"type": "int", "public_values": [1, 2]}, "day": {"type": "date"}}}}}


@dataclass(frozen=True)
class Fixture:
    build: Callable[[duckdb.DuckDBPyConnection, str | None], None]
    policy: Mapping[str, Any]
    budget: Any


FIXTURES: dict[str, Fixture] = {
    "people": Fixture(_people, PEOPLE_POLICY, pp.PureDP(10)),
    "strings": Fixture(_strings, STRINGS_POLICY, pp.PureDP(10)),
    "joins": Fixture(_joins, JOINS_POLICY, pp.PureDP(10)),
    "wide": Fixture(_wide, WIDE_POLICY, pp.PureDP(10)),
    "crowd": Fixture(_crowd, CROWD_POLICY, pp.ApproxDP(10, 1e-4)),
}


_SHARED: dict[str, duckdb.DuckDBPyConnection] = {}


def _merge(base: Any, patch: Any) -> Any:
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(patch)


def privacy_value(kind: type, spec: Any) -> Any:
    """``0.5`` → the session kind with that ε (δ=0 for ApproxDP); ``[ε, δ]``; ``{rho: ..}``."""
    if isinstance(spec, Mapping):
        if "rho" in spec:
            return pp.ZCDP(spec["rho"])
        if "mu" in spec:
            return pp.GDP(spec["mu"])
        spec = [spec["epsilon"], spec.get("delta", 0)]
    if isinstance(spec, list):
        return pp.ApproxDP(spec[0], spec[1])
    return pp.ApproxDP(spec, 0) if kind is pp.ApproxDP else kind(spec)


def _session_budget(spec: Any) -> Any:
    name, *args = spec
    return {"PureDP": pp.PureDP, "ApproxDP": pp.ApproxDP, "ZCDP": pp.ZCDP,
            "GDP": pp.GDP}[name](*args)


class Context:
    """One attack's world: a fixture connection and a session (reopened over the same durable
    ledger when a step says ``new_session``)."""

    def __init__(self, entry: Mapping[str, Any], tmp_path: Path) -> None:
        self.entry = entry
        self.fixture = FIXTURES[entry.get("fixture", "people")]
        self.settings = list(entry.get("settings", ()))
        self.collation = entry.get("collation")
        self.policy = _merge(self.fixture.policy, entry.get("policy_patch", {}))
        opts = entry.get("session", {})
        self.budget = (_session_budget(opts["budget"]) if "budget" in opts
                       else self.fixture.budget)
        self.kind = type(self.budget)
        self.ledger = str(tmp_path / "ledger.sqlite") if opts.get("ledger") == "durable" else None
        self.prepare = bool(opts.get("prepare", False))
        self.tmp_path = tmp_path
        self.sess = self.open()

    def connection(self) -> duckdb.DuckDBPyConnection:
        """A connection to the fixture's data. Without settings or a collation, a cursor on one
        shared, read-only-by-contract database per fixture (a new DuckDB instance costs ~20 ms;
        privplan refuses every statement that could change data); otherwise a database of its
        own (settings such as default_collation are global to a DuckDB instance)."""
        if not self.settings and self.collation is None:
            name = self.entry.get("fixture", "people")
            if name not in _SHARED:
                base = duckdb.connect(":memory:")
                self.fixture.build(base, None)
                _SHARED[name] = base
            return _SHARED[name].cursor()
        con = duckdb.connect(":memory:")
        for s in self.settings:
            con.execute(s)
        self.fixture.build(con, self.collation)
        return con

    def open(self, *, fresh_ledger: bool = False) -> pp.Session:
        return pp.connect(self.connection(), policy=self.policy, budget=self.budget,
                          ledger=None if fresh_ledger else self.ledger, prepare=self.prepare)

    def reopen(self) -> None:
        self.sess.close()
        self.sess = self.open()

    def plain(self, sql: str) -> list[tuple[Any, ...]]:
        con = self.connection()
        try:
            return [tuple(r) for r in con.execute(sql).fetchall()]
        finally:
            con.close()


# ------------------------------------------------------------------------------------------
# outcomes and comparisons
# ------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None


def attempt(fn: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(value=fn())
    except BaseException as err:  # noqa: BLE001 - classified by the caller
        return Outcome(error=err)


def error_class(name: str) -> type[BaseException]:
    for module in (pp_errors, dbapi):
        if hasattr(module, name):
            return getattr(module, name)
    raise KeyError(f"unknown error class {name!r} in the attack table")


def describe(err: BaseException | None) -> str:
    return "no error" if err is None else f"{type(err).__name__}: {err}"


def check_error_is_clean(err: BaseException | None, where: str) -> None:
    """Only PrivplanErrors escape, and none quotes private values."""
    if err is None:
        return
    assert isinstance(err, pp.PrivplanError), (
        f"{where} raised a raw {type(err).__name__} (every input must end in a PrivplanError):"
        f" {err!r}")
    assert SENTINEL not in str(err), f"{where}: the error message quotes private data: {err}"


def norm(v: Any) -> Any:
    """Values of DuckDB rows, pandas cells and YAML alike: None for missing, Python numbers,
    temporal values as ISO text (a midnight timestamp as its date)."""
    if v is None or v is pd.NaT or v is pd.NA:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, pd.Timestamp):
        v = v.to_pydatetime()
    if isinstance(v, dt.datetime):
        return v.date().isoformat() if v.time() == dt.time(0) else v.isoformat(sep=" ")
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def same(a: Any, b: Any) -> bool:
    a, b = norm(a), norm(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b  # True is not 1: a key's type is part of what is released
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, repr(type(v)) if v is not None else "", str(v)) for v in
                 (norm(x) for x in row))


def assert_rows(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], *, ordered: bool,
                what: str) -> None:
    g = list(got) if ordered else sorted(got, key=_sort_key)
    w = list(want) if ordered else sorted(want, key=_sort_key)
    ok = len(g) == len(w) and all(len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
                                  for a, b in zip(g, w))
    assert ok, (f"{what}: released rows differ\n  released: {[tuple(map(norm, r)) for r in g]}"
                f"\n  expected: {[tuple(map(norm, r)) for r in w]}")


def released_rows(df: pd.DataFrame) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.itertuples(index=False, name=None)]


def epsilon_of_std(std: float, sensitivity: float = 1.0) -> float:
    """The ε of a discrete Laplace mechanism with noise standard deviation ``std``.

    Its parameter p = exp(-ε/Δ) has variance 2p/(1-p)², so p solves σ²p² - 2(σ²+1)p + σ² = 0;
    ε = -Δ·ln p. A black-box reading of what the noise really spends, independent of
    privplan's own accounting."""
    s2 = std * std
    p = ((s2 + 1) - math.sqrt(2 * s2 + 1)) / s2
    return -sensitivity * math.log(p)


# ------------------------------------------------------------------------------------------
# query steps
# ------------------------------------------------------------------------------------------

_EVAL_NS = {"Decimal": decimal.Decimal, "Fraction": Fraction, "np": np, "math": math,
            "float": float, "pp": pp}


def step_sql(step: Mapping[str, Any]) -> str:
    if "sql_py" in step:
        return eval(step["sql_py"], dict(_EVAL_NS))
    return step["sql"]


def step_budget(step: Mapping[str, Any]) -> dict[str, Any]:
    if "budget_py" in step:
        return eval(step["budget_py"], dict(_EVAL_NS))
    return dict(step.get("budget", {"epsilon": 0.5}))


def choose(expect: Mapping[str, Any], raised: bool) -> Mapping[str, Any]:
    if "either" not in expect:
        return expect
    for alt in expect["either"]:
        if ("refused" in alt) == raised:
            return alt
    return expect["either"][0]


def check_refused(alt: Mapping[str, Any], out: Outcome, explained: Outcome, before: Any,
                  after: Any, label: str) -> None:
    names = alt["refused"] if isinstance(alt["refused"], list) else [alt["refused"]]
    classes = tuple(error_class(n) for n in names)
    assert out.error is not None, (
        f"{label}: expected a refusal ({'/'.join(names)}), but it was answered: "
        f"cost {out.value.cost!r}, rows {released_rows(out.value.df)}")
    assert isinstance(out.error, classes), (
        f"{label}: expected {'/'.join(names)}, got {describe(out.error)} "
        f"(spent {before.describe()} -> {after.describe()})")
    fragments = alt.get("match", [])
    for frag in [fragments] if isinstance(fragments, str) else fragments:
        assert frag.lower() in str(out.error).lower(), (
            f"{label}: message lacks {frag!r}: {out.error}")
    if "charged" in alt:
        # a failure that depends on the noisy answers themselves (post-processing of released
        # values): charged, admissible for explain, and its message may quote released values
        want = privacy_value(type(before), alt["charged"])
        assert after == before + want, (
            f"{label}: spent {before.describe()} -> {after.describe()}, expected a charge of "
            f"{want.describe()}")
        assert explained.error is None, f"{label}: explain refused: {describe(explained.error)}"
        return
    assert after == before, (
        f"{label}: a refusal spent budget: {before.describe()} -> {after.describe()} "
        f"({describe(out.error)})")
    if isinstance(out.error, pp.BudgetExceededError):
        assert explained.error is None, f"{label}: explain refused: {describe(explained.error)}"
        assert explained.value.within_budget is False, f"{label}: explain says within budget"
    else:
        assert explained.error is not None, (
            f"{label}: explain accepted a query that sql refuses ({describe(out.error)})")
        assert type(explained.error) is type(out.error), (
            f"{label}: explain and sql disagree: explain {describe(explained.error)}, "
            f"sql {describe(out.error)}")


def check_answered(ctx: Context, step: Mapping[str, Any], alt: Mapping[str, Any], out: Outcome,
                   explained: Outcome, before: Any, after: Any, label: str, sql: str,
                   budget: dict[str, Any]) -> None:
    assert out.error is None, (
        f"{label}: expected an answer, got {describe(out.error)} "
        f"(spent {before.describe()} -> {after.describe()})")
    res = out.value
    assert explained.error is None, (
        f"{label}: sql answered but explain refused: {describe(explained.error)}")
    assert explained.value.marginal == res.cost, (
        f"{label}: explain projected {explained.value.marginal!r}, sql charged {res.cost!r}")
    assert after == before + res.cost, (
        f"{label}: spent {before.describe()} -> {after.describe()} but the answer says it "
        f"added {res.cost.describe()}")
    if "cost" in alt:
        want = privacy_value(ctx.kind, alt["cost"])
        assert res.cost == want, f"{label}: charged {res.cost!r}, expected {want!r}"
    if "spent" in alt:
        want = privacy_value(ctx.kind, alt["spent"])
        assert after == want, f"{label}: spent {after!r}, expected {want!r}"
    rows = released_rows(res.df)
    cols = list(res.df.columns)
    if "columns" in alt:
        assert cols == alt["columns"], f"{label}: columns {cols}, expected {alt['columns']}"
    for key_cols in ([alt["keys"]] if "keys" in alt else []):
        idx = [cols.index(k) for k in key_cols]
        keys = [tuple(norm(r[i]) for i in idx) for r in rows]
        dup = sorted({k for k in keys if keys.count(k) > 1}, key=str)
        assert not dup, (f"{label}: key(s) {dup} released more than once: "
                         f"{[tuple(map(norm, r)) for r in rows]}")
    compare = rows
    if "plain_skip_zero" in alt:
        i = cols.index(alt["plain_skip_zero"])
        compare = [r for r in rows if norm(r[i]) != 0]
    if "rows" in alt:
        assert_rows(compare, [tuple(r) for r in alt["rows"]],
                    ordered=bool(alt.get("ordered")), what=label)
    if "plain" in alt:
        assert_rows(compare, ctx.plain(alt["plain"]), ordered=bool(alt.get("ordered")),
                    what=f"{label} (vs plain DuckDB)")
    for col in alt.get("sorted_by", []):
        vals = [norm(r[cols.index(col)]) for r in rows]
        present = [v for v in vals if v is not None]
        assert present == sorted(present) and vals == present + [None] * (
            len(vals) - len(present)), f"{label}: rows not sorted by {col}: {vals}"
    mechs = explained.value.mechanisms
    if "mechanisms" in alt:
        want_m = alt["mechanisms"]
        got_m = [m.label for m in mechs]
        if isinstance(want_m, int):
            assert len(got_m) == want_m, f"{label}: mechanisms {got_m}, expected {want_m}"
        else:
            assert sorted(got_m) == sorted(want_m), f"{label}: mechanisms {got_m} != {want_m}"
    if "min_sensitivity" in alt:
        worst = max(m.sensitivity for m in mechs)
        assert worst >= alt["min_sensitivity"], (
            f"{label}: a private row reaches {alt['min_sensitivity']} released values but the "
            f"mechanisms' sensitivities are {[m.sensitivity for m in mechs]}")
    if "max_count_epsilon" in alt:
        for col in alt["max_count_epsilon_columns"]:
            eps = epsilon_of_std(res.accuracy[col].std)
            assert eps <= alt["max_count_epsilon"] * (1 + 1e-6), (
                f"{label}: column {col} is released with noise of ε={eps:.4g} per count, but a "
                f"row reaches several counts; at most {alt['max_count_epsilon']} is safe")
    if "same_aggregate" in alt:
        check_same_aggregate(ctx, alt["same_aggregate"], sql, budget, label)


def check_same_aggregate(ctx: Context, spec: Mapping[str, Any], sql: str,
                         budget: dict[str, Any], label: str) -> None:
    """Release the query once more with (seeded, deterministic) noise on a fresh session, and
    read the ε each released copy of one exact aggregate really carries from its noise. Copies
    with equal noisy values are one draw (post-processing); distinct draws compose. Their sum
    must not exceed what the query was charged."""
    sess = ctx.open(fresh_ledger=True)
    try:
        with seeded_noise(int(spec.get("seed", 11))):
            res = sess.sql(sql, **budget)
    finally:
        sess.close()
    charged = float(res.query_cost.epsilon)
    df = res.df
    groups: dict[tuple[Any, ...], dict[Any, float]] = {}
    per = list(spec.get("per", []))
    for r in df.to_dict("records"):
        key = tuple(norm(r[c]) for c in per)
        for col in spec["columns"]:
            acc = res.accuracy.get(col)
            assert acc is not None and acc.std, f"{label}: no noise std reported for {col}"
            groups.setdefault(key, {})[norm(r[col])] = acc.std
    assert groups, f"{label}: nothing released to check"
    for key, draws in groups.items():
        eps = sum(epsilon_of_std(s, float(spec.get("sensitivity", 1))) for s in draws.values())
        assert eps <= charged * (1 + 1e-6) + 1e-12, (
            f"{label}: one exact aggregate{' for ' + str(key) if per else ''} was released as "
            f"{len(draws)} independent draws worth ε={eps:.6g} in total, but the query was "
            f"charged ε={charged:g}")


def run_step(ctx: Context, step: Mapping[str, Any], label: str) -> None:
    if step.get("new_session"):
        ctx.reopen()
    sql = step_sql(step)
    budget = step_budget(step)
    before = ctx.sess.spent()
    explained = attempt(lambda: ctx.sess.explain(sql, **budget))
    assert ctx.sess.spent() == before, f"{label}: explain spent budget"
    with noise_disabled():
        out = attempt(lambda: ctx.sess.sql(sql, **budget))
    after_out = attempt(ctx.sess.spent)
    check_error_is_clean(after_out.error, f"{label}: spent() afterwards")
    after = after_out.value
    check_error_is_clean(explained.error, f"{label}: explain")
    check_error_is_clean(out.error, f"{label}: sql")
    alt = choose(step["expect"], out.error is not None)
    if "refused" in alt:
        check_refused(alt, out, explained, before, after, label)
    else:
        check_answered(ctx, step, alt, out, explained, before, after, label, sql, budget)


def run_query_attack(entry: Mapping[str, Any], tmp_path: Path) -> None:
    ctx = Context(entry, tmp_path)
    try:
        steps = entry.get("steps") or [entry]
        for i, step in enumerate(steps):
            run_step(ctx, step, f"[{entry['id']} step {i + 1}]")
    finally:
        ctx.sess.close()


# ------------------------------------------------------------------------------------------
# Python-level actions: pandas, DB-API, CLI, ledger files, sessions
# ------------------------------------------------------------------------------------------

def expect_refusal(fn: Callable[[], Any], spent: Callable[[], Any], expect: Mapping[str, Any],
                   label: str) -> BaseException:
    before = spent()
    out = attempt(fn)
    after = spent()
    names = expect["refused"] if isinstance(expect["refused"], list) else [expect["refused"]]
    classes = tuple(error_class(n) for n in names)
    assert out.error is not None, f"{label}: expected {names}, but it succeeded: {out.value!r}"
    assert isinstance(out.error, classes), f"{label}: expected {names}, got {describe(out.error)}"
    frags = expect.get("match", [])
    for frag in [frags] if isinstance(frags, str) else frags:
        assert frag.lower() in str(out.error).lower(), f"{label}: message lacks {frag!r}: " \
                                                       f"{out.error}"
    assert SENTINEL not in str(out.error), f"{label}: the message quotes private data"
    assert after == before, f"{label}: the refusal spent budget: {before!r} -> {after!r}"
    return out.error


def _frame(label: str, n: int = 40) -> pd.DataFrame:
    """A frame of its own for each attack (pandas recognises configured rows for the life of
    the process, so attacks must not share rows)."""
    rng = np.random.default_rng(zlib.crc32(label.encode()))
    return pd.DataFrame({
        "age": rng.integers(0, 100, n),
        "grp": pd.array(rng.choice(["a", "b"], n), dtype="string"),
        "w": np.where(rng.random(n) < 0.2, np.nan, rng.random(n)),
        "t": pd.to_datetime("2020-01-01") + pd.to_timedelta(rng.integers(0, 999, n), unit="D"),
        "flag": rng.random(n) < 0.5,
    })


def _configure(df: pd.DataFrame, **kw: Any) -> None:
    kw.setdefault("budget", pp.PureDP(1))
    df.dp.configure(**kw)


def _clear(d: pd.DataFrame) -> pd.DataFrame:
    d.attrs = {}
    return d


def _pop_marker(d: pd.DataFrame) -> pd.DataFrame:
    d.attrs.pop("privplan.dp", None)
    return d


def _fresh_copy(df: pd.DataFrame) -> pd.DataFrame:
    """The same rows in new memory, without the marker."""
    return pd.DataFrame({k: (v.to_numpy().copy() if v.dtype != "string"
                             else pd.array(list(v), dtype="string")) for k, v in df.items()})


DERIVATIONS: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "copy_attrs_cleared": lambda df: _clear(df.copy()),
    "deepcopy_attrs_cleared": lambda df: _clear(copy.deepcopy(df)),
    "attrs_marker_popped": lambda df: _pop_marker(df.copy()),
    "pd_dataframe_wrap": lambda df: pd.DataFrame(df),
    "to_dict_rebuild": lambda df: pd.DataFrame(df.to_dict()),
    "pickle_roundtrip": lambda df: _clear(pickle.loads(pickle.dumps(df))),
    "csv_roundtrip": lambda df: pd.read_csv(io.StringIO(df.to_csv(index=False)),
                                            dtype={"grp": "string"}, parse_dates=["t"]),
    "shuffled_rows": lambda df: _clear(_fresh_copy(df).sample(frac=1, random_state=3)),
    "reversed_reindexed": lambda df: _clear(_fresh_copy(df)[::-1].reset_index(drop=True)),
    "int_width_and_float": lambda df: _clear(_fresh_copy(df).astype({"age": "float64"})),
    "columns_renamed_case_reordered": lambda df: _clear(
        _fresh_copy(df).rename(columns=str.upper)[["W", "T", "FLAG", "GRP", "AGE"]]),
    "nullable_dtypes": lambda df: _clear(_fresh_copy(df).astype({"age": "Int64",
                                                                 "w": "Float64"})),
    "bool_as_int_ts_seconds": lambda df: _clear(_fresh_copy(df).astype(
        {"flag": "int64", "t": "datetime64[s]"})),
    "object_strings": lambda df: _clear(_fresh_copy(df).astype({"grp": object})),
}


def act_pandas_configure_derived(entry: Mapping[str, Any], tmp_path: Path) -> None:
    label = entry["id"]
    df = _frame(label)
    _configure(df, bounds={"age": (0, 100)})
    with noise_disabled():
        df.dp.sql("SELECT COUNT(*) AS n FROM df", epsilon=0.25)
    derived = DERIVATIONS[entry["args"]["derive"]](df)
    kw = {"types": {c: "str" for c in derived.columns if derived[c].dtype == object}}
    expect_refusal(lambda: derived.dp.configure(budget=pp.PureDP(1), **kw), df.dp.spent,
                   entry["expect"], label)
    assert df.dp.spent() == pp.PureDP(0.25), f"{label}: the original's budget changed"


def act_pandas_query_derived(entry: Mapping[str, Any], tmp_path: Path) -> None:
    label = entry["id"]
    df = _frame(label)
    _configure(df, bounds={"age": (0, 100)})
    derived = {"copy": lambda: df.copy(), "mask": lambda: df[df.age > df.age.mean()],
               "head": lambda: df.head(10), "concat_self": lambda: pd.concat([df, df]),
               "column_selection": lambda: df[["age", "grp"]],
               "groupby_sum": lambda: df.groupby("grp").sum(numeric_only=True)
               }[entry["args"]["derive"]]()
    expect_refusal(lambda: derived.dp.sql("SELECT COUNT(*) AS n FROM df", epsilon=0.1),
                   df.dp.spent, entry["expect"], label)
    assert derived.dp.spent() == df.dp.spent() == pp.PureDP(0), \
        f"{label}: a derived frame must report the shared (unchanged) budget"


def act_pandas_reconfigure(entry: Mapping[str, Any], tmp_path: Path) -> None:
    label = entry["id"]
    df = _frame(label)
    _configure(df)
    expect_refusal(lambda: _configure(df, budget=pp.PureDP(100)), df.dp.spent,
                   entry["expect"], label)
    assert df.dp.remaining() == pp.PureDP(1), f"{label}: the budget was replaced"


def act_pandas_after_gc(entry: Mapping[str, Any], tmp_path: Path) -> None:
    import gc

    label = entry["id"]
    df = _frame(label)
    _configure(df)
    saved = _fresh_copy(df)
    del df
    gc.collect()
    expect_refusal(lambda: _configure(saved), lambda: None, entry["expect"], label)


def act_pandas_ledger(entry: Mapping[str, Any], tmp_path: Path) -> None:
    """A copy of configured rows with the first configuration's durable ledger shares its one
    budget; with another ledger file it is refused."""
    label = entry["id"]
    df = _frame(label)
    _configure(df, ledger=str(tmp_path / "first.sqlite"))
    with noise_disabled():
        df.dp.sql("SELECT COUNT(*) AS n FROM df", epsilon=0.25)
    d = _fresh_copy(df)
    if entry["args"]["ledger"] == "same":
        _configure(d, ledger=str(tmp_path / "first.sqlite"))
        assert d.dp.spent() == pp.PureDP(0.25), f"{label}: the copy got a fresh budget"
        with noise_disabled():
            d.dp.sql("SELECT COUNT(*) AS n FROM df", epsilon=0.25)
        assert df.dp.spent() == d.dp.spent() == pp.PureDP(0.5), f"{label}: budgets diverged"
        assert d.dp.remaining() == pp.PureDP(0.5)
    elif entry["args"]["ledger"] == "same_bigger_budget":
        expect_refusal(lambda: _configure(d, budget=pp.PureDP(100),
                                          ledger=str(tmp_path / "first.sqlite")),
                       df.dp.spent, entry["expect"], label)
    else:
        expect_refusal(lambda: _configure(d, ledger=str(tmp_path / "other.sqlite")),
                       df.dp.spent, entry["expect"], label)


def act_pandas_edit_in_place(entry: Mapping[str, Any], tmp_path: Path) -> None:
    label = entry["id"]
    df = _frame(label)
    truth = int(np.clip(df["age"], 0, 100).sum())
    _configure(df, bounds={"age": (0, 100)}, budget=pp.PureDP(10))
    df.loc[0, "age"] = 100
    df["age"] = 0
    with noise_disabled():
        out = df.dp.sql("SELECT SUM(age) AS s FROM df", epsilon=0.5)
    assert int(out["s"].iloc[0]) == truth, f"{label}: answered the edited frame"
    assert out.attrs["privplan_cost"] == pp.PureDP(0.5)


def act_pandas_call(entry: Mapping[str, Any], tmp_path: Path) -> None:
    """A df.dp call (where / helpers) that must be refused and spend nothing."""
    label = entry["id"]
    df = _frame(label)
    _configure(df, bounds={"age": (0, 100)}, public_values={"grp": ["a", "b"]},
               budget=pp.PureDP(10))
    a = entry["args"]
    call = {
        "where_count": lambda: df.dp.where(a["predicate"]).count(epsilon=0.1),
        "count_by": lambda: df.dp.count(by=a["by"], epsilon=0.1),
        "sum": lambda: df.dp.sum(a["column"], epsilon=0.1),
        "mean": lambda: df.dp.mean(a["column"], epsilon=0.1),
        "sql": lambda: df.dp.sql(a["sql"], **a.get("budget", {"epsilon": 0.1})),
    }[a["call"]]
    expect_refusal(call, df.dp.spent, entry["expect"], label)


def act_pandas_where_disjoint(entry: Mapping[str, Any], tmp_path: Path) -> None:
    """where views compose in parallel only when they are disjoint: a view that overlaps pays."""
    label = entry["id"]
    df = _frame(label)
    _configure(df, bounds={"age": (0, 100)}, budget=pp.PureDP(10))
    with noise_disabled():
        a = df.dp.where("age < 50").count(epsilon=0.5)
        b = df.dp.where("age >= 50").count(epsilon=0.5)
        c = df.dp.where("age >= 40").count(epsilon=0.5)
    assert a.attrs["privplan_cost"] == pp.PureDP(0.5)
    assert b.attrs["privplan_cost"] == pp.PureDP(0)
    assert c.attrs["privplan_cost"] == pp.PureDP(0.5), "overlapping where views must pay"
    assert int(a["count"].iloc[0]) == int((df.age < 50).sum())
    assert int(c["count"].iloc[0]) == int((df.age >= 40).sum())
    assert df.dp.spent() == pp.PureDP(1.0)


def _dbapi_connect(entry: Mapping[str, Any]) -> Any:
    con = duckdb.connect(":memory:")
    _people(con, None)
    return dbapi.connect(con, policy=PEOPLE_POLICY, budget=pp.PureDP(10), epsilon=0.5)


def act_dbapi(entry: Mapping[str, Any], tmp_path: Path) -> None:
    label = entry["id"]
    a, expect = entry["args"], entry["expect"]
    con = _dbapi_connect(entry)
    try:
        cur = con.cursor()
        kwargs = a.get("budget", {})
        if a.get("many"):
            fn = lambda: cur.executemany(a["sql"], a["params"])
        elif a.get("rollback"):
            fn = con.rollback
        else:
            fn = lambda: (cur.execute(a["sql"], a.get("params", ()), **kwargs),
                          cur.fetchall())[1]
        if "refused" in expect:
            err = expect_refusal(fn, con.session.spent, expect, label)
            if "cause" in expect:
                cause = getattr(err, "privplan_error", None)
                assert isinstance(cause, error_class(expect["cause"])), (
                    f"{label}: cause {describe(cause)}, expected {expect['cause']}")
        else:
            before = con.session.spent()
            with noise_disabled():
                rows = fn()
            assert_rows([tuple(r) for r in rows], [tuple(r) for r in expect["rows"]],
                        ordered=False, what=label)
            assert con.session.spent() == before + pp.PureDP(expect["cost"])
    finally:
        con.close()


def act_cli(entry: Mapping[str, Any], tmp_path: Path) -> None:
    """``privplan query``: a refused input exits with a usage error (2), a one-line
    'privplan: ...' message and no traceback, and leaves the ledger as it was."""
    from privplan.cli import main

    label = entry["id"]
    a, expect = entry["args"], entry["expect"]
    db = tmp_path / "cli.duckdb"
    con = duckdb.connect(str(db))
    _people(con, None)
    con.close()
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(PEOPLE_POLICY, allow_unicode=True))
    ledger = tmp_path / "cli-ledger.sqlite"

    def spent() -> Any:
        if not ledger.exists():
            return pp.PureDP(0)
        with pp.connect(":memory:", policy=str(policy), budget=pp.PureDP(10),
                        ledger=str(ledger)) as s:
            return s.spent()

    def run(argv: list[str]) -> tuple[Any, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = attempt(lambda: main(argv))
        return rc, out.getvalue(), err.getvalue()

    base = ["query", a["sql"], "--database", str(db), "--policy", str(policy),
            "--ledger", str(ledger)]
    # a first, valid query makes the ledger exist (and records the budget ε=10)
    rc, _, err = run(["query", "SELECT COUNT(*) AS n FROM t"] + base[2:]
                     + ["--total", "10", "--epsilon", "0.5"])
    assert rc.value == 0, f"{label}: setup query failed: {describe(rc.error)} {err}"
    before = spent()
    rc, _, err = run(base[:1] + [a["sql"]] + base[2:] + ["--total", "10"] + a.get("argv", []))
    after = spent()
    assert rc.error is None, (
        f"{label}: the CLI crashed with a raw {type(rc.error).__name__}: {rc.error} "
        "(a bad input must end in 'privplan: <error>' and exit code 2)")
    assert rc.value == expect["exit"], f"{label}: exit code {rc.value}, stderr {err!r}"
    assert "Traceback" not in err, f"{label}: traceback printed: {err}"
    if "match" in expect:
        assert expect["match"].lower() in err.lower(), f"{label}: stderr lacks " \
                                                       f"{expect['match']!r}: {err!r}"
    assert SENTINEL not in err
    assert after == before, f"{label}: the refused CLI query spent {before!r} -> {after!r}"


def act_ledger_file(entry: Mapping[str, Any], tmp_path: Path) -> None:
    label = entry["id"]
    path = tmp_path / "ledger.sqlite"
    kind = entry["args"]["kind"]

    def session(budget: Any = None, policy: Any = PEOPLE_POLICY) -> pp.Session:
        con = duckdb.connect(":memory:")
        _people(con, None)
        return pp.connect(con, policy=policy, budget=budget or pp.PureDP(10), ledger=str(path))

    if kind == "corrupt":
        path.write_bytes(b"this is not a sqlite database" * 100)
        expect_refusal(session, lambda: None, entry["expect"], label)
        assert path.read_bytes() == b"this is not a sqlite database" * 100, \
            f"{label}: a damaged ledger was modified (it must never be reset)"
        return
    with session() as s, noise_disabled():
        s.sql("SELECT COUNT(*) AS n FROM t", epsilon=0.5)
    if kind == "budget_mismatch":
        expect_refusal(lambda: session(pp.PureDP(1000)), lambda: None, entry["expect"], label)
    elif kind == "kind_mismatch":
        expect_refusal(lambda: session(pp.ZCDP(1)), lambda: None, entry["expect"], label)
    elif kind == "policy_mismatch":
        other = _merge(PEOPLE_POLICY, {"tables": {"t": {"columns": {
            "age": {"upper": 1000}}}}})
        expect_refusal(lambda: session(policy=other), lambda: None, entry["expect"], label)
    with session() as s:
        assert s.spent() == pp.PureDP(0.5), f"{label}: the ledger lost its history"


def act_zero_budget_session(entry: Mapping[str, Any], tmp_path: Path) -> None:
    label = entry["id"]
    con = duckdb.connect(":memory:")
    _people(con, None)
    with pp.connect(con, policy=PEOPLE_POLICY, budget=pp.PureDP(0)) as s:
        expect_refusal(lambda: s.sql("SELECT COUNT(*) AS n FROM t", epsilon=1e-9), s.spent,
                       entry["expect"], label)


def act_connect(entry: Mapping[str, Any], tmp_path: Path) -> None:
    label = entry["id"]
    con = duckdb.connect(":memory:")
    _people(con, None)
    budget = eval(entry["args"]["budget_py"], dict(_EVAL_NS))
    expect_refusal(lambda: pp.connect(con, policy=PEOPLE_POLICY, budget=budget),
                   lambda: None, entry["expect"], label)


def act_closed_session(entry: Mapping[str, Any], tmp_path: Path) -> None:
    label = entry["id"]
    con = duckdb.connect(":memory:")
    _people(con, None)
    s = pp.connect(con, policy=PEOPLE_POLICY, budget=pp.PureDP(10))
    s.close()
    expect_refusal(lambda: s.sql("SELECT COUNT(*) AS n FROM t", epsilon=0.5), lambda: None,
                   entry["expect"], label)


ACTIONS: dict[str, Callable[[Mapping[str, Any], Path], None]] = {
    "pandas_configure_derived": act_pandas_configure_derived,
    "pandas_query_derived": act_pandas_query_derived,
    "pandas_reconfigure": act_pandas_reconfigure,
    "pandas_after_gc": act_pandas_after_gc,
    "pandas_ledger": act_pandas_ledger,
    "pandas_edit_in_place": act_pandas_edit_in_place,
    "pandas_call": act_pandas_call,
    "pandas_where_disjoint": act_pandas_where_disjoint,
    "dbapi": act_dbapi,
    "cli": act_cli,
    "ledger_file": act_ledger_file,
    "zero_budget_session": act_zero_budget_session,
    "connect": act_connect,
    "closed_session": act_closed_session,
}


# ------------------------------------------------------------------------------------------
# the table and the test
# ------------------------------------------------------------------------------------------

def load_attacks() -> list[dict[str, Any]]:
    attacks: list[dict[str, Any]] = []
    for path in sorted(DATA.glob("attacks_*.yaml")):
        for entry in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            entry["_file"] = path.name
            attacks.append(entry)
    ids = [a["id"] for a in attacks]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate attack ids: {sorted(dup)}"
    for a in attacks:
        assert a.get("class") in CLASSES, f"{a['id']}: unknown class {a.get('class')!r}"
        assert ("action" in a) != ("sql" in a or "sql_py" in a or "steps" in a), \
            f"{a['id']}: give a query (sql/sql_py/steps) or an action"
        if "action" in a:
            assert a["action"] in ACTIONS, f"{a['id']}: unknown action {a['action']!r}"
        steps = a.get("steps") or ([a] if "action" not in a else [])
        for s in steps:
            assert "expect" in s, f"{a['id']}: a step without an expected outcome"
        if "action" in a:
            assert "expect" in a, f"{a['id']}: an action without an expected outcome"
    return attacks


ATTACKS = load_attacks()


def test_attack_table_is_large_and_covers_every_class() -> None:
    counts = {c: sum(a["class"] == c for a in ATTACKS) for c in CLASSES}
    assert len(ATTACKS) >= 130, counts
    assert all(n >= 5 for n in counts.values()), counts


@pytest.mark.invariant(5)
@pytest.mark.invariant(8)
@pytest.mark.parametrize("entry", [pytest.param(a, id=f"{a['class']}:{a['id']}")
                                   for a in ATTACKS])
def test_attack(entry: dict[str, Any], tmp_path: Path) -> None:
    if "action" in entry:
        ACTIONS[entry["action"]](entry, tmp_path)
    else:
        run_query_attack(entry, tmp_path)


if __name__ == "__main__":  # pragma: no cover - a per-class summary for humans
    import collections

    print(len(ATTACKS), dict(collections.Counter(a["class"] for a in ATTACKS)))
