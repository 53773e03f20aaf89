"""The parts of the plan builder that read a SELECT's columns and GROUP BY keys.

:class:`ColumnsAndKeys` is a mixin of :class:`privplan.sql.builder._CoreBuilder` (it uses the
builder's ``sql``, ``select``, ``table``, ``alias``, ``unit``, ``joins`` and
``select_aliases``): every column is checked against the policy (a column outside every
aggregate and key would release raw values), and each GROUP BY key is resolved with its public
domain — declared ``public_values``, a boolean, a CASE with literal results, or the values the
query's own WHERE lists — the keys a query may release without partition selection because the
policy or the query text, not the data, fixes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from privplan.analysis.literal_lists import literal_list
from privplan.errors import UnsupportedQueryError
from privplan.sql.joins import conjuncts, join_index, public_columns_of
from privplan.sql.locate import with_location
from privplan.sql.plan import GroupKey
from privplan.sql.validate import did_you_mean, refuse

__all__ = ["ColumnsAndKeys", "is_aggregate", "strip_qualifiers"]


def is_aggregate(node: exp.Expression) -> bool:
    """Whether ``node`` is an aggregate call (with or without FILTER)."""
    return isinstance(node, exp.AggFunc) or (
        isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc)
    )


class ColumnsAndKeys:
    """Column checks and GROUP BY keys of one SELECT (a mixin of the plan builder)."""

    sql: str
    select: exp.Select
    table: Any
    alias: str | None
    unit: str | None
    joins: Any
    select_aliases: dict[str, exp.Expression]
    listed_keys_first = False  # BigQuery's public groups: listed keys before public values
    schema_not_null: Callable[[Any], frozenset[str]] | None = None  # the engine's NOT NULLs

    # ------------------------------------------------------------------ columns
    def _qualifier_ok(self, col: exp.Column) -> bool:
        q = col.table
        if not q:
            return True
        allowed = {self.table.name.lower()}
        if self.alias:
            allowed.add(self.alias.lower())
        return q.lower() in allowed

    def _check_columns_everywhere(self) -> None:
        s = self.select
        for clause, allow_alias in (
            (s.args.get("where"), False),
            (s.args.get("group"), True),
            (s.args.get("having"), True),
            (s.args.get("order"), True),
        ):
            if clause is not None:
                self._check_columns(clause, allow_alias)
        for item in s.expressions:
            self._check_columns(item, False)

    def _check_columns(self, node: exp.Expression, allow_alias: bool) -> None:
        for col in node.find_all(exp.Column):
            if isinstance(col.this, exp.Star):
                continue
            if not self._qualifier_ok(col):
                refuse(self.sql, col, f"unknown table qualifier '{col.table}'",
                       f"only '{self.alias or self.table.name}' is in scope.",
                       "Qualify columns with the table name or its alias.")
            name = col.name.lower()
            if name in self.table.columns or (self.joins and name.startswith("__pub")):
                continue
            if allow_alias and name in self.select_aliases and not col.table:
                continue
            known = ", ".join(self.table.columns)
            raise UnsupportedQueryError(with_location(
                f"unknown column '{col.name}' in table '{self.table.name}': the policy declares "
                f"{known}. Why: privplan reads only the columns the policy declares. Fix the "
                f"name{did_you_mean(name, self.table.columns)}, or declare the column in the "
                f"policy.", self.sql, col))

    # ------------------------------------------------------------------ GROUP BY
    def _group_keys(self) -> list[GroupKey]:
        group = self.select.args.get("group")
        if group is None:
            return []
        keys: list[GroupKey] = []
        for g in group.expressions:
            expr = self._resolve_group_expr(g)
            self._no_aggregates(expr, "GROUP BY")
            norm = strip_qualifiers(expr.copy())
            if any(k.sql == norm.sql(dialect="duckdb") for k in keys):
                continue  # GROUP BY x, x (or x and an alias of x) is GROUP BY x
            i = len(keys)
            if self.unit and any(c.name.lower() == self.unit for c in norm.find_all(exp.Column)):
                refuse(self.sql, g, f"GROUP BY over the privacy unit '{self.unit}' refused",
                       "its groups are single persons: releasing them would publish per-person "
                       "values.", "Group by other columns; count persons with "
                       f"COUNT(DISTINCT {self.unit}).")
            column = norm.name.lower() if isinstance(norm, exp.Column) else None
            pub = public_columns_of(norm)
            cols = {c.name for c in norm.find_all(exp.Column)}
            join_ids = {join_index(c) for c in pub}
            public_join = None
            if pub and pub == cols and len(join_ids) == 1:
                public_join = next(iter(join_ids))
            if pub:
                column = None  # a public column is not a column of the private record
            domain = None if pub else self._public_domain(norm, column)
            keys.append(GroupKey(id=f"k{i}", expr=norm, sql=norm.sql(dialect="duckdb"),
                                 column=column, public_domain=domain, public_join=public_join,
                                 domain_literals=None if pub else _case_literals(norm)))
        return keys

    def _resolve_group_expr(self, g: exp.Expression) -> exp.Expression:
        if isinstance(g, exp.Literal) and not g.is_string:
            pos = int(g.this)
            items = self.select.expressions
            if not 1 <= pos <= len(items):
                refuse(self.sql, g, f"GROUP BY {pos} is out of range",
                       f"the select list has {len(items)} items.", "Use a valid position.")
            item = items[pos - 1]
            return item.this if isinstance(item, exp.Alias) else item
        if isinstance(g, exp.Column) and not g.table:
            name = g.name.lower()
            if name not in self.table.columns and name in self.select_aliases:
                return self.select_aliases[name]
        return g

    def _keys_from_where(self, column: str) -> tuple[Any, ...] | None:
        """The keys the query itself names: when WHERE allows only listed values of the key
        column (``WHERE b IN ('p', 'q')`` in every branch of an OR), those values are the
        domain — set by the query text, not the data, so they are released zero-filled
        without partition selection (Tumult's KeySet, in SQL). The region over-approximates
        what WHERE keeps, so the list can only be longer than the true one, never data."""
        region = getattr(self, "_where_region", None)
        if region is None or region.is_full() or region.is_empty():
            return None
        values: set[Any] = set()
        null = False
        integral = self.table.columns[column].type == "int"
        for box in region.boxes:
            cs = box.get(column)
            finite = cs.finite_values() if not integral else _integers(cs.intervals)
            if finite is None:
                return None
            values.update(finite)
            null = null or cs.null
            if len(values) > MAX_LISTED_KEYS:
                return None
        try:
            ordered: list[Any] = sorted(values)
        except TypeError:
            return None
        return tuple(ordered + ([None] if null else []))

    def _expression_keys_from_where(self, key: exp.Expression) -> tuple[Any, ...] | None:
        """The keys a computed GROUP BY key may take when a top-level WHERE conjunct lists
        them: ``WHERE age - k IN (0, 1, 2) ... GROUP BY age - k``. Rows whose key is not one
        of the literals (or is NULL) fail WHERE, so the released keys are those literals: set
        by the query text, released zero-filled like a public domain (their engine types and
        equality are the judge's, as for a CASE key's literal results)."""
        where = self.select.args.get("where")
        if where is None:
            return None
        target = strip_qualifiers(key.copy()).sql(dialect="duckdb")
        for conjunct in conjuncts(where.this):
            if isinstance(conjunct, exp.In) and not conjunct.args.get("query"):
                listed = literal_list(conjunct)
                values = (list(listed.values) if listed is not None
                          else [literal_value(v) for v in conjunct.expressions])
                if (values and all(v is not NOT_LITERAL and v is not None for v in values)
                        and strip_qualifiers(conjunct.this.copy()).sql(dialect="duckdb")
                        == target):
                    return tuple(dict.fromkeys(values))
        return None

    def _may_be_null(self, column: str) -> bool:
        """Whether ``column`` of the query's table can hold NULL: the policy says nullable
        (the default) and the engine's schema does not declare it NOT NULL.

        Why only the policy and the schema, never the rows: a bool key's public domain is
        released whole (every group, noise on each), so its NULL group must be there or not
        for every neighbouring table alike; a NULL group dropped because the data holds no
        NULL would tell that. A column that cannot hold NULL by its schema (``BOOLEAN NOT
        NULL``, a registered DataFrame's numpy ``bool``) cannot have the group, which would
        only be noise."""
        if not self.table.columns[column].nullable:
            return False
        if self.schema_not_null is None or getattr(self, "private_join", None) is not None:
            return True
        return column not in self.schema_not_null(self.table)

    def _public_domain(self, key: exp.Expression, column: str | None) -> tuple[Any, ...] | None:
        """A key's values may be released without selection only if they are public:
        declared ``public_values``, a boolean column, or a CASE whose every result is a literal
        (its values are then fixed by the query text, not the data)."""
        if column is not None:
            col = self.table.columns[column]
            if self.listed_keys_first:
                listed = self._keys_from_where(column)
                if listed is not None:
                    return listed
            if col.public_values is not None:
                return tuple(col.public_values)
            if col.type == "bool":
                return (False, True, None) if self._may_be_null(column) else (False, True)
            return self._keys_from_where(column)
        listed = self._expression_keys_from_where(key)
        if listed is not None:
            return listed
        if isinstance(key, exp.Case) and key.this is None:
            results = [i.args.get("true") for i in key.args.get("ifs", [])]
            default = key.args.get("default")
            values: list[Any] = []
            for r in results + ([default] if default is not None else []):
                v = literal_value(r)
                if v is NOT_LITERAL:
                    return None
                values.append(v)
            if default is None:
                values.append(None)
            return tuple(dict.fromkeys(values))
        return None

    # ------------------------------------------------------------------ raw values
    def _check_ungrouped_columns(self, keys: list[GroupKey]) -> None:
        """A table column outside every aggregate and every group key would release raw values.

        (Post-processing runs over a table holding only keys and noisy values, so such a column
        could not bind there anyway; this check gives the clear error first.)
        """
        key_sqls = {k.sql for k in keys}
        s = self.select
        for item in s.expressions:
            self._check_raw(item, key_sqls, in_select=True)
        for clause in ("having", "order"):
            if s.args.get(clause) is not None:
                self._check_raw(s.args[clause], key_sqls, in_select=False)

    def _check_raw(self, node: exp.Expression, key_sqls: set[str], in_select: bool) -> None:
        if is_aggregate(node):
            return
        if not isinstance(node, (exp.Alias, exp.Ordered, exp.Having, exp.Order)) and (
                strip_qualifiers(node.copy()).sql(dialect="duckdb") in key_sqls):
            return
        if isinstance(node, exp.Column):
            if not in_select and not node.table and node.name.lower() in self.select_aliases:
                return
            why = ("releasing it would return raw row values." if in_select else
                   "HAVING and ORDER BY see only the released keys and noisy aggregates, "
                   "never raw row values.")
            refuse(self.sql, node, f"column '{node.name}' is neither grouped nor aggregated", why,
                   f"Add it to GROUP BY, or aggregate it (e.g. AVG({node.name})).")
        for child in node.iter_expressions():
            self._check_raw(child, key_sqls, in_select)

    def _no_aggregates(self, node: exp.Expression, clause: str) -> None:
        for sub in node.walk():
            if isinstance(sub, exp.AggFunc):
                refuse(self.sql, sub, f"aggregate in {clause} refused",
                       f"{clause} filters rows before aggregation.",
                       "Use HAVING to filter on aggregates.")


NOT_LITERAL = object()


def literal_value(node: exp.Expression | None) -> Any:
    if node is None:
        return NOT_LITERAL
    if isinstance(node, exp.Paren):
        return literal_value(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        v = literal_value(node.this)
        return -v if isinstance(v, (int, float)) else NOT_LITERAL
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            return float(text)
    return NOT_LITERAL


def _case_literals(key: exp.Expression) -> tuple[str, ...] | None:
    """The SQL of every result of a CASE key whose results are all literals (NULL for a
    missing ELSE), as written: the session types them as the engine will (``1`` and ``'01'``
    are one INTEGER group), so the released domain is the engine's, not Python's."""
    if not isinstance(key, exp.Case) or key.this is not None:
        return None
    results = [i.args.get("true") for i in key.args.get("ifs", [])]
    default = key.args.get("default")
    if any(literal_value(r) is NOT_LITERAL for r in results) or (
            default is not None and literal_value(default) is NOT_LITERAL):
        return None
    out = [r.sql(dialect="duckdb") for r in results]
    out.append(default.sql(dialect="duckdb") if default is not None else "NULL")
    return tuple(out)


def strip_qualifiers(node: exp.Expression) -> exp.Expression:
    """``node`` with every column's table qualifier dropped (in place; callers copy first)."""
    for col in list(node.find_all(exp.Column)):
        if col.table:
            col.set("table", None)
            col.set("db", None)
            col.set("catalog", None)
    if isinstance(node, exp.Column) and node.args.get("table"):
        node.set("table", None)
    return node


MAX_LISTED_KEYS = 100_000  # keys a WHERE may list (beyond: partition selection)


def _integers(intervals: Any) -> tuple[int, ...] | None:
    """The integers in bounded intervals of an int column (``age IN (5, 6, 7)`` is kept as
    the interval [5, 7]), or None when an interval is unbounded or holds too many."""
    out: list[int] = []
    for iv in intervals:
        if iv.lo is None or iv.hi is None:
            return None
        lo, hi = math.ceil(iv.lo), math.floor(iv.hi)
        if not iv.lo_closed and lo == iv.lo:
            lo += 1
        if not iv.hi_closed and hi == iv.hi:
            hi -= 1
        if hi - lo + 1 > MAX_LISTED_KEYS - len(out):
            return None
        out.extend(range(lo, hi + 1))
    return tuple(out)
