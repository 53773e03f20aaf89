"""Refused queries: a clear message (what, where, how to fix) and nothing spent."""

from __future__ import annotations

import pytest

import privplan as pp

REFUSED = [
    ("SELECT * FROM visits", pp.UnsupportedQueryError, ["SELECT *", "rows", "line 1"]),
    ("SELECT age FROM visits", pp.UnsupportedQueryError, ["no aggregate"]),
    ("SELECT hospital, age, COUNT(*) FROM visits GROUP BY hospital",
     pp.UnsupportedQueryError, ["'age'", "neither grouped nor aggregated", "GROUP BY"]),
    ("SELECT COUNT(*) FROM visits; DROP TABLE visits", pp.UnsupportedQueryError,
     ["2 statements", "one by one"]),
    ("SELECT COUNT(*) FROM visits WHERE random() < 0.5", pp.UnsupportedQueryError,
     ["RANDOM()", "non-deterministic"]),
    ("SELECT COUNT(*) FROM read_csv('x.csv')", pp.UnsupportedQueryError, ["refused"]),
    ("SELECT MODE(age) FROM visits", pp.UnsupportedQueryError, ["MODE(age)", "MEDIAN"]),
    ("SELECT MAX(hospital) FROM visits", pp.UnsupportedQueryError,
     ["MAX over str column", "int and float"]),
    ("SELECT SUM(visit_id) FROM visits", pp.PolicyError, ["visit_id", "bounds", "lower"]),
    ("SELECT COUNT(*) FROM patients", pp.PolicyError, ["patients", "visits"]),
    ("SELECT COUNT(*) FROM visits WHERE agee > 3", pp.UnsupportedQueryError,
     ["unknown column 'agee'", "line 1, column"]),
    ("SELECT COUNT(*) OVER () FROM visits", pp.UnsupportedQueryError, ["window"]),
    ("SELECT SUM(DISTINCT cost * 2) FROM visits", pp.UnsupportedQueryError, ["DISTINCT"]),
    ("SELECT SUM(abs(age)) FROM visits", pp.UnsupportedQueryError, ["expression", "bounds"]),
    ("SELECT COUNT(*) FROM visits v JOIN visits w ON v.visit_id = w.visit_id",
     pp.UnsupportedQueryError, ["JOIN of private tables", "privacy-unit"]),
    ("SELECT COUNT(*) FROM (SELECT * FROM visits)", pp.UnsupportedQueryError, ["subquery"]),
    ("SELEC COUNT(*) FROM visits", pp.ParseError, ["could not parse"]),
    ("SELECT COUNT(*) FROM visits ORDER BY age", pp.UnsupportedQueryError, ["'age'"]),
    ("DELETE FROM visits", pp.UnsupportedQueryError, ["DELETE", "SELECT"]),
    ("SELECT DISTINCT hospital FROM visits", pp.UnsupportedQueryError, ["DISTINCT"]),
]


@pytest.mark.parametrize("sql,error,fragments", REFUSED)
def test_refused_with_a_clear_message(session: pp.Session, sql: str, error: type,
                                      fragments: list[str]) -> None:
    with pytest.raises(error) as info:
        session.sql(sql, epsilon=1)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    assert session.spent() == pp.PureDP(0)
    assert session.ledger.entries() == ()


def test_query_budget_must_match_session_kind(session: pp.Session) -> None:
    with pytest.raises(pp.PolicyError, match="session's budget is PureDP"):
        session.sql("SELECT COUNT(*) FROM visits", rho=0.1)
    with pytest.raises(pp.PolicyError, match="say how much"):
        session.sql("SELECT COUNT(*) FROM visits")


@pytest.mark.invariant(5)
def test_replacement_scans_are_off(session: pp.Session) -> None:
    import pandas as pd

    secret = pd.DataFrame({"x": [1, 2, 3]})  # noqa: F841 - must not be visible to the engine
    with pytest.raises(pp.PrivplanError):
        session.sql("SELECT COUNT(*) FROM secret", epsilon=1)
    assert session.engine.con.execute(
        "SELECT current_setting('python_enable_replacements')").fetchone() == (False,)


def test_a_failed_fetch_leaves_the_post_processor_usable() -> None:
    """A post-processing statement that fails while its result is fetched (a DATE pandas
    cannot hold) is reported as itself, and the next statement runs (the connection was left
    busy with the failed result, and the cleanup's own error used to replace the query's)."""
    import pandas as pd

    from privplan.engines.post_processor import post_processor
    from privplan.errors import PostProcessingError

    frame = pd.DataFrame({"n": [1]})
    with pytest.raises(PostProcessingError, match="infinity"):
        post_processor().run("SELECT DATE 'infinity' AS d, n FROM __t", {"__t": frame})
    assert post_processor().run("SELECT n + 1 AS m FROM __t", {"__t": frame})["m"].tolist() == [2]
