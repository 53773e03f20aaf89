"""Post-processing: the user's outer query, re-run by DuckDB over the *noisy* table only.

The noisy table holds group keys (public or DP-selected), noisy measures and the aggregates
derived from them (AVG, VAR, ... computed once in numpy by :func:`with_derived`), nothing else,
so HAVING, ORDER BY, LIMIT and expressions are post-processing of DP outputs (free of privacy
cost) and cannot touch a raw value: a reference to a raw column simply does not bind. An outer
query that is only keys and aggregates needs no DuckDB round trip (:func:`flat_output`), nor
one that also sorts and cuts them (ORDER BY output columns, LIMIT/OFFSET constants: see
:class:`FlatOrder`).

Privacy: the outer query sees keys and noisy values only; a raw column does not bind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlglot import exp

from privplan.planning.memo import derived
from privplan.rewrite.engine_sql import key_column, measure_column, measure_id_column
from privplan.sql.aggregates import AGGREGATES, measure_ids
from privplan.sql.builder import is_aggregate
from privplan.sql.plan import AggregateUse, CorePlan


def derived_column(j: int) -> str:
    """The noisy-table column holding the value of the core's ``j``-th aggregate."""
    return f"__a{j}"


def derived_values(use: AggregateUse, frame: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
    """The aggregate's value from the noisy measures in ``frame`` (real units already applied;
    a DataFrame or a mapping of column names to numeric arrays): its row's
    :meth:`~privplan.sql.aggregates.base.Aggregate.value`.

    Post-processing of DP outputs only (free of privacy cost). AVG/VAR/STDDEV are clamped into
    what the declared bounds allow, and are NULL (NaN) when the noisy count is below 1 (2 for
    sample variance), as SQL returns NULL for empty groups. Computed once here, vectorised, so
    the SQL of the outer query only ever refers to columns.
    """
    parts = {part: frame[measure_id_column(mid)] for part, mid in measure_ids(use).items()}
    return AGGREGATES[use.func].value(use, parts)


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
    reuses its planned cores, see :mod:`privplan.session.plan_cache`)."""
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
    group keys and aggregates with unique names (no HAVING, DISTINCT or expressions; ORDER BY
    and LIMIT/OFFSET only as :func:`flat_order` takes them), so it needs no DuckDB round trip;
    None otherwise. ``items`` is :func:`output_items` of ``core``."""
    s = core.select
    if any(s.args.get(a) for a in ("having", "distinct", "qualify")):
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
    return out if _flat_order(core, out) is not None else None


@dataclass(frozen=True)
class FlatOrder:
    """The ORDER BY and LIMIT/OFFSET of a flat outer query, on noisy-table columns: ``by`` is
    (column, descending, NULLs first) per sort key, ``limit`` None for no limit.

    :meth:`rows` sorts as DuckDB's post-processing statement does (ascending or descending
    values, NULL and NaN — which DuckDB reads as NULL from a pandas float column — first or
    last as the Ordered node says, strings by code point as DuckDB's binary collation by
    UTF-8 bytes); rows whose sort keys are equal stay in key order, one of the orders SQL
    allows (DuckDB's own tie order is unspecified). Post-processing of released values only.
    """

    by: tuple[tuple[str, bool, bool], ...] = ()
    limit: int | None = None
    offset: int = 0

    @property
    def active(self) -> bool:
        return bool(self.by) or self.limit is not None or self.offset > 0

    def rows(self, columns: Mapping[str, Any], rows: np.ndarray) -> np.ndarray | None:
        """The positions (into ``columns``) of the answer's rows, in order: ``rows`` (the
        kept rows, in key order) sorted and cut. None when a sort key's type is one whose
        order is not known to match DuckDB's (the caller lets DuckDB sort)."""
        if self.by:
            keys: list[np.ndarray] = []
            for column, descending, nulls_first in self.by:
                codes = _sort_codes(columns[column], rows)
                if codes is None:
                    return None
                null, rank = codes
                keys.append(~null if nulls_first else null)  # before the value: NULLs apart
                keys.append(-rank if descending else rank)
            # np.lexsort: stable, the last key primary
            rows = rows[np.lexsort(keys[::-1])]
        end = None if self.limit is None else self.offset + self.limit
        return rows[self.offset:end]


