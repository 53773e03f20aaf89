"""PLD accounting of an (ε, δ) session (``composition="pld"``, :mod:`privplan.session.pld`).

Oracles: the exact Gaussian-DP curve (``gdp_delta``), Google's dp-accounting library (its
optimistic and pessimistic PLD estimates bracket the truth), and brute-force counting of which
queries a neighbouring record affects.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
from dp_accounting.pld import privacy_loss_distribution as dpl
from hypothesis import given, settings
from hypothesis import strategies as st

import privplan as pp
from privplan.accounting.conversions import gdp_delta, gdp_to_approx
from privplan.accounting.definitions import GDP
from privplan.accounting.gdp_budget import approx_to_gdp, sequential_approx
from privplan.testing import noise_disabled

POLICY = {"tables": {"t": {"columns": {
    "g": {"type": "str", "public_values": ["a", "b", "c"]},
    "age": {"type": "int", "lower": 0, "upper": 99}}}}}
COUNT = "SELECT g, COUNT(*) AS n FROM t GROUP BY g"


@pytest.fixture()
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT CASE i % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' ELSE 'c' END "
              "AS g, (i * 7) % 100 AS age FROM range(300) r(i)")
    return c


def _session(con: duckdb.DuckDBPyConnection, **kw: object) -> pp.Session:
    return pp.connect(con, policy=POLICY, budget=pp.ApproxDP(1, Fraction(1, 10**6)),
                      composition="pld", **kw)  # type: ignore[arg-type]


def _sigmas(sess: pp.Session, sql: str, **budget: object) -> list[Fraction]:
    planned, _ = sess.plan(sql, budget)
    return [p.noise.sigma for p in planned.measures]


@pytest.mark.parametrize(("eps", "delta"), [(1, 1e-6), (0.1, 1e-8), (3, 1e-5), (0.01, 1e-10)])
def test_the_session_mu_is_the_largest_whose_curve_passes_through_eps_delta(
        eps: float, delta: float) -> None:
    mu = approx_to_gdp(eps, delta)
    assert gdp_to_approx(mu, delta).exact_epsilon <= Fraction(eps)  # implies (ε, δ)
    assert gdp_delta(float(mu.exact_mu) * (1 + 1e-7), eps) > delta  # and no larger μ does


def test_overlapping_gaussian_queries_compose_exactly_and_never_below_the_pld_library(
        con: duckdb.DuckDBPyConnection) -> None:
    """Every query reads every record: the worst pair affects all of them, so the charge is
    the composition of all their PLDs. privplan computes it exactly (Gaussian PLDs compose to
    μ = sqrt(Σ μ_i²)); dp-accounting's optimistic and pessimistic estimates bracket it."""
    sess = _session(con)
    mus = [0.02, 0.05, 0.011, 0.03] * 10
    sigmas = []
    for mu in mus:
        sigmas += _sigmas(sess, COUNT, mu=mu)
        sess.sql(COUNT, mu=mu)
    spent = sess.spent()
    assert spent.exact_mu ** 2 == pytest.approx(sum(1 / float(s) ** 2 for s in sigmas),
                                                rel=1e-9)
    ours = sess.pld.as_approx(spent).epsilon
    opt = pes = None
    for pessimistic in (False, True):
        acc = None
        for s in sigmas:
            one = dpl.from_gaussian_mechanism(float(s), sensitivity=1,
                                              pessimistic_estimate=pessimistic,
                                              use_connect_dots=pessimistic,
                                              value_discretization_interval=1e-4)
            acc = one if acc is None else acc.compose(one)
        value = acc.get_epsilon_for_delta(1e-6)
        opt, pes = (value, pes) if not pessimistic else (opt, value)
    assert opt is not None and pes is not None
    assert opt - 1e-9 <= ours <= pes + 1e-6, (opt, ours, pes)
    # and far below the additive sum for the same noise
    assert ours < sequential_approx([Fraction(1) / s for s in sigmas], 1e-6).epsilon / 2


def test_admits_exactly_as_many_queries_as_the_composed_mu_allows(
        con: duckdb.DuckDBPyConnection) -> None:
    sess = _session(con)
    mu_q = Fraction(1, 50)
    admitted = 0
    with pytest.raises(pp.BudgetExceededError, match="PLD accounting"):
        for _ in range(1000):
            sess.sql(COUNT, mu=mu_q)
            admitted += 1
    budget = approx_to_gdp(1, Fraction(1, 10**6)).exact_mu
    assert admitted == math.floor(budget ** 2 / mu_q ** 2)  # k·μ_q² <= μ_B²: 140
    before = sess.spent()
    with pytest.raises(pp.BudgetExceededError):
        sess.sql(COUNT, mu=mu_q)
    assert sess.spent() == before  # a refusal spends nothing
    # additive accounting at the same noise admits an order of magnitude fewer
    additive = max(k for k in range(1, 200)
                   if sequential_approx([mu_q] * k, Fraction(1, 10**6)).exact_epsilon <= 1)
    assert admitted >= 3 * additive


