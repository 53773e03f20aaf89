"""The layering the design relies on, enforced: import contracts, no import cycles, and every
docstring example run.

The contracts (docs/DESIGN.md, data flow): the composition theorem (``accounting``) and the
query analysis (``analysis``) know nothing of an engine, pandas or the session, so what a query
costs cannot depend on how or where it runs; ``analysis`` knows nothing of ``sql`` (the SQL
layer builds on it); ``sql`` (parsing and planning) does not reach into the session; the
``planning`` package imports no engine, database driver or session, and receives no connection
(its parameters that reach the engine are typed with its narrow Protocols); the core imports
none of the faces a user holds (CLI, DB-API, SQLAlchemy, pandas, views, reports, demo). Imports
are read from the source (module level, inside functions and under ``if TYPE_CHECKING:``
alike), so a lazy or type-only import cannot slip past.
"""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "privplan"

CORE = ("privplan.accounting", "privplan.analysis", "privplan.mechanisms", "privplan.sql",
        "privplan.planning", "privplan.gate", "privplan.rewrite", "privplan.policy",
        "privplan.ledger")
FACES = ("privplan.cli", "privplan.dbapi", "privplan.sqlalchemy_dialect", "privplan.pandas",
         "privplan.views", "privplan.report", "privplan.demo", "privplan.server")
_CONTRACTS = {
    "privplan.accounting": ("duckdb", "pandas", "privplan.engines", "privplan.session.session",
                            "privplan.planning.engine_semantics"),
    "privplan.analysis": ("duckdb", "pandas", "privplan.engines", "privplan.session.session",
                          "privplan.planning.engine_semantics", "privplan.sql"),
    "privplan.sql": ("privplan.session.session",),
    "privplan.planning": ("privplan.engines", "duckdb", "pyspark", "psycopg",
                          "privplan.session"),
}
FORBIDDEN = {layer: (*_CONTRACTS.get(layer, ()), *FACES)
             for layer in dict.fromkeys([*_CONTRACTS, *CORE])}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(ROOT.rglob("*.py"))}


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports a type checker reads and
    the interpreter never runs)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _imports(name: str, *, type_only: bool = True) -> set[str]:
    """What module ``name`` imports, at module level and inside functions; with
    ``type_only=False`` without the imports under ``if TYPE_CHECKING:``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_only else _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names
                       if f"{target}.{a.name}" in MODULES)
    return out


@pytest.mark.invariant(2)
@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_import_contracts(layer: str) -> None:
    broken = [f"{name} imports {imp}"
              for name in MODULES if name == layer or name.startswith(layer + ".")
              for imp in sorted(_imports(name))
              for bad in FORBIDDEN[layer] if imp == bad or imp.startswith(bad + ".")]
    assert not broken, "layering broken:\n" + "\n".join(broken)


def test_no_import_cycles() -> None:
    """No cycle among the imports, counting those a type checker alone reads (under ``if
    TYPE_CHECKING:``) as well as those the interpreter runs (module level or lazy): a type-only
    need goes through a Protocol in a lower floor (a view names what it reads of a result in
    :mod:`privplan.views.shown`, never ``Result``, which imports the view to show itself)."""
    graph = {m: {d for d in _imports(m) if d in MODULES and d != m} for m in MODULES}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append([*path[path.index(d):], d])
            elif d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in MODULES:
        if m not in state:
            visit(m, [m])
    assert not cycles, ("import cycles (type-only imports count: name a Protocol of a lower "
                        "floor instead):\n" + "\n".join(" -> ".join(c) for c in cycles))


def test_the_contracts_see_imports() -> None:
    """The reader finds real imports (a contract that reads nothing would always pass)."""
    assert "privplan.accounting.solver" in _imports("privplan.accounting.accountant")
    assert "duckdb" in _imports("privplan.engines.duckdb_engine")
    # (its TYPE_CHECKING import: seen by the contracts, not run)
    assert "privplan.views.shown" in _imports("privplan.views.plot")
    assert "privplan.views.shown" not in _imports("privplan.views.plot", type_only=False)
    assert "privplan.views.html" in _imports("privplan.result", type_only=False)  # (lazy)
    assert "privplan.cli.run" in _imports("privplan.cli.report")


ENGINE_TYPES = {"Engine", "DuckDBEngine", "PostgresEngine", "SparkEngine", "Judge", "Session",
                "DuckDBPyConnection", "Connection", "Cursor", "SparkSession"}
"""Types a planning function may not take: an engine, the judge's class, a session or a
connection (planning names what it asks of them through its Protocols instead)."""
REACHES_ENGINE = {"engine", "judge", "con", "conn", "connection", "cursor", "session"}
"""Parameter names of what reaches the engine (or the judge): each must be typed with one of
planning's Protocols."""
PRIVATE_READS = {"run", "bind", "probe", "null_columns", "register", "create_view",
                 "materialize", "materialized", "stand_in_rows", "execute", "con"}
