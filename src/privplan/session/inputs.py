"""What :func:`privplan.connect` accepts besides a database: a policy in any of its forms, and a
CSV or Parquet file standing for the policy's one private table."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privplan.engines.data_files import resolve_files
from privplan.errors import PolicyError
from privplan.policy import Policy

__all__ = ["as_policy", "data_file"]


def data_file(database: Any, policy: Policy) -> tuple[str, str] | None:
    """(table, path) when ``database`` is a CSV or Parquet file, or a glob of them (one table,
    as DuckDB reads a glob): it holds the policy's one private table (read as
    :meth:`DuckDBEngine.register` reads files), in an in-memory database. Checked before the
    ledger is touched."""
    if not isinstance(database, (str, Path)) or Path(database).suffix.lower() not in (
            ".csv", ".parquet") or "://" in str(database):
        return None
    resolve_files(database, "cannot connect")  # (it exists, or its glob matches a file)
    path = Path(database)
    private = list(policy.private_tables())
    if len(private) != 1:
        names = ", ".join(t.name for t in private) or "none"
        raise PolicyError(
            f"'{path}' is one table, but the policy declares {len(private)} private tables "
            f"({names}). Connect to ':memory:' (or a DuckDB file) and register() each table, "
            "or declare each table's file with `source:` in the policy.")
    return private[0].name, str(path)


def as_policy(policy: Any) -> Policy:
    """A :class:`Policy` from a Policy, a dict, or a path to a YAML file."""
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        return Policy.from_dict(policy)
    if isinstance(policy, (str, Path)):
        return Policy.from_yaml(policy)
    raise PolicyError("policy must be a Policy, a dict, or a path to a YAML file")
