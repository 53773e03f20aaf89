"""The engine's definition of a derived per-unit table (see :mod:`privplan.sql.per_unit`).

One row per unit, from the unit's *bounded* rows (:func:`bounded_source`: at most
``max_rows_per_unit``, chosen by hashes of the unit's own rows, unit-level columns canonical),
filtered by the inner WHERE in its total form (checked and rewritten like any WHERE, so it cannot
fail on some rows), with every aggregated column clamped to its declared bounds (NULL stays
NULL): the derived values then lie inside the bounds the derived table's policy declares.
A SUM of a float column adds the rows' values on the column's SUM grid (the bounded rows'
``__grid_`` column, as a direct SUM does): the sum of those integers is exact in the engine,
and only scaling it back by the step is one DOUBLE step (a few ulps at most). A float sum of n
rows could instead drift out of [n·lo, n·hi] by its rounding order; here the value is within
rounding of the exact sum of the grid values, and the outer query clamps the derived column to
its declared bounds like any column, so the outer SUM's charge in base rows
(:func:`privplan.sql.per_unit.charge_on_base`) holds whatever the last rounding.

Privacy: a derived row comes from its unit's bounded rows, every aggregated column clamped.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from privplan.mechanisms.grid import sum_grid
from privplan.rewrite.engine_sql import _clamp, _ident, bounded_source, grid_column
from privplan.sql.per_unit import PerUnit


def _bound(value: Any) -> str:
    return repr(float(value)) if isinstance(value, float) else str(int(value))


def derived_view_sql(found: PerUnit, inner_core: Any) -> str:
    """``SELECT unit, <unit-level keys>, <clamped aggregates> FROM <bounded rows> [WHERE ...]
    GROUP BY unit, <keys>`` for the derived table ``found.table``."""
    base = found.base
    rows = bounded_source(cast(Any, SimpleNamespace(
        columns=tuple(base.columns), unit=base.privacy_unit, table_sql=inner_core.table_sql,
        unit_level_columns=tuple(sorted(base.unit_level_columns())),
        max_rows_per_unit=int(base.max_rows_per_unit), table_policy=base)))
    keys = [_ident(k) for k in found.keys]
    items = list(keys)
    for c in found.columns:
        if c.func == "count_star":
            items.append(f"COUNT(*) AS {_ident(c.name)}")
            continue
        assert c.column is not None  # (only COUNT(*) reads no column)
        col = base.columns[c.column]
        if c.func == "count":
            items.append(f"COUNT({_ident(c.column)}) AS {_ident(c.name)}")
            continue
        if c.func == "sum" and col.type == "float":  # the exact sum of grid integers, scaled
            res = sum_grid(col)[0]
            items.append(f"CAST(SUM({_ident(grid_column(c.column))}) AS DOUBLE) * "
                         f"{res.numerator} / {res.denominator} AS {_ident(c.name)}")
            continue
        value = _clamp(_ident(c.column), _bound(col.lower), _bound(col.upper))  # type: ignore[arg-type]
        if col.type == "float":
            value = f"CAST({value} AS DOUBLE)"
        items.append(f"{c.func.upper()}({value}) AS {_ident(c.name)}")
    where = (f" WHERE {inner_core.where.sql(dialect='duckdb')}"
             if inner_core.where is not None else "")
    return (f"SELECT {', '.join(items)} FROM {rows} AS __bounded{where} "
            f"GROUP BY {', '.join(keys)}")
