"""The TCP side of ``privplan serve``: a listening socket, one thread per connection.

:func:`serve` checks everything it can before it listens (the users file, the database, the
policy and the ledger, by opening one Session and closing it), then accepts connections on a
background thread and returns a :class:`Server` (``.address``, ``.close()``; port 0 picks a
free port, as tests do). Each connection runs :class:`~privplan.server.connection.ClientConnection`
on its own thread, with its own Session; whatever happens on one connection is contained there.
Beyond ``max_connections`` a client is refused with 53300.

Budgets (:mod:`privplan.server.accounts`): every Session charges its analyst's account and the
data's total, both opened once for the whole server and shared by its connections.

Privacy: opens Sessions only through :class:`~privplan.session.session.Session`, charging the
server's accounts; it answers nothing itself.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import ssl
import threading
from pathlib import Path
from typing import Any, Self

import privplan.server.messages as m
from privplan.errors import LedgerError, PolicyError
from privplan.ledger.store import SQLiteLedger
from privplan.server.accounts import Accounts
from privplan.server.cancel import Registry
from privplan.server.config import LOG, ServerConfig
from privplan.server.connection import ClientConnection
from privplan.server.users import load_users
from privplan.server.wire import DEFAULT_MAX_MESSAGE
from privplan.session.inputs import as_policy
from privplan.session.session import Session

__all__ = ["Server", "serve"]


class Server:
    """A running server: ``address`` (host, port), ``close()`` (stops accepting, closes every
    connection, waits for their threads)."""

    def __init__(self, sock: socket.socket, config: ServerConfig,
                 accounts: Accounts | None = None) -> None:
        self._sock = sock
        self._accounts = accounts
        self.config = config
        self.address: tuple[str, int] = sock.getsockname()[:2]
        self._ids = itertools.count(1)
        self._slots = threading.BoundedSemaphore(config.max_connections)
        self.registry = Registry(config.max_connections_per_user)
        self._clients: dict[int, tuple[socket.socket, threading.Thread]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="privplan-serve",
                                        daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._sock.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            try:
                self._start(client)
            except Exception as err:  # noqa: BLE001 - never stop accepting for one client
                LOG.error("accepting a connection: %s", type(err).__name__)
                client.close()

    def _start(self, client: socket.socket) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                client.sendall(m.error_response("53300", "too many connections to this "
                                                "privplan server", severity="FATAL"))
            finally:
                client.close()
            return
        pid = next(self._ids)
        thread = threading.Thread(target=self._run, args=(client, pid),
                                  name=f"privplan-conn-{pid}", daemon=True)
        with self._lock:
            self._clients[pid] = (client, thread)
        thread.start()

    def _run(self, client: socket.socket, pid: int) -> None:
        try:
            ClientConnection(client, self.config, pid, self.registry).run()
        except Exception as err:  # noqa: BLE001 - run contains its own; the last guard
            LOG.error("connection %d: %s", pid, type(err).__name__)
        finally:
            with self._lock:
                self._clients.pop(pid, None)
            self._slots.release()

    def wait(self) -> None:
        """Block until the server is closed (``privplan serve`` waits here for Ctrl-C)."""
        while not self._closed.wait(1.0):
            pass

    def close(self, timeout: float = 10.0) -> None:
        """Stop accepting, shut every connection down and wait for their threads."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout)
        with self._lock:
            clients = list(self._clients.values())
        for client, _ in clients:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for _, thread in clients:
            thread.join(timeout)
        if self._accounts is not None:
            self._accounts.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tls(cert: str | os.PathLike[str] | None, key: str | os.PathLike[str] | None
         ) -> ssl.SSLContext | None:
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise PolicyError("--tls-cert and --tls-key go together: give both (the certificate "
                          "and its private key), or neither for a server without TLS.")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as err:
        raise PolicyError(f"the TLS certificate '{cert}' or key '{key}' cannot be loaded "
                          f"({type(err).__name__}: {err}). Fix: pass a PEM certificate and "
                          "its PEM private key.") from None
    return context


def _budget(ledger: Path, budget: Any) -> Any:
    if not ledger.exists() and budget is None:
        raise LedgerError(f"no ledger at '{ledger}', and no total budget given to start one. "
                          "Fix: pass the data's total budget (e.g. --total-epsilon 3), or the "
                          "path of an existing ledger.")
    if budget is not None:
        return budget
    store = SQLiteLedger(ledger)
    try:
        stored = store.stored_budget()
    finally:
        store.close()
    if stored is None:
        raise LedgerError(f"the ledger '{ledger}' records no budget yet. Fix: pass the data's "
                          "total budget (e.g. --total-epsilon 3).")
    return stored


def serve(database: str | os.PathLike[str] | Any, *, policy: Any, ledger: str | os.PathLike[str],
          users: str | os.PathLike[str], budget: Any = None,
          listen: tuple[str, int] = ("127.0.0.1", 5433),
          tls_cert: str | os.PathLike[str] | None = None,
          tls_key: str | os.PathLike[str] | None = None, tls_required: bool = False,
          max_message: int = DEFAULT_MAX_MESSAGE, startup_timeout: float = 10.0,
          idle_timeout: float = 3600.0, max_connections: int = 64,
          max_connections_per_user: int = 16, statement_timeout: float = 0.0) -> Server:
    """Start a privplan server (see the module docstring); ``budget`` is the data's total
    (optional when the ledger exists: it remembers its own). ``database``: a DuckDB file, a
    ``postgresql://`` URL, or (from Python) a SparkSession whose catalog or temporary views
    hold the policy's tables. ``statement_timeout`` (seconds, 0 for none) is each
    connection's default, ``max_connections_per_user`` (0: none) the connections one analyst
    may hold at once."""
    if not 0 <= statement_timeout < float("inf") or max_connections_per_user < 0:
        raise PolicyError("--statement-timeout (seconds) and --max-connections-per-user must be "
                          "0 (none) or positive.")
    tls = _tls(tls_cert, tls_key)
    if tls_required and tls is None:
        raise PolicyError("--tls-required needs --tls-cert and --tls-key.")
    known = load_users(users)
    ledger_path = Path(ledger)
    total = _budget(ledger_path, budget)
    policy = as_policy(policy)
    # a path or URL as text; anything else (a SparkSession) as given: each connection's
    # Session opens its own engine over it
    source = str(database) if isinstance(database, (str, os.PathLike)) else database
    Session(source, policy=policy, budget=total).close()  # fail now, not at a client
    accounts = Accounts(ledger_path, total, policy, known)

    def open_session(user: str) -> Session:
        return Session(source, policy=policy, budget=total, ledger=accounts.total,
                       accounts=[accounts.analyst(user)])

    config = ServerConfig(users=known, open_session=open_session,
                          secret=secrets.token_bytes(32), tls=tls, tls_required=tls_required,
                          max_message=max_message, startup_timeout=startup_timeout,
                          idle_timeout=idle_timeout, max_connections=max_connections,
                          max_connections_per_user=max_connections_per_user,
                          statement_timeout=statement_timeout)
    family = socket.AF_INET6 if ":" in listen[0] else socket.AF_INET
    try:
        sock = socket.create_server(listen, family=family)
    except BaseException:
        accounts.close()
        raise
    sock.listen(128)
    return Server(sock, config, accounts)
