"""What queries are charged: the general composition theorem, inside a query and across a session."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

import privplan as pp


def test_disjoint_where_queries_cost_the_max(session: pp.Session) -> None:
    r1 = session.sql("SELECT COUNT(*) FROM visits WHERE age < 18", epsilon=0.5)
    assert r1.cost == pp.PureDP(0.5)
    r2 = session.sql("SELECT COUNT(*) FROM visits WHERE age >= 65", epsilon=0.5)
    assert r2.cost == pp.PureDP(0), "disjoint from the first query: parallel composition"
    assert session.spent() == pp.PureDP(0.5)
    r3 = session.sql("SELECT COUNT(*) FROM visits WHERE hospital = 'A'", epsilon=0.5)
    assert r3.cost == pp.PureDP(0.5), "overlaps both earlier regions: adds"
    assert session.spent() == pp.PureDP(1)


def test_group_by_costs_one_group_under_add_remove(session: pp.Session) -> None:
    res = session.sql("SELECT hospital, COUNT(*) FROM visits GROUP BY hospital", epsilon=1)
    assert res.query_cost == pp.PureDP(1)
    plan = res.explanation
    (count,) = plan.mechanisms
    assert count.cost == pp.PureDP(1), "every group gets the whole ε (a record is in one group)"


def test_disjoint_filters_in_one_query_each_get_the_whole_budget(session: pp.Session) -> None:
    plan = session.explain(
        "SELECT COUNT(*) FILTER (WHERE insured) AS a, COUNT(*) FILTER (WHERE NOT insured) AS b "
        "FROM visits", epsilon=1)
    assert [m.cost for m in plan.mechanisms] == [pp.PureDP(1), pp.PureDP(1)]
    assert plan.query_cost == pp.PureDP(1)


def test_overlapping_measures_split_the_budget(session: pp.Session) -> None:
    plan = session.explain("SELECT COUNT(*), SUM(age) FROM visits", epsilon=1)
    assert [m.cost for m in plan.mechanisms] == [pp.PureDP(0.5), pp.PureDP(0.5)]


def test_avg_reuses_the_released_count(session: pp.Session) -> None:
    plan = session.explain("SELECT COUNT(age), AVG(age) FROM visits", epsilon=1)
    assert len(plan.mechanisms) == 2  # COUNT(age) and SUM(age), not three


def test_replace_neighbourhood_gives_each_group_half(demo_db, demo_policy) -> None:
    d = demo_policy.to_dict()
    d["tables"]["visits"]["neighbourhood"] = "replace"
    sess = pp.connect(demo_db, policy=pp.Policy.from_dict(d), budget=pp.PureDP(10))
    plan = sess.explain("SELECT hospital, COUNT(*) FROM visits GROUP BY hospital", epsilon=1)
    assert plan.mechanisms[0].cost == pp.PureDP(Fraction(1, 2))
    assert plan.query_cost == pp.PureDP(1)
    sess.close()


@pytest.mark.invariant(8)
def test_budget_exceeded_spends_nothing(session: pp.Session) -> None:
    session.sql("SELECT COUNT(*) FROM visits", epsilon=9)
    with pytest.raises(pp.BudgetExceededError) as err:
        session.sql("SELECT COUNT(*) FROM visits WHERE age > 3", epsilon=2)
    msg = str(err.value)
    assert "ε=9" in msg and "ε=10" in msg and "would add" in msg
    assert session.spent() == pp.PureDP(9)
    assert len(session.ledger.entries()) == 1


def test_explain_marginal_equals_what_sql_charges(session: pp.Session) -> None:
    queries = [
        "SELECT COUNT(*) FROM visits WHERE age < 30",
        "SELECT hospital, SUM(length_of_stay) FROM visits WHERE age >= 30 GROUP BY hospital",
        "SELECT COUNT(*) FROM visits WHERE sex = 'F'",
    ]
    for q in queries:
        plan = session.explain(q, epsilon=0.7)
        res = session.sql(q, epsilon=0.7)
        assert res.cost == plan.marginal


def test_zcdp_session_uses_gaussian_noise(demo_db, demo_policy) -> None:
    sess = pp.connect(demo_db, policy=demo_policy, budget=pp.ZCDP(1))
    res = sess.sql("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital", rho=0.5)
    assert res.cost == pp.ZCDP(0.5)
    assert "Gaussian" in res.accuracy["n"].method
    sess.close()


def test_partition_selection_needs_approx_budget(demo_db, demo_policy) -> None:
    sess = pp.connect(demo_db, policy=demo_policy, budget=pp.PureDP(1))
    with pytest.raises(pp.UnsupportedQueryError, match="partition selection"):
        sess.sql("SELECT age, COUNT(*) FROM visits GROUP BY age", epsilon=1)
    assert sess.spent() == pp.PureDP(0)
    sess.close()


@pytest.mark.invariant(5)
def test_partition_selection_releases_only_frequent_keys(demo_db, demo_policy) -> None:
    sess = pp.connect(demo_db, policy=demo_policy, budget=pp.ApproxDP(2, 1e-5))
    res = sess.sql("SELECT age, COUNT(*) AS n FROM visits GROUP BY age", epsilon=1, delta=1e-6)
    assert res.cost == pp.ApproxDP(1, 1e-6)
    assert len(res.df) > 50  # ages 0..100 with ~200 visits each pass the threshold
    assert res.df["age"].is_monotonic_increasing  # released in key order, not data order
    sess.close()


def test_explain_speaks_in_column_units(session: pp.Session) -> None:
    """A SUM's sensitivity and noise are shown in the column's units (the mechanism works in
    grid steps: cost has step 0.01, so 2,000,000 steps are 20,000), with the step named; the
    dict keeps the grid integer and adds the step."""
    e = session.explain("SELECT SUM(cost) AS c, COUNT(*) AS n FROM visits", epsilon=1)
    text = str(e)
    assert "sensitivity 20000, discrete Laplace, scale 40000" in text
    assert "on a grid of step 0.01" in text
    assert "sensitivity 2000000" not in text
    d = e.mechanisms[0].to_dict()
    assert d["sensitivity"] == 2_000_000 and d["step"] == "1/100"
    assert d["sensitivity_in_units"] == 20000.0


def test_the_worst_case_names_aggregates_and_queries(session: pp.Session) -> None:
    """No internal ids (q1.c0_m0) in explain's worst case: this query's mechanisms by their
    aggregate, earlier ones by their query."""
    session.sql("SELECT COUNT(*) FROM visits WHERE age < 18", epsilon=0.1)
    first = session.ledger.entries()[-1].query_id
    e = session.explain("SELECT SUM(cost) AS c FROM visits WHERE age < 30", epsilon=0.1)
    assert "SUM(cost)" in e.witness and first in e.witness
    assert not re.search(r"q\d+\.c\d+_m\d+", e.witness), e.witness
