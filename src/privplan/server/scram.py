"""The server side of one SCRAM-SHA-256 exchange (RFC 5802/7677), as a small state machine.

The cryptography (nonces, proofs, constant-time comparisons) is ``scramp``'s, the maintained
library pg8000 uses. This module adds what a server must decide itself:

* the user is the one of the startup packet: PostgreSQL clients (libpq) send an empty ``n=``
  in the client-first message, and PostgreSQL ignores it too. scramp refuses an empty
  attribute, so it is given ``n=*`` to parse, and then the client's own client-first-bare (the
  text the client's proof signs) as ``ScramServer.client_first_bare``, the attribute scramp
  (1.x) verifies the proof with; a wrong value there only makes the proof fail, never pass;
* an unknown user goes through the whole exchange with a fake verifier (a salt derived from the
  user name and a per-server secret, so it is stable across attempts, as a real one is) and fails
  at the end exactly like a wrong password: the replies do not say which names exist;
* channel binding (``SCRAM-SHA-256-PLUS``) is not offered; a client that demands it (``p=``) is
  refused.

Privacy: authentication only; it reads the users file's verifiers and nothing of the data.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

import scramp

from privplan.server.users import ITERATIONS, User

__all__ = ["MECHANISM", "AuthFailed", "ScramExchange"]

MECHANISM = "SCRAM-SHA-256"


class AuthFailed(Exception):
    """The exchange failed; the message is the same for every cause a client could probe."""

    def __init__(self) -> None:
        super().__init__("password authentication failed")


class ScramExchange:
    """``first(client_first) -> server_first``, then ``final(client_final) -> server_final``;
    either raises :class:`AuthFailed`. ``user`` is the authenticated user once ``final``
    returned."""

    def __init__(self, users: Mapping[str, User], name: str, secret: bytes) -> None:
        self._known = users.get(name)
        self._name = name
        self._secret = secret
        self._server = scramp.ScramMechanism(MECHANISM).make_server(self._auth_info)
        self._stage = "first"
        self.user: User | None = None

    def _auth_info(self, _client_name: str) -> tuple[bytes, bytes, bytes, int]:
        if self._known is not None:
            u = self._known
            return u.salt, u.stored_key, u.server_key, u.iterations
        # A fake verifier: a stable salt for this name, keys nobody can match.
        salt = hmac.new(self._secret, b"salt:" + self._name.encode("utf-8"),
                        hashlib.sha256).digest()[:16]
        return salt, secrets.token_bytes(32), secrets.token_bytes(32), ITERATIONS

    def first(self, client_first: bytes) -> bytes:
        if self._stage != "first":
            raise AuthFailed()
        self._stage = "final"
        try:
            text = client_first.decode("utf-8")
            if text.startswith("p"):
                raise AuthFailed()  # channel binding demanded, never offered
            gs2 = text.index(",", text.index(",") + 1) + 1
            bare = text[gs2:]
            if bare.startswith("n=,"):  # (libpq's empty user name: see the module docstring)
                self._server.set_client_first(text[:gs2] + "n=*" + bare[2:])
                self._server.client_first_bare = bare
            else:
                self._server.set_client_first(text)
            return str(self._server.get_server_first()).encode("utf-8")
        except (scramp.ScramException, UnicodeDecodeError, ValueError, KeyError, IndexError):
            self._stage = "failed"
            raise AuthFailed() from None

    def final(self, client_final: bytes) -> bytes:
        if self._stage != "final":
            raise AuthFailed()
        self._stage = "failed"
        try:
            self._server.set_client_final(client_final.decode("utf-8"))
            out = str(self._server.get_server_final()).encode("utf-8")
        except (scramp.ScramException, UnicodeDecodeError, ValueError, KeyError, IndexError):
            raise AuthFailed() from None
        if self._known is None:  # (unreachable with random keys; never let it through)
            raise AuthFailed()
        self._stage = "done"
        self.user = self._known
        return out
