"""asyncpg, a driver that prepares every query and asks for binary results, against the real
server (tests/server/conftest.py): SCRAM over TLS, DP answers with their cost NOTICE, parameters,
a refusal over budget that charges nothing; and the binary result format it reads."""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Awaitable, Callable
from fractions import Fraction
from typing import Any

import asyncpg
import pytest

from privplan.server.binary import binary_value
from tests.server.conftest import PASSWORDS, Running


def _run(running: Running, body: Callable[[asyncpg.Connection], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        context = ssl.create_default_context(cafile=str(running.folder / "server.crt"))
        con = await asyncpg.connect(host=running.host, port=running.port, user="alice",
                                    password=PASSWORDS["alice"], database="demo", ssl=context,
                                    timeout=10)
        try:
            return await body(con)
        finally:
            await con.close()
    return asyncio.run(main())


def test_asyncpg_over_tls_fetches_a_dp_group_by_with_its_cost_notice(running: Running) -> None:
    notices: list[str] = []

    async def body(con: asyncpg.Connection) -> Any:
        con.add_log_listener(lambda _c, msg: notices.append(msg.message))
        assert con._transport.get_extra_info("ssl_object") is not None  # (on TLS)
        await con.execute("SET privplan.epsilon = 0.25")
        return await con.fetch("SELECT hospital, COUNT(*) AS n, AVG(age) AS a FROM visits "
                               "GROUP BY hospital ORDER BY hospital")

    before = running.spent() or Fraction(0)
    rows = _run(running, body)
    assert [r["hospital"] for r in rows] == ["A", "B", "C", "D"]
    assert all(isinstance(r["n"], int) and isinstance(r["a"], float) for r in rows)
    assert any(n.startswith("privplan: this answer cost ε=0.25") for n in notices)
    assert running.spent() == before + Fraction(1, 4)


def test_asyncpg_parameterised_query_and_prepared_statement(running: Running) -> None:
    async def body(con: asyncpg.Connection) -> Any:
        await con.execute("SET privplan.epsilon = 0.125")
        one = await con.fetchval("SELECT COUNT(*) AS n FROM visits WHERE hospital = $1", "A")
        statement = await con.prepare("SELECT hospital, SUM(age) AS s FROM visits "
                                      "WHERE age > $1 GROUP BY hospital")
        columns = [(a.name, a.type.name) for a in statement.get_attributes()]
        types = [t.name for t in statement.get_parameters()]
        return one, columns, types, await statement.fetch(30)

    before = running.spent() or Fraction(0)
    one, columns, types, rows = _run(running, body)
    assert types == ["int8"]  # (inferred from `age > $1`: asyncpg encodes an int)
    assert isinstance(one, int)
    assert columns == [("hospital", "text"), ("s", "int8")]
    assert len(rows) == 4
    assert running.spent() == before + Fraction(1, 4)


def test_asyncpg_over_budget_raises_53000_and_charges_nothing(running: Running) -> None:
    async def body(con: asyncpg.Connection) -> Any:
        await con.execute("SET privplan.epsilon = 100")
        with pytest.raises(asyncpg.PostgresError) as caught:
            await con.fetch("SELECT hospital, COUNT(*) FROM visits GROUP BY hospital")
        return caught.value

    before = running.spent()
    err = _run(running, body)
    assert err.sqlstate == "53000"
    assert running.spent() == before


@pytest.mark.parametrize(("text", "oid", "expected"), [
    ("42", 20, struct.pack("!q", 42)),
    ("-1.5", 701, struct.pack("!d", -1.5)),
    ("t", 16, b"\x01"),
    ("2000-01-02", 1082, struct.pack("!i", 1)),
    ("2000-01-01 00:00:01.5", 1114, struct.pack("!q", 1_500_000)),
    ("12345.678", 1700, struct.pack("!hhHh3H", 3, 1, 0, 3, 1, 2345, 6780)),
    ("-0.0001", 1700, struct.pack("!hhHh1H", 1, -1, 0x4000, 4, 1)),
    ("100000000", 1700, struct.pack("!hhHh1H", 1, 2, 0, 0, 1)),
    ("0", 1700, struct.pack("!hhHh", 0, 0, 0, 0)),
    ("é", 25, "é".encode()),
])
def test_binary_values_are_postgresqls(text: str, oid: int, expected: bytes) -> None:
    assert binary_value(text, oid) == expected


def test_binary_values_read_back_by_asyncpg(running: Running) -> None:
    async def body(con: asyncpg.Connection) -> Any:
        await con.execute("SET privplan.epsilon = 0.125")
        return await con.fetch("SELECT insured, hospital, COUNT(*) AS n, AVG(cost) AS c "
                               "FROM visits GROUP BY insured, hospital ORDER BY hospital, insured")

    rows = _run(running, body)
    assert [(r["hospital"], r["insured"]) for r in rows] == [
        (h, b) for h in "ABCD" for b in (False, True, None)]  # (NULL is a key of its own)
    assert all(type(r["n"]) is int for r in rows)
    assert all(type(r["c"]) is float for r in rows if r["c"] is not None)  # (NULL: no AVG)
    assert any(r["c"] is not None for r in rows)


def test_asyncpg_parameters_of_each_inferred_type(running: Running) -> None:
    import datetime as dt

    async def body(con: asyncpg.Connection) -> Any:
        await con.execute("SET privplan.epsilon = 0.125")
        statement = await con.prepare(
            "SELECT COUNT(*) AS n FROM visits WHERE hospital = $1 AND cost < $2 AND insured = $3"
            " AND visit_date BETWEEN $4 AND $5 AND department IN ($6, $7)")
        types = [t.name for t in statement.get_parameters()]
        return types, await statement.fetchval("A", 5000.0, True, dt.date(2023, 1, 1),
                                               dt.date(2024, 12, 31), "oncology", "cardiology")

    before = running.spent() or Fraction(0)
    types, n = _run(running, body)
    assert types == ["text", "float8", "bool", "date", "date", "text", "text"]
    assert isinstance(n, int)
    assert running.spent() == before + Fraction(1, 8)


def test_a_value_not_of_its_described_type_is_refused_not_garbled() -> None:
    from privplan.server.connection import _encoded
    from privplan.server.sqlstate import ClientError

    assert _encoded(("7", None, "x"), [(0, 20), (1, 20)]) == [struct.pack("!q", 7), None, "x"]
    with pytest.raises(ClientError) as caught:
        _encoded(("1.5",), [(0, 20)])
    assert caught.value.code == "0A000"
