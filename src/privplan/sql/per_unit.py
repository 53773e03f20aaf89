"""Per-unit pre-aggregation: a DP query over one row per privacy unit.

    SELECT AVG(s) FROM (SELECT pid, SUM(cost) AS s FROM visits GROUP BY pid) AS per_patient

The inner query groups a user-level table by its privacy unit (and, optionally, unit-level
columns, constant per unit): it makes one row per unit, a *derived table*. privplan computes it
from the unit's bounded rows (at most ``max_rows_per_unit``, chosen as for any query), with every
aggregated column clamped to its bounds, so each derived column has bounds that follow from the
policy alone:

==================  ======================================  ============================
inner aggregate     derived bounds (k rows per unit)         NULL
==================  ======================================  ============================
COUNT(*)            [1, k] (a unit appears with >= 1 row)    never
COUNT(col)          [0, k]                                   never
SUM(col)            [min(lo, k·lo), max(hi, k·hi)]           if col is nullable
AVG / MIN / MAX     [lo, hi]                                 if col is nullable
==================  ======================================  ============================

The outer query is then an ordinary DP query over the derived table, whose privacy unit is the
same column with one row per unit (``max_rows_per_unit: 1``).

**One row per unit and group.** When the inner GROUP BY also lists columns that vary within a
unit (``SELECT item, AVG(q) FROM (SELECT id, item, AVG(quantity) AS q FROM professors GROUP BY
id, item) GROUP BY item`` — BigQuery's per-unit, per-group aggregation), a unit has one derived
row per group it touches: at most m = min(k, ``max_groups_per_unit``) rows, each from at most
min(k, ``max_rows_per_group_per_unit``) base rows (the k in the table above). The derived table
then declares ``max_rows_per_unit: m`` (enforced like any unit bound), and — when the outer
query groups by those columns, so that a unit has at most one derived row per outer group —
``max_groups_per_unit: m`` and ``max_rows_per_group_per_unit: 1``. Its name ends in
``/rows=m`` so that its model follows from its name on replay.

Why this is sound: a unit's derived row is a function of that unit's own rows only (the inner
query groups by the unit, and the bounded rows of one unit do not depend on another's), so
adding or removing one unit adds or removes at most one derived row (m rows, one per group,
in the per-group form): the derived table is a private table with that many rows per unit, neighbouring exactly when the base tables are (under
add/remove; *replace* neighbours could make a row appear and another change, so it is refused).
The derived table is accounted as a table of its own, one per inner query text, and its costs
are added to the other tables' (a person is in every table), like a join of private tables.

**What the outer query is charged** (:func:`charge_on_base`, the one place it is decided).
Charged on the derived table, a unit pays for m derived rows of up to c base rows each: for
``SUM(s)`` of a derived ``SUM(x)``, m·c·max(|lo|, |hi|), while the same answer written directly
(``SUM(x) ... GROUP BY g``) pays for the unit's k rows: k·max(|lo|, |hi|). So a plain ``SUM`` of
a derived SUM, COUNT(*) or COUNT(col) column (so ``SUM(n)`` is ``COUNT(*)``) is accounted on
the *base* table instead, as the direct query is: one base row moves it by at most one row's
bound (a derived row of n rows holds at most n rows' worth, clamped to c rows' worth), its
region is the inner WHERE's and the outer constraints on inner keys, and its partition the
outer keys with at most m groups of c rows per unit (c only when each outer group holds one
derived row of the unit). Why this is sound: those rows are the base table's own bounded rows
(the same k rows the direct query reads, chosen by :func:`bounded_source` before any WHERE),
and a unit's outer sums are sums of its rows' values, so the accountant's unit of k rows in at
most m groups of c covers them, for L1 and L2 alike (Σ over groups of (rows·bound)²). Only
when it costs less than the derived table's charge, and never for a SUM that reads a derived
value otherwise (an outer WHERE or FILTER on it, an expression, a clamp, the centred sums of
AVG/VAR): those, MIN/MAX/quantiles and ``COUNT(*)`` of derived rows (m per unit, one per
group) keep the derived table's charge. Costs on the two tables add up (a unit is in both).

Privacy: a derived table's bounds follow from the policy; a unit changes only its own derived rows.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from fractions import Fraction
from typing import Any, NoReturn

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from privplan.accounting.model import Growth, Partition, unit_multiplier
from privplan.analysis.predicates import region_of
from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet
from privplan.errors import PrivplanError, UnsupportedQueryError
from privplan.mechanisms import grid as gridlib
from privplan.policy import ColumnPolicy, TablePolicy
from privplan.sql.bigquery import without_clauses
from privplan.sql.derive import Edit, extent, moved, placed, spliced
from privplan.sql.parse import parse_statement, remember
from privplan.sql.plan import Measure
from privplan.sql.tokens import matching_paren

__all__ = ["MARK", "ROWS", "BaseCharge", "DerivedTable", "PerUnit", "charge_on_base",
           "derived_model_columns", "derived_rows", "split_per_unit"]

MARK = "/per-unit/"
"""In a derived table's name: ``<base table>/per-unit/<hash of the inner query>``."""
ROWS = "/rows="
"""Suffix of a derived table's name when a unit may have several derived rows (one per unit
and group): ``<base>/per-unit/<hash>/rows=<m>``, so that its model follows from its name."""


