"""BigQuery's max_rows_contributed=m: a query keeps at most m of each unit's rows.

Oracles (noise off, DuckDB as judge): every unit contributes min(its rows, m) rows in all; the
rows kept depend on the unit's own rows only, so removing any one unit moves the released
counts by at most m in all groups together (brute force over every unit); the partition's
bounds tighten to m, so a grouped query's noise is calibrated to fewer rows; m above the
policy's max_rows_per_unit is refused (a query may not loosen the policy).
"""

from __future__ import annotations

import duckdb
import pytest

import privplan as pp
from privplan.testing import noise_disabled

POLICY = {"tables": {"t": {"privacy_unit": "uid", "max_rows_per_unit": 5, "columns": {
    "uid": {"type": "int"}, "g": {"type": "str", "public_values": ["g0", "g1", "g2"]},
    "x": {"type": "int", "lower": 0, "upper": 10}}}}}
ROWS = [(i // 5 if i < 60 else 12 + i % 3, f"g{(i * 7) % 3}", i % 7) for i in range(75)]


def _con(rows: list[tuple[int, str, int]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE t(uid INTEGER, g VARCHAR, x INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    return con


def _dp(options: str, body: str) -> str:
    return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1{options}) {body}"


GROUPED = "g, COUNT(*) AS n FROM t GROUP BY g ORDER BY g"


def _counts(rows: list[tuple[int, str, int]], m: int) -> dict[str, int]:
    with pp.connect(_con(rows), policy=POLICY, budget=pp.PureDP(100)) as sess, \
            noise_disabled():
        df = sess.sql(_dp(f", max_rows_contributed={m}", GROUPED)).df
    return dict(zip(df["g"], df["n"]))


@pytest.mark.parametrize("m", [1, 2, 4])
def test_each_unit_keeps_at_most_m_rows(m: int) -> None:
    con = _con(ROWS)
    want = con.execute(f"SELECT SUM(LEAST(n, {m})) FROM (SELECT uid, LEAST(COUNT(*), 5) AS n "
                       "FROM t GROUP BY uid)").fetchone()[0]
    with pp.connect(_con(ROWS), policy=POLICY, budget=pp.PureDP(100)) as sess, \
            noise_disabled():
        total = sess.sql(_dp(f", max_rows_contributed={m}", "COUNT(*) AS n FROM t")).df
    assert total["n"].tolist() == [want]
    assert sum(_counts(ROWS, m).values()) == want


def test_removing_a_unit_moves_the_counts_by_at_most_m() -> None:
    m = 2
    base = _counts(ROWS, m)
    for uid in sorted({r[0] for r in ROWS}):
        without = _counts([r for r in ROWS if r[0] != uid], m)
        moved = sum(abs(base[g] - without.get(g, 0)) for g in base)
        assert moved <= m, (uid, moved)


def test_tighter_rows_mean_less_noise_and_looser_is_refused() -> None:
    with pp.connect(_con(ROWS), policy=POLICY, budget=pp.PureDP(100)) as sess:
        tight = sess.explain(_dp(", max_rows_contributed=2", GROUPED)).mechanisms[0]
        same = sess.explain(_dp(", max_rows_contributed=5", GROUPED)).mechanisms[0]
        plain = sess.explain(_dp("", GROUPED)).mechanisms[0]
        assert same.noise == plain.noise
        assert tight.noise_std < plain.noise_std
        with pytest.raises(pp.PolicyError, match="may not loosen"):
            sess.sql(_dp(", max_rows_contributed=6", GROUPED))
        assert sess.spent() == pp.PureDP(0)
