"""The Spark engine: privplan's engine statements run on the user's own ``SparkSession``.

Statements arrive in DuckDB's dialect (the contract of :mod:`privplan.engines.base`) and are
rendered for Spark by :func:`privplan.engines.render.render`; this module only moves statements
and rows. pyspark is an optional extra: it is imported here, and this module is imported only
when a Spark engine is made (``import privplan`` loads no pyspark).

Results keep DuckDB's types. Spark's own result types differ from DuckDB's for the same
statement (``ROW_NUMBER()`` is an INT, ``FLOOR`` of a double a BIGINT, ``SUM`` of a BIGINT a
BIGINT, ``SUM`` of a DECIMAL another precision), so every statement is also bound by DuckDB over
empty tables shaped like the Spark tables and views it reads (the *shadow*,
:class:`privplan.engines.shadow.Shadow`): :meth:`SparkEngine.bind` returns that binding, and the
rows come back as Arrow (``DataFrame.toArrow()``), are cast to those types and converted to
pandas by a private, in-process DuckDB connection (no table of the user's is ever visible
there). The pandas dtypes (NULLs, int64 against float64, datetime units and time zones,
strings, decimals) are then DuckDB's own conversion, the same as
:class:`~privplan.engines.duckdb_engine.DuckDBEngine` gives for the same statement. (A statement
DuckDB cannot bind keeps the DuckDB names of Spark's types.)

Three of the session's settings change what a statement computes, so they are pinned while
privplan's statements are analysed and run, and restored right after (the user's session is
left as it was):

* ``spark.sql.session.timeZone``: Spark's ``TIMESTAMP`` is an instant, and casts between
  instants and dates or text (and timestamp literals) use the session time zone; it is pinned
  to the time zone a fresh DuckDB connection uses, the reference's;
* ``spark.sql.ansi.enabled``: pinned on (Spark 4's default), so a cast that fails or an
  overflow raises as in DuckDB instead of becoming NULL;
* ``spark.sql.inMemoryColumnarStorage.partitionPruning``: pinned off. Over a cached relation
  (the session copy, or a table the user cached) Spark skips cached batches by their
  columns' min/max, and those bounds leave NaN out: ``x > 1e308`` skipped a batch whose only
  row above 1e308 was NaN (greater than every number in Spark's comparisons, as in DuckDB's),
  so the count missed it (found by the session edge-value tests; Parquet and ORC pushdown
  count NaN rows correctly).

Relations privplan makes (registered frames, per-unit views, the session copy, public domain
lists) are temporary views of the session; :meth:`SparkEngine.close` drops them and unpersists
the cached copies, and never stops the session (it is the user's).
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import duckdb
import pandas as pd

from privplan.engines import spark_probe
from privplan.engines.base import (
    COPY_FAILED,
    RUN_FAILED,
    SchemaChanged,
    StandIn,
    Values,
)
from privplan.engines.frames import duckdb_frame
from privplan.engines.render import render
from privplan.engines.shadow import Shadow
from privplan.engines.shadow import quote as _quote
from privplan.engines.spark_lock import alive, session_lock
from privplan.engines.spark_types import WIDER, castable, duckdb_type, field_type, spark_type
from privplan.errors import (
    EngineUnavailableError,
    ExecutionError,
    PolicyError,
    UnsupportedQueryError,
)

_BOUND_KEPT = 64  # statements bind() keeps analysed for run() (a query binds a few, then runs)
_WITHHELD = ("the engine's message is withheld because it could quote private values.")
_GONE = ("the Spark session is gone: it was stopped, or its JVM died (killed, out of memory). "
         "Nothing was charged for this query. Make a new SparkSession and open a new privplan "
         "session over it (the ledger keeps what was spent).")


def _backquote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class SparkEngine:
    """Runs privplan's engine statements on a ``pyspark.sql.SparkSession`` the user made.

    privplan never stops the session; :meth:`close` drops only the views privplan made."""

    dialect = "spark"

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        # the converter: Arrow in, DuckDB's pandas / Python values out (never sees a user table)
        self._con = duckdb.connect(":memory:")
        self._con.execute("SET python_enable_replacements = false")
        # DuckDB's binding of each statement over empty tables shaped like Spark's
        self._shadow = Shadow(self._shadow_columns)
        self._settings_key: str | None = None  # (spark_probe._settings_key)
        self._stand_in_shapes: dict[str, dict[str, str]] = {}  # quoted name -> columns
        (self._time_zone,) = self._con.execute(
            "SELECT current_setting('TimeZone')").fetchall()[0]
        self._token = uuid.uuid4().hex[:8]  # (two engines on one session keep apart)
        self._registered: dict[str, str] = {}  # lower-case name -> the view's name
        self._views: set[str] = set()  # views create_view made
        self._materialized: dict[str, Any] = {}  # view name -> its cached DataFrame
        self._domains: dict[tuple[tuple[type, ...], tuple[Any, ...]], str] = {}
        self._sources: set[str] = set()  # views holding the policy's `source:` expressions
        self._described: dict[str, str] = {}  # table_sql -> its schema when described (JSON)
        # statement -> (generation, its analysed frame, its typed columns) from the last bind
        self._bound: dict[str, tuple[int, Any, list[tuple[str, str]]]] = {}
        # moves with every change to what the engine exposes (plans are cached under it)
        self.generation = 0

    # -- the session's settings ----------------------------------------------------------------
    @contextlib.contextmanager
    def _pinned(self) -> Iterator[None]:
        """Analyse and run with DuckDB's time zone, ANSI mode on and no pruning of cached
        batches by their NaN-blind bounds (see the module doc),
        restoring the user's values afterwards. (Spark's own FutureWarning about pandas
        versions concerns pyspark's pandas conversion, which privplan does not use.)

        Every call into Spark goes through here, so this is also where a session that is gone
        (stopped, or its JVM dead) is told apart from a statement Spark refuses: checked
        first, and again when anything fails inside, it raises EngineUnavailableError."""
        pins = {"spark.sql.session.timeZone": self._time_zone, "spark.sql.ansi.enabled": "true",
                "spark.sql.inMemoryColumnarStorage.partitionPruning": "false"}
        # (one pinned block at a time per SparkSession: privplan.engines.spark_lock)
        with session_lock(self.spark), self._unless_gone():
            conf = self.spark.conf
            saved = {key: conf.get(key, None) for key in pins}
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="PySpark does not yet fully support",
                                        category=FutureWarning)
                try:
                    for key, value in pins.items():
                        if saved[key] != value:
                            conf.set(key, value)
                    yield
                finally:
                    try:
                        for key, value in saved.items():
                            if value != pins[key]:
                                if value is None:
                                    conf.unset(key)
                                else:
                                    conf.set(key, value)
                    except Exception:
                        if self._alive():
                            raise  # (a session that is gone has no settings left to restore)

    def _alive(self) -> bool:
        """Whether the SparkSession can still analyse and run statements
        (:func:`privplan.engines.spark_lock.alive`)."""
        return alive(self.spark, self._errors())

    @contextlib.contextmanager
    def _unless_gone(self) -> Iterator[None]:
        """EngineUnavailableError, before anything runs, for a session that is gone, and for
        any failure inside the block once the session is gone (a stopped context fails with
        an AttributeError, a dead JVM with a ConnectionRefusedError: not Spark's errors)."""
        if not self._alive():
            raise EngineUnavailableError(_GONE)
        try:
            yield
        except EngineUnavailableError:
            raise
        except Exception:
            if not self._alive():
                raise EngineUnavailableError(_GONE) from None
            raise

    @contextlib.contextmanager
    def _reworded(self, what: str) -> Iterator[None]:
        """Spark's (or the renderer's) error, shown as ``what: <its first line>``, for the two
        places whose errors quote no private value: defining a view (analysis only, no row
        is read) and reading public tables."""
        try:
            yield
        except UnsupportedQueryError as err:
            raise UnsupportedQueryError(
                f"{what}: {str(err).removeprefix('the engine rejected the query: ')}") from None
        except self._errors() as err:
            raise UnsupportedQueryError(f"{what}: {_first_line(err)}") from None

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Keep pyspark from logging a failure's message while rows are read: pyspark writes
        every captured Spark error, with its message (a failed cast quotes the value), to its
        own stderr loggers, and such a message is exactly what :meth:`run` withholds."""
        from pyspark.logger import PySparkLogger

        loggers = [PySparkLogger.getLogger(name)
                   for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
        saved = [logger.disabled for logger in loggers]
        for logger in loggers:
            logger.disabled = True
        try:
            yield
        finally:
            for logger, disabled in zip(loggers, saved):
                logger.disabled = disabled

    def _errors(self) -> tuple[type[BaseException], ...]:
        """What Spark raises (an analysis, parse or runtime error, or a raw gateway error)."""
        import importlib

        from pyspark.errors import PySparkException

        gateway: type[BaseException] = importlib.import_module("py4j.protocol").Py4JError
        return (PySparkException, gateway, duckdb.Error)

    def _frame(self, sql: str) -> Any:
        """The analysed Spark DataFrame of a DuckDB-dialect statement (no job runs).
        UnsupportedQueryError if render or Spark rejects it (no data involved)."""
        import sqlglot

        try:
            rendered = render(sql, self.dialect)
        except sqlglot.errors.SqlglotError as err:
            raise UnsupportedQueryError(
                f"the query cannot be written for Spark: {_first_line(err)}") from None
        try:
            return self.spark.sql(rendered)
        except self._errors() as err:
            raise UnsupportedQueryError(
                f"the engine rejected the query: {_first_line(err)}. Check column types "
                "against the policy (e.g. comparing a number with a string).") from None

    def _typed(self, sql: str, frame: Any) -> list[tuple[str, str]]:
        """The statement's (column, DuckDB type) pairs: DuckDB's own binding over the shadow
        where it has as many columns as Spark's, else the DuckDB names of Spark's types."""
        fields = frame.schema.fields
        types = self._shadow.types(sql)
        if types is not None and len(types) == len(fields):
            return types
        return [(f.name, duckdb_type(f.dataType)) for f in fields]

    def _arrow(self, sql: str, frame: Any, typed: list[tuple[str, str]] | None = None) -> Any:
        """The rows of ``frame`` (the analysed ``sql``; ``typed``: its :meth:`_typed`, if known)
        as a DuckDB relation over their Arrow transfer, each column cast to the statement's
        DuckDB type (instants travel as UTC instants; a type DuckDB cannot name as it comes)."""
        typed = self._typed(sql, frame) if typed is None else typed
        table = frame.toArrow()
        table = table.rename_columns([f"c{i}" for i in range(table.num_columns)])
        relation = self._con.from_arrow(table)
        items = []
        for i, (name, duck_type) in enumerate(typed):
            target = castable(duck_type)
            items.append(f"c{i} AS {_quote(name)}" if target is None
                         else f"CAST(c{i} AS {target}) AS {_quote(name)}")
        return relation.project(", ".join(items)) if items else relation

    # -- tables ------------------------------------------------------------------------------
    def table_sql(self, table: Any) -> str:
        """How the engine names the policy table: a frame registered under its name, a
        CSV / Parquet ``source`` (read into a temporary view), another ``source`` (a view of
        its own, :meth:`_source_view`), ``"database"."name"`` when the policy gives a schema
        (a Spark database), or ``"name"``. A table described before is checked to have the
        same schema (SchemaChanged: the session's column types of it are stale)."""
        out = self._name(table)
        if out in self._described:
            with self._pinned():
                self._check_described([out])
        return out

    def _name(self, table: Any) -> str:
        name = table.name
        if name.lower() in self._registered:
            return _quote(self._registered[name.lower()])
        source = getattr(table, "source", None)
        if source:
            if source.lower().endswith((".csv", ".parquet")):
                self._register_file(name, source)
                return _quote(name)
            return self._source_view(name, str(source))
        schema = getattr(table, "schema", None)
        if schema:
            with self._unless_gone():
                exists = self.spark.catalog.tableExists(f"{_backquote(schema)}.{_backquote(name)}")
            if exists:
                return f"{_quote(schema)}.{_quote(name)}"
        return _quote(name)  # (as the DuckDB engine: a schema the catalog lacks is ignored)

    def _source_view(self, name: str, source: str) -> str:
        """The policy's ``source:`` expression (DuckDB dialect, as every statement) as a
        temporary view defined under the user's own settings, not privplan's pins: Spark keeps
        a SQL view's settings from its definition, so a CAST in the owner's expression fails
        or gives NULL as it does for the owner (ANSI mode), and reads times in the owner's time
        zone, as in the owner's own views. (Read inline, it would be analysed with ANSI mode
        pinned on, and fail on rows where the owner's setting gives NULL.) The view is
        analysed only: its errors quote no row."""
        import sqlglot

        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        view = f"__privplan_source_{self._token}_{digest}"
        if view not in self._sources:
            try:
                text = render(f"SELECT * FROM {source} AS __source", self.dialect)
                with self._unless_gone():
                    self.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {_backquote(view)} AS "
                                   + text)
            except (sqlglot.errors.SqlglotError, UnsupportedQueryError) + self._errors() as err:
                raise PolicyError(
                    f"table {name}: its `source:` ({source[:80]}) cannot be read by Spark "
                    f"({_first_line(err)}). Fix the expression in the policy.") from None
            self._sources.add(view)
        return _quote(view)

    def _register_file(self, name: str, path: str) -> None:
        """A CSV file (header row, every column read as text, as the DuckDB engine reads it:
        the typed view converts) or a Parquet file, as the temporary view ``name``."""
        reader = self.spark.read
        try:
            with self._pinned():
                frame = (reader.csv(path, header=True, inferSchema=False)
                         if path.lower().endswith(".csv") else reader.parquet(path))
                frame.createOrReplaceTempView(name)
        except self._errors():  # (the message may quote lines of the file: withheld)
            raise PolicyError(
                f"cannot register '{name}' from '{path}': Spark could not read it. Check the "
                "file (a path Spark's executors can read).") from None
        self._registered[name.lower()] = name
        self._changed(name)

    def columns(self, table_sql: str) -> dict[str, str]:
        """Column (lower case) -> DuckDB type name, from the analysed schema (no job runs). The
        schema of a table the user owns is kept, to be checked again at every bind."""
        try:
            with self._pinned():
                frame = self._frame(f"SELECT * FROM {table_sql}")
                if not self._privplans(table_sql):
                    self._described[table_sql] = frame.schema.json()
        except UnsupportedQueryError as err:
            raise PolicyError(
                f"table {table_sql} is declared in the policy but the database has no such "
                f"table ({str(err).removeprefix('the engine rejected the query: ')}). Create it, "
                "set `source:` in the policy, or call session.register(name, dataframe)."
            ) from None
        return {f.name.lower(): field_type(f) for f in frame.schema.fields}

    def null_columns(self, table_sql: str, columns: list[str]) -> list[str]:
        """Which of ``columns`` hold a NULL (one scan; see ``Session._check_not_null``)."""
        if not columns:
            return []
        items = ", ".join(f"bool_or({_quote(c)} IS NULL)" for c in columns)
        sql = f"SELECT {items} FROM {table_sql}"
        try:
            with self._pinned(), self._quiet():
                rows = self._arrow(sql, self._frame(sql)).fetchall()
        except (UnsupportedQueryError,) + self._errors():
            raise ExecutionError(
                "the engine failed while checking `nullable: false` columns for NULLs; "
                + _WITHHELD) from None
        return [c for c, has in zip(columns, rows[0] if rows else ()) if has]

    def register(self, name: str, data: Any) -> None:
        """Expose a pandas DataFrame or an Arrow table as the temporary view ``name``.

        The frame is read by DuckDB first, so its columns take the types DuckDB infers for it
        (int64 BIGINT, float64 DOUBLE, str VARCHAR, bool BOOLEAN, datetime64 TIMESTAMP,
        tz-aware TIMESTAMP WITH TIME ZONE, date objects DATE; a float NaN in pandas is NULL, as
        in DuckDB) and its values go to Spark as Arrow in those types."""
        module = type(data).__module__.split(".")[0]
        if isinstance(data, pd.DataFrame):
            relation = self._con.from_df(data)
        elif module == "pyarrow" and type(data).__name__ in ("Table", "RecordBatch"):
            relation = self._con.from_arrow(data)
        else:
            raise PolicyError(
                f"register('{name}', ...) with a Spark engine takes a pandas DataFrame or an "
                f"Arrow table, got {type(data).__name__} (a Spark table is read by its name: "
                "declare it in the policy)")
        from pyspark.sql import types as T

        types = [WIDER.get(str(t), str(t)) for t in relation.types]
        schema = T.StructType([T.StructField(c, spark_type(t), True)
                               for c, t in zip(relation.columns, types)])
        table = relation.project(", ".join(
            f"CAST({_quote(c)} AS {t}) AS {_quote(c)}" for c, t in zip(relation.columns, types))
        ).to_arrow_table()
        try:
            with self._pinned():
                self.spark.createDataFrame(table, schema=schema).createOrReplaceTempView(name)
        except self._errors() as err:
            raise PolicyError(f"cannot register '{name}': {_first_line(err)}") from None
        self._registered[name.lower()] = name
        self._changed(name)

    def _changed(self, name: str) -> None:
        """The table ``name`` changed: plans move on, its shadow and the session copies made
        from it are stale (privplan changed it: the session knows, nothing to check)."""
        self.generation += 1
        self._described.pop(_quote(name), None)
        self._shadow.forget(name)
        self._drop_materialized()

    def _privplans(self, table_sql: str) -> bool:
        """Whether ``table_sql`` names a relation privplan made from the policy tables (a
        per-unit view, a session copy, a public domain): it changes only through privplan."""
        made = {*self._views, *self._materialized, *self._domains.values()}
        return table_sql.strip('"') in made

    def _check_described(self, tables: list[str] | None = None) -> None:
        """Raise SchemaChanged (before the charge) if a table described before has another
        schema now, or is gone: a temporary view redefined after planning (a column's type
        changed) must not be read with the old types, whose conversions and comparisons
        (ANSI mode) could then fail on some rows after the charge. The engine moves on (a
        new generation: the cached plans are not reused; the shadow and the session copies
        are dropped) and the session plans the query again, describing the tables afresh.
        One analysis per table (``tables``, or every table described), no job."""
        changed = []
        for table_sql in list(self._described) if tables is None else tables:
            seen = self._described[table_sql]
            try:
                now = self._frame(f"SELECT * FROM {table_sql}").schema.json()
            except UnsupportedQueryError:
                now = None  # (gone: planning again reports it)
            if now != seen:
                changed.append(table_sql)
                del self._described[table_sql]
        if changed:
            self.generation += 1
            self._shadow.forget_all()
            self._drop_materialized()
            raise SchemaChanged(
                f"table {', '.join(changed)} changed since this session described it (a "
                "column's type, or the table itself); the query must be planned again over "
                "the table as it is now. Nothing was charged.")

    def create_view(self, name: str, select_sql: str) -> None:
        """Define (or redefine) the temporary view ``name`` as ``select_sql`` (a per-unit
        pre-aggregation privplan built). Analysis reads no row, so its errors are shown."""
        self.generation += 1
        # (a derived table's name, "t/per-unit/<hash>", is not a valid Spark view name: the
        # view gets one of its own, and table_sql names it)
        view = name if name.replace("_", "").isalnum() else (
            "__privplan_view_" + hashlib.sha256(name.encode()).hexdigest()[:16])
        with self._reworded("the engine rejected the per-unit subquery"), self._pinned():
            self._frame(select_sql).createOrReplaceTempView(view)
        self._views.add(view)
        self._registered[name.lower()] = view
        self._shadow.forget(view)

    # -- statements --------------------------------------------------------------------------
    def bind(self, sql: str) -> list[tuple[str, str]]:
        """Analyse the statement without running it (``spark.sql`` analyses and runs no job):
        every error about names and types, before any charge, and its (column, DuckDB type)
        pairs, DuckDB's binding over the shadow where it can make it. (Spark folds failing
        constant expressions in its optimizer, at run time, as DuckDB does.)

        Every bind comes before a charge (a cached plan's too), so it is where the session is
        checked to be alive (EngineUnavailableError) and the tables described before to be
        unchanged (SchemaChanged, see :meth:`_check_described`)."""
        with self._pinned():
            self._check_described()
            frame = self._frame(sql)
            typed = self._typed(sql, frame)
        if len(self._bound) >= _BOUND_KEPT:
            self._bound.clear()
        self._bound[sql] = (self.generation, frame, typed)
        return typed

    def run(self, sql: str) -> pd.DataFrame:
        """Run an engine statement: one row per group, with the dtypes the DuckDB engine gives.
        A failure while reading rows may quote a raw value (a failed cast), so its message is
        withheld, and so is its class (a NumberFormatException is a bit about the rows).
        Runs the frame :meth:`bind` analysed if nothing changed since (same generation): the
        plan checked before the charge, same pins, no second analysis (~30 ms on 2 cores)."""
        bound = self._bound.pop(sql, None)
        try:
            with self._pinned(), self._quiet():
                if bound is not None and bound[0] == self.generation:
                    return duckdb_frame(self._arrow(sql, bound[1], bound[2]))
                return duckdb_frame(self._arrow(sql, self._frame(sql)))
        except (EngineUnavailableError,) + self._errors():  # (gone while running: the same)
            raise ExecutionError(RUN_FAILED) from None

    def fetch_public(self, sql: str) -> list[tuple[Any, ...]]:
        """Run a query over PUBLIC tables only; its rows as DuckDB's ``fetchall`` gives them,
        and its errors shown (public data is not protected)."""
        with self._reworded("a query over the public table failed"), self._pinned():
            return self._arrow(sql, self._frame(sql)).fetchall()

    # -- the session's relations ---------------------------------------------------------------
    def materialized(self, select_sql: str) -> str | None:
        """The view :meth:`materialize` made for ``select_sql``, or None if not made yet."""
        name = _materialized_name(select_sql, self._token)
        return _quote(name) if name in self._materialized else None

    def materialize(self, select_sql: str) -> str:
        """A cached temporary view holding ``select_sql``'s rows, made once per distinct
        statement (the session copy of a private table: a deterministic function of the data
        and the policy, reused by every later query; the session calls this only after the
        query is charged). The cache is filled here, so a failure surfaces here, withheld."""
        name = _materialized_name(select_sql, self._token)
        if name not in self._materialized:
            try:
                with self._pinned(), self._quiet():
                    frame = self._frame(select_sql).cache()
                    try:
                        frame.count()  # (fills the cache: every row is computed once, now)
                    except BaseException:
                        frame.unpersist()
                        raise
                    frame.createOrReplaceTempView(name)
            except (UnsupportedQueryError, EngineUnavailableError) + self._errors():
                raise ExecutionError(COPY_FAILED) from None
            self._materialized[name] = frame
            self._shadow.forget(name)
            self.generation += 1
        return _quote(name)

    def domain_table(self, values: list[Any]) -> str:
        """A temporary view (one column ``x``) holding ``values``: a long public group-key
        domain (all strings, or all integers within BIGINT), made once per distinct list. The
        values are typed by DuckDB's own conversion of the Python list (as the DuckDB engine
        types them) and go to Spark as Arrow. Public values only: no row is read."""
        key = (tuple(map(type, values)), tuple(values))  # (1 and True are equal keys)
        name = self._domains.get(key)
        if name is None:
            name = f"__privplan_domain_{self._token}_{len(self._domains)}"
            relation = self._con.sql("SELECT unnest($1) AS x", params=[values])
            table = relation.to_arrow_table()
            duck_type = str(relation.types[0])
            from pyspark.sql import types as T

            schema = T.StructType([T.StructField("x", spark_type(duck_type), True)])
            with self._pinned():
                self.spark.createDataFrame(table, schema=schema).createOrReplaceTempView(name)
            self._domains[key] = name
        return _quote(name)

    def forget_durable(self) -> None:
        """Nothing to forget: a Spark engine keeps no durable copies."""

    def _drop_materialized(self) -> None:
        for name, frame in list(self._materialized.items()):
            self._drop_view(name)
            self._shadow.forget(name)
            with contextlib.suppress(*self._errors()):
                frame.unpersist()
        self._materialized.clear()

    def _drop_view(self, name: str) -> None:
        with contextlib.suppress(*self._errors()):  # (the session may be stopped by its owner)
            self.spark.catalog.dropTempView(name)

    # -- the pre-charge gate's stand-in rows (privplan.gate) ---------------------------------
    def _shadow_columns(self, table_sql: str) -> dict[str, str]:
        """The shadow's view of a table: a stand-in relation's columns, or the table's."""
        shape = self._stand_in_shapes.get(table_sql)
        return dict(shape) if shape is not None else self.columns(table_sql)

    def stand_in_values(self, storage_type: str) -> Values:
        """The edge values a column of ``storage_type`` can store, for the pre-charge gate
        (:func:`privplan.engines.spark_probe.stand_in_values`)."""
        return spark_probe.stand_in_values(self, storage_type)

    def stand_in_rows(self, select_sql: str) -> str:
        """The gate's stand-in rows of a table's column types, held by Spark once
        (:func:`privplan.engines.spark_probe.stand_in_rows`)."""
        return spark_probe.stand_in_rows(self, select_sql)

    def probe(self, sql: str, stand_ins: Mapping[str, StandIn], *, bind_only: bool = False
              ) -> pd.DataFrame | None:
        """``sql`` over stand-in rows, for the pre-charge gate
        (:func:`privplan.engines.spark_probe.probe`)."""
        return spark_probe.probe(self, sql, stand_ins, bind_only=bind_only)

    def close(self) -> None:
        """Drop every view privplan made and unpersist its cached copies; the SparkSession
        stays running (it is the user's), with its settings as they were. (A session that is
        gone has nothing left to drop.)"""
        if self._alive():
            self._drop_materialized()
            for name in [*self._domains.values(), *self._views, *self._registered.values(),
                         *self._sources]:
                self._drop_view(name)
        self._materialized.clear()
        self._bound.clear()
        self._sources.clear()
        self._described.clear()
        self._domains.clear()
        self._views.clear()
        self._registered.clear()
        self.generation += 1
        with contextlib.suppress(duckdb.Error):
            self._con.close()
        with contextlib.suppress(duckdb.Error):
            self._shadow.close()


def _materialized_name(select_sql: str, token: str) -> str:  # (the engine's own: see _token)
    return f"__privplan_{token}_" + hashlib.sha256(select_sql.encode()).hexdigest()[:16]
