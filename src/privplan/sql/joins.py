"""Joins of a private table with public tables (equi-joins on declared public tables).

A public table carries no privacy, so joining it to a private table is a transformation of the
private table: every private row is paired with the public rows whose key matches. Its
*stability* is the largest number of public rows sharing one key (1 when the key is unique):
one unit's change moves at most that many joined rows, so sensitivities are multiplied by it
(Proposition III.6). The session measures it on the public table (public data) before charging.

The join is resolved here into a *virtual table*: private columns keep their names, public
columns are renamed ``__pub<j>_<column>``; the rest of the planner then sees one table.
Predicates on public columns are analysed by the session against the public table (a
conjunct over public columns only becomes a set of join-key values of the private table);
anything else involving public columns is conservatively the whole domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from privplan.errors import PolicyError
from privplan.sql.locate import with_location
from privplan.sql.validate import refuse


@dataclass
class PublicJoin:
    """One ``[LEFT] JOIN public_table ON private.a = public.b [AND …]``."""

    index: int
    table: Any  # TablePolicy of the public table
    alias: str
    pairs: list[tuple[str, str]]  # (private column, public column)
    left: bool
    columns: set[str] = field(default_factory=set)  # public columns the query uses
    table_sql: str = ""  # filled by the session
    stability: int = 1  # filled by the session: max public rows per key
    known: set[str] = field(default_factory=set)  # the public table's columns
    using: set[str] = field(default_factory=set)  # USING columns (read from the private side)


def public_name(join: int, column: str) -> str:
    return f"__pub{join}_{column}"


def resolve_joins(
    sql: str, select: exp.Select, private: Any, private_alias: str | None, policy: Any,
    public_columns: Any = None,
) -> list[PublicJoin]:
    """Validate the joins of ``select`` and rewrite its column references to the virtual table."""
    joins_ast = select.args.get("joins") or []
    if not joins_ast:
        return []
    scope: dict[str, tuple[str, Any]] = {}  # qualifier -> ("private"|join index, table)
    for q in {private.name.lower(), (private_alias or private.name).lower()}:
        scope[q] = ("private", private)
    joins: list[PublicJoin] = []
    for j, node in enumerate(joins_ast):
        target = node.this
        if not isinstance(target, exp.Table):
            refuse(sql, node, "JOIN with a subquery refused",
                   "only tables declared in the policy can be joined.", "Join a public table.")
        try:
            table = policy.table(f"{target.db}.{target.name}" if target.db else target.name)
        except PolicyError as err:
            raise PolicyError(with_location(str(err), sql, target)) from None
        if not table.public:
            refuse(sql, node, f"JOIN of two private tables ('{private.name}', '{table.name}') "
                   "refused", "joining private tables multiplies one person's contribution in "
                   "ways this version does not bound.",
                   "Join a public table, or query each private table on its own.")
        side = (node.args.get("side") or "").upper()
        kind = (node.args.get("kind") or "").upper()
        if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER"):
            refuse(sql, node, f"{(side + ' ' + kind).strip()} JOIN refused",
                   "a join may not add rows that no private record produced.",
                   "Use JOIN (inner) or LEFT JOIN with the private table on the left.")
        alias = target.alias or target.name
        scope[alias.lower()] = (str(j), table)
        scope[table.name.lower()] = (str(j), table)
        known = set(table.columns) or set((public_columns or {}).get(table.name, ()))
        joins.append(PublicJoin(index=j, table=table, alias=alias, pairs=[],
                                left=side == "LEFT", known=known))
    for j, node in enumerate(joins_ast):
        joins[j].pairs = _pairs(sql, node, joins[j], private, scope)
    for col in list(select.find_all(exp.Column)):
        if isinstance(col.this, exp.Star) or _inside_join(col):
            continue
        owner = _owner(sql, col, private, joins, scope)
        if owner == "private":
            col.set("table", None)
        elif owner is not None:
            join = joins[int(owner)]
            name = col.name.lower()
            if join.known and name not in join.known:
                refuse(sql, col, f"unknown column '{col.name}' in public table "
                       f"'{join.table.name}'", "it is not declared in the policy.",
                       "Declare it, or fix the name.")
            join.columns.add(name)
            new = exp.column(public_name(join.index, name))
            if col.parent is select and col in select.expressions:  # keep the output name
                col.replace(exp.alias_(new, col.name))
            else:
                col.replace(new)
    select.set("joins", None)
    return joins


def _inside_join(node: exp.Expression) -> bool:
    return node.find_ancestor(exp.Join) is not None


def _owner(sql: str, col: exp.Column, private: Any, joins: list[PublicJoin],
           scope: dict[str, tuple[str, Any]]) -> str | None:
    name = col.name.lower()
    if col.table:
        hit = scope.get(col.table.lower())
        if hit is None:
            refuse(sql, col, f"unknown table qualifier '{col.table}'",
                   "it names no table of the FROM clause.", "Use a table name or alias in scope.")
        return hit[0]  # type: ignore[index]
    if any(name in j.using for j in joins):
        return "private"  # a USING column: equal on both sides, read from the private row
    in_private = name in private.columns
    in_public = [str(j.index) for j in joins if name in j.known]
    if in_private and in_public:
        refuse(sql, col, f"ambiguous column '{col.name}'",
               "both the private and a public table have it.", "Qualify it with a table alias.")
    if in_private:
        return "private"
    if len(in_public) == 1:
        return in_public[0]
    return "private"  # unknown names are reported by the column check


def _pairs(sql: str, node: exp.Join, join: PublicJoin, private: Any,
           scope: dict[str, tuple[str, Any]]) -> list[tuple[str, str]]:
    using = node.args.get("using")
    if using:
        join.using = {i.name.lower() for i in using}
        return [(i.name.lower(), i.name.lower()) for i in using]
    on = node.args.get("on")
    if on is None:
        refuse(sql, node, "JOIN without ON refused", "a cross join multiplies every row.",
               "Join on equal keys: JOIN t ON private.a = t.b.")
    pairs = []
    for cond in _conjuncts(on):
        if not (isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column)
                and isinstance(cond.expression, exp.Column)):
            refuse(sql, cond, "JOIN condition refused",
                   "only equalities between a private column and a public column are analysed.",
                   "Write ON private.a = public.b [AND …]; put other conditions in WHERE.")
        sides = {}
        for c in (cond.this, cond.expression):
            hit = scope.get((c.table or "").lower())
            if hit is None:
                refuse(sql, c, "unqualified column in JOIN condition",
                       "each side must name its table.", "Qualify both sides.")
            sides[hit[0]] = c.name.lower()  # type: ignore[index]
        if set(sides) != {"private", str(join.index)}:
            refuse(sql, cond, "JOIN condition refused",
                   "it must compare the private table with the joined table.",
                   "Write ON private.a = public.b.")
        pairs.append((sides["private"], sides[str(join.index)]))
    return pairs


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    return [] if node is None else _conjuncts(node)


def public_columns_of(node: exp.Expression) -> set[str]:
    return {c.name for c in node.find_all(exp.Column) if c.name.startswith("__pub")}


def display(text: str, joins: list[PublicJoin]) -> str:
    """Internal ``__pub<j>_<c>`` names shown as ``<alias>.<c>`` for people."""
    aliases = {j.index: j.alias for j in joins}
    return re.sub(r"__pub(\d+)_(\w+)",
                  lambda m: f"{aliases.get(int(m.group(1)), 'public')}.{m.group(2)}", text)


def join_index(public_column: str) -> int:
    """``__pub3_region`` → 3."""
    return int(public_column.removeprefix("__pub").split("_", 1)[0])
