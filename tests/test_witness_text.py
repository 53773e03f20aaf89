"""The worst case in the user's words names each earlier query once.

Earlier mechanisms are shown by their query (``q1``); a query with several mechanisms must not
be named twice in a row, also at the start of a parenthesised list ("18 mechanisms (q1, q2,
...)", which read "(q1, q1, q2, ...)").
"""

from __future__ import annotations

import itertools
import pickle
import re
from pathlib import Path

import privplan as pp
from privplan.demo.data import write_demo_database
from privplan.explain import _readable_witness


def test_repeated_names_are_merged_everywhere() -> None:
    labels = {"q7.c0_m0": "COUNT(*)", "q7.c0_m1": "SUM(cost)"}
    cases = {
        "x affects 18 mechanisms (q1.c0_m0, q1.c0_m1, q2.c0_m0, q3.c0_m0 and 6 more)":
            "x affects 18 mechanisms (q1, q2, q3 and 6 more)",
        "x affects q1.c0_m0, q1.c0_m1, q7.c0_m0, q7.c0_m1": "x affects q1, COUNT(*), SUM(cost)",
        "x affects 3 mechanisms (q1.c0_m0, q1.c0_m1)": "x affects 3 mechanisms (q1)",
        "a record with x IN (1, 2) affects q1.c0_m0, q2.c0_m0":
            "a record with x IN (1, 2) affects q1, q2",
        "a record with SUM(a), SUM(a) affects q1.c0_m0": "a record with SUM(a), SUM(a) affects q1",
    }
    for text, want in cases.items():
        assert _readable_witness(text, labels) == want, text


def test_a_dashboard_session_names_each_query_once(tmp_path: Path) -> None:
    db = write_demo_database(tmp_path / "demo.duckdb", rows=500)
    policy = pp.Policy.from_yaml(Path(pp.__file__).parent / "demo" / "policy.yaml")
    sess = pp.connect(db, policy=policy, budget=pp.PureDP(1000))
    try:
        sql = "SELECT hospital, COUNT(*), AVG(cost) FROM visits GROUP BY hospital"
        for _ in range(8):
            witness = sess.sql(sql, epsilon=1).explanation.witness
        names = re.findall(r"\bq\d+\b|COUNT\(\*\)|SUM\(cost\)|COUNT\(cost\)", witness)
        assert len(names) >= 3, witness
        assert all(a != b for a, b in itertools.pairwise(names)), witness
    finally:
        sess.close()


def test_bounds_read_in_the_queries_own_terms() -> None:
    from privplan.explain import in_query_terms

    sqls = ["SELECT COUNT(*) FROM v WHERE age < 18", "SELECT COUNT(*) FROM v WHERE stay > 7",
            "SELECT SUM(cost) FROM v WHERE cost < 18"]
    text = "a record with age <= 17, stay >= 8, cost <= 17, age >= 65 affects q1, q2"
    assert in_query_terms(text, sqls, {"age", "stay"}) == (
        "a record with age < 18, stay > 7, cost <= 17, age >= 65 affects q1, q2")
    # a float column's `< 18` is not `<= 17`: left alone, as is a bound no query spells
    assert in_query_terms("cost <= 17", sqls, set()) == "cost <= 17"


def test_the_demo_witness_says_the_demo_queries_bounds(tmp_path: Path) -> None:
    """The demo's worst case named `age < 17` beside queries saying `age < 18`: a record's
    value is now the whole range the queries treat alike, in their own spelling."""
    import io

    from privplan.demo.run import run_demo

    out = io.StringIO()
    run_demo(tmp_path, rows=2000, out=out).close()
    why = next(line for line in out.getvalue().splitlines() if line.startswith("Why: "))
    assert "age < 18" in why and "length_of_stay > 7" in why, why
    assert "age < 17" not in why and "length_of_stay > 8" not in why, why


def test_a_group_key_stays_one_group_and_a_range_is_whole(tmp_path: Path) -> None:
    from privplan.explain import session_witness

    db = write_demo_database(tmp_path / "demo.duckdb", rows=500)
    policy = pp.Policy.from_yaml(Path(pp.__file__).parent / "demo" / "policy.yaml")
    with pp.connect(db, policy=policy, budget=pp.PureDP(10)) as sess:
        sess.sql("SELECT hospital, COUNT(*) FROM visits GROUP BY hospital", epsilon=1)
        assert session_witness(sess) == "a record with hospital = 'A' affects q1 COUNT(*)"
        sess.sql("SELECT COUNT(*) FROM visits WHERE age BETWEEN 20 AND 29", epsilon=1)
        sess.sql("SELECT COUNT(*) FROM visits WHERE age >= 25", epsilon=1)
        assert "hospital = 'A', 25 <= age <= 29 affects" in session_witness(sess)


def test_an_answers_worst_case_is_the_one_of_its_own_charge_made_later(tmp_path: Path) -> None:
    """A charge hands the worst case's text over as a function (it walks the whole history);
    the text made later, or when the session settles it before its next charge, is the one
    ``explain`` gave for that very charge beforehand (the accounting state it was charged
    against, not the session's later one), and a kept answer holds text, not that state."""
    db = write_demo_database(tmp_path / "demo.duckdb", rows=500)
    sess = pp.connect(db, policy=Path(pp.__file__).parent / "demo" / "policy.yaml",
                      budget=pp.PureDP(1000))
    try:
        queries = ["SELECT hospital, COUNT(*) FROM visits GROUP BY hospital",
                   "SELECT COUNT(*) FROM visits WHERE age > 40",
                   "SELECT department, SUM(cost) FROM visits GROUP BY department",
                   "SELECT COUNT(*) FROM visits WHERE age <= 40"]
        kept, foretold = [], []
        for sql in queries:
            foretold.append(sess.explain(sql, epsilon=1).witness)
            kept.append(sess.sql(sql, epsilon=1))
            *earlier, last = [r.explanation for r in kept]
            assert all(isinstance(e.witness_source, str) for e in earlier)
            assert callable(last.witness_source)
        copied = pickle.loads(pickle.dumps(kept[-1].explanation))  # (settles it: text only)
        assert copied.witness_source == foretold[-1] and copied == kept[-1].explanation
        assert [r.explanation.witness for r in kept] == foretold
        assert len(set(foretold)) > 1  # (the worst case changes along the history)
        assert all(isinstance(r.explanation.witness_source, str) for r in kept)
        # the text is the one str() and to_dict() show
        assert f"Worst case: {foretold[-1]}" in str(kept[-1].explanation)
        assert kept[-1].explanation.to_dict()["worst_case"] == foretold[-1]
    finally:
        sess.close()
