"""Parse one SQL statement with sqlglot, turning parser failures into privplan errors."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError

from privplan.errors import ParseError, UnsupportedQueryError
from privplan.sql.locate import with_location
from privplan.sql.validate import check_depth

DEFAULT_DIALECT = "duckdb"


def parse_statement(sql: str, dialect: str = DEFAULT_DIALECT) -> exp.Expression:
    """Parse exactly one statement. The returned tree is private to the caller (sqlglot mutates)."""
    if not isinstance(sql, str) or not sql.strip():
        raise ParseError("empty query: pass one SELECT statement, e.g. SELECT COUNT(*) FROM t")
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ParseError(
            f"the SQL is not valid Unicode at character {err.start + 1} (an unpaired surrogate "
            f"{sql[err.start]!r}): pass text that encodes as UTF-8.") from None
    try:
        statements = [s for s in sqlglot.parse(sql, dialect=dialect) if s is not None]
    except SqlglotParseError as err:
        first = err.errors[0] if err.errors else {}
        line, col = first.get("line"), first.get("col")
        where = f" at line {line}, column {col}" if line else ""
        desc = first.get("description", str(err))
        raise ParseError(
            f"could not parse the SQL{where}: {desc}. Check the syntax near "
            f"'{first.get('highlight', '')}' (dialect: {dialect})."
        ) from None
    except TokenError as err:
        raise ParseError(f"could not read the SQL: {err} (dialect: {dialect})") from None
    except RecursionError:
        raise UnsupportedQueryError(
            "query nested too deeply to parse: flatten its expressions (e.g. x IN (...) "
            "instead of long OR chains, fewer nested parentheses).") from None
    if not statements:
        raise ParseError("empty query: pass one SELECT statement")
    if len(statements) > 1:
        raise UnsupportedQueryError(
            with_location(
                f"{len(statements)} statements given; privplan answers one statement at a time "
                "(a second statement could change data or settings). Send them one by one.",
                sql,
                statements[1],
            )
        )
    check_depth(sql, statements[0])
    return statements[0]
