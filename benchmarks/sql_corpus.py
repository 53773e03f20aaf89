"""SQL coverage against the peers' own queries: how many privplan answers, and how well.

The corpus (``benchmarks/corpus/<source>/``, format in ``benchmarks/corpus/README.md``) holds
queries taken from public sources — SmartNoise SQL's PUMS tests, Qrlew's test queries, Tumult
Analytics' tutorials translated to SQL, BigQuery's differential-privacy documentation and a
sample of ZetaSQL's DP compliance tests — each with the file it comes from, the data and the
policy its source sets up, and what the source expects (an answer or an error).

Every query runs in a fresh session (its own connection to the source's data, loaded once), twice:
with secure noise, and with :func:`privplan.testing.noise_disabled` (exact values; TESTS ONLY).
A query is *answered* when privplan returns a result, *refused* when it raises one of its own
errors (``PrivplanError``), and *crashed* on any other exception (a bug). For answers, each
noisy cell's stated 95% interval is checked to contain the exact value (rows matched on the
released key columns); the rate over all cells should be near 95%.

The headline is the answered share of the queries their source expects to succeed, leaving out
only test-only conventions (``test_only: true``: ZetaSQL's ``delta = 1``, legacy
``k_threshold``), per source and in total.

    python benchmarks/sql_corpus.py [--sources smartnoise,bigquery] [--out PATH] [--show-refusals]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

import privplan as pp
from privplan.errors import PrivplanError
from privplan.testing import noise_disabled

CORPUS = Path(__file__).resolve().parent / "corpus"
REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Query:
    """One corpus entry (see the corpus README for the fields)."""

    source: str
    id: str
    cite: str
    sql: str
    expect: str
    test_only: bool
    budget: dict[str, float]


@dataclass
class Outcome:
    """What privplan did with one query."""

    query: Query
    status: str  # answered | refused | crashed
    error: str = ""
    cells_in: int = 0
    cells: int = 0
    seconds: float = 0.0


@dataclass
class Source:
    """One source's data, policy, session budget and queries."""

    name: str
    setup: list[str]
    policy: dict[str, Any]
    session_budget: dict[str, float]
    queries: list[Query] = field(default_factory=list)


def load_source(directory: Path) -> Source:
    """Read ``setup.sql``, ``policy.yaml`` and ``queries.yaml`` of one source."""
    spec = yaml.safe_load((directory / "queries.yaml").read_text())
    text = (directory / "setup.sql").read_text()
    text = text.replace("{repo}", REPO.as_posix()).replace("{here}", directory.as_posix())
    statements = [s.strip() for s in re.split(r";\s*\n", text + "\n") if _code(s)]
    default_budget = spec.get("query_budget", {"epsilon": 1.0})
    queries = [
        Query(source=directory.name, id=str(q["id"]), cite=str(q["cite"]),
              sql=str(q.get("sql") or q["source_sql"]).strip().rstrip(";"),
              expect=str(q.get("expect", "answer")), test_only=bool(q.get("test_only", False)),
              budget=dict(q.get("query_budget") or default_budget))
        for q in spec["queries"]]
    return Source(name=directory.name, setup=statements,
                  policy=yaml.safe_load((directory / "policy.yaml").read_text()),
                  session_budget=dict(spec["session_budget"]), queries=queries)


def _code(statement: str) -> bool:
    """Whether a setup chunk holds SQL (not only comments and blank lines)."""
    return any(line.strip() and not line.strip().startswith("--")
               for line in statement.splitlines())


_DATA: dict[str, duckdb.DuckDBPyConnection] = {}


def _data(source: Source) -> duckdb.DuckDBPyConnection:
    """The source's tables, loaded once per process (privplan only reads them)."""
    if source.name not in _DATA:
        con = duckdb.connect(":memory:")
        for statement in source.setup:
            con.execute(statement)
        _DATA[source.name] = con
    return _DATA[source.name]


def _session(source: Source) -> pp.Session[Any]:
    """A fresh session (empty ledger, the source's budget) on its own connection to the data:
    a DuckDB cursor, so closing the session leaves the loaded tables for the next query."""
    con = _data(source).cursor()
    b = source.session_budget
    budget: Any = (pp.ApproxDP(b["epsilon"], b["delta"]) if b.get("delta")
                   else pp.PureDP(b["epsilon"]))
    return pp.connect(con, policy=source.policy, budget=budget)


def _ask(sess: pp.Session[Any], query: Query) -> pp.Result[Any]:
    """The query with its own budget, unless it carries a BigQuery clause (its own budget)."""
    if re.search(r"\bWITH\s+(DIFFERENTIAL_PRIVACY|ANONYMIZATION)\b", query.sql,
                 re.IGNORECASE):
        return sess.sql(query.sql)
    budget = dict(query.budget)
    if isinstance(sess.budget, pp.PureDP):
        budget.pop("delta", None)
    return sess.sql(query.sql, **budget)


