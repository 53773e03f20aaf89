"""Expected errors of a report query, read from its plan before any data is touched.

:func:`column_errors` gives each output column's noise std and 95% half-width (as
``Result.accuracy`` will report them), and ``_targets`` matches them against a query's
``target_error``: the planner of :mod:`privplan.report.planning` uses both to find the budget
share each query needs, and the printed plan shows them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from privplan.errors import PolicyError
from privplan.mechanisms.accuracy import interval_halfwidth
from privplan.planning.costs import PlannedQuery, count_or_sum_noise
from privplan.report.spec import ReportQuery
from privplan.sql.aggregates import AGGREGATES


@dataclass(frozen=True)
class ColumnError:
    """Expected noise of one output column (from the plan, data-independent)."""

    column: str
    std: float | None
    halfwidth_95: float | None
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "std": self.std, "halfwidth_95": self.halfwidth_95,
                "method": self.method}


def column_errors(planned: PlannedQuery) -> list[ColumnError]:
    """Noise std and 95% half-width per output column, as ``Result.accuracy`` will report them
    (COUNT/SUM columns; AVG/VAR/STDDEV get per-row intervals from their noisy parts)."""
    from privplan.rewrite.postprocess import output_items

    by_id = {p.measure.id: p for p in planned.measures}
    out = []
    for _, name, use in output_items(planned.plan.cores[0]):
        if use is None:
            continue
        row = AGGREGATES[use.func]
        if row.needs("quantile"):
            p = by_id[use.quantile]  # type: ignore[index]
            m = p.measure
            rank = p.noise.rank_error(m.hi - m.lo + 1, m.sensitivity, m.quantile)
            out.append(ColumnError(name, None, None, f"{p.noise.describe()}; with 95% "
                                   f"probability within {rank:.3g} rows of rank"))
            continue
        if not row.derived:
            p, scale = count_or_sum_noise(use, by_id)
            out.append(ColumnError(name, p.noise.std() * scale,
                                   interval_halfwidth(p.noise) * scale, p.noise.describe()))
        else:
            parts = [by_id[m] for m in (use.count, use.sum, use.sum_sq) if m is not None]
            desc = "; ".join(f"{p.measure.label}: std "
                             f"{p.noise.std() * float(p.measure.scale):.4g}" for p in parts)
            out.append(ColumnError(name, None, None,
                                   f"{row.label} from noisy parts ({desc}); per-row "
                                   "95% interval in the result"))
    return out


def _targets(q: ReportQuery, errors: Sequence[ColumnError]) -> dict[str, tuple[float, float]]:
    """column -> (std at the reference budget, target) for the query's target error."""
    if q.target_error is None:
        return {}
    with_std = {e.column.lower(): e for e in errors if e.std is not None}
    if isinstance(q.target_error, Mapping):
        out = {}
        for col, tgt in q.target_error.items():
            if col not in with_std:
                raise PolicyError(
                    f"report query `{q.name}`: target_error names column '{col}', which is not "
                    f"a COUNT/SUM output column (those are: {', '.join(with_std) or 'none'})")
            out[col] = (with_std[col].std or 0.0, float(tgt))
        return out
    if not with_std:
        raise PolicyError(f"report query `{q.name}`: target_error needs a COUNT or SUM output "
                          "column (AVG/VAR/STDDEV have per-row intervals only)")
    return {c: (e.std or 0.0, float(q.target_error)) for c, e in with_std.items()}
