"""The engine statement for one core: filter, clamp to the integer grid, exact grouped aggregates.

One statement per core, generated from the plan (never from the user's text directly):

* ``WHERE`` is the user's predicate (validated: deterministic, table columns only);
* every measure is an aggregate with its own ``FILTER (WHERE …)`` for FILTER/CASE conditions;
* sums are taken over ``LEAST(GREATEST(round(x / resolution), lo), hi)`` — integers, so the
  engine's float rounding cannot raise the sensitivity (Casacuberta et al. 2022) and the range
  check of :mod:`privplan.mechanisms.grid` rules out overflow;
* public group keys come from the policy's public domain through a LEFT JOIN, so every public
  group appears (empty ones as zeros, which are then noised) and absence leaks nothing.

The SQL draws no random numbers: noise is added afterwards in Python.

Privacy: a statement computes only the planned aggregates, on clamped grids, units' rows bounded.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import sqlglot
from sqlglot import exp

from privplan.errors import UnsupportedQueryError
from privplan.mechanisms import grid as gridlib
from privplan.planning.memo import derived
from privplan.rewrite.row_order import row_key, row_order, tie_break
from privplan.sql.joins import private_name
from privplan.sql.plan import CorePlan, GroupKey, Measure
from privplan.sql.totality import family

MAX_PUBLIC_GROUPS = 1_000_000
ORDER_KEY = "__privplan_order"
"""The bounded copy's inner column holding each row's :func:`row_key` (not in the copy)."""
BINARY = 'COLLATE "binary"'
"""DuckDB's code-point collation, which the analysis assumes for every string comparison."""


def key_sql(key: GroupKey) -> str:
    """The key as the engine groups and releases it (see :func:`released_key`)."""
    text = key.expr.sql(dialect="duckdb")
    return released_key(text, key.engine_type) if key.engine_type is not None else text


_EXACT_IN_PANDAS = frozenset({"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT",
                              "USMALLINT", "UINTEGER", "UBIGINT", "DOUBLE", "FLOAT", "VARCHAR"})
KEY_DATES = ("0001-01-01", "9999-12-31 23:59:59.999999")
"""The range of dates and timestamps a released key may take (Python's and every pandas
unit's); a key outside it is grouped with NULL."""


def released_key(text: str, engine_type: str) -> str:
    """A group key's SQL as the engine must group it so that every group's key reaches Python
    exactly and distinctly, whatever the data (a conversion that failed after the charge would
    reveal, un-noised, that some row has such a key; two groups whose keys Python cannot tell
    apart would look like one key released twice):

    * strings group in binary collation, like the analysis;
    * a float NaN is grouped with NULL (pandas holds both as NaN);
    * a date or timestamp outside years 1-9999 (infinity, 5877642-06-24) is grouped with NULL
      (pandas and Python cannot hold it);
    * HUGEINT, UHUGEINT and DECIMALs with more than 15 digits are released as their text
      (pandas would round them to float, or fail).

    Each is a fixed function of the key's value, so GROUP BY it is still a partitioning
    function of the record (opaque keys are analysed as any partition; plain columns keep
    their values, the view reads them in range); the same function is applied to a public
    domain's values, so released keys and domain match.
    """
    t = engine_type.upper()
    fam = family(t)
    if fam == "str":
        return f"({text}) {BINARY}"
    if fam == "float":
        return f"NULLIF({text}, CAST('nan' AS {t}))"
    if fam in ("date", "timestamp"):
        lo, hi = (f"{t} '{v}'" if fam == "timestamp" else f"DATE '{v[:10]}'" for v in KEY_DATES)
        return f"CASE WHEN ({text}) BETWEEN {lo} AND {hi} THEN ({text}) END"
    if t in _EXACT_IN_PANDAS or fam in ("null", "bool"):
        return text
    if fam == "decimal" and _precision(t) <= 15:
        return text  # a decimal of at most 15 digits is one distinct double
    return f"CAST(({text}) AS VARCHAR)"


def _precision(decimal_type: str) -> int:
    inside = decimal_type.partition("(")[2].rstrip(")")
    return int(inside.split(",")[0]) if inside else 18


