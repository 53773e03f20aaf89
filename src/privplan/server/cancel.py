"""Stopping a running statement: a CancelRequest, a ``statement_timeout``; and the server's
registry of connections (process id → secret key, statement; connections per analyst).

A connection runs each statement between :meth:`StatementControl.begin` and ``end``. Another thread — the
connection that carries a client's CancelRequest (its process id and secret key checked by
:meth:`Registry.cancel` with :func:`hmac.compare_digest`), or the statement's timer — calls
:meth:`StatementControl.cancel`, which records why and then interrupts the session's DuckDB
connection (``DuckDBPyConnection.interrupt()``) every few milliseconds until the statement
ends (an interrupt that lands between two engine statements is lost by DuckDB, so one call is
not enough). While privplan plans in Python, the flag is checked before a DP query is planned
and before each statement the session's engine binds, probes or reads from a public table
(:func:`check_before_planning_reads`).
The client is then told SQLSTATE 57014, "canceling statement due to user request" or "... due
to statement timeout".

Privacy: cancelling only stops work; it never releases and never un-charges. Every check of the
flag is *before* the charge (planning, the gate's binds and probes): a query stopped there
spends nothing. After the charge (the ledger entry committed), only DuckDB's own interrupt
stops the run: the statement fails, nothing is released and the charge stays — it was spent
on a query whose answer nobody will see, as a failure after the charge always is (the answer
is built whole before any of it is sent, so nothing is released partially). A statement that
finishes before the interrupt takes effect is answered as usual (its charge is spent anyway).
The registry says nothing to a CancelRequest, right or wrong (PostgreSQL's behaviour), so a
wrong key learns nothing.
"""

from __future__ import annotations

import hmac
import struct
import threading
from collections.abc import Callable
from typing import Any

from privplan.errors import PrivplanError

__all__ = ["CANCELED", "REASONS", "Registry", "StatementCancelled", "StatementControl",
           "check_before_planning_reads"]

CANCELED = "57014"  # query_canceled
REASONS = {"user": "canceling statement due to user request",
           "timeout": "canceling statement due to statement timeout"}
_INTERRUPT_EVERY = 0.02  # seconds between two interrupts of one cancelled statement


class StatementCancelled(PrivplanError):
    """Raised before a charge, where privplan checks whether its statement was cancelled."""


# the engine's methods that only planning calls, before the charge (binding a statement, the
# gate's probes over stand-in rows, reads of public tables: privplan.planning.public_joins)
_PLANNING_READS = ("bind", "probe", "fetch_public")


def check_before_planning_reads(engine: Any, check: Callable[[], None]) -> None:
    """Make this engine (one session's own) call ``check`` before each of its planning reads,
    so a statement cancelled while privplan plans it stops at the next one. Privacy: these are
    all before the charge (a cancel there spends nothing); nothing after the charge is checked,
    so a run is never cut between its charge and its release except by the engine's own
    interrupt (which releases nothing)."""
    for name in _PLANNING_READS:
        method = getattr(engine, name, None)
        if method is not None:
            setattr(engine, name, _checked(method, check))


def _checked(method: Callable[..., Any], check: Callable[[], None]) -> Callable[..., Any]:
    def checked(*args: Any, **kwargs: Any) -> Any:
        check()
        return method(*args, **kwargs)
    return checked


class StatementControl:
    """One connection's running statement: whether it runs, whether (and why) it was
    cancelled, its timer; thread-safe (the cancel comes from another thread)."""

    def __init__(self, interrupt: Callable[[], None] | None = None) -> None:
        self._interrupt = interrupt  # (the session's engine connection's interrupt, if any)
        self._lock = threading.Lock()
        self._generation = 0  # (one per statement: a late cancel never hits the next one)
        self._running = False
        self._reason: str | None = None
        self._done = threading.Event()
        self._timer: threading.Timer | None = None

    @property
    def active(self) -> bool:
        """Whether a statement is running."""
        return self._running

    @property
    def reason(self) -> str | None:
        """Why the running statement was cancelled ("user", "timeout"), or None."""
        return self._reason

    def check(self) -> None:
        """Raise :class:`StatementCancelled` if the running statement was cancelled (called
        between steps before the charge)."""
        reason = self._reason
        if reason is not None:
            raise StatementCancelled(REASONS[reason])

    def begin(self, timeout: float) -> threading.Timer | None:
        """A statement begins; ``timeout`` seconds (0: none) will cancel it. Pass what this
        returns to :meth:`end` when it ends, however it ends."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            self._running, self._reason, self._done = True, None, threading.Event()
        timer = None
        if timeout > 0:
            timer = threading.Timer(timeout, self.cancel, args=("timeout", generation))
            timer.daemon = True
            timer.start()
        return timer

    def end(self, timer: threading.Timer | None) -> None:
        """The statement :meth:`begin` began has ended (a late cancel does nothing)."""
        if timer is not None:
            timer.cancel()
        with self._lock:
            self._running = False
            self._done.set()

    def cancel(self, reason: str, generation: int | None = None) -> None:
        """Cancel the running statement (nothing if none runs, or if ``generation`` is not the
        running one's); returns when that statement has ended."""
        with self._lock:
            if not self._running or self._reason is not None or (
                    generation is not None and generation != self._generation):
                return
            self._reason = reason
            generation, done = self._generation, self._done
        while True:
            with self._lock:  # (the statement cannot end, nor the next begin, meanwhile)
                if self._generation != generation or not self._running:
                    return
                if self._interrupt is not None:
                    self._interrupt()
            if done.wait(_INTERRUPT_EVERY):
                return


class Registry:
    """The server's live connections: process id → (secret key, statement control), and the
    number of connections of each analyst."""

    def __init__(self, max_per_user: int) -> None:
        self.max_per_user = max_per_user
        self._lock = threading.Lock()
        self._keys: dict[int, tuple[bytes, StatementControl]] = {}
        self._users: dict[str, int] = {}

    def admit(self, user: str) -> bool:
        """Count one more connection of ``user``; False (not counted) beyond the limit."""
        with self._lock:
            count = self._users.get(user, 0)
            if self.max_per_user > 0 and count >= self.max_per_user:
                return False
            self._users[user] = count + 1
            return True

    def leave(self, user: str) -> None:
        """One connection of ``user`` (admitted) ended."""
        with self._lock:
            count = self._users.get(user, 0) - 1
            if count > 0:
                self._users[user] = count
            else:
                self._users.pop(user, None)

    def connections(self, user: str) -> int:
        with self._lock:
            return self._users.get(user, 0)

    def running(self, pid: int) -> bool:
        """Whether process ``pid`` is running a statement (for monitoring and tests)."""
        with self._lock:
            found = self._keys.get(pid)
        return found is not None and found[1].active

    def register(self, pid: int, secret: int, control: StatementControl) -> None:
        with self._lock:
            self._keys[pid] = (struct.pack("!I", secret), control)

    def unregister(self, pid: int) -> None:
        with self._lock:
            self._keys.pop(pid, None)

    def cancel(self, pid: int, secret: bytes) -> None:
        """A CancelRequest: cancel process ``pid``'s running statement if ``secret`` is its
        key (compared in constant time); otherwise nothing."""
        with self._lock:
            found = self._keys.get(pid)
        if found is None:
            hmac.compare_digest(secret, b"\0\0\0\0")  # (about the same work either way)
            return
        key, control = found
        if hmac.compare_digest(secret, key):
            control.cancel("user")