"""Engine members that read or change private data: no planning Protocol offers them."""


def _annotation_names(annotation: ast.expr | None) -> set[str]:
    if annotation is None:
        return set()
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body  # (a quoted annotation)
    return ({n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)}
            | {n.attr for n in ast.walk(annotation) if isinstance(n, ast.Attribute)})


def test_planning_receives_no_connection() -> None:
    """No function of ``privplan.planning`` takes an engine, a connection or a session: a
    parameter that reaches the engine or the judge is typed with one of planning's narrow
    Protocols (:mod:`privplan.planning.reads`, or the totality check's ``ExpressionJudge`` its
    judge extends), never ``Any`` or an engine class, and those Protocols offer no member that
    reads a private row."""
    from privplan.planning import reads
    from privplan.sql.totality import ExpressionJudge

    protocols = {n: c for n, c in vars(reads).items() if isinstance(c, type)
                 and c.__dict__.get("_is_protocol") and c.__module__ == reads.__name__}
    assert protocols.keys() >= {"PublicCatalog", "DomainTables", "DomainJudge"}
    for name, cls in [*protocols.items(), ("ExpressionJudge", ExpressionJudge)]:
        members = {m for k in cls.__mro__[:-1] for m in vars(k) if not m.startswith("_")}
        assert members and not members & PRIVATE_READS, (name, members)
    allowed = {*protocols, "ExpressionJudge"}
    wrong: list[str] = []
    reached = 0
    for name, path in MODULES.items():
        if name != "privplan.planning" and not name.startswith("privplan.planning."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg,
                                                                                a.kwarg])]:
                names = _annotation_names(arg.annotation)
                where = f"{name}.{node.name}({arg.arg}: {names or 'unannotated'})"
                if names & ENGINE_TYPES:
                    wrong.append(f"{where} takes an engine, a connection or a session")
                if arg.arg in REACHES_ENGINE:
                    reached += 1
                    if not names & allowed or names - allowed - {"None"}:
                        wrong.append(f"{where} is not typed with planning's Protocols "
                                     f"({', '.join(sorted(allowed))})")
    assert not wrong, "planning receives a connection:\n" + "\n".join(wrong)
    assert reached >= 8  # (the engine and judge parameters of engine_semantics, public_joins)


def test_every_docstring_example_runs() -> None:
    attempted = 0
    failures = []
    for name in MODULES:
        if name.endswith("__main__"):
            continue
        result = doctest.testmod(importlib.import_module(name),
                                 optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        attempted += result.attempted
        if result.failed:
            failures.append(f"{name}: {result.failed} of {result.attempted} failed")
    assert not failures, "\n".join(failures)
    assert attempted >= 24  # the examples in the modules today


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
_REASON = ("on purpose",)  # a long function says why in a comment: "(long on purpose: ...)"


def test_rooms_stay_small_enough_to_review() -> None:
    """No module over 600 lines; no function over 80 unless a comment in it says why (the
    house issue: reviewable rooms, one home per proof)."""
    too_long: list[str] = []
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        if len(lines) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {len(lines)} lines")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = lines[node.lineno - 1:node.end_lineno]
            if len(body) > MAX_FUNCTION_LINES and not any(
                    "#" in line and any(r in line for r in _REASON) for line in body):
                too_long.append(f"{name}.{node.name}: {len(body)} lines, no reason given")
    assert not too_long, too_long
