"""``explain``: what a query would release, what it would cost against the ledger, and why.

Everything here is computed from the query text, the policy and the ledger — never from the
data — so it can be shown before anything is spent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from privplan.accounting.solver import Composition
from privplan.analysis.region_sql import region_to_sql
from privplan.mechanisms.accuracy import interval_halfwidth
from privplan.planning.costs import PlannedQuery
from privplan.planning.memo import derived
from privplan.sql.joins import display


@dataclass(frozen=True)
class MechanismExplanation:
    id: str
    label: str
    table: str
    region: str
    partition: str | None
    sensitivity: int
    noise: str
    noise_std: float | None  # None for a quantile (its error is in ranks: rank_error_95)
    halfwidth_95: float | None
    cost: Any
    threshold: int | None = None
    notes: tuple[str, ...] = ()
    relations: tuple[str, ...] = ()
    step: Any = 1  # the grid step of a SUM (1 for counts): sensitivity and noise are in steps
    rank_error_95: float | None = None  # a quantile: rows of rank from the true one (95%)
    quantile: Any = None  # a quantile's q (a Fraction)
    grid: tuple[int, int] = (0, 0)  # a quantile's candidate cells lo..hi (times ``step``)

    @property
    def sensitivity_in_units(self) -> float:
        """The sensitivity in the column's own units (grid steps times the step)."""
        return float(self.sensitivity * self.step)

    def noise_in_units(self) -> str:
        """The noise described in the column's units (the mechanism works in grid steps)."""
        if self.step == 1:
            return self.noise
        kind, _, rest = self.noise.partition(", ")
        step = float(self.step)
        if rest.startswith("scale "):
            return f"{kind}, scale {float(rest.split()[1]) * step:.6g}"
        if "(sigma " in rest:
            sigma = float(rest.split("(sigma ")[1].rstrip(")"))
            return f"{kind}, sigma {sigma * step:.4g}"
        return self.noise

    def label_denominator(self) -> int:
        """The denominator b of a quantile's q = a/b (its utilities are scaled by b)."""
        return self.quantile.denominator if self.quantile is not None else 1

    def noise_grid(self) -> str:
        """A quantile's candidate values: lo..hi in steps of the grid."""
        lo, hi = self.grid
        return f"{float(lo * self.step):g}..{float(hi * self.step):g} step {float(self.step):g}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "label": self.label, "table": self.table, "region": self.region,
            "partition": self.partition, "sensitivity": self.sensitivity,
            "step": str(self.step), "sensitivity_in_units": self.sensitivity_in_units,
            "noise": self.noise,
            "noise_std": self.noise_std, "halfwidth_95": self.halfwidth_95,
            "cost": self.cost.describe(), "threshold": self.threshold, "notes": list(self.notes),
            "relations": list(self.relations), "rank_error_95": self.rank_error_95,
        }


