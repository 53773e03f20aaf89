"""The Spark engine's part in the pre-charge gate (:mod:`privplan.gate`): the edge values
of each column type as Spark converts them, and statements run over relations of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from privplan.engines.base import ProbeFailed, StandIn, Values
from privplan.engines.frames import duckdb_frame
from privplan.engines.render import render
from privplan.engines.shadow import quote as _quote
from privplan.engines.spark_types import spark_type
from privplan.errors import PolicyError

_VALUES: dict[tuple[str, str], Values] = {}
"""Edge values by (:func:`_settings_key`, storage type), for every engine of the process:
computing them is a Spark job (~0.5 s) per type, and a new engine is made for every session."""
_ROWS: set[str] = set()
"""Names of the stand-in row views made (each holds its key in its name)."""


def _settings_key(engine: Any) -> str:
    """What Spark's conversion of a text depends on, read once per engine: the Spark
    session (its application and object), its version and every setting, as they are while
    privplan's are pinned (ANSI mode, the time zone)."""
    known = getattr(engine, "_settings_key", None)
    if known is None:
        import hashlib
        import json

        with engine._pinned():
            settings = sorted(engine.spark.conf.getAll.items())
            text = json.dumps([engine.spark.version, id(engine.spark),
                               engine.spark.sparkContext.applicationId, settings])
        known = hashlib.sha256(text.encode()).hexdigest()[:16]
        engine._settings_key = known
    return str(known)


def stand_in_rows(engine: Any, select_sql: str) -> str:
    """The gate's stand-in rows that depend on a table's column types alone (see
    :func:`privplan.gate.stand_ins.relation_sql`) computed once per Spark session and
    settings, into one partition held by Spark (``localCheckpoint``), and read from a
    temporary view by every probe of every query over such a table. Inline, they were a
    union of a dozen branches of literal tables: ~1 s of planning and two dozen tasks in
    each of a query's three probes. Reads no private table."""
    import hashlib

    key = hashlib.sha256((_settings_key(engine) + select_sql).encode()).hexdigest()[:16]
    name = f"__privplan_stand_in_rows_{key}"
    with engine._pinned(), engine._quiet():
        if name not in _ROWS or not engine.spark.catalog.tableExists(name):
            engine.spark.sql(select_sql).coalesce(1).localCheckpoint(eager=True) \
                .createOrReplaceTempView(name)
            _ROWS.add(name)
    return f"SELECT * FROM {_backquote(name)}"


def stand_in_values(engine: Any, storage_type: str) -> Values:
    """Spark literals of the column type ``storage_type`` (a DuckDB name, as
    :meth:`columns` reports it) holding the edge values of :mod:`privplan.gate.edge_values`
    that Spark's own conversion accepts (``try_cast``, one job for all; a value reached
    twice kept once), NULL first; for strings also ones that are not valid UTF-8 (a
    Parquet file can hold them). Reads no table; kept per type."""
    key = (_settings_key(engine), storage_type)
    known = _VALUES.get(key)
    if known is not None:
        return known
    from privplan.gate.edge_values import CANDIDATES, LONG_STRING, extra_texts
    from privplan.gate.stand_ins import inline_values

    try:
        native = spark_type(storage_type.split(" COLLATE ")[0]).simpleString()
    except PolicyError:
        native = storage_type.lower()
    if " COLLATE " in storage_type:
        native = f"{native} COLLATE {storage_type.split(' COLLATE ')[1]}"
    texts = [t for t in (*CANDIDATES, *extra_texts(storage_type)) if t is not None]

    def text(t: str) -> str:
        return "repeat('a', 10000)" if t == LONG_STRING else _spark_string(t)

    rows = ", ".join(f"({i}, {text(t)})" for i, t in enumerate(texts))
    kept = [f"CAST(NULL AS {native})"]
    try:
        with engine._pinned(), engine._quiet():
            found = engine.spark.sql(
                f"SELECT MIN(i) FROM (SELECT i, CAST(try_cast(t AS {native}) AS STRING) "
                f"AS shown FROM VALUES {rows} AS v(i, t)) WHERE shown IS NOT NULL "
                "GROUP BY shown ORDER BY 1").collect()
        kept += [f"CAST({text(texts[int(r[0])])} AS {native})" for r in found]
    except engine._errors():
        pass  # (a type no text converts to: NULL only)
    if native.lower().startswith("string"):
        kept += [f"CAST(X'{b}' AS {native})" for b in ("FF", "C328", "80")]
    values = inline_values(kept)
    _VALUES[key] = values
    return values


def probe(engine: Any, sql: str, stand_ins: Mapping[str, StandIn], *, bind_only: bool = False
          ) -> pd.DataFrame | None:
    """Render ``sql``, analyse it with each name of ``stand_ins`` bound to its relation of
    stand-in rows (a WITH around the statement) and return every row as :meth:`run` would
    (DuckDB types, through the same conversion), or analyse it only. Reads no private
    row. Raises :class:`~privplan.engines.base.ProbeFailed`."""
    import sqlglot

    try:
        rendered = render(sql, engine.dialect)
    except sqlglot.errors.SqlglotError as err:
        raise ProbeFailed("bind", _first_line(err)) from None
    for name, stand_in in stand_ins.items():
        quoted = _quote(name)
        if engine._stand_in_shapes.get(quoted) != dict(stand_in.columns):
            engine._stand_in_shapes[quoted] = dict(stand_in.columns)
            engine._shadow.forget(name)
    ctes = ", ".join(f"{_backquote(n)} AS ({s.relation})" for n, s in stand_ins.items())
    text = f"WITH {ctes} SELECT * FROM ({rendered}) AS __probe" if ctes else rendered
    with engine._pinned(), engine._quiet():
        try:
            frame = engine.spark.sql(text)
        except engine._errors() as err:
            raise ProbeFailed("bind", _first_line(err)) from None
        if bind_only:
            return None
        try:
            return duckdb_frame(engine._arrow(sql, frame))
        except engine._errors() as err:
            raise ProbeFailed("run", _first_line(err)) from None


def _backquote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _spark_string(text: str) -> str:
    """A Spark SQL string literal (backslash escapes are on by default: both escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
