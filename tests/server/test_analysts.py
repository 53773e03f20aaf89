"""Each analyst's budget and the data's total, enforced by the real server over psycopg.

Oracle: pure-DP ε over the whole table, so every answer composes sequentially (the general
theorem adds them: every query touches every row), and each account's exact total is the
number of its admitted answers × ε, read back from the ledger files themselves
(``recorded_total``, ``verify_ledger``), not from the server.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest

import privplan as pp
from privplan.demo.data import demo_policy_path
from privplan.ledger.store import SQLiteLedger
from privplan.ledger.verify import verify_ledger
from privplan.server import serve
from privplan.server.accounts import analysts_folder
from privplan.server.users import add_user, make_user
from tests.server.conftest import Data

QUERY = "SELECT COUNT(*) AS n FROM visits"  # (every row: each answer adds its whole ε)
BUDGETS = {"ann": 0.5, "ben": 1.0, "cat": 2.0}


def _recorded(path: Path) -> tuple[Fraction, int]:
    """A ledger file's recorded composed ε and its number of entries, read from the file."""
    store = SQLiteLedger(path)
    try:
        total, entries = store.recorded_total(), len(store.entries())
    finally:
        store.close()
    return (Fraction(0) if total is None else Fraction(total.epsilon)), entries


@pytest.fixture
def analysts(data: Data, tmp_path: Path) -> Iterator[tuple[object, Path]]:
    users = tmp_path / "users.json"
    for name, eps in BUDGETS.items():
        add_user(users, make_user(name, "pw-" + name, {"epsilon": eps}))
    ledger = tmp_path / "total.ledger.sqlite"
    server = serve(data.database, policy=demo_policy_path(), ledger=ledger, users=users,
                   budget=pp.PureDP(2), listen=("127.0.0.1", 0))
    try:
        yield server, ledger
    finally:
        server.close()


def _connect(server: object, user: str) -> psycopg.Connection:
    host, port = server.address  # type: ignore[attr-defined]
    return psycopg.connect(host=host, port=port, user=user, dbname="d", password="pw-" + user,
                           sslmode="disable", autocommit=True, connect_timeout=10)


def _ask(con: psycopg.Connection, epsilon: float) -> str | None:
    """None when answered, else the refusal's message."""
    con.execute(f"SET privplan.epsilon = {epsilon}")
    try:
        con.execute(QUERY).fetchall()
    except psycopg.errors.InsufficientResources as err:
        assert err.sqlstate == "53000"
        return str(err)
    return None


def _show(con: psycopg.Connection, what: str) -> str:
    (value,) = con.execute(f"SHOW privplan.{what}").fetchone() or (None,)
    return str(value)


def test_each_analyst_spends_only_their_own_budget_and_all_compose_in_the_total(
        analysts: tuple[object, Path]) -> None:
    server, ledger = analysts
    own = analysts_folder(ledger)
    with _connect(server, "ann") as ann, _connect(server, "ben") as ben, \
            _connect(server, "cat") as cat:
        notices: list[str] = []
        ann.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert _ask(ann, 0.25) is None and _ask(ann, 0.25) is None
        assert notices[-1] == "privplan: this answer cost ε=0.25; spent ε=0.5 of ε=0.5"
        refused = _ask(ann, 0.25)  # ann's own budget is spent: refused with her own figures
        assert refused is not None and "analyst ann has spent ε=0.5 of ε=0.5" in refused
        assert "Nothing was spent" in refused
        assert _recorded(own / "ann.sqlite") == (Fraction(1, 2), 2)
        assert _recorded(ledger) == (Fraction(1, 2), 2)  # (the refusal charged nothing)
        # ben's budget is his own: ann's spending takes nothing from it, and shows nowhere
        assert _show(ben, "spent") == "ε=0" and _show(ben, "remaining") == "ε=1"
        for _ in range(4):
            assert _ask(ben, 0.25) is None
        assert _ask(ben, 0.25) is not None
        assert _show(ben, "spent") == "ε=1" and _show(ann, "spent") == "ε=0.5"
        # the data's total (ε = 2) holds 1.5 now: cat (ε = 2 of her own) is refused by it,
        # without the total's figures (they would tell her what ann and ben spent)
        refused = _ask(cat, 0.75)
        assert refused is not None and "the data's total's budget" in refused
        assert "1.5" not in refused and "ε=2" not in refused
        assert _show(cat, "spent") == "ε=0" and _show(cat, "remaining") == "ε=2"
        assert _ask(cat, 0.5) is None
        assert _ask(cat, 0.125) is not None  # (the total is spent: 2 of 2)
    for name, (eps, n) in {"ann": (Fraction(1, 2), 2), "ben": (Fraction(1), 4),
                           "cat": (Fraction(1, 2), 1)}.items():
        assert _recorded(own / f"{name}.sqlite") == (eps, n)
        assert verify_ledger(own / f"{name}.sqlite", demo_policy_path()).ok
    assert _recorded(ledger) == (Fraction(2), 7)  # every admitted answer, nothing else
    assert verify_ledger(ledger, demo_policy_path()).ok