def public_key_sql(join: Any, private_column: str, public_sql: str) -> str:
    """A public join key as the private column's engine type: the join compares in the
    private column's type and collation, and the region it implies holds values of that type
    (a public DATE matched to a private TIMESTAMP is the timestamp at midnight, as the engine
    compares them; a public VARCHAR '5' matched to a private BIGINT is 5, and a public value
    that does not convert matches nothing)."""
    target = join.key_types.get(private_column)
    public_col = next(b for a, b in join.pairs if a == private_column)
    source = join.column_types.get(public_col)
    value = public_sql
    if target is not None and source is not None and source.upper() != target.upper():
        value = f"TRY_CAST({public_sql} AS {target})"
    if target is not None and family(target) == "str":
        value = f"{value} {BINARY}"
    return value




COUNT_KINDS = frozenset({"count", "select_count", "count_units", "count_distinct"})
"""Measures that count rows or values: no grid, no clamping (every other kind sums grid
values or counts them per grid cell)."""


def key_column(i: int) -> str:
    return f"__k{i}"


def measure_column(m: Measure) -> str:
    return measure_id_column(m.id)


def measure_id_column(measure_id: str | None) -> str:
    """The engine's (and the noisy table's) column for the measure with id ``measure_id``."""
    assert measure_id is not None
    return f"__{measure_id}"


def _clamp(value: str, lo: int, hi: int) -> str:
    """Clamp that keeps NULL as NULL (DuckDB's GREATEST/LEAST skip NULL arguments, which would
    turn a NULL into ``lo`` and make NULL rows count toward a SUM outside its region). NaN sorts
    above every number in DuckDB, so it clamps to ``hi``."""
    return f"CASE WHEN {value} < {lo} THEN {lo} WHEN {value} > {hi} THEN {hi} ELSE {value} END"


def _grid_value(m: Measure, column_type: str) -> str:
    """The value on the integer grid, clamped to [lo, hi] (grid units); NULL stays NULL.

    Floats are scaled, clamped *as doubles* (so huge values and infinities cannot overflow the
    cast) and then cast, which rounds to the nearest integer; the result lies in [lo, hi]
    because both ends are integers.
    """
    if m.expression is not None:  # an expression over clamped DOUBLE columns
        return grid_expression(m.expression, m.resolution, m.lo, m.hi, "float")
    col = exp.column(m.column).sql(dialect="duckdb")  # type: ignore[arg-type]
    return grid_expression(col, m.resolution, m.lo, m.hi, column_type)


def grid_expression(col: str, res: Fraction, lo: int, hi: int, column_type: str) -> str:
    """SQL for the value of ``col`` on the grid of resolution ``res``, clamped to [lo, hi].

    DuckDB's cast of a DOUBLE to BIGINT rounds half to even and its float multiplication gives
    infinity rather than failing; the renderer for other engines (``engines/render.py``) keeps
    both true there (an explicit half-even rounding, and a bound on ``col`` before the
    multiplication), so every engine computes the same integers."""
    if column_type == "int" and res == 1:
        return _clamp(col, lo, hi)
    if res.numerator == 1:
        scaled = f"{col} * {res.denominator}"
    elif res.denominator == 1:
        scaled = f"{col} / {res.numerator}"
    else:
        scaled = f"{col} * {res.denominator} / {res.numerator}"
    return f"CAST({_clamp(scaled, lo, hi)} AS BIGINT)"


def grid_column(column: str) -> str:
    """The bounded copy's column holding ``column`` already on its SUM grid (see
    :func:`bounded_source`)."""
    return f"__grid_{column}"


def stored_grids(core: CorePlan) -> dict[str, tuple[Fraction, int, int]]:
    """Columns of the core's table whose SUM grid the bounded copy stores: numeric columns
    with bounds and at least one grid point, by name -> (resolution, lo, hi). Derived once per
    planned core (every query asks, through :func:`bounded_source`)."""
    return dict(derived(core, "stored_grids", lambda: _stored_grids(core)))


def _stored_grids(core: CorePlan) -> dict[str, tuple[Fraction, int, int]]:
    out: dict[str, tuple[Fraction, int, int]] = {}
    table = core.table_policy
    if table is None:
        return out
    for name in core.columns:
        col = table.columns.get(name)
        if col is None or col.type not in ("int", "float") or not col.has_bounds:
            continue
        try:
            out[name] = gridlib.sum_grid(col)
        except (UnsupportedQueryError, ValueError):
            continue  # no grid point inside the bounds: a SUM over it is refused anyway
    return out