@dataclass(frozen=True, eq=False)
class Explanation:
    """The plan of one query with its costs: print it, or use ``to_dict()`` / ``to_json()``.

    ``witness_source`` is the worst case's text, or a function that makes it: the text walks
    every mechanism the worst case affects — for a long ledger, its whole history — while most
    answers are never asked why, so a charge hands over the function and :attr:`witness`
    calls it on first use (then keeps the text and drops the function, which holds the
    accounting's state; see :meth:`settle`)."""

    sql: str
    mechanisms: tuple[MechanismExplanation, ...]
    query_cost: Any
    query_rule: str
    marginal: Any
    total_before: Any
    projected_total: Any
    budget: Any
    witness_source: str | Callable[[], str] = field(repr=False)
    within_budget: bool
    notes: tuple[str, ...] = field(default=())

    @property
    def witness(self) -> str:
        """The worst case in words: who (which record or unit) pays the most, and for what."""
        source = self.witness_source
        if not isinstance(source, str):
            source = source()
            object.__setattr__(self, "witness_source", source)  # (frozen: the text replaces it)
        return source

    def settle(self) -> None:
        """Make the worst case's text now and drop the function that made it. A session
        settles its last answers' explanations before its next charge, so an answer kept by
        the caller holds the text, never the state of the accounting it was charged against
        (which grows with the ledger: keeping it per answer would grow memory quadratically)."""
        _ = self.witness

    def __getstate__(self) -> dict[str, Any]:
        self.settle()  # (pickled with its text: the function is not data)
        return dict(self.__dict__)

    def _key(self) -> tuple[Any, ...]:
        return (self.sql, self.mechanisms, self.query_cost, self.query_rule, self.marginal,
                self.total_before, self.projected_total, self.budget, self.witness,
                self.within_budget, self.notes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Explanation):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key()[:-3])  # (not the worst case: hashing should not make it)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sql": self.sql,
            "mechanisms": [m.to_dict() for m in self.mechanisms],
            "query_cost": self.query_cost.describe(),
            "query_rule": self.query_rule,
            "marginal_cost": self.marginal.describe(),
            "total_before": self.total_before.describe(),
            "projected_total": self.projected_total.describe(),
            "budget": self.budget.describe(),
            "within_budget": self.within_budget,
            "worst_case": self.witness,
            "notes": list(self.notes),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def __str__(self) -> str:
        lines = [f"Query: {' '.join(self.sql.split())}", "Mechanisms:"]
        for m in self.mechanisms:
            part = f" per group of ({m.partition})" if m.partition else ""
            thr = f", released if noisy count >= {m.threshold}" if m.threshold is not None else ""
            if m.rank_error_95 is not None:  # a quantile: its error is in rows of rank
                lines.append(
                    f"  {m.id}  {m.label}{part}\n"
                    f"      region: {m.region}\n"
                    f"      rank sensitivity {m.sensitivity} (in 1/{m.label_denominator()} rows), "
                    f"{m.noise} over values {m.noise_grid()} (95%: within {m.rank_error_95:.3g} "
                    f"rows of rank of the true quantile); cost {m.cost.describe()}")
                lines.extend(f"      note: {note}" for note in m.notes)
                lines.extend(f"      {rel}" for rel in m.relations)
                continue
            lines.append(
                f"  {m.id}  {m.label}{part}\n"
                f"      region: {m.region}\n"
                f"      sensitivity {m.sensitivity_in_units:.6g}, {m.noise_in_units()} "
                f"(std {m.noise_std:.3g}, 95% ±{m.halfwidth_95:.3g}){thr}; cost "
                f"{m.cost.describe()}" + (f"; on a grid of step {float(m.step):g}"
                                          if m.step != 1 else "")
            )
            for note in m.notes:
                lines.append(f"      note: {note}")
            for rel in m.relations:
                lines.append(f"      {rel}")
        lines += [
            f"Query cost (composed): {self.query_cost.describe()}  [{self.query_rule}]",
            f"Marginal cost against the ledger: {self.marginal.describe()}",
            f"Total: {self.total_before.describe()} -> {self.projected_total.describe()} "
            f"of budget {self.budget.describe()}"
            + ("" if self.within_budget else "  ** EXCEEDS THE BUDGET: would be refused **"),
            f"Worst case: {self.witness}",
        ]
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        """A few lines (under ~400 characters): the query, its cost, and each released
        column's noise. ``str()`` / ``print()`` show the whole plan, the notebook the HTML one;
        a debugger or a REPL echo should not print a page of dataclass fields."""
        sql = " ".join(self.sql.split())
        flag = "" if self.within_budget else "  ** EXCEEDS THE BUDGET **"
        cost = (f"  cost {self.query_cost.describe()} (marginal {self.marginal.describe()}); "
                f"total {self.projected_total.describe()} of {self.budget.describe()}{flag}")
        lines = [f"<Explanation: {_cut(sql, 70)}", cost]
        for m in self.mechanisms[:3]:
            if m.rank_error_95 is not None:
                error = f"95% within {m.rank_error_95:.3g} rows of rank"
            else:
                error = f"95% ±{m.halfwidth_95:.3g}"
            lines.append(f"  {_cut(m.label, 28)}: {m.noise.partition(',')[0]}, {error}")
        if len(self.mechanisms) > 3:
            lines.append(f"  ... and {len(self.mechanisms) - 3} more mechanism(s)")
        return "\n".join(lines) + "\n  (print() it for the full plan)>"

    def _repr_html_(self) -> str:
        """The notebook view of what :meth:`__str__` says (see
        :func:`privplan.views.html.explanation_html`)."""
        from privplan.views.html import explanation_html

        return explanation_html(self)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


