"""The disjointness oracle (``test_disjointness_oracle.py``) on PostgreSQL and Spark sessions.

What it proves
--------------
privplan analyses every query with DuckDB's semantics, whatever the engine; a statement for
PostgreSQL or Spark is rendered for that engine (:mod:`privplan.engines.render`), and what the
renderer cannot carry over exactly is refused before anything is charged
(:mod:`privplan.engines.portable`). Parallel composition is sound on a remote engine only if
that engine, too, never finds a record in two regions privplan judged disjoint. So the pairs
of the DuckDB oracle (the same generator, seeds and literal pools) are asked, as
``SELECT COUNT(*) AS n FROM t WHERE (p1) AND (p2)``, of a privplan session on PostgreSQL and
on Spark over the same candidate rows, with noise disabled (counts are exact), and each answer
is judged twice:

* **privacy** (as on DuckDB): the count is 0, or the query is refused before anything is
  charged (``UnsupportedQueryError`` / ``PolicyError`` with ``spent()`` unchanged). A nonzero
  count is an ``overlap`` (an under-charge: the remote engine computed something the analysis
  did not model), an ``ExecutionError`` is an ``engine error`` after the charge, a refusal that
  spent budget is a ``charged refusal``, any other exception is ``unexpected``;
* **same answer as DuckDB**: each remote layout has a DuckDB *twin*, a table of the same column
  types holding exactly the rows copied to the remote engine, asked the same query by a DuckDB
  session with the same history. Both must give the same count with the same ``spent()``
  before and after, or refuse with the same error class. The one difference allowed is a
  remote refusal by the portable subset (raised in ``engines/portable.py`` or
  ``engines/render.py``, nothing charged) where DuckDB answered, or refused for another reason
  it checks first: those are counted and summarised, not failures. Anything else that differs
  fails (``refused only on <engine>``, ``answered only on <engine>``, ``different refusal``,
  ``different charge``), and so does a twin that overlaps or fails (a DuckDB finding,
  reported as ``DuckDB ...``).

Exact counts make the comparison stronger than comparing seeded releases: with the same exact
count and the same charge, seeded noise releases the same value on every engine (that is
``tests/engine/test_same_answers.py``'s check), and any difference in what an engine computed
shows here as a different count.

Layouts
-------
``data/disjoint_remote_layouts.yaml``: per engine, the candidate rows stored with integers as
BIGINT / INTEGER / SMALLINT, floats as DOUBLE PRECISION / REAL / numeric(18,3), strings as
text in the server's default collation (ICU en-US on the test server) or in case- and
accent-insensitive collations (nondeterministic ICU collations on PostgreSQL, UTF8_LCASE and
UNICODE_CI_AI on Spark), dates as date, timestamps as timestamp and timestamptz (a layout privplan
refuses wholesale on a remote engine, asked only every REFUSED_STRIDE-th pair); the file says
which DuckDB layouts have no remote counterpart and why. Values an engine cannot hold leave its
tables and their twins: on Spark infinite dates and timestamps and years outside 1..9999, on
PostgreSQL dates before 4713 BC or after 5874897 AD.

Cost control
------------
A check (the twin's query and the remote one) costs about 45 ms on PostgreSQL and 0.2 s on
Spark (a Spark job per query). Each checked pair is asked on one remote layout (rotating, so
every layout sees every kind of pair); on Spark, and in PostgreSQL's slow tier, only every
``stride``-th pair is checked (a deterministic sample). The fast tier runs the DuckDB oracle's fast seed, the slow tier its slow
seeds (:data:`TIERS`, with the times measured). A failure's report gives the layout, the pair, the remote statement as the
engine ran it, the engine's own message (privplan withholds it), a shrunk reproducer and, for an
overlap, the witness row (found by bisecting ``id`` through the remote session), as the twin
stores and reads it and as the remote engine reads it.

Run ``python tests/adversarial/test_disjointness_oracle_engines.py [postgres|spark] [slow]``
for the full report.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import privplan as pp
import privplan.testing
from privplan.engines.render import ENGINE_NAMES, render
from privplan.planning.typed_view import typed_source
from privplan.policy import Policy

if not __package__:  # run as a script (see the end of the file): import as part of the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "adversarial"

from ._oracle_support import (
    REFUSALS,
    class_lines,
    first_line,
    group_findings,
    load_data,
    mask,
    rotated,
    timings_line,
)
from .test_disjointness_oracle import (
    FAST_PAIRS,
    FAST_SEEDS,
    POLICY,
    SESSION_QUERIES,
    SLOW_PAIRS,
    SLOW_SEEDS,
    TABLE,
    Layout,
    LayoutRun,
    Node,
    Pair,
    Pool,
    Staging,
    Verdicts,
    disjoint_pairs,
    judged_disjoint,
    load_pools,
    region,
    shrink_pair,
    staging_rows,
)

# -----------------------------------------------------------------------------------------------
# Tiers
# -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tier:
    """Which pairs one engine is asked: the DuckDB oracle's ``seeds`` x ``per_seed`` pairs,
    every ``stride``-th of them, each on one layout (rotating)."""

    seeds: tuple[int, ...]
    per_seed: int
    stride: int
    minimum: int  # disjoint pairs the generator must make (as the DuckDB oracle's)


# (measured on a 2-core machine, each test's call, before the pre-charge gate: PostgreSQL fast
# 300 checks 11-15 s, slow 2000 checks 85-105 s; Spark fast 150 checks 20-35 s, slow 667
# checks 80-95 s; the tables' setup adds ~3 s on PostgreSQL, ~7 s on Spark with its start, the
# harness tests 1 s / 8 s. The gate probes each new query three times more over stand-in rows
# (~70 ms a query on PostgreSQL): the slow tiers ask every second / sixth pair since, the same
# share of the CI's time; every pair is asked of DuckDB by the engine-free oracle)
TIERS: dict[tuple[str, str], Tier] = {
    ("postgres", "fast"): Tier(FAST_SEEDS, FAST_PAIRS, stride=1, minimum=300),
    ("spark", "fast"): Tier(FAST_SEEDS, FAST_PAIRS, stride=2, minimum=300),
    ("postgres", "slow"): Tier(SLOW_SEEDS, SLOW_PAIRS, stride=2, minimum=1800),
    ("spark", "slow"): Tier(SLOW_SEEDS, SLOW_PAIRS, stride=6, minimum=1800),
}

WITNESS_GROUPS = 12
"""At most this many failure classes get a shrunk reproducer (and a witness for an overlap)."""

SHRINK_BUDGET = {"postgres": 40, "spark": 12}
"""Session queries a reproducer's shrinking may spend (Spark's cost ten times PostgreSQL's)."""

