"""The post-processing connection: the outer query runs here, over noisy tables only.

HAVING, ORDER BY, LIMIT, expressions over the noisy answer and the outer query over DP
subqueries never run on an engine holding data: they run on one private in-memory DuckDB
connection per process, locked down (no Python variables, no files, no network, no extensions,
no way to switch those back), which holds nothing but the noisy tables registered for one
statement. Its failures concern noisy values only, so their messages may be shown.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from privplan.engines.duckdb_engine import _frame, _quote, _secure
from privplan.errors import PostProcessingError


def _noisy_only(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Lock down the post-processing connection: no Python variables, no files, no network,
    no extensions, and no way for a statement to switch those back (the outer query is the
    user's SQL; it may read the noisy tables registered for it and nothing else)."""
    _secure(con)
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con



def _sample_item(value: str | None, column_type: str, name: str) -> str:
    """One stand-in column: the value cast to the column's type, or NULL where it does not
    fit (the extremes of a narrower integer or decimal type)."""
    quoted = _quote(name)
    if value is None:
        return f"CAST(NULL AS {column_type}) AS {quoted}"
    return f"COALESCE(TRY_CAST({value} AS {column_type}), CAST(NULL AS {column_type})) AS {quoted}"



class PostProcessor:
    """Runs post-processing SQL on a private in-memory connection that holds nothing but the
    noisy tables registered for one statement (unregistered right after), so the outer query
    can never reach the engine's data. One connection is reused: opening one costs ~50 ms."""

    def __init__(self) -> None:
        self.con = _noisy_only(duckdb.connect(":memory:"))
        self._samples: dict[tuple[tuple[tuple[str, str], ...], int], pd.DataFrame] = {}

    def run(self, sql: str, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
        """Run the outer query over the noisy tables. Its failures concern noisy values only
        (post-processing of DP outputs), so the engine's message may be shown."""
        for name, df in tables.items():
            self.con.register(name, df)
        try:
            return _frame(self.con.execute(sql))
        except duckdb.Error as err:
            # a failure while the result is fetched (e.g. a DATE 'infinity' that pandas cannot
            # hold) leaves the connection busy with that result: start a fresh one, so the
            # error reported is the query's, and the next statement finds a clean connection
            self._reset()
            raise PostProcessingError(
                f"the outer query (HAVING, ORDER BY, LIMIT, expressions) failed over the noisy "
                f"answers: {str(err).splitlines()[0]}") from None
        finally:
            for name in tables:
                try:
                    self.con.unregister(name)
                except duckdb.Error:
                    self._reset()

    def binds(self, sql: str, tables: dict[str, pd.DataFrame]) -> bool:
        """Whether ``sql`` binds over these tables (names and types; nothing is evaluated)."""
        for name, df in tables.items():
            self.con.register(name, df)
        try:
            self.con.sql(sql)
            return True
        except duckdb.Error:
            return False
        finally:
            for name in tables:
                try:
                    self.con.unregister(name)
                except duckdb.Error:
                    self._reset()

    def _reset(self) -> None:
        try:
            self.con.close()
        except duckdb.Error:
            pass
        self.con = _noisy_only(duckdb.connect(":memory:"))

    SAMPLE_VARIANTS = 8

    # a stand-in value per type family and variant: 0 / '' first, then a text that reads as a
    # number, both signs, each type's extremes, NULL (noise can take a count anywhere, a sum to
    # infinity; keys are any value of their type)
    _VARIANTS: tuple[dict[str, str], ...] = (
        {"int": "0", "float": "0", "decimal": "0", "str": "''", "bool": "FALSE",
         "date": "DATE '2000-01-01'", "timestamp": "TIMESTAMP '2000-01-01'",
         "interval": "INTERVAL 1 DAY"},
        {"int": "0", "float": "0", "decimal": "0", "str": "'1'", "bool": "FALSE",
         "date": "DATE '2000-01-01'", "timestamp": "TIMESTAMP '2000-01-01'",
         "interval": "INTERVAL 1 DAY"},
        {"int": "1", "float": "1.5", "decimal": "1", "str": "'a'", "bool": "TRUE",
         "date": "DATE '1970-01-01'", "timestamp": "TIMESTAMP '1970-01-01 00:00:01'",
         "interval": "INTERVAL 1 SECOND"},
        {"int": "-1", "float": "-1.5", "decimal": "-1", "str": "'A'", "bool": "TRUE",
         "date": "DATE '1969-12-31'", "timestamp": "TIMESTAMP '1969-12-31 23:59:59'",
         "interval": "-INTERVAL 1 DAY"},
        {"int": "9223372036854775807", "float": "1e308", "decimal": "1e15",
         "str": "'9223372036854775807'", "bool": "TRUE", "date": "DATE '9999-12-31'",
         "timestamp": "TIMESTAMP '9999-12-31 23:59:59.999999'",
         "interval": "INTERVAL 10000 YEAR"},
        {"int": "-9223372036854775808", "float": "-1e308", "decimal": "-1e15",
         "str": "'-1.5e10'", "bool": "FALSE", "date": "DATE '0001-01-01'",
         "timestamp": "TIMESTAMP '0001-01-01 00:00:00'", "interval": "-INTERVAL 10000 YEAR"},
        {"int": "NULL", "float": "NULL", "decimal": "NULL", "str": "NULL", "bool": "NULL",
         "date": "NULL", "timestamp": "NULL", "interval": "NULL"},
        {"int": "2", "float": "'inf'", "decimal": "2", "str": "'true'", "bool": "TRUE",
         "date": "DATE '2020-02-29'", "timestamp": "TIMESTAMP '2020-02-29 12:00:00'",
         "interval": "INTERVAL 1 MONTH"},
    )

    def sample(self, columns: list[tuple[str, str]], variant: int = 0) -> pd.DataFrame:
        """A one-row frame with these (name, DuckDB type) columns, as a query result of
        those types converts to pandas: the stand-in for an engine answer when the outer query
        is checked before the charge (:mod:`privplan.gate.outer`). Variant 0 holds 0, '',
        FALSE, 2000-01-01; variant 1 the string '1' (a text key holding digits, compared with a
        number in HAVING, converts: SmartNoise's PUMS metadata types ``sex`` as a string); the
        others both signs, each type's extremes, NULL, infinity (``_VARIANTS``)."""
        from privplan.sql.totality import family

        key = (tuple(columns), variant)
        if key not in self._samples:
            rows = []
            for values in (self._VARIANTS[variant], self._VARIANTS[2]):
                rows.append("SELECT " + ", ".join(_sample_item(values.get(family(t)), t, n)
                                                  for n, t in columns))
            if len(self._samples) > 256:
                self._samples.clear()
            # converted beside a row of values that are not NULL, then cut to the stand-in: a
            # column of NULL alone would come back as an untyped object column, which DuckDB
            # reads as type NULL, comparable with anything — a stand-in answer no real answer
            # can be (a VARCHAR key compared with an integer binds over it)
            frame = _frame(self.con.execute(" UNION ALL ".join(rows)))
            self._samples[key] = frame.iloc[:1].reset_index(drop=True)
        return self._samples[key].copy()

    def close(self) -> None:
        self.con.close()


_POST: PostProcessor | None = None


def post_processor() -> PostProcessor:
    """The process's noisy-only connection (see :class:`PostProcessor`)."""
    global _POST
    if _POST is None:
        _POST = PostProcessor()
    return _POST


def post_process(sql: str, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Post-process on the shared noisy-only connection (see :class:`PostProcessor`)."""
    return post_processor().run(sql, tables)
