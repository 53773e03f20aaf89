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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from typing import Any, Protocol

from sqlglot import exp

from privplan.errors import PolicyError
from privplan.policy.model import FrozenMap
from privplan.sql.locate import with_location
from privplan.sql.validate import did_you_mean, refuse


@dataclass(frozen=True)
class PublicJoin:
    """One ``[LEFT] JOIN public_table ON private.a = public.b [AND …]``. Frozen, like the
    core that holds it: the binding passes return new joins (``dataclasses.replace``)."""

    index: int
    table: Any  # TablePolicy of the public table
    alias: str
    pairs: tuple[tuple[str, str], ...]  # (private column, public column)
    left: bool
    columns: frozenset[str] = frozenset()  # public columns the query uses
    table_sql: str = ""  # set by a binding pass
    stability: int = 1  # set by a binding pass: max public rows per key
    known: frozenset[str] = frozenset()  # the public table's columns
    using: frozenset[str] = frozenset()  # USING columns (read from the private side)
    column_types: Mapping[str, str] = field(default_factory=lambda: FrozenMap())
    # (public column -> engine type; and below, private key column -> engine type)
    key_types: Mapping[str, str] = field(default_factory=lambda: FrozenMap())

    def __post_init__(self) -> None:
        for name in ("column_types", "key_types"):
            if not isinstance(getattr(self, name), FrozenMap):
                object.__setattr__(self, name, FrozenMap(getattr(self, name)))


class _PrivateJoin(Exception):
    def __init__(self, index: int, table: Any) -> None:
        self.index, self.table = index, table


class PublicColumnsLookup(Protocol):
    """The columns of a public table the policy lists without columns, by the table's name
    (a dict, or the session's lookup that describes only the tables asked for)."""

    def get(self, name: str, default: Any = None, /) -> Any: ...


def private_name(column: str) -> str:
    """The right-hand private table's columns in the joined virtual table."""
    return f"__prv_{column}"


def public_name(join: int, column: str) -> str:
    return f"__pub{join}_{column}"


def resolve_joins(
    sql: str, select: exp.Select, private: Any, private_alias: str | None, policy: Any,
    public_columns: Any = None,
) -> list[PublicJoin]:
    """Validate the joins of ``select`` and rewrite its column references to the virtual table.

    A join of two private tables is handled by :func:`resolve_private_join` (the caller checks
    :func:`private_join_target` first)."""
    joins_ast = select.args.get("joins") or []
    if not joins_ast:
        return []
    try:
        return _resolve_public(sql, select, private, private_alias, policy, public_columns)
    except _PrivateJoin as pj:  # pragma: no cover - callers route private joins first
        refuse(sql, joins_ast[pj.index], "JOIN refused", "internal routing error.", "Report it.")
        raise


def private_join_target(select: exp.Select, policy: Any) -> Any | None:
    """The private table joined by ``select`` (if any join targets a private table)."""
    for node in select.args.get("joins") or []:
        t = node.this
        if isinstance(t, exp.Table):
            try:
                table = policy.table(f"{t.db}.{t.name}" if t.db else t.name)
            except PolicyError:
                continue
            if not table.public:
                return table
    return None


def resolve_private_join(
    sql: str, select: exp.Select, left: Any, left_alias: str | None, policy: Any
) -> Any:
    """``left [INNER] JOIN right ON left.unit = right.unit`` of two private tables that share
    the privacy unit → a virtual private table (a TablePolicy) whose rows are the joined pairs.

    Why this is sound: a unit's joined rows depend only on that unit's rows in the two tables
    (the join key *is* the unit), so adding or removing a unit changes only its own joined rows
    — the joined table is a private table with the same unit. Bounding happens *after* the join
    (at most k_left · k_right joined rows per unit, the most the two policies allow), and the
    virtual table is accounted as a table of its own, added to the others (one person may be in
    every private table).
    """
    joins_ast = select.args.get("joins") or []
    node = joins_ast[0]
    right_ast = node.this
    right = private_join_target(select, policy)
    assert right is not None  # (called only for a join whose target is a private table)
    if len(joins_ast) != 1:
        refuse(sql, joins_ast[1], "several joins with a private table refused",
               "only one join of two private tables is analysed.", "Join two tables.")
    if left.is_row_level or right.is_row_level:
        refuse(sql, node, f"JOIN of private tables '{left.name}' and '{right.name}' refused",
               "joining private tables needs a shared privacy-unit column in both (row-level "
               "tables have none, so one person's rows could be paired without bound).",
               "Declare privacy_unit for both tables, or query them separately.")
    if left.neighbourhood != right.neighbourhood:
        refuse(sql, node, "JOIN of private tables with different neighbourhoods refused",
               f"'{left.name}' is {left.neighbourhood}, '{right.name}' {right.neighbourhood}.",
               "Use one neighbourhood for both tables.")
    side = (node.args.get("side") or "").upper()
    if side or (node.args.get("kind") or "").upper() not in ("", "INNER"):
        refuse(sql, node, "outer JOIN of private tables refused",
               "only inner joins on the privacy unit are analysed.", "Use JOIN ... ON.")
    l_q = {left.name.lower(), (left_alias or left.name).lower()}
    r_q = {right.name.lower(), (right_ast.alias or right.name).lower()}
    on = node.args.get("on")
    using = node.args.get("using")
    ok = False
    if using:
        names = [i.name.lower() for i in using]
        ok = names == [left.privacy_unit] and left.privacy_unit == right.privacy_unit
    elif isinstance(on, exp.EQ) and all(isinstance(c, exp.Column) for c in (on.this,
                                                                          on.expression)):
        sides = {}
        for c in (on.this, on.expression):
            q = (c.table or "").lower()
            sides["l" if q in l_q else "r" if q in r_q else "?"] = c.name.lower()
        ok = sides.get("l") == left.privacy_unit and sides.get("r") == right.privacy_unit
    if not ok:
        refuse(sql, node, "JOIN of private tables refused",
               f"two private tables may only be joined on their privacy units "
               f"({left.name}.{left.privacy_unit} = {right.name}.{right.privacy_unit}), so that "
               "a person's rows pair only with the same person's rows.",
               f"Write JOIN {right.name} ON {left_alias or left.name}.{left.privacy_unit} = "
               f"{right_ast.alias or right.name}.{right.privacy_unit}.")
    _rename_right_columns(sql, select, left, right, l_q, r_q)
    select.set("joins", None)
    return _virtual_table(left, right)