MAX_HISTORY = 200  # earlier queries compared one by one (the solver itself sees all of them)


def queries_of(mechanisms: Sequence[Any]) -> dict[str, list[Any]]:
    """Admitted mechanisms grouped by query id (the part of ``q7.c0_m1`` before the dot), in
    the accountant's order (by table, then admission) — it already holds them, so no
    ledger read is needed."""
    out: dict[str, list[Any]] = {}
    for m in mechanisms:
        out.setdefault(m.id.split(".", 1)[0], []).append(m)
    return out


def _relations(spec: Any, history: dict[str, list[Any]]) -> tuple[str, ...]:
    """Which earlier queries this mechanism is provably disjoint from, and which it may overlap.

    Disjoint regions on the same table cannot be affected by one record, so their costs compose
    by max (parallel composition, CSF'24 Thm IV.11); overlapping ones add (Thm IV.3). Queries on
    other tables are counted as overlapping: one person may be in every private table.
    """
    disjoint, overlap = [], []
    for query_id, mechanisms in list(history.items())[-MAX_HISTORY:]:
        if all(m.table == spec.table and not m.region.may_overlap(spec.region)
               for m in mechanisms):
            disjoint.append(query_id)
        else:
            overlap.append(query_id)
    out = []
    if disjoint:
        out.append(f"disjoint from {', '.join(disjoint)}: parallel composition (Thm IV.11), "
                   "no extra cost while under their max")
    if overlap:
        out.append(f"may overlap {', '.join(overlap)}: their costs add for a record in both "
                   "(sequential composition, Thm IV.3)")
    return tuple(out)


_MECHANISM_ID = re.compile(r"\bq\d+\.c\d+_m\d+\b")
_REPEATED_NAME = re.compile(r"(?<!\w)([^,;()]+?), \1(?=,|$| and|;| \(|\))")


def readable_witness(text: str, mechanisms: Sequence[Any],
                     queries: Mapping[str, str] | None = None,
                     int_columns: Collection[str] = ()) -> str:
    """A composition's worst case with every admitted mechanism named by its query and
    aggregate (``q3 SUM(cost)``) instead of its internal id, and its bounds on integer columns
    spelled as the ``queries`` (SQL texts) spell them (:func:`in_query_terms`)."""
    out = _readable_witness(text, {m.id: f"{m.id.split('.', 1)[0]} {m.label}".strip()
                                   for m in mechanisms})
    return in_query_terms(out, (queries or {}).values(), int_columns)


def session_witness(session: Any) -> str:
    """The worst case of everything ``session`` released, in the words of its queries."""
    ints = {name for t in session.policy.private_tables() for name, c in t.columns.items()
            if c.type == "int"}
    floats = {name for t in session.policy.private_tables() for name, c in t.columns.items()
              if c.type != "int"}
    return readable_witness(session.accountant.total.witness_detail,
                            session.accountant.mechanisms(),
                            {e.query_id: e.sql for e in session.ledger.entries()},
                            ints - floats)


_BOUND = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*) (<=|>=|<|>) (-?\d+)\b(?!\.)")
_SQL_BOUND = re.compile(r"(?i)\b([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>)\s*(-?\d+)\b(?![.\w])")


def _closed(op: str, value: int) -> tuple[str, int]:
    """An integer bound as a closed one: ``< 18`` is ``<= 17``, ``> 7`` is ``>= 8``."""
    return {"<": ("<=", value - 1), ">": (">=", value + 1)}.get(op, (op, value))