@dataclass(frozen=True)
class DerivedColumn:
    """One derived column: the inner aggregate (``func`` of ``column``) under its alias."""

    name: str
    func: str  # count_star, count, sum, avg, min, max
    column: str | None


@dataclass(frozen=True)
class DerivedTable(TablePolicy):
    """A derived table's policy, and what it is made of: its base table, the inner WHERE, its
    columns and keys, and how many base rows one derived row may hold (``rows_per_derived``),
    so that :func:`charge_on_base` can account its SUM and COUNT columns in base rows."""

    base: Any = None  # TablePolicy of the base table
    where_region: Any = None  # the inner WHERE's region over the base columns (None: no WHERE)
    derived: tuple[DerivedColumn, ...] = ()
    inner_keys: frozenset[str] = frozenset()  # the inner GROUP BY (the unit included)
    group_keys: frozenset[str] = frozenset()  # those that vary within a unit
    rows_per_derived: int = 1


@dataclass(frozen=True)
class PerUnit:
    """A statement over a per-unit pre-aggregation: the base table, the inner query, the
    derived table's policy and columns, and the statement with the subquery replaced by the
    derived table's name."""

    base: Any  # TablePolicy
    inner_sql: str
    where_sql: str  # ``SELECT COUNT(*) FROM <base> [WHERE <inner where>]``: planned as any
    # query, it checks the inner WHERE and gives its total form (the inner query itself
    # groups by the unit, which a DP query may not)
    outer_sql: str  # the statement as written, its subquery replaced by the derived table
    table: Any  # TablePolicy of the derived table
    keys: tuple[str, ...]
    columns: tuple[DerivedColumn, ...]
    source: str = ""  # the statement as written: where the where-statement's positions point
    where_tree: exp.Expression | None = field(default=None, compare=False, repr=False)

    def where_statement(self) -> exp.Expression:
        """The tree of :attr:`where_sql`, from the statement's one parse (a copy: sqlglot
        trees are mutable); its positions are in :attr:`source`."""
        assert self.where_tree is not None
        return self.where_tree.copy()


def _refuse(node: exp.Expression, what: str, why: str, fix: str) -> NoReturn:
    raise UnsupportedQueryError(f"{what}: {why} {fix} (in `{node.sql(dialect='duckdb')[:80]}`)")


