"""DuckDB results as pandas frames whose dtypes depend on the column types alone.

Every engine's answer reaches privplan through DuckDB's pandas conversion (DuckDB's own
statements, the post-processing connection, and PostgreSQL's and Spark's Arrow batches read by
DuckDB). That conversion gives a VARCHAR column pandas' ``str`` dtype when it holds a string,
and ``object`` when it is empty or every value is NULL.

Why (privacy): an engine statement's frame holds every exact group, the ones partition
selection or a threshold then drops included. A released column that kept the engine frame's
dtype would tell, with no noise, whether *any* group existed before selection (the gate fuzz
found it: ``WHERE qty = 37 GROUP BY item`` released 0 rows on two neighbouring tables, as
``object`` without the row holding 37 and ``str`` with it). So a VARCHAR column is always
``str``; the nullable integer and boolean keys are settled by
:func:`privplan.rewrite.postprocess.released`.
"""

from __future__ import annotations

import warnings
from typing import Any

import duckdb
import pandas as pd

__all__ = ["duckdb_frame"]


def duckdb_frame(result: Any) -> pd.DataFrame:
    """``result.df()`` (a connection after ``execute``, or a relation), each VARCHAR column as
    ``str`` whatever its rows. DuckDB's conversion of some types calls pandas APIs that pandas
    deprecates; that warning is about DuckDB's code, not the query, so it is not passed on
    (under warnings-as-errors it would fail a charged answer)."""
    if isinstance(result, duckdb.DuckDBPyRelation):
        types = [str(t) for t in result.types]
    else:
        types = [str(d[1]) for d in (result.description or [])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        frame = result.df()
    for i, kind in enumerate(types):
        if kind == "VARCHAR" and frame.dtypes.iloc[i] == object:
            frame.isetitem(i, frame.iloc[:, i].astype("str"))
    return frame
