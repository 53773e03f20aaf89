"""PEP 249 parameters (``paramstyle = "qmark"``): ``?`` placeholders (and ``:name`` with a
mapping, as in sqlite3) replaced by SQL literals before privplan reads the statement, by the
binder the Python API shares (:mod:`privplan.sql.params`: why a value can never become SQL is
explained there); its errors are raised as the DB-API's classes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from privplan import errors as _pe
from privplan.dbapi.errors import DataError, InternalError, NotSupportedError, ProgrammingError
from privplan.sql.params import ParameterError, Style, bind_params

__all__ = ["bind_parameters"]

_STYLE = Style(call="cursor.execute(sql, {})", named=":")
_CLASSES = {"data": DataError, "not_supported": NotSupportedError}


def bind_parameters(sql: str, parameters: Sequence[Any] | Mapping[str, Any] | None) -> str:
    """Substitute ``?`` (sequence) or ``:name`` (mapping) placeholders with SQL literals."""
    try:
        return bind_params(sql, parameters, _STYLE)
    except ParameterError as err:
        out = _CLASSES.get(err.kind, ProgrammingError)(str(err))
        out.privplan_error = err
        raise out from None
    except _pe.InternalError as err:
        raise InternalError(str(err)) from None
