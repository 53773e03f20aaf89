"""SCRAM-SHA-256 on the server side, driven by an independent client written here from RFC 5802
(hashlib/hmac only, libpq's empty ``n=``), and the users file."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
from pathlib import Path

import pytest

from privplan.errors import PolicyError
from privplan.server.scram import AuthFailed, ScramExchange
from privplan.server.users import add_user, load_users, make_user

SECRET = b"k" * 32


def _h(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


class Client:
    """A SCRAM-SHA-256 client as libpq is: gs2 header 'n,,', an empty user name."""

    def __init__(self, password: str, nonce: str = "rOprNGfwEbeRWgbNEkqO") -> None:
        self.password, self.nonce = password, nonce
        self.bare = f"n=,r={nonce}"

    def first(self) -> bytes:
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes, proof: str | None = None) -> bytes:
        attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
        assert attrs["r"].startswith(self.nonce)
        salted = hashlib.pbkdf2_hmac("sha256", self.password.encode(),
                                     base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = _h(salted, b"Client Key")
        without = f"c=biws,r={attrs['r']}"
        auth = f"{self.bare},{server_first.decode()},{without}".encode()
        signature = _h(hashlib.sha256(client_key).digest(), auth)
        computed = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature,
                                                                  strict=True))).decode()
        self.server_signature = base64.b64encode(_h(_h(salted, b"Server Key"), auth))
        return f"{without},p={computed if proof is None else proof}".encode()


@pytest.fixture(scope="module")
def users() -> dict:
    return {"alice": make_user("alice", "correct horse", {"epsilon": 1.0})}


def test_the_right_password_is_accepted_and_the_server_proves_itself(users: dict) -> None:
    client = Client("correct horse")
    ex = ScramExchange(users, "alice", SECRET)
    server_first = ex.first(client.first())
    server_final = ex.final(client.final(server_first))
    assert server_final == b"v=" + client.server_signature
    assert ex.user is not None and ex.user.name == "alice"


def _refusal(users: dict, name: str, password: str, proof: str | None = None) -> str:
    client = Client(password)
    ex = ScramExchange(users, name, SECRET)
    server_first = ex.first(client.first())
    with pytest.raises(AuthFailed) as info:
        ex.final(client.final(server_first, proof))
    assert ex.user is None
    return str(info.value)


def test_wrong_password_and_unknown_user_fail_the_same_way(users: dict) -> None:
    wrong = _refusal(users, "alice", "wrong")
    unknown = _refusal(users, "mallory", "correct horse")
    assert wrong == unknown == "password authentication failed"


def test_an_unknown_users_salt_is_stable_like_a_real_one(users: dict) -> None:
    def salt(name: str) -> str:
        first = ScramExchange(users, name, SECRET).first(Client("x").first()).decode()
        return dict(a.split("=", 1) for a in first.split(","))["s"]

    assert salt("mallory") == salt("mallory") != salt("trudy")
    assert salt("alice") == base64.b64encode(users["alice"].salt).decode()


@pytest.mark.parametrize("proof", ["", "AAAA", "not base64!",
                                   base64.b64encode(b"\0" * 32).decode()])
def test_empty_and_malformed_proofs_are_refused(users: dict, proof: str) -> None:
    assert _refusal(users, "alice", "correct horse", proof) == "password authentication failed"


@pytest.mark.parametrize("first", [b"", b"n,,", b"garbage", b"p=tls-server-end-point,,n=,r=x",
                                   b"n,,n=,r=", b"\xff\xfe"])
def test_malformed_client_first_messages_are_refused(users: dict, first: bytes) -> None:
    with pytest.raises(AuthFailed):
        ScramExchange(users, "alice", SECRET).first(first)


def test_a_replayed_final_message_is_refused(users: dict) -> None:
    client = Client("correct horse")
    ex = ScramExchange(users, "alice", SECRET)
    final = client.final(ex.first(client.first()))
    ex.final(final)
    with pytest.raises(AuthFailed):  # the same exchange, again
        ex.final(final)
    fresh = ScramExchange(users, "alice", SECRET)  # a new exchange: a new server nonce
    fresh.first(client.first())
    with pytest.raises(AuthFailed):
        fresh.final(final)


def test_the_users_file_holds_verifiers_not_passwords(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    add_user(path, make_user("alice", "correct horse", {"epsilon": 1.0, "delta": 1e-6}))
    add_user(path, make_user("bob", "battery staple", {"rho": 0.5}))
    text = path.read_text()
    assert "correct horse" not in text and "battery staple" not in text
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    loaded = load_users(path)
    assert sorted(loaded) == ["alice", "bob"]
    assert loaded["alice"].budget == {"epsilon": 1.0, "delta": 1e-6}
    client = Client("battery staple")
    ex = ScramExchange(loaded, "bob", SECRET)
    ex.final(client.final(ex.first(client.first())))
    assert json.loads(text)["users"]["bob"]["scram_sha_256"]["iterations"] == 4096


def test_a_failing_add_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    add_user(path, make_user("alice", "pw", {"epsilon": 1.0}))
    before = path.read_bytes()
    with pytest.raises(PolicyError, match="already in users file"):
        add_user(path, make_user("alice", "other", {"epsilon": 2.0}))
    for bad in ({"epsilon": -1.0}, {"epsilon": 1.0, "rho": 1.0}, {}):
        with pytest.raises(PolicyError):
            make_user("carol", "pw", bad)
    with pytest.raises(PolicyError, match="user name"):
        make_user("bad name;", "pw", {"epsilon": 1.0})
    with pytest.raises(PolicyError, match="empty"):
        make_user("carol", "", {"epsilon": 1.0})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["users.json"]  # no temporary file left


def test_broken_users_files_are_said_clearly(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    with pytest.raises(PolicyError, match="does not exist"):
        load_users(path)
    path.write_text("{not json")
    with pytest.raises(PolicyError, match="is not JSON"):
        load_users(path)
    path.write_text(json.dumps({"format": "privplan-users", "version": 1,
                                "users": {"a": {"scram_sha_256": {}, "budget": {}}}}))
    with pytest.raises(PolicyError, match="entry of user 'a' is malformed"):
        load_users(path)
