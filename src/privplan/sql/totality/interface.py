"""What the totality check needs from the engine, and what it returns.

The check never reads data: it asks the engine (an :class:`ExpressionJudge`, see
:mod:`privplan.engines.judge`) only for the types of privplan-built expressions over typed NULLs
and for the evaluation of constants, so a refusal (:class:`JudgeError`) depends on the query and
the column types alone. Its answer is a :class:`TotalExpression`: the expression as the engine
should run it, and the engine's type of its value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlglot import exp

from privplan.sql.totality.engine_types import Family, family


class JudgeError(Exception):
    """Raised by an :class:`ExpressionJudge`: the engine refused expression ``index`` (or the
    batch, if ``index`` is None). Its message concerns privplan-built SQL, never data."""

    def __init__(self, message: str, index: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.index = index


class ExpressionJudge(Protocol):
    """What the check needs from the engine (see :class:`privplan.engines.judge.Judge`);
    failures are raised as :class:`JudgeError`."""

    def types(self, expressions: list[str]) -> list[str]: ...

    def evaluate(self, expressions: list[str]) -> None: ...


@dataclass(frozen=True)
class TotalExpression:
    """An expression as the engine should run it, and the engine's type of its value."""

    expr: exp.Expression
    type: str

    @property
    def family(self) -> Family:
        return family(self.type)
