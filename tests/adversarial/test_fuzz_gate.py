"""Fuzz of the surfaces the pre-charge gate guards: quantiles, nested SELECTs, BigQuery's
``DIFFERENTIAL_PRIVACY`` clause and the outer query, each query on *neighbouring* datasets.

The invariant (DESIGN.md §4, invariants 7 and 8; ``test_fuzz.py`` states it for the whole
boundary): every query ends in a ``PrivplanError`` or a correctly charged answer, and never in a
failure after the charge that depends on the data. Here it is checked explicitly: each generated
query runs on a base dataset and on the base plus one row of edge values (NULL, extremes,
NaN/±inf, subnormals, odd strings, 37s: :mod:`tests.adversarial._gate_fuzz_data`), with the
same seeded noise, and both must end alike — refused free on both (same class and message), or
answered on both with equal charges and equal ``spent()``. An answer on one and a
``PostProcessingError`` on the other is allowed only when re-runs with other noise flip it (the
outer query's failure follows the noisy values); see :mod:`tests.adversarial._gate_fuzz_run`.

The generators (:mod:`tests.adversarial._gate_fuzz_grammar`) cover the classes of the one-bit
leaks reviewers found there (q arithmetic overflow, IS TRUE's implicit casts, a quantile grid
narrower than its floats, outer queries that fail on every answer) and the same surfaces on
PostgreSQL (an unconstrained numeric beyond double range) and Spark (strings that are not
UTF-8). Deterministic: fixed seeds; a fast subset runs in the normal suite, a larger run is
marked slow. ``python -m tests.adversarial.test_fuzz_gate [cls] [n] [seed]`` prints the report
of a DuckDB run.
"""

from __future__ import annotations

import random
import re
import sys
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privplan as pp
from tests.adversarial._gate_fuzz_data import (
    EDGES,
    ENGINE_COLUMNS,
    Q_COLUMNS,
    DatasetSpec,
    duckdb_connection,
    policy_dict,
)
from tests.adversarial._gate_fuzz_engines import PG_EDGES, SPARK_EDGES, pg_maker, spark_maker
from tests.adversarial._gate_fuzz_grammar import PINNED, Gen
from tests.adversarial._gate_fuzz_run import Batch, Report, format_report, run_batches
from tests.servers import need
from tests.servers.postgres_server import pg_url  # noqa: F401  (fixture)

CLASSES = ("quantile", "nested", "bigquery", "outer")
BATCH = 12
FAST_QUERIES = {"quantile": 30, "nested": 16, "bigquery": 30, "outer": 16}
SLOW_QUERIES = {"quantile": 120, "nested": 60, "bigquery": 120, "outer": 60}
"""(~0.3 s a query pair on DuckDB with the gate: about 2 min of CI for the four; the module's
``__main__`` runs any size)"""
ENGINE_QUERIES = {"postgres": 40, "spark": 12}
"""Queries per class (quantile, bigquery) on the other engines (Spark: about 1 s a query)."""
SEEDS = {"quantile": 101, "nested": 202, "bigquery": 303, "outer": 404}

KINDS = [  # (weight, session budget, a query's budget keywords)
    (6, pp.ApproxDP(1e9, 0.5), {"epsilon": 1, "delta": 1e-6}),
    (2, pp.PureDP(1e9), {"epsilon": 1}),
    (1, pp.ZCDP(1e9), {"rho": 0.5}),
    (1, pp.GDP(1e6), {"mu": 1}),
]


