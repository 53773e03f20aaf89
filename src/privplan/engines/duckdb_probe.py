"""The embedded DuckDB engine's part in the pre-charge gate (:mod:`privplan.gate`): the edge
values each storage type can hold, the stand-in rows made of them, and probes of engine
statements over those rows (as ``postgres_probe.py`` and ``spark_probe.py`` are the other
engines'). A base class of :class:`~privplan.engines.duckdb_engine.DuckDBEngine`.

Privacy: reads no private table — every statement here runs over stand-in rows privplan made
from the column types alone, in the engine's private work database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import duckdb
import pandas as pd

from privplan.engines.base import ProbeFailed, StandIn, Values
from privplan.engines.frames import duckdb_frame
from privplan.engines.shadow import quote as _quote

__all__ = ["DuckDBProbes"]


class DuckDBProbes:
    """Stand-in values and rows, and probes (see the module docstring). Reads the engine's
    connection and work database, set by the engine."""

    con: duckdb.DuckDBPyConnection
    _stand_in_values: dict[str, Values]
    _stand_in_rows: set[str]

    def _work_database(self) -> str:
        raise NotImplementedError

    def stand_in_values(self, storage_type: str) -> Values:
        """The edge values a column of ``storage_type`` can store
        (:mod:`privplan.gate.edge_values`): each candidate text converted by DuckDB's own cast,
        the ones that do not convert dropped, each value kept once, NULL first — as a table
        ``(i, v)`` of this engine's work database, made once per type (a statement then names
        it instead of carrying its values: DuckDB reads a long statement slowly). Reads no
        private table."""
        known = self._stand_in_values.get(storage_type)
        if known is not None:
            return known
        from privplan.gate.edge_values import CANDIDATES, extra_texts

        texts = [t for t in (*CANDIDATES, *extra_texts(storage_type)) if t is not None]
        t = storage_type
        name = (f"{self._work_database()}.__privplan_values_"
                f"{hashlib.sha256(t.encode()).hexdigest()[:16]}")
        try:
            self.con.execute(
                f"CREATE OR REPLACE TABLE {name} AS WITH c AS (SELECT unnest($1) AS t, "
                f"generate_subscripts($1, 1) AS k), conv AS (SELECT k, TRY_CAST(t AS {t}) AS v "
                "FROM c), firsts AS (SELECT MIN(k) AS k FROM conv WHERE v IS NOT NULL GROUP BY "
                f"TRY_CAST(v AS VARCHAR)) SELECT 0 AS i, CAST(NULL AS {t}) AS v UNION ALL "
                "SELECT CAST(row_number() OVER (ORDER BY k) AS INTEGER) AS i, v FROM conv "
                "WHERE k IN (SELECT k FROM firsts)", [texts])
            ((count, shown),) = self.con.execute(
                f"SELECT COUNT(*), MIN(CASE WHEN i = 1 THEN CAST(v AS VARCHAR) END) "
                f"FROM {name}").fetchall()
        except duckdb.Error:  # (a type no text converts to, or one DuckDB cannot name)
            count, shown = 1, None
            self.con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT 0 AS i, "
                             f"CAST(NULL AS {t}) AS v")
        ordinary = (f"CAST({_string(shown)} AS {t})" if shown is not None
                    else f"CAST(NULL AS {t})")
        values = Values(name, int(count), ordinary)
        self._stand_in_values[storage_type] = values
        return values

    def stand_in_rows(self, select_sql: str) -> str:
        """The gate's stand-in rows that depend on a table's column types alone (each value of
        each column, and the diagonal: :func:`privplan.gate.stand_ins.relation_sql`) as a
        table of the work database, made once per text: read by every probe of every query
        over the table. Made with DuckDB's join-order optimizer off: the diagonal joins one
        edge-value table per column, and ordering ten of them took DuckDB ~150 ms a
        statement (three statements a query), where the join itself takes ~2 ms. Reads no
        private table, and the rows are the same in any join order."""
        name = (f"{self._work_database()}.__privplan_stand_in_rows_"
                f"{hashlib.sha256(select_sql.encode()).hexdigest()[:16]}")
        if name not in self._stand_in_rows:
            ((previous,),) = self.con.execute(
                "SELECT current_setting('disabled_optimizers')").fetchall()
            off = ", ".join(x for x in (previous, "join_order") if x)
            self.con.execute(f"SET disabled_optimizers = {_string(off)}")
            try:
                self.con.execute(f"CREATE OR REPLACE TABLE {name} AS {select_sql}")
            finally:
                self.con.execute(f"SET disabled_optimizers = {_string(previous)}")
            self._stand_in_rows.add(name)
        return f"SELECT * FROM {name}"

    def probe(self, sql: str, stand_ins: Mapping[str, StandIn], *, bind_only: bool = False
              ) -> pd.DataFrame | None:
        """Run ``sql`` with each name of ``stand_ins`` bound to its relation of stand-in rows
        (a WITH around the statement), and return every row, or bind it only. Reads no
        private row: the caller replaced every private table by a stand-in. Raises
        :class:`~privplan.engines.base.ProbeFailed` with the engine's message."""
        ctes = ", ".join(f"{_quote(name)} AS ({stand_in.relation})"
                         for name, stand_in in stand_ins.items())
        text = f"WITH {ctes} SELECT * FROM ({sql}) AS __probe" if ctes else sql
        try:
            if bind_only:
                self.con.sql(text)
                return None
            return _frame(self.con.execute(text))  # (as run() reads an answer)
        except (duckdb.BinderException, duckdb.CatalogException, duckdb.ParserException) as err:
            raise ProbeFailed("bind", _first_line(err)) from None
        except duckdb.Error as err:
            raise ProbeFailed("run", _first_line(err)) from None


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _first_line(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _frame(result: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    return duckdb_frame(result)
