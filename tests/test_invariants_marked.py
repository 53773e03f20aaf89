"""Every invariant of docs/DESIGN.md §2 has tests that check it, and every marker names one.

A test that checks invariant n carries ``@pytest.mark.invariant(n)`` (on the function, on its
class, or in its module's ``pytestmark``). The markers are read from the tests' syntax trees,
so a test skipped here (no PostgreSQL server, no Spark) still counts, and nothing is run:

* every invariant numbered in §2 has at least one marked test;
* every marker names an invariant §2 has, with integer literals only;
* a marker sits on a test (a ``test_*`` function, a ``Test*`` class, or ``pytestmark``), not
  on a helper, where it would mark nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"


def invariants(design: str) -> set[int]:
    """The numbers of the invariants listed in §2 of a DESIGN.md text."""
    section = re.search(r"^## 2\. .*?$(.*?)(?=^## )", design, re.MULTILINE | re.DOTALL)
    assert section is not None, "DESIGN.md has no section 2"
    return {int(n) for n in re.findall(r"^(\d+)\. \*\*", section[1], re.MULTILINE)}


def _is_invariant_mark(node: ast.AST) -> bool:
    """``pytest.mark.invariant(...)`` (or ``mark.invariant(...)``)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "invariant" and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "mark")


def markers(source: str, where: str) -> tuple[dict[int, list[str]], list[str]]:
    """The invariants a test module's markers name, each with the tests it marks, and the
    problems found (a marker off a test, an argument that is not an integer literal)."""
    tree = ast.parse(source)
    found: dict[int, list[str]] = {}
    problems: list[str] = []
    placed: set[int] = set()

    def record(call: ast.Call, test: str) -> None:
        placed.add(id(call))
        numbers = [a.value for a in call.args
                   if isinstance(a, ast.Constant) and type(a.value) is int]
        if not numbers or len(numbers) != len(call.args) or call.keywords:
            problems.append(f"{test}: invariant() takes invariant numbers (int literals)")
        for n in numbers:
            found.setdefault(n, []).append(test)

    def marks(expr: ast.expr) -> list[ast.Call]:
        items = expr.elts if isinstance(expr, (ast.List, ast.Tuple)) else [expr]
        return [m for m in items if _is_invariant_mark(m)]  # type: ignore[misc]

    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "pytestmark"):
            for call in marks(node.value):
                record(call, f"{where} (pytestmark)")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            is_test = (node.name.startswith("Test") if isinstance(node, ast.ClassDef)
                       else node.name.startswith("test"))
            for decorator in node.decorator_list:
                for call in marks(decorator):
                    if is_test:
                        record(call, f"{where}::{node.name}")
    for node in ast.walk(tree):
        if _is_invariant_mark(node) and id(node) not in placed:
            problems.append(f"{where}, line {node.lineno}: an invariant marker not on a test "
                            "(a test_ function, a Test class or pytestmark)")
    return found, problems


def check(numbers: set[int], sources: dict[str, str]) -> list[str]:
    """What is wrong with the marking of ``sources`` (path -> text) against ``numbers``."""
    marked: dict[int, list[str]] = {}
    problems: list[str] = []
    for where, source in sorted(sources.items()):
        found, wrong = markers(source, where)
        problems += wrong
        for n, tests in found.items():
            marked.setdefault(n, []).extend(tests)
    problems += [f"invariant {n} has no test marked @pytest.mark.invariant({n})"
                 for n in sorted(numbers - set(marked))]
    problems += [f"{test}: marked with invariant {n}, which DESIGN.md §2 does not have"
                 for n in sorted(set(marked) - numbers) for test in marked[n]]
    return problems


def test_every_invariant_has_marked_tests_and_every_marker_an_invariant() -> None:
    numbers = invariants((ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8"))
    assert numbers == set(range(1, len(numbers) + 1)), f"§2 numbers its invariants {numbers}"
    sources = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
               for p in sorted(TESTS.rglob("*.py"))}
    problems = check(numbers, sources)
    assert not problems, "\n".join(problems)


def test_the_check_fails_on_a_made_up_marking() -> None:
    """The check can fail: an invariant without a test, a marker naming no invariant, a
    marker on a helper, and a marker whose argument is not a number are each found."""
    design = ("# d\n\n## 1. Threat\n\n1. **Not this.**\n\n## 2. Invariants\n\n1. **One.**\n"
              "2. **Two.**\n3. **Three.**\n\n## 3. Next\n\n4. **Not an invariant.**\n")
    assert invariants(design) == {1, 2, 3}
    module = ("import pytest\n"
              "pytestmark = [pytest.mark.invariant(1), pytest.mark.slow]\n"
              "@pytest.mark.invariant(4)\n"
              "def test_a(): ...\n"
              "@pytest.mark.invariant(2)\n"
              "def helper(): ...\n"
              "class TestB:\n"
              "    @pytest.mark.invariant('3')\n"
              "    def test_c(self): ...\n")
    assert check({1, 2, 3}, {"tests/t.py": module}) == [
        "tests/t.py::test_c: invariant() takes invariant numbers (int literals)",
        ("tests/t.py, line 5: an invariant marker not on a test (a test_ function, a Test "
         "class or pytestmark)"),
        "invariant 2 has no test marked @pytest.mark.invariant(2)",
        "invariant 3 has no test marked @pytest.mark.invariant(3)",
        "tests/t.py::test_a: marked with invariant 4, which DESIGN.md §2 does not have",
    ]
    fixed = module.replace("invariant(4)", "invariant(3)").replace("def helper", "def test_h")
    assert check({1, 2, 3}, {"tests/t.py": fixed.replace("'3'", "3")}) == []
