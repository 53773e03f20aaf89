"""What every connection of one server shares: users, how to open a Session, TLS and limits.

Privacy: configuration only. ``open_session(analyst)`` opens a Session charging that analyst's
account and the data's total (:mod:`privplan.server.accounts`).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from privplan.server.users import User
from privplan.server.wire import DEFAULT_MAX_MESSAGE
from privplan.session.session import Session

__all__ = ["LOG", "ServerConfig"]

LOG = logging.getLogger("privplan.server")


@dataclass
class ServerConfig:
    users: Mapping[str, User]
    open_session: Callable[[str], Session]  # (an analyst's name)
    secret: bytes  # per server: fake SCRAM salts for unknown users
    tls: ssl.SSLContext | None = None
    tls_required: bool = False
    max_message: int = DEFAULT_MAX_MESSAGE
    startup_timeout: float = 10.0
    idle_timeout: float = 3600.0
    max_connections: int = 64
    max_connections_per_user: int = 16  # (0: no limit)
    statement_timeout: float = 0.0  # seconds (0: none); SET statement_timeout overrides it
    extra: dict[str, str] = field(default_factory=dict)