def run_query(source: Source, query: Query) -> Outcome:
    """Answer ``query`` with noise and without, each in a fresh session (see module docstring)."""
    start = time.perf_counter()
    try:
        with _session(source) as sess:
            noisy = _ask(sess, query)
    except PrivplanError as err:
        first = str(err).splitlines()[0] if str(err) else ""
        return Outcome(query, "refused", f"{type(err).__name__}: {first}",
                       seconds=time.perf_counter() - start)
    except Exception as err:  # noqa: BLE001 - a crash is what this counts
        return Outcome(query, "crashed", f"{type(err).__name__}: {err}",
                       seconds=time.perf_counter() - start)
    try:
        with _session(source) as sess, noise_disabled():
            exact = _ask(sess, query)
    except Exception as err:  # noqa: BLE001
        return Outcome(query, "crashed", f"noise-off run failed: {type(err).__name__}: {err}",
                       seconds=time.perf_counter() - start)
    cells_in, cells = interval_coverage(noisy, exact)
    return Outcome(query, "answered", cells_in=cells_in, cells=cells,
                   seconds=time.perf_counter() - start)


def interval_coverage(noisy: pp.Result[Any], exact: pp.Result[Any]) -> tuple[int, int]:
    """(cells whose exact value lies in the noisy answer's 95% interval, cells checked).

    Rows are matched on the columns that carry no interval (the released keys); a key that
    only one run released (partition selection) is not checked."""
    iv = noisy.intervals
    if iv is None or iv.empty:
        return 0, 0
    noisy_cols = [c for c in noisy.df.columns
                  if f"{c}_low" in iv.columns and f"{c}_high" in iv.columns]
    keys = [c for c in noisy.df.columns if c not in noisy_cols]
    left = pd.concat([noisy.df[keys].reset_index(drop=True),
                      iv[[f"{c}_{e}" for c in noisy_cols for e in ("low", "high")]]
                      .reset_index(drop=True)], axis=1)
    right = exact.df[keys + noisy_cols].reset_index(drop=True)
    if keys:
        if left.duplicated(keys).any():
            return 0, 0
        joined = left.merge(right, on=keys, how="inner")
    else:
        if len(left) != 1 or len(right) != 1:
            return 0, 0
        joined = pd.concat([left, right], axis=1)
    inside = total = 0
    for c in noisy_cols:
        for lo, hi, x in zip(joined[f"{c}_low"], joined[f"{c}_high"], joined[c]):
            if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (lo, hi, x)):
                continue
            total += 1
            inside += int(float(lo) - 1e-9 <= float(x) <= float(hi) + 1e-9)
    return inside, total


def summarise(outcomes: list[Outcome]) -> dict[str, Any]:
    """Counts for one source (or all): the answered share of expected successes and more."""
    counted = [o for o in outcomes if o.query.expect == "answer" and not o.query.test_only]
    answered = sum(o.status == "answered" for o in counted)
    errors = [o for o in outcomes if o.query.expect == "error"]
    return {
        "queries": len(outcomes),
        "expected_answers": len(counted),
        "answered": answered,
        "answered_share": answered / len(counted) if counted else None,
        "test_only": sum(o.query.test_only for o in outcomes),
        "expected_errors": len(errors),
        "expected_errors_refused": sum(o.status == "refused" for o in errors),
        "crashed": sum(o.status == "crashed" for o in outcomes),
        "cells_in_interval": sum(o.cells_in for o in outcomes),
        "cells_checked": sum(o.cells for o in outcomes),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sources", help="comma-separated source names (default: all)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "sql_corpus.json")
    ap.add_argument("--show-refusals", action="store_true",
                    help="list every refused or crashed query of the expected answers")
    args = ap.parse_args(argv)
    names = args.sources.split(",") if args.sources else sorted(
        p.name for p in CORPUS.iterdir() if (p / "queries.yaml").exists())
    per_source: dict[str, dict[str, Any]] = {}
    everything: list[Outcome] = []
    for name in names:
        source = load_source(CORPUS / name)
        outcomes = [run_query(source, q) for q in source.queries]
        everything += outcomes
        per_source[name] = summarise(outcomes)
        per_source[name]["refusals"] = [
            {"id": o.query.id, "status": o.status, "error": o.error}
            for o in outcomes if o.status != "answered" and o.query.expect == "answer"]
    total = summarise(everything)
    print(f"{'source':<12}{'queries':>8}{'expect ok':>10}{'answered':>9}{'share':>8}"
          f"{'test-only':>10}{'errors refused':>15}{'crashed':>8}{'in 95% int.':>14}")
    for name, s in [*per_source.items(), ("total", total)]:
        share = "-" if s["answered_share"] is None else f"{100 * s['answered_share']:.0f}%"
        cov = (f"{s['cells_in_interval']}/{s['cells_checked']}" if s["cells_checked"] else "-")
        print(f"{name:<12}{s['queries']:>8}{s['expected_answers']:>10}{s['answered']:>9}"
              f"{share:>8}{s['test_only']:>10}"
              f"{s['expected_errors_refused']:>8}/{s['expected_errors']:<6}{s['crashed']:>8}"
              f"{cov:>14}")
    reasons = Counter(re.sub(r"'[^']*'|\d+", "…", o.error)[:110] for o in everything
                      if o.status != "answered" and o.query.expect == "answer"
                      and not o.query.test_only)
    if reasons:
        print("\nrefusals of expected answers, by message:")
        for reason, n in reasons.most_common(15):
            print(f"  {n:>3}  {reason}")
    if args.show_refusals:
        for o in everything:
            if o.status != "answered" and o.query.expect == "answer":
                print(f"{o.query.id}: {o.status}: {o.error}")
    _common.write_json(args.out, {"machine": _common.machine_info(), "total": total,
                                  "sources": per_source})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
