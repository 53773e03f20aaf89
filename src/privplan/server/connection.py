"""One client connection, from its first byte to Terminate: the protocol's state machine.

Startup (SSLRequest → TLS, GSSENCRequest → 'N', CancelRequest → the connection closed, then the
statement of the connection its process id and secret key name cancelled:
:mod:`privplan.server.cancel`), SCRAM-SHA-256 (:mod:`privplan.server.scram`), at most
``max_connections_per_user`` connections per analyst (53300 beyond), ParameterStatus,
BackendKeyData (a random secret key the server's registry keeps for CancelRequests),
ReadyForQuery; then the simple query protocol and the extended one (Parse, Bind,
Describe, Execute, Sync, Flush, Close). Answers come from :class:`privplan.server.answers.Answerer`.

Extended protocol: a portal's query is answered (charged) when it is first executed, and its
rows are kept for Execute (``max_rows`` then PortalSuspended). Describe — of a statement or a
portal — answers nothing and charges nothing: the columns a DP query will release are found by
planning it (:meth:`Answerer.describe`, :mod:`privplan.server.describe`), a statement's
parameters bound to stand-in values of their types. After an error, messages are skipped up to
Sync, as PostgreSQL does.

Each statement (and each Describe, which plans) runs under the connection's
:class:`~privplan.server.cancel.StatementControl`, armed with its ``statement_timeout``; a
cancelled statement fails with SQLSTATE 57014.

Privacy: every query goes through the Answerer (the Session's gate and charge before any
release). Errors reach the client as privplan's message with a SQLSTATE; any other exception
is logged on the server (with its traceback) and the client is told "internal error": no
traceback or engine text is ever sent. Limits: the message size cap (the reader checks it before
buffering), one deadline for the whole startup and authentication (a client trickling bytes
cannot stretch it), an idle timeout, and at most 1000 prepared statements and 1000 portals per
connection.
"""

from __future__ import annotations

import datetime as _dt
import re
import secrets
import socket
import ssl
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NoReturn, TypeVar

import privplan.server.messages as m
import privplan.server.wire as w
from privplan.server.answers import Answerer, split_statements
from privplan.server.binary import binary_value, result_formats
from privplan.server.cancel import (
    CANCELED,
    REASONS,
    Registry,
    StatementControl,
    check_before_planning_reads,
)
from privplan.server.config import LOG, ServerConfig
from privplan.server.formats import Answer, decode_param
from privplan.server.param_types import infer_param_types
from privplan.server.scram import MECHANISM, AuthFailed, ScramExchange
from privplan.server.sqlstate import ClientError, client_error
from privplan.sql.params import Style, bind_params

__all__ = ["ClientConnection"]

_STYLE = Style(call="Bind", named="$")
_STAND_INS: dict[int, object] = {20: 0, 21: 0, 23: 0, 700: 0.0, 701: 0.0, 1700: 0, 16: False,
                                 1082: _dt.date(2000, 1, 1),
                                 1114: _dt.datetime(2000, 1, 1)}
_MAX_NAMED = 1000  # prepared statements, and portals, one connection may hold (memory bound)
T = TypeVar("T")


class _Closed(Exception):
    """The connection ends (EOF, Terminate, a fatal error already sent)."""


@dataclass
class _Prepared:
    sql: str
    types: tuple[int, ...]
    described: list[m.Field] | None = None  # (the columns its Describe told the client)


@dataclass
class _Portal:
    sql: str
    formats: tuple[int, ...] = ()  # (the Bind's result format codes)
    answer: Answer | None = None
    sent: int = 0
    described: list[m.Field] | None = None  # (the columns its Describe told the client)


