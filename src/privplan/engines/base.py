"""What a session needs from an engine, and nothing more.

privplan analyses every statement with **DuckDB's semantics** (types, comparisons, the totality
judge of :mod:`privplan.engines.judge`): that is the reference. An engine receives statements
written in DuckDB's dialect by the rewrite (:mod:`privplan.rewrite.engine_sql`) and must compute
exactly what DuckDB would compute on the same rows. The embedded DuckDB engine runs them as
they are; PostgreSQL and Spark render them for their own dialect first
(:func:`privplan.engines.render.render`), which is where the semantic differences (collations,
division, rounding, failing arithmetic, NULL ordering) are removed.

The contract, in DuckDB terms on both sides:

* ``columns(table_sql)`` describes a table: column (lower case) -> DuckDB type name;
* ``bind(sql)`` binds a statement without reading a row: (column, DuckDB type) pairs, and
  every error that does not depend on the data is raised here, before anything is charged;
* ``run(sql)`` runs one exact-aggregate statement and returns one row per group as a pandas
  DataFrame with the dtypes the embedded DuckDB engine gives for the same statement; an error
  raised there is withheld, message and kind (:class:`~privplan.errors.ExecutionError` with
  :data:`RUN_FAILED`: it may quote a value);
* ``fetch_public(sql)`` reads public tables only (its errors may be shown);
* the rest (``table_sql``, ``null_columns``, ``register``, ``create_view``, ``materialize``,
  ``materialized``, ``domain_table``, ``forget_durable``, ``generation``, ``close``) keeps the
  session's relations: an engine that cannot make a relation (a read-only PostgreSQL
  transaction) inlines it as a subquery instead.

Post-processing (HAVING, ORDER BY, LIMIT, expressions over noisy values) never runs on an
engine: it runs on an in-process DuckDB over the noisy table, whatever the source
(:class:`privplan.engines.post_processor.PostProcessor`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from privplan.errors import UnsupportedQueryError

RUN_FAILED = (
    "the engine failed while reading the data; why is withheld: the engine's message could "
    "quote a private value, and even the kind of its error (a failed conversion, a lost "
    "connection, ...) is a bit about the rows it read. The query was charged. A cast or "
    "function over private columns must be valid for every value of the column (e.g. use "
    "TRY_CAST).")
"""The one message of a failure after the charge (every engine's ``run``): "the engine
failed" and what privplan itself knows, never the engine's class or message."""
COPY_FAILED = (
    "the engine failed while making the session's bounded copy of the table; why is withheld "
    "(as for any failure while reading private rows). The query was charged.")
"""The same for ``materialize`` (the session copy, made after the charge)."""


class SchemaChanged(UnsupportedQueryError):
    """``bind`` found that a table the engine described before has another schema now (the
    Spark engine checks at every bind, which comes before every charge). Nothing is charged:
    the session forgets the column types it read and plans the query again; raised again
    (the table changed once more meanwhile), it reaches the caller as a refusal."""


class Engine(Protocol):
    """The engine surface a :class:`~privplan.session.session.Session` uses (see the module doc)."""

    dialect: str
    """sqlglot's name of the dialect statements are rendered in ("duckdb", "postgres", "spark")."""
    generation: int
    """Moves with every change to what the engine exposes (plans are cached under it)."""

    def table_sql(self, table: Any) -> str: ...
    def columns(self, table_sql: str) -> dict[str, str]: ...
    def null_columns(self, table_sql: str, columns: list[str]) -> list[str]: ...
    def bind(self, sql: str) -> list[tuple[str, str]]: ...
    def run(self, sql: str) -> pd.DataFrame: ...
    def fetch_public(self, sql: str) -> list[tuple[Any, ...]]: ...
    def register(self, name: str, data: Any) -> None: ...
    def create_view(self, name: str, select_sql: str) -> None: ...
    def materialize(self, select_sql: str) -> str: ...
    def materialized(self, select_sql: str) -> str | None: ...
    def domain_table(self, values: list[Any]) -> str: ...
    def forget_durable(self) -> None: ...
    def close(self) -> None: ...
    def stand_in_values(self, storage_type: str) -> Values: ...
    def stand_in_rows(self, select_sql: str) -> str: ...
    def probe(self, sql: str, stand_ins: Mapping[str, StandIn], *, bind_only: bool = False
              ) -> pd.DataFrame | None: ...


class ProbeFailed(Exception):
    """A statement over stand-in rows failed (:meth:`probe` of an engine). ``stage``: "bind"
    (names, types: the statement cannot run at all) or "run" (evaluating some value failed).
    The message is the engine's, about stand-in values only (no private row is read), so the
    gate may show it."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage, self.message = stage, message


@dataclass(frozen=True)
class StandIn:
    """A private table's stand-in for the pre-charge gate (:mod:`privplan.gate`): a relation
    of edge values, in the engine's dialect, and its columns' storage types (DuckDB names, as
    ``columns`` reports them), by which a remote engine types the probe's answer."""

    relation: str
    columns: Mapping[str, str]


@dataclass(frozen=True)
class Values:
    """A column type's edge values: ``rows`` a relation of columns ``i`` (0 .. count - 1) and
    ``v`` (the value, NULL at i = 0), and ``ordinary`` an SQL expression of its first value that
    is not NULL (what the column holds while other columns vary)."""

    rows: str
    count: int
    ordinary: str
