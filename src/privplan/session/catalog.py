"""A session's view of the engine's tables: their stored types, as the engine reads them.

Planning reads the schema, never a row (DESIGN.md invariant 2): each private table's column
types (kept per session, forgotten when a table is registered again or the engine reports a
changed schema), the table as the engine must read it (every column in its policy type,
:func:`~privplan.planning.typed_view.typed_view`), the columns of public tables the policy lists
without columns, and — for the pre-charge gate (:mod:`privplan.gate`) — the same reading over a
named relation of stand-in rows instead of the private table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from privplan.engines.data_files import missing_csv_columns
from privplan.engines.portable import check_portable, check_stored_types
from privplan.errors import PolicyError
from privplan.planning.typed_view import read_as_stored, typed_view
from privplan.policy import Policy

__all__ = ["PublicColumns", "SessionCatalog", "check_not_null", "stand_in_name"]


def stand_in_name(table: str) -> str:
    """The name under which the gate's probes read ``table``'s stand-in rows."""
    return f"__privplan_stand_in_{table}"


class SessionCatalog:
    """The stored types of the tables a session reads, and the typed readings of them."""

    def __init__(self, engine: Any, policy: Policy) -> None:
        self.engine, self.policy = engine, policy
        self.column_types: dict[str, dict[str, str]] = {}
        self._not_null_checked: set[str] = set()
        self._schema_not_null: dict[str, frozenset[str]] = {}
        self._public_schema: dict[str, set[str] | None] = {}  # (None: not in the engine)
        # per derived (per-unit) table: its view's SELECT over stand-in rows, and theirs
        self._derived: dict[str, tuple[str, dict[str, dict[str, str]]]] = {}

    def forget(self, table: str | None = None) -> None:
        """A table changed (registered again, a view redefined; None: any table): read its
        types and check its NOT NULL columns again when next used."""
        if table is None:
            self.column_types.clear()
            self._not_null_checked.clear()
            self._schema_not_null.clear()
        else:
            self.column_types.pop(table, None)
            self._not_null_checked.discard(table)
            self._schema_not_null.pop(table, None)
        self._public_schema.clear()

    def typed_table(self, table: Any) -> tuple[str, dict[str, str]]:
        """The policy table as the engine reads it, in the policy's column types (see
        :func:`typed_view`), and the engine type of each column."""
        table_sql = self.engine.table_sql(table)
        if table.name not in self.column_types:
            self.column_types[table.name] = self.engine.columns(table_sql)
        actual = self.column_types[table.name]
        missing = [c for c in table.columns if c not in actual]
        if missing:
            raise PolicyError(self._missing(table, actual, missing))
        check_stored_types(table.name, actual, table.columns, self.engine.dialect)
        view = typed_view(table_sql, table.columns, actual)
        if table.name not in self._not_null_checked:
            check_not_null(self.engine, table, view[0])
            self._not_null_checked.add(table.name)
        return view

    def _missing(self, table: Any, actual: dict[str, str], missing: list[str]) -> str:
        """The message for a table that lacks policy columns. A table read from a CSV file is
        described by the engine without the file's column names (without a header row they are
        its first row of data); another's names are its schema, shown."""
        described = getattr(self.engine, "missing_columns", None)
        message = described(table.name, list(table.columns), set(actual)) if described else None
        source = str(getattr(table, "source", None) or "")
        if message is None and source.lower().endswith(".csv"):  # (an engine that cannot say)
            message = missing_csv_columns(table.name, source, list(table.columns), set(actual),
                                          None)
        return message or (
            f"table '{table.name}' in the database has no column(s) {', '.join(missing)} "
            f"declared in the policy (it has {', '.join(actual)}). Why: privplan reads the "
            "table as the policy declares it, and cannot protect or bound a column it "
            "cannot find. Fix: correct the column's name under "
            f"tables.{table.name}.columns in the policy, or the data.")

    def check_portable(self, core: Any, types: dict[str, str]) -> None:
        """Refuse, before the charge, what a remote engine might compute differently from
        DuckDB (:func:`~privplan.engines.portable.check_portable`; nothing on DuckDB)."""
        check_portable(core, types, self.engine.dialect)

    def stand_in_view(self, table: Any, stand_ins: dict[str, dict[str, str]]) -> str:
        """The table as :meth:`typed_table` reads it, over a named relation of stand-in rows
        instead of the private table (the pre-charge gate's source): the relation's name and
        the columns' storage types are added to ``stand_ins``. A derived per-unit table is
        its view's SELECT over the base table's stand-ins (:meth:`derived`)."""
        actual = self.column_types[table.name]
        derived = self._derived.get(table.name)
        if derived is not None:
            source, tables = derived
            stand_ins.update(tables)
            return typed_view(f"({source})", table.columns, actual)[0]
        name = stand_in_name(table.name)
        stand_ins[name] = {c: actual[c] for c in table.columns}
        return typed_view('"' + name.replace('"', '""') + '"', table.columns, actual)[0]

    def derived(self, name: str, select_over_stand_ins: str,
                stand_ins: dict[str, dict[str, str]]) -> None:
        """Record a derived (per-unit) table the session defined in the engine: its view's
        SELECT over the base table's stand-ins (what the gate reads in its place)."""
        self._derived[name] = (select_over_stand_ins, stand_ins)
        self.column_types.pop(name, None)  # (its engine types, read afresh)
        self._schema_not_null.pop(name, None)

    def schema_not_null(self, table: Any) -> frozenset[str]:
        """The policy columns of ``table`` that cannot be NULL as privplan reads them: declared
        ``NOT NULL`` in the engine's schema and read as stored (see
        :func:`~privplan.planning.typed_view.read_as_stored`). The planner leaves NULL out of such a
        bool key's public domain. Why this is private-data-free: it is read from the catalog,
        never from rows, so two neighbouring tables under one schema get the same domain (an
        engine that reports no schema constraint gives the empty set: NULL stays in)."""
        found = self._schema_not_null.get(table.name)
        if found is None:
            reader = getattr(self.engine, "not_null_columns", None)
            found = frozenset()
            if reader is not None:
                try:
                    table_sql = self.engine.table_sql(table)
                    actual = self.column_types.get(table.name) or self.engine.columns(table_sql)
                    declared = reader(table_sql)
                except PolicyError:
                    declared, actual = set(), {}  # (a missing table is reported when read)
                found = frozenset(c for c, col in table.columns.items()
                                  if c in declared and c in actual
                                  and read_as_stored(col.type, actual[c]))
            self._schema_not_null[table.name] = found
        return found

    def public_columns(self) -> PublicColumns:
        """Columns of public tables the policy lists without columns, each read from the
        engine when planning first asks for it (:class:`PublicColumns`)."""
        return PublicColumns(self)

    def public_table_columns(self, name: str) -> set[str] | None:
        """The columns of the public table ``name`` the policy lists without columns, read
        from the engine once per session (until :meth:`forget`); None if the policy has no
        such table or the engine does not have it (reported if a query uses it)."""
        if name not in self._public_schema:
            found = None
            table = next((t for t in self.policy.public_tables()
                          if t.name == name and not t.columns), None)
            if table is not None:
                try:
                    found = set(self.engine.columns(self.engine.table_sql(table)))
                except PolicyError:
                    pass
            self._public_schema[name] = found
        return self._public_schema[name]


