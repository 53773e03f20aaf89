"""The report spec: the YAML file that names a report's database, policy, budget and queries.

:class:`ReportSpec` (and its :class:`ReportQuery` entries) is parsed and validated here, before
anything is planned or charged, so a mistyped key, an unknown objective or a budget of the wrong
shape is refused with the spec's own words; :func:`parse_budget` and :func:`budget_dict` convert
budgets between the spec's mappings of a definition's keywords (``{epsilon, delta}``...) and privacy values. The format
itself is described in :mod:`privplan.report`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from privplan.accounting.definitions import (
    KINDS,
    as_fraction,
    budget_keywords,
    build,
    join_or,
    keyword_menu,
    kind_for,
)
from privplan.errors import PolicyError
from privplan.policy import Policy, load_strict_yaml

_SPEC_KEYS = ("name", "description", "database", "register", "policy", "policy_format", "budget",
              "objective", "composition", "delta_prime", "ledger", "outputs", "intervals",
              "queries")
_QUERY_KEYS = ("name", "sql", "weight", "target_error")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
_OUTPUTS = ("parquet", "csv")
_REQUIRED = {  # why each required key is, and an example of it
    "database": ("it names the data the queries read", "database: hospital.duckdb"),
    "policy": ("it says which tables are private and how far each value may reach",
               "policy: policy.yaml"),
    "budget": ("it is the whole privacy budget the report may spend", "budget: {epsilon: 1}"),
    "queries": ("they are what the report releases",
                "queries: [{name: n, sql: SELECT COUNT(*) AS n FROM visits}]"),
}


@dataclass(frozen=True)
class ReportQuery:
    """One named query of a report."""

    name: str
    sql: str
    weight: float = 1.0
    target_error: float | Mapping[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "sql": self.sql, "weight": self.weight}
        if self.target_error is not None:
            out["target_error"] = (dict(self.target_error)
                                   if isinstance(self.target_error, Mapping) else self.target_error)
        return out


@dataclass(frozen=True)
class ReportSpec:
    """A parsed report spec; see the module docstring for the YAML format."""

    name: str
    database: str
    policy: str | Mapping[str, Any]
    budget: Any
    queries: tuple[ReportQuery, ...]
    policy_format: str = "privplan"
    objective: str = "weighted_sum"
    composition: str = "basic"
    delta_prime: Fraction | None = None
    register: Mapping[str, str] = field(default_factory=dict)
    ledger: str | None = None
    outputs: tuple[str, ...] = _OUTPUTS
    intervals: bool = True
    description: str = ""
    source: str | None = None  # the spec file
    sha256: str | None = None  # of the spec file's text

    def ledger_path(self, out_dir: str | Path | None = None) -> Path:
        """The ledger a run charges: the spec's ``ledger``, else one beside the spec file
        (named after it without its extension: ``monthly.yaml`` -> ``monthly.ledger.sqlite``),
        so running the report again, into a new directory, charges the same budget. A spec without a file (built in Python) uses ``OUT/ledger.sqlite``."""
        if self.ledger:
            return Path(self.ledger)
        if self.source:
            src = Path(self.source)
            return src.with_name(src.stem + ".ledger.sqlite")
        if out_dir is None:
            raise PolicyError("this report spec has no file and no `ledger`: name one")
        return Path(out_dir) / "ledger.sqlite"

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, *, database: str | None = None,
             ledger: str | None = None) -> ReportSpec:
        """Read a spec file; ``database``/``ledger`` override the file's (paths as given)."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as err:
            raise PolicyError(f"cannot read the report spec '{p}': {err.strerror}") from None
        try:  # (duplicate keys refused, as in policies: `budget:` twice kept the last one)
            data = load_strict_yaml(text)
        except PolicyError as err:
            raise PolicyError(f"report spec '{p}': {err}") from None
        spec = cls.from_dict(data, base_dir=p.resolve().parent, default_name=p.stem)
        spec = replace(spec, source=str(p), sha256=hashlib.sha256(text.encode()).hexdigest())
        if database is not None:
            spec = replace(spec, database=str(database))
        if ledger is not None:
            spec = replace(spec, ledger=str(ledger))
        return spec

    @classmethod
    def from_dict(cls, data: Any, *, base_dir: str | Path | None = None,
                  default_name: str = "report") -> ReportSpec:
        """Validate a spec mapping; relative paths are taken from ``base_dir``."""
        if not isinstance(data, Mapping):
            raise PolicyError("a report spec must be a mapping with keys "
                              f"{', '.join(_SPEC_KEYS)}")
        _check_keys(data, _SPEC_KEYS, "report spec")
        base = Path(base_dir) if base_dir is not None else None

        def path(value: Any, what: str) -> str:
            if not isinstance(value, str) or not value:
                raise PolicyError(f"report spec: `{what}` must be a path")
            if value == ":memory:" or base is None or Path(value).is_absolute():
                return value
            return str(base / value)

        for key in ("database", "policy", "budget", "queries"):
            if key not in data:
                why, example = _REQUIRED[key]
                raise PolicyError(f"report spec: `{key}` is missing, and it is required: {why}. "
                                  f"Fix: add e.g. `{example}`.")
        policy = data["policy"]
        if not isinstance(policy, Mapping):
            policy = path(policy, "policy")
        policy_format = data.get("policy_format", "privplan")
        if policy_format not in ("privplan", "smartnoise"):
            raise PolicyError(f"report spec: `policy_format` is {policy_format!r}: privplan reads "
                              "its own policy format or SmartNoise SQL metadata, no other. Fix: "
                              "write `policy_format: privplan` or `policy_format: smartnoise`.")
        register = data.get("register") or {}
        if not isinstance(register, Mapping):
            raise PolicyError("report spec: `register` maps table names to CSV/Parquet paths")
        objective = data.get("objective", "weighted_sum")
        if objective not in ("max", "weighted_sum"):
            raise PolicyError(f"report spec: `objective` is {objective!r}, which the allocation "
                              "does not know: it minimises the weighted sum (weighted_sum) or the "
                              "largest (max) of the queries' relative variances. Fix: write "
                              "`objective: weighted_sum` (the default) or `objective: max`.")
        composition = data.get("composition", "basic")
        if composition not in ("basic", "advanced", "pld"):
            raise PolicyError(f"report spec: `composition` must be basic, advanced or pld, got "
                              f"{composition!r}: a report's total is composed by one of these "
                              "three rules only. Fix: write `composition: basic` (the default), "
                              "`advanced` or `pld`.")
        budget = parse_budget(data["budget"])
        if composition in ("advanced", "pld") and budget.delta_or_none() is None:
            raise PolicyError(f"report spec: `composition: {composition}` needs an (ε, δ) budget "
                              "({epsilon: ..., delta: ...}): it spends a little δ to compose ε "
                              "more tightly, and this `budget` has no δ. Fix: write e.g. "
                              "`budget: {epsilon: 1, delta: 1e-6}`, or `composition: basic`.")
        dp = data.get("delta_prime")
        delta_prime = _fraction(dp, "delta_prime") if dp is not None else None
        outputs = data.get("outputs", list(_OUTPUTS))
        if isinstance(outputs, str):
            outputs = [outputs]
        if not isinstance(outputs, list) or not outputs or any(o not in _OUTPUTS for o in outputs):
            raise PolicyError(f"report spec: `outputs` is {outputs!r}: `outputs` is a list of "
                              "parquet and/or csv, the only formats results are written in. Fix: "
                              "write `outputs: [parquet, csv]` (the default) or `outputs: [csv]`.")
        intervals = data.get("intervals", True)
        if not isinstance(intervals, bool):
            raise PolicyError(f"report spec: `intervals` is true (each noisy column followed by "
                              f"its 95% interval, the default) or false, got {intervals!r}")
        return cls(
            name=str(data.get("name") or default_name),
            description=str(data.get("description") or ""),
            database=path(data["database"], "database"),
            policy=policy, policy_format=policy_format, budget=budget,
            queries=_parse_queries(data["queries"]), objective=objective,
            composition=composition, delta_prime=delta_prime,
            register={str(k): path(v, f"register.{k}") for k, v in register.items()},
            ledger=path(data["ledger"], "ledger") if data.get("ledger") else None,
            outputs=tuple(dict.fromkeys(outputs)), intervals=intervals,
        )

    def load_policy(self) -> Policy:
        if self.policy_format == "smartnoise":
            return Policy.from_smartnoise_yaml(self.policy)
        if isinstance(self.policy, Mapping):
            return Policy.from_dict(self.policy)
        return Policy.from_yaml(self.policy)

    def query(self, name: str) -> ReportQuery:
        for q in self.queries:
            if q.name == name:
                return q
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "description": self.description, "database": self.database,
            "register": dict(self.register),
            "policy": self.policy if isinstance(self.policy, str) else dict(self.policy),
            "policy_format": self.policy_format, "budget": budget_dict(self.budget),
            "objective": self.objective, "composition": self.composition,
            "delta_prime": str(self.delta_prime) if self.delta_prime is not None else None,
            "ledger": self.ledger, "outputs": list(self.outputs),
            "intervals": self.intervals, "queries": [q.to_dict() for q in self.queries],
            "source": self.source, "sha256": self.sha256,
        }