def make_batches(cls: str, n: int, seed: int, edges: dict[str, list[str]] | None = None,
                 bases: tuple[str, ...] = ("small", "small", "empty"), batch: int = BATCH,
                 engine: str = "duckdb") -> list[Batch]:
    """``n`` queries of class ``cls`` in batches of ``batch``; each batch picks a base, one
    edge row per table (cycled, so every edge row is met) and a session kind. On another
    engine, queries naming a column its tables lack are drawn again, and PostgreSQL's
    ``numeric`` column joins the numeric ones."""
    rng = random.Random(seed)
    gen = Gen(random.Random(rng.random()))
    skip: set[str] = set()
    if engine != "duckdb":
        cols = ENGINE_COLUMNS[engine]["q"]
        skip = {c for c in Q_COLUMNS if c not in cols}
        gen.numeric = tuple(c for c in gen.numeric if c in cols) + \
            (("pn",) if "pn" in cols else ())
        gen.bounds["pn"] = (-1e6, 1e6)
    edges = edges or {t: sorted(e) for t, e in EDGES.items()}
    batches = []
    pinned = list(PINNED[cls])
    for b in range((n + batch - 1) // batch):
        _, total, keywords = rng.choices(KINDS, weights=[k[0] for k in KINDS])[0]
        picked = {t: names[(b + rng.randrange(2)) % len(names)] for t, names in edges.items()}
        if pinned:  # (the pinned queries: an (ε, δ) session, the 37s rows)
            _, total, keywords = KINDS[0]
            picked = {t: "37s" if "37s" in names else names[0] for t, names in edges.items()}
        cases = []
        while pinned and len(cases) < min(batch, n - b * batch):
            sql = pinned.pop(0)
            cases.append(gen.case(cls, sql, {} if "DIFFERENTIAL_PRIVACY" in sql else
                                  dict(keywords), _pinned_bounds(sql, gen.bounds)))
        while len(cases) < min(batch, n - b * batch):
            case = getattr(gen, cls)(dict(keywords))
            if not any(re.search(rf"\b{c}\b", case.sql) for c in skip):
                cases.append(case)
        batches.append(Batch(bases[b % len(bases)], picked, total, cases))
    return batches


_QUANTILE_AS = re.compile(r"(?:MEDIAN|MIN|MAX|QUANTILE_CONT|QUANTILE_DISC|APPROX_QUANTILE)"
                          r"\((\w+)(?:, [\d.e-]+)?\) AS (m\d)|WITHIN GROUP \(ORDER BY (\w+)\) "
                          r"AS (m\d)")


def _pinned_bounds(sql: str, bounds: dict[str, tuple[float, float]]
                   ) -> dict[str, tuple[float, float]]:
    """The bounds of a pinned query's plain quantile outputs (``MEDIAN(nr) AS m0``)."""
    if "DIFFERENTIAL_PRIVACY" in sql:
        return {}
    out = {}
    for m in _QUANTILE_AS.finditer(sql):
        column, alias = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        if column in bounds and column != "sb":
            out[alias] = bounds[column]
    return out


_POLICY: dict[str, pp.Policy] = {}


def policy(engine: str = "duckdb") -> pp.Policy:
    if engine not in _POLICY:
        _POLICY[engine] = pp.Policy.from_dict(policy_dict(engine))
    return _POLICY[engine]


def duckdb_session(spec: DatasetSpec, budget: Any) -> pp.Session:
    return pp.connect(duckdb_connection(spec), policy=policy(), budget=budget)


def fuzz_duckdb(cls: str, n: int, seed: int) -> Report:
    return run_batches(make_batches(cls, n, seed), duckdb_session)


def _check(report: Report) -> None:
    text = format_report(report)
    print(text)  # (counts, timings and notes: shown with -s)
    assert not report.failures, "gate fuzz failures:\n" + text


# -- DuckDB ------------------------------------------------------------------------------------


def test_generators_are_deterministic() -> None:
    for cls in CLASSES:
        a = [c.sql for b in make_batches(cls, 30, 7) for c in b.cases]
        assert a == [c.sql for b in make_batches(cls, 30, 7) for c in b.cases]
        assert len(set(a)) > 20, cls


@pytest.mark.invariant(2)
@pytest.mark.invariant(7)
@pytest.mark.invariant(8)
@pytest.mark.parametrize("cls", CLASSES)
def test_gate_fuzz_fast(cls: str) -> None:
    _check(fuzz_duckdb(cls, FAST_QUERIES[cls], SEEDS[cls]))


@pytest.mark.invariant(2)
@pytest.mark.invariant(7)
@pytest.mark.invariant(8)
@pytest.mark.slow
@pytest.mark.parametrize("cls", CLASSES)
def test_gate_fuzz_slow(cls: str) -> None:
    _check(fuzz_duckdb(cls, SLOW_QUERIES[cls], SEEDS[cls] * 1000 + 1))


# -- PostgreSQL and Spark: the quantile and BigQuery classes ----------------------------------


@pytest.mark.invariant(2)
@pytest.mark.invariant(7)
@pytest.mark.invariant(8)
@pytest.mark.slow
@pytest.mark.parametrize("cls", ["quantile", "bigquery"])
def test_gate_fuzz_postgres(cls: str, pg_url: str) -> None:  # noqa: F811
    need("psycopg")
    batches = make_batches(cls, ENGINE_QUERIES["postgres"], SEEDS[cls] + 7,
                           edges={t: sorted(e) for t, e in PG_EDGES.items()},
                           engine="postgres")
    _check(run_batches(batches, pg_maker(pg_url, policy("postgres")), "postgres"))


@pytest.mark.invariant(2)
@pytest.mark.invariant(7)
@pytest.mark.invariant(8)
@pytest.mark.slow
@pytest.mark.parametrize("cls", ["quantile", "bigquery"])
def test_gate_fuzz_spark(cls: str, spark: Any) -> None:
    pytest.importorskip("pyarrow")
    edges = {"q": ["badutf8", "max", "nan", "37s"], "u": ["37s", "max"]}
    assert set(edges["q"]) <= set(SPARK_EDGES["q"])
    batches = make_batches(cls, ENGINE_QUERIES["spark"], SEEDS[cls] + 9, edges=edges,
                           bases=("small",), batch=ENGINE_QUERIES["spark"] // 2,
                           engine="spark")
    _check(run_batches(batches, spark_maker(spark, policy("spark")), "spark"))


# -- q literals: an exact oracle ---------------------------------------------------------------

_DIGITS = st.text("0123456789", min_size=1, max_size=22)


@st.composite
def q_literals(draw: Any) -> str:
    """Decimal and exponent spellings of numbers near [0, 1], of every length."""
    whole = draw(st.sampled_from(["0", "", "1", "00", "2"]))
    frac = draw(_DIGITS)
    text = f"{whole}.{frac}"
    if draw(st.booleans()):
        text += f"e{draw(st.sampled_from(['', '-', '+']))}{draw(st.integers(0, 12))}"
    return text


_Q_SESSIONS: list[pp.Session] = []


def _q_sessions() -> list[pp.Session]:
    """A session on the small dataset and one on it plus the 37s row (kept for the test)."""
    if not _Q_SESSIONS:
        base = DatasetSpec("small")
        _Q_SESSIONS.extend(duckdb_session(spec, pp.PureDP(1e9))
                           for spec in (base, base.plus("q", "37s")))
    return _Q_SESSIONS


def _q_valid(text: str) -> bool:
    """privplan's rule: q in [0, 1] with at most 9 decimals (10^9 % denominator == 0)."""
    q = Fraction(text)
    return 0 <= q <= 1 and 10**9 % q.denominator == 0


@settings(max_examples=40, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(text=q_literals(), func=st.sampled_from([
    "QUANTILE_CONT(i, {q})", "PERCENTILE_DISC({q}) WITHIN GROUP (ORDER BY f)",
    "APPROX_QUANTILE(t, {q})"]))
def test_q_literal_answered_exactly_when_valid(text: str, func: str) -> None:
    """Each q spelling on a dataset and its neighbour with the 37s row (``WHERE i = 37`` keeps
    only that row): answered on both when q is valid, refused free on both otherwise."""
    sql = f"SELECT {func.format(q=text)} AS m FROM q WHERE i = 37 OR i < 50"
    outcomes = []
    for sess in _q_sessions():
        before = sess.spent()
        try:
            sess.sql(sql, epsilon=1)
            outcomes.append(("answered", sess.spent() != before))
        except pp.UnsupportedQueryError as err:
            assert "quantile" in str(err), err
            outcomes.append(("refused", sess.spent() != before))
    want = ("answered", True) if _q_valid(text) else ("refused", False)
    assert outcomes == [want, want], (sql, outcomes)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "quantile"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else SLOW_QUERIES[which]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else SEEDS[which] * 1000 + 1
    print(format_report(fuzz_duckdb(which, count, seed)))
