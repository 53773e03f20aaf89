"""Bind a planned core to what the engine will really compute, before anything is charged.

The analysis reasons about records, predicates and group keys in the policy's types; the engine
computes with its own types, casts, collations and run-time errors. This module closes that seam
(DESIGN.md invariant 7), using only the query text, the policy and the engine's *schema* (types of
columns, never their values), with DuckDB itself as the judge of types
(:mod:`privplan.engines.judge`):

* every expression evaluated over private rows (WHERE, FILTER/CASE conditions, GROUP BY keys) is
  made total (:mod:`privplan.sql.totality`);
* public join keys are compared in the private column's type, so join regions hold values of the
  column's type (:func:`describe_public_joins`);
* a public key domain is the set of *distinct values as the engine types and compares them*
  (:func:`type_public_domains`): ``CASE ... THEN 1 ... THEN '01'`` is one INTEGER group, and
  releasing it once per literal would release one exact aggregate several times.

Privacy: before the charge, expressions over private rows are made total and key domains typed.
"""

from __future__ import annotations

import math
import typing
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from privplan.errors import InternalError, PolicyError, UnsupportedQueryError
from privplan.planning.reads import DomainJudge, DomainTables, PublicCatalog
from privplan.rewrite.engine_sql import DUPLICATES, released_key
from privplan.sql.joins import public_name
from privplan.sql.locate import with_location
from privplan.sql.plan import CorePlan, GroupKey
from privplan.sql.totality import ExpressionJudge, JudgeError, family, make_total


def describe_public_joins(core: CorePlan, engine: PublicCatalog) -> CorePlan:
    """The core with each public join's table, column types and private key types read from
    the public tables' schemas, and the engine types of the public columns it uses
    (``__pub<j>_<c>``) added to its source types (public data: reading its schema reveals
    nothing private)."""
    out = dict(core.source_types)
    joins = []
    for join in core.joins:
        table_sql = engine.table_sql(join.table)
        types = engine.columns(table_sql)
        joins.append(replace(
            join, table_sql=table_sql, column_types={c: types[c] for c in types},
            key_types={a: core.source_types[a] for a, _ in join.pairs if a in core.source_types}))
        for c in join.columns:
            if c in types:
                out[public_name(join.index, c)] = types[c]
    return replace(core, joins=tuple(joins), source_types=out)


def make_core_total(core: CorePlan, judge: ExpressionJudge, sql: str) -> CorePlan:
    """The core with WHERE, every FILTER condition and every group key replaced by its total
    version (over the engine types of its source, ``core.source_types``), and each key's
    engine type recorded. The regions were computed from the expressions as written;
    the total versions only turn failures into NULL, which shrinks TRUE- and FALSE-sets, so the
    regions stay over-approximations."""
    column_types = dict(core.source_types)
    where = core.where
    if where is not None:
        where = make_total(where, column_types, judge, sql=sql, clause="WHERE",
                           condition=True).expr
    measures = []
    for m in core.measures:
        if m.condition is not None:
            total = make_total(m.condition, column_types, judge, sql=sql, clause="FILTER",
                               condition=True)
            m = replace(m, condition=total.expr)
        measures.append(m)
    keys = []
    for key in core.keys:
        total = make_total(key.expr, column_types, judge, sql=sql, clause="GROUP BY",
                           condition=False)
        if total.family in ("other", "interval"):
            raise UnsupportedQueryError(with_location(
                f"GROUP BY {key.sql} refused: its values are of type {total.type}. Group by a "
                "number, string, boolean, date or timestamp.", sql, key.expr))
        keys.append(replace(key, expr=total.expr, engine_type=total.type))
    return replace(core, where=where, measures=tuple(measures), keys=tuple(keys))


DOMAIN_TABLE_MIN = 1_000
"""A public domain of at least this many plain values (strings, or integers within BIGINT) is
read by the engine statement from a relation the engine makes once per session
(:meth:`~privplan.engines.duckdb_engine.DuckDBEngine.domain_table`) instead of being written
into the statement's text: the same values, cast by the same expression."""