def test_disjoint_queries_pay_only_for_the_worst_affected_set(
        con: duckdb.DuckDBPyConnection) -> None:
    """Ten queries over disjoint age ranges and three over everything: a record is in one range,
    so the worst pair affects 1 + 3 queries (brute force over every record of the domain)."""
    sess = _session(con)
    ranges = [(10 * i, 10 * i + 9) for i in range(10)]
    for lo, hi in ranges:
        sess.sql(f"SELECT COUNT(*) FROM t WHERE age BETWEEN {lo} AND {hi}", mu=0.05)
    for _ in range(3):
        sess.sql("SELECT COUNT(*) FROM t", mu=0.05)
    worst = max(sum(lo <= age <= hi for lo, hi in ranges) + 3 for age in range(100))
    assert worst == 4
    assert sess.spent().exact_mu == pytest.approx(0.05 * math.sqrt(worst), rel=1e-9)


def test_a_query_eps_delta_gets_the_analytic_gaussian(con: duckdb.DuckDBPyConnection) -> None:
    sess = _session(con)
    (sigma,) = _sigmas(sess, "SELECT COUNT(*) FROM t", epsilon=0.5, delta=1e-7)
    # the released Gaussian is (0.5, 1e-7)-DP on its own, and only just
    assert gdp_delta(1 / float(sigma), 0.5) <= 1e-7
    assert gdp_delta(1 / float(sigma) * 1.001, 0.5) > 1e-7
    explained = sess.explain("SELECT COUNT(*) FROM t", epsilon=0.5, delta=1e-7)
    assert "PLD accounting" in explained.notes[-1]
    with noise_disabled():
        df = sess.sql("SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY g", mu=0.1).df
    assert df["n"].tolist() == [100, 100, 100]  # noise off: the plain answer


def test_refusals_are_clear_and_spend_nothing(con: duckdb.DuckDBPyConnection,
                                              tmp_path: Path) -> None:
    sess = _session(con)
    with pytest.raises(pp.PolicyError, match="delta > 0"):
        sess.sql(COUNT, epsilon=0.1)  # pure ε: no Gaussian release is (ε, 0)-DP
    with pytest.raises(pp.PolicyError):
        sess.sql(COUNT, rho=0.1)
    assert sess.spent() == GDP(0)
    with pytest.raises(pp.PolicyError, match="'additive'.*'pld'"):
        pp.connect(con, policy=POLICY, budget=pp.ApproxDP(1, 1e-6), composition="PLD")
    with pytest.raises(pp.PolicyError, match="0 < δ < 1"):
        pp.connect(con, policy=POLICY, budget=pp.PureDP(1), composition="pld")
    with pytest.raises(pp.PolicyError, match="0 < δ < 1"):
        pp.connect(con, policy=POLICY, budget=pp.ApproxDP(1, 0), composition="pld")
    with pytest.raises(pp.PolicyError, match="cannot hold the budget"):  # (was a raw ValueError)
        pp.connect(con, policy=POLICY, budget=pp.ApproxDP(1e15, 1e-6), composition="pld")
    with pytest.raises(pp.PolicyError, match="unbounded μ"):
        sess.sql(COUNT, epsilon=1e15, delta=1e-9)
    assert sess.spent() == GDP(0)


def test_a_durable_ledger_keeps_the_pld_total(con: duckdb.DuckDBPyConnection,
                                              tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    with _session(con, ledger=ledger) as sess:
        for _ in range(5):
            sess.sql(COUNT, mu=0.05)
        spent = sess.spent()
    with _session(con, ledger=ledger) as again:
        assert again.spent() == spent
        again.sql(COUNT, mu=0.05)
        assert again.spent().exact_mu == pytest.approx(0.05 * math.sqrt(6), rel=1e-9)
    # an additive session cannot take over the ledger of a PLD one (another budget)
    with pytest.raises(pp.LedgerError):
        pp.connect(con, policy=POLICY, budget=pp.ApproxDP(1, Fraction(1, 10**6)),
                   ledger=ledger)


def test_command_line_and_dbapi_take_pld_accounting(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    from privplan import dbapi
    from privplan.cli import EXIT_USAGE, main
    from privplan.demo.data import demo_policy_path, write_demo_database

    db = write_demo_database(tmp_path / "d.duckdb", rows=2_000)
    ledger = tmp_path / "l.sqlite"
    base = ["--database", str(db), "--policy", str(demo_policy_path()), "--ledger", str(ledger),
            "--total", "1", "--total-delta", "1e-6", "--composition", "pld"]
    assert main(["query", "SELECT COUNT(*) AS n FROM visits", *base, "--mu", "0.05",
                 "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["spent"] == "μ=0.05" and payload["spent_approx"].endswith("δ=1e-06")
    assert main(["query", "SELECT COUNT(*) AS n FROM visits", *base, "--epsilon", "0.2",
                 "--delta", "1e-8"]) == 0
    assert "PLD accounting: spent μ = " in capsys.readouterr().out
    # a pure-ε query is refused with what to pass instead, and spends nothing
    assert main(["query", "SELECT COUNT(*) AS n FROM visits", *base, "--epsilon", "0.2"]
                ) == EXIT_USAGE
    assert "delta > 0" in capsys.readouterr().err
    # --composition pld without the session's (ε, δ)
    assert main(["query", "SELECT COUNT(*) AS n FROM visits", "--database", str(db),
                 "--policy", str(demo_policy_path()), "--ledger", str(ledger),
                 "--composition", "pld", "--mu", "0.05"]) == EXIT_USAGE
    with dbapi.connect(db, policy=demo_policy_path(), budget=pp.ApproxDP(1, 1e-6),
                       composition="pld", mu=0.05) as con:
        cur = con.cursor()
        cur.execute("SELECT COUNT(*) AS n FROM visits")
        assert cur.fetchone() is not None
        cur.execute("SELECT COUNT(*) AS n FROM visits", epsilon=0.3, delta=1e-9)
        assert con.session.spent().exact_mu > Fraction(1, 20)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.05, 0.1, 0.2, 0.4]),
                          st.sampled_from([1e-9, 1e-8, 5e-8])), min_size=1, max_size=25))
