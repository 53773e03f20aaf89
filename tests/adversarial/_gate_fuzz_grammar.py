"""Query generators of the gate fuzz: quantiles, nested SELECTs, BigQuery's clause, outer queries.

Each generator writes queries over the tables of :mod:`tests.adversarial._gate_fuzz_data`,
mostly ones privplan should answer (so they reach the gate, the engine and the code after the
charge, where a data-dependent failure would show) and a share at or past the edges of what it
answers (so refusals are exercised too). Conditions name 37 often: the extra row of the
neighbouring dataset holds 37 in every column, so ``WHERE i = 37 AND <part>`` evaluates
``<part>`` on that row alone — the shape of every one-bit attack found so far.
"""

from __future__ import annotations

import random
import re
from typing import Any, ClassVar

from tests.adversarial._gate_fuzz_data import Q_COLUMNS, Q_NUMERIC
from tests.adversarial._gate_fuzz_run import Case

# q literals of many shapes: in [0, 1] with at most 9 decimals (answered) and not (refused)
Q_OK = ["0", "1", "0.5", ".5", "0.25", "0.75", "0.1", "0.9", "0.99", "0.999999999",
        "0.000000001", "1e-9", "5e-1", "1E0", "1.0", "0.0", "00.5", "0.5000000000000000000000",
        "1.000000000", "2.5e-1", "0.123456789", "0e0", "100e-2", "9.99999999e-1",
        "123456789e-9", "0.3", "0.01"]
Q_BAD = ["0.9999999999", "0.999999999999999999", "1e-10", "1e-300", "1e-400", "0.1234567891",
         "1.0000000001", "2", "-0.5", "-0.0", "1e400", "'0.5'", "NULL", "0.5 + 0", "1/2",
         "CAST(0.5 AS DOUBLE)", "(0.5)", "+0.5", "[0.5]", "i", "1234567891e-10", "5e-324",
         "0.5::DECIMAL(2,1)", "10e-1", "1e0e0"]
Q_FUNCS = ["MEDIAN({c})", "QUANTILE_CONT({c}, {q})", "QUANTILE_DISC({c}, {q})",
           "QUANTILE({c}, {q})", "PERCENTILE_CONT({q}) WITHIN GROUP (ORDER BY {c})",
           "PERCENTILE_DISC({q}) WITHIN GROUP (ORDER BY {c})",
           "PERCENTILE_CONT({q}) WITHIN GROUP (ORDER BY {c} ASC)",
           "PERCENTILE_DISC({q}) WITHIN GROUP (ORDER BY {c} DESC)", "APPROX_QUANTILE({c}, {q})",
           "MIN({c})", "MAX({c})", "PERCENTILE_CONT({c}, {q})", "MEDIAN(DISTINCT {c})",
           "QUANTILE_CONT({c}, [{q}, 0.5])", "MEDIAN({c}) FILTER (WHERE {cond})",
           "MAX({c}) FILTER (WHERE {cond})", "QUANTILE_DISC({c}, {q}) FILTER (WHERE {cond})"]
Q_ODD_ARGS = ["s", "g", "b", "d", "i + 1", "-i", "CAST(i AS DOUBLE)", "abs(f)", "q.i", "*",
              "NULL", "37", "TRY_CAST(vi AS INT)"]
CLAMPS = ["(0, 10)", "(0, 100)", "(3, 3)", "(-1e-300, 1e-300)", "(0, 1e-310)", "(10, 0)",
          "(0.5, 2.5)", "(-1e300, 1e300)", "(0, 1e309)", "(1, 'a')", "(NULL, 1)",
          f"(0, {2**63 - 1})", f"({-2**63}, 0)", "(40, 40.0000000000001)", "(-5, 5)",
          "(0.1, 0.30000000000000004)", "(2.5, 2.5)", "(-1, 1)"]
LIMITS = ["0", "1", "2", "3", "-1", "1.5", "0.4", "2.5", "'1'", "'a'", "NULL", "1e20", "1e400",
          "9223372036854775807", "9223372036854775808", "-0", "CAST(NULL AS INT)", "2 * 3",
          "1 / 0", "abs(-2)", "10 %", "(SELECT 1)", "1e-300", "'2.5'", "TRUE"]
KEYS_Q = ["s", "b", "g", "CASE WHEN i = 37 THEN 'hit' ELSE 'miss' END",
          "CASE WHEN f > 36.5 AND f < 37.5 THEN 1 ELSE 0 END", "s", "b"]
MIXED = ["'a'", "'1'", "1", "1.5", "DATE '2020-01-01'", "TRUE", "'yes'", "NULL", "'37'",
         "'nan'", "'-1.5e10'", "''", "'2020-01-01'", "INTERVAL 1 DAY", "[1]"]