class ClientConnection:
    """Serve one accepted socket (``run`` returns when the connection is over)."""

    def __init__(self, sock: socket.socket, config: ServerConfig, process_id: int,
                 registry: Registry | None = None) -> None:
        self.sock: socket.socket = sock
        self.config = config
        self.pid = process_id
        self.registry = registry if registry is not None else Registry(
            config.max_connections_per_user)
        self.control = StatementControl()
        self.counted: str | None = None  # (the analyst this connection counts for)
        self.cancel_request: w.CancelRequest | None = None
        self.reader = w.FrontendReader(config.max_message)
        self.inbox: deque[w.FrontendMessage] = deque()
        self.out = bytearray()
        self.answerer: Answerer | None = None
        self.statements: dict[str, _Prepared] = {}
        self.portals: dict[str, _Portal] = {}
        self.skipping = False
        self.deadline: float | None = None

    # -- I/O ----------------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        self.out += data

    def _flush(self) -> None:
        if self.out:
            data, self.out = bytes(self.out), bytearray()
            self.sock.sendall(data)

    def _next(self) -> w.FrontendMessage:
        while not self.inbox:
            self._flush()
            if self.deadline is not None:  # (startup: one deadline for the whole handshake)
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError()
                self.sock.settimeout(left)
            data = self.sock.recv(65536)
            if not data:
                raise _Closed()
            self.inbox.extend(self.reader.feed(data))
        return self.inbox.popleft()

    def _fatal(self, code: str, message: str) -> NoReturn:
        self._send(m.error_response(code, message, severity="FATAL"))
        raise _Closed()

    # -- the whole connection ------------------------------------------------------------
    def run(self) -> None:
        try:
            self.deadline = time.monotonic() + self.config.startup_timeout
            user = self._startup()
            self._authenticate(user)
            if not self.registry.admit(user):
                self._fatal("53300", f"too many connections for role \"{user}\"")
            self.counted = user
            self._ready_session()
            self.deadline = None
            self.sock.settimeout(self.config.idle_timeout)
            while True:
                self._dispatch(self._next())
        except _Closed:
            pass
        except w.ProtocolViolation as err:
            self._send(m.error_response("08P01", f"protocol violation: {err}",
                                        severity="FATAL"))
        except TimeoutError:
            self._send(m.error_response("57P05", "terminating connection due to a timeout "
                                        "(startup, authentication or idle)", severity="FATAL"))
        except (OSError, ssl.SSLError):
            pass
        except Exception as err:  # noqa: BLE001 - a bug: logged, never shown to the client
            LOG.error("connection %d: unexpected %s", self.pid, type(err).__name__,
                      exc_info=True)
            self._send(m.error_response("XX000", "internal error (the server log has the "
                                        "details)", severity="FATAL"))
        finally:
            self._close()
            if self.cancel_request is not None:  # (after its socket is closed: nothing is said)
                self.registry.cancel(self.cancel_request.process_id,
                                     self.cancel_request.secret)

    def _close(self) -> None:
        self.registry.unregister(self.pid)
        if self.counted is not None:
            self.registry.leave(self.counted)
            self.counted = None
        try:
            self._flush()
        except (OSError, ssl.SSLError):
            pass
        if self.answerer is not None:
            try:
                self.answerer.close()
                self.answerer.session.close()
            except Exception as err:  # noqa: BLE001 - closing must not raise
                LOG.error("connection %d: closing the session: %s", self.pid,
                          type(err).__name__)
        try:
            self.sock.close()
        except OSError:
            pass

    # -- startup and authentication ------------------------------------------------------
    def _startup(self) -> str:
        tls = False
        while True:
            msg = self._next()
            if isinstance(msg, w.SSLRequest) and not tls and self.config.tls is not None:
                self.sock.sendall(b"S")
                self.sock = self.config.tls.wrap_socket(self.sock, server_side=True)
                tls = True
            elif isinstance(msg, (w.SSLRequest, w.GSSENCRequest)):
                self.sock.sendall(b"N")
            elif isinstance(msg, w.CancelRequest):
                self.cancel_request = msg  # (acted on once this connection is closed)
                raise _Closed()
            elif isinstance(msg, w.StartupMessage):
                break
            else:  # (the reader yields only startup-phase messages here)
                raise w.ProtocolViolation("expected a startup message")
        if msg.version != w.PROTOCOL_3_0:
            raise w.ProtocolViolation("unsupported protocol version; this server speaks 3.0")
        if self.config.tls_required and not tls:
            self._fatal("28000", "this server requires TLS: connect with sslmode=require "
                        "(the password exchange is refused over cleartext)")
        user = msg.params.get("user", "")
        if not user:
            self._fatal("28000", "no user name given in the startup packet")
        self.startup_params = msg.params
        return user

    def _authenticate(self, user: str) -> None:
        exchange = ScramExchange(self.config.users, user, self.config.secret)
        failed = f"password authentication failed for user \"{user}\""
        self._send(m.authentication_sasl([MECHANISM]))
        try:
            initial = w.parse_sasl_initial(self._auth_payload())
            if initial.mechanism != MECHANISM or initial.response is None:
                raise AuthFailed()
            self._send(m.authentication_sasl_continue(exchange.first(initial.response)))
            final = exchange.final(self._auth_payload().data)
        except AuthFailed:
            self._fatal("28P01", failed)
        self._send(m.authentication_sasl_final(final))
        self._send(m.authentication_ok())
        self.user = user

    def _auth_payload(self) -> w.AuthPayload:
        msg = self._next()
        if not isinstance(msg, w.AuthPayload):
            raise w.ProtocolViolation("expected a SASL response during authentication")
        return msg

    def _ready_session(self) -> None:
        try:
            session = self.config.open_session(self.user)
        except Exception as err:  # noqa: BLE001 - said to the client (a bug: logged)
            known = client_error(err)
            if known is None:
                LOG.error("connection %d: opening the session: %s", self.pid,
                          type(err).__name__, exc_info=True)
            self._fatal("58000", "the server could not open its privplan session"
                        + (f": {known.message}" if known else ""))
        engine = session.engine
        con = getattr(engine, "con", None)
        self.control = StatementControl(getattr(con, "interrupt", None))
        check_before_planning_reads(engine, self.control.check)
        self.answerer = Answerer(session, self.startup_params,
                                 statement_timeout=self.config.statement_timeout,
                                 check=self.control.check)
        try:
            self.answerer.settings.apply_startup(self.startup_params)
        except ClientError as err:
            self._fatal(err.code, f"startup parameter: {err.message}")
        for name, value in self.answerer.settings.reported().items():
            self._send(m.parameter_status(name, value))
        secret = secrets.randbits(32)
        self.registry.register(self.pid, secret, self.control)
        self._send(m.backend_key_data(self.pid, secret))
        self._ready()

    def _ready(self) -> None:
        assert self.answerer is not None
        self._send(m.ready_for_query("T" if self.answerer.settings.in_transaction else "I"))

    # -- queries -------------------------------------------------------------------------
    def _dispatch(self, msg: w.FrontendMessage) -> None:
        if isinstance(msg, w.Terminate):
            raise _Closed()
        if isinstance(msg, w.Sync):
            self.skipping = False
            self.portals.pop("", None)
            self._ready()
            return
        if isinstance(msg, w.Flush):
            self._flush()
            return
        if isinstance(msg, w.Query):
            self._simple(msg.sql)
            return
        if self.skipping:
            return
        try:
            self._extended(msg)
        except Exception as err:  # noqa: BLE001 - contained: _error says or logs it
            self._error(err)
            self.skipping = True

    def _error(self, err: Exception) -> None:
        if isinstance(err, (w.ProtocolViolation, _Closed)):
            raise err
        known = client_error(err)
        if known is None:
            LOG.error("connection %d: unexpected %s", self.pid, type(err).__name__,
                      exc_info=True)
            known = ClientError("XX000", "internal error (the server log has the details)")
        self._send(m.error_response(known.code, known.message, hint=known.hint))

    def _statement(self, work: Callable[[], T]) -> T:
        """``work()`` as one statement: cancellable, under the statement timeout; if it fails
        after a cancel, the client is told 57014 (whatever it failed with)."""
        assert self.answerer is not None
        timer = self.control.begin(self.answerer.settings.statement_timeout)
        try:
            return work()
        except (w.ProtocolViolation, _Closed):
            raise
        except Exception as err:
            reason = self.control.reason
            if reason is None:
                raise
            LOG.info("connection %d: statement cancelled (%s) after %s", self.pid, reason,
                     type(err).__name__)
            raise ClientError(CANCELED, REASONS[reason]) from None
        finally:
            self.control.end(timer)

    def _answer(self, sql: str) -> Answer:
        assert self.answerer is not None
        answerer = self.answerer
        answer = self._statement(lambda: answerer.answer(sql))
        for notice in answer.notices:
            self._send(m.notice_response(notice))
        return answer

    def _simple(self, sql: str) -> None:
        self.statements.pop("", None)
        self.portals.pop("", None)
        statements = split_statements(sql)
        if not statements:
            self._send(m.empty_query_response())
        for statement in statements:
            try:
                answer = self._answer(statement)
            except Exception as err:  # noqa: BLE001 - contained: _error says or logs it
                self._error(err)
                break
            if answer.fields is not None:
                self._send(m.row_description(answer.fields))
            for row in answer.rows:
                self._send(m.data_row(row))
            self._send(m.command_complete(answer.tag))
        self._ready()

    def _extended(self, msg: w.FrontendMessage) -> None:
        if isinstance(msg, w.Parse):
            if len(split_statements(msg.sql)) > 1:
                raise ClientError("42601", "cannot insert multiple commands into a prepared "
                                  "statement")
            if msg.name and msg.name in self.statements:
                raise ClientError("42P05", f"prepared statement \"{msg.name}\" already exists")
            if len(self.statements) >= _MAX_NAMED:
                raise ClientError("53400", f"more than {_MAX_NAMED} prepared statements on one "
                                  "connection: close some (Close, DEALLOCATE)")
            assert self.answerer is not None
            count = max(len(msg.param_types), _placeholders(msg.sql))
            types = infer_param_types(msg.sql, msg.param_types, count,
                                      self.answerer.session.policy)
            self.statements[msg.name] = _Prepared(msg.sql, tuple(types))
            self._send(m.parse_complete())
        elif isinstance(msg, w.Bind):
            self._bind(msg)
        elif isinstance(msg, w.Describe):
            self._describe(msg)
        elif isinstance(msg, w.Execute):
            self._execute(msg)
        elif isinstance(msg, w.Close):
            (self.statements if msg.kind == "S" else self.portals).pop(msg.name, None)
            self._send(m.close_complete())
        else:
            raise w.ProtocolViolation(f"unexpected {type(msg).__name__} message")

    def _bind(self, msg: w.Bind) -> None:
        prepared = self.statements.get(msg.statement)
        if prepared is None:
            raise ClientError("26000", f"prepared statement \"{msg.statement}\" does not exist")
        result_formats(msg.result_formats, len(msg.result_formats))  # (codes 0 or 1 only)
        n = len(msg.params)
        formats = msg.param_formats
        if len(formats) not in (0, 1, n):
            raise w.ProtocolViolation("Bind message with a bad number of parameter formats")
        values = [decode_param(raw, prepared.types[i] if i < len(prepared.types) else 0,
                               bool(formats[i] if len(formats) == n else
                                    (formats[0] if formats else 0)), i + 1)
                  for i, raw in enumerate(msg.params)]
        sql = bind_params(prepared.sql, values, _STYLE) if values else prepared.sql
        if msg.portal and msg.portal in self.portals:
            raise ClientError("42P03", f"cursor \"{msg.portal}\" already exists")
        if len(self.portals) >= _MAX_NAMED:
            raise ClientError("53400", f"more than {_MAX_NAMED} open portals on one connection: "
                              "close some")
        self.portals[msg.portal] = _Portal(sql, msg.result_formats, described=prepared.described)
        self._send(m.bind_complete())

    def _portal(self, name: str) -> _Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise ClientError("34000", f"portal \"{name}\" does not exist")
        if portal.answer is None and split_statements(portal.sql):
            portal.answer = _as_described(self._answer(portal.sql), portal.described)
        return portal

    def _describe(self, msg: w.Describe) -> None:
        assert self.answerer is not None
        if msg.kind == "S":
            prepared = self.statements.get(msg.name)
            if prepared is None:
                raise ClientError("26000", f"prepared statement \"{msg.name}\" does not exist")
            types = list(prepared.types)  # (every one known: given or inferred at Parse)
            self._send(m.parameter_description(types))
            fields = prepared.described = self._statement(
                lambda: self._statement_fields(prepared.sql, types))
        else:
            portal = self.portals.get(msg.name)
            if portal is None:
                raise ClientError("34000", f"portal \"{msg.name}\" does not exist")
            answerer = self.answerer
            fields = (portal.answer.fields if portal.answer is not None else
                      self._statement(lambda: answerer.describe(portal.sql))
                      if split_statements(portal.sql) else None)
            if fields is not None:
                codes = result_formats(portal.formats, len(fields))
                fields = [replace(f, format=c) for f, c in zip(fields, codes)]
                portal.described = fields
        self._send(m.row_description(fields) if fields is not None else m.no_data())

    def _statement_fields(self, sql: str, types: list[int]) -> list[m.Field] | None:
        """A prepared statement's columns, found without answering it. Its parameters are
        bound to stand-in values of their types (0, 0.0, FALSE, 2000-01-01; '0' for text); if the statement fails with those, its columns are not known
        before its real values come (NoData: the real values' error comes at Execute)."""
        assert self.answerer is not None
        if not types:
            return self.answerer.describe(sql)
        values = [_STAND_INS.get(t, "0") for t in types]
        try:
            return self.answerer.describe(bind_params(sql, values, _STYLE))
        except Exception as err:  # (a stand-in value's failure: the real one comes at Execute)
            if client_error(err) is None or self.control.reason is not None:
                raise
            return None

    def _execute(self, msg: w.Execute) -> None:
        portal = self._portal(msg.portal)
        answer = portal.answer
        if answer is None:
            self._send(m.empty_query_response())
            return
        rows = answer.rows[portal.sent:]
        suspended = msg.max_rows > 0 and len(rows) > msg.max_rows
        if suspended:
            rows = rows[:msg.max_rows]
        # (binary values in the types the client was told, if it was: a Describe's types are
        # found before the answer, from its plan, and should always be the answer's)
        fields = answer.fields or []
        if portal.described is not None and len(portal.described) == len(fields):
            fields = portal.described
        codes = result_formats(portal.formats, len(fields))
        binary = [(i, f.type_oid) for i, (f, c) in enumerate(zip(fields, codes)) if c == 1]
        for row in rows:
            self._send(m.data_row(_encoded(row, binary) if binary else row))
        if suspended:
            portal.sent += msg.max_rows
            self._send(m.portal_suspended())
            return
        portal.sent = len(answer.rows)
        # (after a suspension, as PostgreSQL: the rows this Execute returned)
        tag = f"SELECT {len(rows)}" if answer.tag.startswith("SELECT ") else answer.tag
        self._send(m.command_complete(tag))