class PublicColumns:
    """The columns of the policy's public tables listed without columns, as planning asks for
    them (``.get(name, default)``): only the tables a query joins are described. A session on
    a connection the caller holds describes every table it plans over afresh (the caller may
    change the catalog), so describing every public table per query was ~0.4 ms each on
    DuckDB and a round trip each on PostgreSQL; a plan shared across sessions records each
    answer it read (:class:`~privplan.session.shared_plans.PlanReads`), so it is replayed on
    exactly the tables it depends on."""

    def __init__(self, catalog: SessionCatalog,
                 record: Callable[[str, frozenset[str] | None], None] | None = None) -> None:
        self._catalog, self._record = catalog, record  # (record: each answer, as planned)

    def __bool__(self) -> bool:
        return True

    def get(self, name: str, default: Any = None) -> Any:
        found = self._catalog.public_table_columns(name)
        if self._record is not None:
            self._record(name, None if found is None else frozenset(found))
        return default if found is None else found


def check_not_null(engine: Any, table: Any, view_sql: str) -> None:
    """Refuse a table whose data contradicts a ``nullable: false`` declaration.

    Why it is safe to read the data here: ``nullable: false`` makes "this column has no NULL"
    part of the public policy (the planner then counts COUNT(col) as COUNT(*), one mechanism
    instead of two). The check runs once per table and session, before anything is charged,
    and the same for every query, so all it can reveal is that the data owner's declaration is
    false; a table that contradicts it answers no query at all. (Were NULLs to appear later,
    AVG would only be biased: sensitivities do not depend on it.)
    """
    strict = [c for c, col in table.columns.items() if not col.nullable]
    if not strict:
        return
    bad = engine.null_columns(view_sql, strict)
    if bad:
        cols = ", ".join(bad)
        raise PolicyError(
            f"table '{table.name}': column(s) {cols} are declared `nullable: false` but hold "
            f"NULLs (or values that do not convert to the declared type). Why: the "
            f"declaration lets privplan count COUNT({bad[0]}) as COUNT(*), which NULLs "
            f"would make wrong. Fix the data, or remove `nullable: false` from "
            f"tables.{table.name}.columns.{bad[0]}. Nothing was charged.")
