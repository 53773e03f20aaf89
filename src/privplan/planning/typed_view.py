"""A private table as the engine must read it: every column in its policy type and strings in
binary collation (the analysis's assumptions, made true in SQL).

Privacy: private columns are read in their policy types and binary collation, as analysed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privplan.rewrite.engine_sql import BINARY

__all__ = ["read_as_stored", "typed_source", "typed_view"]

_ENGINE_TYPES = {
    "int": ("BIGINT", ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                       "USMALLINT", "UINTEGER")),
    "float": ("DOUBLE", ("DOUBLE",)),  # (FLOAT / REAL widened: see typed_view)
    "str": ("VARCHAR", ("VARCHAR",)),
    "bool": ("BOOLEAN", ("BOOLEAN",)),
    "date": ("DATE", ("DATE",)),
    "timestamp": ("TIMESTAMP", ("TIMESTAMP",)),
}


def read_as_stored(policy_type: str, stored: str) -> bool:
    """Whether :func:`typed_view` reads a column of engine type ``stored`` as it is stored (no
    ``TRY_CAST``, which turns a value that does not convert into NULL): only then does the
    schema's ``NOT NULL`` hold for the column privplan reads."""
    upper = stored.upper()
    return upper in _ENGINE_TYPES[policy_type][1] and upper not in ("UBIGINT", "UHUGEINT")


def typed_source(table_sql: str, name: str, columns: Mapping[str, Any],
                 actual: Mapping[str, str]) -> str:
    """The table as the engine should read it (see :func:`typed_view`)."""
    return typed_view(table_sql, columns, actual)[0]


def typed_view(table_sql: str, columns: Mapping[str, Any],
               actual: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The table as the engine should read it, with every column in its *policy* type, and the
    engine's type of each column of that view.

    Why each conversion (DESIGN.md invariant 7, the engine computes what the analysis models):

    * Regions are derived with the policy's types (e.g. string order for ``str``). If the engine
      compared with another type's order (integers stored in a column the policy calls ``str``),
      two regions the analyzer proves disjoint could overlap in the engine — an under-charge. So
      a column whose stored type differs is read through ``TRY_CAST`` to the policy type (a value
      that does not convert becomes NULL; TRY_CAST cannot fail).
    * ``float`` columns are read as floating point: a DECIMAL or HUGEINT column would make the
      clamping arithmetic of a SUM overflow (an error that only some values cause). A FLOAT
      (REAL, 32-bit) column is read as a DOUBLE too (exactly: every float32 is a double):
      compared with a constant, DuckDB would round the constant to float32 where PostgreSQL
      and Spark compare in double (``f = 0.1`` held for the float32 0.1 on DuckDB only), so
      the same query would count other rows on another engine.
    * ``str`` columns are read ``COLLATE "binary"``: the analysis compares strings by code
      point, while a column declared ``COLLATE NOCASE`` (or a connection's
      ``default_collation``) would make ``s = 'a'`` and ``s = 'A'`` overlap. The collation
      sticks to the column through functions and session copies.
    """
    items = []
    types: dict[str, str] = {}
    for col, policy_col in columns.items():
        target, accepted = _ENGINE_TYPES[policy_col.type]
        stored = actual[col].upper()
        ident = f'"{col}"'
        same = stored in accepted
        if stored in ("UBIGINT", "UHUGEINT"):
            # compared with a signed value, the engine would convert an unsigned 64/128-bit
            # integer to a signed type and fail on the largest values
            target = "HUGEINT"
        value = ident if same else f"TRY_CAST({ident} AS {target})"
        if stored == "NUMERIC":
            # PostgreSQL's unconstrained numeric (only that engine reports it; the policy reads
            # it as float only): DuckDB's reading of the number's text, which the renderer
            # makes total there (engines/render.py, _numeric_to_double)
            value = f"TRY_CAST(CAST({ident} AS VARCHAR) AS {target})"
        types[col] = stored if same else target
        if policy_col.type == "str":
            value = f"{value} {BINARY}"
            types[col] = "VARCHAR"
        items.append(value if value == ident else f"{value} AS {ident}")
    if all(item.startswith('"') and " AS " not in item for item in items):
        return table_sql, types
    return f'(SELECT {", ".join(items)} FROM {table_sql})', types
