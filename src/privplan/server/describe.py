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

__all__ = ["released_fields"]


@privplan_errors
def released_fields(session: Session[Any], sql: str, budget: Mapping[str, Any]) -> list[Field]:
    """The RowDescription fields of the frame ``session.sql(sql, **budget)`` would release,
    found without a charge (see the module doc)."""
    nested = route(sql, session.policy)
    if nested is None:
        df = _stand_in_answer(session, sql, budget)
    else:  # (an outer query over DP subqueries: run over their stand-in answers)
        check_nested(session, nested, budget)  # (the refusals Session.sql gives first)
        df = post_process(nested.outer, {
            inner_name(i): _stand_in_answer(session, inner, part) for i, (inner, part) in
            enumerate(zip(nested.inners, inner_budgets(session, nested, budget)))})
    return [field(name, code) for name, code in _columns(df)]


def _stand_in_answer(session: Session[Any], sql: str, budget: Mapping[str, Any]
                     ) -> pd.DataFrame:
    """The frame one DP query releases, computed over one stand-in engine answer."""
    planned, statements = session.plan(sql, budget)
    schemas = [session.engine.bind(s) for s in statements]
    stand_in = post_processor()
    frames = [noisy_columns(core, planned.for_core(i), stand_in.sample(schema, 0), draw=False)
              for i, (core, schema) in enumerate(zip(planned.plan.cores, schemas))]
    return assemble(planned, frames)[0]
