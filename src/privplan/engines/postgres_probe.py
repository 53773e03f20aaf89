"""The PostgreSQL engine's part in the pre-charge gate (:mod:`privplan.gate`): the edge values
of each column type as PostgreSQL converts them, and statements run over relations of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import sqlglot

from privplan.engines.base import ProbeFailed, StandIn, Values
from privplan.engines.render import render
from privplan.engines.shadow import quote as _quote
from privplan.errors import PolicyError


def stand_in_values(engine: Any, storage_type: str) -> Values:
    """PostgreSQL literals of the column type ``storage_type`` (a DuckDB name, as
    :meth:`columns` reports it) holding the edge values of :mod:`privplan.gate.edge_values`
    that PostgreSQL's own conversion accepts (each tried in a savepoint of one read-only
    transaction; a value reached twice kept once), NULL first; and, in a database whose
    encoding is SQL_ASCII, strings that are not valid UTF-8. Reads no table; kept per
    type."""
    info = engine._con.info
    key = (info.host, info.port, info.dbname, storage_type)
    known = _STAND_IN_VALUES.get(key)
    if known is not None:
        return known
    from privplan.gate.edge_values import CANDIDATES, LONG_STRING, extra_texts
    from privplan.gate.stand_ins import inline_values

    native = _pg_type(storage_type)
    texts = [t for t in (*CANDIDATES, *extra_texts(storage_type)) if t is not None]
    literals = [f"CAST({_pg_string(t) if t != LONG_STRING else _LONG} AS {native})"
                for t in texts]
    literals += [f"CAST(convert_from('\\x{b}'::bytea, 'SQL_ASCII') AS {native})"
                 for b in ("ff", "c328", "80")]
    kept = [f"CAST(NULL AS {native})"]
    seen: set[str | None] = set()
    import psycopg

    try:
        with engine._read_only(engine._connection()) as con:
            for literal in literals:
                try:
                    with con.transaction():  # (a savepoint: a failed cast is undone)
                        row = con.execute(f"SELECT CAST({literal} AS text)").fetchone()
                except psycopg.Error:
                    continue
                shown = row[0] if row is not None else None
                if shown is not None and shown not in seen:
                    seen.add(shown)
                    kept.append(literal)
    except (psycopg.Error, PolicyError):
        pass  # (the type itself is unknown here: NULL only)
    values = inline_values(kept)
    _STAND_IN_VALUES[key] = values
    return values


def probe(engine: Any, sql: str, stand_ins: Mapping[str, StandIn], *, bind_only: bool = False
          ) -> pd.DataFrame | None:
    """Render ``sql``, run it read-only with each name of ``stand_ins`` bound to its
    relation of stand-in rows (a WITH around the statement), and return every row as
    :meth:`run` would (DuckDB types, through the same conversion), or bind it only. Reads
    no private row. Raises :class:`~privplan.engines.base.ProbeFailed`."""
    try:
        rendered = render(sql, engine.dialect)
    except sqlglot.errors.SqlglotError as err:
        raise ProbeFailed("bind", str(err).splitlines()[0] if str(err) else "render") from None
    for name, stand_in in stand_ins.items():
        quoted = _quote(name)
        if engine._stand_in_shapes.get(quoted) != dict(stand_in.columns):
            engine._stand_in_shapes[quoted] = dict(stand_in.columns)
            engine._shadow.forget(name)
    ctes = ", ".join(f"{_quote(n)} AS ({s.relation})" for n, s in stand_ins.items())
    text = (f"WITH {ctes} SELECT * FROM ({rendered}) AS __probe" if ctes else rendered) + (
        " LIMIT 0" if bind_only else "")
    return engine._probe_native(text, sql, bind_only=bind_only)


_STAND_IN_VALUES: dict[tuple[object, ...], Values] = {}
"""Stand-in literals per database (host, port, name) and column type: what a type's values are
does not change between sessions on one database (its encoding is fixed when it is made)."""

_LONG = "repeat('a', 10000)"  # (edge_values.LONG_STRING, not written out)

_PG_TYPES = {"BOOLEAN": "boolean", "SMALLINT": "smallint", "INTEGER": "integer",
             "BIGINT": "bigint", "FLOAT": "real", "REAL": "real", "DOUBLE": "double precision",
             "VARCHAR": "text", "DATE": "date", "TIMESTAMP": "timestamp",
             "TIMESTAMP WITH TIME ZONE": "timestamptz", "NUMERIC": "numeric",
             "BPCHAR": "bpchar", "BLOB": "bytea", "TIME": "time", "INTERVAL": "interval",
             "UUID": "uuid"}


def _pg_type(duckdb_type: str) -> str:
    """The PostgreSQL column type :meth:`PostgresEngine.columns` reports as ``duckdb_type``."""
    upper = duckdb_type.upper().strip()
    if upper.startswith("DECIMAL("):
        return "numeric" + upper[len("DECIMAL"):]
    return _PG_TYPES.get(upper, duckdb_type.lower())


def _pg_string(text: str) -> str:
    """A PostgreSQL string literal (standard-conforming: only quotes are doubled)."""
    return "'" + text.replace("'", "''") + "'"