REFUSED_STRIDE = 25
"""A layout privplan refuses wholesale (``refused`` in the layouts file) is asked every
REFUSED_STRIDE-th checked pair, besides the rotating layout."""

MORE_PAIRS = 6
"""Pairs listed per failure class besides its reproducer."""

PORTABLE_SOURCES = ("privplan/engines/portable.py", "privplan/engines/render.py")
"""Where the portable subset's refusals are raised (the only refusals allowed to differ)."""

# -----------------------------------------------------------------------------------------------
# Layouts and the remote tables
# -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteLayout:
    """One storage of the policy table on a remote engine: the DuckDB type of each column (the
    twin's; the loaders of tests/servers map them to the engine's types)."""

    name: str
    engine: str  # "postgres" | "spark"
    columns: Mapping[str, str]
    refused: str | None = None  # why privplan refuses every query on it (then asked rarely)

    def twin(self) -> Layout:
        return Layout(self.name, self.columns, {})

    def signature(self, columns: frozenset[str]) -> str:
        """The storage of ``columns`` on this engine (overlaps are grouped by it)."""
        return f"{ENGINE_NAMES[self.engine]}: " + "; ".join(
            f"{c} {self.columns[c]}" for c in sorted(columns))

    def describe(self) -> str:
        cols = ", ".join(f"{c} {t}" for c, t in self.columns.items())
        return f"{ENGINE_NAMES[self.engine]} layout {self.name!r} ({cols}; twin: the same types)"


def load_remote_layouts(engine: str) -> list[RemoteLayout]:
    return [RemoteLayout(spec["name"], engine, dict(spec["columns"]), spec.get("refused"))
            for spec in load_data("disjoint_remote_layouts.yaml")[engine]]


def _temporal(duckdb_type: str) -> bool:
    return duckdb_type.upper().startswith(("DATE", "TIMESTAMP"))


_IN_PYTHON = ("coalesce(TRY_CAST(\"{c}\" AS TIMESTAMP) BETWEEN TIMESTAMP '0001-01-01' AND "
              "TIMESTAMP '9999-12-31 23:59:59.999999', false)")
"""DuckDB: Python's datetime can hold the value of column ``{c}`` (finite, years 1..9999;
compared as a timestamp: DuckDB's ``year`` of a TIMESTAMPTZ before year 1 is the era's)."""


def _outside_python(column: str) -> str:
    """DuckDB: the value of ``column`` is one Python's datetime cannot hold."""
    return f"NOT {_IN_PYTHON.format(c=column)}"


HELD = {
    # PostgreSQL: ±infinity, and (conservatively) 4713 BC .. 5874897 AD (dates; timestamps
    # end in 294276 AD, after DuckDB's last)
    "postgres": ("NOT isfinite(\"{c}\") OR TRY_CAST(\"{c}\" AS DATE) BETWEEN "
                 "DATE '4713-01-01 (BC)' AND DATE '5874897-12-31'"),
    # Spark: years 1 .. 9999, no infinity
    "spark": _IN_PYTHON,
}
"""DuckDB: the engine can hold the date / timestamp in column ``{c}`` (other rows are left out
of the engine's table and of its twin)."""