def _condition(m: Measure) -> str | None:
    """The FILTER condition: the user's FILTER/CASE condition. (Value-not-NULL needs no filter:
    SUM and COUNT(col) skip NULLs themselves; the region still says it.)"""
    if m.condition is not None:
        return f"({m.condition.sql(dialect='duckdb')})"
    return None


def measure_sql(m: Measure, column_type: str | None, stored: str | None = None, *,
                counted: str | None = None, wide_sums: bool = False,
                only: str | None = None) -> str:
    """The measure's aggregate. ``stored``: a column already holding ``m``'s clamped grid
    values (the bounded copy's, same resolution and bounds), read instead of clamping again.
    ``counted``: for a COUNT of a column, a stored grid column of that column to count
    instead (NULL exactly where the column is: the grid of a value is never NULL, the grid of
    NULL is NULL). ``wide_sums``: the engine sums BIGINTs into a 128-bit integer (DuckDB), so
    a centred sum over a stored grid is written ``SUM(g) - c * COUNT(g)``, the same integer
    as ``SUM(g - c)``, which the engine computes from the bare column (no expression per
    row: about a quarter of the statement's time at 10M rows). (The same form over a grid
    computed in the statement saved nothing measurable at 10M rows: not used there.)
    ``only``: a condition every aggregated row must also meet (the private rows of
    :mod:`privplan.rewrite.statement`'s one aggregation), before the measure's own."""
    cond = _condition(m)
    if only is not None:
        cond = f"{only} AND {cond}" if cond else only
    filt = f" FILTER (WHERE {cond})" if cond else ""
    if m.kind in COUNT_KINDS:
        arg = ("*" if m.column is None else m.expression if m.expression is not None
               else counted if counted is not None and m.kind == "count"
               else exp.column(m.column).sql(dialect="duckdb"))
        distinct = "DISTINCT " if m.kind in ("count_units", "count_distinct") or (
            m.kind == "select_count" and m.column is not None) else ""
        return f"COUNT({distinct}{arg}){filt}"
    g = stored if stored is not None else _grid_value(m, column_type or "float")
    if m.kind == "quantile":  # the rows per grid cell: the exponential mechanism's input
        return f"histogram({g}){filt}"
    # aggregates of the DISTINCT grid values (SUM/AVG/VAR(DISTINCT x))
    if m.kind == "count_distinct_grid":
        return f"COUNT(DISTINCT {g}){filt}"
    if m.kind == "sum_distinct":
        return f"CAST(COALESCE(SUM(DISTINCT {g}){filt}, 0) AS BIGINT)"
    if m.kind == "sum_sq_distinct":
        return _sum_sq_distinct(g, cond)
    if m.centre and m.kind == "sum" and stored is not None and wide_sums:
        # (HUGEINT: c * COUNT cannot overflow; the difference is the centred sum, which fits)
        return (f"CAST(COALESCE(SUM({g}){filt} - CAST({int(m.centre)} AS HUGEINT) * "
                f"COUNT({g}){filt}, 0) AS BIGINT)")
    if m.centre:  # a centred sum (AVG, VAR): of g - c, which lies in [lo - c, hi - c]
        g = f"({g} - {int(m.centre)})"
    if m.kind == "sum":
        return f"CAST(COALESCE(SUM({g}){filt}, 0) AS BIGINT)"
    if m.kind == "sum_sq":  # |g| <= 2^31 (grid.check_no_overflow), so g * g fits in BIGINT
        return f"CAST(COALESCE(SUM({g} * {g}){filt}, 0) AS BIGINT)"
    raise AssertionError(m.kind)


def _sum_sq_distinct(g: str, cond: str | None) -> str:
    """The sum of g² over the *distinct* grid values g (VAR / STDDEV of DISTINCT values).

    Not ``SUM(DISTINCT g * g)``: g and -g have one square and would be counted once. g ↦ g² is
    one-to-one on g ≥ 0 and on g < 0 separately, so the sum is that of the distinct squares of
    the non-negative values plus that of the negative ones: two plain DISTINCT sums, which
    every engine computes alike (|g| ≤ 2^31, so each square fits in a BIGINT)."""
    when = f"{cond} AND " if cond else ""
    halves = [f"COALESCE(SUM(DISTINCT CASE WHEN {when}{g} {op} 0 THEN {g} * {g} END), 0)"
              for op in (">=", "<")]
    return f"CAST({' + '.join(halves)} AS BIGINT)"


def _literal(value: Any) -> str:
    return exp.convert(value).sql(dialect="duckdb")


