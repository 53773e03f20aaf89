"""A PEP 249 (DB-API 2.0) module: ``privplan.dbapi.connect(...)`` (see
:mod:`privplan.dbapi.connection`); its exceptions, parameters and free answers live beside
it in this package."""

from __future__ import annotations

from privplan.dbapi.connection import (
    BINARY,
    BOOLEAN,
    DATETIME,
    NUMBER,
    ROWID,
    STRING,
    Binary,
    BudgetExceeded,
    ColumnInfo,
    Connection,
    Cursor,
    DatabaseError,
    DataError,
    Date,
    DateFromTicks,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    TableInfo,
    Time,
    TimeFromTicks,
    Timestamp,
    TimestampFromTicks,
    Warning,
    apilevel,
    bind_parameters,
    connect,
    paramstyle,
    threadsafety,
)

__all__ = [
    "BINARY", "BOOLEAN", "DATETIME", "NUMBER", "ROWID", "STRING", "Binary",
    "BudgetExceeded", "ColumnInfo", "Connection", "Cursor", "DataError", "DatabaseError",
    "Date", "DateFromTicks", "Error", "IntegrityError", "InterfaceError", "InternalError",
    "NotSupportedError", "OperationalError", "ProgrammingError", "TableInfo", "Time",
    "TimeFromTicks", "Timestamp", "TimestampFromTicks", "Warning", "apilevel",
    "bind_parameters", "connect", "paramstyle", "threadsafety",
]
