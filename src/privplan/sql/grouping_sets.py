"""``GROUP BY ROLLUP / CUBE / GROUPING SETS`` as a UNION ALL of plain GROUP BYs.

Each grouping set is a partition of the rows, so the composition theorem charges a record
once per set (one group in each), which is exactly what the UNION ALL of one GROUP BY per set
gets from the solver: its branches share the query's budget through the same theorem. Keys
a set leaves out are NULL in its rows (as SQL defines them); ``GROUPING(...)`` becomes the
constant bit mask of the set. HAVING stays in every branch; ORDER BY, LIMIT and OFFSET apply to
the union. At most :data:`MAX_SETS` sets (CUBE of six keys).
"""

from __future__ import annotations

from itertools import combinations, product

from sqlglot import exp

from privplan.errors import UnsupportedQueryError

__all__ = ["MAX_SETS", "expand_grouping_sets"]

MAX_SETS = 64

_SPECIAL = (exp.Rollup, exp.Cube, exp.GroupingSets)


def _sets_of(node: exp.Expression) -> list[list[exp.Expression]]:
    items = list(node.expressions)
    if isinstance(node, exp.Rollup):
        return [items[:n] for n in range(len(items), -1, -1)]
    if isinstance(node, exp.Cube):
        return [list(c) for n in range(len(items), -1, -1) for c in combinations(items, n)]
    out = []
    for item in items:  # GROUPING SETS ((a, b), (a), a, ())
        if isinstance(item, exp.Tuple):
            out.append(list(item.expressions))
        elif isinstance(item, exp.Paren):
            out.append([item.this])
        elif isinstance(item, _SPECIAL):
            raise UnsupportedQueryError(
                "ROLLUP/CUBE inside GROUPING SETS refused: list the grouping sets themselves, "
                "e.g. GROUPING SETS ((a, b), (a), ()).")
        else:
            out.append([item])
    return out


def _key(node: exp.Expression) -> str:
    stripped = node.copy()
    for c in stripped.find_all(exp.Column):
        c.set("table", None)
    return stripped.sql(dialect="duckdb")


def expand_grouping_sets(tree: exp.Expression) -> exp.Expression:
    """``tree`` with a top-level SELECT's ROLLUP/CUBE/GROUPING SETS expanded (else unchanged)."""
    specials = [n for n in tree.find_all(*_SPECIAL)]
    if not specials:
        return tree
    group = tree.args.get("group") if isinstance(tree, exp.Select) else None
    if group is not None and any(isinstance(n.parent, exp.GroupingSets) for n in specials):
        raise UnsupportedQueryError(
            "ROLLUP/CUBE inside GROUPING SETS refused: list the grouping sets themselves, "
            "e.g. GROUPING SETS ((a, b), (a), ()).")
    if group is None or any(n.parent is not group for n in specials):
        raise UnsupportedQueryError(
            "ROLLUP, CUBE and GROUPING SETS are answered in the GROUP BY of the outermost "
            "SELECT only; write that query on its own.")
    plain = [e for e in group.expressions if not isinstance(e, _SPECIAL)]
    choices = [_sets_of(e) for e in group.expressions if isinstance(e, _SPECIAL)]
    sets = [plain + [x for part in combo for x in part] for combo in product(*choices)]
    if len(sets) > MAX_SETS:
        raise UnsupportedQueryError(
            f"GROUP BY with {len(sets)} grouping sets refused (at most {MAX_SETS}): each set is "
            "a partition that shares the query's budget. Use fewer keys in CUBE.")
    every = {_key(e): e for s in sets for e in s}
    branches = [_branch(tree, s, every) for s in sets]
    union: exp.Expression = branches[0]
    for b in branches[1:]:
        union = exp.Union(this=union, expression=b, distinct=False)
    for arg in ("order", "limit", "offset"):
        if tree.args.get(arg) is not None:
            union.set(arg, tree.args[arg].copy())
    return union


def _branch(tree: exp.Expression, keys: list[exp.Expression],
            every: dict[str, exp.Expression]) -> exp.Select:
    """The SELECT of one grouping set: left-out keys NULL, GROUPING(...) its constant mask."""
    kept = {_key(k) for k in keys}
    branch = tree.copy()
    assert isinstance(branch, exp.Select)
    for arg in ("order", "limit", "offset"):
        branch.set(arg, None)
    branch.set("group", exp.Group(expressions=[k.copy() for k in keys]) if keys else None)
    for g in list(branch.find_all(exp.Grouping)):
        mask = 0
        for arg in g.expressions:
            mask = mask * 2 + (0 if _key(arg) in kept else 1)
        g.replace(exp.Literal.number(mask))
    new_items = []
    for item in branch.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        key = _key(inner)
        if key in every and key not in kept:
            name = item.alias if isinstance(item, exp.Alias) else (
                inner.name if isinstance(inner, exp.Column) else inner.sql(dialect="duckdb"))
            new_items.append(exp.alias_(exp.Null(), name, quoted=True))
        else:
            new_items.append(item)
    branch.set("expressions", new_items)
    if branch.args.get("having") is not None:  # a left-out key in HAVING is NULL too
        for col in list(branch.args["having"].find_all(exp.Column)):
            if _key(col) in every and _key(col) not in kept:
                col.replace(exp.Null())
    return branch
