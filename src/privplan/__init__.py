"""privplan: differentially private SQL and pandas queries, charged with the general composition
theorem (a neighbouring pair pays only for the mechanisms whose input it changes).

>>> import privplan as pp
>>> pp.PureDP(0.5) + pp.PureDP(0.25)
PureDP(epsilon=0.75)

The package imports its parts when they are first used (``privplan --help`` need not load
pandas, scipy or DuckDB). The pandas accessor ``df.dp`` is registered as soon as pandas is
imported, before or after privplan.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any

from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.errors import (
    BudgetExceededError,
    EngineUnavailableError,
    ExecutionError,
    InternalError,
    LedgerError,
    ParseError,
    PolicyError,
    PostProcessingError,
    PrivplanError,
    UnsupportedQueryError,
)

__all__ = [
    "GDP",
    "ZCDP",
    "ApproxDP",
    "BudgetExceededError",
    "EngineUnavailableError",
    "ExecutionError",
    "InternalError",
    "LedgerError",
    "ParseError",
    "Policy",
    "PolicyError",
    "PostProcessingError",
    "PrivplanError",
    "PureDP",
    "Result",
    "Session",
    "UnsupportedQueryError",
    "connect",
]
__version__ = "0.1.0"

if TYPE_CHECKING:  # (what a type checker sees; at run time these load on first use)
    from privplan.policy import Policy
    from privplan.result import Result
    from privplan.session.session import Session, connect

_LAZY = {"Policy": "privplan.policy", "Result": "privplan.result",
         "Session": "privplan.session.session", "connect": "privplan.session.session"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'privplan' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (what tab completion offers): ``__all__`` and ``__version__``, not the
    machinery that imports the parts lazily and registers ``df.dp``."""
    return sorted([*__all__, "__version__"])


class _AfterPandas(MetaPathFinder, Loader):
    """Registers ``df.dp`` right after pandas finishes importing (then steps aside)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != "pandas":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("pandas")
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self._loader.exec_module(module)
        finally:  # pandas keeps its own loader (resources, reloading)
            module.__loader__ = self._loader
            if module.__spec__ is not None:
                module.__spec__.loader = self._loader
        _register_accessor(module)

    def __getattr__(self, name: str) -> Any:  # anything else a loader offers: pandas's own
        if name == "_loader":
            raise AttributeError(name)
        return getattr(self._loader, name)


def _register_accessor(pandas: Any) -> None:
    """``df.dp``, resolved to :class:`privplan.pandas.DPAccessor` on first use (so that
    registering it imports nothing: pandas may be imported by privplan itself, midway)."""

    @pandas.api.extensions.register_dataframe_accessor("dp")
    class _DP:
        __doc__ = "df.dp: differentially private answers about df (privplan.pandas.DPAccessor)"

        def __new__(cls, frame: Any) -> Any:
            from privplan.pandas import DPAccessor

            return DPAccessor(frame)


if "pandas" in sys.modules:
    _register_accessor(sys.modules["pandas"])
elif not any(isinstance(f, _AfterPandas) for f in sys.meta_path):
    sys.meta_path.insert(0, _AfterPandas())