def _sort_codes(values: Any, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(is NULL, dense rank of the value) of ``values[rows]``; None for a type not handled."""
    if isinstance(values, np.ndarray):
        picked = values[rows]
        if picked.dtype.kind in "bi":
            return np.zeros(len(picked), dtype=bool), picked.astype(np.int64, copy=False)
        if picked.dtype.kind == "u":  # (ranks: a uint64 above 2^63 does not fit int64)
            return np.zeros(len(picked), dtype=bool), np.unique(picked, return_inverse=True)[1]
        if picked.dtype.kind == "f":
            null = np.isnan(picked)
            return null, np.where(null, 0.0, picked)
        if picked.dtype.kind == "M" and picked.dtype.name.startswith("datetime64"):
            null = np.isnat(picked)
            return null, np.where(null, 0, picked.view(np.int64))
        return None
    series = pd.Series(values).iloc[rows] if not isinstance(values, pd.Series) else \
        values.iloc[rows]
    dtype = series.dtype
    if isinstance(dtype, pd.StringDtype):
        null = series.isna().to_numpy()
        text = series.to_numpy(dtype=object, na_value="")
        return null, np.unique(text, return_inverse=True)[1].astype(np.int64)
    if dtype.kind in "biuf" or (dtype.kind == "M" and getattr(dtype, "tz", None) is None):
        null = series.isna().to_numpy()
        if dtype.kind == "M":
            numbers = series.to_numpy(dtype="datetime64[ns]").view(np.int64)
        elif dtype.kind in "biu":  # (in their own width: 2^53 + 1 is not 2^53)
            numbers = series.to_numpy(dtype=getattr(dtype, "numpy_dtype", dtype), na_value=0)
        else:
            numbers = series.to_numpy(dtype=np.float64, na_value=np.nan)
        numbers = np.where(null, 0, numbers)
        return null, np.unique(numbers, return_inverse=True)[1].astype(np.int64)
    return None


def flat_order(core: CorePlan) -> FlatOrder:
    """The :class:`FlatOrder` of a core whose :func:`layout` is flat (empty when the outer
    query neither sorts nor cuts), derived once per core."""
    def compute() -> FlatOrder:
        flat = layout(core)[1]
        assert flat is not None, "flat_order of a core whose outer query is not flat"
        order = _flat_order(core, flat)
        assert order is not None
        return order

    return derived(core, "flat_order", compute)


def _flat_order(core: CorePlan, flat: list[tuple[str, str]]) -> FlatOrder | None:
    """ORDER BY items that name an output column (a bare name, as DuckDB resolves it first), a
    group key or an aggregate of the core, with constant non-negative LIMIT/OFFSET; None for
    anything else (positions, expressions, a LIMIT that is not a constant: DuckDB runs those).
    """
    s = core.select
    outputs = {name.lower(): column for name, column in flat}
    derived_of = {sql: derived_column(j) for j, sql in enumerate(core.aggregates)}
    by: list[tuple[str, bool, bool]] = []
    order = s.args.get("order")
    for ordered in (order.expressions if order is not None else []):
        if not isinstance(ordered, exp.Ordered):
            return None
        target = ordered.this
        if isinstance(target, exp.Column) and not target.table \
                and target.name.lower() in outputs:
            column: str | None = outputs[target.name.lower()]
        elif is_aggregate(target):
            column = derived_of.get(target.sql(dialect="duckdb"))
        else:
            column = key_of(core, target)
        if column is None:
            return None
        by.append((column, bool(ordered.args.get("desc")),
                   bool(ordered.args.get("nulls_first"))))
    bounds: list[int | None] = []
    for arg, kind in (("limit", exp.Limit), ("offset", exp.Offset)):
        node = s.args.get(arg)
        if node is None:
            bounds.append(None)
            continue
        value = node.args.get("expression")
        if type(node) is not kind or {k for k, v in node.args.items() if v} != {
                "expression"} or not isinstance(value, exp.Literal) or not value.is_int \
                or int(value.this) < 0:
            return None
        bounds.append(int(value.this))
    return FlatOrder(tuple(by), bounds[0], bounds[1] or 0)


def released(values: Any) -> Any:
    """A key column as DuckDB's post-processing statement returns it: a nullable integer or
    boolean array with no NULL among the released rows becomes its numpy dtype (DuckDB gives
    ``int64``/``bool`` for a column without NULLs, ``Int64``/``boolean`` with one).

    Why (privacy): the engine's frame holds every exact group, and its key column is nullable
    when *any* group's key is NULL, including groups partition selection then drops. Kept as it
    is, the dtype of the released key would tell that such a group existed. So the dtype is a
    function of the released values alone, as on the DuckDB path."""
    if isinstance(values, (pd.arrays.IntegerArray, pd.arrays.BooleanArray)) \
            and not values.isna().any():
        return values.to_numpy(dtype=values.dtype.numpy_dtype)
    return values


def flat_output(core: CorePlan, items: list[tuple[int, str, AggregateUse | None]],
                frame: pd.DataFrame, *, hidden: bool) -> pd.DataFrame | None:
    """The outer query's result taken straight from ``frame`` (which holds the derived
    columns) when :func:`flat_columns` applies: the same columns, in the same order, as
    :func:`post_select` run by DuckDB, without the cost of a DuckDB round trip. None otherwise.
    """
    columns = flat_columns(core, items)
    if columns is None or flat_order(core).active:
        return None  # (sorting and cutting a DataFrame: DuckDB, the reference of FlatOrder)
    out: dict[str, Any] = {name: released(frame[column].array) for name, column in columns}
    hidden_items: dict[str, Any] = {}
    if hidden:
        for i, _, use in items:
            if use is not None and AGGREGATES[use.func].derived:
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
            if not AGGREGATES[use.func].derived:
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
