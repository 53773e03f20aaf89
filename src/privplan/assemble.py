"""From exact aggregate rows to the released result: noise, selection, post-processing, accuracy.

Only this module sees exact aggregates, and it turns them into noisy ones straight away: one
vectorised noise call per measure column. Partition selection drops groups whose *noisy* count is
below the threshold (the noisy count itself is not released). Released groups are sorted by key
so the order of rows cannot reveal anything about the data.

Privacy: exact aggregates are noised before anything else reads them; rows leave in key order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from privplan.engines.post_processor import post_process
from privplan.explain import halfwidth_95, noise_std
from privplan.mechanisms.accuracy import joint_halfwidths
from privplan.mechanisms.exponential import cell_counts, quantile_utilities
from privplan.planning.costs import PlannedMeasure, PlannedQuery, count_or_sum_noise
from privplan.result import ColumnAccuracy
from privplan.rewrite.engine_sql import key_column, measure_column, measure_id_column
from privplan.rewrite.postprocess import (
    derived_column,
    derived_values,
    flat_order,
    flat_output,
    hidden_column,
    layout,
    post_sql,
    released,
    with_derived,
)
from privplan.sql.aggregates import AGGREGATES, Part, measure_ids
from privplan.sql.plan import AggregateUse, CorePlan

MAX_INTERVAL_ROWS = 200_000  # per-row derived intervals are computed in Python
FLAT_OUTPUT = True  # tests switch it off to check the flat path against DuckDB's


class NoisyColumns:
    """A core's noisy answer as columns (numpy or pandas arrays, one per key and measure, in
    key order) and the rows partition selection keeps (None: every row). :meth:`frame` is the
    noisy table as a DataFrame; the flat output path (:func:`assemble`) reads the columns
    without building it."""

    __slots__ = ("columns", "keep")

    def __init__(self, columns: dict[str, Any], keep: np.ndarray | None) -> None:
        self.columns, self.keep = columns, keep

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.columns)
        if self.keep is not None:
            frame = frame[self.keep].reset_index(drop=True)
        return frame


def noisy_frame(core: CorePlan, planned: list[PlannedMeasure], exact: pd.DataFrame, *,
                draw: bool = True) -> pd.DataFrame:
    """Noise every measure; drop groups that fail partition selection; sort by key (see
    :func:`noisy_columns`), as a DataFrame."""
    return noisy_columns(core, planned, exact, draw=draw).frame()


def noisy_columns(core: CorePlan, planned: list[PlannedMeasure], exact: pd.DataFrame, *,
                  draw: bool = True, columns: Mapping[str, pd.Series] | None = None
                  ) -> NoisyColumns:
    """Noise every measure; mark the groups that fail partition selection; sort by key.

    The exact rows are sorted by key *before* noise is drawn, so the engine's (thread-dependent)
    row order never decides which group gets which draw: with seeded noise (tests) answers are
    reproducible, and released rows are in key order whatever the data. Columns of ``exact``
    other than keys and measures (the engine's per-key row count) are not read.

    ``draw=False`` (stand-in answers only, see :mod:`privplan.gate.outer`): no noise, no
    selection. ``columns``: ``dict(exact.items())`` when the caller has it.
    """
    # the columns read in one pass (a name lookup on a fresh frame first builds its column
    # index's hash table, and each lookup makes a Series: ~0.1 ms a query at small sizes)
    columns = dict(exact.items()) if columns is None else columns
    order = _key_order(columns, len(core.keys))
    n = len(exact)
    noisy: dict[str, Any] = {}
    for i in range(len(core.keys)):
        # the column's own array: a nullable integer key stays integer (to_numpy would make
        # it float, and 2^53 + 1 would look like 2^53)
        keys = columns[key_column(i)].array
        noisy[key_column(i)] = _unsigned_zero(keys if order is None else keys.take(order))
    keep = np.ones(n, dtype=bool)
    draws = _draws(planned, n) if draw else {}
    for j, p in enumerate(planned):
        col = measure_column(p.measure)
        if p.measure.kind == "quantile":
            hist = columns[col] if order is None else columns[col].take(order)
            noisy[col] = _quantile_values(p, hist, draw)
            continue
        values = _int_values(columns[col])
        values = values if order is None else values[order]
        noised = values + draws[j] if draw else values
        if p.measure.kind == "select_count":
            if not draw:
                continue
            assert p.threshold is not None
            keep &= noised >= p.threshold
            continue
        scale = p.measure.scale
        if scale != 1:
            # (a noisy sum beyond the float range, e.g. bounds near 1e308, is ±inf: a function
            # of the noisy value alone, like any post-processing)
            with np.errstate(over="ignore"):
                noised = noised * float(scale)
        noisy[col] = noised
    return NoisyColumns(noisy, None if keep.all() else keep)


def _draws(planned: list[PlannedMeasure], n: int) -> dict[int, np.ndarray]:
    """``n`` noise values for each count or sum measure (by position in ``planned``). Measures
    with equal noise (equal frozen noise objects: the same distribution) share one call for
    all their values, cut in measure order: still independent draws, one per value, from the
    measure's own distribution; the exact samplers' fixed cost (~0.1-0.3 ms a call at small
    sizes) is paid once per distinct noise instead of once per measure."""
    groups: dict[Any, list[int]] = {}
    for j, p in enumerate(planned):
        if p.measure.kind != "quantile":
            groups.setdefault(p.noise, []).append(j)
    draws: dict[int, np.ndarray] = {}
    for noise, members in groups.items():
        values = noise.sample(n * len(members))
        for t, j in enumerate(members):
            draws[j] = values[t * n:(t + 1) * n]
    return draws


def _key_order(exact: Mapping[str, pd.Series], keys: int) -> np.ndarray | None:
    """The positions of ``exact``'s rows (a frame's columns by name) in key order (NULLs
    last, ties in engine order: a stable sort), or None when there are no keys or the rows
    are in that order already.

    Sorted as ``DataFrame.sort_values(keys, na_position="last", kind="stable")`` does, by
    stable sorts of one column at a time from the last key to the first (each array's own
    argsort: a tenth of the DataFrame sort's fixed cost)."""
    if not keys or len(exact[key_column(0)]) < 2:
        return None
    positions: np.ndarray | None = None
    for i in reversed(range(keys)):
        column = exact[key_column(i)].array
        if positions is not None:
            column = column.take(positions)
        step = np.asarray(column.argsort(kind="stable", na_position="last"), dtype=np.int64)
        positions = step if positions is None else positions[step]
    assert positions is not None
    return None if (positions == np.arange(len(positions))).all() else positions


def _int_values(column: pd.Series) -> np.ndarray:
    """A BIGINT measure column as int64 (a NULL, which the statement COALESCEs away, as 0)."""
    values = column.to_numpy()
    if values.dtype == np.int64:
        return values
    return column.to_numpy(dtype=np.int64, na_value=0)


def _unsigned_zero(keys: Any) -> Any:
    """Float keys with -0.0 released as 0.0.

    The analysis takes -0.0 and 0.0 as one value, so they are one group, and the engine keeps
    the sign of whichever zero it met first (DuckDB and PostgreSQL do; Spark writes 0.0): a
    bit about one row's value and the rows' order, released without noise. -0.0 + 0.0 is
    0.0 in IEEE arithmetic (and NaN, infinities, NULL and every other value stay as they are),
    so every engine releases the group as 0.0."""
    if getattr(keys.dtype, "kind", "") != "f":
        return keys
    return keys + 0.0


def _quantile_values(p: PlannedMeasure, histograms: pd.Series, draw: bool) -> np.ndarray:
    """Each group's quantile: the exponential mechanism's pick among the grid cells lo..hi,
    from the group's histogram of rows per cell (a dict; NULL for a group without rows), in
    column units (cell g is the value g·resolution). ``draw=False``: stand-in values.
    Total on any histogram (:func:`~privplan.mechanisms.exponential.cell_counts`); utilities
    are exact integers and the pick's work does not depend on them (docs/FEATURES.md §2)."""
    m = p.measure
    assert m.quantile is not None
    if not draw:
        picks = np.zeros(len(histograms), dtype=np.int64)
    else:
        utilities = [quantile_utilities(cell_counts(hist, m.lo, m.hi), m.quantile)
                     for hist in histograms.tolist()]
        picks = p.noise.select(utilities, m.sensitivity)
    grid = picks + m.lo
    if m.resolution == 1:
        return grid
    return grid * float(m.resolution)


def _union_sql(plan: Any, branches: int) -> str:
    """The UNION ALL of the branches' outputs ``__b<i>`` with the statement's ORDER BY and
    LIMIT/OFFSET."""
    sql = " UNION ALL ".join(f"SELECT * FROM __b{i}" for i in range(branches))
    order = plan.statement.args.get("order")
    if order is not None:
        sql = f"SELECT * FROM ({sql}) {order.sql(dialect='duckdb')}"
    for arg in ("limit", "offset"):
        if plan.statement.args.get(arg) is not None:
            sql += " " + plan.statement.args[arg].sql(dialect="duckdb")
    return sql


def outer_query(planned: PlannedQuery, frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The user's outer query over the noisy frames (one per core): derived aggregates,
    HAVING, ORDER BY, LIMIT, expressions, UNION ALL. Post-processing of DP outputs only."""
    plan = planned.plan
    single = len(plan.cores) == 1
    outs = []
    for i, (core, frame) in enumerate(zip(plan.cores, frames)):
        frame = with_derived(core, frame)
        items = layout(core)[0]
        flat = flat_output(core, items, frame, hidden=single) if FLAT_OUTPUT else None
        if flat is None:
            flat = post_process(post_sql(core, f"__noisy{i}", hidden=single),
                                {f"__noisy{i}": frame})
        outs.append(flat)
    if single:
        return outs[0]
    return post_process(_union_sql(plan, len(outs)), {f"__b{i}": o for i, o in enumerate(outs)})


Answer: TypeAlias = pd.DataFrame | NoisyColumns
"""A core's noisy answer: a DataFrame (stand-ins, subqueries) or its columns (the session)."""


def assemble(
    planned: PlannedQuery, frames: Sequence[Answer]
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, ColumnAccuracy]]:
    """The released frame, its per-row 95% intervals and per-column accuracy, from the noisy
    answer of each core (post-processing of DP outputs only)."""
    plan = planned.plan
    single = len(plan.cores) == 1
    if FLAT_OUTPUT and single and isinstance(frames[0], NoisyColumns):
        items, flat = layout(plan.cores[0])
        if flat is not None:
            answer = _assemble_flat(planned, frames[0], items, flat)
            if answer is not None:
                return answer
    frames = [f.frame() if isinstance(f, NoisyColumns) else f for f in frames]
    df = outer_query(planned, frames)
    accuracy, bounds = _accuracy(
        planned, layout(plan.cores[0])[0], lambda i: df.iloc[:, i],
        lambda i, part: df[hidden_column(i, part)].to_numpy(dtype=float),
        len(df) if single else None, df.shape[1])
    intervals = pd.DataFrame(bounds, index=df.index)
    if single:
        df = df.drop(columns=[c for c in df.columns if c.startswith("__hidden")])
    return df, intervals, accuracy


def _assemble_flat(planned: PlannedQuery, noisy: NoisyColumns,
                   items: list[tuple[int, str, AggregateUse | None]],
                   flat: list[tuple[str, str]]) -> tuple[pd.DataFrame, pd.DataFrame,
                                                         dict[str, ColumnAccuracy]] | None:
    """:func:`assemble` of one core whose outer query is only keys and aggregates, perhaps
    sorted and cut (see :func:`~privplan.rewrite.postprocess.flat_columns` and
    :class:`~privplan.rewrite.postprocess.FlatOrder`), straight from the noisy columns: the
    same frame (values, dtypes, names) as DuckDB's post-processing (:func:`outer_query`, then
    the hidden columns dropped), without building the intermediate frames. Derived aggregates
    are row by row, so computing them before partition selection's filter gives the values
    computed after it. None when a sort key's type is not one :class:`FlatOrder` sorts (the
    caller then lets DuckDB do it)."""
    core = planned.plan.cores[0]
    columns = dict(noisy.columns)
    for j, use in enumerate(core.aggregates.values()):
        columns[derived_column(j)] = derived_values(use, columns)
    keep = noisy.keep
    order = flat_order(core)
    rows: np.ndarray | None = None
    if order.active:
        n = len(next(iter(columns.values()))) if columns else 0
        rows = order.rows(columns, np.arange(n) if keep is None else np.flatnonzero(keep))
        if rows is None:
            return None

    def kept(values: Any) -> Any:
        if rows is not None:
            return values[rows]
        return values if keep is None else values[keep]

    # (the arrays are this answer's own: the frame need not copy them)
    df = pd.DataFrame({name: released(kept(columns[column])) for name, column in flat},
                      copy=False)
    accuracy, bounds = _accuracy(
        planned, items, lambda i: kept(columns[flat[i][1]]),
        lambda i, part: kept(np.asarray(columns[measure_id_column(_part(items[i][2], part))],
                                        dtype=float)),
        len(df), len(flat))
    return df, _interval_frame(bounds, df.index), accuracy


def _interval_frame(bounds: dict[str, Any], index: pd.Index) -> pd.DataFrame:
    """The interval columns as a frame: one float block when every column is float (the same
    frame as from the dict, built in about half the time)."""
    arrays = [np.asarray(v) for v in bounds.values()]
    if arrays and all(a.dtype == np.float64 and a.shape == (len(index),) for a in arrays):
        return pd.DataFrame(np.column_stack(arrays), columns=list(bounds), index=index,
                            copy=False)
    return pd.DataFrame(bounds, index=index)


def _part(use: AggregateUse | None, part: str) -> str | None:
    assert use is not None
    return {"c": use.count, "s": use.sum, "q": use.sum_sq}[part]


def _accuracy(planned: PlannedQuery, items: list[tuple[int, str, AggregateUse | None]],
              column: Callable[[int], Any], hidden: Callable[[int, str], np.ndarray],
              rows: int | None, width: int) -> tuple[dict[str, ColumnAccuracy], dict[str, Any]]:
    """Each aggregate output's accuracy and its interval columns. ``column(i)``: output ``i``'s
    values; ``hidden(i, part)``: the noisy measure ``part`` behind a derived output ``i``;
    ``rows``: the number of rows when per-row intervals are derived (one core), else None."""
    by_id = {p.measure.id: p for p in planned.measures}
    accuracy: dict[str, ColumnAccuracy] = {}
    bounds: dict[str, Any] = {}  # interval columns, made into one frame at the end
    for i, name, use in items:
        if use is None or i >= width:
            continue
        row = AGGREGATES[use.func]
        if row.needs("quantile"):
            p = by_id[use.quantile]  # type: ignore[index]
            m = p.measure
            assert m.quantile is not None
            rank = p.noise.rank_error(m.hi - m.lo + 1, m.sensitivity, m.quantile)
            accuracy[name] = ColumnAccuracy(
                column=name, std=None, halfwidth=None,
                method=f"{p.noise.describe()} over {m.hi - m.lo + 1} values "
                       f"{float(m.lo * m.resolution):g}..{float(m.hi * m.resolution):g} (step "
                       f"{float(m.resolution):g}); with 95% probability within "
                       f"{rank:.3g} rows of rank of the true quantile")
            continue
        if not row.derived:
            p, scale = count_or_sum_noise(use, by_id)
            acc = ColumnAccuracy(column=name, method=p.noise.describe(),
                                 std=noise_std(p.noise) * scale,
                                 halfwidth=halfwidth_95(p.noise) * scale)
            accuracy[name] = acc
            # a later UNION ALL branch may have put text in this column: no interval there
            values = column(i)
            if not (isinstance(values, np.ndarray) and values.dtype.kind in "iuf"):
                values = pd.to_numeric(values, errors="coerce")
            with np.errstate(all="ignore"):  # (numpy arrays, as pandas does: inf - inf is NaN)
                bounds[f"{name}_low"] = values - acc.halfwidth
                bounds[f"{name}_high"] = values + acc.halfwidth
        else:
            accuracy[name] = ColumnAccuracy(
                column=name, std=None, halfwidth=None,
                method=f"{row.label} from noisy SUM/COUNT; per-row 95% interval by "
                       "interval arithmetic, each part at 95%/k (union bound)")
            if rows is not None and rows <= MAX_INTERVAL_ROWS:
                lo, hi = _derived_intervals(rows, functools.partial(hidden, i), use, by_id)
                bounds[f"{name}_low"], bounds[f"{name}_high"] = lo, hi
    return accuracy, bounds


_HIDDEN: dict[Part, str] = {"count": "c", "sum": "s", "sum_sq": "q"}  # (hidden_column's parts)


def _derived_intervals(rows: int, hidden: Callable[[str], np.ndarray], use: AggregateUse,
                       by_id: dict[str, PlannedMeasure]) -> tuple[list[float], list[float]]:
    """Each row's interval of a derived aggregate (its row's :meth:`~privplan.sql.aggregates.
    base.Aggregate.interval`) from its noisy parts, each at 95%/k (union bound)."""
    ids = measure_ids(use)
    parts = [(part, ids[part], code) for part, code in _HIDDEN.items() if part in ids]
    noises = [by_id[mid].noise for _, mid, _ in parts]
    halves = joint_halfwidths(noises)
    scaled = {part: h * float(by_id[mid].measure.scale)
              for h, (part, mid, _) in zip(halves, parts)}
    cols = {part: hidden(code) for part, _, code in parts}
    row = AGGREGATES[use.func]
    lows, highs = [], []
    for r in range(rows):
        lo, hi = row.interval(use, {part: values[r] for part, values in cols.items()}, scaled)
        lows.append(lo)
        highs.append(hi)
    return lows, highs