def test_concurrent_connections_of_analysts_are_exact(analysts: tuple[object, Path]) -> None:
    """Three connections each for ann and ben, racing: ann (ε = 0.5) gets exactly 4 answers
    of ε = 0.125 and ben (ε = 1) exactly 8, however their charges interleave."""
    server, ledger = analysts
    answered: dict[str, list[bool]] = {"ann": [], "ben": []}
    errors: list[BaseException] = []

    def work(user: str) -> None:
        try:
            with _connect(server, user) as con:
                for _ in range(5):
                    answered[user].append(_ask(con, 0.125) is None)
        except BaseException as err:  # noqa: BLE001 - reported by the test below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(u,)) for u in ("ann", "ben") * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sum(answered["ann"]) == 4 and sum(answered["ben"]) == 8
    own = analysts_folder(ledger)
    assert _recorded(own / "ann.sqlite") == (Fraction(1, 2), 4)
    assert _recorded(own / "ben.sqlite") == (Fraction(1), 8)
    assert _recorded(ledger) == (Fraction(3, 2), 12)


def test_a_restarted_server_continues_every_account(data: Data, tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    add_user(users, make_user("ann", "pw-ann", {"epsilon": 0.5}))
    ledger = tmp_path / "total.ledger.sqlite"
    for expected in (None, "analyst ann has spent ε=0.5 of ε=0.5"):
        server = serve(data.database, policy=demo_policy_path(), ledger=ledger, users=users,
                       budget=pp.PureDP(2), listen=("127.0.0.1", 0))
        try:
            with _connect(server, "ann") as ann:
                if expected is None:
                    assert _ask(ann, 0.5) is None
                else:
                    refused = _ask(ann, 0.125)
                    assert refused is not None and expected in refused
        finally:
            server.close()


def test_a_budget_the_accounts_cannot_hold_is_refused_at_start(data: Data,
                                                               tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    add_user(users, make_user("ann", "pw", {"rho": 0.5}))
    ledger = tmp_path / "total.ledger.sqlite"
    with pytest.raises(pp.PolicyError, match="another privacy definition"):
        serve(data.database, policy=demo_policy_path(), ledger=ledger, users=users,
              budget=pp.PureDP(2), listen=("127.0.0.1", 0))
    # an analyst whose budget changed after they spent under the first one: refused, because
    # their ledger's entries were charged under it
    users.unlink()
    add_user(users, make_user("ann", "pw", {"epsilon": 0.5}))
    serve(data.database, policy=demo_policy_path(), ledger=ledger, users=users,
          budget=pp.PureDP(2), listen=("127.0.0.1", 0)).close()
    record = json.loads(users.read_text())
    record["users"]["ann"]["budget"] = {"epsilon": 5.0}
    users.write_text(json.dumps(record))
    with pytest.raises(pp.LedgerError):
        serve(data.database, policy=demo_policy_path(), ledger=ledger, users=users,
              budget=pp.PureDP(2), listen=("127.0.0.1", 0))


def test_with_the_owner_key_a_restored_ledger_is_refused_until_the_owner_adopts_it(
        data: Data, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rollback resistance docs/SERVER.md promises: with the owner key and the seals kept
    apart, putting back older copies of the ledgers (the total's or an analyst's, taken with
    ``privplan ledger backup`` while the server ran) is refused at start; the owner who
    restores them on purpose adopts them with ``privplan ledger seal``, and what was spent
    since the backup is then forgotten — which is why backups are the owner's alone."""
    from privplan.cli import main

    key, seals = tmp_path / "owner.key", tmp_path / "seals"
    key.write_bytes(b"0123456789abcdef0123456789abcdef")
    seals.mkdir()
    monkeypatch.setenv("PRIVPLAN_LEDGER_KEY_FILE", str(key))
    monkeypatch.setenv("PRIVPLAN_LEDGER_SEAL_DIR", str(seals))
    users = tmp_path / "users.json"
    add_user(users, make_user("ann", "pw-ann", {"epsilon": 1.0}))
    ledger = tmp_path / "total.ledger.sqlite"
    own = analysts_folder(ledger) / "ann.sqlite"

    def start() -> object:
        return serve(data.database, policy=demo_policy_path(), ledger=ledger, users=users,
                     budget=pp.PureDP(2), listen=("127.0.0.1", 0))

    server = start()
    try:
        with _connect(server, "ann") as ann:
            assert _ask(ann, 0.25) is None
            for path in (ledger, own):  # (backed up while the server runs)
                assert main(["ledger", "backup", str(path), str(path) + ".bak"]) == 0
            assert _ask(ann, 0.5) is None
    finally:
        server.close()
    for restored in (ledger, own):
        saved = restored.read_bytes()
        restored.write_bytes(Path(str(restored) + ".bak").read_bytes())
        with pytest.raises(pp.LedgerError, match="rolled back"):
            start()
        restored.write_bytes(saved)
    start().close()  # (both put back as they were: the server starts)
    for restored in (ledger, own):
        restored.write_bytes(Path(str(restored) + ".bak").read_bytes())
        assert main(["ledger", "seal", str(restored)]) == 0
    server = start()
    try:
        with _connect(server, "ann") as ann:
            assert _show(ann, "spent") == "ε=0.25"  # (the ε = 0.5 charged since is forgotten)
    finally:
        server.close()


@pytest.mark.parametrize(("budget", "total", "want"), [
    ({"epsilon": 1.0}, pp.PureDP, pp.PureDP(1)),
    ({"epsilon": 1.0}, pp.ApproxDP, pp.ApproxDP(1, 0)),  # ((ε, 0)-DP is ε-DP)
    ({"epsilon": 1.0, "delta": 1e-6}, pp.ApproxDP, pp.ApproxDP(1, 1e-6)),
    ({"rho": 0.5}, pp.ZCDP, pp.ZCDP(0.5)),
    ({"epsilon": 1.0}, pp.ZCDP, None),  # (ρ = ε²/2 would let Gaussian noise in: weaker)
    ({"mu": 1.0}, pp.ZCDP, None),  # (ρ = μ²/2 is implied by μ-GDP, not the same)
    ({"epsilon": 1.0, "delta": 1e-6}, pp.PureDP, None),
    ({"rho": 0.5}, pp.ApproxDP, None),  # (needs a δ to convert)
])
def test_an_analyst_budget_is_the_totals_definition_or_the_same_guarantee(
        budget: dict[str, float], total: type, want: object) -> None:
    from privplan.server.accounts import analyst_budget
    from privplan.server.users import User

    user = User("ann", b"s", 1, b"k" * 32, b"k" * 32, budget)
    if want is None:
        with pytest.raises(pp.PolicyError, match="without a loss"):
            analyst_budget(user, total)
    else:
        assert analyst_budget(user, total) == want
