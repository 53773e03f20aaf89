"""An empty instance's first extension, remembered by its regions, gives what computing it
again gives (``accounting/solver/first_extension.py``).

Oracle: the same mechanisms composed with the memory emptied — every table solver's exported
state (atoms, rows, weights, maxima and witnesses) and the total must be equal. Random sessions
from the accountant's own strategies: the first batch is admitted by two fresh accountants (the
second reads what the first remembered), with the mechanisms renamed (as a later session names
them after its own ledger) and with a GROUP BY key column changed on the same region (the key
must then differ). Then a session of fresh sessions at 200 public keys, answered through
``pp.connect``: each fresh session's charge equals the first's.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import privplan as pp
from privplan.accounting.accountant import Accountant
from privplan.accounting.model import MechanismSpec, Partition
from privplan.accounting.solver import first_extension as memo
from privplan.testing import noise_disabled
from tests.accounting.test_accountant import TABLES, sessions


def _plain(value: Any) -> Any:
    """A solver state as comparable values (arrays as their dtype, shape and elements)."""
    if isinstance(value, np.ndarray):
        return (str(value.dtype), value.shape, value.tolist())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return (type(value).__name__, {f.name: _plain(getattr(value, f.name))
                                       for f in fields(value)})
    return value


def _states(kind: type, batches: list[list[MechanismSpec]]) -> tuple[Any, Any]:
    acc = Accountant(TABLES, kind)
    for batch in batches:
        acc.admit(batch)
    return acc.total, _plain(acc.export_state())


def _forgetting(kind: type, batches: list[list[MechanismSpec]]) -> tuple[Any, Any]:
    memo._forget()
    try:
        return _states(kind, batches)
    finally:
        memo._forget()


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_a_remembered_first_extension_composes_as_computing_it_again(session: Any) -> None:
    kind, batches = session
    want = _forgetting(kind, batches)
    first = _states(kind, batches)  # (remembers each table's first extension)
    assert memo._KNOWN
    again = _states(kind, batches)  # (reads it)
    assert first == again == want
    renamed = [[replace(m, id=f"later-{m.id}") for m in b] for b in batches]
    assert _states(kind, renamed) == _forgetting(kind, renamed)
    rekeyed = [[replace(m, partition=None if m.partition else Partition(("a",), ("a",)))
                for m in b] for b in batches]  # (the same regions, other key columns)
    _states(kind, batches)
    assert _states(kind, rekeyed) == _forgetting(kind, rekeyed)


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_accountants_that_start_from_one_remembered_solver_diverge_as_computed_again(
        session: Any) -> None:
    """Two fresh accountants admit the same first batch (the second starts from the solver the
    first made: the very object), then different histories (the rest, and the rest reversed
    and renamed): each must end as it would with nothing remembered; a solver shared by two
    accountants that one of them changed in place would fail here."""
    kind, batches = session
    first, rest = batches[0], batches[1:]
    other = [[replace(m, id=f"other-{m.id}") for m in b] for b in reversed(rest)]
    want_a, want_b = _forgetting(kind, batches), _forgetting(kind, [first, *other])
    a, b = Accountant(TABLES, kind), Accountant(TABLES, kind)
    a.admit(first)
    b.preview(first)
    b.admit(first)
    assert all(s is t for s, t in zip(a._solvers.values(), b._solvers.values()))
    for batch in rest:
        a.admit(batch)
    for batch in other:
        b.preview(batch)
        b.admit(batch)
    assert (a.total, _plain(a.export_state())) == want_a
    assert (b.total, _plain(b.export_state())) == want_b


def test_fresh_sessions_over_many_public_keys_charge_alike() -> None:
    names = [f"k{i:03d}" for i in range(200)]
    policy = {"tables": {"t": {"privacy_unit": "row", "columns": {
        "k": {"type": "str", "public_values": names, "nullable": False},
        "x": {"type": "int", "lower": 0, "upper": 9, "nullable": False}}}}}
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 'k' || lpad((i % 250)::VARCHAR, 3, '0') AS k, "
                "i % 10 AS x FROM range(1000) r(i)")
    sql = "SELECT k, COUNT(*) AS n, SUM(x) AS s FROM t WHERE x < 7 GROUP BY k"
    memo._forget()
    seen = []
    for _ in range(3):
        with pp.connect(con, policy=policy, budget=pp.PureDP(100)) as sess, noise_disabled():
            res = sess.sql(sql, epsilon=1)
            seen.append((res.cost, res.query_cost, res.df.to_dict("list"),
                         [(e.mechanisms, e.marginal, e.total_after)
                          for e in sess.ledger.entries()]))
    # (the later sessions charged the first's very specs and read its solver: one entry)
    assert memo._KNOWN and len(memo._SOLVERS) == 1
    assert seen[0] == seen[1] == seen[2]
    memo._forget()
    con.close()
