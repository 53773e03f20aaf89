"""Reader for the annotated example files in ``sql_examples/`` (see README.md there).

An example file is a small session: one or more SQL queries, each ending with ``;`` at the end of
a line and preceded by a header of ``-- key: value`` comment lines. A header line that is not
``-- key: value`` with a known key, and not an indented continuation of the previous key, is an
error: a typo in an expectation must fail loudly, never be skipped.

This module is used by ``tests/test_sql_examples.py`` and by ``sql_examples/run_example.py``.
It imports nothing from privplan except the public API.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import privplan as pp

EXAMPLES_DIR = Path(__file__).resolve().parent
DATA_DIR = EXAMPLES_DIR / "data"
PUMS_CSV = DATA_DIR / "PUMS.csv"
PUMS_YAML = DATA_DIR / "PUMS.yaml"

# Keys that may appear only in the first query's header (they describe the whole session).
SESSION_KEYS = ("dataset", "session-budget", "neighbourhood")
# Keys of every query's header.
QUERY_KEYS = (
    "title",
    "budget",
    "expect-mechanisms",
    "expect-partition",
    "expect-query-cost",
    "expect-marginal",
    "expect-mechanism-costs",
    "expect-total",
    "expect-rows",
    "expect-error",
    "why",
    "oracle",
)
KNOWN_KEYS = SESSION_KEYS + QUERY_KEYS
REQUIRED = ("title", "budget", "why")
REQUIRED_UNLESS_ERROR = (
    "expect-mechanisms",
    "expect-partition",
    "expect-query-cost",
    "expect-marginal",
)
ONLY_WITHOUT_ERROR = REQUIRED_UNLESS_ERROR + (
    "expect-mechanism-costs",
    "expect-rows",
    "oracle",
)
DATASETS = ("demo", "patients", "pums")
"""demo: the demo database, one visit per privacy unit; patients: the same database with the
patient as the privacy unit (``demo/policy_patients.yaml``); pums: the SmartNoise PUMS sample."""
NEIGHBOURHOODS = ("add_remove", "replace")
ERROR_CLASSES = {
    "UnsupportedQueryError": pp.UnsupportedQueryError,
    "PolicyError": pp.PolicyError,
    "ParseError": pp.ParseError,
    "BudgetExceededError": pp.BudgetExceededError,
}

_KEY_RE = re.compile(r"^--\s?([a-z][a-z-]*):\s*(.*)$")
_CONTINUATION_RE = re.compile(r"^--(\s{2,}.*)?$")
_BUDGET_KINDS = {"PureDP": pp.PureDP, "ApproxDP": pp.ApproxDP, "ZCDP": pp.ZCDP, "GDP": pp.GDP}
_PARAM_NAMES = ("epsilon", "delta", "rho", "mu")


class ExampleFormatError(ValueError):
    """A malformed example file (the message says which file and line)."""


@dataclass
class Query:
    index: int  # 1-based position in the file
    line: int  # line of the first header line
    sql: str  # without the final ';'
    headers: dict[str, str]

    @property
    def title(self) -> str:
        return self.headers["title"]

    @property
    def expects_error(self) -> bool:
        return "expect-error" in self.headers

    def budget_kwargs(self) -> dict[str, Any]:
        """The query's budget as keyword arguments with exact numbers (``epsilon=Fraction(1)``):
        the session refuses text."""
        where = f"query {self.index} budget"
        if self.headers["budget"].strip() == "in-query":
            return {}  # a BigQuery clause (OPTIONS(epsilon=...)) carries the budget
        return {k: number(v, where=where)
                for k, v in parse_params(self.headers["budget"], where=where).items()}

    def error(self) -> tuple[type[Exception], str]:
        text = self.headers["expect-error"]
        name, sep, fragment = text.partition(":")
        name = name.strip()
        if not sep or name not in ERROR_CLASSES or not fragment.strip():
            raise ExampleFormatError(
                f"query {self.index}: expect-error must be '<ErrorClass>: <fragment>' with a class "
                f"in {sorted(ERROR_CLASSES)}, got {text!r}")
        return ERROR_CLASSES[name], fragment.strip()

    def partitions(self) -> set[str | None]:
        out: set[str | None] = set()
        for part in self.headers["expect-partition"].split("|"):
            p = normalise_sql(part)
            out.add(None if p == "none" else p)
        return out


@dataclass
class Example:
    path: Path
    dataset: str
    session_budget: Any
    neighbourhood: str
    queries: list[Query] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name

    def expected_value(self, text: str, where: str) -> Any:
        return privacy_value(text, type(self.session_budget), where=f"{self.name}: {where}")


def normalise_sql(text: str) -> str:
    """Case- and whitespace-insensitive form of a short SQL fragment (for partitions)."""
    return " ".join(text.replace("\n", " ").split()).lower()


def parse_params(text: str, *, where: str) -> dict[str, str]:
    """``epsilon=1.0, delta=1e-6`` -> {"epsilon": "1.0", "delta": "1e-6"} (values stay text)."""
    out: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or name not in _PARAM_NAMES or not value or name in out:
            raise ExampleFormatError(
                f"{where}: expected 'name=value' pairs with names in {_PARAM_NAMES}, got {text!r}")
        out[name] = value
    return out


def number(text: str, *, where: str) -> Any:
    """An exact Fraction ('0.5', '1/3', '1e-6'), or a float for 'sqrt(x)' (GDP only)."""
    m = re.fullmatch(r"sqrt\((.+)\)", text.strip())
    if m:
        return math.sqrt(float(Fraction(m.group(1).strip())))
    try:
        return Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise ExampleFormatError(f"{where}: not a number: {text!r}") from None


def privacy_value(text: str, kind: type, *, where: str) -> Any:
    """An expected cost in the session's privacy definition.

    ``epsilon=1`` means ``PureDP(1)`` in a PureDP session and ``ApproxDP(1, 0)`` in an ApproxDP
    session; ``epsilon=1, delta=1e-6`` is ``ApproxDP``; ``rho=`` is zCDP; ``mu=`` is GDP (GDP
    values may be written ``sqrt(2)``; they are compared with a relative tolerance).
    """
    params = parse_params(text, where=where)
    nums = {k: number(v, where=where) for k, v in params.items()}
    if kind is pp.PureDP and set(nums) == {"epsilon"}:
        return pp.PureDP(nums["epsilon"])
    if kind is pp.ApproxDP and set(nums) <= {"epsilon", "delta"} and "epsilon" in nums:
        return pp.ApproxDP(nums["epsilon"], nums.get("delta", 0))
    if kind is pp.ZCDP and set(nums) == {"rho"}:
        return pp.ZCDP(nums["rho"])
    if kind is pp.GDP and set(nums) == {"mu"}:
        return pp.GDP(nums["mu"])
    raise ExampleFormatError(f"{where}: {text!r} is not a {kind.__name__} value")


def session_budget(text: str, *, where: str) -> Any:
    m = re.fullmatch(r"\s*(PureDP|ApproxDP|ZCDP|GDP)\(([^()]*)\)\s*", text)
    if not m:
        raise ExampleFormatError(
            f"{where}: session-budget must look like PureDP(10), ApproxDP(10, 1e-5), ZCDP(5) or "
            f"GDP(3), got {text!r}")
    args = [a.strip() for a in m.group(2).split(",")]
    expected = 2 if m.group(1) == "ApproxDP" else 1
    if len(args) != expected or not all(args):
        raise ExampleFormatError(f"{where}: {m.group(1)} takes {expected} argument(s): {text!r}")
    return _BUDGET_KINDS[m.group(1)](*[Fraction(a) for a in args])


def parse_file(path: str | Path) -> Example:
    """Parse one example file; raise :class:`ExampleFormatError` on anything malformed."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    raw: list[tuple[int, dict[str, str], str]] = []
    headers: dict[str, str] = {}
    last_key: str | None = None
    header_line = 0
    sql_lines: list[str] = []

    def fail(lineno: int, msg: str) -> ExampleFormatError:
        return ExampleFormatError(f"{path.name}, line {lineno}: {msg}")

    for lineno, text in enumerate(lines, start=1):
        stripped = text.strip()
        if stripped.startswith("--"):
            if sql_lines:
                raise fail(lineno, "comment inside a query; end the query with ';' first")
            m = _KEY_RE.match(stripped)
            if m and m.group(1) in KNOWN_KEYS and not _CONTINUATION_RE.match(stripped):
                key, value = m.group(1), m.group(2).strip()
                if key in headers:
                    raise fail(lineno, f"duplicate header key {key!r}")
                if not headers:
                    header_line = lineno
                headers[key] = value
                last_key = key
            elif m and not _CONTINUATION_RE.match(stripped):
                raise fail(lineno, f"unknown header key {m.group(1)!r} (known: {KNOWN_KEYS})")
            elif _CONTINUATION_RE.match(stripped):
                if last_key is None:
                    raise fail(lineno, "continuation line without a header key before it")
                more = stripped[2:].strip()
                if more:
                    headers[last_key] = (headers[last_key] + " " + more).strip()
            else:
                raise fail(lineno, f"malformed header line {stripped!r}: write '-- key: value' "
                                   "or an indented continuation '--    text'")
            continue
        if not stripped:
            if sql_lines:
                sql_lines.append("")
            continue
        if not headers:
            raise fail(lineno, "SQL without a header before it")
        sql_lines.append(text.rstrip())
        if stripped.endswith(";"):
            sql = "\n".join(sql_lines).strip()[:-1].strip()
            if not sql:
                raise fail(lineno, "empty query")
            raw.append((header_line, headers, sql))
            headers, last_key, sql_lines = {}, None, []
    if sql_lines:
        raise fail(len(lines), "the last query does not end with ';'")
    if headers:
        raise fail(len(lines), "header without a query after it")
    if not raw:
        raise fail(1, "no queries")

    first = raw[0][1]
    if "dataset" not in first or first["dataset"] not in DATASETS:
        raise fail(raw[0][0], f"the first query needs 'dataset:' one of {DATASETS}")
    budget = session_budget(first.get("session-budget", "PureDP(10)"),
                            where=f"{path.name}, line {raw[0][0]}")
    neighbourhood = first.get("neighbourhood", "add_remove")
    if neighbourhood not in NEIGHBOURHOODS:
        raise fail(raw[0][0], f"neighbourhood must be one of {NEIGHBOURHOODS}")
    example = Example(path, first["dataset"], budget, neighbourhood)
    for i, (line, hdr, sql) in enumerate(raw, start=1):
        if i > 1:
            for key in SESSION_KEYS:
                if key in hdr:
                    raise fail(line, f"{key!r} belongs in the first query's header only")
        for key in REQUIRED:
            if key not in hdr:
                raise fail(line, f"query {i} has no {key!r} header")
        if "expect-error" in hdr:
            for key in ONLY_WITHOUT_ERROR:
                if key in hdr:
                    raise fail(line, f"query {i}: {key!r} makes no sense with expect-error")
        else:
            for key in REQUIRED_UNLESS_ERROR:
                if key not in hdr:
                    raise fail(line, f"query {i} has no {key!r} header")
            if not re.fullmatch(r"\d+", hdr["expect-mechanisms"]):
                raise fail(line, f"query {i}: expect-mechanisms must be an integer")
            if "expect-rows" in hdr and not re.fullmatch(r"\d+", hdr["expect-rows"]):
                raise fail(line, f"query {i}: expect-rows must be an integer")
        q = Query(i, line, sql, hdr)
        # validate every value now, so a malformed header fails before anything runs
        q.budget_kwargs()
        for key in ("expect-query-cost", "expect-marginal", "expect-total"):
            if key in hdr:
                example.expected_value(hdr[key], f"query {i} {key}")
        if "expect-mechanism-costs" in hdr:
            for part in hdr["expect-mechanism-costs"].split("|"):
                example.expected_value(part, f"query {i} expect-mechanism-costs")
        if "expect-error" in hdr:
            try:
                q.error()
            except ExampleFormatError as err:
                raise fail(line, str(err)) from None
        example.queries.append(q)
    return example


