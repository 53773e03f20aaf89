"""The types of a prepared statement's ``$n`` parameters that its Parse left unspecified,
inferred from the query the way PostgreSQL infers them from context: a parameter compared with
a column (``=``, ``<>``, ``<``, ``>``, ``<=``, ``>=``, ``BETWEEN``, ``IN``) takes the column's
policy type; one in ``LIMIT``/``OFFSET`` is an int8; any other stays ``text`` (25), as before.

Drivers encode each argument by the type the server describes (asyncpg refuses an ``int`` for
a ``text`` parameter), so ``fetch("... WHERE age > $1", 30)`` needs ``$1`` described as int8.
A column name found in several policy tables with different types is left ``text``.

Privacy: reads the query text and the policy's column types only.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from privplan.policy import Policy

__all__ = ["infer_param_types"]

_OIDS = {"int": 20, "float": 701, "str": 25, "bool": 16, "date": 1082, "timestamp": 1114}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def infer_param_types(sql: str, given: tuple[int, ...], count: int, policy: Policy
                      ) -> list[int]:
    """The type OID of each of ``count`` parameters: the Parse's where it gave one (not 0),
    else the inferred one, else 25."""
    types = [given[i] if i < len(given) else 0 for i in range(count)]
    if all(types):
        return types
    try:
        tree = sqlglot.parse_one(sql, dialect="postgres")
    except (sqlglot.errors.SqlglotError, RecursionError):
        return [t or 25 for t in types]
    columns = _column_types(policy)
    for param in tree.find_all(exp.Parameter):
        index = _index(param)
        if index is None or not 1 <= index <= count or types[index - 1]:
            continue
        oid = _context_type(param, columns)
        if oid is not None:
            types[index - 1] = oid
    return [t or 25 for t in types]


def _index(param: exp.Parameter) -> int | None:
    inner = param.this
    if isinstance(inner, exp.Literal) and not inner.is_string and inner.this.isdigit():
        return int(inner.this)
    return None


def _column_types(policy: Policy) -> dict[str, int | None]:
    """Each column name of the policy's tables with its OID (None where tables disagree)."""
    out: dict[str, int | None] = {}
    for table in policy.tables.values():
        for name, column in table.columns.items():
            oid = _OIDS.get(column.type, 25)
            key = name.lower()
            out[key] = oid if out.get(key, oid) == oid else None
    return out


def _context_type(param: exp.Parameter, columns: dict[str, int | None]) -> int | None:
    parent = param.parent
    if isinstance(parent, (exp.Limit, exp.Offset)):
        return 20
    if isinstance(parent, exp.In):
        other: exp.Expression | None = parent.this
    elif isinstance(parent, exp.Between):
        other = parent.this
    elif isinstance(parent, _COMPARISONS):
        other = parent.expression if parent.this is param else parent.this
    else:
        return None
    if isinstance(other, exp.Column):
        return columns.get(other.name.lower())
    return None
