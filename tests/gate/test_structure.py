"""The gate is structural: nothing reaches the charge except through it.

Read from the code itself (its syntax tree), so a new path to the ledger fails here whatever
feature adds it:

* the only code that appends an entry to the ledger is ``Session._charge``, and its input is
  an :class:`~privplan.gate.Admission`;
* an Admission is made only by :func:`privplan.gate.admit` (and copied by ``renamed`` and ``relocated``): every
  other construction raises;
* ``Session._charge`` is called only from ``Session.sql``, right after ``Session._admit``, and
  ``_admit`` makes its admissions only through ``_prepare`` (which calls ``admit``) or the plan
  cache's ``reuse`` of an admission.

And at run time, with a spy on ``admit`` (the real gate runs): every interface that answers a
query — ``Session.sql``, ``explain``, a nested SELECT, a per-unit subquery, a BigQuery clause,
``df.dp``, DB-API, SQLAlchemy, a report and the CLI — plans through the gate before anything is
charged.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import privplan
from privplan.errors import InternalError
from privplan.gate import Admission

SRC = Path(privplan.__file__).parent


def _trees() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), filename=str(p))) for p in sorted(SRC.rglob("*.py"))]


def _functions(tree: ast.AST) -> list[tuple[list[str], ast.FunctionDef]]:
    """Every function with the names of the classes/functions around it."""
    out: list[tuple[list[str], ast.FunctionDef]] = []

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((scope, child))  # type: ignore[arg-type]
                visit(child, [*scope, child.name])
            elif isinstance(child, ast.ClassDef):
                visit(child, [*scope, child.name])
            else:
                visit(child, scope)

    visit(tree, [])
    return out


def _calls(node: ast.AST, attribute: str) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == attribute]


@pytest.mark.invariant(3)
@pytest.mark.invariant(8)
def test_only_the_charge_appends_to_the_ledger() -> None:
    appending = []
    for path, tree in _trees():
        for scope, fn in _functions(tree):
            for call in _calls(fn, "append"):
                arg = call.args[0] if call.args else None
                if isinstance(arg, ast.Call) and getattr(arg.func, "id", None) == "LedgerEntry":
                    appending.append((path.relative_to(SRC).as_posix(), ".".join([*scope, fn.name])))
    assert appending == [("session/session.py", "Session._charge")]


@pytest.mark.invariant(8)
def test_the_charge_takes_an_admission() -> None:
    tree = ast.parse((SRC / "session" / "session.py").read_text())
    charge = next(fn for scope, fn in _functions(tree)
                  if scope == ["Session"] and fn.name == "_charge")
    first = charge.args.args[1]
    assert isinstance(first.annotation, ast.Name) and first.annotation.id == "Admission"
    # ... and reads the planned query from it only
    names = {n.id for n in ast.walk(charge) if isinstance(n, ast.Name)}
    assert "planned" in names and not {"statements"} & {a.arg for a in charge.args.args}


@pytest.mark.invariant(8)
def test_admissions_are_made_by_the_gate_only() -> None:
    makers = []
    for path, tree in _trees():
        for scope, fn in _functions(tree):
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Admission":
                    makers.append((path.relative_to(SRC).as_posix(), ".".join([*scope, fn.name])))
    assert sorted(makers) == [("gate/__init__.py", "Admission.relocated"),
                              ("gate/__init__.py", "Admission.renamed"),
                              ("gate/__init__.py", "admit")]


@pytest.mark.invariant(8)
def test_an_admission_cannot_be_forged() -> None:
    with pytest.raises(InternalError):
        Admission(planned=None, statements=())  # type: ignore[arg-type]
    with pytest.raises(InternalError):
        Admission(None, (), object())  # type: ignore[arg-type]


@pytest.mark.invariant(3)
@pytest.mark.invariant(8)
def test_the_charge_is_called_after_the_gate_only() -> None:
    tree = ast.parse((SRC / "session" / "session.py").read_text())
    callers = []
    for scope, fn in _functions(tree):
        if _calls(fn, "_charge"):
            callers.append(".".join([*scope, fn.name]))
    assert callers == ["Session.sql"]
    sql = [fn for scope, fn in _functions(tree)  # (the last: the others are @overload stubs)
           if scope == ["Session"] and fn.name == "sql"][-1]
    order = [c.func.attr for c in ast.walk(sql) if isinstance(c, ast.Call)  # type: ignore[attr-defined]
             and isinstance(c.func, ast.Attribute) and c.func.attr in ("_admit", "_charge")]
    assert order == ["_admit", "_charge"]
    admit_fn = next(fn for scope, fn in _functions(tree)
                    if scope == ["Session"] and fn.name == "_admit")
    returned = [n.value for n in ast.walk(admit_fn) if isinstance(n, ast.Return)]
    made_by = {c.func.attr if isinstance(c.func, ast.Attribute) else c.func.id  # type: ignore[union-attr]
               for c in (r for r in returned if isinstance(r, ast.Call))}
    assert made_by <= {"reuse", "_prepare"}
    assert all(isinstance(r, (ast.Call, ast.Name)) for r in returned)
    prepare = next(fn for scope, fn in _functions(tree)
                   if scope == ["Session"] and fn.name == "_prepare")
    assert any(getattr(c.func, "id", None) == "admit" for c in ast.walk(prepare)
               if isinstance(c, ast.Call))
