"""BigQuery's DP aggregates on a table with a privacy unit: per unit and group, then across units.

BigQuery (and ZetaSQL) compute ``COUNT``, ``SUM`` and ``AVG`` in a ``DIFFERENTIAL_PRIVACY``
query in two steps: first per privacy unit *and group*, clamping that per-unit value to
``contribution_bounds_per_group`` (or ``CLAMPED BETWEEN``), then across units. So with a privacy
unit ``AVG`` is the average of the units' averages, and ``SUM(x, contribution_bounds_per_group
=> (0, 10))`` bounds each unit's *total* in a group by 10 — not each row.

privplan answers such a query as the per-unit pre-aggregation it is
(:mod:`privplan.sql.per_unit`, one derived row per unit and group)::

    SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, max_groups_contributed=1)
        item, AVG(quantity, contribution_bounds_per_group => (0, 100)) AS q
    FROM professors GROUP BY item

becomes, with the clause's epsilon and ``max_groups_contributed`` as the query's budget and
group bound, and the bounds as a per-query clamp of the derived column::

    SELECT item, AVG(unit_avg_quantity) AS q
    FROM (SELECT id, item, AVG(quantity) AS unit_avg_quantity FROM professors GROUP BY id, item)
         AS __per_group
    GROUP BY item

``COUNT(*)`` and ``COUNT(x)`` become ``SUM`` of the per-unit counts, ``SUM`` the ``SUM`` of the
per-unit sums, ``AVG`` the ``AVG`` of the per-unit averages. The derived columns' bounds follow
from the policy (the base rows are bounded and clamped to the policy's bounds first, which stays
authoritative); explicit bounds then clamp the derived value, intersected with those bounds —
clamping a value that already lies in [L, H] to [lo, hi] equals clamping it to
[max(lo, L), min(hi, H)] when they overlap, so the answer is BigQuery's statistic on privplan's
bounded rows. Why this is private: the derived table is a function of each unit's own rows
(:mod:`privplan.sql.per_unit`), and the clamp only narrows the range the noise is calibrated to.

This form is used only where privplan's row-level form would compute another statistic: an
``AVG`` or explicit bounds in a clause query over one table with a privacy unit. Everything else
keeps the direct path.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, NoReturn

from sqlglot import exp

from privplan.errors import UnsupportedQueryError
from privplan.policy import Policy, TablePolicy
from privplan.sql.bigquery import clause_budget, rewrite_dp_aggregates, split_dp_clause
from privplan.sql.bigquery_policy import ContributionBounds, check_dp_options, private_tables
from privplan.sql.joins import conjuncts
from privplan.sql.parse import parse_statement
from privplan.sql.per_unit import split_per_unit

__all__ = ["per_group_query"]

_PER_GROUP: dict[type[exp.Expr], str] = {exp.Count: "COUNT", exp.Sum: "SUM",
                                               exp.Avg: "AVG"}
_ACROSS = {"COUNT": exp.Sum, "SUM": exp.Sum, "AVG": exp.Avg}
ALIAS = "__per_group"


def per_group_query(sql: str, policy: Policy, kind: type,
                    budget: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    """``(privplan SQL, budget keywords)`` of a clause query that needs BigQuery's per-unit,
    per-group aggregation (see the module docstring), or None for any other query."""
    if not isinstance(sql, str):
        return None
    stripped, opts = split_dp_clause(sql)
    if opts is None:
        return None
    text, bounds = rewrite_dp_aggregates(stripped)
    tree = parse_statement(text)
    tables = private_tables(tree, policy)
    if len(tables) != 1 or tables[0].is_row_level or not isinstance(tree, exp.Select):
        return None
    if all(b.per_row for b in bounds) and not any(True for _ in tree.find_all(exp.Avg)):
        return None  # (per-row bounds are row clamps: the direct path applies them)
    table = tables[0]
    check_dp_options(opts, policy, tree, bounds, per_group=True)
    native, derived = _rewrite(tree, table)
    found = split_per_unit(native, policy)
    if found is None:  # (the rewrite makes exactly the shape split_per_unit reads)
        _refuse(tree, "this query cannot be answered per unit and group",
                "Send COUNT/SUM/AVG of columns of one table, grouped by its columns.")
    clamps = _clamps(bounds, derived, found.table)
    return native, clause_budget(opts, kind, budget, {"clamps": clamps} if clamps else {})


def _refuse(node: exp.Expr, why: str, fix: str) -> NoReturn:
    raise UnsupportedQueryError(
        f"DIFFERENTIAL_PRIVACY query with a privacy unit refused: {why}. With AVG or "
        "contribution bounds, BigQuery aggregates per privacy unit and group first, and "
        f"privplan does the same for COUNT, SUM and AVG of a column. {fix} "
        f"(in `{node.sql(dialect='duckdb')[:80]}`)")


def _rewrite(tree: exp.Select, table: TablePolicy) -> tuple[str, dict[str, tuple[str, str]]]:
    """The per-group form of ``tree`` and its derived columns (name -> (function, argument))."""
    for clause in ("joins", "distinct", "qualify", "windows"):
        if tree.args.get(clause):
            _refuse(tree, f"{clause.upper()} is not supported in this form",
                    f"Remove {clause.upper()}.")
    source = tree.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table):
        _refuse(tree, "the query must read one table", "Read the table directly.")
    group = tree.args.get("group")
    keys = list(group.expressions) if group is not None else []
    for key in keys:
        if not isinstance(key, exp.Column) or key.name.lower() not in table.columns:
            _refuse(key, "a GROUP BY item is not a column of the table",
                    "Group by the table's columns.")
    _check_grouped(tree, {k.name.lower() for k in keys}, table)
    derived: dict[str, tuple[str, str]] = {}   # name -> (function, argument as written)
    by_text: dict[str, str] = {}
    outer = tree.copy()
    for node in list(outer.find_all(exp.AggFunc)):
        func = _PER_GROUP.get(type(node))
        arg = node.this
        if func is None or isinstance(arg, exp.Distinct):
            _refuse(node, f"{node.sql(dialect='duckdb')} is not supported in this form",
                    "Send it as a query of its own.")
        if not (isinstance(arg, exp.Star) and func == "COUNT") and not (
                isinstance(arg, exp.Column) and arg.name.lower() in table.columns):
            _refuse(node, "an aggregate's argument is not a column of the table",
                    "Aggregate a column (or COUNT(*)).")
        argument = "*" if isinstance(arg, exp.Star) else arg.name.lower()
        per_unit = f"{func}({argument})"
        name = by_text.get(per_unit)
        if name is None:  # a readable name: it labels the mechanisms in explain
            name = f"unit_{func.lower()}_{'rows' if argument == '*' else argument}"
            while name in table.columns or name in derived:
                name += "_"
            by_text[per_unit] = name
            derived[name] = (func, argument)
        node.replace(_ACROSS[func](this=exp.column(name)))
    if not derived:
        _refuse(tree, "it releases no aggregate", "Add COUNT, SUM or AVG.")
    unit = table.privacy_unit
    key_names = [k.name.lower() for k in keys]
    inner_keys = [unit] + [k for k in key_names if k != unit]
    items = [exp.column(k) for k in inner_keys] + [
        exp.alias_(exp.Count(this=exp.Star()) if arg == "*"
                   else {"COUNT": exp.Count, "SUM": exp.Sum, "AVG": exp.Avg}[func](
                       this=exp.column(arg)), name)
        for name, (func, arg) in derived.items()]
    inner = exp.Select(expressions=items).from_(source.this.copy())
    where = tree.args.get("where")
    if where is not None:
        inner.set("where", where.copy())
    inner = inner.group_by(*[exp.column(k) for k in inner_keys])
    outer.set("where", _on_keys(where.this, set(key_names)) if where is not None else None)
    outer.set("from_", exp.From(this=exp.Subquery(this=inner,
                                                  alias=exp.TableAlias(
                                                      this=exp.to_identifier(ALIAS)))))
    for column in list(outer.find_all(exp.Column)):
        if column.table and not column.find_ancestor(exp.Subquery):
            column.set("table", None)
    return outer.sql(dialect="duckdb"), derived


def _on_keys(condition: exp.Expr, keys: set[str]) -> exp.Where | None:
    """The top-level AND terms of the inner WHERE that read group keys only, for the outer
    query too: every derived row satisfies them already (the inner query kept only such rows),
    so the outer region analysis stays true, and keys they list (`item IN ('pen', 'book')`,
    BigQuery's public groups) remain the released domain, zero-filled as in BigQuery."""
    terms: list[exp.Expr] = []
    for node in conjuncts(condition):  # type: ignore[arg-type]
        names = {c.name.lower() for c in node.find_all(exp.Column)}
        if names and names <= keys and not list(node.find_all(exp.Subquery)):
            column_free = node.copy()
            for col in column_free.find_all(exp.Column):
                col.set("table", None)
            terms.append(column_free)
    if not terms:
        return None
    return exp.Where(this=exp.and_(*terms) if len(terms) > 1 else terms[0])


def _check_grouped(tree: exp.Select, keys: set[str], table: TablePolicy) -> None:
    """Refuse a selected column of the table that is neither grouped nor aggregated, in the
    user's words (the per-group rewrite would otherwise report it missing from the derived
    table, a name the user never wrote)."""
    for item in tree.expressions:
        for column in item.find_all(exp.Column):
            name = column.name.lower()
            if (name in table.columns and name not in keys
                    and column.find_ancestor(exp.AggFunc) is None):
                _refuse(column, f"column '{column.name}' is neither grouped nor aggregated "
                        "(releasing it would return raw row values)",
                        f"Add it to GROUP BY, or aggregate it (e.g. AVG({column.name})).")


def _clamps(bounds: list[ContributionBounds], derived: dict[str, tuple[str, str]],
            table: TablePolicy) -> dict[str, tuple[Fraction, Fraction]]:
    """Per-query clamps of the derived columns: each explicit bound intersected with the
    derived column's own bounds (see the module docstring)."""
    out: dict[str, tuple[Fraction, Fraction]] = {}
    for b in bounds:
        if b.per_row:
            raise UnsupportedQueryError(
                f"{b.func}({b.argument}) with {b.syntax} next to AVG or per-group bounds: "
                "privplan answers such a query per unit and group, with COUNT, SUM and AVG "
                "only. Send it as a query of its own.")
        argument = b.argument.strip().strip('"`').split(".")[-1].lower() or "*"
        names = [n for n, (f, a) in derived.items() if f == b.func and a == argument]
        if not names:
            continue
        if b.lower > b.upper:
            raise UnsupportedQueryError(
                f"{b.func}({b.argument}) with {b.syntax}: the lower bound is above the upper "
                "bound.")
        col = table.columns[names[0]]
        lo, hi = Fraction(str(col.lower)), Fraction(str(col.upper))
        clamp = (max(b.lower, lo), min(b.upper, hi))
        if clamp[0] > clamp[1]:
            raise UnsupportedQueryError(
                f"{b.func}({b.argument}) with {b.syntax}: the bounds do not overlap the range "
                f"[{col.lower}, {col.upper}] a unit's per-group value can take under the "
                "policy, so every unit would be clamped to one end. Write bounds that overlap "
                "that range.")
        if clamp != (lo, hi):
            previous = out.get(names[0])
            if previous is not None and previous != clamp:
                raise UnsupportedQueryError(
                    f"{b.func}({b.argument}) is bounded two different ways in one query: give "
                    "one range (or send the aggregates as separate queries).")
            out[names[0]] = clamp
    return out
