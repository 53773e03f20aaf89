"""Statements a server answers from its own settings, free: ``SET``/``SHOW``/``RESET``,
transaction commands, ``SELECT version()``, ``current_setting(...)``, ``current_schema()``,
``current_database()`` and ``current_user`` (what drivers ask on connect).

``SET privplan.epsilon = 0.1`` (and ``delta``, ``rho``, ``mu``) sets the budget of each later DP
query of the connection; ``SHOW privplan.spent`` / ``privplan.remaining`` / ``privplan.budget``
report the ledger's composed totals. ``SET privplan.intervals = on`` adds each noisy column's
95% interval to later answers (``<col>_low``, ``<col>_high``). ``SET statement_timeout = '2s'``
(PostgreSQL's units: ``ms`` when none is given, ``us``, ``s``, ``min``, ``h``, ``d``; 0 for none)
cancels a later statement that runs longer (:mod:`privplan.server.cancel`); ``RESET`` goes back
to the server's default. Other ``SET``s (what drivers send on connect: DateStyle,
extra_float_digits, application_name...) are remembered and shown back, and change nothing.
Transactions: ``BEGIN`` … ``COMMIT`` are accepted (drivers open them), but an answer is charged
when it is released and cannot be un-spent, so ``ROLLBACK`` warns that it restores no budget.

Privacy: these answers are functions of the statement, the server's settings and the ledger's
composed totals (which every analyst of this data may see: they share the budget); none reads a
private row.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from privplan.accounting.definitions import budget_keywords
from privplan.dbapi.free import DEFAULT_SCHEMA
from privplan.server.formats import Answer
from privplan.server.sqlstate import ClientError

__all__ = ["SERVER_VERSION", "Settings"]

SERVER_VERSION = "15.0 (privplan)"
_NAME = r"([A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z_][A-Za-z0-9_$]*)?)"
_VALUE = r"((?:'(?:[^']|'')*'|\"[^\"]*\"|[^;'\"])*)"  # (no statement can follow a value)
_SET = re.compile(r"SET\s+(?:SESSION\s+|LOCAL\s+)?" + _NAME + r"\s*(?:=|\bTO\b)\s*" + _VALUE,
                  re.IGNORECASE | re.DOTALL)
_SET_TZ = re.compile(r"SET\s+(?:SESSION\s+|LOCAL\s+)?TIME\s+ZONE\s+" + _VALUE,
                     re.IGNORECASE | re.DOTALL)
_SHOW_ISOLATION = re.compile(r"SHOW\s+TRANSACTION\s+ISOLATION\s+LEVEL", re.IGNORECASE)
_SHOW = re.compile(r"SHOW\s+" + _NAME, re.IGNORECASE)
_RESET = re.compile(r"RESET\s+" + _NAME, re.IGNORECASE)
_VERSION = re.compile(r"SELECT\s+(?:pg_catalog\s*\.\s*)?version\s*\(\s*\)", re.IGNORECASE)
_CURRENT = re.compile(r"SELECT\s+(?:pg_catalog\s*\.\s*)?current_setting\s*\(\s*'([^']*)'\s*\)",
                      re.IGNORECASE)
_IDENTITY = re.compile(r"SELECT\s+(?:pg_catalog\s*\.\s*)?(current_schema|current_database)"
                       r"\s*\(\s*\)|SELECT\s+(current_user|session_user|user)", re.IGNORECASE)
_BEGIN = re.compile(r"(BEGIN|START\s+TRANSACTION)(\s+.*)?", re.IGNORECASE | re.DOTALL)
_END = re.compile(r"(COMMIT|END|ROLLBACK|ABORT)(\s+(WORK|TRANSACTION))?", re.IGNORECASE)
_SAVEPOINT = re.compile(r"(SAVEPOINT|RELEASE(?:\s+SAVEPOINT)?|ROLLBACK\s+TO(?:\s+SAVEPOINT)?)"
                        r"\s+(\"[^\"]+\"|\w+)", re.IGNORECASE)
_QUIET = re.compile(r"(DISCARD\s+ALL|DEALLOCATE\s+(PREPARE\s+)?(ALL|\w+)|UNLISTEN\s+\*)",
                    re.IGNORECASE)


_NO_UNDO = ("privplan: ROLLBACK restores no privacy budget: every answer was charged before "
            "it was released")


_BOOLEANS = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False,
             "no": False, "0": False}
_TIME_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0,
               "d": 86_400_000.0}
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_timeout(value: str) -> int:
    """A ``statement_timeout`` value in milliseconds, read as PostgreSQL reads it (a number,
    ``ms`` when no unit is given; ``us``, ``ms``, ``s``, ``min``, ``h``, ``d``)."""
    m = _DURATION.fullmatch(value)
    unit = m.group(2).lower() if m else ""
    if m is None or (unit and unit not in _TIME_UNITS):
        raise ClientError("22023", f"invalid value for parameter \"statement_timeout\": "
                          f"{value!r}", hint="a duration: e.g. 2500, '2.5s', '1min'; 0 for none "
                          f"(units: {', '.join(_TIME_UNITS)})")
    ms = float(m.group(1)) * _TIME_UNITS[unit or "ms"]
    if ms > 2_147_483_647:
        raise ClientError("22023", "statement_timeout is out of range (at most 2147483647ms)")
    return round(ms)


def show_timeout(ms: int) -> str:
    """``ms`` as PostgreSQL's SHOW writes a duration (the largest unit it divides)."""
    if ms == 0:
        return "0"
    for unit in ("d", "h", "min", "s"):
        if ms % _TIME_UNITS[unit] == 0:
            return f"{ms // int(_TIME_UNITS[unit])}{unit}"
    return f"{ms}ms"


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1].replace(value[0] * 2, value[0])
    return value


