"""Post-processing: the user's outer query, re-run by DuckDB over the *noisy* table only.

The noisy table holds group keys (public or DP-selected), noisy measures and the aggregates
derived from them (AVG, VAR, ... computed once in numpy by :func:`with_derived`), nothing else,
so HAVING, ORDER BY, LIMIT and expressions are post-processing of DP outputs (free of privacy
cost) and cannot touch a raw value: a reference to a raw column simply does not bind. An outer
query that is only keys and aggregates needs no DuckDB round trip (:func:`flat_output`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from sqlglot import exp

from privplan.memo import derived
from privplan.rewrite.engine_sql import key_column, measure_column, measure_id_column
from privplan.sql.builder import is_aggregate
from privplan.sql.plan import AggregateUse, CorePlan


def derived_column(j: int) -> str:
    """The noisy-table column holding the value of the core's ``j``-th aggregate."""
    return f"__a{j}"


def derived_values(use: AggregateUse, frame: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
    """The aggregate's value from the noisy measures in ``frame`` (real units already applied;
    a DataFrame or a mapping of column names to numeric arrays).

    Post-processing of DP outputs only (free of privacy cost). AVG/VAR/STDDEV are clamped into
    what the declared bounds allow, and are NULL (NaN) when the noisy count is below 1 (2 for
    sample variance), as SQL returns NULL for empty groups. Computed once here, vectorised, so
    the SQL of the outer query only ever refers to columns.
    """
    if use.func == "count" or (use.func == "sum" and use.sum is None):
        c = np.asarray(frame[measure_id_column(use.count)])
        return c if use.multiplier == 1 else c * use.multiplier
    if use.func == "sum":
        return np.asarray(frame[measure_id_column(use.sum)])
    if use.func == "quantile":  # the exponential mechanism's pick, already in column units
        return np.asarray(frame[measure_id_column(use.quantile)])
    c = np.asarray(frame[measure_id_column(use.count)], dtype=np.float64)
    s = np.asarray(frame[measure_id_column(use.sum)], dtype=np.float64)
    lo, hi = float(use.lower), float(use.upper)
    mean = s / np.maximum(c, 1.0)  # of (value - centre): the variance below needs no centre
    if use.func == "avg":
        centre = float(use.centre)
        return _null_below(c, 1, np.minimum(np.maximum(mean + centre, lo), hi))
    q = np.asarray(frame[measure_id_column(use.sum_sq)], dtype=np.float64)
    var = q / np.maximum(c, 1.0) - mean * mean
    var = np.minimum(np.maximum(var, 0.0), ((hi - lo) / 2) ** 2)
    minimum = 1
    if use.func in ("var_samp", "stddev_samp"):
        minimum = 2
        cc = np.maximum(c, 2.0)
        var = var * cc / (cc - 1.0)
    if use.func.startswith("stddev"):
        var = np.sqrt(var)
    return _null_below(c, minimum, var)


def _null_below(count: np.ndarray, minimum: int, value: np.ndarray) -> np.ndarray:
    return np.where(count < minimum, np.nan, value)


def with_derived(core: CorePlan, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` plus one column per aggregate of the core (see :func:`derived_column`)."""
    extra = {derived_column(j): derived_values(use, frame)
             for j, use in enumerate(core.aggregates.values())}
    return frame.assign(**extra) if extra else frame


def hidden_column(item: int, part: str) -> str:
    return f"__hidden{item}_{part}"


def key_of(core: CorePlan, node: exp.Expression) -> str | None:
    """The noisy-table key column ``node`` (a GROUP BY expression, qualified or not) names."""
    if isinstance(node, (exp.Alias, exp.Ordered, exp.Literal)) or not isinstance(
            node, exp.Expression):
        return None
    stripped = node.copy()
    for c in stripped.find_all(exp.Column):
        c.set("table", None)
    text = stripped.sql(dialect="duckdb")
    for i, k in enumerate(core.keys):
        if k.sql == text:
            return key_column(i)
    return None


def layout(core: CorePlan) -> tuple[list[tuple[int, str, AggregateUse | None]],
                                    list[tuple[str, str]] | None]:
    """:func:`output_items` and :func:`flat_columns` of a planned core, computed once per core
    object (they read only its SELECT, keys and aggregates, which planning settles; a session
    reuses its planned cores, see :mod:`privplan.plan_cache`)."""
    def compute() -> tuple[Any, Any]:
        items = output_items(core)
        return items, flat_columns(core, items)

    return derived(core, "layout", compute)


def post_sql(core: CorePlan, table: str, *, hidden: bool) -> str:
    """:func:`post_select` as DuckDB SQL, generated once per core object (see :func:`layout`)."""
    return derived(core, ("post_sql", table, hidden),
                   lambda: post_select(core, table, hidden=hidden).sql(dialect="duckdb"))


def output_items(core: CorePlan) -> list[tuple[int, str, AggregateUse | None]]:
    """(position, output name, aggregate use if the item is exactly one aggregate)."""
    out = []
    for i, item in enumerate(core.select.expressions):
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(item, exp.Alias):
            name = item.alias
        elif isinstance(item, exp.Column):
            name = item.name
        else:
            name = item.sql(dialect="duckdb")
        use = core.aggregates[node.sql(dialect="duckdb")] if is_aggregate(node) else None
        out.append((i, name, use))
    return out


def flat_columns(core: CorePlan, items: list[tuple[int, str, AggregateUse | None]]
                 ) -> list[tuple[str, str]] | None:
    """(output name, noisy-table column) of each output item when the outer query is only
    group keys and aggregates with unique names (no HAVING, ORDER BY, LIMIT, DISTINCT or
    expressions), so it needs no DuckDB round trip; None otherwise. ``items`` is
    :func:`output_items` of ``core``."""
    s = core.select
    if any(s.args.get(a) for a in ("having", "order", "limit", "offset", "distinct", "qualify")):
        return None
    derived = {id(use): derived_column(j) for j, use in enumerate(core.aggregates.values())}
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, name, use in items:
        if use is not None:
            column = derived[id(use)]
        else:
            item = s.expressions[i]
            key = key_of(core, item.this if isinstance(item, exp.Alias) else item)
            if key is None:
                return None
            column = key
        if name.lower() in seen:
            return None  # DuckDB would rename duplicates; let it
        seen.add(name.lower())
        out.append((name, column))
    return out


def flat_output(core: CorePlan, items: list[tuple[int, str, AggregateUse | None]],
                frame: pd.DataFrame, *, hidden: bool) -> pd.DataFrame | None:
    """The outer query's result taken straight from ``frame`` (which holds the derived
    columns) when :func:`flat_columns` applies: the same columns, in the same order, as
    :func:`post_select` run by DuckDB, without the cost of a DuckDB round trip. None otherwise.
    """
    columns = flat_columns(core, items)
    if columns is None:
        return None
    out: dict[str, Any] = {name: frame[column].array for name, column in columns}
    hidden_items: dict[str, Any] = {}
    if hidden:
        for i, _, use in items:
            if use is not None and use.func not in ("count", "sum"):
                for part, mid in (("c", use.count), ("s", use.sum), ("q", use.sum_sq)):
                    if mid is not None:
                        hidden_items[hidden_column(i, part)] = frame[
                            measure_id_column(mid)].to_numpy()
    return pd.DataFrame({**out, **hidden_items})


def post_select(core: CorePlan, table: str, *, hidden: bool = False) -> exp.Select:
    """The user's SELECT with aggregates and keys replaced by noisy-table columns.

    With ``hidden``, every select item that is one AVG/VAR/STDDEV also carries its noisy
    measures in extra columns (see :func:`hidden_column`), so per-row intervals can be derived
    after ORDER BY/LIMIT; the caller drops them.
    """
    columns = {m.id: measure_column(m) for m in core.measures}
    derived = {sql: derived_column(j) for j, sql in enumerate(core.aggregates)}
    s = core.select.copy()

    def replace(node: exp.Expression) -> exp.Expression:
        if is_aggregate(node):
            return exp.column(derived[node.sql(dialect="duckdb")])
        key = key_of(core, node)
        return node if key is None else exp.column(key)

    items = []
    for item in s.expressions:
        if isinstance(item, exp.Alias):
            items.append(exp.alias_(item.this.transform(replace), item.alias, quoted=True))
        else:
            name = item.name if isinstance(item, exp.Column) else item.sql(dialect="duckdb")
            items.append(exp.alias_(item.transform(replace), name, quoted=True))
    if hidden:
        for i, item in enumerate(s.expressions):
            node = item.this if isinstance(item, exp.Alias) else item
            if not is_aggregate(node):
                continue
            use = core.aggregates[node.sql(dialect="duckdb")]
            if use.func in ("count", "sum"):
                continue
            for part, mid in (("c", use.count), ("s", use.sum), ("q", use.sum_sq)):
                if mid is not None:
                    items.append(exp.alias_(exp.column(columns[mid]), hidden_column(i, part),
                                            quoted=True))
    out = exp.Select(expressions=items).from_(table)
    if s.args.get("distinct") is not None:
        # (over the released rows; with hidden interval columns, two rows alike in what is
        # shown stay apart only if their noisy measures differ: a duplicate, nothing more)
        out.set("distinct", s.args["distinct"].copy())
    having = s.args.get("having")
    if having is not None:
        out = out.where(having.this.transform(replace))
    order = s.args.get("order")
    if order is not None:
        # as in DuckDB, a bare name in ORDER BY means an output column when one has that name
        # (SELECT sex AS educ, educ AS sex ... ORDER BY sex sorts by the output `sex`); any
        # other reference means the table's column
        outputs = {item.alias.lower() for item in items}
        order = order.copy()
        for ordered in order.expressions:
            target = ordered.this if isinstance(ordered, exp.Ordered) else ordered
            if isinstance(target, exp.Column) and not target.table \
                    and target.name.lower() in outputs:
                continue
            ordered.replace(ordered.transform(replace))
        out.set("order", order)
    for arg in ("limit", "offset"):
        if s.args.get(arg) is not None:
            out.set(arg, s.args[arg])
    return out
