"""``privplan.planning.memo.derived``: once per live object and key, dropped with the object."""

from __future__ import annotations

import gc

from privplan.planning import memo


class _Planned:
    pass


def test_computed_once_per_object_and_key_and_dropped_with_the_object() -> None:
    calls: list[str] = []
    a, b = _Planned(), _Planned()

    def compute(name: str) -> str:
        calls.append(name)
        return name

    assert memo.derived(a, "k", lambda: compute("a")) == "a"
    assert memo.derived(a, "k", lambda: compute("again")) == "a"
    assert memo.derived(a, "other", lambda: compute("a2")) == "a2"
    assert memo.derived(b, "k", lambda: compute("b")) == "b"
    assert calls == ["a", "a2", "b"]
    ident = id(a)
    del a
    gc.collect()
    assert ident not in memo._MEMO  # (a new object at the same address starts afresh)
    c = _Planned()
    assert memo.derived(c, "k", lambda: compute("c")) == "c"


def test_an_object_without_weak_references_is_derived_each_time() -> None:
    """(A stand-in core made as a SimpleNamespace, as ``rewrite/per_unit_sql.py`` makes one:
    nothing holds it, so nothing is kept for it.)"""
    from types import SimpleNamespace

    calls: list[int] = []
    stand_in = SimpleNamespace(table_sql="t")
    assert memo.derived(stand_in, "k", lambda: calls.append(1) or 1) == 1
    assert memo.derived(stand_in, "k", lambda: calls.append(2) or 2) == 2
    assert calls == [1, 2] and id(stand_in) not in memo._MEMO