PINNED: dict[str, list[str]] = {
    # every run's first queries: the classes of the one-bit leaks found on these surfaces (q
    # arithmetic, IS TRUE's casts, grids narrower than their doubles, outer queries failing on
    # every answer) and the shapes this fuzz found wanting, whatever the seed draws
    "quantile": [
        "SELECT QUANTILE_CONT(i, 0.999999999999999999) AS m0 FROM q WHERE i < 9 OR i = 37",
        "SELECT QUANTILE_CONT(i, 1e-300) AS m0 FROM q",
        "SELECT MEDIAN(nr) AS m0, QUANTILE_DISC(t, 0.5) AS m1 FROM q WHERE i = 37 OR i < 50",
        "SELECT MAX(hf) AS m0, MIN(n) AS m1, MEDIAN(w) AS m2 FROM q WHERE i = 37",
        ("SELECT MIN(ef) AS m0, MAX(e) AS m1, PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY r) "
         "AS m2 FROM q"),
        "SELECT MEDIAN(sb) AS m0 FROM q",
        "SELECT COUNT(*) AS n FROM q WHERE i = 37 AND g IS TRUE",
        "SELECT s, MEDIAN(dc) AS m0 FROM q WHERE g = '37' OR i = 37 GROUP BY s",
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) PERCENTILE_CONT(f, "
         "0.5, contribution_bounds_per_row => (40, 40.0000000000001)) AS m0 FROM q"),
    ],
    "outer": [
        "SELECT g, COUNT(*) AS n FROM q WHERE i = 37 GROUP BY g HAVING g > 37",
        "SELECT g, COUNT(*) AS n FROM q WHERE i = 37 GROUP BY g",
        "SELECT COUNT(*) AS n FROM q HAVING n > 1 AND n < 'a'",
        "SELECT b, AVG(i) AS a FROM q GROUP BY b HAVING COUNT(*) > 0 LIMIT 1e20",
        "SELECT s, COUNT(*) AS n, CAST(s AS INT) AS x FROM q GROUP BY s",
        "SELECT s, COUNT(*) AS n, s + 1 AS x FROM q GROUP BY s",
        "SELECT b, COUNT(*) AS n FROM q GROUP BY b HAVING CAST(b AS DATE) > DATE '2000-01-01'",
        ("SELECT DATE '2020-01-01' AS lab, COUNT(*) AS v FROM q UNION ALL "
         "SELECT '2020-01-02', COUNT(*) FROM q"),
    ],
    "nested": [
        "SELECT * FROM (SELECT COUNT(*) AS n FROM q) WHERE n > 1 AND n < 'a'",
        "SELECT * FROM (SELECT s, COUNT(*) AS n FROM q GROUP BY s) WHERE n > 0 LIMIT 1e20",
        "SELECT 100 // n AS l FROM (SELECT COUNT(*) AS n FROM q)",
        ("SELECT CAST(k AS INT) AS k2, n FROM (SELECT CASE WHEN i > 50 THEN '1' ELSE '2' END "
         "AS k, COUNT(*) AS n FROM q GROUP BY 1)"),
        ("SELECT a.n - b.n AS d FROM (SELECT COUNT(*) AS n FROM q WHERE i = 37) a, "
         "(SELECT COUNT(*) AS n FROM u WHERE qty = 37) b"),
    ],
    "bigquery": [
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, privacy_unit_column=uid)"
         " item, COUNT(*) AS a0 FROM u RIGHT OUTER JOIN (SELECT DISTINCT item FROM "
         "UNNEST(['pen', NULL])) USING (item) GROUP BY item"),
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) item, AVG(val, "
         "contribution_bounds_per_group => (-1e-300, 1e-300)) AS a0 FROM u GROUP BY item"),
        ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, max_rows_contributed=1,"
         " min_privacy_units_per_group=2) item, SUM(qty) AS a0 FROM u WHERE qty = 37 GROUP BY "
         "item"),
    ],
}


