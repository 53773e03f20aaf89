"""The speed protocol shared by ``benchmarks/vs_peers.py`` and the ``speed_<peer>.py`` adapters.

A speed adapter is a long-lived process, so that the driver can interleave its queries with
privplan's and plain DuckDB's (one at a time, in rotating order) and time each inside a warm
process: start-up, data loading and per-query time are reported apart. Like ``_spec.py`` it
uses the standard library only (it runs in every peer's own virtual environment).

The job (a JSON file named by the first argument) says where the data is and what to ask::

    {"rows": 100000, "table": "visits",
     "data": {"duckdb": "...duckdb", "parquet": "...parquet", "csv": "...csv"},
     "bounds": {"age": [0, 100], "cost": [0.0, 20000.0]},
     "keys": {"department": ["cardiology", ...]},
     "options": {"backend": "duckdb"},                  # adapter-specific, may be empty
     "queries": [{"id": "grouped", "sql": "SELECT department, COUNT(*) AS n, ...",
                  "unit": "row" | "patient_id", "max_rows_per_unit": 10,
                  "group_by": "department" | null, "where": [["age", ">=", 65]],
                  "aggs": [["count", null, "n"], ["avg", "cost", "avg_cost"]],
                  "epsilon": 1.0, "delta": 1e-6}]}

``epsilon`` is the whole query's budget (every aggregate of it together); ``delta`` is only
for a peer that has no pure-ε mechanism (Qrlew). The exports (Parquet, CSV with a header) hold
the columns the queries read (``patient_id, department, age, cost``); ``cost`` has NULLs.

The adapter loads the data (timed: ``load_s``), then writes one JSON line to its original
standard output::

    {"event": "ready", "load_s": 1.2, "versions": {...}, "notes": {"<query id>": "..."},
     "na": {"<query id>": "why this peer cannot express it"}}

and answers commands read line by line from standard input: ``{"op": "run", "query": "<id>"}``
runs the query once, timed from the query's text or description to the released rows in
Python objects (after a garbage collection, not timed), and answers::

    {"event": "result", "query": "<id>", "seconds": 0.12, "released": 5, "parts": {...}}

(``parts``: an optional split of the seconds, e.g. Qrlew's rewrite and engine time), or
``{"event": "error", "query": "<id>", "error": "..."}``. ``{"op": "exit"}`` (or the end of
standard input) ends the process. Anything the peer's libraries print goes to standard error:
standard output is the protocol's alone.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

from _spec import NotExpressible, versions

__all__ = ["Job", "Loaded", "NotExpressible", "Query", "Runner", "budget_note", "serve", "versions"]

Job = dict[str, Any]
Query = dict[str, Any]
#: One timed run of a query: returns how many values or rows it released, and optionally a
#: split of its time (seconds per part).
Runner = Callable[[], "int | tuple[int, dict[str, float]]"]


class Loaded:
    """What an adapter's ``load(job)`` returns: a runner per query it can express, the reasons
    for the others, its library versions and how each query was configured."""

    def __init__(self, runners: dict[str, Runner], versions: dict[str, str],
                 notes: dict[str, str], na: dict[str, str] | None = None) -> None:
        self.runners, self.versions, self.notes, self.na = runners, versions, notes, na or {}


def _protocol_stream() -> IO[str]:
    """A private copy of standard output for the protocol; file descriptor 1 (where libraries,
    and a JVM, print) is pointed at standard error."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout.flush()
    os.dup2(2, 1)
    return proto


def _send(out: IO[str], payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload, default=float) + "\n")
    out.flush()


def _run_once(run: Runner) -> tuple[float, int, dict[str, float]]:
    gc.collect()
    start = time.perf_counter()
    got = run()
    seconds = time.perf_counter() - start
    released, parts = got if isinstance(got, tuple) else (got, {})
    return seconds, released, parts


def serve(load: Callable[[Job], Loaded]) -> None:
    """Load the job's data with ``load`` (timed), say ready, then answer run commands."""
    out = _protocol_stream()
    with open(sys.argv[1]) as fh:
        job: Job = json.load(fh)
    start = time.perf_counter()
    loaded = load(job)
    _send(out, {"event": "ready", "load_s": time.perf_counter() - start,
                "versions": loaded.versions, "notes": loaded.notes, "na": loaded.na})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("op") == "exit":
            break
        qid = cmd["query"]
        try:
            seconds, released, parts = _run_once(loaded.runners[qid])
        except Exception as e:  # noqa: BLE001 - report it; the driver decides what to do
            traceback.print_exc(file=sys.stderr)
            first = (str(e).splitlines() or [""])[0][:300]
            _send(out, {"event": "error", "query": qid, "error": f"{type(e).__name__}: {first}"})
            continue
        _send(out, {"event": "result", "query": qid, "seconds": seconds, "released": released,
                    "parts": parts})


def budget_note(q: Query) -> str:
    """The query's privacy unit and budget, for a note."""
    unit = ("row level" if q["unit"] == "row" else
            f"user level ({q['unit']}, at most {q['max_rows_per_unit']} rows)")
    return f"{unit}, ε = {q['epsilon']:g} for the whole query"
