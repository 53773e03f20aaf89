"""``privplan serve``: a DP SQL server that speaks the PostgreSQL v3 wire protocol.

Any PostgreSQL client (psql, psycopg, JDBC...) connects with SCRAM-SHA-256 (optionally over
TLS) and submits SQL; every query is answered by a privplan Session over the server's one
ledger, its cost sent as a NOTICE. ``privplan.server.serve(...)`` starts one
(:mod:`privplan.server.listener`); the modules: ``wire`` (frontend codec), ``messages``
(backend messages), ``users`` and ``scram`` (analysts and authentication), ``settings``,
``answers``, ``formats`` and ``sqlstate`` (what statements return), ``connection`` (one
client), ``listener`` (the TCP server).

Privacy: the package is a face: the only way to private rows is ``Session.sql``.
"""

from __future__ import annotations

from privplan.server.listener import Server, serve

__all__ = ["Server", "serve"]
