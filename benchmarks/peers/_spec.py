"""The job format shared by ``benchmarks/accuracy_vs_peers.py`` and the peer adapters.

Every adapter in this folder runs in its peer's own virtual environment (``python
benchmarks/peers/run_<peer>.py job.json``), so this module uses the standard library only.

A job (JSON) names the data file and the workloads::

    {"data": "visits.csv", "repeat": 20, "table": "visits",
     "workloads": [{"id": "grouped_count", "unit": "row" | "patient", "max_rows_per_unit": 10,
                    "epsilon": 1.0, "delta": 0.0 | 1e-6,        # the workload's total budget
                    "queries": [{"name": "q", "agg": "count" | "sum" | "avg", "column": "cost",
                                 "where": [["age", ">=", 65]], "group_by": "hospital",
                                 "keys": ["A", ...], "epsilon": 1.0, "delta": 0.0}]}],
     "bounds": {"age": [0, 100], "cost": [0, 5000]}}

``epsilon``/``delta`` on a query is what that query may spend (the workload's queries add up to
the workload's total by sequential composition). An adapter prints one JSON object::

    {"versions": {"pkg": "1.2"}, "notes": {"<workload id>": "how it was configured"},
     "results": {"<system>": {"<workload id>": [{"<query>": {"<key>": value}}, ...]}},
     "na": {"<system>": {"<workload id>": "why it could not be run"}}}

one dict per repetition; a query without GROUP BY releases the key ``""``.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from importlib import metadata
from typing import Any

Job = dict[str, Any]
Query = dict[str, Any]
Workload = dict[str, Any]
Release = dict[str, dict[str, float]]  # query name -> key -> released value

SQL_OPS = {">=": ">=", "<": "<", "=": "="}


def read_job() -> Job:
    """The job: from the file named by the first argument, else from standard input."""
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as fh:
            return json.load(fh)
    return json.load(sys.stdin)


def sql_literal(value: Any) -> str:
    """A SQL literal for a filter value (strings single-quoted)."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def where_sql(conditions: list[list[Any]]) -> str:
    """`` WHERE a AND b`` for a list of ``[column, op, value]`` (empty when there is none)."""
    if not conditions:
        return ""
    terms = [f"{col} {SQL_OPS[op]} {sql_literal(v)}" for col, op, v in conditions]
    return " WHERE " + " AND ".join(terms)


def query_sql(q: Query, table: str) -> str:
    """The query as SQL, its aggregate named ``v`` and its group column (if any) first."""
    agg = {"count": "COUNT(*)", "sum": f"SUM({q.get('column')})", "avg": f"AVG({q.get('column')})"}
    group = q.get("group_by")
    select = f"{group}, {agg[q['agg']]} AS v" if group else f"{agg[q['agg']]} AS v"
    tail = f" GROUP BY {group}" if group else ""
    return f"SELECT {select} FROM {table}{where_sql(q.get('where') or [])}{tail}"


def versions(*dists: str) -> dict[str, str]:
    """Installed versions of the named distributions (``"missing"`` when absent)."""
    out = {}
    for d in dists:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = "missing"
    out["python"] = sys.version.split()[0]
    return out


def run_all(
    job: Job,
    systems: dict[str, Callable[[Workload], Release]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run every workload ``job['repeat']`` times (or its own ``repeat``) with each system's
    ``run(workload)``.

    ``run`` returns one repetition's release. It raises :class:`NotExpressible` when the
    system cannot express the workload (n/a, with the reason); any other exception marks the
    workload n/a with the error's first line.
    """
    results: dict[str, Any] = {name: {} for name in systems}
    na: dict[str, Any] = {name: {} for name in systems}
    for name, run in systems.items():
        for w in job["workloads"]:
            reps = []
            try:
                for _ in range(w.get("repeat", job["repeat"])):
                    reps.append(run(w))
            except NotExpressible as e:
                na[name][w["id"]] = str(e)
                continue
            except Exception as e:  # noqa: BLE001 - report it, don't lose the other workloads
                traceback.print_exc(file=sys.stderr)
                na[name][w["id"]] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
                continue
            results[name][w["id"]] = reps
            print(f"  {name}: {w['id']} done", file=sys.stderr, flush=True)
    return results, na


class NotExpressible(Exception):
    """The peer cannot express this workload (the message says why)."""


def emit(payload: dict[str, Any]) -> None:
    """Print the adapter's answer as one JSON object on standard output."""
    json.dump(payload, sys.stdout, default=float)
    sys.stdout.write("\n")
    sys.stdout.flush()