def _option_pairs(options: str) -> list[str]:
    """The ``name=value`` of each ``-c name=value``, ``-cname=value`` or ``--name=value`` of a
    startup ``options`` string (words split at spaces not escaped by a backslash)."""
    words = [w.replace("\\ ", " ") for w in re.split(r"(?<!\\)\s+", options.strip()) if w]
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-c" and i + 1 < len(words):
            out.append(words[i + 1])
            i += 1
        elif word.startswith(("-c", "--")) and word != "-c":
            out.append(word[2:])
        i += 1
    return [pair for pair in out if "=" in pair]


class Settings:
    """One connection's settings (startup parameters, SETs, the per-query budget)."""

    def __init__(self, startup: dict[str, str], totals: Callable[[str], str],
                 statement_timeout: float = 0.0) -> None:
        self.values: dict[str, str] = {
            "server_version": SERVER_VERSION, "server_encoding": "UTF8",
            "client_encoding": "UTF8", "DateStyle": "ISO, MDY", "integer_datetimes": "on",
            "standard_conforming_strings": "on", "TimeZone": "UTC",
            "IntervalStyle": "postgres", "is_superuser": "off",
            "application_name": startup.get("application_name", ""),
            "transaction_isolation": "read committed", "max_identifier_length": "63"}
        self.budget: dict[str, float] = {}
        self.intervals = False  # (SET privplan.intervals)
        self._default_timeout = max(0, round(statement_timeout * 1000))  # (ms: the server's)
        self.timeout_ms = self._default_timeout
        user = startup.get("user", "")
        self._identity = {"current_schema": DEFAULT_SCHEMA, "user": user, "current_user": user,
                          "session_user": user,
                          "current_database": startup.get("database", user) or "privplan"}
        self._totals = totals
        self.in_transaction = False

    def apply_startup(self, params: dict[str, str]) -> None:
        """The ``privplan.*`` settings of a startup packet: as parameters of their own (drivers'
        ``server_settings``) or in ``options`` (``-c privplan.epsilon=0.1``, libpq's
        ``PGOPTIONS``). Each is checked as its ``SET`` is (a bad one refuses the connection);
        ``statement_timeout`` is read the same way; other options are ignored, as other
        ``SET``s change nothing."""
        def ours(name: str) -> bool:
            return name.lower().startswith("privplan.") or name.lower() == "statement_timeout"

        for key, value in params.items():
            if ours(key):
                self._set(key, value)
        for pair in _option_pairs(params.get("options", "")):
            name, _, value = pair.partition("=")
            if ours(name):
                self._set(name, value)

    @property
    def statement_timeout(self) -> float:
        """The connection's statement timeout in seconds (0: none)."""
        return self.timeout_ms / 1000

    def reported(self) -> dict[str, str]:
        """The ParameterStatus values sent after authentication."""
        keys = ("server_version", "server_encoding", "client_encoding", "DateStyle",
                "integer_datetimes", "standard_conforming_strings", "TimeZone",
                "IntervalStyle", "is_superuser", "application_name")
        return {k: self.values[k] for k in keys}

    def scratch(self) -> Settings:
        """A copy whose statements change nothing of this one (a Describe answers a SET or a
        SHOW on it: describing a statement must not run it)."""
        copy = Settings({}, self._totals)
        copy.values, copy.budget = dict(self.values), dict(self.budget)
        copy.intervals, copy.timeout_ms = self.intervals, self.timeout_ms
        copy._default_timeout = self._default_timeout
        copy._identity, copy.in_transaction = dict(self._identity), self.in_transaction
        return copy

    def answer(self, sql: str) -> Answer | None:
        """The answer of ``sql`` if it is one of this module's statements, else None."""
        text = sql.strip().rstrip(";").strip()
        if m := _SET_TZ.fullmatch(text):
            self.values["TimeZone"] = _unquote(m.group(1))
            return Answer("SET")
        if m := _SET.fullmatch(text):
            return self._set(m.group(1), _unquote(m.group(2)))
        if m := _RESET.fullmatch(text):
            return self._set(m.group(1), None)
        if _SHOW_ISOLATION.fullmatch(text):
            return self._show("transaction_isolation")
        if m := _SHOW.fullmatch(text):
            return self._show(m.group(1))
        if _VERSION.fullmatch(text):
            return Answer.table([("version", "VARCHAR")],
                                [(f"PostgreSQL {SERVER_VERSION}, privplan DP SQL server",)])
        if m := _CURRENT.fullmatch(text):
            return Answer.table([("current_setting", "VARCHAR")], [(self._get(m.group(1)),)])
        if m := _IDENTITY.fullmatch(text):
            name = (m.group(1) or m.group(2)).lower()
            return Answer.table([(name, "VARCHAR")], [(self._identity[name],)])
        return self._transaction(text)

    def _transaction(self, text: str) -> Answer | None:
        if m := _SAVEPOINT.fullmatch(text):
            word = m.group(1).split()[0].upper()
            return Answer(word, notices=[_NO_UNDO] if word == "ROLLBACK" else [])
        if _BEGIN.fullmatch(text):
            self.in_transaction = True
            return Answer("BEGIN")
        if m := _END.fullmatch(text):
            self.in_transaction = False
            word = m.group(1).upper()
            if word in ("ROLLBACK", "ABORT"):
                return Answer("ROLLBACK", notices=[_NO_UNDO])
            return Answer("COMMIT")
        if _QUIET.fullmatch(text):
            return Answer(text.split()[0].upper())
        return None

    def _set(self, name: str, value: str | None) -> Answer:
        key = name.lower()
        if key == "statement_timeout":
            reset = value is None or value.lower() == "default"
            self.timeout_ms = self._default_timeout if reset else parse_timeout(value or "")
            return Answer("RESET" if value is None else "SET")
        if key == "privplan.intervals":
            if value is None or value.lower() == "default":
                self.intervals = False
                return Answer("RESET" if value is None else "SET")
            if value.lower() not in _BOOLEANS:
                raise ClientError("22023", f"SET {name}: {value!r} is not on or off")
            self.intervals = _BOOLEANS[value.lower()]
            return Answer("SET")
        if key.startswith("privplan."):
            field = key.removeprefix("privplan.")
            if field not in budget_keywords():
                raise ClientError("42704", f"unrecognized privplan setting {name!r}: the "
                                  f"settings are privplan.{', privplan.'.join(budget_keywords())}"
                                  ", privplan.intervals")
            if value is None or value.lower() == "default":
                self.budget.pop(field, None)
                return Answer("RESET" if value is None else "SET")
            try:
                number = float(value)
            except ValueError:
                raise ClientError("22023", f"SET {name}: {value!r} is not a number. Fix: e.g. "
                                  f"SET {name} = 0.1") from None
            if not number > 0 or number == float("inf"):
                raise ClientError("22023", f"SET {name}: must be a positive finite number")
            self.budget[field] = number
            return Answer("SET")
        canonical = next((k for k in self.values if k.lower() == key), name)
        if value is None:
            return Answer("RESET")
        self.values[canonical] = value
        return Answer("SET")

    def _get(self, name: str) -> str:
        key = name.lower()
        if key == "statement_timeout":
            return show_timeout(self.timeout_ms)
        if key == "privplan.intervals":
            return "on" if self.intervals else "off"
        if key in ("privplan.spent", "privplan.remaining", "privplan.budget"):
            return self._totals(key.removeprefix("privplan."))
        if key.startswith("privplan."):
            field = key.removeprefix("privplan.")
            if field in budget_keywords():
                return repr(self.budget[field]) if field in self.budget else ""
        for k, v in self.values.items():
            if k.lower() == key:
                return v
        raise ClientError("42704", f"unrecognized configuration parameter \"{name}\"")

    def _show(self, name: str) -> Answer:
        value = self._get(name)
        return Answer.table([(name.lower() if "." in name else name, "VARCHAR")], [(value,)])
