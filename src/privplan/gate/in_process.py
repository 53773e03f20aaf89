"""privplan's own work after the charge, run before it over the engine's stand-in answers.

After the charge, privplan reads the engine's exact answer in-process: the key check, noise
(and the exponential mechanism's utilities for quantiles), partition selection, the released
key types, the flat output and its ORDER BY / LIMIT, the intervals. A failure there would be as
telling as an engine error. Those steps are written to be total (exact integers, bounds proven
before the charge); the gate adds a second line: it runs the *same code* — the functions the
session calls after the charge, not a model of them — over the answers the engine gave for the
stand-in rows (:class:`~privplan.gate.engine_checks.CoreProbe`), with real noise drawn. Any
failure but a post-processing one is a refusal, free.

A failure of the outer query here (:class:`PostProcessingError`) is not a refusal: it depends on
the noisy values, which are DP outputs, and :mod:`privplan.gate.outer` decides whether the outer
query fails on *every* answer (then it is refused).

Privacy: the session's own post-charge code runs on the stand-in answers; a failure refuses free.
"""

from __future__ import annotations

from typing import Any

from privplan.assemble import assemble, noisy_columns
from privplan.errors import PostProcessingError, UnsupportedQueryError
from privplan.mechanisms.samplers import own_draws
from privplan.planning.costs import PlannedQuery
from privplan.planning.engine_semantics import check_one_row_per_key

__all__ = ["check_in_process"]


def check_in_process(planned: PlannedQuery, answers: list[list[Any]]) -> None:
    """Run the post-charge steps over each list of stand-in answers (one frame per core)."""
    with own_draws():
        for frames in answers:
            _check(planned, frames)


def _check(planned: PlannedQuery, frames: list[Any]) -> None:
    try:
        noisy = []
        for i, (core, frame) in enumerate(zip(planned.plan.cores, frames)):
            columns = dict(frame.items())
            check_one_row_per_key(core, columns)
            noisy.append(noisy_columns(core, planned.for_core(i), frame, columns=columns))
        assemble(planned, noisy)
    except PostProcessingError:
        return  # (about noisy values: see the module doc and privplan.gate.outer)
    except Exception as err:  # noqa: BLE001 - any failure here is a refusal, whatever it is
        raise UnsupportedQueryError(
            "query refused before anything was spent: privplan's own processing of the "
            "engine's answer fails on the answer to stand-in rows (values that columns of "
            f"their stored types can hold) with {type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}. Were it to fail on a real "
            "answer after the charge, the failure would tell something about the rows. "
            "Please report it with the query; meanwhile narrow the query (other bounds, "
            "another quantile, fewer groups).") from None
