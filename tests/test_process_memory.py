"""Every process-wide memory is registered in one list and emptied by one call
(``privplan/process_memory.py``): the suite's autouse fixture relies on it."""

from __future__ import annotations

from pathlib import Path

import duckdb

import privplan as pp
from privplan.accounting.solver import first_extension as first
from privplan.engines.file_catalog import file_catalog
from privplan.gate import outer
from privplan.process_memory import forget_all, memories
from privplan.session.shared_plans import shared_plans
from privplan.sql import parse, totality

POLICY = {
    "tables": {"t": {"privacy_unit": "row", "columns": {
        "g": {"type": "str", "public_values": ["a", "b"]},
        "x": {"type": "int", "lower": 0, "upper": 10}}}},
}


def _sizes() -> dict[str, int]:
    return {"shared_plans": len(shared_plans), "file_catalog": len(file_catalog._known),
            "first_extension": len(first._KNOWN), "totality": len(totality._DONE),
            "parse": len(parse._TREES)}


def test_every_memory_a_session_fills_is_registered_and_emptied(tmp_path: Path) -> None:
    path = tmp_path / "d.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END AS g, "
                    "i % 11 AS x FROM range(100) r(i)")
    forget_all()
    for _ in range(2):  # (the second session reuses what the first left)
        with pp.connect(str(path), policy=POLICY, budget=pp.PureDP(10)) as sess:
            answer = sess.sql("SELECT g, COUNT(*) AS n, SUM(x) AS s FROM t WHERE x > 2 "
                              "GROUP BY g", epsilon=0.5).df
        assert list(answer["g"]) == ["a", "b"]
    filled = _sizes()
    assert all(n > 0 for n in filled.values()), filled  # (each holds something to forget)
    assert {"privplan.session.shared_plans", "privplan.engines.file_catalog",
            "privplan.accounting.solver.first_extension", "privplan.sql.totality",
            "privplan.sql.parse", "privplan.gate.outer", "privplan.engines.copy_snapshots",
            "privplan.engines.domain_values", "privplan.engines.shared_copies"} <= set(memories())
    from privplan.engines.shared_copies import registry

    assert registry.asked(("planted",)) == 1 and registry.asked(("planted",)) == 2
    outer._CHECKED[("planted",)] = True
    forget_all()
    assert _sizes() == dict.fromkeys(filled, 0)
    assert registry.asked(("planted",)) == 1  # (counted afresh)
    assert not outer._CHECKED
