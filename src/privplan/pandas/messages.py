"""The refusals ``df.dp`` gives for frames it cannot answer: derived from a configured frame,
or never configured.

Kept apart so that the accessor, the configuration checks and the view word a refusal alike:
each message says what happened, why privplan refuses (a derived frame would under-charge or
start a second budget for the same people) and how to get the answer instead.
"""

from __future__ import annotations

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