def split_per_unit(sql: str, policy: Any) -> PerUnit | None:
    """The per-unit pre-aggregation of ``sql``, or None when ``sql`` is not a SELECT over one
    subquery that groups a user-level private table by its privacy unit (everything else
    goes the usual way)."""
    if not isinstance(sql, str) or sql.upper().count("SELECT") < 2 or without_clauses(sql) != sql:
        return None  # (a DP clause: BigQuery's per-group door, or a DP subquery)
    try:
        tree = parse_statement(sql)  # (the planner's one parse of this text: sql.parse)
    except (PrivplanError, SqlglotParseError, TokenError, ValueError):
        return None
    if not isinstance(tree, exp.Select) or tree.args.get("joins") or tree.args.get("with"):
        return None
    source = tree.args.get("from_")
    sub = source.this if source is not None else None
    if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select):
        return None
    inner = sub.this
    base = _base_table(inner, policy)
    if base is None or base.public or base.is_row_level:
        return None
    group = inner.args.get("group")
    keys = [k for k in (group.expressions if group is not None else [])]
    key_names = [k.name.lower() for k in keys if isinstance(k, exp.Column)]
    if base.privacy_unit not in key_names:
        return None  # not grouped by the unit: an outer query over a DP subquery, if anything
    if base.neighbourhood != "add_remove":
        _refuse(inner, "per-unit pre-aggregation refused",
                f"table '{base.name}' uses the replace neighbourhood, under which one unit's "
                "change can add a derived row and change another.",
                "Use add_remove for this table, or aggregate its rows directly.")
    if len(key_names) != len(keys) or any(n not in base.columns for n in key_names):
        _refuse(inner, "per-unit pre-aggregation refused",
                f"the inner GROUP BY may list only the privacy unit '{base.privacy_unit}' and "
                "other columns of the table, by name.",
                "Group the inner query by the unit and plain columns.")
    for clause in ("having", "order", "limit", "offset", "joins", "distinct", "qualify"):
        if inner.args.get(clause):
            _refuse(inner, "per-unit pre-aggregation refused",
                    f"the inner query may not have {clause.upper()} (it would make rows depend "
                    "on other units).", f"Remove {clause.upper()} from the inner query.")
    columns = _derived_columns(inner, key_names, base)
    text = inner.sql(dialect="duckdb")
    shape = _shape(base, key_names, _outer_keys(tree))
    name = f"{base.name.lower()}{MARK}{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    if shape.rows > 1:
        name += f"{ROWS}{shape.rows}"
    table = dc_replace(_derived_table(name, base, key_names, columns, shape),
                       where_region=_inner_region(inner, base))
    outer_sql = _over_derived(sql, tree, sub, name)
    check = inner.copy()
    check.set("expressions", [exp.Count(this=exp.Star(), big_int=True)])  # (as parsed)
    check.set("group", None)
    return PerUnit(base=base, inner_sql=text, where_sql=check.sql(dialect="duckdb"),
                   outer_sql=outer_sql, table=table, keys=tuple(key_names),
                   columns=tuple(columns), source=sql, where_tree=check)


def _over_derived(sql: str, tree: exp.Select, sub: exp.Subquery, name: str) -> str:
    """The statement as written with its parenthesised subquery replaced by the derived
    table (its alias kept as written); its tree, derived from the one parse, is kept for the
    text (:func:`remember`: the statement is parsed once). When the subquery's place in the
    text cannot be found, the text is the tree written out (and parsed again when planned)."""
    alias = sub.args.get("alias")
    table = exp.Table(this=exp.to_identifier(name, quoted=True),
                      alias=alias.copy() if alias is not None else exp.TableAlias(
                          this=exp.to_identifier("per_unit")))
    outer = tree.copy()
    outer.set("from_", exp.From(this=table))
    span = _subquery_span(sql, sub)
    if span is None:
        return str(outer.sql(dialect="duckdb"))
    written = table.this.sql(dialect="duckdb")
    edit = Edit(span[0], span[1], written + ("" if alias is not None else " AS per_unit"))
    text = spliced(sql, [edit])
    derived = moved(outer, text, [edit])
    put = derived.args["from_"].this
    placed(put.this, text, span[0])
    if alias is None:
        placed(put.args["alias"].this, text, span[0] + len(written) + len(" AS "))
    remember(text, derived)
    return text


def _subquery_span(sql: str, sub: exp.Subquery) -> tuple[int, int] | None:
    """Where the parenthesised ``(SELECT …)`` of ``sub`` is written in ``sql`` (from its
    ``(`` to its ``)``), or None if the tokens do not show it plainly."""
    inner = extent(sub.this)
    if inner is None:
        return None
    try:
        tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    except (TokenError, ValueError):
        return None
    opens = [i for i, t in enumerate(tokens) if t.token_type == TokenType.L_PAREN
             and t.start < inner[0]]
    for i in reversed(opens):
        close = matching_paren(tokens, i)
        if close is None or tokens[close].start <= inner[1]:
            continue
        if tokens[i + 1].token_type != TokenType.SELECT:
            return None
        return tokens[i].start, tokens[close].end + 1
    return None


