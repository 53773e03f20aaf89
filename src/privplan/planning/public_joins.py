"""Resolve joins with public tables against the engine: stability, regions and key domains.

Everything here reads PUBLIC tables only, so it may look at their data (DESIGN.md invariant 2
concerns private data): the largest number of public rows per join key (the join's stability),
the join-key values selected by a WHERE conjunct over public columns (which becomes a region of
the private table), and the distinct values of a group key over public columns (its public
domain).

Privacy: only public tables' rows are read: stability, key regions and domains come from them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlglot import exp

from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet
from privplan.errors import UnsupportedQueryError
from privplan.planning.reads import PublicCatalog
from privplan.rewrite.engine_sql import key_sql, public_key_sql
from privplan.sql.joins import PublicJoin, conjuncts, join_index, public_columns_of
from privplan.sql.plan import CorePlan, GroupKey

MAX_PUBLIC_DOMAIN = 100_000


def _ident(name: str) -> str:
    return exp.to_identifier(name).sql(dialect="duckdb")


def _on_public(node: exp.Expression, join: PublicJoin) -> str:
    """The expression with ``__pub<j>_<c>`` references turned back into the public ``c``."""
    prefix = f"__pub{join.index}_"
    out = node.copy()
    for col in list(out.find_all(exp.Column)):
        if col.name.startswith(prefix):
            col.replace(exp.column(col.name.removeprefix(prefix)))
    if isinstance(out, exp.Column) and out.name.startswith(prefix):  # pragma: no cover
        out = exp.column(out.name.removeprefix(prefix))
    return out.sql(dialect="duckdb")


def _key_region(join: PublicJoin, engine: PublicCatalog, condition: str | None) -> Region | None:
    """The private key values that can match a public row (satisfying ``condition``)."""
    if join.left or len(join.pairs) != 1:
        return None
    private_col, public_col = join.pairs[0]
    # the key as the join compares it: in the private column's type (so the region holds values
    # of that type, comparable with every other region on the column) and collation
    key = public_key_sql(join, private_col, _ident(public_col))
    where = "__key IS NOT NULL" + (f" AND ({condition})" if condition else "")
    rows = engine.fetch_public(
        f"SELECT DISTINCT __key FROM (SELECT {key} AS __key, * FROM {join.table_sql}) "
        f"WHERE {where}")
    if len(rows) > MAX_PUBLIC_DOMAIN:
        return None
    return Region.column(private_col, ColumnSet.points([r[0] for r in rows]))


def resolve_public_joins(core: CorePlan, engine: PublicCatalog) -> CorePlan:
    """The core with its public joins checked for stability (a key unique in the public table,
    as the join compares it), the private key values that can match narrowing its regions, and
    each key over public columns given its public domain."""
    refine = Region.full()
    for join in core.joins:
        keys = ", ".join(_ident(b) for _, b in join.pairs)
        # the key as the join compares it (the private column's type and binary collation):
        # '5', '05' and ' 5' are one BIGINT key; 'a' and 'A' are two keys even in a NOCASE
        # column. A key with a NULL part matches no private row.
        typed = [public_key_sql(join, a, _ident(b)) for a, b in join.pairs]
        items = ", ".join(f"{t} AS __j{i}" for i, t in enumerate(typed))
        matched = " AND ".join(f"__j{i} IS NOT NULL" for i in range(len(typed)))
        (most,) = engine.fetch_public(
            f"SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM (SELECT {items} FROM "
            f"{join.table_sql}) WHERE {matched} "
            f"GROUP BY {', '.join(f'__j{i}' for i in range(len(typed)))})")[0]
        if most > 1:
            raise UnsupportedQueryError(
                f"JOIN {join.table.name} ON {keys}: the key is not unique in the public table as "
                f"the join compares it (in the private column's type; up to {most} rows share "
                f"a key), so one private row would be counted up to "
                f"{most} times. Join on a unique key of '{join.table.name}', or de-duplicate it.")
        # (stability 1: the default; a key shared by several public rows is refused above)
        # an inner join keeps only private rows whose key appears in the public table
        region = _key_region(join, engine, None)
        if region is not None:
            refine = refine.intersect(region)
    for cond in conjuncts(core.where):
        pub = public_columns_of(cond)
        names = {c.name for c in cond.find_all(exp.Column)}
        owners = {join_index(p) for p in pub}
        if not pub or pub != names or len(owners) != 1:
            continue
        join = core.joins[next(iter(owners))]
        region = _key_region(join, engine, _on_public(cond, join))
        if region is not None:
            refine = refine.intersect(region)
    if not refine.is_full():
        selection = core.selection
        if selection is not None:
            selection = replace(selection, region=selection.region.intersect(refine))
        core = replace(core, where_region=core.where_region.intersect(refine),
                       measures=tuple(replace(m, region=m.region.intersect(refine))
                                      for m in core.measures), selection=selection)
    resolved: list[GroupKey] = []
    for key in core.keys:
        if key.public_join is not None:
            join = core.joins[key.public_join]
            # the key as the engine statement computes it (total, binary collation)
            on_public = _public_key_sql(key, join)
            rows = engine.fetch_public(f"SELECT DISTINCT {on_public} FROM {join.table_sql}")
            values = [r[0] for r in rows]
            if join.left and None not in values:
                values.append(None)  # unmatched private rows get a NULL key
            if len(values) > MAX_PUBLIC_DOMAIN:
                raise UnsupportedQueryError(
                    f"GROUP BY {key.sql}: the public domain has {len(values):,} values; group by "
                    "a coarser public column.")
            key = replace(key, public_domain=tuple(_sortable(values)))
        resolved.append(key)
    core = replace(core, keys=tuple(resolved))
    return replace(core, joint_domains=_joint_domains(core, engine))


def _joint_domains(core: CorePlan, engine: PublicCatalog
                   ) -> tuple[tuple[tuple[int, ...], str, int], ...]:
    """Keys that all read one (inner-joined) public table: their domain is the table's
    distinct rows of those keys, computed by the engine from the public table alone (the keys
    as the engine statement computes them), so ``GROUP BY b.title, b.author`` releases the
    books there are, not every title with every author. Public data only (module docstring);
    no private row is read, and the released key set is still fixed before any private row."""
    by_join: dict[int, list[int]] = {}
    for i, key in enumerate(core.keys):
        if key.public_join is not None:
            by_join.setdefault(key.public_join, []).append(i)
    out = []
    for j, indices in by_join.items():
        join = core.joins[j]
        if len(indices) < 2 or join.left:
            continue
        items = ", ".join(f"{_public_key_sql(core.keys[i], join)} AS __j{n}"
                          for n, i in enumerate(indices))
        select = f"SELECT DISTINCT {items} FROM {join.table_sql}"
        (rows,) = engine.fetch_public(f"SELECT COUNT(*) FROM ({select})")[0]
        if rows > MAX_PUBLIC_DOMAIN:
            raise UnsupportedQueryError(
                f"GROUP BY over '{join.table.name}': its public domain has {rows:,} rows; "
                "group by coarser public columns.")
        out.append((tuple(indices), select, int(rows)))
    return tuple(out)


def _public_key_sql(key: GroupKey, join: PublicJoin) -> str:
    """The key as the engine statement computes it (total, binary collation), over the
    public table's own columns."""
    return key_sql(replace(key, expr=exp.maybe_parse(_on_public(key.expr, join),
                                                     dialect="duckdb")))


def _sortable(values: list[Any]) -> list[Any]:
    present = [v for v in values if v is not None]
    try:
        present.sort()
    except TypeError:
        pass
    return present + ([None] if None in values else [])