def _as_described(answer: Answer, described: list[m.Field] | None) -> Answer:
    """``answer`` with the columns its Describe told the client, where they differ only by
    interval columns the answer lacks (the library computes no per-row interval of a derived
    aggregate beyond 200,000 rows, which a Describe's one stand-in row cannot know): those are
    sent NULL, so the rows always have the described columns."""
    fields = answer.fields
    if described is None or fields is None or len(described) == len(fields):
        return answer
    names = [f.name for f in described]
    where = {f.name: i for i, f in reversed(list(enumerate(fields)))}
    missing = [n for n in names if n not in where]
    if set(where) - set(names) or not all(n.endswith(("_low", "_high")) for n in missing):
        return answer
    rows = [tuple(row[where[n]] if n in where else None for n in names) for row in answer.rows]
    return Answer(answer.tag, [replace(f, format=0) for f in described], rows, answer.notices)


def _encoded(row: tuple[str | None, ...], binary: list[tuple[int, int]]
             ) -> list[str | bytes | None]:
    """``row`` with the columns ``binary`` lists (index, type OID) in binary format."""
    out: list[str | bytes | None] = list(row)
    for i, oid in binary:
        value = row[i]
        if value is not None:
            try:
                out[i] = binary_value(value, oid)
            except (ValueError, ArithmeticError, struct.error):  # (a released value)
                raise ClientError("0A000", f"column {i + 1} of this answer cannot be sent in "
                                  f"binary as type OID {oid}: ask for text") from None
    return out


def _placeholders(sql: str) -> int:
    """The highest ``$n`` placeholder of ``sql`` (0 if none)."""
    found = [int(x) for x in re.findall(r"\$([0-9]{1,5})", sql)]
    return max(found, default=0)
