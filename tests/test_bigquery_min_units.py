"""BigQuery's min_privacy_units_per_group: partition selection's threshold rises by N - 1.

Oracles: the planned threshold with N is the threshold without it plus N - 1 (a constant
shift of the selection count: same ε, δ and charge); with noise off the released groups are
exactly those whose distinct-unit count reaches that threshold, counted by DuckDB itself; a
query whose groups are public, or that has no GROUP BY, refuses the option and spends nothing.
"""

from __future__ import annotations

import duckdb
import pytest

import privplan as pp
from privplan.testing import noise_disabled

POLICY = {"tables": {"t": {"privacy_unit": "uid", "max_rows_per_unit": 2, "columns": {
    "uid": {"type": "int"}, "g": {"type": "str"},
    "p": {"type": "str", "public_values": ["a", "b"]}}}}}
SIZES = {"g1": 1, "g5": 5, "g50": 50, "g80": 80, "g100": 100}  # distinct units per group


@pytest.fixture()
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE t(uid INTEGER, g VARCHAR, p VARCHAR)")
    rows, uid = [], 0
    for group, units in SIZES.items():
        for _ in range(units):
            uid += 1
            rows += [(uid, group, "a"), (uid, group, "b")]
    c.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    return c


def _q(extra: str = "") -> str:
    return ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5" + extra
            + ") g, COUNT(*) AS n FROM t GROUP BY g")


def _threshold(sess: pp.Session, sql: str) -> int:
    planned, _ = sess.plan(sql, {})
    (selection,) = [p for p in planned.measures if p.threshold is not None]
    return selection.threshold


def test_threshold_rises_by_n_minus_one_at_the_same_charge(con: duckdb.DuckDBPyConnection) -> None:
    units = dict(con.execute("SELECT g, COUNT(DISTINCT uid) FROM t GROUP BY g").fetchall())
    assert units == SIZES
    with pp.connect(con.cursor(), policy=POLICY, budget=pp.ApproxDP(10, 1e-3)) as sess:
        base = _threshold(sess, _q())
        with_n = _threshold(sess, _q(", min_privacy_units_per_group=25"))
        assert with_n == base + 24
        assert sess.explain(_q(", min_privacy_units_per_group=25")).query_cost == \
            sess.explain(_q()).query_cost
        with noise_disabled():
            plain = set(sess.sql(_q()).df["g"])
            released = set(sess.sql(_q(", min_privacy_units_per_group=25")).df["g"])
    assert plain == {g for g, n in units.items() if n >= base} == {"g50", "g80", "g100"}
    assert released == {g for g, n in units.items() if n >= with_n} == {"g80", "g100"}


@pytest.mark.parametrize("body, error, fragment", [
    ("p, COUNT(*) AS n FROM t GROUP BY p", pp.UnsupportedQueryError, "public"),
    ("COUNT(*) AS n FROM t", pp.UnsupportedQueryError, "no GROUP BY"),
])
def test_public_groups_or_no_groups_refuse_it(con: duckdb.DuckDBPyConnection, body: str,
                                              error: type, fragment: str) -> None:
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, "
           "min_privacy_units_per_group=3) " + body)
    with pp.connect(con.cursor(), policy=POLICY, budget=pp.ApproxDP(10, 1e-3)) as sess:
        with pytest.raises(error, match=fragment):
            sess.sql(sql)
        with pytest.raises(pp.PolicyError, match="positive integer"):
            sess.sql(_q(", min_privacy_units_per_group=0"))
        assert sess.spent() == pp.ApproxDP(0, 0)
