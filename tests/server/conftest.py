"""A real privplan server, started in-process on port 0 over a small demo DuckDB file, with TLS
(a self-signed certificate made here) and a durable ledger; two analysts."""

from __future__ import annotations

import datetime as dt
import ipaddress
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.ledger.store import SQLiteLedger
from privplan.server import Server, serve
from privplan.server.users import add_user, make_user

PASSWORDS = {"alice": "correct horse", "bob": "battery staple"}


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost/127.0.0.1 and its key: with the ``cryptography``
    package where it is installed, else with the ``openssl`` command."""
    cert_path, key_path = folder / "server.crt", folder / "server.key"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key_path),
                        "-out", str(cert_path), "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True, timeout=60)
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(key, hashes.SHA256()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@dataclass
class Running:
    server: Server
    host: str
    port: int
    ledger: Path
    folder: Path

    def spent(self) -> Fraction | None:
        """The ledger's recorded composed total (ε), read from the file."""
        store = SQLiteLedger(self.ledger)
        try:
            total = store.recorded_total()
        finally:
            store.close()
        return None if total is None else Fraction(total.epsilon)

    def dsn(self, user: str = "alice", sslmode: str = "require") -> str:
        return f"host={self.host} port={self.port} user={user} dbname=demo sslmode={sslmode}"


@dataclass
class Data:
    folder: Path
    database: Path
    users: Path
    cert: Path
    key: Path

    def start(self, ledger: str = "data.ledger.sqlite", **kw: Any) -> Running:
        """A server over this data (TLS on, ε = 3 in total), on a free port."""
        path = self.folder / ledger
        kw.setdefault("startup_timeout", 5.0)
        server = serve(self.database, policy=demo_policy_path(), ledger=path, users=self.users,
                       budget=pp.PureDP(3), listen=("127.0.0.1", 0), tls_cert=self.cert,
                       tls_key=self.key, **kw)
        host, port = server.address
        return Running(server, host, port, path, self.folder)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Data:
    folder = tmp_path_factory.mktemp("serve")
    database = write_demo_database(folder / "demo.duckdb", rows=2000)
    users = folder / "users.json"
    for name, password in PASSWORDS.items():
        # (each as much as the total: these tests spend the total; test_analysts.py gives
        # analysts budgets of their own below it)
        add_user(users, make_user(name, password, {"epsilon": 3.0}))
    cert, key = make_certificate(folder)
    return Data(folder, database, users, cert, key)


@pytest.fixture(scope="module")
def running(data: Data) -> Iterator[Running]:
    started = data.start()
    try:
        yield started
    finally:
        started.server.close()