def twin_frame(con: Any, types: Mapping[str, str]) -> pd.DataFrame:
    """The twin's rows as an object frame (NULL is None, NaN stays NaN), a date or timestamp
    Python cannot hold as DuckDB's text of it (the PostgreSQL loader takes that form)."""
    items = []
    for c, t in types.items():
        items.append(f'"{c}"')
        if _temporal(t):
            items.append(f'CASE WHEN {_outside_python(c)} THEN CAST("{c}" AS VARCHAR) END')
    rows = con.execute(f'SELECT {", ".join(items)} FROM "{TABLE}" ORDER BY id').fetchall()
    out = []
    for row in rows:
        values, k = [], 0
        for t in types.values():
            value = row[k]
            k += 1
            if _temporal(t):
                text = row[k]
                k += 1
                value = value if text is None else text
            values.append(value)
        out.append(values)
    return pd.DataFrame(out, columns=list(types), dtype=object)


# -----------------------------------------------------------------------------------------------
# Answers
# -----------------------------------------------------------------------------------------------


@dataclass
class Answer:
    """A session's answer to one count: the count or the error, the last engine statement it
    ran (DuckDB dialect, before rendering), and ``spent()`` before and after."""

    count: int | None = None
    error: BaseException | None = None
    statement: str | None = None
    spent_before: str = ""
    spent_after: str = ""

    @property
    def refused(self) -> bool:
        return isinstance(self.error, REFUSALS)

    @property
    def charged(self) -> bool:
        return self.spent_before != self.spent_after

    @property
    def portable_refusal(self) -> bool:
        """Refused by the portable subset (raised in engines/portable.py or render.py)."""
        if not self.refused or self.error is None:
            return False
        frames = traceback.extract_tb(self.error.__traceback__)
        return bool(frames) and frames[-1].filename.replace(os.sep, "/").endswith(
            PORTABLE_SOURCES)

    def said(self) -> str:
        if self.error is None:
            return f"count={self.count}"
        return f"{type(self.error).__name__}: {first_line(self.error)}"


class Recorded:
    """A privplan session whose engine records the last statement it runs."""

    def __init__(self, database: Any) -> None:
        self.session = pp.connect(database, policy=POLICY, budget=pp.PureDP(1e9))
        self.last: str | None = None
        engine: Any = self.session.engine
        original = engine.run

        def recording(sql: str, *args: Any, **kw: Any) -> Any:
            self.last = sql
            return original(sql, *args, **kw)

        engine.run = recording

    def ask(self, where: str) -> Answer:
        """privplan's exact answer to ``SELECT COUNT(*) AS n FROM t WHERE <where>``."""
        sess = self.session
        self.last = None
        answer = Answer(spent_before=repr(sess.spent()))
        try:
            with privplan.testing.noise_disabled():
                res = sess.sql(f"SELECT COUNT(*) AS n FROM {TABLE} WHERE {where}", epsilon=1.0)
            answer.count = int(res.df["n"].iloc[0])
        except Exception as err:  # noqa: BLE001 -- every outcome is classified by the caller
            answer.error = err
        answer.statement = self.last
        try:
            answer.spent_after = repr(sess.spent())
        except Exception as err:  # noqa: BLE001
            answer.spent_after = f"spent() raised {type(err).__name__}"
        return answer

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.session.close()


# -----------------------------------------------------------------------------------------------
# One remote layout: the engine's table, its DuckDB twin, paired sessions
# -----------------------------------------------------------------------------------------------


