"""Oracle for "one row per released key": the engine, asked through privplan, must agree.

What the oracle checks
----------------------
A GROUP BY over a *public* key domain (CASE results, ``public_values``, a boolean column, the
values of a public table's column) releases one noisy count per key of the domain, charged once
by parallel composition (DESIGN.md §3, "One row per released key"). That is sound only if the
engine's groups are exactly the released keys: two released rows for one engine group would
release one exact count twice (each with fresh noise), and a key that the engine splits or
merges differently from the plain data would count rows in the wrong group. For each generated
query (random, fixed seeds) this test opens a real privplan session (noise disabled, so counts
are exact) on every physical layout of the table and asks::

    SELECT <key> AS k0 [, <key2> AS k1], COUNT(*) AS n FROM t [JOIN pub ...] [WHERE ...]
    GROUP BY 1 [, 2]             -- or GROUP BY the aliases, or the expressions

and then checks, with plain DuckDB on the same connection:

* ``duplicate key``: the engine statement privplan ran (recorded, re-run by plain DuckDB) has
  no two rows whose keys are equal as DuckDB compares them (strings ``COLLATE "binary"``,
  NULLs equal, NaN equal to NaN, -0.0 equal to 0.0);
* ``released != engine``: the released frame has exactly the engine statement's rows (same
  keys and counts; with partition selection, a subset);
* ``release form``: each key is released as DESIGN.md §3 ("One row per released key") says,
  a rule the oracle writes in its own SQL (:func:`as_released`; it does not call privplan's
  ``released_key``): strings in binary collation; a float NaN grouped with NULL; a date or
  timestamp outside years 1..9999 (±infinity, BC, 5877642-06-24, 10000-01-01) grouped with
  NULL; HUGEINT, UHUGEINT and DECIMALs of more than 15 digits as their text; every other type
  as it is. The engine's key type must be the released type of the key's plain type, and the
  released frame must hold it as pandas can exactly (text as ``str``, integers in an integer
  dtype -- nullable ``Int*`` with NULL, never float --, temporal keys as ``datetime64``);
* ``count``: each released group's count equals the plain answer computed independently:
  ``GROUP BY`` of the same key, in its released form, over the table read the way the policy
  and DESIGN.md §3 say (columns in their policy type through ``TRY_CAST``, strings ``COLLATE
  "binary"``, a public join key converted to the private column's type), and -- when the
  domain holds every value the key can take (CASE keys, booleans, public-table keys) -- no
  non-empty plain group is missing from the release;
* ``join stability``: privplan charges a join with a unique public key as stability 1, so no
  private row may match two public rows under the join's comparison;
* ``cost`` (hand-written regressions): ``res.cost`` is the query's budget, once; some also
  name the released keys (NaN with NULL, wide integers and decimals as text, out-of-range
  dates as NaT).

A query privplan refuses before the charge (``UnsupportedQueryError``, ``PolicyError``, with
``sess.spent()`` unchanged) passes and is counted in the summary. Every other exception fails:
``ExecutionError`` (the engine failed after the charge: a data-dependent error is an un-noised
bit about the data, a data-independent one breaks invariant 8), ``InternalError`` (including
privplan's own ``check_one_row_per_key`` firing after the charge), anything else.

A query refused because its keys are not public (partition selection needs an (ε, δ) budget)
is asked again of an ``ApproxDP`` session with a policy without ``public_values``; keys
released through selection must obey the same rules (a subset of the engine's rows). Plain
column keys are also asked of that session, so keys taken from the data are covered too.

Candidate rows and layouts
--------------------------
``data/keys_literals.yaml`` holds the CASE result families ('1', '01', ' 1', 1, 1.0, 1e0;
strings differing by case, trailing space, NFC vs NFD; NaN and -0.0 as strings; dates vs
timestamps, in and out of years 1..9999; booleans), the WHEN conditions, the texts of the
candidate rows (each column cycles through its edge values, shuffled, so every value appears in
many rows and combinations; d and ts include ±infinity, BC dates, 5877642-06-24 and
10000-01-01) and the public domains. ``data/keys_layouts.yaml`` stores the rows in several
physical layouts (int as INTEGER/HUGEINT/UBIGINT/VARCHAR..., float as REAL/DECIMAL/BIGINT, str
NOCASE/NOACCENT, date/timestamp as text or other temporal types, ``default_collation`` and
``TimeZone``). The
public tables (``PUBLIC_TABLES``) have NOCASE labels, keys of another type than the private
column (VARCHAR '5' vs BIGINT, DATE vs TIMESTAMP, TIMESTAMP vs DATE, DOUBLE vs BIGINT) and labels
of every type (DOUBLE with NaN and NULL, HUGEINT beyond 2^53, DECIMAL(38,20), infinite DATEs).

Run ``python tests/adversarial/test_key_uniqueness_oracle.py [slow]`` for the full report.
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import privplan as pp

if not __package__:  # run as a script (see the end of the file): import as part of the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "adversarial"

from ._oracle_support import (
    APPROX_DELTA,
    APPROX_EPSILON,
    BINARY,
    PURE_EPSILON,
    BaseLayoutRun,
    SessionOutcome,
    StorageLayout,
    collated,
    engine_keys,
    engine_message,
    failures_line,
    first_line,
    first_per_signature,
    group_findings,
    layouts_first,
    load_data,
    load_layouts,
    mask,
    rotated,
    shrink_ids,
    text_table,
    timings_line,
)

# -----------------------------------------------------------------------------------------------
# The policy table, the public tables
# -----------------------------------------------------------------------------------------------

TABLE = "t"
COLUMN_TYPES: dict[str, str] = {
    "id": "int", "age": "int", "i": "int", "j": "int", "f": "float", "s": "str", "b": "bool",
    "d": "date", "ts": "timestamp", "k": "int"}
"""Policy types. ``id`` numbers the rows (for witnesses); ``k`` is the join key."""

STORED_COLUMNS = ("i", "j", "f", "s", "b", "d", "ts", "k")
"""Columns whose DuckDB type the layout chooses (id and age are always BIGINT)."""

ACCEPTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "int": ("BIGINT", ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                       "USMALLINT", "UINTEGER")),
    "float": ("DOUBLE", ("FLOAT", "DOUBLE", "REAL")),
    "str": ("VARCHAR", ("VARCHAR",)),
    "bool": ("BOOLEAN", ("BOOLEAN",)),
    "date": ("DATE", ("DATE",)),
    "timestamp": ("TIMESTAMP", ("TIMESTAMP",)),
}
"""How DESIGN.md §3 says a column is read: as stored if the engine type is one of the policy
type's own, else through TRY_CAST to the policy type (unsigned 64/128-bit integers to HUGEINT);
strings COLLATE "binary". This is the oracle's own statement of the contract (it does not call
privplan's typed view)."""

EXACT = "__keys_oracle_exact"
"""A temp table holding the engine statement's rows, re-computed by plain DuckDB."""

