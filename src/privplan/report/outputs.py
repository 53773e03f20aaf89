"""A report's result files: Parquet and CSV writers, and the checks made before any charge.

A report that charged its budget and then failed to write its results would have spent it for
nothing, so the output formats' libraries and the directory's writability are checked first
(``_check_writers``, ``_check_writable``); ``_write_result`` then writes one result per format.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privplan.errors import PolicyError
from privplan.report.spec import ReportSpec


def _check_writers(spec: ReportSpec) -> None:
    """Every output format can be written, checked before anything is charged (a report that
    charged and then failed on a missing Parquet library spent its budget for nothing)."""
    if "parquet" in spec.outputs:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise PolicyError(
                "report spec: `outputs` includes parquet, which needs the pyarrow package, not "
                "installed here. Nothing was charged. Fix: `pip install pyarrow` (or "
                "`pip install privplan[parquet]`), or set `outputs: [csv]`.") from None


def _check_writable(directory: Path) -> None:
    """The output directory takes files, checked before anything is charged."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".privplan-check-"):
            pass
    except OSError as err:
        raise PolicyError(f"cannot write report results into '{directory}': {err.strerror}. "
                          "Nothing was charged. Fix: choose a writable --out.") from None


def _write_result(res: Any, directory: Path, name: str, outputs: Sequence[str], *,
                  intervals: bool = True) -> dict[str, Path]:
    """Write one result in each format: the same columns as ``Result.with_intervals()`` (each
    noisy column, then its 95% interval where one is known), or the values alone."""
    out = {}
    df = res.with_intervals() if intervals else res.df
    if "parquet" in outputs:
        path = directory / f"{name}.parquet"
        df.to_parquet(path, index=False)
        out["parquet"] = path
    if "csv" in outputs:
        path = directory / f"{name}.csv"
        df.to_csv(path, index=False)
        out["csv"] = path
    return out
