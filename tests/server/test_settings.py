"""The statements a connection answers from its own settings (no Session, no data)."""

from __future__ import annotations

import pytest

from privplan.server.answers import split_statements
from privplan.server.settings import Settings, _option_pairs
from privplan.server.sqlstate import ClientError


def settings() -> Settings:
    return Settings({"user": "alice", "database": "demo"}, lambda which: f"<{which}>")


def value(s: Settings, sql: str) -> str | None:
    answer = s.answer(sql)
    assert answer is not None and len(answer.rows) == 1
    return answer.rows[0][0]


def test_set_show_reset_of_the_per_query_budget() -> None:
    s = settings()
    assert s.answer("SET privplan.epsilon = 0.5").tag == "SET"  # type: ignore[union-attr]
    assert s.answer("set PRIVPLAN.Delta TO '1e-6';") is not None
    assert s.budget == {"epsilon": 0.5, "delta": 1e-6}
    assert value(s, "SHOW privplan.epsilon") == "0.5"
    assert s.answer("RESET privplan.delta").tag == "RESET"  # type: ignore[union-attr]
    assert s.answer("SET privplan.epsilon TO DEFAULT") is not None
    assert s.budget == {}
    assert value(s, "SHOW privplan.spent") == "<spent>"
    assert value(s, "SELECT current_setting('privplan.remaining')") == "<remaining>"


@pytest.mark.parametrize(("sql", "code"), [
    ("SET privplan.epsilon = abc", "22023"), ("SET privplan.epsilon = -1", "22023"),
    ("SET privplan.epsilon = 0", "22023"), ("SET privplan.epsilon = inf", "22023"),
    ("SET privplan.epsilon = nan", "22023"), ("SET privplan.total = 1", "42704"),
    ("SHOW nothing_like_it", "42704"),
])
def test_bad_settings_are_refused(sql: str, code: str) -> None:
    s = settings()
    with pytest.raises(ClientError) as info:
        s.answer(sql)
    assert info.value.code == code and s.budget == {}


def test_what_drivers_ask_on_connect() -> None:
    s = settings()
    assert value(s, "SELECT version()").startswith("PostgreSQL 15.0 (privplan)")  # type: ignore[union-attr]
    assert value(s, "select pg_catalog.version()") is not None
    assert value(s, "SHOW server_version") == "15.0 (privplan)"
    assert value(s, "SHOW TRANSACTION ISOLATION LEVEL") == "read committed"
    assert value(s, "SELECT current_schema()") == "main"
    assert value(s, "SELECT current_database()") == "demo"
    assert value(s, "SELECT current_user") == "alice"
    assert s.answer("SET extra_float_digits = 3").tag == "SET"  # type: ignore[union-attr]
    assert value(s, "SHOW extra_float_digits") == "3"
    assert s.answer("SET TIME ZONE 'UTC'") is not None
    assert s.answer("SET application_name = 'a;b'") is not None
    assert value(s, "SHOW application_name") == "a;b"
    assert s.answer("BEGIN").tag == "BEGIN" and s.in_transaction  # type: ignore[union-attr]
    assert s.answer('SAVEPOINT "_pg3_1"').tag == "SAVEPOINT"  # type: ignore[union-attr]
    rollback = s.answer('ROLLBACK TO SAVEPOINT "_pg3_1"')
    assert rollback is not None and "restores no privacy budget" in rollback.notices[0]
    assert s.answer("COMMIT").tag == "COMMIT" and not s.in_transaction  # type: ignore[union-attr]


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM visits", "SELECT version() FROM visits", "SELECT current_user, 1",
    "SET x = 1; SELECT COUNT(*) FROM visits", "SHOW privplan.epsilon; SELECT 1",
])
def test_anything_else_goes_to_the_session(sql: str) -> None:
    assert settings().answer(sql) is None


def test_startup_options() -> None:
    assert _option_pairs("-c privplan.epsilon=0.5 -cprivplan.rho=1 --privplan.mu=2 "
                         "-c a\\ b=c\\ d x=y -c") == [
        "privplan.epsilon=0.5", "privplan.rho=1", "privplan.mu=2", "a b=c d"]
    s = settings()
    s.apply_startup({"options": "-c privplan.epsilon=0.25 -c work_mem=4MB",
                     "privplan.delta": "1e-7", "application_name": "x"})
    assert s.budget == {"epsilon": 0.25, "delta": 1e-7}
    with pytest.raises(ClientError):
        settings().apply_startup({"options": "-c privplan.epsilon=-3"})


def test_statements_are_split_at_top_level_semicolons() -> None:
    assert split_statements("SELECT 1; SELECT ';' ; -- a; comment\n") == [
        "SELECT 1", " SELECT ';' "]
    assert split_statements(" ;; ") == []
    assert split_statements("SELECT 'unterminated") == ["SELECT 'unterminated"]


@pytest.mark.parametrize(("text", "ms", "shown"), [
    ("0", 0, "0"), ("2500", 2500, "2500ms"), ("2s", 2000, "2s"), (" 2 s ", 2000, "2s"),
    ("1.5s", 1500, "1500ms"), ("1min", 60_000, "1min"), ("90s", 90_000, "90s"),
    ("2h", 7_200_000, "2h"), ("1d", 86_400_000, "1d"), ("1500us", 2, "2ms"), ("250MS", 250, "250ms"),
])
def test_statement_timeout_values_in_postgresql_units(text: str, ms: int, shown: str) -> None:
    s = settings()
    assert s.answer(f"SET statement_timeout = '{text}'") is not None
    assert s.timeout_ms == ms and s.statement_timeout == ms / 1000
    assert value(s, "SHOW statement_timeout") == shown


@pytest.mark.parametrize("text", ["soon", "-1", "2 weeks", "1e3", "", "99999999999"])
def test_bad_statement_timeouts_are_refused(text: str) -> None:
    s = Settings({}, lambda which: "", statement_timeout=3)
    with pytest.raises(ClientError) as info:
        s.answer(f"SET statement_timeout = '{text}'")
    assert info.value.code == "22023" and s.timeout_ms == 3000


def test_statement_timeout_defaults_resets_and_startup() -> None:
    s = Settings({}, lambda which: "", statement_timeout=0.25)
    assert value(s, "SHOW statement_timeout") == "250ms"
    s.answer("SET statement_timeout TO 0")
    assert s.statement_timeout == 0
    s.answer("RESET statement_timeout")
    assert s.timeout_ms == 250
    s.apply_startup({"options": "-c statement_timeout=5s"})
    assert s.timeout_ms == 5000
    s.apply_startup({"statement_timeout": "1min"})
    assert s.timeout_ms == 60_000
    with pytest.raises(ClientError):
        s.apply_startup({"options": "-c statement_timeout=x"})


def test_intervals_setting() -> None:
    s = settings()
    assert value(s, "SHOW privplan.intervals") == "off" and not s.intervals
    for on in ("on", "true", "1", "yes", "ON"):
        s.answer(f"SET privplan.intervals = {on}")
        assert s.intervals and value(s, "SHOW privplan.intervals") == "on"
        s.answer("SET privplan.intervals TO off")
        assert not s.intervals
    s.answer("SET privplan.intervals = on")
    assert s.scratch().intervals  # (a Describe sees the connection's setting)
    s.answer("RESET privplan.intervals")
    assert not s.intervals
    with pytest.raises(ClientError) as info:
        s.answer("SET privplan.intervals = maybe")
    assert info.value.code == "22023"
    s.apply_startup({"options": "-c privplan.intervals=on"})
    assert s.intervals