@functools.lru_cache(maxsize=4096)
def _ident(name: str) -> str:
    return exp.to_identifier(name).sql(dialect="duckdb")  # (sqlglot's rendering is ~60 µs)


def private_join_source(left: Any, left_view: tuple[str, dict[str, str]], right: Any,
                        right_view: tuple[str, dict[str, str]]) -> tuple[str, dict[str, str]]:
    """Two private tables (``left``, ``right``: their policies; ``*_view``: their typed views
    and column types) joined on their shared privacy unit, and the joined columns' types."""
    (lsql, ltypes), (rsql, rtypes) = left_view, right_view
    items = ["__l.*"] + [
        f'__r."{c}" AS "{private_name(c)}"' for c in right.columns if c != right.privacy_unit
    ]
    types = {**ltypes, **{private_name(c): t for c, t in rtypes.items()
                          if c != right.privacy_unit}}
    return (f"(SELECT {', '.join(items)} FROM {lsql} AS __l JOIN {rsql} AS __r "
            f'ON __l."{left.privacy_unit}" = __r."{right.privacy_unit}")'), types


def bounded_source(core: CorePlan) -> str:
    """See :func:`_bounded_source`; derived once per planned core (each charged query asks
    which copy it reads, and a shared plan whether the session holds one)."""
    return derived(core, "bounded_source", lambda: _bounded_source(core))


def _bounded_source(core: CorePlan) -> str:
    """The table with at most ``max_rows_per_unit`` rows per privacy unit, chosen
    deterministically, and every unit-level column set to one canonical value per unit; plus
    every bounded numeric column on its SUM grid (:func:`grid_column`). For a row-level table
    (a session opened with ``prepare=True``) it is every row, plus those grid columns.

    Why this order of work: the accountant models a unit as a *fixed* set of at most k records
    (the same rows in every query), so the rows are chosen before any WHERE, by an order that
    depends only on the unit's own rows (:func:`row_order`) — never by a random draw. Rows with a NULL unit belong to nobody we can bound and are dropped.
    Unit-level columns take the value of the unit's first row, so data that breaks the
    "constant per unit" assumption cannot break the parallel composition it buys.
    """
    cols = [_ident(c) for c in core.columns]
    if core.unit is None:  # row level (a prepared session): every row, plus the SUM grids
        items = cols + _grid_items(core, canonical=())
        return f"(SELECT {', '.join(items)} FROM {core.table_sql})"
    unit = _ident(core.unit)
    # (the key as a column, bound once for the windows: DuckDB binds an expression per window,
    # ~7 ms a window for this one; and the statement runs no slower)
    key = row_key(cols, _policy_types(core), "privplan-row")
    table = core.table_sql if key is None else (
        f"(SELECT *, {key} AS {ORDER_KEY} FROM {core.table_sql}) AS __ordered")
    order = ", ".join(([ORDER_KEY] if key is not None else []) + tie_break(cols))
    window = f"OVER (PARTITION BY {unit} ORDER BY {order})"
    canon = [c for c in core.unit_level_columns if c != core.unit]
    inner_items = cols + [f"ROW_NUMBER() {window} AS __rn"]
    inner_items += [f"FIRST_VALUE({_ident(c)}) {window} AS {_ident('__first_' + c)}"
                    for c in canon]
    outer_items = [_ident("__first_" + c) + f" AS {_ident(c)}" if c in canon else _ident(c)
                   for c in core.columns]
    outer_items += _grid_items(core, canonical=canon)
    return (f"(SELECT {', '.join(outer_items)} FROM (SELECT {', '.join(inner_items)} "
            f"FROM {table} WHERE {unit} IS NOT NULL) AS {PER_UNIT_ROWS} "
            f"WHERE __rn <= {int(core.max_rows_per_unit)})")


PER_UNIT_ROWS = "__numbered"
"""The alias of the per-unit numbered rows in a user-level bounded SELECT (and only there)."""


def per_unit_select(select_sql: str) -> bool:
    """Whether ``select_sql`` (a :func:`bounded_select`) chooses rows per unit (user level)."""
    return f") AS {PER_UNIT_ROWS} WHERE __rn <= " in select_sql


def _policy_types(core: CorePlan) -> list[str | None]:
    """The policy type (int, float, str, ...) of each of the core's columns, None if unknown."""
    table = core.table_policy.columns if core.table_policy is not None else {}
    return [table[c].type if c in table else None for c in core.columns]


