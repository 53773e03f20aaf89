"""Schema, policy and neighbouring datasets of the gate fuzz (``test_fuzz_gate.py``).

Two private tables:

* ``q`` (one row per person) holds every kind of bound a quantile or a sum can meet: an int
  column on a step-1 grid (``i``), a wide one (``w``), equal bounds (``e``), the int64 extremes
  (``n``), floats of ordinary (``f``), tiny (``t``: ±1e-300), huge (``hf``: ±max double),
  subnormal (``sb``: refused for quantiles) and equal (``ef``) bounds, a window narrower than 1,000
  doubles (``nr``), a REAL (``r``), a DECIMAL (``dc``), an int stored as text (``vi``), a
  string key with public values (``s``), one without (``g``: partition selection), a bool and a
  date. DuckDB only: an unsigned 64-bit column (``ub``).
* ``u`` (a privacy unit ``uid``, at most 3 rows and 2 groups per unit) for BigQuery's clause
  queries: ``item`` (no public values), ``p`` (public values), ``qty``, ``val``, ``big``.

A dataset is a base (``small``: ordinary rows, none holding 37; or ``empty``) and at most one
*extra row* in one table, so a base and the base plus a row are neighbours. The extra rows hold
edge values: NULL, each type's extremes, NaN/±inf, subnormals and -0.0, values just outside the
bounds, odd strings, and 37 in every column (the attacks' marker: ``WHERE i = 37`` selects the
extra row alone). Engines other than DuckDB get the columns they can hold
(:data:`ENGINE_COLUMNS`) and their own edge rows where DuckDB's cannot be stored there.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

BIG = 2**63 - 1
MAXD = "1.7976931348623157e308"

# name: (DuckDB type, policy type, policy options)
Q_COLUMNS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "i": ("BIGINT", "int", {"lower": 0, "upper": 100}),
    "w": ("BIGINT", "int", {"lower": -10**12, "upper": 10**12}),
    "e": ("INTEGER", "int", {"lower": 5, "upper": 5}),
    "n": ("BIGINT", "int", {"lower": -BIG - 1, "upper": BIG}),
    "f": ("DOUBLE", "float", {"lower": -1e6, "upper": 1e6}),
    "t": ("DOUBLE", "float", {"lower": -1e-300, "upper": 1e-300}),
    "hf": ("DOUBLE", "float", {"lower": -float(MAXD), "upper": float(MAXD)}),
    "sb": ("DOUBLE", "float", {"lower": 0, "upper": 1e-310}),
    "ef": ("DOUBLE", "float", {"lower": 2.5, "upper": 2.5}),
    "nr": ("DOUBLE", "float", {"lower": 40.0, "upper": 40.0000000000001}),
    "r": ("FLOAT", "float", {"lower": 0, "upper": 1}),
    "dc": ("DECIMAL(18,3)", "float", {"lower": -100, "upper": 100}),
    "vi": ("VARCHAR", "int", {"lower": 0, "upper": 100}),
    "ub": ("UBIGINT", "int", {"lower": 0, "upper": 10**6}),
    "s": ("VARCHAR", "str", {"public_values": ["a", "b", "é", "A"]}),
    "g": ("VARCHAR", "str", {}),
    "b": ("BOOLEAN", "bool", {}),
    "d": ("DATE", "date", {"lower": "2000-01-01", "upper": "2030-12-31"}),
}
U_COLUMNS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "uid": ("BIGINT", "int", {}),
    "item": ("VARCHAR", "str", {}),
    "p": ("VARCHAR", "str", {"public_values": ["a", "b"]}),
    "qty": ("INTEGER", "int", {"lower": 0, "upper": 100}),
    "val": ("DOUBLE", "float", {"lower": -10, "upper": 10}),
    "big": ("BIGINT", "int", {"lower": -10**15, "upper": 10**15}),
}
TABLES = {"q": Q_COLUMNS, "u": U_COLUMNS}

# the numeric columns of q, for quantiles and sums (sb: subnormal bounds, refused)
Q_NUMERIC = ("i", "w", "e", "n", "f", "t", "hf", "sb", "ef", "nr", "r", "dc", "vi", "ub")

ENGINE_COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    # what each other engine's tables hold (the rest of the policy is left out there)
    "postgres": {"q": ("i", "w", "e", "n", "f", "t", "hf", "ef", "nr", "r", "dc", "s", "g",
                       "b", "d", "pn"),
                 "u": ("uid", "item", "p", "qty", "val", "big")},
    "spark": {"q": ("i", "w", "e", "n", "f", "t", "hf", "ef", "nr", "r", "dc", "s", "g", "b",
                    "d"),
              "u": ("uid", "item", "p", "qty", "val", "big")},
}
PG_EXTRA_COLUMNS = {"pn": ("NUMERIC", "float", {"lower": -1e6, "upper": 1e6})}
"""PostgreSQL only: an unconstrained numeric (values beyond double range), read as float."""


def policy_dict(engine: str = "duckdb") -> dict[str, Any]:
    tables: dict[str, Any] = {}
    for name, cols in TABLES.items():
        if engine != "duckdb":
            cols = {**cols, **PG_EXTRA_COLUMNS} if engine == "postgres" else cols
            cols = {c: cols[c] for c in ENGINE_COLUMNS[engine][name]}
        spec: dict[str, Any] = {"columns": {c: {"type": k, **o} for c, (_, k, o) in cols.items()}}
        if name == "u":
            spec.update(privacy_unit="uid", max_rows_per_unit=3, max_groups_per_unit=2)
        else:
            spec["privacy_unit"] = "row"
        tables[name] = spec
    return {"tables": tables}


def _ordinary_q(rng: random.Random) -> list[str]:
    rows = []
    for k in range(12):
        i = rng.choice([x for x in range(101) if x != 37])
        rows.append(
            f"({i}, {rng.randint(-10**9, 10**9)}, 5, {rng.randint(-10**15, 10**15)}, "
            f"{rng.uniform(-1000, 1000):.3f}, {rng.uniform(-1, 1):.3f}e-300, "
            f"{rng.uniform(-1, 1):.3f}e300, 0, 2.5, 40.00000000000005, {rng.random():.3f}, "
            f"{rng.uniform(-100, 100):.3f}, '{rng.randint(0, 100)}', {rng.randint(0, 10**6)}, "
            f"'{'abéA'[k % 4]}', '{'xyz'[k % 3]}', {'TRUE' if k % 2 else 'FALSE'}, "
            f"DATE '20{10 + k:02d}-0{1 + k % 9}-1{k % 10}')")
    return rows


def _ordinary_u(rng: random.Random) -> list[str]:
    items = ["pen", "pencil", "book"]
    return [f"({1 + k // 3}, '{items[k % 3]}', '{'ab'[k % 2]}', {rng.randint(0, 100)}, "
            f"{rng.uniform(-10, 10):.3f}, {rng.randint(-10**12, 10**12)})" for k in range(15)]


# extra rows of q (DuckDB: in Q_COLUMNS order, as SQL text typed by the INSERT)
Q_EDGES: dict[str, str] = {
    "null": "(" + ", ".join(["NULL"] * len(Q_COLUMNS)) + ")",
    "37s": ("(37, 37, 37, 37, 37.0, 3.7e-301, 3.7e301, 0, 37, 40.000000000000037, 0.37, 37.037,"
            " '37', 37, 'a', '37', TRUE, DATE '2037-03-07')"),
    "max": (f"({BIG}, {BIG}, 2147483647, {BIG}, {MAXD}, {MAXD}, {MAXD}, {MAXD}, {MAXD}, {MAXD},"
            " 3.4028235e38, 999999999999999.999, '99999999999999999999', 18446744073709551615,"
            " 'b', repeat('z', 3000), TRUE, DATE '5877642-06-25')"),
    "min": (f"({-BIG - 1}, {-BIG - 1}, -2147483648, {-BIG - 1}, -{MAXD}, -{MAXD}, -{MAXD},"
            f" -{MAXD}, -{MAXD}, -{MAXD}, -3.4028235e38, -999999999999999.999, '-1', 0, 'A', '',"
            " FALSE, DATE '5877642-06-25 (BC)')"),
    "nan": ("(0, 0, 0, 0, 'nan', 'inf', '-inf', 'nan', 'nan', 'inf', 'nan', 0, 'abc', 0, 'é',"
            " 'e\u0301', NULL, 'infinity')"),
    "tiny": ("(-1, 1, 4, -1, 5e-324, -5e-324, 2.2250738585072014e-308, 5e-324, -0.0, -0.0,"
             " 1e-45, 0.001, ' 42 ', 1, 'é', '\U0001F600', FALSE, DATE '0001-01-01')"),
    "outside": ("(101, 1000000000001, 6, 0, 1000000.5, 1.0000000000000001e-300, 1e308, 1e-310,"
                " 2.5000000000000004, 40.0000000000002, 1.0000001, 100.001, '101', 1000001,"
                " 'a ', chr(0) || 'x', TRUE, DATE '2031-01-01')"),
    "odd": ("(37, -37, 5, 37, -37.5, -3.7e-301, -3.7e301, 1e-311, 2.5, 40, 0.0, -37, '1e5', 37,"
            " '\u01c5', 'a%_\\', FALSE, DATE '2000-02-29')"),
}
U_EDGES: dict[str, str] = {
    "null": "(NULL, NULL, NULL, NULL, NULL, NULL)",
    "newnull": "(99, NULL, NULL, NULL, NULL, NULL)",
    "37s": "(37, '37', 'a', 37, 37.0, 37)",
    "max": f"(1, '', 'b', 2147483647, 'inf', {BIG})",
    "min": f"(2, 'pen', 'A', -2147483648, 'nan', {-BIG - 1})",
    "odd": f"({BIG}, 'e\u0301', '\u00e9', 101, -0.0, 0)",
    "long": "(-1, repeat('x', 3000), 'b', 0, 5e-324, 1)",
}
EDGES = {"q": Q_EDGES, "u": U_EDGES}


@dataclass(frozen=True)
class DatasetSpec:
    """A base and at most one extra row: ``extra = (table, edge name)``."""

    base: str                       # "small" or "empty"
    extra: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        return self.base if self.extra is None else f"{self.base}+{self.extra[0]}:{self.extra[1]}"

    def plus(self, table: str, edge: str) -> DatasetSpec:
        return DatasetSpec(self.base, (table, edge))


def base_rows(base: str) -> dict[str, list[str]]:
    if base == "empty":
        return {"q": [], "u": []}
    rng = random.Random(20_250_101)
    return {"q": _ordinary_q(rng), "u": _ordinary_u(rng)}


def duckdb_statements(spec: DatasetSpec) -> list[str]:
    """The DDL/DML that builds ``spec`` in DuckDB."""
    out = []
    rows = base_rows(spec.base)
    for name, cols in TABLES.items():
        out.append(f"CREATE TABLE {name}(" + ", ".join(f'"{c}" {t}' for c, (t, _, _) in
                                                       cols.items()) + ")")
        values = list(rows[name])
        if spec.extra is not None and spec.extra[0] == name:
            values.append(EDGES[name][spec.extra[1]])
        if values:
            out.append(f"INSERT INTO {name} VALUES " + ", ".join(values))
    return out


def duckdb_connection(spec: DatasetSpec) -> Any:
    import duckdb

    con = duckdb.connect(":memory:")
    for stmt in duckdb_statements(spec):
        con.execute(stmt)
    return con
