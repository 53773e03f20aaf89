"""Every face reads its budget keywords from the definitions registry, and its BigQuery ANON_
spellings from the aggregate registry: a new definition (or aggregate) is its module plus one
registration line.

Each registered definition's own keywords, with its own example values, are accepted by every
surface a budget is given through (a query's keywords, the report spec, the CLI flags, the
DB-API, the SQLAlchemy URL) and give exactly the value its constructor gives; a definition
registered after privplan was written (a toy ``τ``, in a fresh interpreter) is accepted by all
of them with no edit; and no surface module names a definition or its keywords by hand.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from privplan import dbapi
from privplan.accounting.definitions import (
    KINDS,
    PrivacyValue,
    budget_keywords,
    build,
    join_or,
    keyword_menu,
    kind_for,
    leading_keywords,
)
from privplan.cli.commands import _budget, build_parser
from privplan.cli.run import flag_words
from privplan.dbapi.sqlalchemy_url import connect_arguments
from privplan.demo.data import demo_policy_path, write_demo_database
from privplan.errors import PolicyError
from privplan.planning.query_budget import query_budget
from privplan.report.spec import parse_budget
from privplan.session.session import QUERY_KEYWORDS
from privplan.sql.aggregates import AGGREGATES, ANON, CONTRIBUTION_BOUNDS
from privplan.sql.bigquery import rewrite_dp_aggregates

SRC = Path(__file__).resolve().parents[2] / "src" / "privplan"
IDS = [k.__name__ for k in KINDS]


def _example(kind: type[PrivacyValue]) -> dict[str, str]:
    """The definition's keywords with its own example values (``epsilon=0.5, delta=1e-6``)."""
    return dict(pair.split("=") for pair in kind.keyword_example().split(", "))


def test_the_registry_lists_each_keyword_once_and_names_each_definition_by_its_set() -> None:
    assert budget_keywords() == ("epsilon", "delta", "rho", "mu")
    assert leading_keywords() == ("epsilon", "rho", "mu")
    for kind in KINDS:
        assert kind_for(kind.keywords()) is kind
        assert kind_for(reversed(kind.keywords())) is kind
    assert kind_for(("delta",)) is None and kind_for(("rho", "mu")) is None
    assert (join_or(keyword_menu())
            == "epsilon= (with delta= for (ε, δ)-DP), rho= (zCDP) or mu= (Gaussian DP)")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_query_keywords(kind: type[PrivacyValue]) -> None:
    example = _example(kind)
    expected = build(kind, example)
    assert set(kind.keywords()) <= set(QUERY_KEYWORDS)
    assert query_budget(kind, **{n: float(v) for n, v in example.items()}) == expected
    others = [k for k in KINDS if not set(kind.keywords()) <= set(k.keywords())]
    for other in others:  # (another definition's keywords: refused, naming this one's)
        with pytest.raises(PolicyError, match=kind.keywords()[0]):
            query_budget(other, **{n: float(v) for n, v in example.items()})


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_report_spec_budget(kind: type[PrivacyValue]) -> None:
    assert parse_budget(_example(kind)) == build(kind, _example(kind))


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_cli_flags(kind: type[PrivacyValue]) -> None:
    flags = [word for n, v in _example(kind).items() for word in (f"--{n}", v)]
    args = build_parser().parse_args(["query", "SELECT 1", "--database", "d.duckdb",
                                      "--policy", "p.yaml", *flags])
    assert _budget(args) == build(kind, {n: float(v) for n, v in _example(kind).items()})
    for n in kind.keywords():  # (messages name the flag, not the Python keyword)
        assert flag_words(f"pass {n}=0.5") == f"pass --{n} 0.5"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_database(tmp_path_factory.mktemp("registry") / "demo.duckdb", rows=500)


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_dbapi_keywords(kind: type[PrivacyValue], demo_db: Path) -> None:
    example = {n: float(v) for n, v in _example(kind).items()}
    total = build(kind, {n: 10 * v if i == 0 else v for i, (n, v) in enumerate(example.items())})
    con = dbapi.connect(str(demo_db), policy=demo_policy_path(), budget=total, **example)
    try:
        cur = con.cursor().execute("SELECT COUNT(*) AS n FROM visits")  # (the default)
        assert cur.result.query_cost <= build(kind, example)
        cur = con.cursor().execute("SELECT COUNT(*) AS n FROM visits", **example)  # (explicit)
        assert cur.result.query_cost <= build(kind, example)
    finally:
        con.close()


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_sqlalchemy_url_parameters(kind: type[PrivacyValue], tmp_path: Path) -> None:
    example = _example(kind)
    params = {"policy": demo_policy_path(), "ledger": tmp_path / "l.sqlite",
              **{f"budget_{n}": v for n, v in example.items()}, **example}
    url = make_url("privplan:///d.duckdb?" + "&".join(f"{k}={v}" for k, v in params.items()))
    got = connect_arguments(url)
    assert got["budget"] == build(kind, example)
    assert {n: float(got[n]) for n in example} == {n: float(v) for n, v in example.items()}


