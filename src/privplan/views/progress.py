"""Progress bars for long work, on stderr and only when stderr is a terminal.

Two kinds of long work have one: a batch report (one step per query) and the one engine statement
that can take seconds, the session's copy of a private table (made on the first query of a
prepared or user-level session: 6.5 s of silence at 10M rows before this). The bars are drawn by
tqdm, the common progress library, so they behave as users expect in terminals and notebooks.

A bar is off when stderr is not a terminal (pipes, CI, log files), when ``PRIVPLAN_PROGRESS=0``
is set, or when the caller passes ``enabled=False``. The engine's bar appears only after a delay
(a fast statement draws nothing).

What a bar may show about private data: the engine's bar shows the *percentage* of the statement
DuckDB reports and the elapsed time, never row counts (DuckDB's progress API also offers rows
processed and rows to process: the table's exact size under add/remove neighbours is not released
by privplan, so it is not printed either). Elapsed time is observable with or without a bar.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, TextIO

ENGINE_DELAY = 1.0
"""Seconds an engine statement runs before its bar appears."""


def enabled_for(stream: TextIO, enabled: bool | None = None) -> bool:
    """Whether to draw on ``stream``: the caller's choice, else off under
    ``PRIVPLAN_PROGRESS=0``, else only on a terminal."""
    if enabled is not None:
        return enabled
    if os.environ.get("PRIVPLAN_PROGRESS", "").strip() in ("0", "false", "no", "off"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """A bar over ``total`` steps (report queries); ``update(done, label)`` moves it to ``done``."""

    def __init__(self, total: int, *, desc: str = "", stream: TextIO | None = None,
                 enabled: bool | None = None, delay: float = 0.0) -> None:
        stream = stream or sys.stderr
        self.enabled = enabled_for(stream, enabled) and total > 0
        self._bar: Any = None
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc or None, file=stream, leave=False,
                             delay=delay, dynamic_ncols=True, unit="query", mininterval=0)

    def update(self, done: int, label: str = "") -> None:
        if self._bar is None:
            return
        self._bar.set_postfix_str(label[:30], refresh=False)
        if done != self._bar.n:
            self._bar.update(done - self._bar.n)
        else:
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def execute_with_progress(con: Any, sql: str, *, desc: str, stream: TextIO | None = None,
                          enabled: bool | None = None, delay: float | None = None) -> Any:
    """``con.execute(sql)`` (a DuckDB connection), with a percentage bar while it runs.

    A helper thread polls ``con.query_progress()`` (DuckDB's API for exactly this: it may be
    called while another thread executes on the connection) every 0.1 s. The statement itself
    runs on the calling thread, so an interrupt or an error reaches the caller as without a bar.
    DuckDB computes progress only with its ``enable_progress_bar`` setting on; its own printing
    is switched off (``enable_progress_bar_print``) so that only this bar draws.
    """
    stream = stream or sys.stderr
    if not enabled_for(stream, enabled):
        return con.execute(sql)
    from tqdm import tqdm

    con.execute("SET enable_progress_bar = true")
    con.execute("SET enable_progress_bar_print = false")
    bar = tqdm(total=100, desc=desc, file=stream, leave=False, unit="%",
               delay=ENGINE_DELAY if delay is None else delay,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}", dynamic_ncols=True)
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.1):
            try:
                percent = float(con.query_progress())
            except Exception:  # noqa: BLE001 - a progress read never fails the statement
                return
            if percent > bar.n:  # (update, not refresh: tqdm draws only after its delay)
                bar.update(min(100.0, percent) - bar.n)

    poller = threading.Thread(target=poll, name="privplan-progress", daemon=True)
    poller.start()
    try:
        return con.execute(sql)
    finally:
        done.set()
        poller.join()
        bar.close()