PUBLIC_TABLES: dict[str, tuple[str, list[str]]] = {
    # a NOCASE label: 'x' / 'X' / 'x ' and NFC / NFD are distinct keys in binary
    "pub_int": ("pk BIGINT, label VARCHAR COLLATE NOCASE",
                ["1, 'x'", "2, 'X'", "3, 'x '", "4, '\u00e9'", "5, 'e\u0301'", "6, NULL",
                 "7, 'y'", "8, 'Y'", "9, 'z'"]),
    # VARCHAR keys, unique as text, that the private BIGINT comparison reads as one number
    "pub_vc": ("pk VARCHAR, label VARCHAR",
               ["'1', 'one'", "'01', 'one-zero'", "' 1', 'one-space'", "'2', 'two'",
                "'abc', 'junk'", "'3', 'three'", "'+3', 'three-plus'"]),
    # DATE keys joined to a private TIMESTAMP (midnight)
    "pub_date": ("pk DATE, label VARCHAR",
                 ["'2020-01-01', 'new-year'", "'2019-12-31', 'eve'", "'1970-01-01', 'epoch'",
                  "'infinity', 'inf'"]),
    # TIMESTAMP keys joined to a private DATE: two times of one day are one date
    "pub_ts": ("pk TIMESTAMP, label VARCHAR",
               ["'2020-01-01 00:00:00', 'midnight'", "'2020-01-01 12:00:00', 'noon'",
                "'2019-12-31 00:00:00', 'eve'", "'1970-01-01 00:00:00', 'epoch'"]),
    # DOUBLE keys joined to a private BIGINT: 1.5 and 2.4 round to 2
    "pub_dbl": ("pk DOUBLE, label VARCHAR",
                ["1.0, 'one'", "1.5, 'one-half'", "2.0, 'two'", "2.4, 'two-ish'",
                 "'nan', 'nan'", "3.0, 'three'"]),
    # labels of every type, for the public key domain and its conversion to the answer
    "pub_lab": (("pk BIGINT, lab_d DOUBLE, lab_h HUGEINT, lab_dec DECIMAL(38,20), lab_dt DATE, "
                 "lab_ts TIMESTAMP, lab_b BOOLEAN, lab_nc VARCHAR COLLATE NOCASE, lab_u UHUGEINT"),
                [("1, 'nan', 9007199254740992, 0.1, 'infinity', 'infinity', TRUE, 'a', "
                  "340282366920938463463374607431768211455"),
                 ("2, NULL, 9007199254740993, 0.10000000000000000001, '5877642-06-24', "
                  "'2020-01-01 00:00:00', FALSE, 'A', 0"),
                 ("3, -0.0, 170141183460469231731687303715884105727, 0.3, '2020-01-01', "
                  "'2020-01-01 00:00:00.000001', NULL, 'a ', 1"),
                 ("4, 0.0, 170141183460469231731687303715884105726, NULL, NULL, NULL, TRUE, "
                  "'\u00e9', NULL"),
                 "5, 1.0, 0, 1, '-infinity', '-infinity', FALSE, 'e\u0301', 2",
                 "6, 'inf', NULL, 2, '2019-12-31', '1970-01-01', NULL, NULL, 3",
                 "7, '-inf', -9223372036854775809, 3, '0001-01-01', '2262-04-12', TRUE, 'b', 4",
                 "8, 2.5, 1, 4, '9999-12-31', '1677-09-21', FALSE, 'B', 5"]),
    # a NOCASE join key joined to a private string (compared in binary)
    "pub_s": ("pk VARCHAR COLLATE NOCASE, label VARCHAR",
              ["'a', 'lower-a'", "'B', 'upper-b'", "'\u00e9', 'e-acute'", "'1', 'one'",
               "'ss', 'double-s'"]),
}


@dataclass(frozen=True)
class Join:
    """``JOIN <table> ON t.<column> = <table>.pk`` and the label columns one may group by."""

    table: str
    column: str
    labels: tuple[str, ...]

    def sql(self) -> str:
        return f"JOIN {self.table} ON {TABLE}.{self.column} = {self.table}.pk"


JOINS: tuple[Join, ...] = (
    Join("pub_int", "k", ("label",)),
    Join("pub_vc", "k", ("label",)),
    Join("pub_date", "ts", ("label",)),
    Join("pub_ts", "d", ("label",)),
    Join("pub_dbl", "k", ("label",)),
    Join("pub_lab", "k", ("lab_d", "lab_h", "lab_dec", "lab_dt", "lab_ts", "lab_b", "lab_nc",
                          "lab_u")),
    Join("pub_s", "s", ("label",)),
)

NEEDS_DELTA = "needs an (ε, δ) budget"
"""The refusal of a non-public key under a PureDP budget (retried with ApproxDP)."""

SESSION_QUERIES = 8
"""Queries per session before a fresh one: the accountant's work grows with its history."""

# -----------------------------------------------------------------------------------------------
# Data files
# -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pools:
    families: Mapping[str, tuple[str, ...]]
    conditions: tuple[str, ...]
    rows: Mapping[str, tuple[str | None, ...]]
    public_values: Mapping[str, list[Any]]


Layout = StorageLayout
"""A storage of the policy table (which layouts answer a query alike: :func:`signature`)."""


def load_pools() -> Pools:
    raw = load_data("keys_literals.yaml")
    return Pools(
        families={k: tuple(v) for k, v in raw["case_results"].items()},
        conditions=tuple(raw["conditions"]),
        rows={k: tuple(v) for k, v in raw["rows"].items()},
        public_values={k: list(v) for k, v in raw["public_values"].items()},
    )


def make_policy(pools: Pools, public: bool) -> dict[str, Any]:
    """The policy: ``public`` declares ``public_values`` on i, j, f, s, d, ts."""
    columns: dict[str, Any] = {}
    for name, kind in COLUMN_TYPES.items():
        spec: dict[str, Any] = {"type": kind}
        if name == "age":
            spec.update(lower=0, upper=100)
        if public and name in pools.public_values:
            spec["public_values"] = list(pools.public_values[name])
        columns[name] = spec
    tables: dict[str, Any] = {TABLE: {"privacy_unit": "row", "columns": columns}}
    tables.update({name: {"public": True} for name in PUBLIC_TABLES})
    return {"tables": tables}


