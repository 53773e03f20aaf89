"""The flat output path (no DuckDB round trip) against the DuckDB post-processing it replaces,
and the vectorised derived aggregates against a row-by-row reference.

Oracle 1: every supported query of ``sql_examples/`` is answered twice with the same seeded
noise, once through :func:`privplan.rewrite.postprocess.flat_output` and once with it switched
off (so DuckDB runs the outer query over the noisy table); the frames, intervals and accuracy
must be identical, dtypes included.

Oracle 2: :func:`derived_values` equals a scalar, row-at-a-time evaluation of the documented
rules (mean / variance from noisy sums, clamped to what the bounds allow, NULL below the
minimum count) over noisy tables with counts at and around the edges (negative, 0, 1, 2).
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from example_answers import answer_examples
from test_sql_examples import fmt  # the example-file format shared with the runner

import privplan as pp
import privplan.assemble as assemble_module
import privplan.session.session as session_module
from privplan.demo.data import write_demo_database
from privplan.rewrite.engine_sql import measure_id_column
from privplan.rewrite.postprocess import derived_values
from privplan.sql.plan import AggregateUse


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("flat") / "demo.duckdb", rows=5_000)


@pytest.mark.parametrize("path", fmt.example_files(), ids=lambda p: p.name)
def test_flat_output_equals_duckdb_post_processing(path: Path, demo_db: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    example = fmt.parse_file(path)
    flat, _ = answer_examples(example, demo_db)
    monkeypatch.setattr(assemble_module, "FLAT_OUTPUT", False)
    duck, _ = answer_examples(example, demo_db)
    assert len(flat) == len(duck)
    for q, a, b in zip([q for q in example.queries if not q.expects_error], flat, duck):
        where = f"{path.name} query {q.index}"
        pd.testing.assert_frame_equal(a.df, b.df, check_exact=True, obj=where)
        pd.testing.assert_frame_equal(a.intervals, b.intervals, check_exact=True, obj=where)
        assert a.accuracy == b.accuracy, where


@pytest.mark.parametrize("path", fmt.example_files(), ids=lambda p: p.name)
def test_flat_columns_equal_the_frame_path(path: Path, demo_db: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's answers straight from the noisy columns (``_assemble_flat``) against the
    same answers through noisy DataFrames (``flat_output`` over ``with_derived``, then the
    hidden columns dropped): identical frames, dtypes and names, intervals and accuracy."""
    example = fmt.parse_file(path)
    columns, _ = answer_examples(example, demo_db)
    real = session_module.assemble
    monkeypatch.setattr(session_module, "assemble", lambda planned, frames: real(
        planned, [f.frame() if isinstance(f, assemble_module.NoisyColumns) else f
                  for f in frames]))
    frames, _ = answer_examples(example, demo_db)
    assert len(columns) == len(frames)
    for q, a, b in zip([q for q in example.queries if not q.expects_error], columns, frames):
        where = f"{path.name} query {q.index}"
        pd.testing.assert_frame_equal(a.df, b.df, check_exact=True, obj=where)
        assert list(a.df.columns) == list(b.df.columns), where
        pd.testing.assert_frame_equal(a.intervals, b.intervals, check_exact=True, obj=where)
        assert a.accuracy == b.accuracy, where


