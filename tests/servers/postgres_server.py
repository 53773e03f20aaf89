"""A throw-away PostgreSQL server for the engine tests, and a loader that puts a pandas frame
into it exactly (so the same rows can be loaded into DuckDB and PostgreSQL and the answers
compared).

:func:`start_postgres` runs ``initdb`` into a temporary directory and starts ``postgres``
listening on 127.0.0.1 only, on a free port, with its unix socket inside that directory; the
server's default collation is ICU ``en-US`` (a non-"C" collation, so a test can tell whether
privplan's statements force "C" ordering), falling back to libc ``C.UTF-8`` where initdb has no
ICU. PostgreSQL refuses to run as root: under root the binaries run as the ``postgres`` user
(``runuser``) and the directory is handed to it. The :func:`pg_url` fixture starts one server
per test session (per xdist worker) and yields a URL to a fresh database in it; the server is
stopped and its directory removed at the end, also when a test fails (fixture finalizer, and
``atexit`` for an interpreter that dies between). Without the binaries the fixture skips the
tests locally and fails them in CI (``CI`` set): the PostgreSQL engine is never untested there.
"""

from __future__ import annotations

import atexit
import datetime as dt
import glob
import math
import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.servers import missing, need

SUPERUSER = "postgres"
DATABASE = "privplan_test"

# DuckDB type name -> the PostgreSQL column type holding the same values
PG_TYPES = {
    "BOOLEAN": "boolean", "SMALLINT": "smallint", "INTEGER": "integer", "BIGINT": "bigint",
    "FLOAT": "real", "REAL": "real", "DOUBLE": "double precision", "VARCHAR": "text",
    "DATE": "date", "TIMESTAMP": "timestamp", "TIMESTAMP WITH TIME ZONE": "timestamptz",
    "TIMESTAMPTZ": "timestamptz",
}

# a DuckDB collation -> the PostgreSQL collation :func:`load_frame` creates for it (ICU,
# nondeterministic: equality itself ignores case / accents, as DuckDB's NOCASE / NOACCENT)
PG_COLLATIONS = {
    "NOCASE": ("privplan_nocase", "und-u-ks-level2"),
    "NOCASE.NOACCENT": ("privplan_nocase_noaccent", "und-u-ks-level1"),
}


def _bin_dir() -> Path | None:
    """Where initdb, pg_ctl and postgres are (PATH, /usr/local/bin, Debian's versioned dirs)."""
    found = shutil.which("initdb")
    candidates = ([str(Path(found).parent)] if found else []) + ["/usr/local/bin"] + sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for directory in candidates:
        if all((Path(directory) / b).exists() for b in ("initdb", "pg_ctl", "postgres")):
            return Path(directory)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server: ``url`` names its test database; ``stop()`` ends it and removes
    its directory (idempotent)."""

    root: Path
    bin_dir: Path
    port: int
    as_postgres: bool
    url: str = ""
    stopped: bool = field(default=False)
    options: str = ""

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        if self.as_postgres:
            cmd = ["runuser", "-u", SUPERUSER, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)

    def pause(self) -> None:
        """Stop the server, keeping its directory (every connection to it is lost)."""
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the paused server again, on the same port with the same data."""
        self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "server.log"),
                  "-o", self.options, "-w", "-t", "60", "start")

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        try:
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop",
                      check=False)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _initdb(server: PostgresServer) -> None:
    data = str(server.root / "data")
    common = ("initdb", "-D", data, "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
              "--no-sync")
    icu = server._run(*common, "--locale=C.UTF-8", "--locale-provider=icu",
                      "--icu-locale=en-US", check=False)
    if icu.returncode != 0:  # (no ICU in this build: libc's C.UTF-8)
        shutil.rmtree(data, ignore_errors=True)
        server._run(*common, "--locale=C.UTF-8")


def start_postgres() -> PostgresServer:
    """Start a throw-away PostgreSQL server (see the module doc); raises FileNotFoundError
    when the binaries are not installed."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        raise FileNotFoundError("PostgreSQL's initdb, pg_ctl and postgres are not installed")
    as_postgres = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="privplan-pg-"))
    if as_postgres:
        shutil.chown(root, user=SUPERUSER, group=None)
    server = PostgresServer(root=root, bin_dir=bin_dir, port=_free_port(),
                            as_postgres=as_postgres)
    atexit.register(server.stop)
    try:
        _initdb(server)
        server.options = (f"-c listen_addresses=127.0.0.1 -p {server.port} -k {root} "
                          "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        server.resume()
        import psycopg

        base = f"postgresql://{SUPERUSER}@127.0.0.1:{server.port}"
        with psycopg.connect(f"{base}/postgres", autocommit=True) as con:
            con.execute(f"CREATE DATABASE {DATABASE}")
        server.url = f"{base}/{DATABASE}"
    except BaseException:
        server.stop()
        raise
    return server


def start_or_skip() -> PostgresServer:
    """:func:`start_postgres`, or skip the test (locally) / fail it (CI) without psycopg or the
    server binaries (:func:`tests.servers.missing`)."""
    need("psycopg")
    try:
        return start_postgres()
    except FileNotFoundError as err:
        missing("psycopg", str(err), "apt-get install postgresql (or put initdb on PATH)")
        raise


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A ``postgresql://`` URL to a fresh database on a throw-away server (one per session)."""
    server = start_or_skip()
    try:
        yield server.url
    finally:
        server.stop()


