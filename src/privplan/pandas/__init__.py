"""The pandas accessor ``df.dp``: DP answers about a DataFrame, charged to the data's own budget.

``import privplan`` registers ``df.dp`` on every DataFrame (as soon as pandas is imported).
The data owner configures a frame once; from then on ``df.dp`` answers SQL and pandas-shaped
questions through the same planner, accountant and DuckDB engine as :func:`privplan.connect`.
The frame is registered with DuckDB zero-copy; only one row per group comes back to Python.

>>> import pandas as pd
>>> import privplan as pp
>>> from privplan.testing import noise_disabled
>>> visits = pd.DataFrame({
...     "age": [4, 17, 25, 31, 47, 62, 70, 88],
...     "hospital": ["A", "B", "A", "B", "A", "B", "A", "B"],
...     "cost": [120.0, 80.5, 300.0, 45.0, 980.0, 1500.0, 60.0, 210.0]})
>>> visits.dp.configure(bounds={"age": (0, 100), "cost": (0, 2000)},
...                     public_values={"hospital": ["A", "B"]}, budget=pp.PureDP(1))
>>> with noise_disabled():  # TESTS ONLY: exact answers, so that this example is reproducible
...     visits.dp.count(by="hospital", epsilon=0.5)
  hospital  count  count_low  count_high
0        A      4       -2.0        10.0
1        B      4       -2.0        10.0

Each answer carries what it added to the data's composed total; a ``where`` view passes its
filter to the accountant, so queries over disjoint filters compose in parallel (max, not sum):

>>> kids, adults = visits.dp.where("age < 18"), visits.dp.where("age >= 18")
>>> kids.sum("cost", epsilon=0.5).attrs["privplan_cost"]    # a child is also in the count
PureDP(epsilon=0.5)
>>> adults.sum("cost", epsilon=0.5).attrs["privplan_cost"]  # disjoint from kids: no extra cost
PureDP(epsilon=0.0)
>>> visits.dp.spent(), visits.dp.remaining()
(PureDP(epsilon=1.0), PureDP(epsilon=0.0))

The budget belongs to the data, not to the Python object: a copy, slice or mask of the frame
shares its budget and can be neither queried nor configured afresh:

>>> visits[visits.age < 30].dp.count(epsilon=0.1)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privplan.errors.PolicyError: this DataFrame was derived with pandas ... from a DataFrame ...
>>> visits.copy().dp.spent()
PureDP(epsilon=1.0)

A frame holding the same rows is recognised by their content, even without the marker:

>>> rebuilt = pd.DataFrame(visits.to_dict())  # no marker, no shared memory: the same rows
>>> rebuilt.dp.configure(budget=pp.PureDP(1))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privplan.errors.PolicyError: df.dp.configure: this DataFrame holds the same rows as a DataFrame ...

Threat model
------------
**Who configures.** The *data owner* calls ``df.dp.configure(...)``. It declares that this frame,
as it is at that moment, is a protected dataset with this policy and this total budget; privplan
builds the policy from the frame's dtypes and column names only (never from its values). It
reads the values once, to fingerprint the rows (below); the fingerprint stays in this process
and is never released. A configuration is final: the same frame cannot be configured again.

**What an analyst holding ``df.dp`` (or a ``where`` view) can do.** Ask ``sql``/``count``/
``sum``/``mean``/``explain``/``spent``/``remaining``. Every answer is planned from the query text
and the policy, charged before release against the frame's one ledger (general composition
theorem), and refused once the composed total would exceed the budget.

**What is enforced.**

* One budget per dataset. A second ``configure`` of the frame is refused (it would start a
  fresh budget for the same people).
* Frames derived from a configured frame share its budget and are refused. pandas propagates
  ``df.attrs`` (key ``"privplan.dp"``, a random marker) through copies, slices, masks,
  ``query``, ``head``/``sample``, column selection, ``dropna``/``assign``/``rename``/``astype``/
  ``sort_values``/``reset_index``, self-``merge``/``concat``, ``groupby`` results, ``melt``,
  ``T`` and more (checked in the tests for pandas 3). Such a frame reports the shared
  ``spent()``/``remaining()`` but cannot be configured or queried: privplan cannot see how it
  was derived, and a derivation that looks at other rows or repeats rows
  (``df[df.age > df.age.mean()]``, ``df.sort_values(...).head(n)``, ``pd.concat([df, df])``, a
  groupby result) lets one person change many of its rows, so answering it as if each row were
  one person would under-charge. Filter the configured frame with ``df.dp.where(...)`` instead:
  the accountant sees the predicate (each row is tested on its own), and disjoint filters
  compose in parallel.
* ``pd.DataFrame(df)`` drops ``attrs`` in pandas 3 but shares the configured frame's memory;
  ``configure`` refuses any frame whose column buffers overlap a configured frame's.
* Frames holding the same rows are refused, however they were made. ``configure`` refuses a
  frame whose content fingerprint equals that of a frame configured earlier in this process,
  alive, closed or garbage-collected (the budget belongs to the data, not to the object): a
  deep copy with ``attrs`` cleared, ``pd.DataFrame(df.to_dict())``, the same CSV or Parquet
  file read again with the same column types, the rows in another order (``sample(frac=1)``,
  ``sort_values``) under any index, the columns in another order or with names in another
  case, lossless casts (``astype`` between integer widths, integers to floats, ``bool`` to 0/1,
  nullable dtypes, any string storage, categoricals, any timestamp unit). The refusal spends
  nothing and changes nothing. One exception keeps one budget: a frame configured with the
  same durable ledger file as the first configuration of its rows (``ledger=`` the same path)
  is allowed, since it charges that ledger's single budget.
* **The fingerprint** is the multiset of the frame's rows. Column names are taken as SQL sees
  them (stripped, lower case) and sorted, which fixes the column order; each row's values are
  hashed canonically in that order by DuckDB (a number equal to an integer alike in every
  integer or float width, ``bool`` as 0/1, NaN missing like ``<NA>``, ``-0.0`` as ``0.0``; a
  string alike in every storage; a timestamp at microsecond precision whatever its unit); each
  row hash is salted twice and mixed again, and summed exactly over the rows in two lanes. So
  row order, the index and the Python object do not matter, and a repeated row counts twice.
  Two different sets of rows collide only by a 64-bit hash coincidence (about 2^-64 per
  differing row; a crafted collision could only refuse a configuration, never allow one). A
  frame with no rows holds no one and is not fingerprinted. Cost: one zero-copy DuckDB scan
  per ``configure``, about 0.1 s per million rows of five columns.
* Answers come from a zero-copy snapshot taken by ``configure`` (pandas copy-on-write): editing
  the frame in place afterwards does not change what is answered.
* ``where`` predicates are parsed and planned like any WHERE clause: one expression, no
  subqueries or aggregates; a predicate the analyzer does not understand gets the conservative
  region (the whole domain), so it is charged as unfiltered.

**What is out of scope.** Python cannot hide an object from code in the same process: whoever
holds ``df`` (or ``df.dp``) can read raw values (``df["age"].mean()``, the accessor's internals)
and so already has the raw data; privplan does not protect against that analyst. Recognition
by content has a precise limit: a frame with the *same rows* (in any order, under any index, in
any copy, with the casts listed above) is recognised; a frame with *different rows* is a
different dataset to privplan, and configuring it is the data owner's act, like opening a
second database that holds the same people. Different rows include a subset (``df.iloc[1:]``,
a filter, a column dropped), edited values, added or repeated rows, a column added or renamed,
a lossy cast (float to int, integers beyond 2^53 to float), values re-typed (dates or numbers
read back as text), and ``pd.concat``/``merge`` with an unconfigured frame. So a subset or an
edited copy stripped of its marker (``df.attrs.pop("privplan.dp")``) is not recognised.
Fingerprints live in this process only. To give a dataset one budget across processes,
configure it with a durable ledger (``ledger="budget.sqlite"``). To keep an untrusted analyst
away from the raw rows, run their code in another process and give them only privplan's
answers.
"""

from __future__ import annotations

from privplan.pandas.accessor import DPAccessor
from privplan.pandas.frame_policy import infer_column_type
from privplan.pandas.state import ATTRS_KEY
from privplan.pandas.view import DPView

__all__ = ["ATTRS_KEY", "DPAccessor", "DPView", "infer_column_type"]
