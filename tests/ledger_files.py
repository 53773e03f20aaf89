"""Editing a ledger file behind privplan's back (the fault tests' tampering)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def edit_ledger(path: Path, sql: str, *params: object) -> None:
    """Run one statement on the SQLite file directly and commit it."""
    con = sqlite3.connect(path)
    con.execute(sql, params)
    con.commit()
    con.close()
