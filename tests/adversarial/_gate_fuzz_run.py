"""Running the gate fuzz: each query on neighbouring datasets, the checks, the report.

For every generated query, a session over the base dataset and one over the base plus one
extra row of edge values (in each private table the query reads) run ``explain`` then ``sql``
with the same seeded noise, in the same order of queries (their histories stay alike). The
checks, per neighbouring pair:

* the existing fuzz's oracles (``test_fuzz.judge``): only ``PrivplanError``s and never an
  ``InternalError``; no ``ExecutionError`` after the charge; a refusal spends nothing; explain
  and sql agree; the charge is what explain projected; the same outcome class, refusal message,
  cost, columns and charge on both datasets;
* the same ``spent()`` afterwards on both;
* answered on one and ``PostProcessingError`` on the other is allowed only when the outer
  query's failure follows the noisy values: the query is re-run on both datasets with other
  seeds and with noise off, and the divergence must flip somewhere (the answering dataset fails
  on some draw, or the failing one answers); otherwise it is a failure to investigate;
* a released quantile lies within its bounds (the policy's or the query's per-row clamps).

Notes (reported, not failures): a ``PostProcessingError`` on every draw on both datasets (the
query was charged but seems to fail on any answer: DESIGN.md invariant 8 asks for a free
refusal) and the refusal messages, grouped, to look for refusals of reasonable queries.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import privplan as pp
from privplan.errors import PostProcessingError
from privplan.testing import noise_disabled, seeded_noise
from tests.adversarial.test_fuzz import Failure, Outcome, _short, judge

RESEEDS = (11, 12, 13, 14)
"""Seeds of the re-runs that investigate an answer on one dataset and a post-processing
failure on the other (plus one run with noise off)."""

SLOW_QUERY_SECONDS = 30.0
"""A query (explain + sql on one dataset) slower than this is reported as a failure."""


@dataclass
class Case:
    index: int
    cls: str                                   # quantile / nested / bigquery / outer / qlit
    sql: str
    budget: dict[str, Any]
    tables: frozenset[str]                     # the private tables it reads
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)  # quantile outputs


@dataclass
class Batch:
    """Queries run on one set of sessions: a base, one extra row per table, a budget."""

    base: str
    edges: dict[str, str]                      # table -> edge row name
    budget: Any                                # the sessions' total budget
    cases: list[Case]


SessionMaker = Callable[[Any, Any], pp.Session]
"""(DatasetSpec, total budget) -> a session over that dataset."""


def run_one(sess: pp.Session, dataset: str, sql: str, budget: dict[str, Any],
            noise: int | None) -> Outcome:
    """``explain`` then ``sql`` (seeded noise, or noise off for ``None``), with the ledger and
    ``spent()`` before and after."""
    out = Outcome(dataset)
    t0 = time.perf_counter()
    out.entries_before, out.spent_before = len(sess.ledger.entries()), sess.spent()
    try:
        out.explain = sess.explain(sql, **budget)
    except Exception as err:  # noqa: BLE001  (judged: a non-PrivplanError is a failure)
        out.explain = err
    try:
        with (noise_disabled() if noise is None else seeded_noise(noise)):
            out.result = sess.sql(sql, **budget)
    except Exception as err:  # noqa: BLE001  (judged, as above)
        out.result = err
    out.entries_after, out.spent_after = len(sess.ledger.entries()), sess.spent()
    out.seconds = time.perf_counter() - t0
    return out


def verdict(o: Outcome) -> str:
    r = o.result
    return "answered" if isinstance(r, pp.Result) else type(r).__name__


@dataclass
class PairResult:
    case: Case
    base: Outcome
    other: Outcome
    failures: list[Failure]
    notes: list[tuple[str, str]]               # (kind, text)


@dataclass
class Report:
    engine: str
    seconds: float = 0.0
    queries: Counter = field(default_factory=Counter)          # cls -> generated queries
    runs: int = 0                                              # explain+sql runs
    verdicts: Counter = field(default_factory=Counter)         # (cls, verdict) -> pairs
    failures: list[tuple[Case, Failure, tuple[str, str]]] = field(default_factory=list)
    notes: Counter = field(default_factory=Counter)            # (kind, text) -> count
    note_examples: dict[tuple[str, str], str] = field(default_factory=dict)
    slowest: list[tuple[float, str]] = field(default_factory=list)
    explained_by_noise: int = 0


class Sessions:
    """The sessions of one batch: per private table, a pair (the base, and the base plus that
    table's extra row), made on first use. A query runs on the pair of every table it reads,
    so the two sessions of a pair have the same history (the same queries, in order)."""

    def __init__(self, make: SessionMaker, batch: Batch) -> None:
        from tests.adversarial._gate_fuzz_data import DatasetSpec

        self.make, self.batch = make, batch
        self.base_spec = DatasetSpec(batch.base)
        self.made: dict[tuple[str, bool], tuple[str, pp.Session]] = {}

    def get(self, table: str, plus: bool) -> tuple[str, pp.Session]:
        if (table, plus) not in self.made:
            spec = self.base_spec.plus(table, self.batch.edges[table]) if plus \
                else self.base_spec
            self.made[(table, plus)] = (spec.name, self.make(spec, self.batch.budget))
        return self.made[(table, plus)]

    def reset(self, table: str) -> None:
        """Fresh sessions for ``table``'s pair (their histories have parted, as after a
        statement that charged a different number of subqueries on each)."""
        for plus in (False, True):
            made = self.made.pop((table, plus), None)
            if made is not None:
                made[1].close()

    def close(self) -> None:
        for _, sess in self.made.values():
            sess.close()


def run_batches(batches: Iterable[Batch], make: SessionMaker, engine: str = "duckdb",
                investigate: bool = True) -> Report:
    report = Report(engine)
    t0 = time.perf_counter()
    times: list[tuple[float, str]] = []
    for batch in batches:
        sessions = Sessions(make, batch)
        try:
            for case in batch.cases:
                report.queries[case.cls] += 1
                for table in sorted(case.tables & set(batch.edges)):
                    (base_name, base), (name, other) = (sessions.get(table, False),
                                                        sessions.get(table, True))
                    a = run_one(base, base_name, case.sql, case.budget, case.index)
                    b = run_one(other, name, case.sql, case.budget, case.index)
                    report.runs += 2
                    times += [(a.seconds, case.sql), (b.seconds, case.sql)]
                    pair = check_pair(case, a, b, base, other, investigate, report)
                    _record(report, pair)
                    if base.spent() != other.spent():
                        sessions.reset(table)
        finally:
            sessions.close()
    report.seconds = time.perf_counter() - t0
    report.slowest = sorted(times, reverse=True)[:5]
    return report


def _record(report: Report, pair: PairResult) -> None:
    va, vb = verdict(pair.base), verdict(pair.other)
    report.verdicts[(pair.case.cls, va if va == vb else f"{va}|{vb}")] += 1
    for f in pair.failures:
        report.failures.append((pair.case, f, (pair.base.describe(), pair.other.describe())))
    for note in pair.notes:
        report.notes[note] += 1
        report.note_examples.setdefault(note, pair.case.sql)


def check_pair(case: Case, a: Outcome, b: Outcome, sa: pp.Session, sb: pp.Session,
               investigate: bool, report: Report) -> PairResult:
    fails = judge(a, b)
    notes: list[tuple[str, str]] = []
    va, vb = verdict(a), verdict(b)
    noisy = {va, vb} == {"answered", "PostProcessingError"}
    if a.spent_after != b.spent_after and not noisy:
        # (an outer query over several subqueries that fails on one's noisy answer stops
        # before charging the next: then spent() follows the noise, as the outcome does)
        fails.append(Failure("data-dependent spent", "",
                             f"spent() {a.spent_after!r} vs {b.spent_after!r}"))
    fails += _released_types(a, b)
    for o in (a, b):
        if o.seconds > SLOW_QUERY_SECONDS:
            fails.append(Failure("slow query", "", f"{o.dataset}: {o.seconds:.1f} s"))
        fails += _quantile_bounds(case, o)
    if noisy:
        if not investigate or not _flips(case, (a.dataset, sa), (b.dataset, sb), va, vb):
            fails.append(Failure("post-processing failure that noise does not explain", "",
                                 f"{a.dataset}: {va}; {b.dataset}: {vb}, on every re-run"))
        else:
            report.explained_by_noise += 1
    elif va == vb == "PostProcessingError" and investigate:
        if not _flips(case, (a.dataset, sa), (b.dataset, sb), va, vb, want_answer=True):
            notes.append(("charged, then failed on every draw (invariant 8?)",
                          _mask(str(a.result))))
    elif va == vb and va not in ("answered", "PostProcessingError"):
        notes.append((f"refused ({va}) [{case.cls}]", _mask(str(a.result))))
    return PairResult(case, a, b, fails, notes)


def _flips(case: Case, a: tuple[str, pp.Session], b: tuple[str, pp.Session], va: str, vb: str,
           want_answer: bool = False) -> bool:
    """Whether re-runs with other noise give another outcome than the first run on either
    dataset (an answer where it failed, a failure where it answered). Each draw runs on both
    sessions, so their histories stay alike."""
    first = {a[0]: va, b[0]: vb}
    for noise in (None, *RESEEDS):
        flipped = False
        for name, sess in (a, b):
            try:
                with (noise_disabled() if noise is None else seeded_noise(noise)):
                    sess.sql(case.sql, **case.budget)
                got = "answered"
            except PostProcessingError:
                got = "PostProcessingError"
            except pp.PrivplanError as err:
                got = type(err).__name__
            flipped = flipped or (got != first[name] and (not want_answer or
                                                           got == "answered"))
        if flipped:
            return True
    return False


def _released_types(a: Outcome, b: Outcome) -> list[Failure]:
    """Two answers that release the same values must release them in the same dtypes: a dtype
    is part of the answer (an empty frame whose key column is ``object`` on one dataset and
    ``string`` on the other tells which one had a group that partition selection dropped)."""
    if not (isinstance(a.result, pp.Result) and isinstance(b.result, pp.Result)):
        return []
    da, db = a.result.df, b.result.df
    if list(da.columns) != list(db.columns) or not _same_values(da, db):
        return []
    differ = {c: (str(da[c].dtype), str(db[c].dtype)) for c in da.columns
              if str(da[c].dtype) != str(db[c].dtype)}
    if not differ:
        return []
    return [Failure("data-dependent dtype of the same released values", ",".join(differ),
                    f"{len(da)} row(s) on both; dtypes {a.dataset} vs {b.dataset}: {differ}")]


def _same_values(da: Any, db: Any) -> bool:
    if da.shape != db.shape:
        return False
    for c in da.columns:
        for x, y in zip(da[c].tolist(), db[c].tolist()):
            if _missing(x) or _missing(y):
                if not (_missing(x) and _missing(y)):
                    return False
            elif type(x) is not type(y) or x != y:
                return False
    return True


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or \
        str(v) in ("<NA>", "NaT")


def _quantile_bounds(case: Case, o: Outcome) -> list[Failure]:
    if not case.bounds or not isinstance(o.result, pp.Result):
        return []
    out = []
    df = o.result.df
    for column, (lo, hi) in case.bounds.items():
        if column not in df.columns:
            continue
        for v in df[column].tolist():
            bad = v is None or (isinstance(v, float) and math.isnan(v)) or \
                not (lo <= float(v) <= hi)
            if bad:
                out.append(Failure("quantile outside its bounds", column,
                                   f"{o.dataset}: {column} = {v!r} not in [{lo!r}, {hi!r}]"))
                break
    return out


def _mask(text: str) -> str:
    """A refusal message grouped by its first sentence, numbers and quotes masked."""
    first = text.split("\n")[0]
    first = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", "…", first)
    first = re.sub(r"\d+(\.\d+)?(e[+-]?\d+)?", "N", first)
    return _short(first, 150)


def format_report(report: Report, notes: int = 40) -> str:
    lines = [(f"gate fuzz on {report.engine}: {sum(report.queries.values())} queries "
              f"({dict(report.queries)}), {report.runs} explain+sql runs in "
              f"{report.seconds:.1f} s")]
    by_cls: dict[str, list[str]] = {}
    for (cls, v), n in sorted(report.verdicts.items()):
        by_cls.setdefault(cls, []).append(f"{v} {n}")
    for cls, items in by_cls.items():
        lines.append(f"  {cls} (pairs): " + ", ".join(items))
    lines.append(f"  answer/post-processing divergences explained by noise: "
                 f"{report.explained_by_noise}")
    lines.append("  slowest: " + "; ".join(f"{s * 1000:.0f} ms {_short(repr(q), 70)}"
                                           for s, q in report.slowest))
    lines.append(f"  failures: {len(report.failures)}")
    seen: Counter = Counter()
    for case, f, outcomes in report.failures:
        seen[(f.kind, f.key)] += 1
        if seen[(f.kind, f.key)] > 3:
            continue
        lines += [f"== {f.kind} [{f.key}] ({case.cls} #{case.index}, budget {case.budget})",
                  f"   {f.detail}", f"   query: {_short(repr(case.sql), 600)}",
                  *(f"      {o}" for o in outcomes)]
    lines.append(f"  notes ({len(report.notes)} kinds, the most frequent first):")
    for (kind, text), n in report.notes.most_common(notes):
        lines.append(f"   {n:4d} {kind}: {text}")
        lines.append(f"        e.g. {_short(repr(report.note_examples[(kind, text)]), 300)}")
    return "\n".join(lines)