class RemoteRun:
    """The candidate rows in one remote layout and in its DuckDB twin, with a session on each
    (paired: the same queries in the same order, so the same history and charges)."""

    def __init__(self, layout: RemoteLayout, staging: Staging, database: Any,
                 load: Callable[[pd.DataFrame, dict[str, str]], None]) -> None:
        self.layout = layout
        self.engine = ENGINE_NAMES[layout.engine]
        self.twin = LayoutRun(layout.twin(), staging)
        self.types = {"id": "BIGINT", **layout.columns}
        # (rows the engine cannot hold leave the twin too)
        temporal = [c for c, t in self.types.items() if _temporal(t)]
        if temporal:
            self.twin.con.execute(f'DELETE FROM "{TABLE}" WHERE ' + " OR ".join(
                f'NOT ("{c}" IS NULL OR {HELD[layout.engine].format(c=c)})' for c in temporal))
        self.frame = twin_frame(self.twin.con, self.types)
        self.rows = len(self.frame)
        load(self.frame, self.types)
        self.database = database
        self._pair: tuple[Recorded, Recorded] | None = None
        self._probe: tuple[Recorded, Recorded] | None = None
        self._used = {"pair": 0, "probe": 0}

    # -- sessions --------------------------------------------------------------------------
    def _sessions(self, which: str) -> tuple[Recorded, Recorded]:
        current = self._pair if which == "pair" else self._probe
        if current is None or self._used[which] >= SESSION_QUERIES:
            if current is not None:
                for s in current:
                    s.close()
            current = (Recorded(self.twin.con), Recorded(self.database))
            self._used[which] = 0
            if which == "pair":
                self._pair = current
            else:
                self._probe = current
        self._used[which] += 1
        return current

    def reset(self) -> None:
        """New paired sessions at the next query (after the histories diverged)."""
        self._used["pair"] = SESSION_QUERIES

    def ask(self, where: str, which: str = "pair") -> tuple[Answer, Answer]:
        """(DuckDB twin's answer, remote engine's answer) to the count over ``where``."""
        twin, remote = self._sessions(which)
        return twin.ask(where), remote.ask(where)

    def remote_count(self, where: str) -> Answer:
        """The remote engine's answer alone (witness search: a session of its own)."""
        return self._sessions("probe")[1].ask(where)

    def close(self) -> None:
        for pair in (self._pair, self._probe):
            for s in pair or ():
                s.close()
        self._pair = self._probe = None
        self.twin.con.close()

    # -- the remote engine's side of a failure --------------------------------------------
    def rendered(self, statement: str | None) -> str:
        if statement is None:
            return "(no engine statement was run)"
        try:
            return render(statement, self.layout.engine)
        except Exception as err:  # noqa: BLE001
            return f"(cannot render: {first_line(err)}) {statement}"

    def _public(self, sql: str) -> list[tuple[Any, ...]]:
        """``sql`` run by the remote engine's public path (its errors are shown)."""
        engine: Any = self._sessions("probe")[1].session.engine
        # (Spark's own loggers would print a failure's message, values quoted, to stderr)
        with getattr(engine, "_quiet", contextlib.nullcontext)():
            return list(engine.fetch_public(sql))

    def engine_message(self, statement: str | None) -> str:
        """The remote engine's own message for a statement privplan ran (privplan withholds
        it): the statement re-run through the engine's public path, which shows errors."""
        if statement is None:
            return "no engine statement was run"
        try:
            self._public(statement)
        except Exception as err:  # noqa: BLE001
            return first_line(err).removeprefix("a query over the public table failed: ")
        return f"does not fail when re-run on {self.engine}"

    def remote_view(self) -> str:
        """privplan's typed view of the remote table (``... AS t``), in DuckDB's dialect."""
        engine: Any = self._sessions("probe")[1].session.engine
        table = Policy.from_dict(POLICY).table(TABLE)
        table_sql = engine.table_sql(table)
        view = typed_source(table_sql, TABLE, table.columns, engine.columns(table_sql))
        return f'{view} AS "{TABLE}"'

    def remote_row(self, pair: Pair, row_id: int) -> str:
        """The row ``row_id`` as the remote engine reads it through privplan's typed view, and
        both predicates' truth values there."""
        try:
            cols = ", ".join(f'"{c}"' for c in self.types)
            rows = self._public(
                f"SELECT {cols}, ({pair.sql1}) AS p1, ({pair.sql2}) AS p2 FROM "
                f"{self.remote_view()} WHERE id = {row_id}")
        except Exception as err:  # noqa: BLE001
            return f"<{first_line(err)}>"
        if not rows:
            return "<no such row>"
        names = [*self.types, "p1", "p2"]
        return ", ".join(f"{n}={v!r}" for n, v in zip(names, rows[0]))

    def witness(self, pair: Pair) -> str:
        """A row in both regions, found by bisecting ``id`` through the remote session; as the
        twin stores it and reads it (with DuckDB's truth values) and as the remote engine
        reads it."""
        lo, hi = 1, self.twin.last_id
        where = pair.where()
        while lo < hi:
            mid = (lo + hi) // 2
            got = self.remote_count(f"({where}) AND id BETWEEN {lo} AND {mid}")
            if got.count is None:
                return f"(bisection through the session failed: {got.said()})"
            if got.count > 0:
                hi = mid
            else:
                other = self.remote_count(f"({where}) AND id BETWEEN {mid + 1} AND {hi}")
                if not other.count:
                    return "(bisection lost the row: the answer changes when narrowed)"
                lo = mid + 1
        twin = self.twin._describe_row(pair, lo).replace(
            "(plain DuckDB)", "(plain DuckDB, twin)")
        return f"{twin}\n      on {self.engine} (privplan's typed view): {self.remote_row(pair, lo)}"


# -----------------------------------------------------------------------------------------------
# Judging one check
# -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    kind: str | None  # None: passed
    cause: str = ""
    allowed: str | None = None  # a difference that is not a failure (portable refusal)


