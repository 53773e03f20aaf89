"""One connection's statements answered: free ones from the server's settings or the policy,
every other one as a DP query through :meth:`privplan.Session.sql`.

Per statement, in order: a server statement (:mod:`privplan.server.settings`: SET, SHOW,
version(), transactions); a statement the DB-API answers free (constant selects and
``information_schema`` queries answered from the policy on an empty sandbox:
:mod:`privplan.dbapi.free`); a ``pg_catalog`` query, answered on an empty replica of the
policy's tables (:mod:`privplan.server.catalog`); otherwise a DP query. Its budget is the query's own BigQuery
``OPTIONS(epsilon=...)`` clause, else the connection's ``SET privplan.epsilon`` (delta, rho, mu);
without either it is refused before anything is planned. The cost of each answer goes to the
client as a NOTICE. With ``SET privplan.intervals = on`` each noisy column ``c`` that has a 95%
interval is followed by ``c_low`` and ``c_high`` (:func:`privplan.server.describe.with_intervals`:
the library's ``Result.with_intervals()``), in Describe as in Execute.

Privacy: the only path to private rows is ``Session.sql`` (the gate, the charge, then the
release); the free paths read settings, the ledger's totals and the policy's schema only
(the catalog replica holds no row of any table). A
statement that fails is answered with privplan's message, never an engine's or Python's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from privplan.accounting.definitions import join_or, keyword_menu
from privplan.dbapi.connection import Connection
from privplan.dbapi.free import _columns, _free_answer, _rows
from privplan.dbapi.tables import refuse_table_read
from privplan.planning.shapes import route
from privplan.server.catalog import CatalogSandbox, is_catalog_query
from privplan.server.describe import released_fields, with_intervals
from privplan.server.formats import Answer
from privplan.server.messages import Field
from privplan.server.settings import Settings
from privplan.server.sqlstate import ClientError
from privplan.session.session import Session
from privplan.sql.bigquery import QUERY_OPTIONS, apply_dp_clause

__all__ = ["Answerer", "split_statements"]


def split_statements(sql: str) -> list[str]:
    """The statements of a simple Query, split at top-level semicolons (found by sqlglot's
    tokenizer, so one inside a string or comment is not a split); a text the tokenizer cannot
    read is one statement (privplan then says what is wrong with it)."""
    try:
        tokens = DuckDB().tokenizer_class().tokenize(sql)
    except TokenError:
        return [sql] if sql.strip() else []
    out: list[str] = []
    start = 0
    has_tokens = False
    for t in tokens:
        if t.token_type == TokenType.SEMICOLON:
            if has_tokens:
                out.append(sql[start:t.start])
            start, has_tokens = t.end + 1, False
        else:
            has_tokens = True
    if has_tokens:
        out.append(sql[start:])
    return out


class Answerer:
    """Answers one connection's statements over its own Session (which charges its analyst's
    account and the data's total, both shared with the server's other connections)."""

    def __init__(self, session: Session, startup: dict[str, str], *,
                 statement_timeout: float = 0.0, check: Callable[[], None] | None = None
                 ) -> None:
        self.session = session
        self._schema = Connection(session)  # (for the DB-API's free answers only)
        self.settings = Settings(startup, self._total, statement_timeout)
        # (raises if the running statement was cancelled: called before a DP query is planned)
        self._check = check
        self._catalog = CatalogSandbox(self._schema.describe_schema)
        self._private = {name.lower() for name in session.policy.tables}

    def close(self) -> None:
        self._catalog.close()
        self._schema.close()

    def _total(self, which: str) -> str:
        """SHOW privplan.spent / remaining / budget: the analyst's own account (the data's
        total is not shown to an analyst: it would tell them about the others' queries)."""
        account = self.session.reported
        value = {"spent": account.spent, "remaining": account.remaining,
                 "budget": lambda: account.budget}[which]()
        return str(value.describe())

    def answer(self, sql: str) -> Answer:
        """The answer of one statement (raises :class:`ClientError` or a privplan error)."""
        server = self.settings.answer(sql)
        if server is not None:
            return server
        free = self._free(sql)
        return free if free is not None else self._dp(sql)

    def _free(self, sql: str) -> Answer | None:
        """The answer of a statement that reads no private row (a constant select, an
        ``information_schema`` or ``pg_catalog`` query: :mod:`privplan.server.catalog`)."""
        free = _free_answer(self._schema, sql)
        if free is not None:
            return Answer.table(free.columns, free.rows,
                                ["privplan: reads no private row: answered without a charge"])
        if is_catalog_query(sql, self._private):  # (no NOTICE: psql's \d sends a dozen)
            return self._catalog.answer(sql)
        return None

    def describe(self, sql: str) -> list[Field] | None:
        """The RowDescription fields ``answer(sql)`` would send (None: no rows), found without
        answering a DP query, charging anything or changing a setting: a server statement is
        answered on a scratch copy of the settings, a free one answered (it reads no private
        row), a DP query planned (:func:`privplan.server.describe.released_fields`)."""
        server = self.settings.scratch().answer(sql)
        if server is not None:
            return server.fields
        free = self._free(sql)
        if free is not None:
            return free.fields
        sql, value, extra = self._budget(sql)
        if self._check is not None:
            self._check()
        return released_fields(self.session, sql, {"budget": value, **extra},
                               intervals=self.settings.intervals)

    def _budget(self, sql: str) -> tuple[str, Any, dict[str, Any]]:
        """A DP query's text (its BigQuery clause applied), budget value and other options
        (refused before anything is planned when it has no budget)."""
        session = self.session
        refuse_table_read(session.policy, sql)
        sql, kwargs = apply_dp_clause(sql, session.policy, session.kind, {})
        if not kwargs:
            kwargs = dict(self.settings.budget)
        if not any(k not in QUERY_OPTIONS for k in kwargs):
            raise ClientError(
                "22023", "no privacy budget for this query, and privplan never picks one for "
                "you (every answer spends some of the data's budget)",
                hint="set the budget of each later query first: "
                f"{join_or(keyword_menu(lambda n: f'SET privplan.{n} = ...'))}; or write it "
                "in the query: SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=...) ...")
        extra = {k: kwargs.pop(k) for k in QUERY_OPTIONS if k in kwargs}
        try:
            value = session.query_value(kwargs)
        except (ValueError, TypeError) as err:
            raise ClientError("22023", f"invalid budget: {err}") from None
        return sql, value, extra

    def _dp(self, sql: str) -> Answer:
        session = self.session
        sql, value, extra = self._budget(sql)
        if self._check is not None:  # (a statement cancelled before it is planned)
            self._check()
        result: Any = session.sql(sql, budget=value, **extra)
        account = session.reported  # (the analyst's: see _total)
        # the analyst's total after this charge, as composed under the charge's lock (read
        # again from the ledger only for several DP subqueries, each charged on its own: the
        # Result explains the first); reading it again took a second write lock per answer
        spent = (result.explanation.projected_total if route(sql, session.policy) is None
                 else account.spent())
        notice = (f"privplan: this answer cost {result.cost.describe()}; spent "
                  f"{spent.describe()} of {account.budget.describe()}")
        df = with_intervals(result.df, result.intervals) if self.settings.intervals else result.df
        return Answer.table(_columns(df), _rows(df), [notice])