def type_public_domains(core: CorePlan, judge: DomainJudge, sql: str,
                        engine: DomainTables | None = None) -> CorePlan:
    """The core with each public key domain as the engine types and compares its values.

    The candidate values (CASE results as written, declared ``public_values``, a public table's
    distinct values) are cast to the key's engine type and grouped *by the engine* (binary
    collation for strings); one representative per group is kept. The engine statement's
    GROUP BY uses the same equality, so each released key matches at most one group (and the
    statement is checked to return one row per key after it runs). All of this reads only the
    query text, the policy and public tables. ``engine``: where a long domain of plain values
    is kept as a relation (see :data:`DOMAIN_TABLE_MIN`); None writes every domain inline."""
    keys = []
    for key in core.keys:
        if key.public_domain is None or key.engine_type is None:
            keys.append(key)
            continue
        target = key.engine_type
        if family(target) == "null":
            keys.append(replace(key, public_domain=(None,), domain_sql=("NULL",)))
            continue
        try:
            if not key.domain_literals and _uniform_kind(key.public_domain) is not None:
                keys.append(_typed_uniform(key, target, judge, engine))
            else:
                keys.append(_typed_values(key, target, judge))
        except JudgeError as err:
            raise PolicyError(with_location(
                f"GROUP BY {key.sql}: a value of its public domain does not convert to the "
                f"key's type {target} ({err.message}). Make every value of the domain (CASE "
                "results or public_values) a value of that type.", sql, key.expr)) from None
    return replace(core, keys=tuple(keys))


def _typed_uniform(key: GroupKey, target: str, judge: DomainJudge,
                   engine: DomainTables | None) -> GroupKey:
    """One kind of Python value (str, or int within BIGINT): passed as one list, cast once per
    value by the same expression, as the engine statement will."""
    cast = released_key(f"CAST(x AS {target})", target)
    values = list(key.public_domain or ())
    kept = judge.fetch_over(
        f"SELECT MIN(i), v FROM (SELECT i, {cast} AS v FROM (SELECT unnest($1) AS "
        "x, generate_subscripts($1, 1) - 1 AS i)) GROUP BY v ORDER BY MIN(i)", values)
    at = [typing.cast(int, i) for i, _ in kept]  # (MIN(i): an index)
    table = None
    if engine is not None and len(at) >= DOMAIN_TABLE_MIN and hasattr(engine, "domain_table"):
        table = engine.domain_table([values[i] for i in at])
    domain_sql = None if table is not None else tuple(typed_literal(values[i]) for i in at)
    return replace(key, public_domain=tuple(v for _, v in kept), domain_sql=domain_sql,
                   domain_cast=cast, domain_table=table)


def _typed_values(key: GroupKey, target: str, judge: DomainJudge) -> GroupKey:
    """Any other domain: each value cast on its own, as one VALUES row."""
    candidates = list(key.domain_literals or [typed_literal(v) for v in key.public_domain or ()])
    typed = [released_key(f"CAST({c} AS {target})", target) for c in candidates]
    rows = ", ".join(f"({i}, {t})" for i, t in enumerate(typed))
    kept = judge.fetch(f"SELECT MIN(i), v FROM (VALUES {rows}) AS d(i, v) "
                       f"GROUP BY v ORDER BY MIN(i)")
    kept_at = [(typing.cast(int, i), v) for i, v in kept]
    return replace(key, public_domain=tuple(v for _, v in kept_at),
                   domain_sql=tuple(typed[i] for i, _ in kept_at))


_BIGINT = (-(2**63), 2**63 - 1)


def _uniform_kind(values: Any) -> str | None:
    """"str" or "int" when every domain value is a Python ``str`` (every one a VARCHAR literal)
    or an ``int`` within BIGINT (every one an integer literal the engine widens losslessly to
    BIGINT): one list of them means to the engine what the values one by one mean, so the
    domain may be passed and written as one list. Anything else (CASE results, other types,
    mixed kinds, which the engine would unify) keeps the value-by-value form."""
    if not values:
        return None
    if all(type(v) is str for v in values):
        return "str"
    if all(type(v) is int and _BIGINT[0] <= v <= _BIGINT[1] for v in values):
        return "int"
    return None


def typed_literal(value: Any) -> str:
    """A DuckDB literal that reads back as exactly ``value`` (floats by their shortest
    round-trip text, so NaN and infinities survive; dates and timestamps to the microsecond)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value) if math.isfinite(value) else str(value)
        return f"CAST('{text}' AS DOUBLE)"
    if isinstance(value, Decimal):
        return f"'{value}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    raise InternalError(f"cannot write a literal for {type(value).__name__} {value!r}")


def check_one_row_per_key(core: CorePlan, frame: Any) -> None:
    """The engine statement must return at most one row per released key (checked, not
    assumed): two rows with one key would release one group's aggregate twice, each with
    fresh noise. The statement counts, with the engine's own equality, the rows sharing each
    key (:func:`~privplan.rewrite.engine_sql.with_key_check`); this runs on the exact rows before
    any noise is drawn and raises :class:`InternalError` (nothing is released) if a count is not
    1. The count column stays in the frame (noise reads only key and measure columns).
    ``frame``: a DataFrame or its columns by name."""
    counts = frame.get(DUPLICATES)
    if counts is None:
        return
    if len(counts) and int(counts.to_numpy().max()) > 1:
        raise InternalError(
            "the engine returned two rows for one group key; nothing was released. This is a "
            "bug in privplan's key typing: please report it with the query.")