def _pg_type(duckdb_type: str) -> str:
    upper = duckdb_type.upper().strip()
    if upper.startswith(("DECIMAL", "NUMERIC")):
        return upper.replace("DECIMAL", "numeric")
    if upper.startswith("VARCHAR COLLATE "):
        collation = upper.removeprefix("VARCHAR COLLATE ")
        return f'text COLLATE "{PG_COLLATIONS[collation][0]}"'
    return PG_TYPES[upper]


def _temporal(duckdb_type: str) -> bool:
    return duckdb_type.upper().startswith(("DATE", "TIMESTAMP"))


def _pg_text(duckdb_text: str) -> str:
    """DuckDB's text of a date or timestamp as PostgreSQL reads it: ``0044-03-15 (BC)
    12:00:00+00`` is ``0044-03-15 12:00:00+00 BC`` there (infinity and years after 9999 are
    written alike)."""
    match = re.fullmatch(r"(\d+-\d+-\d+) \(BC\)(.*)", duckdb_text)
    return f"{match.group(1)}{match.group(2)} BC" if match else duckdb_text


def _value(v: Any, duckdb_type: str) -> Any:
    """One cell as psycopg must send it: NULL for None/NaT/pandas NA (a float NaN stays NaN,
    a value: DuckDB keeps NaN apart from NULL in a DOUBLE column)."""
    if v is None or v is pd.NaT or v is pd.NA:
        return None
    family = duckdb_type.upper()
    if family in ("FLOAT", "REAL", "DOUBLE"):
        return float(v)
    if isinstance(v, float) and math.isnan(v):
        return None  # (NaN in a non-float column is pandas' NULL)
    if family in ("SMALLINT", "INTEGER", "BIGINT"):
        return int(v)
    if family == "BOOLEAN":
        return bool(v)
    if family == "DATE":
        return v if type(v) is dt.date else pd.Timestamp(v).date()
    if family.startswith("TIMESTAMP"):
        return v if type(v) is dt.datetime else pd.Timestamp(v).to_pydatetime()
    return v


def _special(v: Any, duckdb_type: str) -> bool:
    """A date / timestamp cell given as DuckDB's text (a value Python cannot hold)."""
    return isinstance(v, str) and _temporal(duckdb_type)


def load_frame(url: str, name: str, frame: pd.DataFrame, types: dict[str, str]) -> None:
    """(Re)create table ``name`` with the PostgreSQL column types holding the DuckDB types
    ``types`` (column -> DuckDB type name) and copy ``frame``'s rows in exactly: binary COPY,
    so NaN, ±inf, -0.0, NULL, unicode, dates, timestamps and timestamptz arrive bit for bit.

    ``VARCHAR COLLATE NOCASE`` / ``NOCASE.NOACCENT`` columns get a nondeterministic ICU
    collation of the same effect (:data:`PG_COLLATIONS`, created in the database). A date or
    timestamp Python's ``datetime`` cannot hold (±infinity, a year before 1 or after 9999:
    DuckDB's ``fetchall`` gives a clamped value or a string) is given as DuckDB's text of the
    value (``CAST(x AS VARCHAR)``, e.g. ``infinity``, ``0044-03-15 (BC)``); such rows are
    inserted apart, their temporal cells as text PostgreSQL converts."""
    import psycopg

    cols = list(types)
    quoted = ", ".join('"' + c.replace('"', '""') + '"' for c in cols)
    table = '"' + name.replace('"', '""') + '"'
    rows = list(frame[cols].itertuples(index=False, name=None))
    special = [any(_special(v, types[c]) for v, c in zip(row, cols)) for row in rows]
    with psycopg.connect(url, autocommit=True) as con:
        for t in types.values():
            collation = t.upper().removeprefix("VARCHAR COLLATE ")
            if collation in PG_COLLATIONS:
                coll_name, locale = PG_COLLATIONS[collation]
                con.execute(f'CREATE COLLATION IF NOT EXISTS "{coll_name}" '
                            f"(provider = icu, locale = '{locale}', deterministic = false)")
        con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute(f"CREATE TABLE {table} ("
                    + ", ".join(f'"{c}" {_pg_type(t)}' for c, t in types.items()) + ")")
        with con.cursor() as cur:
            cur.execute(f"SELECT {quoted} FROM {table} LIMIT 0")
            oids = [d.type_code for d in cur.description or ()]
            with cur.copy(f"COPY {table} ({quoted}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(oids)
                for row, apart in zip(rows, special):
                    if not apart:
                        copy.write_row([_value(v, types[c]) for v, c in zip(row, cols)])
            # (each temporal cell of these rows as text, cast by the server)
            cells = ", ".join(f"CAST(%s::text AS {_pg_type(types[c])})" if _temporal(types[c])
                              else "%s" for c in cols)
            text_rows = [[_text_cell(v, types[c]) if _temporal(types[c]) else _value(v, types[c])
                          for v, c in zip(row, cols)] for row, apart in zip(rows, special) if apart]
            if text_rows:
                cur.executemany(f"INSERT INTO {table} ({quoted}) VALUES ({cells})", text_rows)


def _text_cell(v: Any, duckdb_type: str) -> str | None:
    """A date / timestamp cell as PostgreSQL's input text (ISO, or DuckDB's text converted)."""
    if _special(v, duckdb_type):
        return _pg_text(v)
    value = _value(v, duckdb_type)
    return None if value is None else value.isoformat()