def _rename_right_columns(sql: str, select: exp.Select, left: Any, right: Any,
                          l_q: set[str], r_q: set[str]) -> None:
    """Columns of the joined SELECT as columns of the virtual table: the left table's keep
    their names (unqualified), the right table's get :func:`private_name` (the unit is the
    join key, equal on both sides, read from the left); an ambiguous or unknown one is
    refused."""
    for col in list(select.find_all(exp.Column)):
        if isinstance(col.this, exp.Star) or _inside_join(col):
            continue
        name = col.name.lower()
        q = (col.table or "").lower()
        if q in r_q and not (q in l_q):
            owner = "r"
        elif q in l_q or not q:
            owner = "l"
            if not q and name in right.columns and name not in left.columns:
                owner = "r"
            elif not q and name in right.columns and name in left.columns \
                    and name != left.privacy_unit:
                refuse(sql, col, f"ambiguous column '{col.name}'",
                       "both private tables have it.", "Qualify it with a table alias.")
        else:
            refuse(sql, col, f"unknown table qualifier '{col.table}'",
                   "it names no table of the FROM clause.", "Use a table name or alias.")
        if owner == "r" and name == right.privacy_unit:
            owner = "l"  # the unit is the join key: equal on both sides
        if owner == "r":
            new = exp.column(private_name(name))
            if col.parent is select and col in select.expressions:  # keep the output name
                col.replace(exp.alias_(new, col.name))
            else:
                col.replace(new)
        else:
            col.set("table", None)


def _virtual_table(left: Any, right: Any) -> Any:

    columns = dict(left.columns)
    for name, col in right.columns.items():
        if name == right.privacy_unit:
            continue
        # a table with one row per unit has every column constant per unit
        unit_level = col.unit_level or right.max_rows_per_unit == 1
        columns[private_name(name)] = dc_replace(col, name=private_name(name),
                                                 unit_level=unit_level)
    if left.max_rows_per_unit == 1:
        columns = {n: (dc_replace(c, unit_level=True) if n in left.columns else c)
                   for n, c in columns.items()}
    groups = [g for g in (left.max_groups_per_unit, right.max_groups_per_unit) if g]
    per_group = [c for c in (left.max_rows_per_group_per_unit,
                             right.max_rows_per_group_per_unit) if c]
    return type(left)(
        name=f"{left.name}+{right.name}", columns=columns, public=False,
        privacy_unit=left.privacy_unit, neighbourhood=left.neighbourhood,
        max_rows_per_unit=left.max_rows_per_unit * right.max_rows_per_unit,
        max_groups_per_unit=min(groups) if groups else None,
        max_rows_per_group_per_unit=min(per_group) if per_group else None,
        source=f"{left.name}+{right.name}",
    )


def _resolve_public(
    sql: str, select: exp.Select, private: Any, private_alias: str | None, policy: Any,
    public_columns: Any = None,
) -> list[PublicJoin]:
    joins_ast = select.args.get("joins") or []
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
            raise _PrivateJoin(j, table)
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
        using = node.args.get("using") or []
        joins.append(PublicJoin(index=j, table=table, alias=alias, pairs=(),
                                left=side == "LEFT", known=frozenset(known),
                                using=frozenset(i.name.lower() for i in using)))
    for j, node in enumerate(joins_ast):
        joins[j] = dc_replace(joins[j], pairs=tuple(_pairs(sql, node, joins[j], private, scope)))
    used: dict[int, set[str]] = {join.index: set() for join in joins}
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
                       f"Declare it, or fix the name{did_you_mean(name, join.known)}.")
            used[join.index].add(name)
            new = exp.column(public_name(join.index, name))
            if col.parent is select and col in select.expressions:  # keep the output name
                col.replace(exp.alias_(new, col.name))
            else:
                col.replace(new)
    select.set("joins", None)
    return [dc_replace(join, columns=frozenset(used[join.index])) for join in joins]


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
        return hit[0]
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
    if using:  # (read into join.using when the join was made)
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
            sides[hit[0]] = c.name.lower()
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


def display(text: str, joins: Sequence[PublicJoin], right: str | None = None) -> str:
    """Internal ``__pub<j>_<c>`` / ``__prv_<c>`` names shown as ``<table>.<c>`` for people."""
    aliases = {j.index: j.alias for j in joins}
    text = re.sub(r"__pub(\d+)_(\w+)",
                  lambda m: f"{aliases.get(int(m.group(1)), 'public')}.{m.group(2)}", text)
    if right is not None:
        text = re.sub(r"__prv_(\w+)", lambda m: f"{right}.{m.group(1)}", text)
    return text


def join_index(public_column: str) -> int:
    """``__pub3_region`` → 3."""
    return int(public_column.removeprefix("__pub").split("_", 1)[0])
