"""Describe of a prepared DP statement: its RowDescription found before any charge, equal to
the one the answer sends, and refusals identical to the query's (byte by byte over a socket)."""

from __future__ import annotations

import struct

import pytest

from tests.server.conftest import Running
from tests.server.test_fuzz import _authenticated, _codes, _msg
from tests.server.test_protocol import _talk

SHAPES = [
    "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital",
    "SELECT COUNT(*) AS n, SUM(age) AS s, AVG(age) AS a FROM visits",
    "SELECT COUNT(*) FROM visits WHERE age > 30",
    "SELECT hospital, AVG(age) AS a FROM visits GROUP BY hospital ORDER BY a DESC LIMIT 2",
    "SELECT hospital, COUNT(*) + 1 AS m FROM visits GROUP BY hospital HAVING COUNT(*) > 0",
    "SELECT insured, COUNT(DISTINCT patient_id) AS p FROM visits GROUP BY insured",
    "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital HAVING COUNT(*) > 100000",
    ("SELECT hospital AS k, COUNT(*) AS n FROM visits GROUP BY hospital UNION ALL "
     "SELECT sex, COUNT(*) FROM visits GROUP BY sex"),
    ("SELECT CASE WHEN age > 50 THEN 'old' ELSE 'young' END AS band, MEDIAN(age) AS m, "
     "COUNT(*) > 10 AS many FROM visits GROUP BY band"),
]


def _body(out: list[tuple[bytes, bytes]], kind: bytes) -> list[bytes]:
    return [body for k, body in out if k == kind]


@pytest.mark.parametrize("sql", SHAPES)
def test_describe_of_a_statement_is_the_answers_row_description_and_charges_nothing(
        running: Running, sql: str) -> None:
    with _authenticated(running) as sock:
        _talk(sock, _msg(b"Q", b"SET privplan.epsilon = 0.1\0"))
        before = running.spent()
        out = _talk(sock, _msg(b"P", b"st\0" + sql.encode() + b"\0\0\0")
                    + _msg(b"D", b"Sst\0") + _msg(b"S", b""))
        assert [k for k, _ in out] == [b"1", b"t", b"T", b"Z"], out
        described = _body(out, b"T")[0]
        assert running.spent() == before  # nothing charged by Describe
        answered = _talk(sock, _msg(b"Q", sql.encode() + b"\0"))
        assert _body(answered, b"T") == [described]
        # and through the extended protocol: Bind, Describe the portal, Execute
        out = _talk(sock, _msg(b"B", b"\0st\0" + b"\0" * 6) + _msg(b"D", b"P\0")
                    + _msg(b"E", b"\0\0\0\0\0") + _msg(b"S", b""))
        assert _body(out, b"T") == [described]
        width = struct.unpack("!h", described[:2])[0]
        rows = _body(out, b"D")
        assert rows or "100000" in sql  # (only that HAVING keeps no group)
        assert all(struct.unpack("!h", r[:2])[0] == width for r in rows)


def test_describe_refuses_as_the_query_does_and_charges_nothing(running: Running) -> None:
    with _authenticated(running) as sock:
        _talk(sock, _msg(b"Q", b"SET privplan.epsilon = 0.1\0"))
        before = running.spent()
        sql = b"SELECT hospital, COUNT(*) FROM visits WHERE no_such_column > 1 GROUP BY hospital"
        out = _talk(sock, _msg(b"P", b"st\0" + sql + b"\0\0\0")
                    + _msg(b"D", b"Sst\0") + _msg(b"S", b""))
        assert [k for k, _ in out] == [b"1", b"t", b"E", b"Z"]
        queried = _talk(sock, _msg(b"Q", sql + b"\0"))
        assert _codes(out) == _codes(queried) and len(_codes(out)) == 1
        assert _body(out, b"E") == _body(queried, b"E")
        assert running.spent() == before


def test_describe_of_a_parameterised_statement_and_of_a_set(running: Running) -> None:
    with _authenticated(running) as sock:
        _talk(sock, _msg(b"Q", b"SET privplan.epsilon = 0.1\0"))
        before = running.spent()
        int8 = struct.pack("!hI", 1, 20)
        out = _talk(sock, _msg(b"P", b"st\0SELECT COUNT(*) AS n FROM visits WHERE age > $1\0"
                               + int8) + _msg(b"D", b"Sst\0") + _msg(b"S", b""))
        assert [k for k, _ in out] == [b"1", b"t", b"T", b"Z"]
        assert _body(out, b"t") == [int8]
        assert b"n\0" in _body(out, b"T")[0]
        out = _talk(sock, _msg(b"P", b"set\0SET privplan.epsilon = 0.7\0\0\0")
                    + _msg(b"D", b"Sset\0") + _msg(b"S", b""))
        assert [k for k, _ in out] == [b"1", b"t", b"n", b"Z"]
        shown = _talk(sock, _msg(b"Q", b"SHOW privplan.epsilon\0"))
        assert _body(shown, b"D")[0].endswith(b"0.1")  # describing the SET did not run it
        assert running.spent() == before


@pytest.mark.parametrize("sql", [
    "SELECT AVG(n) AS mean FROM (SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital)",
    ("SELECT hospital FROM (SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital) "
     "WHERE n > 10"),
])
def test_describe_of_an_outer_query_over_a_dp_subquery(running: Running, sql: str) -> None:
    with _authenticated(running) as sock:
        _talk(sock, _msg(b"Q", b"SET privplan.epsilon = 0.1\0"))
        before = running.spent()
        out = _talk(sock, _msg(b"P", b"st\0" + sql.encode() + b"\0\0\0")
                    + _msg(b"D", b"Sst\0") + _msg(b"S", b""))
        assert [k for k, _ in out] == [b"1", b"t", b"T", b"Z"], out
        assert running.spent() == before
        answered = _talk(sock, _msg(b"Q", sql.encode() + b"\0"))
        assert _body(answered, b"T") == _body(out, b"T")
