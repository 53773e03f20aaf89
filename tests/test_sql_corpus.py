"""SQL coverage against the peers' own queries (benchmarks/corpus/, run by
benchmarks/sql_corpus.py): the acceptance of the coverage work, asserted.

Per source: privplan answers at least 90% of the queries the source expects to succeed (leaving
out only test-only conventions such as ZetaSQL's ``delta = 1``), nothing crashes, and the exact
(noise-off) values lie inside the stated 95% intervals at about the stated rate. Every corpus
entry cites the file and line it comes from; an entry whose SQL differs from the source's says
how (``translation``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import sql_corpus

SOURCES = sorted(p.name for p in sql_corpus.CORPUS.iterdir() if (p / "queries.yaml").exists())


def test_every_source_is_present_and_every_entry_cites_its_origin() -> None:
    assert set(SOURCES) == {"smartnoise", "qrlew", "tumult", "bigquery", "zetasql"}
    for name in SOURCES:
        source = sql_corpus.load_source(sql_corpus.CORPUS / name)
        assert len(source.queries) >= 10, name
        ids = [q.id for q in source.queries]
        assert len(ids) == len(set(ids)), f"{name}: duplicate ids"
        for q in source.queries:
            assert "@" in q.cite and ":" in q.cite, f"{q.id}: cite owner/repo@commit:path"
            assert q.expect in ("answer", "error"), q.id


@pytest.mark.slow
@pytest.mark.parametrize("name", SOURCES)
def test_answers_at_least_90_percent_of_expected_successes(name: str) -> None:
    source = sql_corpus.load_source(sql_corpus.CORPUS / name)
    outcomes = [sql_corpus.run_query(source, q) for q in source.queries]
    summary = sql_corpus.summarise(outcomes)
    refused = [f"{o.query.id}: {o.error}" for o in outcomes
               if o.status != "answered" and o.query.expect == "answer"
               and not o.query.test_only]
    crashed = [f"{o.query.id}: {o.error}" for o in outcomes if o.status == "crashed"]
    assert not crashed, crashed
    assert summary["answered_share"] >= 0.9, refused
    if summary["cells_checked"] >= 20:
        # 95% intervals: coverage well below that over many cells means they are too narrow
        assert summary["cells_in_interval"] / summary["cells_checked"] >= 0.9, summary
