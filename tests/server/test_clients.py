"""Real PostgreSQL clients against the real server (tests/server/conftest.py): psql over TLS,
psycopg 3 with the simple and the extended protocol; costs as NOTICEs, charges in the ledger,
refusals that charge nothing."""

from __future__ import annotations

import os
import subprocess
from fractions import Fraction

import psycopg
import pytest

from tests.server.conftest import PASSWORDS, Running


def psql(running: Running, *commands: str, user: str = "alice", sslmode: str = "require",
         password: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PGPASSWORD=PASSWORDS[user] if password is None else password,
               PGCONNECT_TIMEOUT="10")
    args = ["psql", running.dsn(user, sslmode), "-X", "-v", "ON_ERROR_STOP=1", "-A", "-t"]
    for c in commands:
        args += ["-c", c]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=False)


def connect(running: Running, user: str = "alice", **kw: object) -> psycopg.Connection:
    kw.setdefault("sslmode", "require")
    return psycopg.connect(host=running.host, port=running.port, user=user, dbname="demo",
                           password=kw.pop("password", PASSWORDS[user]), autocommit=True,
                           connect_timeout=10, **kw)  # type: ignore[arg-type]


def test_psql_over_tls_runs_a_dp_group_by_and_sees_its_cost(running: Running) -> None:
    before = running.spent() or Fraction(0)
    done = psql(running, "SET privplan.epsilon = 0.5",
                "SELECT hospital, COUNT(*) AS n FROM visits GROUP BY hospital ORDER BY hospital",
                "SELECT version()")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[0] == "SET"
    rows = [line.split("|") for line in lines[1:5]]
    assert [r[0] for r in rows] == ["A", "B", "C", "D"]
    assert all(r[1].lstrip("-").isdigit() for r in rows)
    assert "PostgreSQL 15.0 (privplan)" in done.stdout
    assert "NOTICE:  privplan: this answer cost ε=0.5" in done.stderr
    assert running.spent() == before + Fraction(1, 2)


def test_psql_is_on_tls(running: Running) -> None:
    done = psql(running, "SELECT 1")  # sslmode=require: psql fails rather than go cleartext
    assert done.returncode == 0, done.stderr
    with connect(running) as con:
        assert con.info.pgconn.ssl_in_use


def test_psycopg_simple_and_extended_with_parameters(running: Running) -> None:
    notices: list[str] = []
    with connect(running) as con:
        con.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        con.execute("SET privplan.epsilon = 0.25")  # simple protocol (no parameters)
        before = running.spent() or Fraction(0)
        (n,) = con.execute("SELECT COUNT(*) AS n FROM visits").fetchone() or (None,)
        assert isinstance(n, int)
        cur = con.execute("SELECT COUNT(*) AS n FROM visits WHERE age >= %s", [65])  # extended
        assert cur.description is not None and cur.description[0].name == "n"
        assert cur.description[0].type_code == 20  # int8
        (older,) = cur.fetchone() or (None,)
        assert isinstance(older, int)
        named = con.execute("SELECT sex, AVG(age) AS a FROM visits WHERE hospital = %s "
                            "GROUP BY sex ORDER BY sex", ["A"], prepare=True).fetchall()
        assert [r[0] for r in named] == ["F", "M"] and all(isinstance(r[1], float) for r in named)
        assert running.spent() == before + 3 * Fraction(1, 4)
        (remaining,) = con.execute("SHOW privplan.remaining").fetchone() or (None,)
        assert remaining == f"ε={3 - float(running.spent() or 0):g}"
    assert sum("this answer cost ε=0.25" in x for x in notices) == 3


def test_over_budget_is_a_clear_error_and_charges_nothing(running: Running) -> None:
    with connect(running) as con:
        con.execute("SET privplan.epsilon = 100")
        before = running.spent()
        with pytest.raises(psycopg.errors.InsufficientResources) as info:
            con.execute("SELECT COUNT(*) FROM visits")
        assert info.value.sqlstate == "53000"
        assert "budget exceeded" in str(info.value) and "Nothing was spent" in str(info.value)
        assert running.spent() == before
        # the connection goes on: a free statement, then the same error by the extended path
        assert con.execute("SELECT 1 AS one").fetchone() == (1,)
        with pytest.raises(psycopg.errors.InsufficientResources):
            con.execute("SELECT COUNT(*) FROM visits WHERE age > %s", [1])
        assert running.spent() == before


def test_without_a_budget_the_query_is_refused_before_planning(running: Running) -> None:
    with connect(running) as con:
        before = running.spent()
        with pytest.raises(psycopg.errors.InvalidParameterValue) as info:
            con.execute("SELECT COUNT(*) FROM visits")
        assert "SET privplan.epsilon = ..." in (info.value.diag.message_hint or "")
        assert running.spent() == before


def test_bad_sql_and_unsupported_sql(running: Running) -> None:
    with connect(running) as con:
        con.execute("SET privplan.epsilon = 0.1")
        before = running.spent()
        with pytest.raises(psycopg.errors.SyntaxError):
            con.execute("SELEC COUNT(* FROM visits")
        with pytest.raises(psycopg.Error) as info:
            con.execute("SELECT age FROM visits")  # a raw column: not a DP aggregate
        assert info.value.sqlstate in ("0A000", "42501")
        assert running.spent() == before


