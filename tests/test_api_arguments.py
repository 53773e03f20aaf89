"""Argument mistakes on the Python API are Python's own TypeError in privplan's words (never an
InternalError), budget keyword mistakes say the fix for each combination, and an Explanation's
repr is a short summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import privplan as pp
from privplan import dbapi
from privplan.arguments import check_arguments
from privplan.demo.data import demo_policy_path, write_demo_database

Q = "SELECT COUNT(*) FROM visits WHERE age > 30"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("args") / "demo.duckdb", rows=500)


@pytest.fixture
def sess(demo_db: Path):
    s = pp.connect(demo_db, policy=demo_policy_path(), budget=pp.PureDP(2))
    yield s
    s.close()


CASES: list[tuple[str, list[str]]] = [
    ("S.sql(Q, 0.5)", ["Session.sql() takes the budget as a keyword", "sess.sql(q, epsilon=0.5)"]),
    ("S.sql(Q, [30])", ["Session.sql()", "query parameters go in params=",
                        "sess.sql(q, params=[30])"]),
    ("S.sql(Q, (30,))", ["params=", "positional tuple"]),
    ("S.sql(Q, {'a': 30})", ["params=", "sess.sql(q, params={'age': 30})"]),
    ("S.sql(Q, pp.PureDP(1))", ["keyword budget=", "budget=PureDP(epsilon=1"]),
    ("S.sql(Q, epsilion=1)", ["unknown keyword argument epsilion=", "did you mean epsilon=?"]),
    ("S.sql(Q, max_group_contributed=2, epsilon=1)", ["did you mean max_groups_contributed=?"]),
    ("S.sql(Q, parms=[30], epsilon=1)", ["did you mean params=?"]),
    ("S.sql()", ["Session.sql() is missing its argument 'sql'", "sess.sql(q, epsilon=0.5)"]),
    ("S.sql(Q, sql=Q)", ["got the argument 'sql' twice"]),
    ("S.explain(Q, 0.5)", ["Session.explain() takes the budget as a keyword",
                           "sess.explain(q, epsilon=0.5)"]),
    ("S.explain(Q, [30])", ["sess.explain(q, params=[30])"]),
    ("S.register()", ["Session.register() is missing its argument 'name'"]),
    ("S.spent(1)", ["Session.spent() takes 0 positional", "Drop it: sess.spent()"]),
    ("S.remaining(x=1)", ["Session.remaining() got an unknown keyword argument x="]),
    ("S.budget_history(1)", ["Session.budget_history()", "Drop it"]),
    ("S.plot_budget(None)", ["Session.plot_budget()", "keywords (ax=, title=)"]),
    ("pp.connect(DB, POLICY, pp.PureDP(1))", ["pp.connect() takes 1 positional",
                                              "pp.connect(policy=..., budget=...)"]),
    ("pp.connect(DB, policy=POLICY, budget=pp.PureDP(1), legder=None)",
     ["pp.connect() got an unknown keyword argument legder=", "did you mean ledger=?"]),
    ("pp.Session(DB, policy=POLICY)", ["pp.Session() is missing its argument 'budget'"]),
    ("dbapi.connect(DB, policy=POLICY, budget=pp.PureDP(1), epsilion=1)",
     ["privplan.dbapi.connect() got an unknown keyword", "did you mean epsilon=?"]),
    ("dbapi.connect(DB, policy=POLICY, budget=pp.PureDP(1)).cursor().execute(Q, epsilion=1)",
     ["Cursor.execute() got an unknown keyword", "did you mean epsilon=?"]),
]


@pytest.mark.parametrize("code,words", CASES, ids=[c for c, _ in CASES])
def test_an_argument_mistake_is_a_typeerror_in_privplans_words(
        sess: pp.Session, demo_db: Path, code: str, words: list[str]) -> None:
    env: dict[str, Any] = {"S": sess, "Q": Q, "pp": pp, "dbapi": dbapi, "DB": demo_db,
                           "POLICY": demo_policy_path()}
    with pytest.raises(TypeError) as err:
        eval(code, env)
    assert type(err.value) is TypeError  # Python's own, not an InternalError
    for w in words:
        assert w in str(err.value), (w, str(err.value))
    assert err.value.__cause__ is None  # (nor Python's binding error as the context)
    assert err.value.__context__ is None or err.value.__suppress_context__
    assert sess.spent() == pp.PureDP(0)


def test_the_budget_example_matches_the_session(demo_db: Path) -> None:
    for budget, example in [(pp.ZCDP(1), "rho=0.1"), (pp.GDP(1), "mu=0.5"),
                            (pp.ApproxDP(1, 1e-6), "epsilon=0.5, delta=1e-6")]:
        with pp.connect(demo_db, policy=demo_policy_path(), budget=budget) as s, \
                pytest.raises(TypeError, match=f"sess.sql\\(q, {example}\\)"):
            s.sql(Q, 0.5)


def test_a_good_call_still_runs_and_the_check_is_cached(sess: pp.Session) -> None:
    assert sess.explain(Q, epsilon=1).query_cost == pp.PureDP(1)
    check_arguments(pp.Session.sql, (sess, Q), {"params": None, "epsilon": 1})


@pytest.mark.parametrize("budget,kw,words", [
    (pp.PureDP(2), {"epsilon": 1, "delta": 1e-6}, ["drop delta= and pass epsilon= alone",
                                                   "pp.ApproxDP(eps, delta)"]),
    (pp.PureDP(2), {"rho": 0.1}, ["Pass the matching parameter (epsilon=) instead of rho=",
                                  "budget=pp.ZCDP(rho)"]),
    (pp.PureDP(2), {"mu": 0.1}, ["(epsilon=) instead of mu="]),
    (pp.PureDP(2), {"delta": 1e-6}, ["delta= alone", "drop delta= and pass epsilon="]),
    (pp.PureDP(2), {"budget": pp.ZCDP(1)}, ["Pass budget=pp.PureDP(eps)"]),
    (pp.ZCDP(2), {"epsilon": 1}, ["(rho=) instead of epsilon=", "e.g. rho=0.1"]),
    (pp.ZCDP(2), {"mu": 1}, ["(rho=) instead of mu="]),
    (pp.ZCDP(2), {"rho": 0.1, "delta": 1e-6}, ["delta= goes with epsilon=, not with rho=",
                                               "Drop delta="]),
    (pp.GDP(2), {"rho": 0.1}, ["(mu=) instead of rho="]),
    (pp.ApproxDP(2, 1e-5), {"delta": 1e-6}, ["delta= alone", "Pass epsilon= with it"]),
    (pp.ApproxDP(2, 1e-5), {"rho": 0.1}, ["(epsilon= and delta=) instead of rho="]),
])
def test_each_budget_keyword_mistake_says_its_fix(demo_db: Path, budget: Any, kw: dict,
                                                  words: list[str]) -> None:
    with pp.connect(demo_db, policy=demo_policy_path(), budget=budget) as s:
        with pytest.raises(pp.PolicyError) as err:
            s.sql(Q, **kw)
        assert s.spent() == budget.zero()
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_the_explanations_repr_is_a_short_summary(sess: pp.Session) -> None:
    e = sess.explain("SELECT hospital, COUNT(*), SUM(cost), AVG(age), MEDIAN(age) FROM visits "
                     "GROUP BY hospital", epsilon=1)
    text = repr(e)
    assert len(text) < 400 and len(text.splitlines()) <= 8, text
    assert text.startswith("<Explanation: SELECT hospital")
    assert "cost ε=1" in text and "of ε=2" in text
    assert "COUNT(*): discrete Laplace, 95% ±" in text
    assert "more mechanism(s)" in text  # 5 mechanisms, 3 shown
    assert "print() it for the full plan" in text
    # str() and the HTML view are the full plan, as before
    assert str(e).startswith("Query: SELECT hospital") and "Worst case:" in str(e)
    assert len(str(e)) > len(text) and "<table" in e._repr_html_()


def test_the_repr_of_a_refused_plan_says_so(sess: pp.Session) -> None:
    text = repr(sess.explain(Q, epsilon=5))
    assert "EXCEEDS THE BUDGET" in text and len(text) < 400


@pytest.mark.parametrize("query", [123, None, b"SELECT COUNT(*) FROM visits"])
def test_a_query_that_is_not_text_is_a_typeerror(sess: pp.Session, query: object) -> None:
    """Found inside the method (not by binding), and still let through the error boundary."""
    for call in (sess.sql, sess.explain):
        with pytest.raises(TypeError, match=r"takes the query as a str, got \w+") as err:
            call(query, epsilon=1)  # type: ignore[call-overload]
        assert not isinstance(err.value, pp.PrivplanError)
        assert f"sess.{call.__name__}('SELECT COUNT(*) FROM t', epsilon=0.5)" in str(err.value)
    assert sess.spent() == pp.PureDP(0)
