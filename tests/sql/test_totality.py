"""sql/totality: what runs over private rows is total (DESIGN.md invariant 7).

Table-driven (tests/fixtures/totality.yaml): each expression is either run as written, rewritten
to a total form, or refused before the charge with a message naming the problem. A second test
asks DuckDB itself that every accepted form evaluates without error on edge values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
import sqlglot
import yaml

from privplan.engines.judge import judge
from privplan.errors import UnsupportedQueryError
from privplan.sql.totality import family, make_total

pytestmark = pytest.mark.invariant(7)

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parents[1] / "fixtures" / "totality.yaml").read_text())
COLUMNS = {"age": "BIGINT", "i": "INTEGER", "s": "VARCHAR", "f": "DOUBLE", "d": "DATE",
           "ts": "TIMESTAMP", "b": "BOOLEAN"}
EDGE_ROWS = """
    (NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (9223372036854775807, 2147483647, 'abc', 'nan', '5877642-06-25', 'infinity', TRUE),
    (-9223372036854775808, -2147483648, '', '-inf', '-5877641-06-25', '-infinity', FALSE),
    (0, 0, '1e400', -0.0, 'infinity', '294247-01-10 04:00:54.775806', TRUE),
    (37, 1, 'é', 1e308, '2020-01-01', '2020-01-01 00:00:00', FALSE)
"""


def _total(case: dict[str, Any]) -> Any:
    expr = sqlglot.parse_one(case["expr"], dialect="duckdb")
    key = case.get("clause") == "key"
    return make_total(expr, COLUMNS, judge(), sql=case["expr"],
                      clause="GROUP BY" if key else "WHERE", condition=not key)


@pytest.mark.parametrize("case", CASES, ids=[c["expr"] for c in CASES])
def test_expression_is_run_rewritten_or_refused(case: dict[str, Any]) -> None:
    expect: str = case["expect"]
    if expect.startswith("refused: "):
        with pytest.raises(UnsupportedQueryError) as err:
            _total(case)
        assert expect.removeprefix("refused: ") in str(err.value)
        return
    out = _total(case).expr.sql(dialect="duckdb")
    wanted = sqlglot.parse_one(case["expr"], dialect="duckdb").sql(dialect="duckdb") \
        if expect == "same" else sqlglot.parse_one(expect.removeprefix("engine: "),
                                                   dialect="duckdb").sql(dialect="duckdb")
    assert out == wanted


@pytest.mark.parametrize("case", [c for c in CASES if not c["expect"].startswith("refused")],
                         ids=lambda c: c["expr"])
def test_accepted_forms_never_fail_on_edge_values(case: dict[str, Any]) -> None:
    """The engine as judge: every accepted expression evaluates on NULL, extreme integers,
    NaN/±inf, dates beyond the TIMESTAMP range, infinite timestamps and odd strings."""
    con = duckdb.connect()
    cols = ", ".join(f"{c} {t}" for c, t in COLUMNS.items())
    con.execute(f"CREATE TABLE t ({cols})")
    con.execute(f"INSERT INTO t VALUES {EDGE_ROWS}")
    total = _total(case)
    sql = total.expr.sql(dialect="duckdb")
    if case.get("clause") == "key":
        con.execute(f"SELECT {sql} AS k, COUNT(*) FROM t GROUP BY k").fetchall()
    else:
        con.execute(f"SELECT COUNT(*) FROM t WHERE {sql}").fetchall()
        # and under NOT (the FALSE-set is evaluated too)
        con.execute(f"SELECT COUNT(*) FROM t WHERE NOT ({sql})").fetchall()
    assert family(total.type) != "other"