# -----------------------------------------------------------------------------------------------
# Queries
# -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """One GROUP BY key as the analyst writes it. ``complete``: every value the key takes on a
    row is in its released domain (so every non-empty plain group must be released)."""

    sql: str
    kind: str  # "case", "column", "join"
    complete: bool
    join: Join | None = None


@dataclass(frozen=True)
class Query:
    keys: tuple[Key, ...]
    where: str | None = None
    style: str = "position"  # GROUP BY 1, 2 | GROUP BY k0, k1 | GROUP BY <expressions>
    text: str | None = None  # hand-written SQL (regressions): used as it is

    @property
    def join(self) -> Join | None:
        return next((k.join for k in self.keys if k.join is not None), None)

    @property
    def complete(self) -> bool:
        return all(k.complete for k in self.keys)

    def sql(self, extra_where: str | None = None) -> str:
        if self.text is not None:
            if not extra_where:
                return self.text
            head, _, tail = self.text.partition(" GROUP BY ")
            return f"{head} WHERE {extra_where} GROUP BY {tail}"
        items = ", ".join(f"{k.sql} AS k{n}" for n, k in enumerate(self.keys))
        join = f" {self.join.sql()}" if self.join else ""
        conds = [c for c in (self.where, extra_where) if c]
        where = " WHERE " + " AND ".join(f"({c})" for c in conds) if conds else ""
        if self.style == "alias":
            group = ", ".join(f"k{n}" for n in range(len(self.keys)))
        elif self.style == "expr":
            group = ", ".join(k.sql for k in self.keys)
        else:
            group = ", ".join(str(n + 1) for n in range(len(self.keys)))
        return f"SELECT {items}, COUNT(*) AS n FROM {TABLE}{join}{where} GROUP BY {group}"


class Generator:
    """Random keys: CASE over literal families, plain columns, public-table labels, pairs."""

    def __init__(self, rng: random.Random, pools: Pools) -> None:
        self.rng = rng
        self.pools = pools

    def case_key(self) -> Key:
        rng = self.rng
        family = rng.choice(list(self.pools.families))

        def result() -> str:
            if rng.random() < 0.08:
                return "NULL"
            fam = family if rng.random() < 0.85 else rng.choice(list(self.pools.families))
            return rng.choice(self.pools.families[fam])

        whens = [f"WHEN {rng.choice(self.pools.conditions)} THEN {result()}"
                 for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))]
        default = f" ELSE {result()}" if rng.random() < 0.7 else ""
        return Key(f"CASE {' '.join(whens)}{default} END", "case", True)

    def column_key(self) -> Key:
        column = self.rng.choice(("i", "j", "f", "s", "s", "b", "d", "ts"))
        return Key(column, "column", column == "b")

    def join_keys(self) -> list[Key]:
        join = self.rng.choice(JOINS)
        labels = list(join.labels)
        self.rng.shuffle(labels)
        count = 2 if len(labels) > 1 and self.rng.random() < 0.25 else 1
        return [Key(f"{join.table}.{label}", "join", True, join) for label in labels[:count]]

    def query(self) -> Query:
        rng = self.rng
        r = rng.random()
        keys: list[Key]
        if r < 0.5:
            keys = [self.case_key()]
        elif r < 0.65:
            keys = [self.column_key()]
        elif r < 0.8:
            keys = self.join_keys()
        else:  # two keys: CASE/column/join in any combination (one join at most)
            first = rng.choice((self.case_key, self.column_key, self.join_keys))()
            first = first if isinstance(first, list) else [first]
            second = rng.choice((self.case_key, self.column_key))()
            keys = [*first[:1], second]
            rng.shuffle(keys)
        where = rng.choice(self.pools.conditions) if rng.random() < 0.2 else None
        style = rng.choice(("position", "position", "alias", "expr"))
        return Query(tuple(keys), where, style)


def generate(seed: int, count: int, pools: Pools) -> list[Query]:
    gen = Generator(random.Random(seed), pools)
    seen: set[str] = set()
    out: list[Query] = []
    for _ in range(count * 20):
        if len(out) >= count:
            break
        q = gen.query()
        if q.sql() not in seen:
            seen.add(q.sql())
            out.append(q)
    return out


# -----------------------------------------------------------------------------------------------
# One layout: its database, the oracle's own typed view, sessions
# -----------------------------------------------------------------------------------------------


def candidate_rows(pools: Pools, seed: int = 7, count: int = 720) -> pa.Table:
    """Every column cycles through its texts in its own shuffled order, so each value appears
    in many rows and meets many values of the other columns."""
    rng = random.Random(seed)
    data: dict[str, list[str | None]] = {}
    for column, texts in pools.rows.items():
        order = list(texts)
        values: list[str | None] = []
        while len(values) < count:
            rng.shuffle(order)
            values.extend(order)
        data[column] = values[:count]
    return text_table(data)


@dataclass
class Outcome(SessionOutcome):
    """What a session answered."""

    kind: str = field(kw_only=True)  # "pure" or "approx"
    df: Any = None
    cost: Any = None
    query_cost: Any = None
    query: Query | None = None


class LayoutRun(BaseLayoutRun[Layout]):
    """The candidate rows stored in one layout, with privplan sessions to ask."""

    def __init__(self, layout: Layout, rows: pa.Table, pools: Pools) -> None:
        types = {"id": "BIGINT", "age": "BIGINT", **layout.columns}
        super().__init__(layout, TABLE, {c: types[c] for c in COLUMN_TYPES}, rows,
                         {"pure": make_policy(pools, True), "approx": make_policy(pools, False)},
                         SESSION_QUERIES)
        for name, (ddl, values) in PUBLIC_TABLES.items():
            self.con.execute(f"CREATE TABLE {name} ({ddl})")
            self.con.execute(f"INSERT INTO {name} VALUES {', '.join(f'({v})' for v in values)}")
        described = {r[0].lower(): r[1] for r in
                     self.con.execute(f'DESCRIBE SELECT * FROM "{TABLE}"').fetchall()}
        self.view_types: dict[str, str] = {}
        items = []
        for col, kind in COLUMN_TYPES.items():
            target, accepted = ACCEPTED[kind]
            stored = described[col].upper()
            if stored in ("UBIGINT", "UHUGEINT"):
                target = "HUGEINT"
            value = f'"{col}"' if stored in accepted else f'TRY_CAST("{col}" AS {target})'
            self.view_types[col] = stored if stored in accepted else target
            if kind == "str":
                value += f" {BINARY}"
            items.append(f'{value} AS "{col}"')
        self.view = f'(SELECT {", ".join(items)} FROM "{TABLE}")'
        self._multiplicity: dict[Join, int] = {}

    def ask(self, sql: str, kind: str, sess: Any = None) -> Outcome:
        sess = sess if sess is not None else self.session(kind)
        out = Outcome(sql, kind=kind)
        res = self.ask_session(sess, out, kind)
        if res is not None:
            out.df, out.cost, out.query_cost = res.df, res.cost, res.query_cost
        return out

    # -- the plain side --------------------------------------------------------------------------
    def pk_type(self, join: Join) -> str:
        row = self.con.execute(f"SELECT typeof(pk) FROM {join.table} LIMIT 1").fetchone()
        return str(row[0]) if row else "?"

    def public_key(self, join: Join) -> str:
        """The public join key as DESIGN.md §3 says the join compares it: in the private
        column's type (TRY_CAST) and binary collation."""
        target = self.view_types[join.column]
        value = f"{join.table}.pk"
        if self.pk_type(join).upper() != target.upper():
            value = f"TRY_CAST({value} AS {target})"
        if COLUMN_TYPES[join.column] == "str":
            value = f"{value} {BINARY}"
        return value

    def plain_source(self, query: Query) -> str:
        source = f"{self.view} AS {TABLE}"
        if query.join is not None:
            j = query.join
            source += f" JOIN {j.table} ON {TABLE}.{j.column} = {self.public_key(j)}"
        return source

    def plain_groups(self, query: Query) -> tuple[str, list[str], list[str]]:
        """The independent answer's SQL (k0.., n), the keys' types as plain DuckDB types them,
        and their types as released (:func:`released_type`): each key is grouped by its
        released form (:func:`as_released`), as the documented semantics say."""
        items = ", ".join(f"{k.sql} AS k{n}" for n, k in enumerate(query.keys))
        where = f" WHERE {query.where}" if query.where else ""
        base = f"SELECT {items} FROM {self.plain_source(query)}{where}"
        types = [str(r[1]) for r in self.con.execute(f"DESCRIBE {base}").fetchall()]
        keys = ", ".join(as_released(f"k{n}", t) + f" AS k{n}" for n, t in enumerate(types))
        return (f"SELECT {keys}, count(*) AS n FROM ({base}) AS __plain GROUP BY ALL", types,
                [released_type(t) for t in types])

    def join_multiplicity(self, join: Join) -> int:
        """How many public rows one private row matches at most (computed once per join)."""
        if join in self._multiplicity:
            return self._multiplicity[join]
        row = self.con.execute(
            f"SELECT coalesce(max(c), 0) FROM (SELECT {TABLE}.id, count(*) AS c FROM "
            f"{self.view} AS {TABLE} JOIN {join.table} ON {TABLE}.{join.column} = "
            f"{self.public_key(join)} GROUP BY {TABLE}.id)").fetchone()
        self._multiplicity[join] = int(row[0]) if row else 0
        return self._multiplicity[join]