def _grid_items(core: CorePlan, canonical: Sequence[str]) -> list[str]:
    """Each bounded numeric column also on its SUM grid (:func:`grid_column`), clamped once
    where the copy is made, so sums over the session's copy need not clamp every row again.
    Unit-level columns in ``canonical`` are read from their canonical value (``__first_c``)."""
    types = core.table_policy.columns if core.table_policy is not None else {}
    return [
        grid_expression(_ident("__first_" + c) if c in canonical else _ident(c), res, lo, hi,
                        types[c].type) + f" AS {_ident(grid_column(c))}"
        for c, (res, lo, hi) in stored_grids(core).items()
    ]


def joined_source(core: CorePlan, source: str) -> str:
    """The private rows (already bounded per unit) joined with the public tables; public
    columns are exposed as ``__pub<j>_<column>``. Each private row matches at most one public
    row (the session checked the public keys are unique), so the join has stability 1."""
    from privplan.sql.joins import public_name

    private = "__p"
    items = [f"{private}.*"]
    joins = []
    for j in core.joins:
        alias = f"__h{j.index}"
        for c in sorted(j.columns):
            # public strings compare in binary collation too, whatever the public schema says
            binary = f" {BINARY}" if family(j.column_types.get(c, "")) == "str" else ""
            items.append(f"{alias}.{_ident(c)}{binary} AS {_ident(public_name(j.index, c))}")
        on = " AND ".join(f"{private}.{_ident(a)} = "
                          f"{public_key_sql(j, a, f'{alias}.{_ident(b)}')}" for a, b in j.pairs)
        kind = "LEFT JOIN" if j.left else "JOIN"
        joins.append(f"{kind} {j.table_sql} AS {alias} ON {on}")
    return (f"(SELECT {', '.join(items)} FROM {source} AS {private} {' '.join(joins)}) "
            "AS __joined")


def _released_family(key: GroupKey) -> str | None:
    """The family of the key's column as released (:func:`released_key`): a key released as
    its text (HUGEINT, wide DECIMAL) is a string there, whatever its engine type."""
    if key.engine_type is None:
        return None
    fam = family(key.engine_type)
    return "str" if released_key("k", key.engine_type).startswith("CAST(") else fam


def _group_bounded(core: CorePlan, rel: str) -> str:
    """Keep, per unit, the rows of at most ``max_groups_per_unit`` groups (the first ones in
    the :func:`row_order` of the keys), and in each group at most ``max_rows_per_group`` of its
    rows (the first in the row order, as :func:`bounded_source` chooses a unit's rows): deterministic,
    data-order independent, and depending only on the unit's own rows, so removing a unit
    leaves every other unit's kept rows unchanged (the accountant's model of the bounds)."""
    keys = [key_column(i) for i in range(len(core.keys))]
    unit = _ident(core.unit)
    ranks, conditions = [], []
    cols = [_ident(c) for c in core.columns]
    rows = row_order(cols, _policy_types(core), "privplan-row")
    if core.max_rows_per_query:  # BigQuery's max_rows_contributed: m of the unit's rows
        ranks.append(f"ROW_NUMBER() OVER (PARTITION BY {unit} ORDER BY {rows}) AS __un")
        conditions.append(f"__un <= {int(core.max_rows_per_query)}")
    if core.max_groups_per_unit and keys:
        key_types = [_released_family(k) for k in core.keys]
        order = row_order(keys, key_types, "privplan-group")
        ranks.append(f"DENSE_RANK() OVER (PARTITION BY {unit} ORDER BY {order}) AS __gr")
        conditions.append(f"__gr <= {int(core.max_groups_per_unit)}")
    if core.max_rows_per_group and keys:
        ranks.append(f"ROW_NUMBER() OVER (PARTITION BY {unit}, {', '.join(keys)} "
                     f"ORDER BY {rows}) AS __gn")
        conditions.append(f"__gn <= {int(core.max_rows_per_group)}")
    return (f"(SELECT * FROM (SELECT *, {', '.join(ranks)} FROM {rel}) AS __ranked "
            f"WHERE {' AND '.join(conditions)}) AS __rows")


