"""The order in which a unit's rows are chosen when they are bounded (per-unit ``k`` rows, rows
per group, groups per unit): one ORDER BY list that every engine computes identically.

Privacy: the chosen rows are a fixed function of each unit's own rows (what the accountant
models), and the key's arithmetic cannot fail on any stored value (it is read after the charge).

Why it looks like this (issue 38):

* **Same rows on every engine.** The three engines share no hash of typed values (DuckDB's
  ``hash``, PostgreSQL's ``hashtext``, Spark's ``hash`` all differ), and the digests they do
  share (md5, sha256) need the row as text first — about half a second per million rows for
  the text and the digest, 1.8x the old non-portable ``hash()`` order. So the key is a
  polynomial hash modulo the prime ``P = 2^31 - 1`` computed by exact integer arithmetic,
  which every engine evaluates to the same BIGINT: every intermediate is below 2^63
  (``h < P``, ``A < P``, a value ``<= 2P``), every operation has a BIGINT operand
  (PostgreSQL and Spark type ``2147483647`` as a 32-bit integer, whose products would
  overflow), and ``%`` truncates toward zero in all three, so a value's remainder is the same
  signed number everywhere.
* **Nothing can fail on any row** (the rows are read after the charge; a failure would
  reveal, un-noised, that some row holds such a value): a wide integer (HUGEINT, a Spark
  DECIMAL(38,0)) is reduced ``% P`` in its own type *before* it is cast to BIGINT; a date
  is its days since 1970-01-01, NULL for PostgreSQL's and DuckDB's infinite dates (the
  renderer writes each engine's form: :mod:`privplan.engines.render`); a string enters by
  its length in code points (the same in all three; its text and bytes need no encoding);
  NULL is 0, every value else ``>= 1``.
* **Exact ties.** The key is a function of int, bool, date values and string lengths only
  (floats, timestamps and decimals have no engine-identical integer form here), and it can
  collide, so the list goes on with every column itself, ``NULLS FIRST`` (stated: the
  engines' defaults differ). The order is then total up to rows equal in every column, which
  are interchangeable — without this tie-break, rows that differ only in a string or a float
  would be chosen by storage or thread order, differently on each engine and run.
* **Privacy.** The order depends only on the rows themselves — never on their order in
  storage or a random draw — so a unit's chosen rows are a fixed function of that unit's rows
  (the accountant's model of the per-unit bounds). The hash is linear, not cryptographic:
  its quality only affects how evenly the choice spreads (utility), never what is charged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

P = 2 ** 31 - 1
"""The Mersenne prime the key is taken modulo: values, key and multiplier stay below 2^31."""
A = 1103515245
"""The multiplier (the C library's LCG constant; any unit modulo P would do)."""

EPOCH = "DATE '1970-01-01'"
"""Dates enter the key as ``date_diff('day', DATE '1970-01-01', d)``: DuckDB's days since
1970, NULL for ±infinity. The renderer turns exactly this form into PostgreSQL's guarded
subtraction and Spark's ``unix_date`` (:mod:`privplan.engines.render`)."""


def _reduced(value: str) -> str:
    """``value`` (an integer of any width, or NULL) as an integer in [2, 2P]: the remainder
    ``r = value % P`` (truncated toward zero in all three engines, so in (-P, P)) plus
    ``P + 1``; NULL is 0. The ``% P`` is taken in the value's own type first (a HUGEINT or
    DECIMAL(38,0) above 2^63 would make a cast to BIGINT fail), so the cast cannot fail.
    (``P + 1`` is 2^31, a BIGINT literal in every engine.)"""
    return f"COALESCE(CAST(({value}) % {P} AS BIGINT) + {P + 1}, 0)"


def key_value(column: str, kind: str | None) -> str | None:
    """The integer in [0, 2P] a column contributes to the key, or None if it is left to the
    tie-break (float, timestamp, decimal, unknown). ``kind``: the column's family as the
    engine holds it (int, bool, date, str, ...)."""
    if kind == "int":
        return _reduced(column)
    if kind == "bool":
        return f"CASE WHEN {column} THEN 2 WHEN NOT {column} THEN 1 ELSE 0 END"
    if kind == "date":
        return _reduced(f"date_diff('day', {EPOCH}, {column})")
    if kind == "str":
        return _reduced(f"length({column})")
    return None


def seed(salt: str) -> int:
    """The hash's starting value for ``salt``, in [0, P)."""
    return int.from_bytes(hashlib.sha256(salt.encode()).digest()[:8], "big") % P


def row_key(columns: Sequence[str], kinds: Sequence[str | None], salt: str) -> str | None:
    """``h_0 = seed(salt)``, ``h_i = (h_{i-1} * A + v_i) % P`` over the columns that have a
    value (:func:`key_value`); None when none has.

    Only the first term is written as a BIGINT (``CAST(seed * A % P AS BIGINT)``): every
    later operation has a BIGINT operand (``h``, or the value's own cast), which all three
    engines widen the other operand to, so no 32-bit product can overflow; each literal
    left bare saves DuckDB a constant-folding step when it binds the statement (a CAST per
    literal cost ~14 ms a copy statement). ``h * A + v < P * A + 2P < 2^63``."""
    values = [v for c, k in zip(columns, kinds) if (v := key_value(c, k)) is not None]
    if not values:
        return None
    h = f"((CAST({seed(salt) * A % P} AS BIGINT) + {values[0]}) % {P})"
    for v in values[1:]:
        h = f"(({h} * {A} + {v}) % {P})"
    return h


def tie_break(columns: Sequence[str]) -> list[str]:
    """Every column itself, NULLS FIRST (the engines' defaults differ): what makes the order
    total up to rows equal in every column."""
    return [f"{c} NULLS FIRST" for c in columns]


def row_order(columns: Sequence[str], kinds: Sequence[str | None], salt: str) -> str:
    """An ORDER BY list that ranks rows the same way on every engine (see the module doc):
    the integer key of :func:`row_key`, then every column NULLS FIRST."""
    key = row_key(columns, kinds, salt)
    return ", ".join(([key] if key is not None else []) + tie_break(columns))