def signature(layout: Layout, query: Query) -> tuple[tuple[str, str], ...]:
    """What can change the answer to ``query`` between layouts: the storage of the private
    columns it names, ``default_collation`` when strings are involved (a string literal, a str
    column, a public table's labels) and ``TimeZone`` when a temporal column is."""
    text = re.sub(r"'[^']*'", "''", query.sql())
    used = sorted(c for c in STORED_COLUMNS if re.search(rf"\b{c}\b", text))
    sig = tuple((c, layout.columns[c]) for c in used)
    if "'" in text or "s" in used or query.join is not None:
        sig += (("default_collation", layout.settings.get("default_collation", "")),)
    if {"d", "ts"} & set(used):
        sig += (("TimeZone", layout.settings.get("TimeZone", "")),)
    return sig


def _families(types: Sequence[str], query: Query | None) -> str:
    """A failure class's key types, coarsely: the set of type families (so one root cause is
    not split by the other keys' exact types), and whether two keys are the same expression."""
    def fam(t: str) -> str:
        u = t.upper()
        if u in ("DOUBLE", "FLOAT", "REAL"):
            return "float"
        if u.startswith("DECIMAL"):
            return "decimal"
        if u in ("HUGEINT", "UHUGEINT"):
            return "int128"
        if u.endswith("INT") or u == "INTEGER":
            return "int<=64"
        return u.split("(")[0].lower()

    text = f"key families {sorted({fam(t) for t in types})}"
    if query is not None and len({k.sql for k in query.keys}) < len(query.keys):
        text += ", two keys with the same expression"
    return text


def _pandas_merges(con: duckdb.DuckDBPyConnection, statement: str, column: str,
                   engine_type: str, values: Any) -> bool:
    """Whether the engine's distinct values of ``column`` are fewer once read into pandas."""
    row = con.execute(f'SELECT count(*) FROM (SELECT 1 FROM ({statement}) AS e GROUP BY '
                      f'{collated(f"e.{chr(34)}{column}{chr(34)}", engine_type)})').fetchone()
    return row is not None and len({_norm(v) for v in values}) < row[0]


def out_query(out: Outcome) -> Query | None:
    """The generated query an outcome answers (kept by the oracle for causes)."""
    return getattr(out, "query", None)


# -- the release rule, as the oracle states it (it does not call privplan's released_key) --------
EXACT_DECIMAL_DIGITS = 15
"""A DECIMAL of at most this many digits is released as it is (one distinct double each)."""
TEXT_RELEASED = ("HUGEINT", "UHUGEINT")
"""Integer types released as their text (pandas cannot hold them exactly)."""


def released_type(plain_type: str) -> str:
    """The DuckDB type of a key of type ``plain_type`` as it is released (DESIGN.md §3, "One
    row per released key"): HUGEINT, UHUGEINT and DECIMALs of more than 15 digits as text
    (VARCHAR); FLOAT (REAL) as DOUBLE; every other type as it is."""
    t = plain_type.upper().strip()
    if t in TEXT_RELEASED:
        return "VARCHAR"
    if t in ("FLOAT", "REAL", "FLOAT4"):
        return "DOUBLE"
    m = re.fullmatch(r"(?:DECIMAL|NUMERIC)\((\d+)\s*,\s*\d+\)", t)
    if m is not None and int(m.group(1)) > EXACT_DECIMAL_DIGITS:
        return "VARCHAR"
    return plain_type


def as_released(expr: str, plain_type: str) -> str:
    """``expr`` (of DuckDB type ``plain_type``) as the documented semantics group and release
    it, written in the oracle's own SQL:

    * a string in binary collation;
    * a float NaN is NULL (``isnan``);
    * a date or timestamp whose year is not in 1..9999 (±infinity, 5877642-06-24, any BC date)
      is NULL (``isfinite``, ``year``);
    * HUGEINT, UHUGEINT and DECIMALs of more than 15 digits are their text;
    * everything else (other integers, BOOLEAN, DECIMAL(p <= 15)) is itself."""
    t = plain_type.upper().strip()
    if t.startswith("VARCHAR"):
        return f"({expr}) {BINARY}"
    if t in ("DOUBLE", "FLOAT", "REAL"):
        return f"(CASE WHEN isnan({expr}) THEN NULL ELSE {expr} END)"
    if t in ("DATE", "TIMESTAMP"):
        return (f"(CASE WHEN isfinite({expr}) AND year({expr}) >= 1 AND year({expr}) <= 9999 "
                f"THEN {expr} END)")
    if released_type(t) == "VARCHAR":
        return f"(CAST({expr} AS VARCHAR) {BINARY})"
    return expr


def released_form_problem(column: Any, engine_type: str) -> str | None:
    """Why a released key column (pandas) is not in the form the documented semantics give a
    key of released DuckDB type ``engine_type``, or None: text as Python strings, integers in
    an integer dtype (nullable ``Int*`` when NULL is among them, never float: 2^53 + 1 must
    not become 2^53), floats as floats, dates and timestamps as datetime64 (NULL as NaT),
    booleans as booleans."""
    t = engine_type.upper().strip()
    dtype = column.dtype
    values = [v for v in column.tolist() if not _is_null(v)]
    if t.startswith("VARCHAR"):
        bad = [v for v in values if not isinstance(v, str)]
        return f"text key holds non-strings {bad[:3]!r} (dtype {dtype})" if bad else None
    if t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
             "UBIGINT"):
        if not pd.api.types.is_integer_dtype(dtype):
            return f"integer key released with dtype {dtype}"
        return None
    if t in ("DOUBLE", "FLOAT", "REAL") or t.startswith(("DECIMAL", "NUMERIC")):
        return None if pd.api.types.is_float_dtype(dtype) else f"dtype {dtype}"
    if t in ("DATE", "TIMESTAMP"):
        return None if pd.api.types.is_datetime64_dtype(dtype) else f"dtype {dtype}"
    if t == "BOOLEAN":
        bad = [v for v in values if not isinstance(v, (bool, np.bool_))]
        return f"boolean key holds {bad[:3]!r} (dtype {dtype})" if bad else None
    return None