def test_free_statements_read_no_private_row(running: Running) -> None:
    with connect(running) as con:
        before = running.spent()
        assert con.execute("SHOW server_version").fetchone() == ("15.0 (privplan)",)
        assert con.execute("SELECT current_setting('TimeZone')").fetchone() == ("UTC",)
        tables = con.execute("SELECT table_name FROM information_schema.tables "
                             "ORDER BY table_name").fetchall()
        assert ("visits",) in tables
        con.execute("SET privplan.rho = 0.5")
        assert con.execute("SHOW privplan.rho").fetchone() == ("0.5",)
        with pytest.raises(psycopg.errors.UndefinedObject):
            con.execute("SHOW no_such_setting")
        assert running.spent() == before


def test_wrong_password_and_unknown_user_get_the_same_refusal(running: Running) -> None:
    messages = []
    for user, password in (("alice", "wrong"), ("mallory", "correct horse"),
                           ("mallory", "")):
        with pytest.raises(psycopg.OperationalError) as info:
            psycopg.connect(host=running.host, port=running.port, user=user, dbname="demo",
                            password=password or "x", sslmode="require", connect_timeout=10)
        messages.append(str(info.value).replace(user, "USER").split("failed:", 1)[-1])
    assert len(set(messages)) == 1 and "password authentication failed" in messages[0]


def test_tls_required_refuses_cleartext(running: Running) -> None:
    running.server.config.tls_required = True
    try:
        with pytest.raises(psycopg.OperationalError, match="requires TLS"):
            connect(running, sslmode="disable")
        with connect(running) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
    finally:
        running.server.config.tls_required = False


def test_transactions_are_accepted_and_rollback_warns(running: Running) -> None:
    notices: list[str] = []
    with psycopg.connect(running.dsn(), password=PASSWORDS["alice"]) as con:  # not autocommit
        con.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert con.execute("SELECT 1").fetchone() == (1,)
        con.rollback()
    assert any("restores no privacy budget" in n for n in notices)


def test_startup_options_set_the_budget_as_set_does_and_let_no_one_in(
        running: Running) -> None:
    """``-c privplan.epsilon=...`` in the startup options is the connection's SET (checked as
    one); nothing in a startup packet (other options, a user name written as SQL) lets anyone in
    or charges anything."""
    with connect(running, options="-c privplan.epsilon=0.125 -c work_mem=1MB") as con:
        assert con.execute("SHOW privplan.epsilon").fetchone() == ("0.125",)
        before = running.spent() or Fraction(0)
        con.execute("SELECT COUNT(*) FROM visits")
        assert running.spent() == before + Fraction(1, 8)
    before = running.spent()
    for bad in ("-c privplan.epsilon=-1", "-c privplan.epsilon=abc", "-c privplan.sneaky=1"):
        with pytest.raises(psycopg.OperationalError, match="startup parameter"):
            connect(running, options=bad)
    for user in ("alice' OR '1'='1", "alice\tbob", "ALICE", "alice "):
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(host=running.host, port=running.port, user=user, dbname="demo",
                            password=PASSWORDS["alice"], sslmode="require", connect_timeout=10)
    assert running.spent() == before


def test_sqlalchemy_and_pandas_read_sql(running: Running) -> None:
    """SQLAlchemy's ``postgresql+psycopg`` dialect (what it asks on connect: version(),
    current_schema(), SHOW TRANSACTION ISOLATION LEVEL, savepoints) and ``pandas.read_sql``
    with a bound parameter; its hstore lookup (pg_type) is answered "no hstore" by the
    catalog replica, and its reflection lists the policy's tables and columns."""
    import pandas as pd
    import sqlalchemy as sa

    url = (f"postgresql+psycopg://alice:{PASSWORDS['alice'].replace(' ', '%20')}@"
           f"{running.host}:{running.port}/demo?sslmode=require"
           "&options=-c%20privplan.epsilon%3D0.125")
    engine = sa.create_engine(url)
    try:
        before = running.spent() or Fraction(0)
        with engine.connect() as con:
            frame = pd.read_sql("SELECT hospital, COUNT(*) AS n FROM visits "
                                "GROUP BY hospital ORDER BY hospital", con)
            assert list(frame["hospital"]) == ["A", "B", "C", "D"]
            older = pd.read_sql(sa.text("SELECT COUNT(*) AS n FROM visits WHERE age > :a"),
                                con, params={"a": 50})
            assert list(older.columns) == ["n"] and len(older) == 1
            assert con.execute(sa.text("SELECT current_schema()")).scalar() == "main"
        inspector = sa.inspect(engine)
        assert sorted(inspector.get_table_names()) == ["hospitals", "visits"]
        columns = {c["name"]: c["type"] for c in inspector.get_columns("visits")}
        assert isinstance(columns["age"], sa.BigInteger)
        assert isinstance(columns["hospital"], sa.String)
        assert isinstance(columns["cost"], sa.Float)
        assert isinstance(columns["insured"], sa.Boolean)
        assert isinstance(columns["visit_date"], sa.Date)
        assert running.spent() == before + Fraction(1, 4)
    finally:
        engine.dispose()
