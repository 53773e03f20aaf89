"""The columns a DP query will release, known before its charge: the answer to a Describe.

Drivers that prepare every query (asyncpg, JDBC) ask for a statement's RowDescription before
they execute it. A DP query's released columns (names and types) are a function of the query,
the policy and the schema only, so they are found the way the pre-charge gate checks a query
(:mod:`privplan.gate`): :meth:`privplan.Session.plan` plans and admits the query (every check
``Session.sql`` runs before its charge, the same refusals), the engine binds each engine
statement (its column types, reading no row), and privplan's own post-charge code —
:func:`~privplan.assemble.noisy_columns` without noise and
:func:`~privplan.assemble.assemble`, the outer query included — runs over one stand-in answer
of those types (:meth:`~privplan.engines.post_processor.PostProcessor.sample`). The frame that
comes out has the released frame's columns and dtypes, which :mod:`privplan.server.formats`
turns into the same OIDs the Execute's rows are written in.

Privacy: nothing is charged and no private row is read (planning and binding read the schema,
the policy and stand-in rows; the stand-in answer is made of constants). A query that would be
refused before its charge is refused here with the same error. An outer query over DP
subqueries (:func:`privplan.planning.shapes.route`) is checked as ``Session.sql`` checks it
before its first charge, and run over its subqueries' stand-in answers.

With ``intervals`` (``SET privplan.intervals = on``) the frame is widened by
:func:`with_intervals` exactly as the Execute's answer is, so the interval columns described are
the ones sent (an outer query over DP subqueries has none, as ``Session.sql`` gives none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from privplan.assemble import assemble, noisy_columns
from privplan.boundary import privplan_errors
from privplan.dbapi.free import _columns
from privplan.engines.post_processor import post_process, post_processor
from privplan.planning.shapes import route
from privplan.server.formats import field
from privplan.server.messages import Field
from privplan.session.session import Session
from privplan.session.subqueries import check_nested, inner_budgets
from privplan.sql.nesting import inner_name

__all__ = ["released_fields", "with_intervals"]


def with_intervals(df: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each column ``c`` that has a 95% interval in ``intervals`` followed by
    ``c_low`` and ``c_high`` (floats; NULL where a row has none), as ``Result.with_intervals()``
    lays them out (a name ``df`` already has is not added again)."""
    out: dict[str, Any] = {}
    names: list[str] = []
    for i, c in enumerate(df.columns):
        key = f"__c{i}"
        out[key] = df.iloc[:, i].to_numpy()
        names.append(str(c))
        for end in ("low", "high"):
            name = f"{c}_{end}"
            if name in intervals.columns and name not in df.columns:
                out[f"__c{i}_{end}"] = intervals[name].to_numpy(dtype=float)
                names.append(name)
    frame = pd.DataFrame(out, index=df.index)
    for i in range(df.shape[1]):  # (each released column keeps its dtype)
        frame[f"__c{i}"] = df.iloc[:, i]
    frame.columns = pd.Index(names)
    return frame


@privplan_errors
def released_fields(session: Session[Any], sql: str, budget: Mapping[str, Any], *,
                    intervals: bool = False) -> list[Field]:
    """The RowDescription fields of the frame ``session.sql(sql, **budget)`` would release
    (with its interval columns if ``intervals``), found without a charge (see the module doc)."""
    nested = route(sql, session.policy)
    if nested is None:
        df = _stand_in_answer(session, sql, budget, intervals)
    else:  # (an outer query over DP subqueries: run over their stand-in answers)
        check_nested(session, nested, budget)  # (the refusals Session.sql gives first)
        df = post_process(nested.outer, {
            inner_name(i): _stand_in_answer(session, inner, part) for i, (inner, part) in
            enumerate(zip(nested.inners, inner_budgets(session, nested, budget)))})
    return [field(name, code) for name, code in _columns(df)]


def _stand_in_answer(session: Session[Any], sql: str, budget: Mapping[str, Any],
                     intervals: bool = False) -> pd.DataFrame:
    """The frame one DP query releases, computed over one stand-in engine answer."""
    planned, statements = session.plan(sql, budget)
    schemas = [session.engine.bind(s) for s in statements]
    stand_in = post_processor()
    frames = [noisy_columns(core, planned.for_core(i), stand_in.sample(schema, 0), draw=False)
              for i, (core, schema) in enumerate(zip(planned.plan.cores, schemas))]
    df, bounds, _ = assemble(planned, frames)
    return with_intervals(df, bounds) if intervals else df