def _is_null(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _mask(message: str) -> str:
    """:func:`mask` for this oracle's failure classes (refusal reasons are cut to 160)."""
    return mask(message, 200)


def _norm(value: Any) -> str:
    """A value of a DuckDB-produced pandas frame as text: NULL-like values (None, NaN, NaT, NA)
    as NULL, numbers by value whatever their dtype (an integer column with a NULL comes back
    as float64 in one frame and as a nullable integer in another)."""
    try:
        if pd.isna(value):
            return "NULL"
    except (TypeError, ValueError):
        pass
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        x = float(value)
        return str(int(x)) if x.is_integer() and abs(x) < 2**63 else repr(x)
    return repr(value)


# -----------------------------------------------------------------------------------------------
# The oracle
# -----------------------------------------------------------------------------------------------


@dataclass
class Finding:
    kind: str
    cause: str
    layout: str
    sql: str
    session: str  # "pure" / "approx"
    detail: str
    query: Query | None = None

    def describe(self) -> str:
        return f"[{self.layout}, {self.session}] {self.sql}\n        {self.detail}"


@dataclass
class Report:
    queries: int = 0
    layout_checks: int = 0
    asked: Counter[str] = field(default_factory=Counter)
    answered: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    refusal_reasons: Counter[str] = field(default_factory=Counter)
    released_rows: int = 0
    findings: list[Finding] = field(default_factory=list)
    reproducers: dict[tuple[str, str], str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def groups(self) -> dict[tuple[str, str], list[Finding]]:
        return group_findings(self.findings, lambda f: len(f.sql))

    def summary(self) -> str:
        lines = [
            (f"key-uniqueness oracle: {self.queries} generated queries on {self.layout_checks} "
            f"(query, layout) pairs; session asks "
            f"{dict(self.asked)}; answered {dict(self.answered)}; {self.released_rows} released "
            "rows checked"),
            f"refusals: {dict(self.refusals)}",
        ]
        for reason, n in self.refusal_reasons.most_common(12):
            lines.append(f"   {n:5d} x {reason}")
        lines.append(timings_line(self.timings))
        if self.findings:
            lines.append(failures_line(self.findings, len(self.groups())))
        return "\n".join(lines)

    def render(self) -> str:
        out = [self.summary()]
        for (kind, cause), members in self.groups().items():
            layouts = Counter(f.layout for f in members)
            out += ["", f"== {kind.upper()} | {cause}",
                    f"   {len(members)} case(s) on layouts {dict(layouts)}"]
            if (kind, cause) in self.reproducers:
                out.append(self.reproducers[(kind, cause)])
            out.append("   cases (smallest first, one per layout first):")
            shown = layouts_first(members, lambda f: f.layout)
            out += [f"   - {f.describe()}" for f in shown[:6]]
        return "\n".join(out)


class Oracle:
    def __init__(self, layouts: Sequence[Layout] | None = None) -> None:
        t0 = time.perf_counter()
        self.pools = load_pools()
        self.rows = candidate_rows(self.pools)
        self.runs = [LayoutRun(layout, self.rows, self.pools)
                     for layout in (layouts or load_layouts("keys_layouts.yaml", Layout))]
        self.setup_seconds = time.perf_counter() - t0
        self.report = Report()

    def run(self, queries: Sequence[Query]) -> Report:
        report = self.report = Report(queries=len(queries))
        report.timings["setup (once)"] = self.setup_seconds
        t0 = time.perf_counter()
        for n, query in enumerate(queries):
            for run in self.layouts_for(query, n):
                report.layout_checks += 1
                self.check(run, query)
        report.timings["sessions+checks"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.explain()
        report.timings["reproducers"] = time.perf_counter() - t0
        return report

    def layouts_for(self, query: Query, n: int) -> list[LayoutRun]:
        """One layout per signature (:func:`signature`), starting from a rotating one: layouts
        that store the query's columns alike, under the settings that matter, answer alike."""
        return first_per_signature(rotated(self.runs, n), lambda r: signature(r.layout, query))

    # -- one query on one layout -----------------------------------------------------------------
    def check(self, run: LayoutRun, query: Query) -> list[Finding]:
        """Ask the query (and its ApproxDP retry), judge every outcome; returns the findings."""
        found: list[Finding] = []
        sql = query.sql()
        first = run.ask(sql, "pure")
        found += self.judge(run, query, first)
        retry = first.refused and NEEDS_DELTA in str(first.error)
        if retry or any(k.kind == "column" and k.sql != "b" for k in query.keys):
            found += self.judge(run, query, run.ask(sql, "approx"))
        return found

    def judge(self, run: LayoutRun, query: Query, out: Outcome) -> list[Finding]:
        report = self.report
        report.asked[out.kind] += 1
        out.query = query
        findings: list[Finding] = []

        def fail(kind: str, cause: str, detail: str) -> None:
            findings.append(Finding(kind, cause, run.layout.name, out.sql, out.kind, detail,
                                    query))

        if out.error is not None:
            err = out.error
            if out.refused:
                report.refusals[f"{out.kind}: {type(err).__name__}"] += 1
                report.refusal_reasons[_mask(first_line(err))[:160]] += 1
                if out.spent_after != out.spent_before:
                    fail("charged refusal", type(err).__name__,
                         f"spent {out.spent_before} -> {out.spent_after}: {first_line(err)}")
            elif type(err).__name__ == "ExecutionError":
                fail("engine error", _mask(engine_message(run.con, out.statement)),
                     first_line(err))
            else:
                fail(f"unexpected {type(err).__name__}", self.unexpected_cause(run, out),
                     first_line(err))
            report.findings += findings
            return findings

        report.answered[out.kind] += 1
        stmt = out.statement
        if stmt is None:
            fail("harness", "no engine statement recorded", "")
            report.findings += findings
            return findings
        # the engine's exact rows, computed once by plain DuckDB (the statement is deterministic)
        run.con.execute(f"CREATE OR REPLACE TEMP TABLE {EXACT} AS {stmt}")
        described = run.con.execute(f"DESCRIBE {EXACT}").fetchall()
        names, types = [str(r[0]) for r in described], [str(r[1]) for r in described]
        engine_keys = [n for n in names if n.startswith("__k")]
        ekeys = len(engine_keys)
        nkeys = len(query.keys)
        # which engine key each GROUP BY key is: one each, or (if privplan merges a repeated
        # expression into one key) the first key with the same expression
        if ekeys == nkeys:
            slot = list(range(nkeys))
        else:
            firsts = list(dict.fromkeys(k.sql for k in query.keys))
            slot = [firsts.index(k.sql) for k in query.keys]
            if len(firsts) != ekeys:
                fail("harness", "engine keys do not match the GROUP BY keys",
                     f"engine columns {names} for keys {[k.sql for k in query.keys]}")
                report.findings += findings
                return findings
        key_cols, key_types = names[:ekeys], types[:ekeys]
        count_col = names[ekeys]
        q = [f'"{c}"' for c in names]
        grouped = ", ".join(collated(f"e.{c}", t) for c, t in zip(q[:ekeys], key_types))
        total, distinct = run.con.execute(
            f"SELECT (SELECT count(*) FROM {EXACT}), (SELECT count(*) FROM (SELECT 1 FROM "
            f"{EXACT} AS e GROUP BY {grouped}))").fetchone() or (0, 0)
        if total != distinct:
            fail("duplicate key", _families(key_types, query),
                 f"the engine statement returns {total} rows for {distinct} distinct keys")

        # the released frame against the engine's rows (same pandas conversion on both sides)
        released = Counter(tuple(_norm(v) for v in row) for row in
                           out.df[[f"k{n}" for n in range(nkeys)] + ["n"]].itertuples(
                               index=False, name=None))
        exact_df = run.con.execute(f"SELECT * FROM {EXACT}").df()
        exact = Counter(tuple(_norm(v) for v in row) for row in
                        exact_df[[key_cols[slot[n]] for n in range(nkeys)] + [count_col]]
                        .itertuples(index=False, name=None))
        report.released_rows += sum(released.values())
        shown = Counter(key[:-1] for key in released.elements())
        differing = [key_types[slot[n]] for n in range(nkeys)
                     if Counter(r[n] for r in released.elements())
                     != Counter(r[n] for r in exact.elements())] or key_types
        if any(n > 1 for n in shown.values()):
            fail("indistinct released keys", _families(differing, query),
                 "the released frame holds two rows with one key (as the analyst reads them): "
                 f"{[k for k, n in shown.items() if n > 1][:4]}")
        if out.kind == "pure" and released != exact:
            fail("released != engine", _families(differing, query),
                 f"released {sorted(released.items())[:6]} vs engine "
                 f"{sorted(exact.items())[:6]}")
        elif out.kind == "approx" and released - exact:
            fail("released != engine", "selection, " + _families(differing, query),
                 f"released rows not in the engine's answer: {sorted(released - exact)[:6]}")

        # the counts against the plain, independent answer
        try:
            plain, plain_types, spec_types = run.plain_groups(query)
        except duckdb.Error as err:
            fail("harness", "plain query failed", first_line(err))
        else:
            # each key in the form the documented semantics release it: the engine's key type
            # is the released type of the key's plain type, and the released frame holds it
            # as pandas can (text as str, integers never as float, temporal as datetime64)
            for n in range(nkeys):
                etype = key_types[slot[n]]
                if etype.upper() != spec_types[n].upper():
                    fail("release form", f"a {plain_types[n]} key released as {etype}",
                         f"k{n}: plain type {plain_types[n]}, documented release type "
                         f"{spec_types[n]}, engine key type {etype}")
                problem = released_form_problem(out.df[f"k{n}"], etype)
                if problem is not None:
                    fail("release form", f"{etype} key in pandas: {problem.split(' [')[0]}",
                         f"k{n}: {problem}")
            on = " AND ".join(
                f"{collated(f'e.{q[slot[n]]}', key_types[slot[n]])} IS NOT DISTINCT FROM "
                f"{collated(f'g.k{n}', spec_types[n])}" for n in range(nkeys))
            missing = ("g.n > 0 AND e.__present IS NULL" if query.complete and out.kind == "pure"
                       else "FALSE")
            try:
                bad = run.con.execute(
                    f"SELECT {', '.join(f'CAST(e.{c} AS VARCHAR)' for c in q[:ekeys])}, "
                    f"e.{q[ekeys]}, g.n FROM (SELECT *, TRUE AS __present FROM {EXACT}) AS e "
                    f"FULL OUTER JOIN ({plain}) AS g ON {on} "
                    f"WHERE (e.__present AND e.{q[ekeys]} <> coalesce(g.n, 0)) OR ({missing}) "
                    "LIMIT 5").fetchall()
            except duckdb.Error as err:
                fail("harness", "comparison failed", first_line(err))
            else:
                if bad:
                    fail("count", _families(key_types, query),
                         f"(key..., privplan's exact count, plain count): {bad}")

        if query.join is not None:
            m = run.join_multiplicity(query.join)
            if m > 1:
                fail("join stability", f"{query.join.table}.pk ({run.pk_type(query.join)}) "
                     f"joined to t.{query.join.column} ({run.view_types[query.join.column]})",
                     f"a private row matches {m} public rows, each in its own released group, "
                     f"but the query was charged {out.query_cost} (stability 1)")
        report.findings += findings
        return findings

    # -- causes ------------------------------------------------------------------------------------
    @staticmethod
    def unexpected_cause(run: LayoutRun, out: Outcome) -> str:
        err = out.error
        assert err is not None
        cause = f" (cause: {type(err.__cause__).__name__}: {_mask(first_line(err.__cause__))})" \
            if err.__cause__ is not None else ""
        if "two rows for one group key" in str(err) and out.statement is not None:
            keys = engine_keys(run.con, out.statement)
            ktypes = keys.types
            if keys.distinct:
                frame = run.con.execute(out.statement).df()
                lossy = [t for c, t in zip(keys.columns, ktypes)
                         if _pandas_merges(run.con, out.statement, c, t, frame[c])]
                return ("check_one_row_per_key fires on keys DuckDB holds distinct: distinct "
                        f"values of a {_families(lossy or ktypes, None)[13:]} key collide once "
                        "converted to pandas")
            return ("check_one_row_per_key: real duplicate keys; "
                    + _families(ktypes, out_query(out)))
        return _mask(first_line(err)) + cause

    # -- reproducers -------------------------------------------------------------------------------
    def explain(self) -> None:
        """For the smallest case of each class: the layout's DDL, the policy's columns, and for
        session failures whether it depends on the data (the query over no rows) and, if so, a
        single row that triggers it (bisecting ``id`` through the session)."""
        runs = {r.layout.name: r for r in self.runs}
        deadline = time.perf_counter() + 10.0
        for (kind, cause), members in list(self.report.groups().items())[:25]:
            if time.perf_counter() > deadline:
                break
            f = members[0]
            run = runs[f.layout]
            lines = [f"   minimal reproducer on {run.layout.describe()}",
                     f"      DDL: {run.ddl}",
                     (f"      policy ({'with' if f.session == 'pure' else 'without'} "
                     f"public_values): {self._policy_columns(run, f)}"),
                     f"      SQL: {f.sql}"]
            if f.query is not None and (kind == "engine error" or kind.startswith("unexpected")):
                lines.append("      " + self.witness(run, f))
            elif kind == "join stability" and f.query is not None and f.query.join is not None:
                j = f.query.join
                rows = run.con.execute(
                    f"SELECT {TABLE}.id, {TABLE}.{j.column}, list({j.table}.pk::VARCHAR) FROM "
                    f"{run.view} AS {TABLE} JOIN {j.table} ON {TABLE}.{j.column} = "
                    f"{run.public_key(j)} GROUP BY ALL HAVING count(*) > 1 LIMIT 2").fetchall()
                lines.append(f"      private rows (id, {j.column}, public keys matched): {rows}")
                lines.append(f"      public table: CREATE TABLE {j.table} "
                             f"({PUBLIC_TABLES[j.table][0]})")
            lines.append(f"      outcome: {f.detail}")
            self.report.reproducers[(kind, cause)] = "\n".join(lines)

    @staticmethod
    def _policy_columns(run: LayoutRun, f: Finding) -> str:
        cols = run.policies[f.session]["tables"][TABLE]["columns"]
        used = [c for c in cols if re.search(rf"\b{c}\b", f.sql)]
        return "{" + ", ".join(f"{c}: {cols[c]}" for c in used) + "}"

    def witness(self, run: LayoutRun, f: Finding, budget: int = 80) -> str:
        """Whether the failure depends on the data and, if it does, a smallest set of rows
        that triggers it (greedy chunk removal over ``id``, each step asked of a fresh
        session)."""
        assert f.query is not None
        query = f.query

        def fails(ids: Sequence[int] | None) -> bool:
            extra = "id < 0" if ids is None else f"id IN ({', '.join(map(str, ids))})"
            got = run.ask(query.sql(extra), f.session, run.fresh_session(f.session))
            return got.error is not None and not got.refused

        if fails(None):
            return "fails on an empty table too: independent of the data, but after the charge"
        ids = list(range(1, run.total_rows + 1))
        if not fails(ids):
            return "(does not fail again when restricted by id)"
        ids = shrink_ids(ids, fails, budget)
        rows = run.con.execute(f'SELECT COLUMNS(*)::VARCHAR FROM "{TABLE}" WHERE id IN '
                               f"({', '.join(map(str, ids))}) ORDER BY id").fetchall()
        names = list(COLUMN_TYPES)
        shown = "; ".join("(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, row)) + ")"
                          for row in rows[:4])
        return (f"depends on the data: fails with the {len(ids)} row(s) id IN {ids[:8]}: "
                f"{shown}")


# -----------------------------------------------------------------------------------------------
# Hand-written regressions (the review's reproducers and the hazards they generalise to)
# -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Regression:
    name: str
    layout: str
    sql: str
    groups: int | None  # released rows expected (None: not checked)
    kind: str = "pure"
    must_answer: bool = False  # a refusal would hide the regression (the review's reproducer)
    keys: tuple[Any, ...] | None = None  # the released k0 values (any order; None is NULL)


REGRESSIONS: tuple[Regression, ...] = (
    Regression("k-literals-one-group", "canonical",
               "SELECT CASE WHEN age < 18 THEN 1 WHEN age < 18 THEN '01' WHEN age < 30 THEN 1.0 "
               "WHEN age < 65 THEN ' 1' WHEN age < 90 THEN 1e0 ELSE '1' END AS k0, COUNT(*) AS n "
               "FROM t GROUP BY CASE WHEN age < 18 THEN 1 WHEN age < 18 THEN '01' WHEN age < 30 "
               "THEN 1.0 WHEN age < 65 THEN ' 1' WHEN age < 90 THEN 1e0 ELSE '1' END", 1,
               must_answer=True),
    Regression("k-literals-and-null", "text-default-nocase",
               "SELECT CASE WHEN age < 18 THEN 1 WHEN age < 18 THEN '01' WHEN age < 65 THEN "
               "01 END AS k0, COUNT(*) AS n FROM t GROUP BY 1", 2, must_answer=True),
    Regression("strings-case-space-nfc-nfd", "text-default-nocase",
               "SELECT CASE WHEN age < 18 THEN 'a' WHEN age < 30 THEN 'A' WHEN age < 50 THEN "
               "'a ' WHEN age < 70 THEN '\u00e9' ELSE 'e\u0301' END AS k0, COUNT(*) AS n FROM t "
               "GROUP BY 1", 5),
    Regression("signed-zero-one-group", "canonical",
               "SELECT CASE WHEN age < 18 THEN 0e0 WHEN age < 30 THEN '-0.0' ELSE -0e0 END AS k0, "
               "COUNT(*) AS n FROM t GROUP BY 1", 1),
    Regression("public-values-nocase-column", "narrow-nocase",
               "SELECT s AS k0, COUNT(*) AS n FROM t GROUP BY s", 13),
    # NaN is grouped with NULL (pandas holds both as NaN): two groups, 1.0 and NULL (the NaN
    # rows and the NULL rows together; the count check holds the NULL group to both)
    Regression("nan-and-null-keys", "canonical",
               "SELECT CASE WHEN age < 18 THEN 1e0 WHEN age < 50 THEN 'nan' END AS k0, "
               "COUNT(*) AS n FROM t GROUP BY 1", 2, keys=(1.0, None)),
    # DECIMAL(21,20): more than 15 digits, released as its text (two keys a double would merge)
    Regression("decimal-keys-beyond-double", "canonical",
               "SELECT CASE WHEN age < 18 THEN 0.1 ELSE 0.10000000000000000001 END AS k0, "
               "COUNT(*) AS n FROM t GROUP BY 1", 2,
               keys=("0.10000000000000000000", "0.10000000000000000001")),
    # a HUGEINT column: its public values released as text, 2^53 and 2^53 + 1 distinct
    Regression("hugeint-public-values", "narrow-nocase",
               "SELECT j AS k0, COUNT(*) AS n FROM t GROUP BY j", 5,
               keys=("0", "1", "9007199254740992", "9007199254740993", "9223372036854775807")),
    # BIGINT with NULL: released as a nullable integer (as float, 2^53 + 1 would be 2^53)
    Regression("bigint-keys-with-null", "canonical",
               "SELECT CASE WHEN age < 18 THEN 9007199254740993 WHEN age < 50 THEN "
               "9007199254740992 END AS k0, COUNT(*) AS n FROM t GROUP BY 1", 3,
               keys=(9007199254740993, 9007199254740992, None)),
    Regression("same-key-twice", "canonical",
               "SELECT s AS k0, s AS k1, COUNT(*) AS n FROM t GROUP BY s, s", None),
    # a UHUGEINT public label: released as text, 2^128 - 1 included
    Regression("uhugeint-public-label", "canonical",
               "SELECT pub_lab.lab_u AS k0, COUNT(*) AS n FROM t JOIN pub_lab ON t.k = pub_lab.pk "
               "GROUP BY pub_lab.lab_u", 8,
               keys=("340282366920938463463374607431768211455", "0", "1", None, "2", "3", "4",
                     "5")),
    Regression("varchar-public-key-to-bigint", "canonical",
               "SELECT pub_vc.label AS k0, COUNT(*) AS n FROM t JOIN pub_vc ON t.k = pub_vc.pk "
               "GROUP BY pub_vc.label", None),
    Regression("timestamp-public-key-to-date", "canonical",
               "SELECT pub_ts.label AS k0, COUNT(*) AS n FROM t JOIN pub_ts ON t.d = pub_ts.pk "
               "GROUP BY pub_ts.label", None),
    Regression("date-public-key-to-timestamp", "canonical",
               "SELECT pub_date.label AS k0, COUNT(*) AS n FROM t JOIN pub_date "
               "ON t.ts = pub_date.pk GROUP BY pub_date.label", None),
    Regression("nocase-public-label", "text-default-nocase",
               "SELECT pub_int.label AS k0, COUNT(*) AS n FROM t JOIN pub_int ON t.k = pub_int.pk "
               "GROUP BY pub_int.label", 9),
    # dates outside years 1-9999 ('infinity', '-infinity', 5877642-06-24, 0044-03-15 BC,
    # 10000-01-01) are counted in the NULL group, released as NaT; the dates at both ends of
    # the range are keys of their own
    Regression("infinite-date-selected-key", "canonical",
               "SELECT d AS k0, COUNT(*) AS n FROM t GROUP BY d", 6, "approx",
               keys=(pd.Timestamp("0001-01-01"), pd.Timestamp("1970-01-01"),
                     pd.Timestamp("2019-12-31"), pd.Timestamp("2020-01-01"),
                     pd.Timestamp("9999-12-31"), None)),
    # the ends of the release range: 9999-12-31 23:59:59.999999 and 0001-01-01 are keys;
    # 10000-01-01 and a BC date (typed literals, so selected keys) are grouped with NULL
    Regression("temporal-range-edges", "canonical",
               "SELECT CASE WHEN age < 18 THEN TIMESTAMP '9999-12-31 23:59:59.999999' "
               "WHEN age < 30 THEN TIMESTAMP '10000-01-01 00:00:00' WHEN age < 65 THEN "
               "TIMESTAMP '0001-01-01 00:00:00' ELSE CAST(DATE '0001-12-31 (BC)' AS TIMESTAMP) "
               "END AS k0, COUNT(*) AS n FROM t GROUP BY 1", 3, "approx",
               keys=(pd.Timestamp("9999-12-31 23:59:59.999999"), pd.Timestamp("0001-01-01"),
                     None)),
    # a TIMESTAMP_S column rounds 9999-12-31 23:59:59.999999 up to 10000-01-01: NULL there,
    # with ±infinity, 10000-01-01 and the BC timestamp; 2020-01-01 00:00:00.000001 is
    # 2020-01-01 00:00:00 in seconds
    Regression("timestamp-s-range-end", "tiny-default-noaccent",
               "SELECT ts AS k0, COUNT(*) AS n FROM t GROUP BY ts", 7, "approx",
               keys=(pd.Timestamp("2020-01-01"), pd.Timestamp("2020-01-01 12:00:00"),
                     pd.Timestamp("2020-03-08 02:30:00"), pd.Timestamp("1970-01-01"),
                     pd.Timestamp("2262-04-12"), pd.Timestamp("1677-09-21"), None)),
    # NaN and -NaN are one group with NULL; inf and -0.0 keep their own
    Regression("nan-signs-and-inf", "canonical",
               "SELECT CASE WHEN age < 18 THEN CAST('nan' AS DOUBLE) WHEN age < 30 THEN "
               "-CAST('nan' AS DOUBLE) WHEN age < 65 THEN CAST('inf' AS DOUBLE) ELSE -0e0 END "
               "AS k0, COUNT(*) AS n FROM t GROUP BY 1", 3, "approx",
               keys=(-0.0, float("inf"), None)),
)


def _regression_query(sql: str) -> Query:
    """A Query for hand-written SQL (its keys are read back from the select list)."""
    return Query(_hand_keys(sql), style="expr", text=sql)


def _hand_keys(sql: str) -> tuple[Key, ...]:
    """The keys of ``SELECT <e0> AS k0[, <e1> AS k1], COUNT(*) ...``."""
    select = sql.removeprefix("SELECT ").split(", COUNT(*)")[0]
    exprs = [e for e in re.split(r" AS k\d+(?:, |$)", select) if e]
    join = next((j for j in JOINS if f"JOIN {j.table} " in sql), None)
    keys = []
    for expr in exprs:
        if join is not None and expr.startswith(f"{join.table}."):
            keys.append(Key(expr, "join", True, join))
        elif expr.startswith("CASE"):
            keys.append(Key(expr, "case", True))
        else:
            keys.append(Key(expr, "column", expr == "b"))
    return tuple(keys)


# -----------------------------------------------------------------------------------------------
# Tests
# -----------------------------------------------------------------------------------------------

FAST_SEEDS, FAST_QUERIES = (20240611,), 45
SLOW_SEEDS, SLOW_QUERIES = (11, 12, 13), 70


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return Oracle()


def test_layouts_hold_the_hazards(oracle: Oracle) -> None:
    """The harness itself: read directly (bypassing privplan), the collated layouts merge keys
    that are distinct in binary, the public tables' keys collide once converted to the private
    column's type, and the duplicate check sees a duplicate."""
    runs = {r.layout.name: r for r in oracle.runs}
    nocase = runs["narrow-nocase"].con.execute(
        f"SELECT count(DISTINCT s) FROM \"{TABLE}\" WHERE lower(s) = 'a'").fetchone()
    assert nocase is not None and nocase[0] == 1
    default = runs["text-default-nocase"].con.execute(
        "SELECT count(*) FROM (SELECT k FROM (VALUES ('a'), ('A')) v(k) GROUP BY k)").fetchone()
    assert default is not None and default[0] == 1
    canonical = runs["canonical"]
    assert canonical.join_multiplicity(JOINS[1]) > 1  # '1', '01', ' 1' are one BIGINT
    dup = canonical.con.execute(
        "SELECT (SELECT count(*) FROM (VALUES ('a'), ('a')) e(k)), (SELECT count(*) FROM "
        f"(SELECT 1 FROM (VALUES ('a'), ('a')) e(k) GROUP BY (e.k) {BINARY}))").fetchone()
    assert dup == (2, 1)


def _regression_layout(oracle: Oracle, name: str) -> LayoutRun:
    runs = {r.layout.name: r for r in oracle.runs}
    return runs.get(name) or runs["text-default-nocase"]


@pytest.mark.parametrize("case", REGRESSIONS, ids=[r.name for r in REGRESSIONS])
def test_regression(oracle: Oracle, case: Regression) -> None:
    """Hand-written cases: one group per engine key, the counts of plain DuckDB, and the query
    charged once (``res.cost`` is its budget on a fresh session)."""
    run = _regression_layout(oracle, case.layout)
    query = _regression_query(case.sql)
    sess = run.fresh_session(case.kind)
    out = run.ask(case.sql, case.kind, sess)
    oracle.report = Report()
    findings = oracle.judge(run, query, out)
    oracle.report.findings = findings
    oracle.explain()
    if out.error is not None and not out.refused or findings:
        pytest.fail(oracle.report.render(), pytrace=False)
    if out.refused:
        print(f"refused: {first_line(out.error or '')}")
        assert out.spent_after == out.spent_before
        assert not case.must_answer, f"refused: {first_line(out.error or '')}"
        return
    expected = (pp.PureDP(PURE_EPSILON) if case.kind == "pure"
                else pp.ApproxDP(APPROX_EPSILON, APPROX_DELTA))
    assert out.cost == expected, (out.cost, expected)
    assert out.spent_after == expected, out.spent_after
    if case.groups is not None:
        assert len(out.df) == case.groups, out.df
    if case.keys is not None:
        got = sorted(_norm(v) for v in out.df["k0"].tolist())
        assert got == sorted(_norm(v) for v in case.keys), (got, out.df)
    if case.name == "k-literals-one-group":
        assert int(out.df["n"].iloc[0]) == run.total_rows


def _check(oracle: Oracle, seeds: Sequence[int], per_seed: int) -> None:
    queries = [q for seed in seeds for q in generate(seed, per_seed, oracle.pools)]
    report = oracle.run(queries)
    print(report.summary())
    assert report.answered["pure"] > len(queries), report.summary()  # the oracle asked enough
    if report.findings:
        pytest.fail(report.render(), pytrace=False)


@pytest.mark.invariant(7)
def test_released_keys_are_the_engine_groups(oracle: Oracle) -> None:
    """Random public-domain keys on every layout (a few hundred session queries)."""
    _check(oracle, FAST_SEEDS, FAST_QUERIES)


@pytest.mark.invariant(7)
@pytest.mark.slow
def test_released_keys_are_the_engine_groups_many(oracle: Oracle) -> None:
    """More seeds (CI)."""
    _check(oracle, SLOW_SEEDS, SLOW_QUERIES)


if __name__ == "__main__":  # the full report, for whoever fixes what the test finds
    slow = "slow" in sys.argv[1:]
    o = Oracle()
    qs = [q for seed in (SLOW_SEEDS if slow else FAST_SEEDS)
          for q in generate(seed, SLOW_QUERIES if slow else FAST_QUERIES, o.pools)]
    print(o.run(qs).render())
    for case in REGRESSIONS:
        run = _regression_layout(o, case.layout)
        got = run.ask(case.sql, case.kind, run.fresh_session(case.kind))
        o.report = Report()
        fs = o.judge(run, _regression_query(case.sql), got)
        status = "refused" if got.refused else ("FAIL" if fs or got.error else "ok")
        print(f"regression {case.name}: {status} "
              f"{'' if got.error is None else first_line(got.error)[:100]}")