def core_sql(core: CorePlan, column_types: dict[str, str], measures: list[Measure],
             dialect: str = "duckdb") -> str:
    """The engine statement (DuckDB dialect) returning one row per group: keys then measures.
    ``dialect``: the engine it will run on (rendered for it later); only DuckDB's sums are
    written with its 128-bit integers (see :func:`measure_sql`)."""
    key_items = [f"{key_sql(k)} AS {key_column(i)}" for i, k in enumerate(core.keys)]
    measure_items = measure_items_sql(core, column_types, measures, dialect)
    where = where_sql(core)
    group = (" GROUP BY " + ", ".join(key_column(i) for i in range(len(core.keys)))
             if core.keys else "")
    source = row_source(core)
    if group_bounded(core):
        keyed = f"(SELECT {', '.join(['*', *key_items])} FROM {source}{where}) AS __keyed"
        keys = [key_column(i) for i in range(len(core.keys))]
        inner = (f"SELECT {', '.join(keys + measure_items)} FROM "
                 f"{_group_bounded(core, keyed)}{group}")
    else:
        inner = f"SELECT {', '.join(key_items + measure_items)} FROM {source}{where}{group}"
    if not core.keys or not core.public_keys:
        return _checked(inner)
    return _checked(_with_public_domain(core, inner, measures))


def where_sql(core: CorePlan) -> str:
    """The core's WHERE clause (with its leading space), or ''."""
    return f" WHERE {core.where.sql(dialect='duckdb')}" if core.where is not None else ""


def group_bounded(core: CorePlan) -> bool:
    """Whether the statement keeps, per unit, only some rows or groups after keying them
    (:func:`_group_bounded`)."""
    return core.unit is not None and bool(core.max_rows_per_query or core.keys and (
        core.max_groups_per_unit or core.max_rows_per_group))


def measure_items_sql(core: CorePlan, column_types: dict[str, str], measures: list[Measure],
                      dialect: str = "duckdb", only: str | None = None) -> list[str]:
    """Each measure's aggregate ``AS`` its column (see :func:`measure_sql`; ``only``: a
    condition every aggregated row must also meet)."""
    grids = stored_grids(core) if core.prebounded else {}

    def stored(m: Measure) -> str | None:
        # the copy's grid column holds grid_expression(value, res, lo, hi) of every row, the
        # very expression _grid_value would compute here, so a SUM whose grid is the same
        # (resolution and bounds) sums the same integers: same values, same sensitivity
        grid = grids.get(m.column) if m.kind == "sum" and m.column else None
        if grid is None or grid != (m.resolution, m.lo, m.hi):
            return None
        return _ident(grid_column(m.column))  # type: ignore[arg-type]

    def counted(m: Measure) -> str | None:
        has_grid = m.kind == "count" and m.column in grids and m.expression is None
        return _ident(grid_column(m.column)) if has_grid else None  # type: ignore[arg-type]

    def item(m: Measure) -> str:
        column_type = column_types.get(m.column) if m.column else None
        aggregate = measure_sql(m, column_type, stored(m), counted=counted(m),
                                wide_sums=dialect == "duckdb", only=only)
        return f"{aggregate} AS {measure_column(m)}"

    return [item(m) for m in measures]


def row_source(core: CorePlan) -> str:
    """The rows the core's WHERE, keys and measures read: the table (its bounded rows at user
    level) joined with the public tables. The statement reads it; so does the pre-charge gate's
    probe of each expression over stand-in rows (:mod:`privplan.gate`)."""
    base = core.table_sql if core.unit is None or core.prebounded else bounded_source(core)
    if core.joins:
        return joined_source(core, base)
    return base if core.unit is None else f"{base} AS __bounded"


def measure_input_sql(m: Measure, column_type: str | None) -> str | None:
    """The per-row value the measure's aggregate reads (the clamped grid value of a sum or a
    quantile's cell, a counted column), or None for COUNT(*)."""
    if m.kind in COUNT_KINDS:
        if m.column is None:
            return None
        return m.expression if m.expression is not None else exp.column(m.column).sql(
            dialect="duckdb")
    return _grid_value(m, column_type or "float")


