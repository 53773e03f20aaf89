"""Spark relations that change under a session, and the owner's own settings in them.

* A temporary view redefined after planning (a column's type changed) is never read with the
  old types: every bind (before every charge, a cached plan's too) and every planning compare
  the schema of each table the engine described with the schema now; a change makes the
  session read its column types afresh and plan again (the engine's generation moves, so no
  cached plan is reused). A change the policy does not accept is refused before the charge,
  and a change back is answered again.
* privplan pins ANSI mode on for its own statements. An owner's view keeps the ANSI mode it
  was defined with (Spark stores a view's settings), so the pin does not change what the
  owner's CAST does; a policy ``source:`` expression is made such a view, under the owner's
  settings, for the same reason (read inline, it was analysed under the pin and failed after
  the charge on a row the owner's setting reads as NULL). A view that does fail on a row is
  the owner's relation failing (DESIGN.md §1): after the charge, with the fixed message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import privplan as pp
from privplan.engines.base import RUN_FAILED
from privplan.errors import ExecutionError
from privplan.testing import noise_disabled

POLICY = {"tables": {"t": {"columns": {"id": {"type": "int"},
                                       "v": {"type": "float", "lower": 0, "upper": 10}}}}}
Q = "SELECT SUM(v) AS s FROM t WHERE id < 30"


def _define(spark: Any, kind: str, scale: int = 1) -> None:
    rows = [(i, i % 10 * scale) for i in range(60)]
    if kind == "string":  # (one value that is no number: a stale read as a double fails)
        data: list[tuple[Any, ...]] = [(i, "x" if i == 5 else str(v)) for i, v in rows]
    elif kind == "double":
        data = [(i, float(v)) for i, v in rows]
    else:
        data = rows
    spark.createDataFrame(data, f"id long, v {kind}").createOrReplaceTempView("t")


@pytest.fixture
def view(spark: Any) -> Iterator[Any]:
    _define(spark, "double")
    yield spark
    spark.catalog.dropTempView("t")


def _sum(sess: pp.Session, sql: str = Q) -> float:
    with noise_disabled():
        return float(sess.sql(sql, epsilon=1).df["s"].iloc[0])


def test_a_redefined_view_is_described_again(view: Any) -> None:
    with pp.connect(view, policy=POLICY, budget=pp.PureDP(100)) as sess:
        assert _sum(sess) == pytest.approx(135.0)
        generation = sess.engine.generation
        _define(view, "string")
        for _ in range(2):  # (the cached plan, then the query planned again)
            with pytest.raises(pp.PolicyError, match="stored as VARCHAR"):
                sess.sql(Q, epsilon=1)
            assert sess.spent() == pp.PureDP(1)
        assert sess.engine.generation > generation
        _define(view, "double", scale=2)  # (back to a double: answered, over the new rows)
        assert _sum(sess) == pytest.approx(210.0)  # (2·(0..9) clamped to 10: 70 per ten)
        _define(view, "int")  # (an integer read as a float: the typed view converts it)
        assert _sum(sess) == pytest.approx(135.0)
        assert _sum(sess) == pytest.approx(135.0)  # (and cached again)
        assert sess.spent() == pp.PureDP(4)


def test_a_view_changed_between_plan_and_charge_is_planned_again(view: Any) -> None:
    """The change lands after the query was planned (explain) and cached: its bind before the
    charge finds it, and the charged answer reads the new types."""
    with pp.connect(view, policy=POLICY, budget=pp.PureDP(100)) as sess:
        sess.explain(Q, epsilon=1)
        _define(view, "int", scale=3)
        assert _sum(sess) == pytest.approx(234.0)  # (3·(0..9) clamped to 10: 78 per ten rows)
        assert sess.spent() == pp.PureDP(1)


# -- the owner's settings in the owner's relations -------------------------------------------
ROWS = [(i, str(i)) for i in range(40)] + [(40, "abc")]
SOURCE = "(SELECT id, CAST(s AS INTEGER) AS x FROM raw)"
OWNER_POLICY = {"tables": {
    "v": {"columns": {"id": {"type": "int"}, "x": {"type": "int", "lower": 0, "upper": 100}}},
    "w": {"source": SOURCE,
          "columns": {"id": {"type": "int"}, "x": {"type": "int", "lower": 0, "upper": 100}}},
}}


@pytest.fixture
def owner(spark: Any) -> Iterator[Any]:
    spark.createDataFrame(ROWS, "id long, s string").createOrReplaceTempView("raw")
    saved = spark.conf.get("spark.sql.ansi.enabled", None)
    yield spark
    for name in ("v", "raw"):
        spark.catalog.dropTempView(name)
    if saved is None:
        spark.conf.unset("spark.sql.ansi.enabled")
    else:
        spark.conf.set("spark.sql.ansi.enabled", saved)


def test_owner_relations_keep_the_owners_ansi_mode(owner: Any) -> None:
    owner.conf.set("spark.sql.ansi.enabled", "false")  # (the owner's choice: NULL, no failure)
    owner.sql(f"CREATE OR REPLACE TEMP VIEW v AS SELECT * FROM {SOURCE.replace('INTEGER', 'INT')}")
    with pp.connect(owner, policy=OWNER_POLICY, budget=pp.PureDP(100)) as sess:
        for table in ("v", "w"):  # (the row 'abc' is NULL for the owner: 35 + ... + 39)
            got = _sum(sess, f"SELECT SUM(x) AS s FROM {table} WHERE id >= 35")
            assert got == pytest.approx(185.0)
    assert owner.conf.get("spark.sql.ansi.enabled") == "false"


def test_an_owner_view_that_fails_fails_after_the_charge_withheld(owner: Any) -> None:
    owner.conf.set("spark.sql.ansi.enabled", "true")  # (Spark 4's default: the CAST fails)
    owner.sql(f"CREATE OR REPLACE TEMP VIEW v AS SELECT * FROM {SOURCE.replace('INTEGER', 'INT')}")
    with pp.connect(owner, policy=OWNER_POLICY, budget=pp.PureDP(100)) as sess:
        for table in ("v", "w"):
            before = sess.spent()
            with pytest.raises(ExecutionError) as info:
                sess.sql(f"SELECT SUM(x) AS s FROM {table} WHERE id >= 35", epsilon=1)
            assert str(info.value) == RUN_FAILED
            assert sess.spent() != before