def _mask(message: str) -> str:
    return mask(message, 200, code=False)


def judge(run: RemoteRun, pair: Pair, twin: Answer, remote: Answer) -> Verdict:
    """Privacy first (the remote answer alone), then DuckDB's own answer, then the same-answer
    comparison (see the module doc)."""
    engine = run.engine
    if remote.error is None and remote.count:
        return Verdict("overlap", run.layout.signature(pair.columns))
    if remote.error is not None and not remote.refused:
        kind = ("engine error" if type(remote.error).__name__ == "ExecutionError"
                else f"unexpected {type(remote.error).__name__}")
        cause = (_mask(run.engine_message(remote.statement)) if kind == "engine error"
                 else _mask(first_line(remote.error)))
        return Verdict(kind, f"{engine}: {cause}")
    if remote.refused and remote.charged:
        return Verdict("charged refusal", f"{engine}: {_mask(first_line(remote.error or ''))}")
    if twin.error is None and twin.count:
        return Verdict("DuckDB overlap", run.layout.signature(pair.columns))
    if twin.error is not None and not twin.refused:
        return Verdict(f"DuckDB {type(twin.error).__name__}", _mask(first_line(twin.error)))
    if twin.refused and twin.charged:
        return Verdict("DuckDB charged refusal", _mask(first_line(twin.error or "")))
    if twin.error is None and remote.error is None:
        if (twin.spent_before, twin.spent_after) != (remote.spent_before, remote.spent_after):
            return Verdict("different charge", engine)
        return Verdict(None)
    if remote.portable_refusal:  # (allowed, whether DuckDB answered or refused another way)
        return Verdict(None, allowed=_mask(first_line(remote.error or ""))[:110])
    if twin.error is None:  # (the remote refused)
        return Verdict(f"refused only on {engine}", _mask(first_line(remote.error or "")))
    if remote.error is None:
        return Verdict(f"answered only on {engine}", f"DuckDB: {_mask(first_line(twin.error))}")
    if type(twin.error) is not type(remote.error):
        return Verdict("different refusal", f"DuckDB {type(twin.error).__name__}, {engine} "
                                            f"{type(remote.error).__name__}: "
                                            f"{_mask(first_line(remote.error))}")
    return Verdict(None)


# -----------------------------------------------------------------------------------------------
# The report
# -----------------------------------------------------------------------------------------------


@dataclass
class Finding:
    kind: str
    cause: str
    pair: Pair
    run: RemoteRun
    twin: Answer
    remote: Answer

    def describe(self) -> str:
        return (f"[{self.run.layout.name}] DuckDB {self.twin.said()[:80]} / {self.run.engine} "
                f"{self.remote.said()[:80]}\n      {self.pair.describe()}")


@dataclass
class RemoteReport:
    engine: str
    tier: str
    verdicts: Verdicts = field(default_factory=Verdicts)
    pairs: int = 0
    checks: Counter[str] = field(default_factory=Counter)  # per layout
    outcomes: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    portable: Counter[str] = field(default_factory=Counter)  # allowed: reason -> count
    findings: list[Finding] = field(default_factory=list)
    details: dict[tuple[str, str], str] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def groups(self) -> dict[tuple[str, str], list[Finding]]:
        return group_findings(self.findings, lambda f: len(f.pair.where()))

    def summary(self) -> str:
        v = self.verdicts
        lines = [
            (f"disjointness oracle on {self.engine} ({self.tier} tier): {v.generated} pairs "
             f"generated, {v.disjoint} judged disjoint, {self.pairs} checked; candidate rows "
             f"per layout: {self.rows}"),
            f"checks per layout (twin + {self.engine} session each): {dict(self.checks)}",
            f"outcomes: {dict(self.outcomes)}; refusals on both: {dict(self.refusals) or 'none'}",
            timings_line(self.timings),
        ]
        if self.portable:
            lines.append(f"answered on DuckDB, refused on {self.engine} by the portable subset "
                         f"(allowed; nothing charged): {sum(self.portable.values())}")
            lines += [f"  {n:5d}  {r}" for r, n in self.portable.most_common(10)]
        if self.findings:
            kinds = Counter(f.kind for f in self.findings)
            lines.append(f"FAILURES: {dict(kinds)} in {len(self.groups())} classes")
        return "\n".join(lines)

    def render(self) -> str:
        out = [self.summary()]
        out += class_lines(self.groups(), self.details, MORE_PAIRS)
        return "\n".join(out)


# -----------------------------------------------------------------------------------------------
# The oracle
# -----------------------------------------------------------------------------------------------


