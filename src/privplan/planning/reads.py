"""What planning may ask of the world outside the query text and the policy, as Protocols.

Planning receives no connection: a function here that needs the engine is given one of these
narrow views of it, so its type says what it may do — read a table's schema, read PUBLIC
tables, keep a public domain as a relation — and that it cannot read a private row. The
session passes its engine (:class:`~privplan.engines.base.Engine` has every method below) and
the process's judge (:class:`~privplan.engines.judge.Judge`); planning imports neither.

Privacy: no Protocol here offers a read of private rows; planning's reads are schemas and public data.
"""

from __future__ import annotations

from typing import Any, Protocol

from privplan.sql.totality import ExpressionJudge

__all__ = ["DomainJudge", "DomainTables", "PublicCatalog"]


class PublicCatalog(Protocol):
    """Schemas, and the rows of public tables (public data: reading it reveals nothing
    private; DESIGN.md invariant 2 concerns private rows)."""

    def table_sql(self, table: Any) -> str:
        """How the engine names the policy table ``table`` in a statement."""
        ...

    def columns(self, table_sql: str) -> dict[str, str]:
        """The engine type of each column of a table (its schema, never its rows)."""
        ...

    def fetch_public(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of a privplan-built statement over public tables only."""
        ...


class DomainTables(Protocol):
    """Where a long public key domain is kept as a relation for the engine statement."""

    def domain_table(self, values: list[Any]) -> str:
        """A relation of the public ``values`` (made once per session), by name."""
        ...


class DomainJudge(ExpressionJudge, Protocol):
    """The judge of types (:class:`~privplan.sql.totality.ExpressionJudge`), also asked to
    type public key domains: queries over constants only, never over a table. Failures are
    raised as :class:`~privplan.sql.totality.JudgeError`."""

    def fetch(self, sql: str) -> list[tuple[object, ...]]:
        """Rows of a privplan-built query over constants."""
        ...

    def fetch_over(self, sql: str, values: list[object]) -> list[tuple[object, ...]]:
        """Rows of a privplan-built query over one list of public constants (``$1``)."""
        ...
