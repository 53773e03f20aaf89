"""A bool GROUP BY key's NULL group follows the engine's schema on PostgreSQL as on DuckDB: a
``BOOLEAN NOT NULL`` column (read from ``pg_attribute``, never from rows) has the groups False and
True, a nullable one False, True and NULL whether or not a NULL is stored (see
tests/test_bool_key_domain.py for DuckDB and frames)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled
from tests.servers import need

psycopg = need("psycopg")

ROWS = {"no NULL stored": "(true, true), (false, false), (true, false)",
        "a NULL stored": "(true, NULL), (false, false), (true, true)"}
POLICY = {"tables": {"flags": {"columns": {"strict": {"type": "bool"},
                                            "loose": {"type": "bool"}}}}}


def _keys(database: Any) -> dict[str, list[Any]]:
    session = pp.connect(database, policy=POLICY, budget=pp.PureDP(10))
    try:
        with noise_disabled():
            return {c: sorted(((None if pd.isna(v) else bool(v)) for v in session.sql(
                        f"SELECT {c}, COUNT(*) AS n FROM flags GROUP BY {c}", epsilon=1).df[c]),
                              key=lambda v: (v is not None, v))
                    for c in ("strict", "loose")}
    finally:
        session.close()


@pytest.mark.parametrize("rows", sorted(ROWS))
def test_postgres_not_null_matches_duckdb(pg_url: str, tmp_path: Path, rows: str) -> None:
    ddl = "CREATE TABLE flags (strict BOOLEAN NOT NULL, loose BOOLEAN)"
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("DROP TABLE IF EXISTS flags")
        con.execute(ddl)
        con.execute(f"INSERT INTO flags VALUES {ROWS[rows]}")
    with duckdb.connect(str(tmp_path / "f.duckdb")) as con:
        con.execute(ddl)
        con.execute(f"INSERT INTO flags VALUES {ROWS[rows]}")
    want = {"strict": [False, True], "loose": [None, False, True]}
    assert _keys(pg_url) == want
    assert _keys(tmp_path / "f.duckdb") == want
