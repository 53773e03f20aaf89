"""Build the logical plan from a parsed statement and the policy (no data is touched).

Every released value becomes a :class:`~privplan.sql.plan.Measure` with its region (WHERE ∩
FILTER ∩ value-not-NULL ∩ public key domain) and its sensitivity (from the declared bounds on
the integer grid and the rows-per-unit limit). Everything outside the supported subset is
refused with the construct, its position, the reason and the fix.

Privacy: each released value gets a region and sensitivity from text and policy; else it is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from fractions import Fraction
from typing import Any, NoReturn, cast

from sqlglot import exp

from privplan.analysis.predicates import region_of
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet
from privplan.errors import PolicyError, UnsupportedQueryError
from privplan.mechanisms import grid as gridlib
from privplan.mechanisms.exponential import monotone_utility, rank_sensitivity
from privplan.policy import ColumnPolicy, Policy, TablePolicy
from privplan.sql.aggregates import Aggregate, aggregate_of, supported
from privplan.sql.columns_and_keys import (
    NOT_LITERAL,
    ColumnsAndKeys,
    is_aggregate,
    literal_value,
)
from privplan.sql.columns_and_keys import strip_qualifiers as _strip_qualifiers
from privplan.sql.expression_bounds import Bounded, NotBoundable, bound_expression, clamped
from privplan.sql.joins import (
    PublicColumnsLookup,
    private_join_target,
    resolve_joins,
    resolve_private_join,
)
from privplan.sql.locate import with_location
from privplan.sql.measures import _NUMERIC, MeasureBuilder
from privplan.sql.plan import AggregateUse, CorePlan, Measure, MeasureKind, QueryPlan
from privplan.sql.quantiles import quantile_call, within_group_as_arguments
from privplan.sql.validate import NESTED_FIX, NESTED_WHY, refuse, validate_statement


def build_plan(sql: str, statement: exp.Expression, policy: Policy,
               public_columns: PublicColumnsLookup | None = None,
               clamps: Mapping[str, tuple[Any, Any]] | None = None,
               listed_keys_first: bool = False,
               schema_not_null: Callable[[Any], frozenset[str]] | None = None) -> QueryPlan:
    """Validate ``statement`` and turn it into a :class:`QueryPlan` (the statement is copied).

    ``public_columns`` lists the columns of public tables whose policy entry declares none (the
    session reads them from the engine; public schemas are not private). ``clamps``: bounds
    narrower than the policy's for this query's SUM/AVG/VAR of a column (column -> (lo, hi);
    BigQuery's ``CLAMPED BETWEEN``), checked to lie inside the policy's bounds.
    ``listed_keys_first``: keys a WHERE lists are the domain even of a column with public
    values (BigQuery's public groups release exactly the groups joined in).
    ``schema_not_null``: a private table's columns the engine's schema declares NOT NULL (the
    session's catalog; see ``ColumnsAndKeys._public_domain``)."""
    statement = statement.copy()
    validate_statement(sql, statement)
    selects = _union_branches(statement)
    cores = []
    for i, s in enumerate(selects):
        builder = _CoreBuilder(sql, s, policy, f"c{i}", public_columns, clamps)
        builder.listed_keys_first = listed_keys_first
        builder.schema_not_null = schema_not_null
        cores.append(builder.build())
    return QueryPlan(sql=sql, statement=statement, cores=tuple(cores))


def require_selection(core: CorePlan, min_units: int) -> CorePlan:
    """BigQuery's ``min_privacy_units_per_group=N`` on a core: its groups go through DP
    partition selection, whose threshold rises by N - 1 (privplan.planning.costs._selection). A
    query whose groups are public (or that has no GROUP BY) releases every group whatever its
    size, so the option cannot mean there what it means in BigQuery: refused."""
    if core.selection is None:
        raise UnsupportedQueryError(
            "min_privacy_units_per_group applies to groups found by DP partition "
            "selection, and this query's groups are "
            + ("public (released whatever their size)" if core.keys else "one (no GROUP BY)")
            + ". Remove the option, or group by columns without public values.")
    return replace(core, min_units_per_group=min_units)


def limit_rows_per_unit(core: CorePlan, m: int) -> CorePlan:
    """BigQuery's ``max_rows_contributed=m``: the query keeps at most m of each unit's rows
    (the first by the bounded copy's order of the unit's own rows, among those WHERE keeps:
    :func:`privplan.rewrite.engine_sql._group_bounded`), so a unit has at most m rows in any
    group and touches at most m groups: the partition's bounds tighten to min(., m)
    (privplan.planning.costs._partition), which the accountant uses (a unit's rows in a mechanism without GROUP BY are still charged up to the
    policy's k: conservative). Never looser than the policy: m > max_rows_per_unit is refused.
    On a row-level table a unit is one row, so any m >= 1 holds already."""
    if core.unit is None:
        return core
    if m > core.max_rows_per_unit:
        raise PolicyError(
            f"max_rows_contributed={m} exceeds the policy's max_rows_per_unit="
            f"{core.max_rows_per_unit} for table '{core.table}': a query may not loosen the "
            f"policy. Use a value <= {core.max_rows_per_unit} or remove the option.")
    if m == core.max_rows_per_unit:
        return core
    return replace(core, max_rows_per_query=m)


def _union_branches(node: exp.Expression) -> list[exp.Select]:
    if isinstance(node, exp.Union):
        return _union_branches(node.this) + _union_branches(node.expression)
    assert isinstance(node, exp.Select)
    return [node]


class _CoreBuilder(ColumnsAndKeys, MeasureBuilder):
    def __init__(self, sql: str, select: exp.Select, policy: Policy, prefix: str,
                 public_columns: PublicColumnsLookup | None = None,
                 clamps: Mapping[str, tuple[Any, Any]] | None = None) -> None:
        self.public_columns = public_columns
        self.clamps = {k.lower(): v for k, v in (clamps or {}).items()}
        self.sql = sql
        self.select = select
        self.policy = policy
        self.prefix = prefix
        self.measures: dict[tuple[Any, ...], Measure] = {}
        self._virtual: dict[str, tuple[ColumnPolicy, Bounded]] = {}  # expressions as columns
        self._virtual_names: dict[str, str] = {}  # expression SQL -> its name
        self.aggregates: dict[str, AggregateUse] = {}
        self.notes: list[str] = []

    # ------------------------------------------------------------------ entry point
    def build(self) -> CorePlan:
        s = self.select
        self.table, self.alias = self._resolve_table()
        self._check_select_distinct(s)
        for item in s.expressions:
            if isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            ):
                refuse(self.sql, item, "SELECT * refused", "it returns private rows.",
                       "Select aggregates, e.g. SELECT COUNT(*) FROM t.")
        right = private_join_target(s, self.policy)
        self.private_join = None
        if right is not None:
            left = self.table
            self.table = resolve_private_join(self.sql, s, left, self.alias, self.policy)
            self.private_join = (left, right)
            self.alias = None
            self.joins: list = []
        else:
            self.joins = resolve_joins(self.sql, s, self.table, self.alias, self.policy,
                                       self.public_columns)
        self.types = {name: c.type for name, c in self.table.columns.items()}
        self.k = int(self.table.max_rows_per_unit)
        self.unit = None if self.table.is_row_level else self.table.privacy_unit
        self.select_aliases = {
            item.alias.lower(): item.this for item in s.expressions if isinstance(item, exp.Alias)
        }
        within_group_as_arguments(s)
        self._check_columns_everywhere()
        where_node = s.args.get("where")
        where = where_node.this if where_node is not None else None
        if where is not None:
            self._no_aggregates(where, "WHERE")
            where = _strip_qualifiers(where.copy())  # the engine reads the table unaliased
        where_region = region_of(where, self.types)
        self._where_region = where_region
        keys = self._group_keys()
        key_region = where_region
        for key in keys:
            if key.column is not None and key.public_domain is not None:
                key_region = key_region.intersect(
                    Region.column(key.column, ColumnSet.points(
                        [v for v in key.public_domain if v is not None],
                        null=None in key.public_domain)))
        self.key_region = key_region
        self.keys = keys
        self._collect_aggregates()
        if not self.aggregates and not keys:
            refuse(self.sql, s, "query releases no aggregate",
                   "a SELECT without COUNT/SUM/AVG/VAR/STDDEV returns rows or raw keys.",
                   "Add an aggregate, e.g. SELECT hospital, COUNT(*) ... GROUP BY hospital.")
        self._check_ungrouped_columns(keys)
        selection = None
        if keys and not all(k.public_domain is not None or k.public_join is not None
                            for k in keys):
            # user level: the selection counts distinct units, so one unit adds at most 1
            selection = Measure(
                id=f"{self.prefix}_sel", kind="select_count", column=self.unit, condition=None,
                region=where_region,
                sensitivity=1 if self.unit else gridlib.count_sensitivity(self.k),
                label="partition selection (noisy "
                      + ("distinct-unit" if self.unit else "row") + " count over a threshold)",
            )
        return CorePlan(
            table=self.table.name, table_sql=self.table.name, alias=self.alias, where=where,
            where_region=where_region, keys=tuple(keys), measures=tuple(self.measures.values()),
            aggregates=self.aggregates, select=s, selection=selection, notes=tuple(self.notes),
            unit=self.unit, max_rows_per_unit=self.k,
            max_groups_per_unit=self.table.max_groups_per_unit,
            max_rows_per_group=self.table.max_rows_per_group_per_unit,
            unit_level_columns=tuple(sorted(self.table.unit_level_columns())),
            columns=tuple(self.table.columns), joins=tuple(self.joins),
            table_policy=self.table, private_join=self.private_join,
        )

    # ------------------------------------------------------------------ FROM
    def _check_select_distinct(self, s: exp.Select) -> None:
        """DISTINCT over released rows (keys and noisy aggregates) is post-processing, run by
        the outer query; without GROUP BY or an aggregate it would be raw values: refused,
        as is DISTINCT ON."""
        distinct = s.args.get("distinct")
        if distinct is not None and (distinct.args.get("on") is not None or not (
                s.args.get("group") or any(i.find(exp.AggFunc) for i in s.expressions))):
            refuse(self.sql, s, "SELECT DISTINCT refused",
                   "it releases the raw distinct values of private columns.",
                   "Use GROUP BY with COUNT(*): keys are then released only from a public "
                   "domain or through DP partition selection.")

    def _resolve_table(self) -> tuple[TablePolicy, str | None]:
        from_ = self.select.args.get("from_")
        if from_ is None:
            refuse(self.sql, self.select, "SELECT without FROM refused",
                   "there is no private table to aggregate.", "Add FROM <table>.")
        source = from_.this
        if not isinstance(source, exp.Table):
            refuse(self.sql, source, "FROM source refused",
                   "only tables declared in the policy can be queried.",
                   "Write FROM <table> with a table from the policy.")
        name = source.name
        full = f"{source.db}.{name}" if source.db else name
        try:
            table = self.policy.table(full)
        except PolicyError as err:
            raise PolicyError(with_location(str(err), self.sql, source)) from None
        if table.public:
            refuse(self.sql, source, f"table '{table.name}' is public",
                   "privplan answers queries over private tables; a public table needs no noise.",
                   "Query it directly with DuckDB.")
        alias = source.alias or None
        return table, alias

    # ------------------------------------------------------------------ aggregates
    def _collect_aggregates(self) -> None:
        s = self.select
        places = list(s.expressions)
        for clause in ("having", "order"):
            if s.args.get(clause) is not None:
                places.append(s.args[clause])
        found: list[exp.Expression] = []
        for place in places:
            for node in list(place.walk()):
                if is_aggregate(node) and not (
                    isinstance(node, exp.AggFunc) and isinstance(node.parent, exp.Filter)
                ):
                    found.append(node)
                elif isinstance(node, exp.AggFunc) and aggregate_of(node) is None:
                    self._refuse_aggregate(node)
        # SUMs first: an AVG/VAR of a column the query also sums shares that SUM's measure
        # (one mechanism fewer) instead of adding a centred sum of its own
        def is_sum(n: exp.Expression) -> bool:
            row = aggregate_of(n.this if isinstance(n, exp.Filter) else n)
            return row is not None and row.needs("sum") and not row.centred
        for node in sorted(found, key=lambda n: not is_sum(n)):
            self._aggregate(node)

    def _refuse_aggregate(self, node: exp.Expr) -> NoReturn:
        name = node.sql(dialect="duckdb")
        refuse(self.sql, node, f"aggregate {name} refused",
               f"privplan answers {supported()}; other aggregates would release values that "
               "no noise is calibrated for.",
               "Use one of the supported aggregates, or bucket the column and COUNT per bucket.")

    def _aggregate(self, node: exp.Expression) -> None:
        key = node.sql(dialect="duckdb")
        if key in self.aggregates:
            return
        cond: exp.Expression | None = None
        agg = node
        if isinstance(node, exp.Filter):
            cond = node.expression.this
            agg = node.this
        row = aggregate_of(agg)
        if row is None:
            self._refuse_aggregate(agg)
        if row.needs("quantile"):
            self._quantile(key, row, agg, cond)
            return
        for sub in agg.find_all(exp.AggFunc):
            if sub is not agg:
                refuse(self.sql, sub, "nested aggregate refused", NESTED_WHY, NESTED_FIX)
        func = row.label
        arg = agg.this
        if arg is None:
            if not row.counts_rows:
                refuse(self.sql, agg, f"{func}() refused", "it needs a column.",
                       f"Write {func}(<column>).")
            arg = exp.Star()  # COUNT() is COUNT(*) in DuckDB
        distinct, arg = self._distinct(row, arg, agg)
        distinct_units, distinct_values, distinct_grid = (
            distinct == "units", distinct == "values", distinct == "grid")
        arg, case_cond, multiplier = self._unwrap_conditional(arg, row, agg)
        if case_cond is not None:
            cond = case_cond if cond is None else cast(exp.Expression, exp.and_(cond, case_cond))
        if cond is not None:
            self._no_aggregates(cond, "FILTER")
            cond = _strip_qualifiers(cond.copy())
        column: str | None = None
        if isinstance(arg, exp.Column) and arg.name.startswith("__pub"):
            refuse(self.sql, agg, f"{func} over a public table's column refused",
                   "aggregates are computed over the private table's own columns, whose bounds "
                   "the policy declares.", "Aggregate a private column.")
        if isinstance(arg, exp.Column):
            column = arg.name.lower()
            if distinct_grid:
                self.aggregates[key] = self._derive_distinct(key, row, column, cond, agg)
                return
            if not row.counts_rows and not distinct_values and column in self.clamps:
                column = self._clamped_column(column, agg)
        elif isinstance(arg, exp.Star) and not row.counts_rows:
            refuse(self.sql, agg, f"{func}(*) refused",
                   "only COUNT takes *; the other aggregates need a column.",
                   f"Write {func}(<column>), or COUNT(*).")
        elif isinstance(arg, exp.Star) or multiplier is not None:
            column = None
        elif not row.counts_rows and not distinct_values:
            column = self._virtual_column(arg, func)
        else:
            refuse(self.sql, arg, f"{func} over an expression refused",
                   f"the bounds of `{arg.sql(dialect='duckdb')}` are not declared, so its "
                   "sensitivity is unknown.",
                   "Aggregate a column with declared lower/upper bounds, or use "
                   "SUM(CASE WHEN <condition> THEN <column> ELSE 0 END).")
        if distinct_units or distinct_values:
            kind: MeasureKind = "count_units" if distinct_units else "count_distinct"
            m = self._measure(kind, column, cond, f"COUNT(DISTINCT {column})")
            self.aggregates[key] = AggregateUse(sql=key, func=row.name, column=column,
                                                count=m.id)
            return
        use = self._derive(key, row, column, cond, multiplier, agg)
        self.aggregates[key] = use

    def _distinct(self, row: Aggregate, arg: exp.Expression, agg: exp.Expression
                  ) -> tuple[str | None, exp.Expression]:
        """What an aggregate's DISTINCT means, and its column: ``units`` (COUNT(DISTINCT unit):
        one per unit), ``values`` (COUNT(DISTINCT col): one row adds at most one value),
        ``grid`` (SUM/AVG/VAR(DISTINCT col) over the distinct grid values, _derive_distinct);
        None without DISTINCT. Anything else is refused."""
        if not isinstance(arg, exp.Distinct):
            return None, arg
        inner = arg.expressions
        column = inner[0] if len(inner) == 1 and isinstance(inner[0], exp.Column) else None
        if column is not None and row.counts_rows and self.unit \
                and column.name.lower() == self.unit:
            return "units", column
        if column is not None and not column.name.startswith("__pub"):
            return ("values" if row.counts_rows else "grid"), column
        refuse(self.sql, agg, f"{row.label}(DISTINCT ...) refused",
               "privplan answers aggregates of the DISTINCT values of one column "
               "(one row adds at most one distinct value).",
               "Write the aggregate over DISTINCT <column>, or GROUP BY the column "
               "and aggregate per group.")

    def _quantile(self, key: str, row: Aggregate, agg: exp.Expression,
                  cond: exp.Expression | None) -> None:
        """A quantile aggregate (MEDIAN, PERCENTILE_*, QUANTILE_*, APPROX_QUANTILE, MIN, MAX):
        one exponential-mechanism measure (see :mod:`privplan.sql.quantiles`)."""
        call = quantile_call(self.sql, agg, self.table, self.clamps)
        if cond is not None:
            self._no_aggregates(cond, "FILTER")
            cond = _strip_qualifiers(cond.copy())
        cond_sql = cond.sql(dialect="duckdb") if cond is not None else None
        mkey = ("quantile", call.column, cond_sql, call.q)
        m = self.measures.get(mkey)
        if m is None:
            region = self.key_region
            if cond is not None:
                region = region.intersect(region_of(cond, self.types))
            if self.table.columns[call.column].nullable:
                region = region.intersect(Region.column(call.column, ColumnSet.not_null()))
            replace = self.table.neighbourhood == "replace"
            m = Measure(
                id=f"{self.prefix}_m{len(self.measures)}", kind="quantile", column=call.column,
                condition=cond, region=region,
                sensitivity=rank_sensitivity(call.q, replace=replace),
                lo=call.lo, hi=call.hi, resolution=call.resolution, label=call.label,
                per_row=self.k > 1, quantile=call.q,
                monotone=monotone_utility(call.q, replace=replace))
            self.measures[mkey] = m
        self.aggregates[key] = AggregateUse(sql=key, func=row.name, column=call.column,
                                            quantile=m.id, lower=call.lower, upper=call.upper)

    def _unwrap_conditional(
        self, arg: exp.Expression, row: Aggregate, agg: exp.Expression
    ) -> tuple[exp.Expression, exp.Expression | None, Any]:
        """CASE WHEN p THEN v [ELSE NULL|0] END (or IF(p, v, ...)) → (v, p, multiplier)."""
        cond = None
        if isinstance(arg, exp.Case) and arg.this is None and len(arg.args.get("ifs", [])) == 1:
            branch = arg.args["ifs"][0]
            cond, value, default = branch.this, branch.args.get("true"), arg.args.get("default")
        elif isinstance(arg, exp.If):
            cond, value, default = arg.this, arg.args.get("true"), arg.args.get("false")
        else:
            return arg, None, self._literal_multiplier(arg, row, agg)
        zero_ok = row.additive and literal_value(default) == 0  # (adds nothing: a filter)
        if default is not None and not _is_null(default) and not zero_ok:
            refuse(self.sql, arg, f"{row.label}(CASE ...) with this ELSE branch refused",
                   "only ELSE NULL (or ELSE 0 inside SUM) makes the CASE a filter privplan can "
                   "analyse.", "Write AGG(x) FILTER (WHERE <condition>) instead.")
        return value, cond, self._literal_multiplier(value, row, agg)

    def _literal_multiplier(self, value: exp.Expression, row: Aggregate,
                            agg: exp.Expression) -> Any:
        v = literal_value(value)
        if v is NOT_LITERAL:
            return None
        if v is None:
            refuse(self.sql, value, f"{row.label}(NULL) refused", "it is always NULL.",
                   "Aggregate a column.")
        if row.counts_rows:
            return 1
        if row.additive and isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
        refuse(self.sql, agg, f"{row.label} of a constant refused",
               "it is a function of a count only.", "Use COUNT(*) (times the constant).")
        return None  # pragma: no cover

    def _virtual_column(self, arg: exp.Expression, func: str) -> str:
        """A name for an arithmetic expression over bounded columns, with its derived bounds
        (:mod:`privplan.sql.expression_bounds`), used by the measures like a column."""
        try:
            bounded = bound_expression(arg, self.table.columns)
        except NotBoundable as err:
            refuse(self.sql, err.node, f"{func} over an expression refused",
                   f"{err.why}, so the expression's range (and its sensitivity) is unknown.",
                   "Aggregate a column with declared lower/upper bounds, or +, -, * and / by a "
                   "number of such columns, or SUM(CASE WHEN <condition> THEN <column> ELSE 0 "
                   "END).")
        text = _strip_qualifiers(arg.copy()).sql(dialect="duckdb")
        name = self._virtual_names.get(text)
        if name is None:
            name = self._virtual_names[text] = f"__expr{len(self._virtual_names)}"
            sources = [self.table.columns[c] for c in bounded.columns]
            policy = ColumnPolicy(text, "float", bounded.lower, bounded.upper,
                                  nullable=any(c.nullable for c in sources))
            self._virtual[name] = (policy, bounded)
        return name

    def _clamped_column(self, column: str, agg: exp.Expression) -> str:
        """``column`` clamped to this query's narrower bounds, as a virtual column: its SUM's
        sensitivity follows from those bounds, which lie inside the policy's (checked)."""
        lo, hi = (Fraction(str(v)) for v in self.clamps[column])
        col = self.table.columns.get(column)
        if col is None or col.type not in _NUMERIC or not col.has_bounds:
            refuse(self.sql, agg, f"clamping bounds for '{column}' refused",
                   "only a numeric column with declared bounds can be clamped further.",
                   "Remove the bounds.")
        assert col is not None
        plo, phi = Fraction(str(col.lower)), Fraction(str(col.upper))
        if not plo <= lo <= hi <= phi:
            raise PolicyError(
                f"clamping bounds [{lo}, {hi}] for '{column}' are not inside the policy's "
                f"[{col.lower}, {col.upper}]: a query may only narrow them.")
        if (lo, hi) == (plo, phi):
            return column  # the policy's own bounds: the column as it is
        bounded = clamped(column, lo, hi)
        text = f"{column} clamped to [{lo}, {hi}]"
        name = self._virtual_names.get(text)
        if name is None:
            name = self._virtual_names[text] = f"__expr{len(self._virtual_names)}"
            policy = ColumnPolicy(column, "float", lo, hi, nullable=col.nullable,
                                  resolution=col.resolution)
            self._virtual[name] = (policy, bounded)
        return name

    def _col(self, name: str) -> ColumnPolicy:
        """A column's policy, or an expression's (see :meth:`_virtual_column`)."""
        virtual = self._virtual.get(name)
        return virtual[0] if virtual is not None else self.table.columns[name]

    def _label_name(self, column: str) -> str:
        virtual = self._virtual.get(column)
        return virtual[0].name if virtual is not None else column


def _is_null(node: exp.Expression) -> bool:
    return isinstance(node, exp.Null)
