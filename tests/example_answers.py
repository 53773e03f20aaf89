"""Answer every supported query of one ``sql_examples/`` file with seeded noise (shared by the
tests that compare two ways of computing the same answers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_sql_examples import fmt  # the example-file format shared with the runner

from privplan.testing import seeded_noise


def answer_examples(example: Any, demo_db: Path, *, prepare: bool = False
                    ) -> tuple[list[Any], list[str]]:
    """The results of the file's non-error queries in one fresh session (query i drawn with
    seed 1000 + i), and every statement the engine ran."""
    sess = fmt.open_session(example, demo_db)
    sess.prepare = prepare  # before any query: what connect(prepare=...) sets
    ran: list[str] = []
    real = sess.engine.run
    sess.engine.run = lambda st: ran.append(st) or real(st)  # type: ignore[method-assign]
    out = []
    try:
        for q in example.queries:
            if not q.expects_error:
                with seeded_noise(1000 + q.index):
                    out.append(sess.sql(q.sql, **q.budget_kwargs()))
    finally:
        sess.close()
    return out, ran