def in_query_terms(text: str, queries: Iterable[str], int_columns: Collection[str]) -> str:
    """``text`` with each one-sided bound on an integer column (``age <= 17``) spelled as a
    query spells the same bound (``age < 18``), so the worst case reads in the queries' own
    terms; bounds no query spells alike are left as they are. Only integer columns: there
    ``< 18`` and ``<= 17`` are the same condition (not so for a float)."""
    if not int_columns:
        return text
    spelled: dict[tuple[str, str, int], str] = {}
    for sql in queries:
        for col, op, value in _SQL_BOUND.findall(sql):
            if col.lower() in int_columns:
                key = (col.lower(), *_closed(op, int(value)))
                spelled.setdefault(key, f"{col.lower()} {op} {int(value)}")

    def spell(match: re.Match[str]) -> str:
        col, op, value = match.group(1), match.group(2), int(match.group(3))
        if col.lower() not in int_columns:
            return match.group(0)
        return spelled.get((col.lower(), *_closed(op, value)), match.group(0))

    return _BOUND.sub(spell, text)


def _readable_witness(text: str, labels: dict[str, str]) -> str:
    """The worst case in the user's words: this query's mechanisms by their aggregate
    (``SUM(cost)``), earlier ones by their query (``q3``), each named once."""
    def name(match: re.Match[str]) -> str:
        ident = match.group(0)
        return labels.get(ident, ident.split(".", 1)[0])

    out = _MECHANISM_ID.sub(name, text)
    previous = None
    while previous != out:  # "q1, q1, SUM(cost)" -> "q1, SUM(cost)"
        previous = out
        out = _REPEATED_NAME.sub(r"\1", out)
    return out


def region_text(measure: Any) -> str:
    """A measure's region as SQL text (:func:`region_to_sql`), once per measure object."""
    return derived(measure, "region_sql", lambda: region_to_sql(measure.region))


def noise_std(noise: Any) -> float:
    """The noise's standard deviation, once per noise object (a pure function of its
    calibration)."""
    return derived(noise, "std", noise.std)


def halfwidth_95(noise: Any) -> int:
    """:func:`~privplan.mechanisms.accuracy.interval_halfwidth` at 95%, once per noise object
    (a pure function of its calibration)."""
    return derived(noise, "halfwidth_95", lambda: interval_halfwidth(noise))


def explain_planned(
    planned: PlannedQuery, preview: Composition, before: Composition, budget: Any,
    history: dict[str, list[Any]] | None = None,
) -> Explanation:
    """The explanation of ``planned`` at ``preview``. With ``history`` (``explain``) the worst
    case's text is made now; without (a charge) it is made on first use
    (:attr:`Explanation.witness`)."""
    labels = {p.spec.id: p.measure.label for p in planned.measures}

    def witness() -> str:
        return _readable_witness(preview.witness_detail, labels)

    mechs = []
    for p in planned.measures:
        scale = float(p.measure.scale)
        core = planned.plan.cores[p.core]
        right = core.private_join[1].name if core.private_join else None

        def show(text: str, joins: tuple[Any, ...] = core.joins, right: str | None = right) -> str:
            return display(text, joins, right) if joins or right else text

        m = p.measure
        quantile = m.kind == "quantile"
        mechs.append(MechanismExplanation(
            id=p.spec.id, label=m.label, table=p.spec.table,
            region=show(region_text(m)),
            partition=show(", ".join(p.spec.partition.keys)) if p.spec.partition else None,
            sensitivity=m.sensitivity, noise=p.noise.describe(),
            noise_std=None if quantile else noise_std(p.noise) * scale,
            halfwidth_95=None if quantile else halfwidth_95(p.noise) * scale,
            cost=p.spec.cost, threshold=p.threshold,
            notes=tuple(show(n) for n in m.region.notes),
            relations=_relations(p.spec, history or {}), step=m.scale,
            rank_error_95=(p.noise.rank_error(m.hi - m.lo + 1, m.sensitivity, m.quantile)
                           if quantile else None),
            quantile=m.quantile, grid=(m.lo, m.hi),
        ))
    notes: list[str] = []
    for core in planned.plan.cores:
        notes.extend(core.notes)
    return Explanation(
        sql=planned.plan.sql, mechanisms=tuple(mechs), query_cost=planned.composition.cost,
        query_rule=planned.composition.rule, marginal=preview.cost - before.cost,
        total_before=before.cost, projected_total=preview.cost, budget=budget,
        witness_source=witness() if history is not None else witness,
        within_budget=bool(preview.cost <= budget),
        notes=tuple(notes),
    )