def example_files() -> list[Path]:
    return sorted(EXAMPLES_DIR.glob("*.sql"))


def _with_neighbourhood(policy: pp.Policy, neighbourhood: str) -> pp.Policy:
    """``policy`` with every private table in ``neighbourhood`` (public tables have none)."""
    if neighbourhood == "add_remove":
        return policy
    d = policy.to_dict()
    for table in d["tables"].values():
        if not table.get("public"):
            table["neighbourhood"] = neighbourhood
    return pp.Policy.from_dict(d)


def demo_policy(neighbourhood: str = "add_remove") -> pp.Policy:
    from privplan.demo.data import demo_policy_path

    return _with_neighbourhood(pp.Policy.from_yaml(demo_policy_path()), neighbourhood)


def patients_policy(neighbourhood: str = "add_remove") -> pp.Policy:
    """The demo database's policy with the patient as the privacy unit."""
    path = Path(pp.__file__).resolve().parent / "demo" / "policy_patients.yaml"
    return _with_neighbourhood(pp.Policy.from_yaml(path), neighbourhood)


def pums_policy(neighbourhood: str = "add_remove") -> pp.Policy:
    return _with_neighbourhood(pp.Policy.from_smartnoise_yaml(PUMS_YAML), neighbourhood)


def open_session(example: Example, demo_db: str | Path | None = None) -> pp.Session:
    """A fresh session for ``example`` (the demo database must exist for datasets 'demo' and
    'patients')."""
    if example.dataset in ("demo", "patients"):
        if demo_db is None:
            raise ValueError("the demo dataset needs the path of a demo database")
        policy = (demo_policy(example.neighbourhood) if example.dataset == "demo"
                  else patients_policy(example.neighbourhood))
        return pp.connect(demo_db, policy=policy, budget=example.session_budget)
    sess = pp.connect(":memory:", policy=pums_policy(example.neighbourhood),
                      budget=example.session_budget)
    sess.register("PUMS", PUMS_CSV)
    return sess