def test_flat_path_is_taken_for_keys_and_aggregates(demo_db: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark shapes really skip DuckDB (ORDER BY an output too, after the stand-in
    check); expressions and duplicate names do not."""
    calls: list[str] = []
    real = assemble_module.post_process
    monkeypatch.setattr(assemble_module, "post_process",
                        lambda sql, tables: calls.append(sql) or real(sql, tables))
    sess = pp.connect(demo_db, policy=fmt.demo_policy(), budget=pp.PureDP(100))
    try:
        sess.sql("SELECT hospital, department, COUNT(*), SUM(length_of_stay), AVG(cost) "
                 "FROM visits GROUP BY hospital, department", epsilon=1)
        sess.sql("SELECT SUM(cost) FROM visits WHERE age >= 65 AND insured", epsilon=1)
        assert calls == []
        sess.sql("SELECT COUNT(*) * 2 AS twice FROM visits", epsilon=1)
        sess.sql("SELECT COUNT(*), COUNT(*) FROM visits", epsilon=1)  # duplicate names
        # each runs its outer query four times, with the same code: on stand-ins before the
        # charge (privplan.gate.outer), in the gate's run of the post-charge code over the
        # engine's two answers to stand-in rows (privplan.gate.in_process), then on the noisy
        # answer
        assert len(calls) == 8 and len(set(calls)) == 2
        assert all(calls.count(c) == 4 for c in calls)
        # ORDER BY an output column (FlatOrder): DuckDB checks it on the stand-ins only
        calls.clear()
        sess.sql("SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY n",
                 epsilon=1)
        assert len(calls) == 1
    finally:
        sess.close()


# ------------------------------------------------------------------------ derived aggregates


def _reference(use: AggregateUse, row: dict[str, float]) -> float:
    c = row["c"]
    if use.func == "count":
        return c * use.multiplier
    s = row["s"]
    lo, hi = float(use.lower), float(use.upper)
    mean = s / max(c, 1.0)
    if use.func == "avg":
        return math.nan if c < 1 else min(max(mean, lo), hi)
    var = row["q"] / max(c, 1.0) - mean ** 2
    var = min(max(var, 0.0), ((hi - lo) / 2) ** 2)
    minimum = 1
    if use.func.endswith("samp"):
        minimum = 2
        var = var * max(c, 2.0) / (max(c, 2.0) - 1.0)
    if use.func.startswith("stddev"):
        var = math.sqrt(var)
    return math.nan if c < minimum else var


@pytest.mark.parametrize("func", ["count", "avg", "var_pop", "var_samp", "stddev_pop",
                                  "stddev_samp"])
@pytest.mark.parametrize("scaled", [False, True])
def test_derived_values_match_row_by_row_reference(func: str, scaled: bool) -> None:
    # (a fixed seed per case: hash() of strings changes from process to process)
    rng = np.random.default_rng(zlib.crc32(f"{func}/{scaled}".encode()))
    counts = np.concatenate([np.arange(-3, 4), rng.integers(-50, 5000, 200)]).astype(np.int64)
    n = len(counts)
    sums = rng.integers(-10**6, 10**7, n).astype(np.int64)
    squares = rng.integers(-10**6, 10**9, n).astype(np.int64)
    frame = pd.DataFrame({
        "__c_m0": counts,
        "__c_m1": sums * 0.01 if scaled else sums,
        "__c_m2": squares * 0.0001 if scaled else squares,
    })
    use = AggregateUse(sql="x", func=func, column=None if func == "count" else "v",  # type: ignore[arg-type]
                       count="c_m0", sum=None if func == "count" else "c_m1",
                       sum_sq="c_m2" if func[:3] in ("var", "std") else None,
                       multiplier=3 if func == "count" else 1,
                       lower=None if func == "count" else -5,
                       upper=None if func == "count" else 250.5)
    got = derived_values(use, frame)
    rows = [{"c": float(frame.at[i, measure_id_column("c_m0")]),
             "s": float(frame.at[i, measure_id_column("c_m1")]),
             "q": float(frame.at[i, measure_id_column("c_m2")])} for i in range(n)]
    want = np.array([_reference(use, r) for r in rows])
    # the vectorised and the row-by-row arithmetic may round the last bit differently
    np.testing.assert_allclose(np.asarray(got, dtype=float), want, rtol=1e-12, atol=0)
    if func != "count":
        assert np.isnan(got[counts < (2 if func.endswith("samp") else 1)]).all()
        finite = got[~np.isnan(got)]
        assert (finite >= (0 if func != "avg" else -5)).all() and (finite <= 255.75 ** 2).all()