def test_a_definition_registered_later_is_accepted_by_every_surface(tmp_path: Path) -> None:
    """A toy definition τ (one parameter, additive), registered the way the package registers
    its own, before the faces are imported: every face takes ``tau`` with no edit."""
    code = textwrap.dedent("""
        from privplan.accounting.definitions.value import PrivacyValue, _nonnegative, register

        class Tau(PrivacyValue):
            __slots__ = ()
            _names = ("tau",)
            _symbols = ("τ",)
            _examples = ("0.25",)
            _title = "τ-DP"
            weight_power = 1

            def __init__(self, tau):
                object.__setattr__(self, "_params", (_nonnegative(tau, "tau", "Tau"),))

        register(Tau)

        from privplan.cli.commands import _budget, build_parser
        from privplan.cli.run import flag_words
        from privplan.dbapi.connection import _BUDGET_KEYS
        from privplan.dbapi.sqlalchemy_url import _PARAMETERS, _total
        from privplan.planning.query_budget import query_budget
        from privplan.report.spec import parse_budget
        from privplan.session.session import QUERY_KEYWORDS
        from privplan.sql.bigquery import _BUDGET_KEYS as CLAUSE_KEYS

        print(query_budget(Tau, tau=0.25) == Tau("0.25"))
        print(parse_budget({"tau": "1/4"}) == Tau("0.25"))
        args = build_parser().parse_args(["query", "q", "--database", "d", "--policy", "p",
                                          "--tau", "0.25"])
        print(_budget(args) == Tau(0.25))
        print(flag_words("pass tau=0.25") == "pass --tau 0.25")
        print("tau" in _BUDGET_KEYS and "tau" in QUERY_KEYWORDS and "tau" in CLAUSE_KEYS)
        print("budget_tau" in _PARAMETERS and _total({"budget_tau": "2"}) == Tau(2))
        try:
            query_budget(Tau)
        except Exception as err:
            print("tau= (τ-DP)" in str(err))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False, timeout=120, cwd=tmp_path,
                         env={"PYTHONPATH": str(SRC.parent), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"] * 7


# -- no surface names a definition by hand ------------------------------------------------------

SURFACES = ("report/spec.py", "planning/query_budget.py", "cli/commands.py", "cli/run.py",
            "dbapi/connection.py", "dbapi/sqlalchemy_url.py", "session/session.py")
_NAMED = {"ZCDP", "GDP", "PureDP", "ApproxDP", "rho", "mu", "budget_rho", "budget_mu",
          "budget_delta"}


def _code_words(path: Path) -> list[str]:
    """Identifiers, keyword and parameter names, and the words of string literals (not
    docstrings) of ``path``, with their line, outside PLD accounting (``composition="pld"``
    holds an (ε, δ) budget as the μ-GDP one that implies it: it is about those two
    definitions by its nature, so the function or statement it is in may name them)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    docstrings = {id(n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found: list[str] = []
    for scope in _scopes(tree):
        text = ast.get_source_segment(source, scope) or ""
        if "pld" in text.lower():
            continue
        for node in _walk_within(scope):
            words: list[str] = []
            if isinstance(node, ast.Name):
                words = [node.id]
            elif isinstance(node, ast.alias):
                words = [node.name]
            elif isinstance(node, ast.keyword | ast.arg) and node.arg:
                words = [node.arg]
            elif isinstance(node, ast.Attribute):
                words = [node.attr]
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docstrings):
                words = "".join(c if c.isalnum() or c == "_" else " "
                                for c in node.value).split()
            found += [f"{w} (line {getattr(node, 'lineno', '?')})" for w in words
                      if w in _NAMED]
    return found


def _scopes(tree: ast.Module) -> list[ast.AST]:
    """The functions of the module (methods included) and its other top-level statements."""
    out: list[ast.AST] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            out += [s for s in stmt.body]
        else:
            out.append(stmt)
    return out


def _walk_within(scope: ast.AST) -> list[ast.AST]:
    return list(ast.walk(scope))


def _typing_only(scope: ast.AST) -> bool:
    """An ``@overload`` (one signature per definition, for type checkers), the session's
    ``TypeVar`` of the definitions, or an import (of the overloads' types)."""
    if isinstance(scope, ast.FunctionDef):
        return any(isinstance(d, ast.Name) and d.id == "overload" for d in scope.decorator_list)
    if isinstance(scope, ast.Assign) and isinstance(scope.value, ast.Call):
        return isinstance(scope.value.func, ast.Name) and scope.value.func.id == "TypeVar"
    return isinstance(scope, ast.ImportFrom)


@pytest.mark.parametrize("module", SURFACES)
def test_no_surface_names_a_definition(module: str) -> None:
    """Only the type checkers' view of ``Session.sql``/``explain`` (their overloads, one per
    definition) may name definitions in a surface; the run-time path reads the registry."""
    path = SRC / module
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if module != "session/session.py" else {
        line for scope in _scopes(tree) if _typing_only(scope)
        for line in range(scope.lineno, (scope.end_lineno or scope.lineno) + 1)}  # type: ignore[attr-defined]
    found = [w for w in _code_words(path)
             if int(w.split("line ")[1].rstrip(")")) not in skip
             and (module, w.split()[0]) not in _ABOUT_ONE]
    assert found == []


_ABOUT_ONE = {  # (a message about one definition by its nature, and why)
    ("cli/run.py", "ApproxDP"): "the flag words of partition selection's refusal, which needs "
                                "a δ: an (ε, δ) budget (privplan.planning.costs)",
}


# -- aggregates: BigQuery's ANON_ spellings are read from the rows -------------------------------

def test_every_anon_spelling_is_a_row_and_rewrites_to_its_name() -> None:
    named = {a: row for row in AGGREGATES.values() for a in row.anon}
    assert dict(ANON) == {f"ANON_{a}": a for a in named}
    assert set(ANON.values()) == set(CONTRIBUTION_BOUNDS["per_group"]) | set(
        CONTRIBUTION_BOUNDS["per_row"])
    for anon, name in ANON.items():
        q = ", 0.5" if name == "PERCENTILE_CONT" else ""
        sql, bounds = rewrite_dp_aggregates(
            f"SELECT {anon}(x{q} CLAMPED BETWEEN 0 AND 10) FROM t")
        assert sql == f"SELECT {name}(x{q}) FROM t"
        assert [(b.func, b.lower, b.upper, b.per_row) for b in bounds] == [
            (name, 0, 10, named[name].contribution_bounds == "per_row")]


def test_the_bigquery_module_names_no_aggregate_list() -> None:
    text = (SRC / "sql" / "bigquery.py").read_text(encoding="utf-8")
    assert "_ANON = ANON" in text and '"ANON_COUNT"' not in text
    assert '_BOUNDED = ("COUNT"' not in text and '_PER_ROW = ("VAR_POP"' not in text


def test_pandas_var_and_std_read_the_spread_rows() -> None:
    from privplan.pandas.view import _spread
    from privplan.sql.aggregates.moments import Spread

    spreads = {(row.root, row.ddof): row.label for row in AGGREGATES.values()
               if type(row) is Spread}
    assert {(m == "std", d): _spread(m, d) for m in ("var", "std") for d in (0, 1)} == spreads


def test_per_unit_inner_aggregates_are_registered() -> None:
    """The inner table of a per-unit pre-aggregation stays in :mod:`privplan.sql.per_unit`
    (each of its exact SQL aggregates goes with the bound rule there that bounds the derived
    column); each is an aggregate the registry answers too."""
    from sqlglot import exp

    from privplan.sql.aggregates import aggregate_of
    from privplan.sql.per_unit import _FUNCS

    for node, name in _FUNCS.items():
        row = aggregate_of(node(this=exp.column("x")))
        assert row is not None and name in (row.name, node.key)
