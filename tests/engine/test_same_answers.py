"""Same answers everywhere: every ``sql_examples/`` query, with seeded noise, gives the same
released values, keys, costs — or the same refusal — on DuckDB, PostgreSQL and Spark.

The data are the same rows in each engine: the demo database's tables (and the PUMS sample in
the types its policy declares) are read from DuckDB and copied exactly into a throw-away
PostgreSQL server and a local Spark session (``tests/servers``). Each example file runs as one
session per engine, query by query, with ``seeded_noise``: every noise sample is a function of
the seed and the draw order, so two engines that compute the same exact aggregates release
the same values — any difference in what an engine computed (a row chosen differently, a key
grouped differently, a value rounded differently) shows as a different answer.

Refusals must match too: a query refused on one engine only is a difference (the portable
subset of :mod:`privplan.engines.portable` refuses before anything is charged; every example
lies inside it, quantiles and VAR(DISTINCT) included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.demo.data import write_demo_database
from privplan.testing import seeded_noise
from tests.servers import postgres_server, spark_session
from tests.test_sql_examples import fmt  # (sql_examples/example_format.py, loaded once)

pytestmark = pytest.mark.invariant(7)


@pytest.fixture(scope="module")
def demo_duckdb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo tables and the PUMS sample (in its policy's types) in one DuckDB file."""
    path = write_demo_database(tmp_path_factory.mktemp("same") / "demo.duckdb", rows=3000)
    policy = fmt.pums_policy()
    table = policy.table("PUMS")
    casts = ", ".join(f'TRY_CAST("{c}" AS {_DUCK[col.type]}) AS "{c}"'
                      for c, col in table.columns.items())
    with duckdb.connect(str(path)) as con:
        con.execute(f'CREATE TABLE "PUMS" AS SELECT {casts} FROM read_csv('
                    f"'{fmt.PUMS_CSV}', header = true, all_varchar = true)")
    return path


_DUCK = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR", "bool": "BOOLEAN",
         "date": "DATE", "timestamp": "TIMESTAMP"}


def _tables(path: Path) -> dict[str, tuple[pd.DataFrame, dict[str, str]]]:
    with duckdb.connect(str(path), read_only=True) as con:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()]
        out = {}
        for n in names:
            result = con.execute(f'SELECT * FROM "{n}"')
            columns = [d[0] for d in result.description]
            # (Python values, object dtype: NULL stays None, apart from a float NaN)
            frame = pd.DataFrame(result.fetchall(), columns=columns, dtype=object)
            out[n] = (frame, {r[0]: r[1] for r in con.execute(f'DESCRIBE "{n}"').fetchall()})
        return out


@pytest.fixture(scope="module")
def postgres_db(pg_url: str, demo_duckdb: Path) -> str:
    for name, (frame, types) in _tables(demo_duckdb).items():
        # (PostgreSQL matches a quoted name exactly; the policy names tables in lower case)
        postgres_server.load_frame(pg_url, name.lower(), frame, types)
    return pg_url


@pytest.fixture(scope="module")
def spark_db(spark: Any, demo_duckdb: Path) -> Any:
    for name, (frame, types) in _tables(demo_duckdb).items():
        spark_session.load_frame(spark, name, frame, types)
    return spark


def _policy(example: Any) -> pp.Policy:
    if example.dataset == "demo":
        return fmt.demo_policy(example.neighbourhood)
    if example.dataset == "patients":
        return fmt.patients_policy(example.neighbourhood)
    return fmt.pums_policy(example.neighbourhood)


def _answers(database: Any, example: Any) -> list[tuple[str, Any, Any]]:
    """Each query's outcome in one session on ``database``: ("ok", frame, costs) or
    ("refused", error class name, None)."""
    out: list[tuple[str, Any, Any]] = []
    with pp.connect(database, policy=_policy(example), budget=example.session_budget) as sess:
        for q in example.queries:
            try:
                with seeded_noise(1000 + q.index):
                    res = sess.sql(q.sql, **q.budget_kwargs())
            except pp.PrivplanError as err:
                out.append(("refused", type(err).__name__, str(err)))
                continue
            out.append(("ok", res.df, (res.cost, res.query_cost, sess.spent())))
    return out


def _compare(name: str, engine: str, want: list[Any], got: list[Any]) -> None:
    for i, ((wk, wv, wc), (gk, gv, gc)) in enumerate(zip(want, got)):
        where = f"{name} query {i + 1} on {engine}"
        assert (wk, wv if wk == "refused" else "") == (gk, gv if gk == "refused" else ""), (
            f"{where}: DuckDB {wk} {wv if wk == 'refused' else ''} {wc if wk == 'refused' else ''}"
            f" / {engine} {gk} {gv if gk == 'refused' else ''} {gc if gk == 'refused' else ''}")
        if wk == "ok":
            pd.testing.assert_frame_equal(gv, wv, obj=where)
            assert gc == wc, f"{where}: costs {gc} != {wc}"


def _examples() -> list[Any]:
    return [pytest.param(p, id=p.name) for p in fmt.example_files()]


@pytest.mark.parametrize("path", _examples())
def test_postgres_answers_like_duckdb(path: Path, demo_duckdb: Path, postgres_db: str) -> None:
    example = fmt.parse_file(path)
    want = _answers(str(demo_duckdb), example)
    _compare(path.name, "PostgreSQL", want, _answers(postgres_db, example))


@pytest.mark.parametrize("path", _examples())
def test_spark_answers_like_duckdb(path: Path, demo_duckdb: Path, spark_db: Any) -> None:
    example = fmt.parse_file(path)
    want = _answers(str(demo_duckdb), example)
    _compare(path.name, "Spark", want, _answers(spark_db, example))