def domain_sql(core: CorePlan) -> str:
    """The public key domain: one row per combination of the keys' public values,
    columns ``__k<i>`` (refused before the charge above MAX_PUBLIC_GROUPS rows)."""
    domains = [k.domain_sql if k.domain_sql is not None
               else () if k.domain_table is not None  # (read from the engine's relation)
               else tuple(_literal(v) for v in k.public_domain or ()) for k in core.keys]
    joint = {i: (n, entry) for entry in core.joint_domains for n, i in enumerate(entry[0])}
    size = 1
    for i, (k, d) in enumerate(zip(core.keys, domains)):
        if i not in joint:
            size *= max(len(k.public_domain or ()) if k.domain_table is not None else len(d), 1)
    for _, _, count in core.joint_domains:
        size *= max(count, 1)
    if size > MAX_PUBLIC_GROUPS:
        raise UnsupportedQueryError(
            f"the public group domain has {size:,} combinations (more than "
            f"{MAX_PUBLIC_GROUPS:,}); group by fewer public columns."
        )
    parts = []
    for n, (indices, select, _) in enumerate(core.joint_domains):
        names = ", ".join(key_column(i) for i in indices)
        parts.append(f"({select}) AS __dj{n}({names})")
    for i, (key, dom) in enumerate(zip(core.keys, domains)):
        if i in joint:
            continue
        if key.domain_cast is not None and key.domain_table is not None:
            # the same values in an engine relation, made once per session: the statement's
            # text stays short (binding 100,000 literals takes about a second)
            parts.append(f"(SELECT {key.domain_cast} AS {key_column(i)} FROM "
                         f"{key.domain_table} AS __u{i}(x)) AS __d{i}")
            continue
        if key.domain_cast is not None and key.domain_sql is not None:
            # plain literals of one kind in one list, made keys by one expression: binds in
            # linear time (a VALUES row per value is an expression to bind per value)
            parts.append(f"(SELECT {key.domain_cast} AS {key_column(i)} FROM "
                         f"unnest([{', '.join(dom)}]) AS __u{i}(x)) AS __d{i}")
            continue
        rows = ", ".join(f"({v})" for v in dom)
        parts.append(f"(VALUES {rows}) AS __d{i}({key_column(i)})")
    return "SELECT * FROM " + " CROSS JOIN ".join(parts)


def _with_public_domain(core: CorePlan, inner: str, measures: list[Measure]) -> str:
    dom_sql = domain_sql(core)
    domains = core.keys
    if not measures:  # the keys alone (SELECT k FROM t GROUP BY k): the domain, no private row
        return dom_sql
    on = " AND ".join(
        f"__dom.{key_column(i)} IS NOT DISTINCT FROM __agg.{key_column(i)}"
        for i in range(len(domains))
    )
    cols = [f"__dom.{key_column(i)} AS {key_column(i)}" for i in range(len(domains))]
    cols += [f"__agg.{measure_column(m)} AS {measure_column(m)}" if m.kind == "quantile"
             else f"COALESCE(__agg.{measure_column(m)}, 0) AS {measure_column(m)}"
             for m in measures]  # (an empty group's histogram stays NULL: no rows)
    # (subqueries, not a WITH: DuckDB materializes CTEs, about 0.4 ms a statement)
    return (f"SELECT {', '.join(cols)} FROM ({dom_sql}) AS __dom "
            f"LEFT JOIN ({inner}) AS __agg ON {on}")


DUPLICATES = "__privplan_rows_per_key"


def with_key_check(sql: str, keys: int, *, fenced: bool = False) -> str:
    """``sql`` plus a column counting, *with the engine's own equality*, the rows that share
    each row's key: the session checks it is 1 everywhere before any noise is drawn (one
    released key, one exact aggregate; checked, not assumed). ``fenced`` (DuckDB): ``sql`` is
    computed once, as a MATERIALIZED CTE, before the count (see
    :func:`privplan.rewrite.statement.engine_statement`)."""
    if not keys:
        return sql
    part = ", ".join(key_column(i) for i in range(keys))
    count = f"SELECT *, COUNT(*) OVER (PARTITION BY {part}) AS {DUPLICATES} FROM "
    if fenced:
        return f"WITH __released AS MATERIALIZED ({sql}) {count}__released"
    return f"{count}({sql}) AS __released"


def _checked(sql: str) -> str:
    """The statement as built. Its pieces are rendered by sqlglot from validated trees; the
    engine binds the whole statement before anything is charged, and the rewrite
    fixtures parse every expected statement, so no second parse is paid per query here."""
    return sql


def canonical(sql: str) -> str:
    """Round-trip through sqlglot (used by tests and for other dialects)."""
    return sqlglot.parse_one(sql, dialect="duckdb").sql(dialect="duckdb")


def public_domain_size(core: CorePlan) -> int:
    return len(list(itertools.product(*[k.public_domain or () for k in core.keys])))


__all__ = ["Fraction", "core_sql", "key_column", "measure_column"]