def _check_keys(data: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    import difflib

    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            fix = f"did you mean `{close[0]}`?" if close else f"use one of {', '.join(allowed)}."
            raise PolicyError(f"{where}: unknown key `{key}`: only {', '.join(allowed)} are "
                              "read, and a misspelt key is refused rather than ignored. "
                              f"Fix: {fix}")


def _fraction(value: Any, what: str) -> Fraction:
    try:
        x = as_fraction(value, what)
    except (TypeError, ValueError) as err:
        raise PolicyError(f"report spec: {err}") from None
    if x < 0:
        raise PolicyError(f"report spec: {what} must be non-negative")
    return x


def parse_budget(value: Any) -> Any:
    """A mapping of one registered definition's keywords (``{epsilon}``, ``{epsilon, delta}``,
    ``{rho}``, ``{mu}``) → a privacy value."""
    if not isinstance(value, Mapping):
        raise PolicyError(f"report spec: `budget` is {value!r}, but `budget` is a mapping: a "
                          "number alone does not say which privacy definition it is in. Fix: "
                          f"write e.g. {_examples()}.")
    _check_keys(value, budget_keywords(), "report spec budget")
    keys = set(value)
    kind = kind_for(keys)
    if kind is None:
        menu = join_or(keyword_menu(str, titles=False))
        raise PolicyError(f"report spec: `budget` takes {menu} — got "
                          f"{', '.join(sorted(keys)) or 'nothing'}: a budget is in one privacy "
                          "definition, as its ledger is. Fix: keep one, e.g. "
                          f"{_examples()}.")
    try:
        out: Any = build(kind, {n: _fraction(value[n], n) for n in kind.keywords()})
    except ValueError as err:
        raise PolicyError(f"report spec budget: {err}") from None
    if out.is_zero():
        raise PolicyError("report spec: `budget` is zero, and the budget must be positive: a "
                          "report with no budget could release nothing. Fix: give it a positive "
                          "one, e.g. `budget: {epsilon: 1}`.")
    return out


def _examples() -> str:
    """A budget mapping of each registered definition: `budget: {epsilon: 1.0}`, ... `{mu: 0.5}`."""
    first = f"`budget: {{{KINDS[0].keywords()[0]}: 1.0}}`"
    return join_or([first, *("`{" + k.keyword_example().replace("=", ": ") + "}`"
                             for k in KINDS[1:])])


def budget_dict(b: Any) -> dict[str, str]:
    return {n: str(p) for n, p in zip(type(b).keywords(), b._params)}


def _parse_queries(raw: Any) -> tuple[ReportQuery, ...]:
    items: list[Mapping[str, Any]] = []
    if isinstance(raw, Mapping):
        for name, body in raw.items():
            if isinstance(body, str):
                items.append({"name": name, "sql": body})
            elif isinstance(body, Mapping):
                if "name" in body and body["name"] != name:
                    raise PolicyError(f"report query `{name}`: its `name` says {body['name']!r}")
                items.append({**body, "name": name})
            else:
                raise PolicyError(f"report query `{name}`: give its SQL or {{sql: ..., weight: ...}}")
    elif isinstance(raw, list):
        for i, body in enumerate(raw):
            if not isinstance(body, Mapping):
                raise PolicyError(f"report query #{i + 1}: each query is a mapping with name and sql")
            items.append(body)
    else:
        raise PolicyError("report spec: `queries` is a list of {name, sql, ...} or a mapping")
    if not items:
        raise PolicyError("report spec: `queries` is empty. Why: a report is its queries; an empty "
                          "one would have nothing to answer. Fix: list at least one query, e.g. "
                          "`queries: [{name: n, sql: SELECT COUNT(*) AS n FROM t}]`.")
    out: list[ReportQuery] = []
    seen: set[str] = set()
    for i, body in enumerate(items):
        where = f"report query #{i + 1}"
        _check_keys(body, _QUERY_KEYS, where)
        name = body.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise PolicyError(f"{where}: `name` is {name!r}, but it must be letters, digits, _ "
                              "or -, since it names the result files. Fix: write e.g. "
                              "`name: visits_by_hospital`.")
        if name.lower() in seen:
            raise PolicyError(f"report query `{name}` is named twice (names are case-insensitive): "
                              "each name names its result files, so one would overwrite the "
                              "other. Fix: rename one of them.")
        seen.add(name.lower())
        sql = body.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise PolicyError(f"report query `{name}`: `sql` is missing, and it is required: it "
                              "is the query the report answers. Fix: add e.g. "
                              "`sql: SELECT COUNT(*) AS n FROM visits`.")
        _no_placeholders(sql, name)
        weight = body.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (
                math.isfinite(weight) and weight > 0):
            raise PolicyError(f"report query `{name}`: `weight` is {weight!r}, but it must be a "
                              "positive number: it scales the query's part of the objective. "
                              "Fix: write e.g. `weight: 2` (the default is 1).")
        target = body.get("target_error")
        if target is not None:
            if isinstance(target, Mapping):
                target = {str(k).lower(): _positive(v, f"{name}.target_error.{k}")
                          for k, v in target.items()}
                if not target:
                    raise PolicyError(f"report query `{name}`: `target_error` is empty")
            else:
                target = _positive(target, f"{name}.target_error")
        out.append(ReportQuery(name=name, sql=sql.strip(), weight=float(weight),
                               target_error=target))
    return tuple(out)


def _no_placeholders(sql: str, name: str) -> None:
    """A ``?``/``$1``/``$name`` placeholder in a spec's query: refused with the spec's fix (a
    report has no parameters), before any ledger or engine is opened."""
    from privplan.sql.params import ParameterError, Style, bind_params

    try:
        bind_params(sql, None, Style(call="", named="$", none=(
            "A report spec takes no query parameters: write each value into the query's `sql:` "
            "in place of its placeholder, e.g. WHERE age > 30")))
    except ParameterError as err:
        raise PolicyError(f"report query `{name}`: {err}") from None


def _positive(v: Any, what: str) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise PolicyError(f"report spec: {what} must be a positive number") from None
    if not (math.isfinite(x) and x > 0):
        raise PolicyError(f"report spec: {what} must be a positive number")
    return x
