"""BigQuery's `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(...)` syntax (privplan.sql.bigquery):
the clause is cut out byte-exactly, options are parsed strictly, they may never weaken the
policy, BigQuery aggregate spellings map to privplan's, and a BigQuery-syntax query has the
same plan as its plain form."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.sql.bigquery import (
    KNOWN_OPTIONS,
    DPOptions,
    apply_dp_clause,
    blanked,
    explain_bigquery,
    rewrite_dp_aggregates,
    split_dp_clause,
    without_clauses,
)
from privplan.testing import noise_disabled

EXAMPLE = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, "
           "max_groups_contributed=2, privacy_unit_column=patient_id) hospital, COUNT(*) "
           "FROM visits GROUP BY hospital")
PLAIN = "SELECT hospital, COUNT(*) FROM visits GROUP BY hospital"


# ------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("bq") / "demo.duckdb", rows=5000)


def _policy(unit: bool, max_groups: int | None = 2) -> pp.Policy:
    """The demo policy; with ``unit`` protected per patient_id (user level)."""
    policy = pp.Policy.from_yaml(demo_policy_path()).to_dict()
    if unit:
        visits = policy["tables"]["visits"]
        visits.update(privacy_unit="patient_id", max_rows_per_unit=10)
        if max_groups is not None:
            visits["max_groups_per_unit"] = max_groups
    return pp.Policy.from_dict(policy)


@pytest.fixture
def row_sess(demo_db: Path):
    s = pp.connect(demo_db, policy=_policy(unit=False), budget=pp.PureDP(3))
    yield s
    s.close()


@pytest.fixture
def unit_sess(demo_db: Path):
    s = pp.connect(demo_db, policy=_policy(unit=True), budget=pp.PureDP(3))
    yield s
    s.close()


def _same_plan(a, b) -> None:
    """Mechanisms (count, label, region, partition, sensitivity, noise, cost) and totals."""
    assert len(a.mechanisms) == len(b.mechanisms)
    for x, y in zip(a.mechanisms, b.mechanisms):
        dx, dy = x.to_dict(), y.to_dict()
        for key in ("id", "label", "table", "region", "partition", "sensitivity", "noise",
                    "noise_std", "halfwidth_95", "cost", "threshold", "notes"):
            assert dx[key] == dy[key], key
    assert a.query_cost == b.query_cost and a.query_rule == b.query_rule
    assert a.marginal == b.marginal and a.projected_total == b.projected_total
    assert a.witness == b.witness and a.within_budget == b.within_budget


# ------------------------------------------------------------------------- split_dp_clause


def test_split_the_example() -> None:
    sql, opts = split_dp_clause(EXAMPLE)
    assert " ".join(sql.split()) == "SELECT hospital, COUNT(*) FROM visits GROUP BY hospital"
    assert len(sql) == len(EXAMPLE)  # (the clause blanked in place)
    assert opts == DPOptions(
        epsilon=Fraction(1), delta=Fraction(1, 100000), max_groups_contributed=2,
        privacy_unit_column="patient_id", clause=EXAMPLE[7:EXAMPLE.index(")") + 1])
    assert opts.budget() == pp.ApproxDP(1, Fraction(1, 100000))


@pytest.mark.parametrize("prefix,clause,suffix", [
    ("SELECT ", "WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5)", " COUNT(*) FROM visits"),
    ("select\n  ", "with differential_privacy\n  options (\n    EPSILON = 0.5 -- eps\n  )",
     "\n  count(*) AS n -- WITH DIFFERENTIAL_PRIVACY OPTIONS(x=1)\nFROM visits"),
    ("SELECT /* a comment */ ", "With Differential_Privacy Options(Epsilon=5e-1)",
     "COUNT(*) FROM visits WHERE department = 'WITH DIFFERENTIAL_PRIVACY OPTIONS(x=1)'"),
    ("SELECT ", "WITH ANONYMIZATION OPTIONS(epsilon=.5, delta=0)", " COUNT(*) FROM visits"),
    ("SELECT ", "WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon='0.5', delta=NULL)",
     "\tCOUNT(*)\tFROM visits;"),
])
def test_rest_is_byte_identical(prefix: str, clause: str, suffix: str) -> None:
    sql, opts = split_dp_clause(prefix + clause + suffix)
    assert sql == prefix + blanked(clause) + suffix  # (in place: positions still hold)
    assert sql == without_clauses(prefix + clause + suffix)
    assert opts is not None and opts.clause == clause
    assert opts.epsilon == Fraction(1, 2)
    assert opts.budget() == pp.PureDP(0.5)  # delta absent, NULL or 0


def test_clause_without_options() -> None:
    sql, opts = split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM visits")
    assert sql == "SELECT " + " " * 25 + " COUNT(*) FROM visits"
    assert opts == DPOptions(clause="WITH DIFFERENTIAL_PRIVACY")
    with pytest.raises(pp.PolicyError, match="no epsilon"):
        opts.budget()
    sql, opts = split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS() COUNT(*) FROM t")
    assert sql == "SELECT " + " " * 35 + " COUNT(*) FROM t" and opts.epsilon is None


@pytest.mark.parametrize("sql", [
    PLAIN,
    "SELECT COUNT(*) FROM visits WHERE department = 'WITH DIFFERENTIAL_PRIVACY OPTIONS(e=1)'",
    "SELECT COUNT(*) AS differential_privacy FROM visits -- WITH DIFFERENTIAL_PRIVACY",
    "SELECT anon_flag, COUNT(*) FROM t GROUP BY anon_flag",
])
def test_no_clause_returns_the_input(sql: str) -> None:
    out, opts = split_dp_clause(sql)
    assert out is sql and opts is None


def test_option_values() -> None:
    _, o = split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1.5E0, "
                           "privacy_unit_column=visits.\"Patient_ID\", max_groups_contributed=3)"
                           " COUNT(*) FROM visits")
    assert o.epsilon == Fraction(3, 2) and o.delta is None
    assert o.privacy_unit_column == "patient_id" and o.max_groups_contributed == 3
    _, o = split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, "
                           "privacy_unit_column=`pid`) COUNT(*) FROM t")
    assert o.privacy_unit_column == "pid"
    _, o = split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, "
                           "privacy_unit_column='pid') COUNT(*) FROM t")
    assert o.privacy_unit_column == "pid"


def test_unknown_option_is_named_with_the_known_ones() -> None:
    with pytest.raises(pp.UnsupportedQueryError) as info:
        split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, "
                        "Noise_Kind=LAPLACE) COUNT(*) FROM t")
    msg = str(info.value)
    assert "Noise_Kind" in msg
    assert all(name in msg for name in KNOWN_OPTIONS)
    assert "line 1, column 53" in msg


@pytest.mark.parametrize("options,error,match", [
    ("epsilon=1, EPSILON=2", pp.UnsupportedQueryError, "twice"),
    ("epsilon=abc", pp.UnsupportedQueryError, "number"),
    ("epsilon=0", pp.PolicyError, "positive"),
    ("epsilon=-1", pp.PolicyError, "positive"),
    ("epsilon=1, delta=1", pp.PolicyError, "delta"),
    ("epsilon=1, delta=-1e-5", pp.PolicyError, "delta"),
    ("epsilon=1, max_groups_contributed=1.5", pp.PolicyError, "integer"),
    ("epsilon=1, max_groups_contributed=0", pp.PolicyError, "integer"),
    ("epsilon=1, privacy_unit_column=1", pp.UnsupportedQueryError, "column name"),
    ("epsilon=1,", pp.ParseError, "empty option"),
    ("epsilon 1", pp.ParseError, "name=value"),
    ("epsilon=1 delta=2", pp.UnsupportedQueryError, "number"),
])
def test_malformed_options(options: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        split_dp_clause(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS({options}) COUNT(*) FROM t")


def test_clause_position_and_count() -> None:
    with pytest.raises(pp.UnsupportedQueryError, match="right after SELECT"):
        split_dp_clause("SELECT COUNT(*) FROM t WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1)")
    with pytest.raises(pp.UnsupportedQueryError, match="more than one"):
        split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) COUNT(*) FROM t "
                        "UNION ALL SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) COUNT(*) "
                        "FROM t")
    with pytest.raises(pp.UnsupportedQueryError, match="several SELECTs"):
        split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) COUNT(*) FROM t "
                        "UNION ALL SELECT COUNT(*) FROM t")
    with pytest.raises(pp.ParseError):
        split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1 COUNT(*) FROM t")


def test_budget_for_the_session_kind() -> None:
    _, o = split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) "
                           "COUNT(*) FROM t")
    assert o.budget() == pp.ApproxDP(1, 1e-6)
    assert o.budget_for(pp.ApproxDP) == pp.ApproxDP(1, 1e-6)
    assert o.budget_for(pp.PureDP) == pp.PureDP(1)  # ε-DP implies (ε, δ)-DP
    for kind in (pp.ZCDP, pp.GDP):
        with pytest.raises(pp.PolicyError, match="one privacy definition"):
            o.budget_for(kind)
    assert DPOptions(epsilon=Fraction(1)).budget_for(pp.ApproxDP) == pp.ApproxDP(1, 0)


# ------------------------------------------------------------------------- aggregate spellings


def test_rewrite_aggregates() -> None:
    sql = ("SELECT ANON_SUM(cost CLAMPED BETWEEN 0 AND 20000) AS s, anon_count(*) AS n, "
           "ANON_AVG(age  CLAMPED  BETWEEN -1.5 AND 100) AS a, "
           "SUM(length_of_stay, contribution_bounds_per_group => (0, 30)) AS l, "
           "COUNT(*) AS c FROM visits")
    out, bounds = rewrite_dp_aggregates(sql)
    assert out == ("SELECT SUM(cost) AS s, COUNT(*) AS n, AVG(age) AS a, "
                   "SUM(length_of_stay) AS l, COUNT(*) AS c FROM visits")
    assert [(b.func, b.argument, b.lower, b.upper) for b in bounds] == [
        ("SUM", "cost", 0, 20000), ("AVG", "age", Fraction(-3, 2), 100),
        ("SUM", "length_of_stay", 0, 30)]
    assert bounds[2].syntax == "contribution_bounds_per_group => (0, 30)"
    assert rewrite_dp_aggregates(PLAIN) == (PLAIN, [])


@pytest.mark.parametrize("sql,match", [
    ("SELECT ANON_QUANTILES(age, 4) FROM t", "ANON_QUANTILES"),
    ("SELECT ANON_NTILE(age) FROM t", "ANON_NTILE"),
    ("SELECT ANON_SUM(age CLAMPED BETWEEN x AND 3) FROM t", "CLAMPED BETWEEN"),
    ("SELECT SUM(age, contribution_bounds_per_group => 3) FROM t", "contribution_bounds"),
])
def test_rewrite_refusals(sql: str, match: str) -> None:
    with pytest.raises(pp.UnsupportedQueryError, match=match):
        rewrite_dp_aggregates(sql)


# ------------------------------------------------------------------------- same plan


def test_example_has_the_plain_plan_user_level(unit_sess: pp.Session) -> None:
    _same_plan(explain_bigquery(unit_sess, EXAMPLE), unit_sess.explain(PLAIN, epsilon=1))
    assert unit_sess.spent() == pp.PureDP(0)  # explain spends nothing


def test_same_plan_under_approx_dp(demo_db: Path) -> None:
    with pp.connect(demo_db, policy=_policy(unit=True), budget=pp.ApproxDP(3, 1e-4)) as s:
        _same_plan(explain_bigquery(s, EXAMPLE), s.explain(PLAIN, epsilon=1, delta=1e-5))


@pytest.mark.parametrize("bq,plain", [
    (("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5) department, COUNT(*) AS n, "
      "SUM(length_of_stay) AS los FROM visits WHERE age >= 65 GROUP BY department"),
     ("SELECT department, COUNT(*) AS n, SUM(length_of_stay) AS los FROM visits "
      "WHERE age >= 65 GROUP BY department")),
    (("SELECT WITH ANONYMIZATION OPTIONS(epsilon=0.5, delta=1e-5) hospital, "
      "ANON_COUNT(*) AS n, ANON_SUM(cost CLAMPED BETWEEN 0 AND 20000) AS c, "
      "ANON_AVG(age CLAMPED BETWEEN 0 AND 100) AS a FROM visits GROUP BY hospital"),
     ("SELECT hospital, COUNT(*) AS n, SUM(cost) AS c, AVG(age) AS a FROM visits "
      "GROUP BY hospital")),
    (("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, max_groups_contributed=1) sex, "
      "AVG(age, contribution_bounds_per_group => (0, 100)) AS a, "
      "COUNT(*, contribution_bounds_per_group => (0, 1)) AS n FROM visits GROUP BY sex"),
     "SELECT sex, AVG(age) AS a, COUNT(*) AS n FROM visits GROUP BY sex"),
])
def test_same_plan_row_level(row_sess: pp.Session, bq: str, plain: str) -> None:
    _same_plan(explain_bigquery(row_sess, bq), row_sess.explain(plain, epsilon=0.5))


def test_same_answers_with_noise_off(row_sess: pp.Session, demo_db: Path) -> None:
    bq = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, delta=1e-5) hospital, "
          "ANON_COUNT(*) AS n, ANON_SUM(age CLAMPED BETWEEN 0 AND 100) AS s FROM visits "
          "GROUP BY hospital ORDER BY hospital")
    sql, budget = apply_dp_clause(bq, row_sess.policy, row_sess.kind)
    assert budget == {"budget": pp.PureDP(0.5)}
    with noise_disabled():
        res = row_sess.sql(sql, **budget)
    assert res.cost == pp.PureDP(0.5)
    con = duckdb.connect(str(demo_db), read_only=True)
    want = con.execute("SELECT hospital, COUNT(*) AS n, SUM(age) AS s FROM visits "
                       "GROUP BY hospital ORDER BY hospital").fetchall()
    con.close()
    assert [tuple(r) for r in res.df.itertuples(index=False)] == want


# ------------------------------------------------------------------------- policy checks


def _refused(sess: pp.Session, sql: str, error: type, *needles: str) -> str:
    with pytest.raises(error) as info:
        explain_bigquery(sess, sql)
    msg = str(info.value)
    for n in needles:
        assert n in msg
    assert sess.spent() == pp.PureDP(0)
    return msg


def _q(options: str, body: str = "hospital, COUNT(*) FROM visits GROUP BY hospital") -> str:
    return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS({options}) {body}"


def test_privacy_unit_must_match_the_policy(row_sess: pp.Session,
                                            unit_sess: pp.Session) -> None:
    _refused(row_sess, _q("epsilon=1, privacy_unit_column=patient_id"), pp.PolicyError,
             "row level", "privacy_unit: patient_id")
    # left out, the policy's unit applies (as a BigQuery view with a privacy policy)
    _same_plan(explain_bigquery(unit_sess, _q("epsilon=1")),
               explain_bigquery(unit_sess, _q("epsilon=1, privacy_unit_column=patient_id")))
    _refused(unit_sess, _q("epsilon=1, privacy_unit_column=visit_id"), pp.PolicyError,
             "visit_id", "patient_id")
    explain_bigquery(unit_sess, _q("epsilon=1, privacy_unit_column=PATIENT_ID"))  # accepted
    explain_bigquery(row_sess, _q("epsilon=1"))


def test_max_groups_may_only_restate_or_tighten(demo_db: Path, unit_sess: pp.Session,
                                                row_sess: pp.Session) -> None:
    base = "epsilon=1, privacy_unit_column=patient_id, max_groups_contributed="
    _refused(unit_sess, _q(base + "3"), pp.PolicyError, "max_groups_per_unit=2", "<= 2")
    _same_plan(explain_bigquery(unit_sess, _q(base + "2")), unit_sess.explain(PLAIN, epsilon=1))
    distinct = "hospital, COUNT(DISTINCT patient_id) AS n FROM visits GROUP BY hospital"
    with pp.connect(demo_db, policy=_policy(unit=True, max_groups=None),
                    budget=pp.PureDP(3)) as s:
        # no policy bound: a distinct-unit count pays once per group a unit may touch (all
        # four public hospitals)...
        loose = explain_bigquery(s, _q("epsilon=1, privacy_unit_column=patient_id", distinct))
        assert loose.mechanisms[0].cost == pp.PureDP("1/4")
        # ... and a query that bounds its own groups (enforced by the rewrite) pays for 1
        tight = explain_bigquery(s, _q(base + "1", distinct))
        assert tight.mechanisms[0].cost == pp.PureDP(1)
        assert s.explain(f"SELECT {distinct}", epsilon=1,
                         max_groups_contributed=1).mechanisms[0].cost == pp.PureDP(1)
        with noise_disabled():  # the engine keeps one group per patient
            n = s.sql(_q(base + "1", distinct)).df["n"].sum()
        con = duckdb.connect(str(demo_db), read_only=True)
        patients = con.execute("SELECT COUNT(DISTINCT patient_id) FROM visits").fetchone()[0]
        con.close()
        assert n == patients
    explain_bigquery(row_sess, _q("epsilon=1, max_groups_contributed=5"))  # a row: one group


def test_clamping_bounds_against_the_policy(row_sess: pp.Session, unit_sess: pp.Session) -> None:
    body = "ANON_SUM(cost CLAMPED BETWEEN {} AND {}) AS c FROM visits"
    _refused(row_sess, _q("epsilon=1", body.format(0, 50000)), pp.PolicyError,
             "wider than the policy's bounds [0.0, 20000.0]")
    _refused(row_sess, _q("epsilon=1", body.format(-1, 100)), pp.PolicyError, "wider")
    # narrower bounds are applied to the query: the SUM's sensitivity is 100, not 20000
    (m,) = explain_bigquery(row_sess, _q("epsilon=1", body.format(0, 100))).mechanisms
    assert m.sensitivity_in_units == pytest.approx(100) and m.label == "SUM(cost)"
    _refused(row_sess, _q("epsilon=1", body.format(10, 1)), pp.UnsupportedQueryError,
             "lower bound is above")
    _refused(row_sess, _q("epsilon=1", "SUM(age + 1, contribution_bounds_per_group => (0, 100))"
                                       " FROM visits"), pp.UnsupportedQueryError, "not one")
    _refused(row_sess, _q("epsilon=1", "ANON_COUNT(* CLAMPED BETWEEN 2 AND 5) FROM visits"),
             pp.UnsupportedQueryError, "exactly 1")
    # with a privacy unit the bounds are on a unit's total per group (BigQuery's meaning):
    # tests/test_bigquery_per_group.py
    (m,) = explain_bigquery(unit_sess, _q("epsilon=1, privacy_unit_column=patient_id",
                                          body.format(0, 20000))).mechanisms
    assert m.label == "SUM(unit_sum_cost)"


def test_budget_given_twice_or_not_at_all(row_sess: pp.Session) -> None:
    with pytest.raises(pp.PolicyError, match="twice"):
        apply_dp_clause(_q("epsilon=1"), row_sess.policy, row_sess.kind, {"epsilon": 1})
    with pytest.raises(pp.PolicyError, match="delta but not epsilon"):
        apply_dp_clause(_q("delta=1e-5"), row_sess.policy, row_sess.kind, {"epsilon": 1})
    sql, budget = apply_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY " + PLAIN[7:],
                                  row_sess.policy, row_sess.kind, {"epsilon": 0.5, "mu": None})
    assert budget == {"epsilon": 0.5}  # no epsilon in the clause: the arguments give it
    assert row_sess.explain(sql, **budget).query_cost == pp.PureDP(0.5)
    assert apply_dp_clause(PLAIN, row_sess.policy, row_sess.kind, {"rho": 1}) == \
        (PLAIN, {"rho": 1})


def test_zcdp_session_refuses_epsilon_options(demo_db: Path) -> None:
    with (pp.connect(demo_db, policy=_policy(unit=False), budget=pp.ZCDP(1)) as s,
          pytest.raises(pp.PolicyError, match="zCDP")):
        explain_bigquery(s, _q("epsilon=1"))


# ------------------------------------------------------------------------- once wired


def test_session_sql_accepts_bigquery_syntax(unit_sess: pp.Session) -> None:
    _same_plan(unit_sess.explain(EXAMPLE), unit_sess.explain(PLAIN, epsilon=1))
    res = unit_sess.sql(EXAMPLE)
    assert res.cost == pp.PureDP(1)
    assert unit_sess.ledger.entries()[-1].sql == EXAMPLE  # the ledger keeps the user's text
    with pytest.raises(pp.PolicyError):
        unit_sess.sql(EXAMPLE.replace("max_groups_contributed=2", "max_groups_contributed=3"))
    assert unit_sess.spent() == pp.PureDP(1)


# ------------------------------------------------------------------------- ZetaSQL test options


def test_with_report_is_refused_with_where_the_intervals_are(row_sess: pp.Session) -> None:
    sql = (_q("epsilon=1, delta=1e-5", "hospital, COUNT(*) WITH REPORT(FORMAT=PROTO) FROM "
              "visits GROUP BY hospital"))
    msg = _refused(row_sess, sql, pp.UnsupportedQueryError, "WITH REPORT is not supported",
                   "Result.intervals")
    assert "column" in msg  # points at the clause
    with pytest.raises(pp.UnsupportedQueryError, match="WITH REPORT"):
        row_sess.sql(f"{PLAIN} WITH REPORT", epsilon=1)  # without a DP clause too
    assert row_sess.spent() == pp.PureDP(0)


def test_delta_one_names_the_compliance_test_setting() -> None:
    with pytest.raises(pp.PolicyError, match="switch privacy off"):
        split_dp_clause("SELECT WITH ANONYMIZATION OPTIONS(epsilon=1, delta=1, kappa=1) "
                        "COUNT(*) FROM visits")


def test_kappa_is_max_groups_contributed() -> None:
    _, opts = split_dp_clause("SELECT WITH ANONYMIZATION OPTIONS(epsilon=1, delta=1e-5, "
                              "kappa=2) COUNT(*) FROM visits")
    assert opts is not None and opts.max_groups_contributed == 2


@pytest.mark.parametrize("option", ["group_selection_strategy=LAPLACE_THRESHOLD"])
def test_known_bigquery_options_privplan_does_not_take_are_explained(option: str) -> None:
    with pytest.raises(pp.UnsupportedQueryError, match="is not supported: .*Remove it"):
        split_dp_clause(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, {option}) "
                        "COUNT(*) FROM visits")


def test_narrower_clamps_are_what_the_engine_sums(row_sess: pp.Session, demo_db: Path) -> None:
    sql = _q("epsilon=1", "hospital, ANON_SUM(cost CLAMPED BETWEEN 10 AND 100) AS c FROM visits "
                          "GROUP BY hospital ORDER BY hospital")
    with noise_disabled():
        stripped, budget = apply_dp_clause(sql, row_sess.policy, row_sess.kind, {})
        assert budget["clamps"] == {"cost": (Fraction(10), Fraction(100))}
        got = row_sess.sql(stripped, **budget).df["c"].tolist()
        by_python = row_sess.sql("SELECT hospital, SUM(cost) AS c FROM visits GROUP BY hospital "
                                 "ORDER BY hospital", epsilon=1,
                                 clamps={"cost": (10, 100)}).df["c"].tolist()
    con = duckdb.connect(str(demo_db), read_only=True)
    want = [r[0] for r in con.execute(
        "SELECT SUM(CASE WHEN cost IS NOT NULL THEN LEAST(GREATEST(cost, 10), 100) END) "
        "FROM visits GROUP BY hospital ORDER BY hospital").fetchall()]
    con.close()
    assert got == pytest.approx(want, abs=0.01 * 5000) and by_python == got
    with pytest.raises(pp.PolicyError, match="only narrow"):
        row_sess.sql("SELECT SUM(cost) FROM visits", epsilon=1, clamps={"cost": (0, 10**6)})