class Gen:
    """The generators share a random source and a condition grammar."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.index = 0
        self.clean = True  # this query: only what privplan should answer (mostly)
        self.numeric: tuple[str, ...] = Q_NUMERIC  # q's numeric columns on this engine
        self.bounds = {c: (float(o["lower"]), float(o["upper"]))
                       for c, (_, _, o) in Q_COLUMNS.items() if c in Q_NUMERIC}

    def start(self, clean_share: float = 0.65) -> None:
        self.clean = self.p(clean_share)

    def p(self, prob: float) -> bool:
        return self.r.random() < prob

    def pick(self, seq: Any) -> Any:
        return self.r.choice(seq)

    # -- conditions over one table ------------------------------------------------------------
    def cond_q(self, depth: int = 1) -> str:
        if depth > 0 and self.p(0.25):
            op = self.pick(["AND", "OR"])
            return f"({self.cond_q(depth - 1)} {op} {self.cond_q(depth - 1)})"
        if depth > 0 and self.p(0.08):
            return f"NOT ({self.cond_q(depth - 1)})"
        if not self.clean and self.p(0.25):  # parts that fail on some value: refused, free
            return self.pick([
                "CAST(g AS INT) = 37", "g::INT = 1", "CAST(f AS INT) = 37", "s IS TRUE",
                "g > 1", "i = 37 AND CAST(g AS INT) = 1",
                "CASE WHEN i = 37 THEN CAST(g AS INT) END = 1", "CAST(vi AS INT) > 1", "d > 'x'", "i = 37 AND g IS NOT FALSE",
                "CAST(n * 4 AS INT) = 1", "CAST(t * 1e300 AS BIGINT) = 0", "f * 1e308 > 1",
                "i = 37 AND 1 / (i - 37) > 0", "i = 37 AND ln(w) > 0", "nr * 1e300 > 1e301",
                "strptime(g, '%Y') > TIMESTAMP '2000-01-01'"])
        if "pn" in self.numeric and self.p(0.15):
            return self.pick(["pn = 37", "pn > 1e308", "pn < -1e308", "pn = 'NaN'",
                              "pn BETWEEN 0 AND 1e-300", "pn IS NULL", "isnan(pn)"])
        return self.pick([
            f"{self.pick(['i', 'w', 'n', 'e', 'vi', 'ub'])} = 37", "f > 36.5", "t > 0",
            "hf < 0", "isnan(f)", "f = 'nan'", "nr > 40", "r < 0.5", "dc BETWEEN -1 AND 37.5",
            "g = '37'", "s = 'a'", "s IN ('a', 'é')", "g LIKE '3%'", "g IS NULL",
            "s IS NOT NULL", "length(g) > 100", "b", "NOT b", "b IS NOT NULL",
            "d = DATE '2037-03-07'", "d > '2030-01-01'", "year(d) = 2037", "i BETWEEN 30 AND 40",
            "TRY_CAST(g AS INT) = 37", "i // 0 = 1", "i % 3 = 1", "abs(w) > 1e12",
            "coalesce(i, 37) = 37", "f IS NULL", "t = 0", "hf > 1e308", "ef <> 2.5",
            "i IN (37, 38)", "g IN ('37', 'x')", "ub > 1000000", "vi > 100", "s < 'b'"])

    def cond_u(self, depth: int = 1) -> str:
        if depth > 0 and self.p(0.2):
            return f"({self.cond_u(depth - 1)} {self.pick(['AND', 'OR'])} {self.cond_u(0)})"
        if not self.clean and self.p(0.2):
            return self.pick(["CAST(item AS INT) = 37", "qty = 37 AND CAST(item AS INT) = 1",
                              "item IS TRUE", "val * 1e308 > 1"])
        return self.pick(["qty = 37", "uid = 37", "item = '37'", "val > 36", "p = 'a'",
                          "item IS NULL", "big > 0", "isnan(val)", "qty BETWEEN 1 AND 50",
                          "item LIKE 'pen%'", "val IS NULL", "uid IN (1, 2, 37)"])

    def case(self, cls: str, sql: str, budget: dict[str, Any],
             bounds: dict[str, tuple[float, float]] | None = None) -> Case:
        tables = frozenset(m.lower() for m in re.findall(r"\b(?:FROM|JOIN)\s+([qu])\b", sql,
                                                         re.IGNORECASE)) or frozenset("qu")
        self.index += 1
        return Case(self.index, cls, sql, budget, tables, bounds or {})

    # -- quantiles ------------------------------------------------------------------------------
    def quantile_call(self) -> tuple[str, tuple[float, float] | None]:
        """One quantile call and, when it should be answered as it stands, its bounds."""
        wild = not self.clean and self.p(0.5)
        c = self.pick(self.numeric) if not wild or self.p(0.6) else self.pick(Q_ODD_ARGS)
        if self.clean and c == "sb":
            c = "i"
        q = self.pick(Q_OK) if not wild or self.p(0.5) else self.pick(Q_BAD)
        form = self.pick(Q_FUNCS[:13] if not wild else Q_FUNCS)
        if self.clean and ("DESC" in form or "DISTINCT" in form or form.startswith("QUANTILE(")):
            form = "MEDIAN({c})"
        text = form.format(c=c, q=q, cond=self.cond_q(0))
        plain = c in self.bounds and c != "sb" and q in Q_OK and "DISTINCT" not in form \
            and "[" not in form and "DESC" not in form
        return text, (self.bounds[c] if plain else None)

    def quantile(self, budget: dict[str, Any]) -> Case:
        self.start()
        if self.p(0.2):
            return self.quantile_clause()
        keys = self.r.sample(KEYS_Q[:5], self.pick([0, 0, 1, 1, 2]))
        items = [f"{k} AS k{j}" for j, k in enumerate(keys)]
        bounds = {}
        for j in range(self.pick([1, 1, 2, 3])):
            text, b = self.quantile_call()
            items.append(f"{text} AS m{j}")
            if b is not None:
                bounds[f"m{j}"] = b
        if self.p(0.3):
            items.append(self.pick(["COUNT(*) AS c", "SUM(i) AS si", "AVG(f) AS af",
                                    "COUNT(DISTINCT g) AS dg"]))
        sql = f"SELECT {', '.join(items)} FROM q"
        if self.p(0.5):
            sql += f" WHERE {self.cond_q()}"
        if keys:
            sql += " GROUP BY " + ", ".join(f"k{j}" for j in range(len(keys)))
        sql += self.tail(["m0"] + [f"k{j}" for j in range(len(keys))], len(items), 0.3)
        return self.case("quantile", sql, budget, bounds)

    def quantile_clause(self) -> Case:
        c = self.pick(["i", "f", "t", "hf", "nr", "r", "dc", "w", "n", "ef", "vi"]
                      + (["pn"] * 3 if "pn" in self.numeric else []))
        q = self.pick(Q_OK) if self.clean or self.p(0.5) else self.pick(Q_BAD)
        clamp = self.pick(CLAMPS[:3] + CLAMPS[6:7] + CLAMPS[13:] if self.clean else CLAMPS)
        call = (f"PERCENTILE_CONT({c}, {q}, contribution_bounds_per_row => {clamp})"
                if self.p(0.7) else
                f"ANON_PERCENTILE_CONT({c}, {q} CLAMPED BETWEEN "
                f"{clamp[1:-1].replace(', ', ' AND ', 1)})")
        opts = "epsilon=1, delta=1e-5" + self.pick(["", "", ", max_groups_contributed=1"])
        key = self.pick(["", "", "s, ", "b, "])
        sql = (f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS({opts}) {key}{call} AS m0 FROM q"
               + (f" WHERE {self.cond_q(0)}" if self.p(0.4) else "")
               + (f" GROUP BY {key[:-2]}" if key else ""))
        bounds = {}
        m = re.fullmatch(r"\((-?[\d.e]+), (-?[\d.e]+)\)", clamp)
        if m and q in Q_OK:
            lo, hi = float(m.group(1)), float(m.group(2))
            if lo <= hi:
                bounds["m0"] = (lo, hi)
        return self.case("quantile", sql, {}, bounds)

    # -- the outer query of one DP query --------------------------------------------------------
    def tail(self, names: list[str], width: int, prob: float = 0.5) -> str:
        out = ""
        if self.p(prob * 0.5):
            having = [f"{self.pick(names)} > {self.pick(['0', '1.5', '-1', '37'])}",
                      f"{self.pick(names)} IS NOT NULL", "COUNT(*) > 0",
                      f"{names[0]} BETWEEN 1 AND 100"]
            if not self.clean:
                having.append(f"{self.pick(names)} {self.pick(['=', '<', '<>'])} "
                              f"{self.pick(MIXED)}")
            out += " HAVING " + self.pick(having)
        if self.p(prob):
            positions = [str(self.r.randint(1 - (not self.clean), width + (not self.clean)))]
            terms = [self.pick(names + positions) +
                     self.pick(["", " DESC", " NULLS FIRST", " DESC NULLS LAST"])
                     for _ in range(self.pick([1, 1, 2]))]
            out += " ORDER BY " + ", ".join(terms)
        if self.p(prob * 0.6):
            limits = LIMITS[:4] if self.clean else LIMITS
            out += f" LIMIT {self.pick(limits)}"
            if self.p(0.3):
                out += f" OFFSET {self.pick(limits)}"
        return out

    AGGS: ClassVar[list[tuple[str, str]]] = [("COUNT(*)", "n"), ("SUM(i)", "si"), ("AVG(f)", "af"), ("MEDIAN(i)", "m"),
            ("SUM(hf)", "sh"), ("AVG(t)", "at"), ("STDDEV(dc)", "sd"), ("MIN(nr)", "lo"),
            ("COUNT(g)", "cg"), ("MAX(r)", "hr"), ("SUM(w)", "sw")]
    KEYS: ClassVar[list[str]] = ["s", "b", "g", "d", "CASE WHEN i = 37 THEN 'x' ELSE 'y' END", "s", "b",
            "CASE WHEN i = 37 THEN 37 ELSE 0 END", "i % 3", "s", "ub % 2"]

    def outer(self, budget: dict[str, Any]) -> Case:
        self.start()
        if self.p(0.2):
            return self.case("outer", self.outer_union(), budget)
        key = self.pick(self.KEYS) if self.p(0.85) else None
        aggs = self.r.sample(self.AGGS, self.pick([1, 2, 3]))
        names = [a for _, a in aggs]
        exprs = ([f"{key} AS k"] if key else []) + [f"{e} AS {a}" for e, a in aggs]
        for _ in range(self.pick([0, 1, 1, 2])):  # over the aggregates and the key themselves
            exprs.append(f"{self.outer_expr([e for e, _ in aggs], key)} AS x{len(exprs)}")
        distinct = "DISTINCT " if self.p(0.05) else ""
        sql = f"SELECT {distinct}{', '.join(exprs)} FROM q"
        if key == "i % 3" and self.p(0.7):
            sql += " WHERE i % 3 IN (0, 1, 2)"
        elif self.p(0.4):
            sql += f" WHERE {self.cond_q()}"
        if key:
            sql += " GROUP BY " + self.pick(["k", key, "1"])
        outs = names + (["k"] if key else [])
        if self.p(0.45):
            sql += f" HAVING {self.outer_pred(outs, 'k' if key else None)}"
        sql += self.tail(outs, len(exprs), 0.7).replace(" HAVING ", " AND ", 1 if
                                                        " HAVING " in sql else 0)
        return self.case("outer", sql, budget)

    def outer_pred(self, names: list[str], key: str | None) -> str:
        n = self.pick([x for x in names if x != "k"] or names)
        forms = ["{n} > {lit}", "{n} IS NOT NULL", "{n} BETWEEN 1 AND 100", "NOT ({n} < 0)",
                 "{n} > 0 AND {n} < 1000000", "{n} > {m}", "{n} * 2 > 1"]
        if not self.clean:
            forms += ["{n} > {mixed}", "{n} = {mixed}", "{n} IN (1, {mixed})",
                      "{n} BETWEEN {mixed} AND {mixed}", "{n} // 0 = 1", "{n}",
                      "CAST({n} AS UTINYINT) > 1", "sqrt({n}) > 1", "{n} > 0 AND {n} < 'a'",
                      "{n} < 'a' OR {n} > 0"]
        if key:
            forms += ["{k} IS NOT NULL", "{k} <> {lit}"]
            if not self.clean:
                forms += ["{k} = {mixed}", "{k} > 1", "CAST({k} AS INT) > 0", "{k} IS TRUE",
                          "{k} IN (1, 'a')", "{k} LIKE 'a%'",
                          "CAST({k} AS DATE) > DATE '2000-01-01'", "{k} < 1.5", "{k} = {n}"]
        return self.pick(forms).format(n=n, m=self.pick(names), k=key,
                                       lit=self.pick(["0", "1.5", "-1", "37", "'a'"]),
                                       mixed=self.pick(MIXED))

    def outer_expr(self, names: list[str], key: str | None) -> str:
        """An expression over the answer's columns (or, in the SELECT list of the DP query
        itself, over its aggregates and key): total ones, ones that fail on some noisy values
        (allowed after the charge), and, in a wild query, type errors."""
        forms = ["{n} * 2", "round({n}, 2)", "CAST({n} AS VARCHAR)", "{n} / {m}",
                 "greatest({n}, 0)", "-{n}", "{n} IS NULL", "abs({n})", "{n} - {m}",
                 "CASE WHEN {n} > 10 THEN 'big' ELSE 'small' END", "coalesce({n}, 0)",
                 "sqrt({n})", "ln({n})", "CAST({n} AS UTINYINT)", "CAST({n} AS INT)",
                 "{n} // 0", "{n} % 0", "exp({n})", "{n} * 9223372036854775807",
                 "CAST({n} * 1e30 AS BIGINT)", "CAST({n} AS DECIMAL(3,1))", "1 / ({n} - {m})"]
        if key:
            forms += ["CAST({k} AS VARCHAR) || '!'", "upper(CAST({k} AS VARCHAR))",
                      "length(CAST({k} AS VARCHAR))", "{k} IS NULL", "coalesce({k}, {k})",
                      "CAST({k} AS VARCHAR) || {n}", "CAST({k} AS INT)",
                      "TRY_CAST({k} AS DOUBLE) + {n}"]
        if not self.clean:
            forms += ["{n} + 'a'", "{n} || 'x'", "{n} > 'a'", "{n} = '1'",
                      "CASE WHEN {n} > 10 THEN 'big' ELSE 1 END", "coalesce({n}, 'none')",
                      "CAST({n} AS DATE)", "{n} BETWEEN 'a' AND 'b'", "random() * {n}",
                      "error('x')", "repeat('x', CAST({n} AS INT))", "{n} = [1]"]
            if key:
                forms += ["{k} > 1", "{k} = 1", "{k} LIKE 'a%'", "CAST({k} AS BOOLEAN)",
                          "CAST({k} AS DATE)", "{k} IN (1, 'a')", "{k} = {n}", "{k} < 1.5",
                          "{k} + 1", "{k} IS TRUE"]
        return self.pick(forms).format(n=self.pick(names), m=self.pick(names), k=key)

    def outer_union(self) -> str:
        aggs = self.r.sample(["COUNT(*)", "SUM(i)", "AVG(f)", "MEDIAN(i)", "MAX(f)"],
                             self.pick([1, 2]))
        labels = self.pick([["'a'", "'b'"], ["1", "2"], ["'x'", "2"], ["'e\u0301'", "'\u00e9'"],
                            ["NULL", "'z'"], ["DATE '2020-01-01'", "'2020-01-02'"]])
        keyed = self.p(0.4)
        branches = []
        for j, lab in enumerate(labels):
            agg_items = [f"{a} AS v{t}" for t, a in enumerate(aggs)] if j == 0 else \
                [self.pick([aggs[t], "COUNT(*)", "'text'"]) if self.p(0.15) else aggs[t]
                 for t in range(len(aggs))]
            key = "s AS k, " if keyed else ""
            where = f" WHERE {self.cond_q(0)}" if self.p(0.3) else ""
            branches.append(f"SELECT {lab} AS lab, {key}{', '.join(agg_items)} FROM q{where}"
                            + (" GROUP BY k" if keyed else ""))
        sql = " UNION ALL ".join(branches)
        names = ["lab", "v0"] + (["k"] if keyed else [])
        if self.p(0.5):
            sql += " ORDER BY " + self.pick(names + ["1", "2", "9", "v0 DESC", "lab || 'x'"])
        if self.p(0.4):
            sql += f" LIMIT {self.pick(LIMITS)}"
        return sql

    # -- outer queries over DP subqueries -------------------------------------------------------
    INNERS: ClassVar[list[tuple[str, dict[str, str]]]] = [
        ("SELECT COUNT(*) AS n FROM q{w}", {"n": "int"}),
        ("SELECT s, COUNT(*) AS n, SUM(i) AS si FROM q{w} GROUP BY s",
         {"s": "str", "n": "int", "si": "int"}),
        ("SELECT b, AVG(f) AS af, MEDIAN(i) AS m FROM q{w} GROUP BY b",
         {"b": "bool", "af": "float", "m": "int"}),
        ("SELECT g, COUNT(*) AS n FROM q{w} GROUP BY g", {"g": "str", "n": "int"}),
        ("SELECT MIN(f) AS lo, MAX(f) AS hi, QUANTILE_CONT(t, 0.5) AS mt FROM q{w}",
         {"lo": "float", "hi": "float", "mt": "float"}),
        ("SELECT s, SUM(hf) AS sh, AVG(nr) AS an FROM q{w} GROUP BY s",
         {"s": "str", "sh": "float", "an": "float"}),
        ("SELECT p, COUNT(*) AS n, AVG(qty) AS aq FROM u{w} GROUP BY p",
         {"p": "str", "n": "int", "aq": "float"}),
        (("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) p, COUNT(*) AS n, "
          "SUM(val, contribution_bounds_per_group => (0, 5)) AS sv FROM u{w} GROUP BY p"),
         {"p": "str", "n": "int", "sv": "float"}),
        (("SELECT CASE WHEN i = 37 THEN 'hit' ELSE 'miss' END AS s, COUNT(*) AS n FROM q{w} "
          "GROUP BY 1"), {"s": "str", "n": "int"}),
        ("SELECT d, COUNT(*) AS n FROM q{w} GROUP BY d", {"d": "date", "n": "int"}),
    ]

    def inner(self, clause: bool | None = None) -> tuple[str, dict[str, str]]:
        pool = [x for x in self.INNERS if clause is None or ("DIFFERENTIAL" in x[0]) == clause]
        text, cols = self.pick(pool)
        table = "u" if " FROM u" in text else "q"
        w = ""
        if self.p(0.4):
            w = f" WHERE {self.cond_u(0) if table == 'u' else self.cond_q(0)}"
        return text.format(w=w), cols

    def nested(self, budget: dict[str, Any]) -> Case:
        self.start()
        shape = self.r.randrange(10)
        in1, c1 = self.inner(shape == 8)
        names = list(c1)
        key = names[0] if len(c1) > 1 and c1[names[0]] != "int" else None
        nums = [c for c in names if c != key] or names
        ex = ", ".join(f"{self.outer_expr(nums, key) if self.p(0.5) else self.pick(names)} "
                       f"AS o{j}" for j in range(self.pick([1, 2])))
        where = f" WHERE {self.outer_expr(nums, key)}" if self.p(0.3) else ""
        tail = self.tail(names, len(names), 0.4).replace(" HAVING", " AND" if where else
                                                         " WHERE")
        if shape == 0:
            sql = f"SELECT {ex} FROM ({in1}){self.pick(['', ' a', ' AS a'])}{where}{tail}"
        elif shape == 1:
            in2, c2 = self.inner(False)
            m2 = self.pick(list(c2))
            sql = f"SELECT a.{self.pick(nums)} {self.pick(['-', '/', '+', '>', '='])} b.{m2} AS d" \
                  f" FROM ({in1}) a, ({in2}) b"
        elif shape == 2:
            tail = self.tail([f"a.{c}" for c in names], len(names), 0.4).replace(
                " HAVING", " WHERE")
            sql = f"SELECT * FROM ({in1}) a JOIN ({in1}) b USING ({names[0]}){tail}"
        elif shape == 3:
            in2, _ = self.inner(False)
            tail = self.tail([f"a.{c}" for c in names], len(names), 0.4).replace(
                " HAVING", " WHERE")
            sql = f"WITH a AS ({in1}), b AS ({in2}) SELECT a.*, b.* FROM a, b{tail}"
        elif shape == 4:
            sql = f"WITH a AS ({in1}), r AS (SELECT {ex} FROM a{where}) SELECT * FROM r"
        elif shape == 5:
            s2, _ = self.pick(self.INNERS[:1] + self.INNERS[4:5])
            op = self.pick(["-", "/", "*", "+", "||", ">", "= 'a' AND 1 ="])
            first = self.pick([f"(SELECT COUNT(*) FROM q WHERE {self.cond_q(0)})",
                               "(SELECT COUNT(*) AS n FROM u) * 1.0", "(SELECT MEDIAN(i) FROM q)"])
            sql = f"SELECT {first} {op} ({s2.format(w='')}) AS x"
        elif shape == 6:
            in2, _ = self.inner(False)
            sql = f"SELECT * FROM ({in1}) UNION ALL SELECT * FROM ({in2 if self.p(0.3) else in1})" \
                  + self.tail(["1", "2"], 2, 0.5).replace(" HAVING", " ORDER BY 1, ")
        elif shape == 7:
            agg = self.pick(["SUM({n})", "MAX({n})", "COUNT(*)", "AVG({n})", "MIN({n})",
                             "string_agg(CAST({n} AS VARCHAR), ',')", "SUM({n}) / COUNT(*)"])
            group = f" GROUP BY {key}" if key and self.p(0.4) else ""
            sel = f"{key}, " if group else ""
            sql = f"SELECT {sel}{agg.format(n=self.pick(nums))} AS t FROM ({in1}) a{group}"
        elif shape == 8:
            in2, _ = self.inner(True)
            sql = f"{in1} UNION ALL {in2}" + self.pick(["", " ORDER BY 1", " ORDER BY 2 DESC",
                                                        " LIMIT 1", " ORDER BY 9"])
        else:
            sql = self.pick([
                f"SELECT * FROM ({in1}) a, q",
                f"SELECT * FROM ({in1}) a WHERE {key or 'n'} IN (SELECT s FROM q)", "SELECT * FROM (SELECT * FROM q) a",
                f"SELECT * FROM (SELECT * FROM ({in1}))", f"SELECT * FROM ({in1}) a, u",
                f"SELECT * FROM ({in1}) a JOIN (SELECT i FROM q) b ON TRUE",
                f"WITH a AS ({in1}) SELECT * FROM a, (SELECT COUNT(*) AS n2 FROM u) b",
                f"SELECT * FROM ({in1}) a LIMIT (SELECT COUNT(*) FROM q)"])
        return self.case("nested", sql, budget)

    # -- BigQuery's clause ----------------------------------------------------------------------
    OPTIONAL: ClassVar[dict[str, tuple[list[str], list[str]]]] = {  # option: (values of a clean query, values of a wild one)
        "max_groups_contributed": (["1", "2"], ["3", "0", "-1", "1.5", "'a'", "NULL",
                                                "9223372036854775808"]),
        "max_rows_contributed": (["1", "2", "3"], ["4", "0", "-1", "2.5"]),
        "min_privacy_units_per_group": (["1", "2", "5", "1e9"],
                                        ["0", "-1", "1.5", "9223372036854775807"]),
        "privacy_unit_column": (["uid"], ["item", "nope", "\"uid\"", "`uid`"]),
        "group_selection_strategy": (["PUBLIC_GROUPS"], ["LAPLACE_THRESHOLD",
                                                         "'PUBLIC_GROUPS'"]),
        "kappa": (["1", "2"], ["0"]), "bogus": ([], ["1"])}
    BQ_CLAMPS: ClassVar[dict[str, list[str]]] = {"qty": ["(0, 10)", "(0, 100)", "(3, 3)", "(5, 50)"],
                 "val": ["(-1, 1)", "(0, 5)", "(-10, 10)", "(0.5, 2.5)"],
                 "big": ["(0, 10)", "(-1000000000000000, 1000000000000000)", "(-5, 5)"],
                 "i": ["(0, 10)", "(0, 100)", "(37, 37)"], "f": ["(-1, 1)", "(0, 1000)"],
                 "t": ["(-1e-300, 1e-300)", "(0, 1e-300)"], "dc": ["(-1, 1)", "(0, 100)"],
                 "w": ["(0, 10)", "(-1000000000000, 1000000000000)"],
                 "pn": ["(-1, 1)", "(0, 1000000)", "(-1e-300, 1e-300)"]}

    def options(self, table: str, unit_form: bool) -> str:
        eps = ["1", "1", "0.5", "10"] if self.clean else ["1e-3", "1e3", "0", "-1", "1e-300",
                                                          "'1'", "1"]
        opts = [f"epsilon={self.pick(eps)}"]
        if self.p(0.8):
            deltas = ["1e-5", "1e-6"] if self.clean else ["0", "1e-300", "1", "0.5", "1e-5"]
            opts.append(f"delta={self.pick(deltas)}")
        for name, (clean, wild) in self.OPTIONAL.items():
            values = clean if self.clean or not self.p(0.4) else wild
            if values and self.p(0.05 if name in ("kappa", "bogus") else 0.25):
                if name == "privacy_unit_column" and table == "q" and self.clean:
                    continue
                if name == "group_selection_strategy" and self.clean and not unit_form:
                    continue
                opts.append(f"{name}={self.pick(values)}")
        if not self.clean and self.p(0.05):
            opts.append(self.pick(opts))  # an option twice
        self.r.shuffle(opts)
        return ", ".join(opts)

    def bq_agg(self, table: str) -> str:
        num = self.pick(["qty", "val", "big"] if table == "u" else
                        ["i", "f", "t", "dc", "w"] + (["pn"] if "pn" in self.numeric else []))
        b = self.pick(self.BQ_CLAMPS[num] if self.clean or self.p(0.5) else CLAMPS)
        lo_hi = b[1:-1].replace(", ", " AND ", 1)
        forms = [
            "COUNT(*)", f"COUNT({num})", f"SUM({num}, contribution_bounds_per_group => {b})",
            f"SUM({num})", f"AVG({num}, contribution_bounds_per_group => {b})", f"AVG({num})",
            "ANON_COUNT(*)", f"ANON_SUM({num} CLAMPED BETWEEN {lo_hi})",
            f"ANON_AVG({num} CLAMPED BETWEEN {lo_hi})"]
        if table == "q":  # (per-row bounds: row-level tables)
            forms += [f"VAR_POP({num}, contribution_bounds_per_row => {b})",
                      f"STDDEV_POP({num}, contribution_bounds_per_row => {b})",
                      (f"PERCENTILE_CONT({num}, {self.pick(Q_OK[:8])}, "
                       f"contribution_bounds_per_row => {b})"),
                      f"ANON_VAR_POP({num} CLAMPED BETWEEN {lo_hi})",
                      f"ANON_STDDEV_POP({num} CLAMPED BETWEEN {lo_hi})",
                      f"ANON_PERCENTILE_CONT({num}, 0.5 CLAMPED BETWEEN {lo_hi})"]
        if not self.clean:
            forms += [f"COUNT({num}, contribution_bounds_per_group => {b})",
                      f"COUNT(*, contribution_bounds_per_group => {b})",
                      f"ANON_QUANTILES({num}, 4 CLAMPED BETWEEN {lo_hi})",
                      f"SUM({num}, contribution_bounds_per_row => {b})",
                      f"VAR_POP({num}, contribution_bounds_per_group => {b})",
                      f"VAR_POP({num}, contribution_bounds_per_row => {b})",
                      f"PERCENTILE_CONT({num}, 0.5, contribution_bounds_per_row => {b})"]
        return self.pick(forms)

    def groups_join(self, key: str) -> str:
        lists = [["'pen'", "'book'"], ["'pen'", "'pen'"], ["'Pen'", "'pen'"], ["'37'"],
                 ["'e\u0301'", "'\u00e9'"], ["'a'", "'b'", "'c'"], ["''"],
                 [f"'{k}'" for k in range(300)], ["'pen'", "'pencil'", "'book'", "'37'"]]
        if not self.clean:
            lists += [["NULL", "'pen'"], [], ["1", "2"], ["'pen'", "NULL"]]
        values = self.pick(lists)
        kind = "RIGHT OUTER JOIN" if self.clean else self.pick(
            ["RIGHT OUTER JOIN", "RIGHT JOIN", "LEFT JOIN", "JOIN", "FULL JOIN"])
        distinct = "DISTINCT " if self.clean or self.p(0.5) else ""
        return f" {kind} (SELECT {distinct}{key} FROM UNNEST([{', '.join(values)}])) USING ({key})"

    def bigquery(self, budget: dict[str, Any]) -> Case:
        self.start()
        table = "u" if self.p(0.75) else "q"
        keys = ["item", "p", "item"] if table == "u" else ["s", "g", "b"]
        key = self.pick(keys) if self.p(0.75) else None
        aggs = [f"{self.bq_agg(table)} AS a{j}" for j in range(self.pick([1, 1, 2, 3]))]
        join = key == "item" and self.p(0.35)
        spelling = "DIFFERENTIAL_PRIVACY" if self.p(0.9) else "ANONYMIZATION"
        opts = f" OPTIONS({self.options(table, join)})" if self.clean or self.p(0.9) else ""
        items = ([f"{key}"] if key else []) + aggs
        sql = f"SELECT WITH {spelling}{opts} {', '.join(items)} FROM {table}"
        if join:
            sql += self.groups_join("item")
        if self.p(0.3):
            sql += f" WHERE {self.cond_u(0) if table == 'u' else self.cond_q(0)}"
        if key:
            sql += f" GROUP BY {key}"
        sql += self.tail(["a0"] + ([key] if key else []), len(items), 0.3)
        return self.case("bigquery", sql, {} if self.clean or self.p(0.7) else budget)