class RemoteOracle:
    """The DuckDB oracle's pairs, asked of one engine's layouts and their twins."""

    def __init__(self, engine: str, runs: Sequence[RemoteRun], pools: Mapping[str, Pool],
                 setup_seconds: float) -> None:
        self.engine, self.runs, self.pools = engine, list(runs), pools
        self.setup_seconds = setup_seconds

    def run(self, tier_name: str) -> RemoteReport:
        tier = TIERS[(self.engine, tier_name)]
        report = RemoteReport(ENGINE_NAMES[self.engine], tier_name)
        report.rows = {r.layout.name: r.rows for r in self.runs}
        report.timings["setup (once)"] = self.setup_seconds
        t0 = time.perf_counter()
        pairs = [p for seed in tier.seeds
                 for p in disjoint_pairs(seed, tier.per_seed, self.pools, report.verdicts)]
        report.timings["generate+analyse"] = time.perf_counter() - t0
        if len(pairs) < tier.minimum:
            raise AssertionError(f"the generator made too few disjoint pairs ({len(pairs)})")
        t0 = time.perf_counter()
        chosen = pairs[::tier.stride]
        report.pairs = len(chosen)
        usual = [r for r in self.runs if r.layout.refused is None]
        refusing = [r for r in self.runs if r.layout.refused is not None]
        for k, pair in enumerate(chosen):
            asked = [rotated(usual, k)[0], *(refusing if k % REFUSED_STRIDE == 0 else ())]
            for run in asked:
                twin, remote = run.ask(pair.where())
                self.record(report, run, pair, twin, remote)
        report.timings["sessions"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.explain(report)
        report.timings["witnesses"] = time.perf_counter() - t0
        return report

    def record(self, report: RemoteReport, run: RemoteRun, pair: Pair, twin: Answer,
               remote: Answer) -> None:
        report.checks[run.layout.name] += 1
        verdict = judge(run, pair, twin, remote)
        if (twin.error is None) != (remote.error is None) or twin.charged != remote.charged:
            run.reset()  # (one session answered, the other did not: the histories diverged)
        if verdict.kind is not None:
            report.outcomes["failure"] += 1
            report.findings.append(Finding(verdict.kind, verdict.cause, pair, run, twin, remote))
        elif verdict.allowed is not None:
            report.outcomes["portable refusal" + (" (both)" if twin.refused else "")] += 1
            report.portable[verdict.allowed] += 1
        elif remote.error is None:
            report.outcomes["0 on both"] += 1
        else:
            report.outcomes["refused on both"] += 1
            report.refusals[type(remote.error).__name__] += 1

    # -- failure reports ------------------------------------------------------------------
    def still_fails(self, finding: Finding, p1: Node, p2: Node) -> bool:
        candidate = replace(finding.pair, p1=p1, p2=p2)
        if not judged_disjoint(candidate, Verdicts()):
            return False
        twin, remote = finding.run.ask(candidate.where(), which="probe")
        got = judge(finding.run, candidate, twin, remote)
        return got.kind == finding.kind and (
            finding.kind in ("engine error", "different charge") or got.cause == finding.cause)

    def shrink(self, finding: Finding) -> Pair:
        """Greedy reduction (as the DuckDB oracle's): a subtree replaced by a child while the
        pair stays judged disjoint and fails the same way."""
        return shrink_pair(finding.pair, lambda a, b: self.still_fails(finding, a, b),
                           SHRINK_BUDGET[self.engine])

    def explain(self, report: RemoteReport) -> None:
        for key, members in list(report.groups().items())[:WITNESS_GROUPS]:
            f = members[0]
            run = f.run
            small = self.shrink(f)
            twin, remote = run.ask(small.where(), which="probe")
            lines = [f"   reproducer on {run.layout.describe()}:", f"      {small.describe()}",
                     f"      DuckDB (twin) says {twin.said()}; {run.engine} says {remote.said()}",
                     (f"      spent (twin) {twin.spent_before} -> {twin.spent_after}; "
                      f"({run.engine}) {remote.spent_before} -> {remote.spent_after}")]
            if f.kind == "overlap" and remote.count:
                lines.append("      " + run.witness(small))
            if remote.error is not None and not remote.refused:
                lines.append(f"      {run.engine}'s own message (the statement re-run): "
                             f"{run.engine_message(remote.statement)}")
            lines.append(f"      {run.engine} statement: {run.rendered(remote.statement)}")
            if twin.statement:
                lines.append(f"      DuckDB (twin) statement: {twin.statement}")
            report.details[key] = "\n".join(lines)


# -----------------------------------------------------------------------------------------------
# The engines' databases
# -----------------------------------------------------------------------------------------------


def postgres_runs(url: str, staging: Staging) -> list[RemoteRun]:
    """A database of its own per layout (other tests use the server's first database)."""
    import psycopg

    from tests.servers import postgres_server

    runs = []
    for n, layout in enumerate(load_remote_layouts("postgres")):
        name = f"privplan_disjoint_{n}"
        with psycopg.connect(url, autocommit=True) as con:
            con.execute(f"DROP DATABASE IF EXISTS {name}")
            con.execute(f"CREATE DATABASE {name}")
        db_url = url.rsplit("/", 1)[0] + "/" + name

        def load(frame: pd.DataFrame, types: dict[str, str], db_url: str = db_url) -> None:
            postgres_server.load_frame(db_url, TABLE, frame, types)

        runs.append(RemoteRun(layout, staging, db_url, load))
    return runs


def drop_postgres(url: str, runs: Sequence[RemoteRun]) -> None:
    import psycopg

    for run in runs:
        run.close()
    with psycopg.connect(url, autocommit=True) as con:
        for run in runs:
            name = str(run.database).rsplit("/", 1)[1]
            with contextlib.suppress(psycopg.Error):
                con.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def spark_runs(spark: Any, staging: Staging) -> list[RemoteRun]:
    """A Spark session of its own per layout (its own temporary view ``t``)."""
    from tests.servers import spark_session

    runs = []
    for layout in load_remote_layouts("spark"):
        session = spark.newSession()

        def load(frame: pd.DataFrame, types: dict[str, str], session: Any = session) -> None:
            spark_session.load_frame(session, TABLE, frame, types)

        runs.append(RemoteRun(layout, staging, session, load))
    return runs


def drop_spark(runs: Sequence[RemoteRun]) -> None:
    for run in runs:
        run.close()
        with contextlib.suppress(Exception):
            run.database.catalog.dropTempView(TABLE)


# -----------------------------------------------------------------------------------------------
# Tests
# -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def candidates() -> tuple[dict[str, Pool], Staging]:
    pools = load_pools()
    return pools, staging_rows(pools)


@pytest.fixture(scope="module")
def pg_oracle(pg_url: str, candidates: tuple[dict[str, Pool], Staging]) -> Iterator[RemoteOracle]:
    t0 = time.perf_counter()
    runs = postgres_runs(pg_url, candidates[1])
    yield RemoteOracle("postgres", runs, candidates[0], time.perf_counter() - t0)
    drop_postgres(pg_url, runs)


@pytest.fixture(scope="module")
def spark_oracle(spark: Any, candidates: tuple[dict[str, Pool], Staging]
                 ) -> Iterator[RemoteOracle]:
    t0 = time.perf_counter()
    runs = spark_runs(spark, candidates[1])
    yield RemoteOracle("spark", runs, candidates[0], time.perf_counter() - t0)
    drop_spark(runs)


OVERLAP_PROBES: tuple[tuple[str, str, bool], ...] = (
    ("i = 1", "i >= 1", True),
    ("i = 2147483648", "i > 2147483647", False),  # (not in INTEGER, SMALLINT columns)
    ("f = -0.0", "f >= 0", True),
    ("f > 0.09", "f < 0.11", True),
    ("f > 1e30", "f <> 0", False),  # +inf and NaN (not in numeric / DECIMAL columns)
    ("f = CAST('NaN' AS DOUBLE)", "f IS NOT NULL", False),
    ("s = 'a '", "s > 'a'", True),
    ("s = 'e\u0301'", "s < '\u00e9'", True),
    ("b", "b IS NOT FALSE", True),
    ("d = '2020-01-01'", "d < DATE '2020-01-02'", True),
    ("d > '9999-12-31'", "d IS NOT NULL", False),  # (none on Spark)
    ("ts = TIMESTAMP '2020-01-01 00:00:00.000001'", "ts > '2020-01-01'", True),
)
"""(p1, p2, every layout has a witness): overlapping pairs. Both sessions must count them
alike (the remote table holds the twin's rows), and nonzero where the layout holds a witness."""

COLLATION_PROBES: dict[str, tuple[str, str]] = {
    "pg-canonical": ("s < 'B'", "s > 'a'"),  # (the server's default ICU en-US collation)
    "pg-narrow-nocase": ("s = 'a'", "s = 'A'"),
    "pg-small-numeric-noaccent": ("s = 'e'", "s = '\u00c9'"),
    "spark-narrow-lcase": ("s = 'a'", "s = 'A'"),
    "spark-small-decimal-noaccent": ("s = 'e'", "s = '\u00c9'"),
}
"""Per layout, a pair privplan judges disjoint that overlaps on the *stored* remote table."""


def _stored_count(run: RemoteRun, where: str) -> int:
    """A count over the remote table as stored, bypassing privplan (its own collations)."""
    if run.layout.engine == "postgres":
        import psycopg

        with psycopg.connect(str(run.database)) as con:
            row = con.execute(f'SELECT count(*) FROM "{TABLE}" WHERE {where}').fetchone()
            return int(row[0]) if row else 0
    return int(run.database.sql(f"SELECT count(*) FROM `{TABLE}` WHERE {where}").collect()[0][0])


def _check_harness(oracle: RemoteOracle) -> None:
    """The harness itself: every remote table holds its twin's rows (column by column counts,
    and overlapping pairs counted alike on privplan's typed view of each, in one statement per
    side, and the first of them through both sessions), and each collated layout makes a
    binary-disjoint pair overlap when read directly."""
    counts = ", ".join(["count(*)", *(f'count("{c}")' for c in ("id", "i", "f", "s", "b", "d",
                                                               "ts"))])
    probes = ", ".join(f"SUM(CASE WHEN ({p1}) AND ({p2}) THEN 1 ELSE 0 END)"
                       for p1, p2, _ in OVERLAP_PROBES)
    for run in oracle.runs:
        want = run.twin.con.execute(f'SELECT {counts} FROM "{TABLE}"').fetchone()
        got = run._public(f'SELECT {counts} FROM "{TABLE}"')
        assert want is not None and tuple(got[0]) == tuple(want), (run.layout.name, got, want)
        if run.layout.refused is not None:  # (refused before any charge, whatever the pair)
            twin, remote = run.ask("i = 1", which="probe")
            assert remote.portable_refusal and not remote.charged, (run.layout.name,
                                                                     remote.said())
            continue
        twin_counts = run.twin.con.execute(f"SELECT {probes} FROM {run.twin.view}").fetchone()
        remote_counts = run._public(f"SELECT {probes} FROM {run.remote_view()}")[0]
        assert twin_counts is not None
        for (p1, p2, everywhere), w, g in zip(OVERLAP_PROBES, twin_counts, remote_counts):
            assert g == w and (w or not everywhere), (run.layout.name, p1, p2, w, g)
        p1, p2, _ = OVERLAP_PROBES[0]
        twin, remote = run.ask(f"({p1}) AND ({p2})", which="probe")
        assert twin.count and remote.count == twin.count, (run.layout.name, twin.said(),
                                                           remote.said())
        if run.layout.name in COLLATION_PROBES:
            p1, p2 = COLLATION_PROBES[run.layout.name]
            assert region(p1).intersect(region(p2)).is_empty(), (p1, p2)
            assert _stored_count(run, f"({p1}) AND ({p2})") > 0, (run.layout.name, p1, p2)


def _check(oracle: RemoteOracle, tier: str) -> None:
    report = oracle.run(tier)
    print(report.summary())
    if report.verdicts.analyser_errors or report.findings:
        pytest.fail(report.render(), pytrace=False)


def test_postgres_tables_hold_the_candidate_rows(pg_oracle: RemoteOracle) -> None:
    _check_harness(pg_oracle)


def test_spark_tables_hold_the_candidate_rows(spark_oracle: RemoteOracle) -> None:
    _check_harness(spark_oracle)


def test_disjoint_pairs_never_overlap_on_postgres(pg_oracle: RemoteOracle) -> None:
    """The DuckDB oracle's fast pairs on PostgreSQL: 0 or refused before any charge, and the
    same answer and charge as DuckDB over the same rows (or the portable subset's refusal)."""
    _check(pg_oracle, "fast")


def test_disjoint_pairs_never_overlap_on_spark(spark_oracle: RemoteOracle) -> None:
    """The same on Spark, a deterministic third of the pairs (a Spark query costs ~0.3 s)."""
    _check(spark_oracle, "fast")


@pytest.mark.slow
def test_disjoint_pairs_never_overlap_on_postgres_many(pg_oracle: RemoteOracle) -> None:
    """The DuckDB oracle's slow pairs on PostgreSQL, every second (CI)."""
    _check(pg_oracle, "slow")


@pytest.mark.slow
def test_disjoint_pairs_never_overlap_on_spark_many(spark_oracle: RemoteOracle) -> None:
    """The DuckDB oracle's slow pairs on Spark, every sixth (CI)."""
    _check(spark_oracle, "slow")


if __name__ == "__main__":  # the full report, for whoever fixes what the test finds
    from tests.servers import postgres_server, spark_session

    engines = [e for e in ("postgres", "spark") if e in sys.argv[1:]] or ["postgres", "spark"]
    tier_name = "slow" if "slow" in sys.argv[1:] else "fast"
    pools = load_pools()
    staging = staging_rows(pools)
    for engine_name in engines:
        t_setup = time.perf_counter()
        if engine_name == "postgres":
            server = postgres_server.start_postgres()
            pg_runs = postgres_runs(server.url, staging)
            oracle = RemoteOracle("postgres", pg_runs, pools, time.perf_counter() - t_setup)
            print(oracle.run(tier_name).render())
            drop_postgres(server.url, pg_runs)
            server.stop()
        else:
            spark_main = spark_session.local_session()
            sp_runs = spark_runs(spark_main, staging)
            oracle = RemoteOracle("spark", sp_runs, pools, time.perf_counter() - t_setup)
            print(oracle.run(tier_name).render())
            drop_spark(sp_runs)
            spark_main.stop()
