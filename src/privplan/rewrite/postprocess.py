"""Post-processing: the user's outer query, re-run by DuckDB over the *noisy* table only.

The noisy table holds group keys (public or DP-selected) and noisy measures, nothing else, so
HAVING, ORDER BY, LIMIT and expressions are post-processing of DP outputs (free of privacy cost)
and cannot touch a raw value: a reference to a raw column simply does not bind.
"""

from __future__ import annotations

from sqlglot import exp

from privplan.rewrite.engine_sql import key_column, measure_column
from privplan.sql.builder import is_aggregate
from privplan.sql.plan import AggregateUse, CorePlan


def _num(v: object) -> exp.Expression:
    return exp.convert(v)


def derived_expression(use: AggregateUse, columns: dict[str, str]) -> exp.Expression:
    """The aggregate's value from noisy measures (real units already applied).

    AVG/VAR/STDDEV are clamped into what the declared bounds allow (post-processing, so free),
    and are NULL when the noisy count is below 1 (2 for sample variance), as SQL returns NULL
    for empty groups.
    """
    col = lambda mid: exp.column(columns[mid])  # noqa: E731
    if use.func in ("count",) or (use.func == "sum" and use.sum is None):
        c = col(use.count)
        return c if use.multiplier == 1 else exp.Mul(this=c, expression=_num(use.multiplier))
    if use.func == "sum":
        return col(use.sum)
    c, s = col(use.count), col(use.sum)
    lo, hi = use.lower, use.upper
    safe_c = exp.func("GREATEST", c.copy(), _num(1))
    mean = exp.Div(this=s, expression=safe_c)
    if use.func == "avg":
        value = exp.func("LEAST", exp.func("GREATEST", mean, _num(lo)), _num(hi))
        return _null_below(c, 1, value)
    q = col(use.sum_sq)
    var_pop = exp.Sub(
        this=exp.Div(this=q, expression=safe_c.copy()),
        expression=exp.func("POWER", mean.copy(), _num(2)),
    )
    max_var = ((hi - lo) / 2) ** 2
    var = exp.func("LEAST", exp.func("GREATEST", var_pop, _num(0)), _num(max_var))
    minimum = 1
    if use.func in ("var_samp", "stddev_samp"):
        minimum = 2
        cc = exp.func("GREATEST", c.copy(), _num(2))
        var = exp.Div(
            this=exp.Mul(this=var, expression=cc),
            expression=exp.Paren(this=exp.Sub(this=cc.copy(), expression=_num(1))),
        )
    if use.func.startswith("stddev"):
        var = exp.func("SQRT", var)
    return _null_below(c, minimum, var)


def _null_below(count: exp.Expression, minimum: int, value: exp.Expression) -> exp.Expression:
    cond = exp.LT(this=count.copy(), expression=_num(minimum))
    return exp.Case(ifs=[exp.If(this=cond, true=exp.Null())], default=value)


def hidden_column(item: int, part: str) -> str:
    return f"__hidden{item}_{part}"


def post_select(core: CorePlan, table: str, *, hidden: bool = False) -> exp.Select:
    """The user's SELECT with aggregates and keys replaced by noisy-table columns.

    With ``hidden``, every select item that is one AVG/VAR/STDDEV also carries its noisy
    measures in extra columns (see :func:`hidden_column`), so per-row intervals can be derived
    after ORDER BY/LIMIT; the caller drops them.
    """
    columns = {m.id: measure_column(m) for m in core.measures}
    key_map = {k.sql: key_column(i) for i, k in enumerate(core.keys)}
    s = core.select.copy()

    def replace(node: exp.Expression) -> exp.Expression:
        if is_aggregate(node):
            use = core.aggregates[node.sql(dialect="duckdb")]
            return exp.Paren(this=derived_expression(use, columns))
        if isinstance(node, (exp.Alias, exp.Ordered)) or not isinstance(node, exp.Expression):
            return node
        stripped = node.copy()
        for c in stripped.find_all(exp.Column):
            c.set("table", None)
        if stripped.sql(dialect="duckdb") in key_map and not isinstance(node, exp.Literal):
            return exp.column(key_map[stripped.sql(dialect="duckdb")])
        return node

    items = []
    for item in s.expressions:
        if isinstance(item, exp.Alias):
            items.append(exp.alias_(item.this.transform(replace), item.alias, quoted=True))
        else:
            name = item.name if isinstance(item, exp.Column) else item.sql(dialect="duckdb")
            items.append(exp.alias_(item.transform(replace), name, quoted=True))
    if hidden:
        for i, item in enumerate(s.expressions):
            node = item.this if isinstance(item, exp.Alias) else item
            if not is_aggregate(node):
                continue
            use = core.aggregates[node.sql(dialect="duckdb")]
            if use.func in ("count", "sum"):
                continue
            for part, mid in (("c", use.count), ("s", use.sum), ("q", use.sum_sq)):
                if mid is not None:
                    items.append(exp.alias_(exp.column(columns[mid]), hidden_column(i, part),
                                            quoted=True))
    out = exp.Select(expressions=items).from_(table)
    having = s.args.get("having")
    if having is not None:
        out = out.where(having.this.transform(replace))
    order = s.args.get("order")
    if order is not None:
        out.set("order", order.transform(replace))
    for arg in ("limit", "offset"):
        if s.args.get(arg) is not None:
            out.set(arg, s.args[arg])
    return out
