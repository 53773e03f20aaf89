"""BigQuery's public groups: a RIGHT OUTER JOIN with a literal list becomes a query-text domain.

BigQuery (and ZetaSQL's compliance tests) give the groups a DP query releases by joining the
private table with them::

    SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(..., group_selection_strategy = PUBLIC_GROUPS)
      item, AVG(quantity)
    FROM professors
    RIGHT OUTER JOIN (SELECT DISTINCT item FROM UNNEST(['pen', 'pencil', 'book'])) USING (item)
    GROUP BY item

Its documented meaning: every listed group is released (with noise, also when no private row has
it) and no other group is. That is exactly what privplan releases for
``... FROM professors WHERE item IN ('pen', 'pencil', 'book') GROUP BY item``: keys listed in
the query text are a public domain, released zero-filled without partition selection (no δ),
and the rows of other groups are filtered out before any aggregate. The rewrite therefore
changes no release: it reads only the query text (the list is public by construction, written
by the analyst), and the IN-list region is the WHERE region every other mechanism of the query
is charged on.

Only this shape is rewritten: one RIGHT [OUTER] JOIN of a subquery ``SELECT [DISTINCT] k FROM
UNNEST([literal, ...]) [AS k]`` on the single key k (``USING (k)`` or ``ON a.k = b.k``), k a
GROUP BY key. Lists with NULL (BigQuery would release a NULL group that no IN list can match)
or non-literal values are left alone, and the query is then refused as before.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError

__all__ = ["public_groups_as_in_list"]


def public_groups_as_in_list(sql: str) -> str | None:
    """``sql`` with its public-groups join replaced by ``WHERE k IN (list)``, or None when the
    query does not have exactly that shape (see the module docstring)."""
    try:  # (only recognising the shape: the normal path reports what is wrong with the SQL)
        tree = sqlglot.parse_one(sql, dialect="duckdb")
    except (SqlglotParseError, TokenError):
        return None
    if not isinstance(tree, exp.Select):
        return None
    joins = tree.args.get("joins") or []
    if len(joins) != 1:
        return None
    join = joins[0]
    found = _public_list(join)
    if found is None:
        return None
    key, alias, values = found
    if _join_key(join, alias) != key:
        return None
    group = tree.args.get("group")
    keys = [k for k in (group.expressions if group is not None else [])]
    if not any(isinstance(k, exp.Column) and k.name.lower() == key for k in keys):
        return None
    out = tree.copy()
    out.set("joins", None)
    for column in list(out.find_all(exp.Column)):
        if column.table and column.table.lower() == alias:
            column.set("table", None)  # the join key, now the private table's own column
    out = out.where(exp.In(this=exp.column(key), expressions=[v.copy() for v in values]))
    return out.sql(dialect="duckdb")


def _public_list(join: exp.Join) -> tuple[str, str, list[exp.Expr]] | None:
    """(key name, the subquery's alias or the key name, the literals) of a RIGHT [OUTER] JOIN
    of ``SELECT [DISTINCT] k FROM UNNEST([literal, ...]) [AS k]``."""
    if (join.side or "").upper() != "RIGHT" or (join.kind or "OUTER").upper() != "OUTER":
        return None
    sub = join.this
    if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select):
        return None
    inner = sub.this
    if len(inner.expressions) != 1 or not isinstance(inner.expressions[0], exp.Column):
        return None
    if any(inner.args.get(a) for a in ("where", "group", "having", "joins", "limit", "order")):
        return None
    source = inner.args.get("from_")
    unnest = source.this if source is not None else None
    if not isinstance(unnest, exp.Unnest) or len(unnest.expressions) != 1:
        return None
    array = unnest.expressions[0]
    if not isinstance(array, exp.Array) or not array.expressions:
        return None
    values = list(array.expressions)
    if not all(_is_literal(v) for v in values):
        return None
    key = inner.expressions[0].name.lower()
    named = unnest.args.get("alias")
    if named is not None and named.name and named.name.lower() != key:
        return None
    alias = sub.alias_or_name.lower() or key
    return key, alias, values


def _join_key(join: exp.Join, alias: str) -> str | None:
    """The one key the join compares: ``USING (k)`` or ``ON x.k = alias.k``."""
    using = join.args.get("using")
    if using:
        return using[0].name.lower() if len(using) == 1 else None
    on = join.args.get("on")
    if not isinstance(on, exp.EQ):
        return None
    left, right = on.this, on.expression
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return None
    if left.name.lower() != right.name.lower():
        return None
    if alias not in (left.table.lower(), right.table.lower()):
        return None
    return left.name.lower()


def _is_literal(node: exp.Expr) -> bool:
    """A number, string or boolean constant (a negated number too); not NULL."""
    if isinstance(node, exp.Neg):
        node = node.this
        return isinstance(node, exp.Literal) and not node.is_string
    return isinstance(node, (exp.Literal, exp.Boolean))
