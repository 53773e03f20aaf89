"""pg_catalog reflection answered free from the policy's metadata (privplan.server.catalog):
psql's \\dt and \\d, what is a catalog query and what is not, and the replica holds no row."""

from __future__ import annotations

import pytest

from privplan.server.catalog import CatalogSandbox, is_catalog_query
from privplan.server.sqlstate import ClientError
from tests.server.conftest import Running
from tests.server.test_clients import connect, psql

PRIVATE = {"visits", "hospitals"}


def test_psql_dt_lists_the_policys_tables_free(running: Running) -> None:
    before = running.spent()
    done = psql(running, "\\dt")
    assert done.returncode == 0, done.stderr
    rows = [line.split("|") for line in done.stdout.split()]
    assert [(r[1], r[2]) for r in rows] == [("hospitals", "table"), ("visits", "table")]
    assert running.spent() == before


def test_psql_d_visits_lists_its_columns_and_types(running: Running) -> None:
    before = running.spent()
    done = psql(running, "\\d visits")
    assert done.returncode == 0, done.stderr
    columns = {line.split("|")[0]: line.split("|")[1] for line in done.stdout.splitlines()
               if line.count("|") >= 4}
    assert columns == {
        "visit_id": "bigint", "patient_id": "bigint", "hospital": "character varying",
        "department": "character varying", "visit_date": "date", "age": "bigint",
        "sex": "character varying", "cost": "double precision", "length_of_stay": "bigint",
        "insured": "boolean"}
    assert running.spent() == before


@pytest.mark.parametrize("sql", [
    "SELECT relname FROM pg_catalog.pg_class",
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace",
    "WITH t AS (SELECT oid FROM pg_catalog.pg_type) SELECT * FROM t",
    "SELECT * FROM pg_catalog.pg_attribute a, pg_catalog.generate_series(1, 2) s",
    ("SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(v)$' "
     "COLLATE pg_catalog.default"),
])
def test_catalog_queries(sql: str) -> None:
    assert is_catalog_query(sql, PRIVATE)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM pg_catalog.pg_class, visits",
    "SELECT * FROM pg_catalog.pg_class WHERE EXISTS (SELECT 1 FROM visits)",
    "SELECT relname FROM pg_catalog.pg_class UNION ALL SELECT hospital FROM visits",
    "SELECT * FROM main.visits JOIN pg_catalog.pg_class ON true",
    "WITH visits AS (SELECT 1) SELECT * FROM visits, pg_catalog.pg_class",
    "SELECT COUNT(*) FROM visits",
    "SELECT * FROM pg_visits_copy",  # (a bare pg_ name the policy uses would be its table)
    "SELECT * FROM other.pg_class",
    "DELETE FROM pg_catalog.pg_class",
    "SELECT 1",
])
def test_not_catalog_queries(sql: str) -> None:
    assert not is_catalog_query(sql, PRIVATE | {"pg_visits_copy"})


def test_a_catalog_query_naming_a_private_table_goes_to_the_dp_path(running: Running) -> None:
    import psycopg

    before = running.spent()
    with connect(running) as con:
        with pytest.raises(psycopg.Error) as caught:  # (no budget set: refused, unplanned)
            con.execute("SELECT * FROM pg_catalog.pg_class, visits")
        assert caught.value.sqlstate == "22023"
        con.execute("SET privplan.epsilon = 0.1")
        with pytest.raises(psycopg.Error) as caught:  # (a DP query privplan cannot plan)
            con.execute("SELECT relname, hospital FROM pg_catalog.pg_class, visits")
        assert caught.value.sqlstate not in (None, "XX000")
    assert running.spent() == before


def test_the_replica_holds_no_row() -> None:
    from privplan.dbapi.free import ColumnInfo, TableInfo

    sandbox = CatalogSandbox(lambda: (TableInfo("visits", "main", False, (
        ColumnInfo("age", "BIGINT", True),)),))
    try:
        answer = sandbox.answer("SELECT COUNT(*) AS n FROM main.visits")
        assert answer.rows == [("0",)]
        with pytest.raises(ClientError):  # (no file access from the sandbox)
            sandbox.answer("SELECT * FROM read_csv('/etc/passwd')")
    finally:
        sandbox.close()


def test_no_size_or_row_count_of_a_private_table_is_told(running: Running) -> None:
    done = psql(running, "\\dt+", "\\l")
    assert done.returncode == 0, done.stderr
    sizes = [line.split("|")[6] for line in done.stdout.splitlines()
             if line.startswith("main|")]
    assert sizes == ["0 bytes", "0 bytes"]
    with connect(running) as con:
        row = con.execute("SELECT c.reltuples, c.relpages FROM pg_catalog.pg_class c "
                          "WHERE c.relname = 'visits'").fetchone()
        assert row is not None and float(row[0]) == 0 and int(row[1]) == 0


def test_a_relation_name_cast_to_regclass_is_its_oid() -> None:
    """JDBC's getTables joins ``pg_description`` on ``classoid = 'pg_class'::regclass``: the
    name (not a number) is looked up in the sandbox's pg_class, and a catalog name inside a
    string literal is left as it is."""
    from privplan.dbapi.free import ColumnInfo, TableInfo

    sandbox = CatalogSandbox(lambda: (TableInfo("visits", "main", False, (
        ColumnInfo("age", "BIGINT", True),)),))
    try:
        oid = sandbox.answer("SELECT oid FROM pg_catalog.pg_class WHERE relname = 'visits'")
        assert sandbox.answer("SELECT 'visits'::regclass AS r").rows == oid.rows
        assert sandbox.answer("SELECT 'main.visits'::pg_catalog.regclass AS r").rows == oid.rows
        assert sandbox.answer("SELECT '42'::regclass AS r").rows == [("42",)]
        assert sandbox.answer("SELECT 'nothing'::regclass AS r").rows == [(None,)]
        assert sandbox.answer("SELECT 'pg_class' AS name").rows == [("pg_class",)]
        assert sandbox.answer(
            "SELECT count(*) AS n FROM pg_catalog.pg_description d "
            "WHERE d.classoid = 'pg_class'::regclass").rows == [("0",)]
    finally:
        sandbox.close()


def test_jdbc_key_queries_parse_and_find_no_key() -> None:
    """JDBC's getPrimaryKeys expands ``pg_index.indkey`` with
    ``information_schema._pg_expandarray`` and getImportedKeys first reads ``max_index_keys``
    from ``pg_settings``: both are answered (no index exists in the replica)."""
    from privplan.dbapi.free import ColumnInfo, TableInfo

    sandbox = CatalogSandbox(lambda: (TableInfo("visits", "main", False, (
        ColumnInfo("age", "BIGINT", True),)),))
    try:
        sql = ("SELECT a.attname, (information_schema._pg_expandarray(i.indkey)).n AS key_seq "
               "FROM pg_catalog.pg_class ct JOIN pg_catalog.pg_attribute a "
               "ON ct.oid = a.attrelid JOIN pg_catalog.pg_index i ON a.attrelid = i.indrelid "
               "WHERE ct.relname = 'visits' AND i.indisprimary")
        assert is_catalog_query(sql, {"visits"})
        assert sandbox.answer(sql).rows == []
        assert sandbox.answer("SELECT setting FROM pg_catalog.pg_settings "
                              "WHERE name = 'max_index_keys'").rows == [("32",)]
    finally:
        sandbox.close()
