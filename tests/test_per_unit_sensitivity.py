"""The charge of a per-unit pre-aggregation against brute force (the audit's over-charge).

``SELECT g, SUM(s) FROM (SELECT uid, g, SUM(x) AS s FROM t GROUP BY uid, g) GROUP BY g`` is the
same answer as ``SELECT g, SUM(x) FROM t GROUP BY g``. On tiny domains every unit the policy
allows (1..K rows of (g, x), within its group limits) is added to a fixed dataset of other units;
the largest move of the answer vector over these add/remove neighbours is the exact L1 (and
squared L2) sensitivity. DuckDB computes every neighbour's answer with the query as written, in
one statement: the neighbours are *worlds* (a column ``w``, world 0 without the unit) and every
SELECT of the query also selects and groups by ``w``.

privplan's charge is read from the calibrated noise of a one-mechanism query: a discrete
Laplace scale t at ε = 1 is the L1 sensitivity it charges a unit (t = Δ₁/ε), a discrete
Gaussian at ρ = 1/2 the squared L2 one (σ² = Δ₂²/(2ρ)). It must be at least the exact one
(sound), and where the two spellings compute the same answer the per-unit one must be charged
as the direct one.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot
from sqlglot import exp

import privplan as pp
from privplan.mechanisms.noise import DiscreteGaussian, DiscreteLaplace

K = 3  # max_rows_per_unit

# name -> (groups, x values a unit may have, table limits); None: a NULL x (nullable column)
POLICIES: dict[str, tuple[list[str], list[int | None], dict[str, Any]]] = {
    "two groups": (["a", "b"], [0, 1, 2], {}),
    "negative values": (["a", "b"], [-2, 0, 1], {}),
    "nullable values": (["a", "b"], [None, 0, 2], {}),
    "two of three groups": (["a", "b", "c"], [0, 2], {"max_groups_per_unit": 2}),
    "two rows per group": (["a", "b"], [-1, 0, 2], {"max_rows_per_group_per_unit": 2}),
    "one group of two rows": (["a", "b"], [0, 1, 2], {"max_groups_per_unit": 1,
                                                      "max_rows_per_group_per_unit": 2}),
}
BASE = [(100, "a", 1), (100, "b", 0), (101, "a", 2), (102, "b", 1)]  # the other units


def _policy(name: str) -> pp.Policy:
    groups, values, limits = POLICIES[name]
    bounds = [v for v in values if v is not None]
    return pp.Policy.from_dict({"tables": {"t": {
        "privacy_unit": "uid", "max_rows_per_unit": K, "neighbourhood": "add_remove", **limits,
        "columns": {"uid": {"type": "int"},
                    "g": {"type": "str", "public_values": groups, "nullable": False},
                    "x": {"type": "int", "lower": min(bounds), "upper": max(bounds),
                          "nullable": None in values}}}}})


def _units(name: str) -> Iterator[tuple[tuple[str, int | None], ...]]:
    """Every unit the policy allows: 1..K rows of (g, x) (multisets: row order is irrelevant),
    in at most max_groups_per_unit groups with at most max_rows_per_group_per_unit in each."""
    groups, values, limits = POLICIES[name]
    cells = [(g, x) for g in groups for x in values]
    for n in range(1, K + 1):
        for rows in itertools.combinations_with_replacement(cells, n):
            per_group = Counter(g for g, _ in rows)
            if (len(per_group) <= limits.get("max_groups_per_unit", K)
                    and max(per_group.values()) <= limits.get("max_rows_per_group_per_unit", K)):
                yield rows


def _in_worlds(sql: str) -> str:
    """``sql`` computed in every world at once: each SELECT also selects and groups by ``w``."""
    tree = sqlglot.parse_one(sql, dialect="duckdb")
    for select in tree.find_all(exp.Select):
        select.set("expressions", [exp.column("w"), *select.expressions])
        group = select.args.get("group")
        select.set("group", exp.Group(expressions=[exp.column("w"),
                                                   *(group.expressions if group else [])]))
    return tree.sql(dialect="duckdb")


@functools.cache
def _exact(sql: str, name: str) -> tuple[Fraction, Fraction]:
    """The exact (L1, squared L2) sensitivity of ``sql``: the largest move of its answer vector
    (one value per group of its GROUP BY, or one value) when one allowed unit is added."""
    rows = [(0, *r) for r in BASE]
    units = list(_units(name))
    for w, unit in enumerate(units, start=1):
        rows += [(w, *r) for r in BASE] + [(w, 7, g, x) for g, x in unit]
    con = duckdb.connect()
    con.register("t", pd.DataFrame(rows, columns=["w", "uid", "g", "x"]).astype({"x": "Int64"}))
    answers: dict[tuple[int, Any], Fraction] = {}
    for row in con.execute(_in_worlds(sql)).fetchall():  # (w, [key,] value)
        answers[row[0], row[1] if len(row) == 3 else None] = Fraction(row[-1] or 0)
    keys = {key for _, key in answers}
    l1 = l2 = Fraction(0)
    for w in range(1, len(units) + 1):
        moved = [answers.get((w, key), 0) - answers.get((0, key), 0) for key in keys]
        l1, l2 = max(l1, sum(abs(v) for v in moved)), max(l2, sum(v * v for v in moved))
    return l1, l2


@pytest.fixture(scope="module")
def sessions() -> Iterator[dict[tuple[str, str], pp.Session]]:
    """One session per policy and privacy definition (planning spends nothing)."""
    opened: dict[tuple[str, str], pp.Session] = {}
    yield opened
    for sess in opened.values():
        sess.close()


def _charged(sessions: dict[tuple[str, str], pp.Session], sql: str, name: str
             ) -> tuple[Fraction, Fraction]:
    """The (L1, squared L2) sensitivity privplan charges ``sql``, from its one mechanism."""
    out = []
    for kind, budget, asked in (("pure", pp.PureDP(10), {"epsilon": 1}),
                                ("zcdp", pp.ZCDP(10), {"rho": 0.5})):
        sess = sessions.get((name, kind))
        if sess is None:
            sess = sessions[name, kind] = pp.connect(policy=_policy(name), budget=budget)
            sess.register("t", pd.DataFrame(BASE, columns=["uid", "g", "x"]))
        planned, _ = sess.plan(sql, asked)
        (only,) = planned.measures
        step, noise = only.measure.scale, only.noise  # (step: 1 on these integer columns)
        if isinstance(noise, DiscreteLaplace):  # t = Δ₁/ε, ε = 1
            out.append(noise.scale * step)
        else:  # σ² = Δ₂²/(2ρ), ρ = 1/2
            assert isinstance(noise, DiscreteGaussian)
            out.append(noise.sigma2 * step * step)
    return out[0], out[1]


DERIVED = ("(SELECT uid, g, SUM(x) AS s, COUNT(*) AS n, COUNT(x) AS nx, AVG(x) AS a FROM t "
           "GROUP BY uid, g) AS u")
POSITIVE = "(SELECT uid, g, SUM(x) AS s FROM t WHERE x > 0 GROUP BY uid, g) AS u"

# (per-unit spelling, the direct spelling of the same answer)
SAME = {
    "SUM of SUM by group": (f"SELECT g, SUM(s) AS v FROM {DERIVED} GROUP BY g",
                            "SELECT g, SUM(x) AS v FROM t GROUP BY g"),
    "SUM of COUNT by group": (f"SELECT g, SUM(n) AS v FROM {DERIVED} GROUP BY g",
                              "SELECT g, COUNT(*) AS v FROM t GROUP BY g"),
    "SUM of COUNT(x) by group": (f"SELECT g, SUM(nx) AS v FROM {DERIVED} GROUP BY g",
                                 "SELECT g, COUNT(x) AS v FROM t GROUP BY g"),
    "COUNT of rows by group": (f"SELECT g, COUNT(*) AS v FROM {DERIVED} GROUP BY g",
                               "SELECT g, COUNT(DISTINCT uid) AS v FROM t GROUP BY g"),
    "SUM of SUM by group, inner WHERE": (f"SELECT g, SUM(s) AS v FROM {POSITIVE} GROUP BY g",
                                         "SELECT g, SUM(x) AS v FROM t WHERE x > 0 GROUP BY g"),
    "SUM of SUM": (f"SELECT SUM(s) AS v FROM {DERIVED}", "SELECT SUM(x) AS v FROM t"),
    "SUM of COUNT": (f"SELECT SUM(n) AS v FROM {DERIVED}", "SELECT COUNT(*) AS v FROM t"),
    "SUM of SUM in one group": (f"SELECT SUM(s) AS v FROM {DERIVED} WHERE g = 'a'",
                                "SELECT SUM(x) AS v FROM t WHERE g = 'a'"),
}

# per-unit shapes without a direct spelling (or charged on the derived table): sound only
OTHER = {
    "COUNT of rows": f"SELECT COUNT(*) AS v FROM {DERIVED}",
    "SUM of AVG by group": f"SELECT g, SUM(a) AS v FROM {DERIVED} GROUP BY g",
    "SUM of SUM over a WHERE on it": f"SELECT g, SUM(s) AS v FROM {DERIVED} WHERE s >= 2 "
                                     "GROUP BY g",
    "SUM of COUNT over a WHERE on it": f"SELECT SUM(n) AS v FROM {DERIVED} WHERE n = 1",
    "SUM of COUNT of a filter": f"SELECT g, SUM(n) FILTER (WHERE s > 0) AS v FROM {DERIVED} "
                                "GROUP BY g",
    "SUM of twice the SUM by group": f"SELECT g, SUM(2 * s) AS v FROM {DERIVED} GROUP BY g",
}


def _capped(name: str) -> bool:
    """Whether the derived rows keep fewer base rows than a direct query (m groups of c rows,
    m·c < K): ungrouped, the two spellings then differ, and the per-unit one is charged less."""
    limits = POLICIES[name][2]
    return limits.get("max_groups_per_unit", K) * limits.get("max_rows_per_group_per_unit", K) < K


@pytest.mark.parametrize("name", list(POLICIES))
@pytest.mark.parametrize("shape", list(SAME))
def test_per_unit_spelling_is_charged_as_the_direct_one(
        sessions: dict[tuple[str, str], pp.Session], shape: str, name: str) -> None:
    per_unit, direct = SAME[shape]
    exact = _exact(per_unit, name)
    charged, as_direct = _charged(sessions, per_unit, name), _charged(sessions, direct, name)
    assert charged[0] >= exact[0] and charged[1] >= exact[1], (charged, exact)  # sound
    if _capped(name) and "by group" not in shape:
        assert charged[0] <= as_direct[0] and charged[1] <= as_direct[1]
        return
    assert exact == _exact(direct, name)  # (the same answer)
    assert charged == as_direct, (charged, as_direct, exact)


@pytest.mark.parametrize("name", list(POLICIES))
@pytest.mark.parametrize("shape", list(OTHER))
def test_other_per_unit_shapes_are_charged_at_least_their_sensitivity(
        sessions: dict[tuple[str, str], pp.Session], shape: str, name: str) -> None:
    exact = _exact(OTHER[shape], name)
    charged = _charged(sessions, OTHER[shape], name)
    assert charged[0] >= exact[0] and charged[1] >= exact[1], (charged, exact)


def test_the_audits_query_is_charged_as_the_direct_one() -> None:
    """The audit's numbers: 3 rows per unit, x in [0, 10], two groups: scale 30 at ε = 1 for
    both spellings (it was 60 for the per-unit one: each derived row charged 3 rows' worth)."""
    policy = pp.Policy.from_dict({"tables": {"t": {
        "privacy_unit": "uid", "max_rows_per_unit": 3, "columns": {
            "uid": {"type": "int"}, "g": {"type": "str", "public_values": ["a", "b"]},
            "x": {"type": "int", "lower": 0, "upper": 10}}}}})
    with pp.connect(policy=policy, budget=pp.PureDP(10)) as sess:
        sess.register("t", pd.DataFrame(BASE, columns=["uid", "g", "x"]))
        scales = [sess.plan(sql, {"epsilon": 1})[0].measures[0].noise.scale for sql in (
            ("SELECT g, SUM(tot) FROM (SELECT uid, g, SUM(x) AS tot FROM t GROUP BY uid, g) "
             "GROUP BY g"), "SELECT g, SUM(x) FROM t GROUP BY g")]
    assert scales == [30, 30]


def test_units_beyond_the_bounds_move_the_answer_by_at_most_the_charge() -> None:
    """Units with more rows than K, or than c in a group: privplan keeps K of them and clamps a
    derived row to c rows' worth, so with noise off removing any one unit moves the answers by
    at most the L1 sensitivity charged (privplan as judge, on its own bounded rows)."""
    from privplan.testing import noise_disabled

    rng = np.random.default_rng(11)
    rows = [(uid, str(rng.choice(["a", "b"])), int(rng.integers(-1, 3)))
            for uid in range(8) for _ in range(int(rng.integers(1, 7)))]
    frame = pd.DataFrame(rows, columns=["uid", "g", "x"])
    queries = [SAME["SUM of SUM by group"][0], SAME["SUM of COUNT"][0],
               SAME["SUM of SUM by group, inner WHERE"][0]]

    def answers(data: pd.DataFrame) -> list[pd.Series]:
        with pp.connect(policy=_policy("two rows per group"), budget=pp.PureDP(100)) as sess:
            sess.register("t", data)
            with noise_disabled():
                return [sess.sql(sql, epsilon=1).df.set_index(
                    "g" if "GROUP BY g" in sql else pd.Index([0]))["v"].astype(float)
                    for sql in queries]

    with pp.connect(policy=_policy("two rows per group"), budget=pp.PureDP(100)) as sess:
        sess.register("t", frame)
        charged = [sess.plan(sql, {"epsilon": 1})[0].measures[0].noise.scale for sql in queries]
    full = answers(frame)
    moved = [0.0] * len(queries)
    for uid in frame["uid"].unique():
        for i, (a, b) in enumerate(zip(full, answers(frame[frame["uid"] != uid]))):
            moved[i] = max(moved[i], float((a - b.reindex(a.index).fillna(0)).abs().sum()))
    assert all(m <= c for m, c in zip(moved, charged)), (moved, charged)
    assert max(moved) > 0


def test_the_per_unit_sum_composes_with_direct_queries_as_they_do(tmp_path: Path) -> None:
    """Accounted on the base table, a per-unit SUM composes with direct queries over the same
    rows: a unit's rows with x > 0 and its rows with x <= 0 are disjoint, so after a direct
    query over the ones and a per-unit one over the others a unit has paid for its k rows once
    (it was 2ε: the derived table was a table of its own); a ledger replays it."""
    ledger = tmp_path / "l.sqlite"
    frame = pd.DataFrame(BASE, columns=["uid", "g", "x"])
    queries = ["SELECT g, SUM(x) AS v FROM t WHERE x > 0 GROUP BY g",
               ("SELECT g, SUM(s) AS v FROM (SELECT uid, g, SUM(x) AS s FROM t WHERE x <= 0 "
                "GROUP BY uid, g) AS u GROUP BY g")]
    with pp.connect(policy=_policy("negative values"), budget=pp.PureDP(10),
                    ledger=ledger) as sess:
        sess.register("t", frame)
        for sql in queries:
            sess.sql(sql, epsilon=1)
        assert sess.spent() == pp.PureDP(1)
    with pp.connect(policy=_policy("negative values"), budget=pp.PureDP(10),
                    ledger=ledger) as again:
        assert again.spent() == pp.PureDP(1)


@pytest.mark.parametrize("sql, on_base", [
    (f"SELECT g, SUM(s) AS v, SUM(n) AS w FROM {DERIVED} GROUP BY g", {"SUM(s)", "SUM(n)"}),
    (f"SELECT SUM(nx) AS v FROM {DERIVED} WHERE g = 'a'", {"SUM(nx)"}),
    (f"SELECT g, AVG(s) AS v FROM {DERIVED} GROUP BY g", set()),  # centred: derived rows
    (f"SELECT g, AVG(a) AS v, MAX(s) AS w FROM {DERIVED} GROUP BY g", set()),
    (f"SELECT g, COUNT(*) AS v FROM {DERIVED} GROUP BY g", set()),
    (f"SELECT g, SUM(s) AS v FROM {DERIVED} WHERE s >= 2 GROUP BY g", set()),
    (f"SELECT g, SUM(s) FILTER (WHERE n > 1) AS v FROM {DERIVED} GROUP BY g", set()),
    (f"SELECT g, SUM(s * 2) AS v FROM {DERIVED} GROUP BY g", set()),
    (f"SELECT s, SUM(n) AS v FROM {DERIVED} GROUP BY s", set()),  # keyed by a derived value
])
def test_which_measures_are_charged_in_base_rows(sql: str, on_base: set[str]) -> None:
    """Plain SUMs of derived SUM/COUNT columns over inner keys are mechanisms of the base table;
    everything else keeps the derived table's charge."""
    with pp.connect(policy=_policy("two groups"), budget=pp.ApproxDP(10, 1e-6)) as sess:
        sess.register("t", pd.DataFrame(BASE, columns=["uid", "g", "x"]))
        planned, _ = sess.plan(sql, {"epsilon": 1, "delta": 1e-7})
    tables = {p.spec.label: p.spec.table for p in planned.measures}
    assert {label for label, table in tables.items() if table == "t"} == on_base
    assert all("/per-unit/" in table for label, table in tables.items() if label not in on_base)
