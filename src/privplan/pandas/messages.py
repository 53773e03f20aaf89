"""The refusals ``df.dp`` gives for frames it cannot answer: derived from a configured frame,
or never configured.

Kept apart so that the accessor, the configuration checks and the view word a refusal alike:
each message says what happened, why privplan refuses (a derived frame would under-charge or
start a second budget for the same people) and how to get the answer instead.
"""

from __future__ import annotations

import difflib

from privplan.pandas.state import ATTRS_KEY, _State

_WHY_DERIVED = (
    "Why: privplan cannot see how it was derived, and a derivation that looks at other rows or "
    "repeats rows (df[df.age > df.age.mean()], df.sort_values(...).head(n), pd.concat([df, df]), "
    "a groupby result) lets one person change many of its rows, so answering it as if each row "
    "were one person would under-charge; configuring it would give the same people a second "
    "budget."
)


def _derived_message(state: _State | None, what: str) -> str:
    if state is None:
        return (
            f"this DataFrame carries the marker of a frame configured for DP (df.attrs"
            f"['{ATTRS_KEY}']), but that frame and its budget no longer exist in this process "
            f"(it was garbage-collected, or this frame was unpickled / read back from a file "
            f"that kept the marker), so it cannot be {what}. {_WHY_DERIVED} Fix: if you are the "
            f"data owner and this frame is the whole protected dataset, remove the marker "
            f"(df.attrs.pop('{ATTRS_KEY}')) and configure it with the durable ledger that holds "
            f"its budget (ledger='budget.sqlite'); a fresh in-memory ledger would start a second "
            f"budget for the same people."
        )
    base = state.table
    spent = state.spent().describe()
    total = state.session.budget.describe()
    return (
        f"this DataFrame was derived with pandas (a copy, slice, mask, merge, ...) from a "
        f"DataFrame configured for DP (table '{base}'); it shares that frame's budget "
        f"(spent {spent} of {total}) and cannot be {what}. {_WHY_DERIVED} Fix: ask the "
        f"configured frame and filter with .dp.where, e.g. df.dp.where(\"age < 30\").count("
        f"epsilon=0.1): the accountant then sees the filter, and disjoint filters compose in "
        f"parallel. To protect prepared (cleaned, filtered) data, prepare it before configuring."
    )


_NOT_CONFIGURED = (
    "this DataFrame is not configured for differential privacy, so df.dp cannot answer about it "
    "yet. Why: privplan needs a policy (column types, bounds, public group keys) and a total "
    "budget before it can release anything. Fix: the data owner calls, once, e.g. "
    "df.dp.configure(bounds={'age': (0, 100)}, public_values={'hospital': ['A', 'B']}, "
    "budget=pp.PureDP(1.0))."
)

# pandas spellings with a df.dp counterpart under another name or shape
_PANDAS_NAMES = {"groupby": "pass by= to a helper, e.g. df.dp.count(by='hospital')",
                 "size": "count", "average": "mean", "avg": "mean", "variance": "var",
                 "stddev": "std", "stdev": "std", "percentile": "quantile",
                 "query": "where", "filter": "where", "loc": "where"}


def _unknown_method(name: str, cls: type, surface: str) -> str:
    """The message of an AttributeError for ``<surface>.<name>``: what exists, the closest
    name. Private and special names get the plain message (Python's protocols probe them)."""
    if name.startswith("_"):
        return f"{cls.__name__!r} object has no attribute {name!r}"
    public = sorted(n for n in dir(cls) if not n.startswith("_"))
    hint = _PANDAS_NAMES.get(name.lower())
    close = difflib.get_close_matches(name.lower(), public, n=1, cutoff=0.6)
    if hint is not None and hint in public:
        fix = f"did you mean {surface}.{hint}(...)?"
    elif hint is not None:
        fix = hint + "."
    elif close:
        fix = f"did you mean {surface}.{close[0]}?"
    else:
        fix = f"use one of them, or {surface}.sql('SELECT ...') for anything else."
    return (f"{surface} has no attribute '{name}'. Why: {surface} offers only the DP answers "
            f"privplan can charge for, and their budget: {', '.join(public)}. Fix: {fix}")
