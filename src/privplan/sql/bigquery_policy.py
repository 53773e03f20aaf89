"""BigQuery's DP options as values, and their checks against the policy (which stays
authoritative; see :mod:`privplan.sql.bigquery` for the rules and why each holds)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sqlglot import exp

from privplan.accounting.definitions import ApproxDP, PrivacyValue, PureDP
from privplan.errors import PolicyError, UnsupportedQueryError
from privplan.policy import Policy, TablePolicy

__all__ = ["ContributionBounds", "DPOptions", "check_dp_options", "per_query_clamps",
           "private_tables"]


@dataclass(frozen=True)
class DPOptions:
    """The options of one ``WITH DIFFERENTIAL_PRIVACY OPTIONS(...)`` clause (None = not given).

    ``epsilon``/``delta`` are exact fractions; ``privacy_unit_column`` is the column name as
    written (lower-cased, qualifier dropped); ``clause`` is the removed text.
    """

    epsilon: Fraction | None = None
    delta: Fraction | None = None
    max_groups_contributed: int | None = None
    privacy_unit_column: str | None = None
    group_selection_strategy: str | None = None  # PUBLIC_GROUPS: groups joined in the query
    min_privacy_units_per_group: int | None = None  # raises the partition-selection threshold
    max_rows_contributed: int | None = None  # a unit's rows in this query (<= the policy's)
    listed_groups: bool | None = None  # public groups joined in: the listed keys are the domain
    clause: str = ""

    def budget(self) -> PureDP | ApproxDP:
        """``PureDP(epsilon)`` when delta is absent or 0, else ``ApproxDP(epsilon, delta)``."""
        if self.epsilon is None:
            raise PolicyError(
                "the DIFFERENTIAL_PRIVACY clause sets no epsilon: write OPTIONS(epsilon=..., ...) "
                "or pass the budget as an argument (epsilon=...).")
        if not self.delta:
            return PureDP(self.epsilon)
        return ApproxDP(self.epsilon, self.delta)

    def budget_for(self, kind: type) -> PureDP | ApproxDP:
        """The budget as a value of the session's privacy definition ``kind``.

        A pure-DP session charges ``PureDP(epsilon)`` even when ``delta`` > 0: the answer is then
        ε-DP, which implies (ε, δ)-DP, so the query gets at least the guarantee it asked for. An
        (ε, δ) session charges ``ApproxDP(epsilon, delta or 0)``.
        """
        self.budget()  # checks that epsilon is set
        assert self.epsilon is not None
        # (exact Fractions: a float could overflow or round)
        options = {"epsilon": self.epsilon, "delta": self.delta or Fraction(0)}
        if issubclass(kind, PrivacyValue) and set(kind.keywords()) <= set(options):
            return kind(**{n: options[n] for n in kind.keywords()})  # type: ignore[return-value]
        name = (f"{kind.title()} ({', '.join(f'{n}=' for n in kind.keywords())})"
                if issubclass(kind, PrivacyValue) else kind.__name__)
        raise PolicyError(
            f"this query's DIFFERENTIAL_PRIVACY options give an (ε, δ) budget but the session "
            f"composes {name}; privplan composes one privacy definition per session. Remove "
            f"epsilon/delta from OPTIONS and pass the budget as an argument instead.")


@dataclass(frozen=True)
class ContributionBounds:
    """Explicit clamping bounds written in the query (``CLAMPED BETWEEN`` or
    ``contribution_bounds_per_group``), removed from the SQL and checked against the policy."""

    func: str             # COUNT, SUM, AVG, VAR_POP, STDDEV_POP or PERCENTILE_CONT
    argument: str         # the aggregate's argument as written ("*" for COUNT(*))
    lower: Fraction
    upper: Fraction
    syntax: str           # the removed text, for messages
    per_row: bool = False  # contribution_bounds_per_row (VAR_POP, STDDEV_POP, PERCENTILE_CONT)


def private_tables(statement: exp.Expression, policy: Policy) -> list[TablePolicy]:
    tables: dict[str, TablePolicy] = {}
    for node in statement.find_all(exp.Table):
        if not isinstance(node.this, exp.Identifier):
            continue
        full = f"{node.db}.{node.name}" if node.db else node.name
        try:
            t = policy.table(full)
        except PolicyError:
            continue  # the plan builder reports it with its location
        if not t.public:
            tables[t.name] = t
    return list(tables.values())


def check_dp_options(opts: DPOptions, policy: Policy, statement: exp.Expression,
                     bounds: Sequence[ContributionBounds] = (), *,
                     per_group: bool = False) -> None:
    """Refuse options that contradict (would weaken) the policy; see the module docstring.
    ``per_group``: the query is answered with BigQuery's per-unit, per-group aggregation
    (:mod:`privplan.sql.bigquery_per_group`), where AVG and explicit bounds mean what they
    mean in BigQuery, so only the unit and the group bound are checked here."""
    for table in private_tables(statement, policy):
        _check_unit(opts, table)
        _check_groups(opts, table)
        if per_group:
            continue
        for b in bounds:
            _check_bounds(b, table)
        if not table.is_row_level and any(True for _ in statement.find_all(exp.Avg)):
            raise UnsupportedQueryError(
                f"AVG in a DIFFERENTIAL_PRIVACY query over table '{table.name}' refused: in "
                "BigQuery, AVG with a privacy unit is the average of per-unit averages, while "
                "privplan's AVG is the average over rows, a different statistic. Ask for "
                "SUM(x) and COUNT(x) (or AVG(x) without the clause, passing epsilon=) for the "
                "row average.")


def _check_unit(opts: DPOptions, table: TablePolicy) -> None:
    asked = opts.privacy_unit_column
    if table.is_row_level:
        if asked is not None:
            raise PolicyError(
                f"privacy_unit_column={asked} does not match the policy: table '{table.name}' "
                "is protected at row level (each row is one person). Protecting per "
                f"'{asked}' is a different guarantee that privplan enforces only when the policy "
                f"declares it: set `privacy_unit: {asked}` and `max_rows_per_unit:` for "
                f"tables.{table.name}, or remove privacy_unit_column from OPTIONS.")
        return
    if asked is None:
        # the policy declares the unit, as a BigQuery privacy policy on a table or view does:
        # queries over such a view omit privacy_unit_column and are protected per that unit
        return
    if asked != table.privacy_unit.lower():
        raise PolicyError(
            f"privacy_unit_column={asked} does not match the policy: table '{table.name}' is "
            f"protected per '{table.privacy_unit}'. A query cannot choose another privacy unit; "
            f"write privacy_unit_column={table.privacy_unit}.")


def _check_groups(opts: DPOptions, table: TablePolicy) -> None:
    m = opts.max_groups_contributed
    if m is None or table.is_row_level:
        return  # a row is in exactly one group: any m >= 1 holds
    declared = table.max_groups_per_unit
    if declared is not None and m > declared:
        raise PolicyError(
            f"max_groups_contributed={m} exceeds the policy's max_groups_per_unit={declared} for "
            f"table '{table.name}': a query may not loosen the policy. Use a value <= {declared} "
            "or remove the option.")


def _check_bounds(b: ContributionBounds, table: TablePolicy) -> None:
    what = f"{b.func}({b.argument}) with {b.syntax}"
    if b.lower > b.upper:
        raise UnsupportedQueryError(f"{what}: the lower bound is above the upper bound.")
    if not table.is_row_level and not b.per_row:
        raise UnsupportedQueryError(
            f"{what} refused on table '{table.name}': BigQuery bounds a privacy unit's total "
            f"per group, while privplan clamps each row to the policy's bounds and keeps at "
            f"most max_rows_per_unit={table.max_rows_per_unit} rows per unit, so the answer "
            "would be another statistic. Remove the bounds; the policy's are applied.")
    if b.func == "COUNT":
        if not b.lower <= 1 <= b.upper:
            raise UnsupportedQueryError(
                f"{what} refused: each row adds exactly 1 to a count, so bounds that exclude 1 "
                "would change the count. Remove the bounds.")
        return
    name = b.argument.strip().strip('"`').split(".")[-1].lower()
    col = table.columns.get(name)
    if col is None or not re.fullmatch(r"[\w.\"`]+", b.argument.strip()):
        raise UnsupportedQueryError(
            f"{what} refused: explicit bounds are checked against the policy's bounds of a "
            f"column of '{table.name}', and '{b.argument}' is not one.")
    if col.type not in ("int", "float"):
        raise UnsupportedQueryError(
            f"{what} refused: column '{name}' has type {col.type}; only numeric columns can be "
            "summed or averaged.")
    lower, upper = col.require_bounds(f"{b.func}({name})", table.name)
    lo, hi = Fraction(str(lower)), Fraction(str(upper))
    if b.lower < lo or b.upper > hi:
        raise PolicyError(
            f"{what} is wider than the policy's bounds [{lower}, {upper}] for column '{name}' "
            f"of table '{table.name}': a query may not widen them. Write bounds "
            f"{lower} and {upper}, or remove them (the policy's bounds are applied).")
    # narrower bounds are applied to this query (clamps, see apply_dp_clause)


def per_query_clamps(bounds: Sequence[ContributionBounds],
            tables: Sequence[TablePolicy]) -> dict[str, Any]:
    """Per-query clamping bounds of SUM/AVG arguments narrower than the policy's (column ->
    (lo, hi)), for the builder; one column clamped two ways in one query is refused."""
    out: dict[str, tuple[Fraction, Fraction]] = {}
    for b in bounds:
        if b.func == "COUNT":
            continue
        name = b.argument.strip().strip('"`').split(".")[-1].lower()
        declared = [(Fraction(str(c.lower)), Fraction(str(c.upper))) for t in tables
                    for n, c in t.columns.items() if n == name and c.has_bounds]
        if declared and all(d == (b.lower, b.upper) for d in declared):
            continue  # the policy's own bounds
        if out.get(name, (b.lower, b.upper)) != (b.lower, b.upper):
            raise UnsupportedQueryError(
                f"column '{name}' is clamped to two different ranges in one query: give one "
                "range per column (or send the aggregates as separate queries).")
        out[name] = (b.lower, b.upper)
    return {"clamps": out} if out else {}