def _inner_region(inner: exp.Select, base: Any) -> Region | None:
    """The inner WHERE's region over the base table's columns (None: no WHERE), for
    :func:`charge_on_base`; a WHERE the analysis cannot read is the whole table (sound: the
    region only narrows which measures a unit's change reaches)."""
    where = inner.args.get("where")
    if where is None:
        return None
    node = where.this.copy()
    for col in list(node.find_all(exp.Column)):
        col.set("table", None)
        col.set("db", None)
        col.set("catalog", None)
    types = {name: c.type for name, c in base.columns.items()}
    try:
        return region_of(node, types)
    except Exception:  # noqa: BLE001 - (checked before the charge, as the inner query's WHERE)
        return Region.full("inner WHERE not analysed")


def _base_table(inner: exp.Select, policy: Any) -> Any:
    source = inner.args.get("from_")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or inner.args.get("joins"):
        return None
    try:
        return policy.table(table.sql(dialect="duckdb"))
    except Exception:  # noqa: BLE001 - not a policy table: the usual path reports it
        return None


_FUNCS: dict[type[exp.Expression], str] = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg",
                                           exp.Min: "min", exp.Max: "max"}


def _derived_columns(inner: exp.Select, keys: list[str], base: Any) -> list[DerivedColumn]:
    out: list[DerivedColumn] = []
    for item in inner.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column) and node.name.lower() in keys:
            if isinstance(item, exp.Alias) and item.alias.lower() != node.name.lower():
                _refuse(item, "per-unit pre-aggregation refused",
                        "a key of the inner query keeps its own name.",
                        f"Write {node.name} without an alias.")
            continue
        func = _FUNCS.get(type(node))
        if func is None or not isinstance(item, exp.Alias):
            _refuse(item, "per-unit pre-aggregation refused",
                    "each inner column must be a group key or COUNT, SUM, AVG, MIN or MAX of "
                    "one column, named with AS.",
                    "Write e.g. SELECT pid, SUM(cost) AS total FROM t GROUP BY pid.")
        arg = node.this
        if func == "count" and (arg is None or isinstance(arg, exp.Star)):
            out.append(DerivedColumn(item.alias.lower(), "count_star", None))
            continue
        if not isinstance(arg, exp.Column) or arg.name.lower() not in base.columns:
            _refuse(item, "per-unit pre-aggregation refused",
                    "the inner aggregates must each read one column of the table (no "
                    "DISTINCT, expressions or FILTER).", "Aggregate a column.")
        column = base.columns[arg.name.lower()]
        if func != "count" and (column.type not in ("int", "float") or not column.has_bounds):
            _refuse(item, "per-unit pre-aggregation refused",
                    f"{func.upper()}({column.name}) needs a numeric column with declared "
                    "lower/upper bounds (they bound the derived column).",
                    f"Declare bounds for '{column.name}' in the policy.")
        out.append(DerivedColumn(item.alias.lower(), func, column.name))
    names = [c.name for c in out] + keys
    if len(set(names)) != len(names):
        _refuse(inner, "per-unit pre-aggregation refused", "two inner columns share a name.",
                "Give each a distinct alias.")
    return out


@dataclass(frozen=True)
class Shape:
    """How many derived rows one unit may have (``rows``), how many base rows feed one derived
    row (``rows_per_derived``), and whether each unit has at most one derived row in each group
    of the outer query (``one_per_outer_group``)."""

    rows: int
    rows_per_derived: int
    one_per_outer_group: bool
    group_keys: frozenset[str] = frozenset()


def _shape(base: Any, keys: list[str], outer_keys: set[str] | None) -> Shape:
    """One derived row per unit when the inner keys are the unit and unit-level columns; else
    one per unit *and group* of the other keys (BigQuery's per-group contributions): a unit
    then has at most min(k, max_groups_per_unit) derived rows, each from at most
    min(k, max_rows_per_group_per_unit) of its k bounded rows."""
    k = int(base.max_rows_per_unit)
    group_keys = {n for n in keys if n != base.privacy_unit and not base.columns[n].unit_level}
    if not group_keys:
        return Shape(1, k, True)
    groups = base.max_groups_per_unit
    per_group = base.max_rows_per_group_per_unit
    rows = min(k, groups) if groups else k
    one = outer_keys is not None and group_keys <= outer_keys
    return Shape(rows, min(k, per_group) if per_group else k, one, frozenset(group_keys))


