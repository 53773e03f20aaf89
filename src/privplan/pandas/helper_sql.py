"""The SQL behind the pandas-shaped helpers (``count``, ``sum``, ``mean``, ``var``, ``std``,
``quantile``, ``median``, ``where``) and the frame their answers come back as.

The helpers build ordinary SQL and send it through the same planner and accountant as
``df.dp.sql``, so they cost exactly what the SQL costs; a ``where`` predicate is parsed and
re-rendered as one expression, so it cannot smuggle in other clauses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError

from privplan.errors import ParseError, UnsupportedQueryError
from privplan.result import Result


def _ident(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise UnsupportedQueryError(f"a column name must be a non-empty string, got {name!r}")
    return '"' + name.replace('"', '""') + '"'


def _by_list(by: str | Sequence[str] | None) -> list[str]:
    if by is None:
        return []
    if isinstance(by, str):
        return [by]
    if isinstance(by, Sequence) and all(isinstance(b, str) for b in by):
        return list(by)
    raise UnsupportedQueryError(f"by must be a column name or a list of column names, got {by!r}")


def _parse_predicate(predicate: str) -> str:
    """One SQL boolean expression, re-rendered (a predicate cannot smuggle in other clauses)."""
    if not isinstance(predicate, str) or not predicate.strip():
        raise ParseError("where() takes a SQL condition as a string, e.g. where(\"age < 30\")")
    try:
        nodes = [n for n in sqlglot.parse(predicate, dialect="duckdb") if n is not None]
    except (SqlglotParseError, TokenError) as err:
        raise ParseError(
            f"could not parse the where() condition {predicate!r}: "
            f"{str(err).splitlines()[0]}. Write one SQL condition, e.g. \"age < 30 AND "
            f"hospital = 'A'\".") from None
    if len(nodes) != 1 or isinstance(nodes[0], (exp.Query, exp.Command, exp.DDL, exp.DML)):
        raise ParseError(
            f"where() takes one SQL condition, not {predicate!r}. Write e.g. \"age < 30\"; "
            f"for anything else use df.dp.sql(...).")
    return nodes[0].sql(dialect="duckdb")


def _helper_sql(table: str, func: str, column: str | None, by: Sequence[str],
                predicates: Sequence[str], extra: str = "") -> str:
    if column is None:
        value, alias = "COUNT(*)", "count"
    else:
        value, alias = f"{func}({_ident(column)}{extra})", column
    if alias.lower() in (b.lower() for b in by):
        raise UnsupportedQueryError(
            f"the output column '{alias}' would clash with a by column of the same name; use "
            f"df.dp.sql(...) and choose the aliases yourself.")
    keys = ", ".join(_ident(b) for b in by)
    sql = f"SELECT {keys + ', ' if keys else ''}{value} AS {_ident(alias)} FROM {_ident(table)}"
    if predicates:
        sql += " WHERE " + " AND ".join(f"({p})" for p in predicates)
    if by:
        sql += f" GROUP BY {keys}"
    return sql


def _budget_kwargs(epsilon: Any, delta: Any, rho: Any, mu: Any, budget: Any) -> dict[str, Any]:
    return {"epsilon": epsilon, "delta": delta, "rho": rho, "mu": mu, "budget": budget}


def _answer_frame(res: Result, sql: str) -> pd.DataFrame:
    """The noisy answers with each column's 95% interval right after it; costs in ``attrs``."""
    data: dict[str, Any] = {}
    for col in res.df.columns:
        data[col] = res.df[col]
        for side in ("low", "high"):
            name = f"{col}_{side}"
            if name in res.intervals.columns and name not in res.df.columns:
                data[name] = res.intervals[name]
    out = pd.DataFrame(data, index=res.df.index)
    out.attrs = {
        "privplan_cost": res.cost,
        "privplan_query_cost": res.query_cost,
        "privplan_accuracy": dict(res.accuracy),
        "privplan_sql": sql,
    }
    return out

