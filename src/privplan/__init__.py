"""privplan: differentially private SQL and pandas queries, charged with the general composition
theorem (a neighbouring pair pays only for the mechanisms whose input it changes).

>>> import privplan as pp
>>> pp.PureDP(0.5) + pp.PureDP(0.25)
PureDP(epsilon=0.75)
"""

from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.errors import (
    BudgetExceededError,
    InternalError,
    LedgerError,
    ParseError,
    PolicyError,
    PrivplanError,
    UnsupportedQueryError,
)
from privplan.policy import Policy
from privplan.result import Result
from privplan.session import Session, connect

import privplan.pandas  # noqa: E402,F401  (registers the DataFrame accessor df.dp)

__all__ = [
    "ApproxDP",
    "BudgetExceededError",
    "GDP",
    "InternalError",
    "LedgerError",
    "ParseError",
    "Policy",
    "PolicyError",
    "PrivplanError",
    "PureDP",
    "Result",
    "Session",
    "UnsupportedQueryError",
    "ZCDP",
    "connect",
]
__version__ = "0.1.0"