def _outer_keys(tree: exp.Select) -> set[str] | None:
    """The outer GROUP BY's plain column names (None when it groups by anything else)."""
    group = tree.args.get("group")
    if group is None:
        return set()
    names = {k.name.lower() for k in group.expressions if isinstance(k, exp.Column)}
    return names if len(names) == len(group.expressions) else None


def _derived_table(name: str, base: Any, keys: list[str], columns: list[DerivedColumn],
                   shape: Shape) -> DerivedTable:
    k = shape.rows_per_derived
    cols: dict[str, Any] = {}
    for key in keys:
        # (unit_level is not set: with one row per unit every column is constant per unit)
        cols[key] = dc_replace(base.columns[key], unit_level=False)
    for c in columns:
        if c.func in ("count_star", "count"):
            cols[c.name] = ColumnPolicy(c.name, "int", 1 if c.func == "count_star" else 0, k,
                                        nullable=False)
            continue
        src = base.columns[c.column]
        lo, hi = src.lower, src.upper
        if c.func == "sum":
            lo, hi = min(lo, k * lo), max(hi, k * hi)
        cols[c.name] = ColumnPolicy(c.name, src.type if c.func != "avg" else "float", lo, hi,
                                    nullable=src.nullable,
                                    resolution=src.resolution if c.func == "sum" else None)
    per_group = shape.rows > 1 and shape.one_per_outer_group
    return DerivedTable(name=name, columns=cols, privacy_unit=base.privacy_unit,
                        neighbourhood="add_remove", max_rows_per_unit=shape.rows,
                        max_groups_per_unit=shape.rows if per_group else None,
                        max_rows_per_group_per_unit=1 if per_group else None,
                        base=base, derived=tuple(columns), inner_keys=frozenset(keys),
                        group_keys=shape.group_keys, rows_per_derived=k)


def derived_rows(name: str) -> int:
    """How many rows one unit may have in the derived table called ``name`` (its suffix)."""
    _, _, rows = name.partition(ROWS)
    return int(rows) if rows else 1


def derived_model_columns(base: Any) -> frozenset[str]:
    """The unit-level columns of any derived table of ``base`` (its unit alone), so that the
    accountant's model of a derived table can be rebuilt from its name (ledger replay)."""
    return frozenset({base.privacy_unit})


# ------------------------------------------------------------- SUM and COUNT in base rows


@dataclass(frozen=True)
class BaseCharge:
    """A measure of a derived table accounted on its base table (:func:`charge_on_base`): its
    sensitivity is one base row's, its region and partition are over the base table's columns."""

    measure: Measure
    table: Any  # TablePolicy of the base table
    region: Region
    partition: Partition | None
    weight: Fraction  # its provisional cost per row, so that a unit's total is as it was
    # on the derived table: the budget splits as before, and this measure's noise is smaller


_ADDITIVE = ("sum", "count", "count_star")


def charge_on_base(core: Any, m: Measure, partition: Partition | None,
                   growth: Callable[[Measure], Growth]) -> BaseCharge | None:
    """``SUM(d)`` over a derived SUM or COUNT column d, accounted in base rows on the base table,
    or None (then it is charged on the derived table, ``partition`` being its partition there).

    A derived row is the sum of the base rows of its unit and inner group, so a unit's derived
    rows add up at most its k bounded rows, and the outer SUM moves by at most one base row's
    bound per base row: a mechanism of the base table, whose unit model (k rows, at most m
    groups of c rows when the outer groups hold one derived row each) is the direct query's.
    Only a plain, uncentred SUM whose region and keys read only the inner keys qualifies (a
    derived row's base rows then all share its keys, and all lie in that region or none do);
    and only when this costs less than the derived table's charge, which stays sound."""
    table = core.table_policy
    if (not isinstance(table, DerivedTable) or m.kind != "sum" or m.centre
            or m.expression is not None or int(table.base.max_rows_per_unit) < 2):
        return None
    col = next((c for c in table.derived if c.name == m.column and c.func in _ADDITIVE), None)
    keys = [key.column for key in core.keys]
    if col is None or any(key is None or key not in table.inner_keys for key in keys):
        return None
    region = _base_region(m, table)
    if region is None:
        return None
    rebased = dc_replace(m, sensitivity=_base_row_bound(col, table, m), per_row=True)
    part = _base_partition(core, table, [key for key in keys if key is not None])
    power = 2 if growth(rebased) == "square" else 1  # (the privacy loss grows as Δ^power)
    derived = _multiplier(growth(m), int(core.max_rows_per_unit), partition)
    based = _multiplier(growth(rebased), int(table.base.max_rows_per_unit), part)
    if based * rebased.sensitivity ** power >= derived * m.sensitivity ** power:
        return None
    return BaseCharge(rebased, table.base, region, part, Fraction(derived, based))