def test_pld_never_admits_fewer_than_additive(queries: list[tuple[float, float]]) -> None:
    """The same queries, each with its own (ε, δ), asked of an additive and a PLD session: every
    query the additive one admits, the PLD one admits too (the Gaussian calibrated to (ε_q, δ_q)
    is (ε_q, δ_q)-DP, so its exact composition is never above the sum). The additive session
    admits at most 20 of these (ε_q >= 0.05), so Σ δ_q <= 20 · 5e-8 = δ: the premise of that
    argument holds for every drawn list."""
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT 'a' AS g, i AS age FROM range(50) r(i)")
    budget = pp.ApproxDP(1, Fraction(1, 10**6))
    additive = pp.connect(c, policy=POLICY, budget=budget)
    pld = pp.connect(c, policy=POLICY, budget=budget, composition="pld")
    for eps, delta in queries:
        try:
            additive.sql("SELECT COUNT(*) FROM t", budget=pp.ApproxDP(eps, delta))
        except pp.BudgetExceededError:
            continue
        pld.sql("SELECT COUNT(*) FROM t", epsilon=eps, delta=delta)  # must not raise
    assert pld.pld is not None
    assert pld.pld.as_approx(pld.spent()).exact_epsilon <= additive.spent().exact_epsilon


def test_a_reopened_ledger_with_a_checkpoint_answers_and_explains(
        con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """Regression: the PLD note once read every earlier mechanism inside the charge's ledger
    transaction; restored from a checkpoint, those are read from the file, which the charge was
    holding: the query hung. sql() now notes the PLD total only; explain() (outside any
    transaction) adds the additive comparison."""
    import threading

    ledger = tmp_path / "ledger.sqlite"
    with _session(con, ledger=ledger) as sess:
        sess.ledger.checkpoint_every = 3
        for _ in range(7):
            sess.sql(COUNT, mu=0.02)
    outcome: dict[str, object] = {}

    def again() -> None:
        with _session(con, ledger=ledger) as s2:
            assert s2.ledger.checkpoint() is not None  # (restored from it: specs read lazily)
            outcome["answer"] = s2.sql(COUNT, mu=0.02).explanation.notes[-1]
            outcome["explain"] = s2.explain(COUNT, mu=0.02).notes[-1]

    worker = threading.Thread(target=again, daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "the reopened PLD session hung"
    assert str(outcome["answer"]).startswith("PLD accounting: composed μ = 0.05657")
    assert "additive" in str(outcome["explain"])


def test_the_rest_of_the_budget_buys_the_least_noise_the_pld_allows(
        con: duckdb.DuckDBPyConnection) -> None:
    """After some queries, remaining() is the μ a last query may still add (sqrt(μ_B² − μ²)):
    spending it lands the (ε, δ) reading on the budget, with less noise than the additive
    split of what is left would give."""
    sess = _session(con)
    for _ in range(3):
        sess.sql(COUNT, mu=0.03)
    rest = sess.remaining()
    (sigma,) = _sigmas(sess, "SELECT COUNT(*) FROM t", budget=rest)
    sess.sql("SELECT COUNT(*) FROM t", budget=rest)
    assert sess.spent() <= sess.budget
    assert float(sess.pld.as_approx(sess.spent()).exact_epsilon) == pytest.approx(1, abs=1e-4)
    # additive: 3 releases of μ = 0.03 at δ/4 each leave ε_left for a Gaussian at (ε_left, δ/4)
    used = sum(float(gdp_to_approx(GDP(Fraction(3, 100)), 1e-6 / 4).exact_epsilon)
               for _ in range(3))
    left = 1 - used
    assert left > 0.3
    assert float(sigma) < 0.7 / float(approx_to_gdp(left, 1e-6 / 4).exact_mu)  # 4.33 vs 6.82