def _base_row_bound(col: DerivedColumn, table: DerivedTable, m: Measure) -> int:
    """The most one base row can add to ``SUM(d)`` on the measure's grid.

    A derived row of n base rows holds n values in [lo, hi] (clamped; a float on its SUM grid,
    :mod:`privplan.rewrite.per_unit_sql`), a SUM of them in [n·lo, n·hi] (COUNT(*): n, COUNT:
    [0, n]); on the measure's grid, rounding to nearest stays within n times the grid points
    enclosing [lo, hi] (those are integers, and the rounding is monotone). The measure then
    clamps it to [m.lo, m.hi], at most c base rows' worth (the accountant never counts more than
    c rows of a unit in a derived row): so the bound is the largest |clamp(n·e)| / min(n, c)
    over the ends e and n = 1..k (NULLs only leave rows out)."""
    if col.func == "count_star":
        lo = hi = Fraction(1)
    elif col.func == "count":
        lo, hi = Fraction(0), Fraction(1)
    else:
        src = table.base.columns[col.column]
        if src.type == "int":  # (integer sums are exact: the values themselves)
            lo, hi = Fraction(str(src.lower)), Fraction(str(src.upper))
        else:
            res, glo, ghi = gridlib.sum_grid(src)
            lo, hi = glo * res, ghi * res
    step = Fraction(m.resolution)
    ends = (math.floor(lo / step), math.ceil(hi / step))
    c = table.rows_per_derived
    worst = max(Fraction(abs(min(max(n * e, m.lo), m.hi)), min(n, c))
                for n in range(1, int(table.base.max_rows_per_unit) + 1) for e in ends)
    return max(1, math.ceil(worst))


def _base_region(m: Measure, table: DerivedTable) -> Region | None:
    """``m``'s region over the base table: its constraints on inner keys (a derived row's keys
    are its base rows'), and the inner WHERE's region; None when it constrains a derived value
    (other than the summed column's NOT NULL, which its NULL base rows leave out anyway)."""
    boxes = []
    for box in m.region.boxes:
        kept = {}
        for column, values in box.constraints:
            if column in table.inner_keys:
                kept[column] = values
            elif column != m.column or values != ColumnSet.not_null():
                return None
        boxes.append(Box.of(kept))
    inner = table.where_region if table.where_region is not None else Region.full()
    return Region.of(boxes, m.region.notes).intersect(inner)


def _base_partition(core: Any, table: DerivedTable, keys: list[str]) -> Partition | None:
    """The outer GROUP BY over the base table: a unit meets at most m groups (it keeps m derived
    rows), and, when the outer keys hold every inner key that varies within a unit (one derived
    row of the unit per group), at most c of its base rows in each."""
    if not keys:
        return None
    m = int(table.max_rows_per_unit)
    groups = min(core.max_groups_per_unit or m, m, core.max_rows_per_query or m)
    one = table.group_keys <= set(keys)
    return Partition(keys=tuple(keys), key_columns=tuple(keys), max_groups_per_unit=groups,
                     max_rows_per_group=table.rows_per_derived if one else None)


def _multiplier(growth: Growth, rows: int, part: Partition | None) -> int:
    """What the accountant charges one unit of ``rows`` rows, in one-row costs
    (:func:`~privplan.accounting.model.unit_multiplier`; costs grow as Δ or Δ²)."""
    return unit_multiplier(growth, rows, partitioned=part is not None,
                           max_groups=part.max_groups_per_unit if part else None,
                           max_rows_per_group=part.max_rows_per_group if part else None)
