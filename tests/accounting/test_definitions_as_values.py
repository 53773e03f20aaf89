"""Privacy definitions are values, not ladders: no module outside the definitions' own asks
*which* definition a value is.

What differs between PureDP, ApproxDP, ZCDP and GDP (conversions, the noise parameters a budget
buys, what it can spend, wording) is said by the definition, in its module under
``privplan/accounting/definitions/``; code elsewhere asks the value (``budget.calibration()``,
``cost.delta_or_none()``, ``kind.weight_power``, ``cost_in(kind, guarantees)``). This test reads
the source and refuses the ladders that would come back: a comparison of a kind with a
definition (``kind is ZCDP``, ``kind in (PureDP, ApproxDP)``, ``type(v).__name__ == "GDP"``), an
``isinstance`` against one, a dict keyed by them, a ``match`` on them, or a second list of them
(the registry is ``KINDS``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from privplan.accounting.definitions import KINDS

ROOT = Path(__file__).resolve().parents[2] / "src" / "privplan"
HOME = ROOT / "accounting" / "definitions"  # (the definitions' own modules and their registry)
NAMES = frozenset(k.__name__ for k in KINDS)


def _is_kind(node: ast.AST) -> bool:
    """``ZCDP``, ``pp.ZCDP`` or ``definitions.ZCDP``: a definition named, not called."""
    return ((isinstance(node, ast.Name) and node.id in NAMES)
            or (isinstance(node, ast.Attribute) and node.attr in NAMES))


def _kinds_in(node: ast.AST) -> int:
    """How many definitions ``node`` names directly: itself, or the elements of a tuple, list or
    set literal, or the arms of ``A | B``."""
    if _is_kind(node):
        return 1
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return sum(_kinds_in(e) for e in node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _kinds_in(node.left) + _kinds_in(node.right)
    return 0


def _names_kind(node: ast.AST) -> bool:
    """A definition's class name as a string (``"ZCDP"``), alone or in a literal collection."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_kind(e) for e in node.elts)
    return False


def _pattern_kinds(pattern: ast.AST) -> bool:
    return any(isinstance(p, ast.MatchClass) and _is_kind(p.cls) for p in ast.walk(pattern))


def ladders(source: str) -> list[tuple[int, str]]:
    """(line, what) for each place in ``source`` that dispatches on a definition."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    in_types = {id(n.slice) for n in ast.walk(tree) if isinstance(n, ast.Subscript)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_kinds_in(o) for o in operands) or any(_names_kind(o) for o in operands):
                found.append((node.lineno, "compared with a definition"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2
              and _kinds_in(node.args[1])):
            found.append((node.lineno, f"{node.func.id} against a definition"))
        elif isinstance(node, ast.Dict) and any(
                k is not None and (_kinds_in(k) or _names_kind(k)) for k in node.keys):
            found.append((node.lineno, "a dict keyed by definitions"))
        elif isinstance(node, ast.match_case) and _pattern_kinds(node.pattern):
            found.append((node.pattern.lineno, "a match on definitions"))
        elif (isinstance(node, ast.Tuple | ast.List | ast.Set) and _kinds_in(node) >= 2
              and id(node) not in in_types):  # (``tuple[PureDP, ZCDP]`` is a type)
            found.append((node.lineno, "a list of definitions beside the registry (KINDS)"))
    return sorted(set(found))


def test_no_module_outside_the_definitions_asks_which_definition_a_value_is() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {what}"
             for path in sorted(ROOT.rglob("*.py")) if HOME not in path.parents
             for line, what in ladders(path.read_text(encoding="utf-8"))]
    assert not found, ("ask the value (its definition's module says what differs):\n"
                       + "\n".join(found))


def test_the_definitions_live_in_their_own_modules() -> None:
    """The scan exempts exactly the package the definitions are declared in (a definition
    defined elsewhere would make the exemption a hole)."""
    assert {Path(__import__(k.__module__, fromlist=["_"]).__file__).parent for k in KINDS} == {
        HOME}


@pytest.mark.parametrize("snippet", [
    "if kind is ZCDP:\n    pass",  # (the ladders of mechanisms/noise.py, before)
    "if kind is not ApproxDP:\n    pass",
    "x = kind == pp.GDP",
    "p = 1.0 if kind in (PureDP, ApproxDP) else 0.5",  # (allocation's noise exponent)
    "if isinstance(budget, PureDP | ApproxDP):\n    pass",  # (calibrate)
    "if isinstance(budget, (ZCDP, GDP)):\n    pass",
    "ok = issubclass(k, definitions.GDP)",
    "names = {PureDP: ('epsilon',), ZCDP: ('rho',)}[type(b)]",  # (report/spec.py)
    "symbols = {'PureDP': ('ε',), 'GDP': ('μ²',)}.get(type(b).__name__)",  # (views/html.py)
    "if type(v).__name__ == 'ZCDP':\n    pass",
    "if type(v).__name__ in ('PureDP', 'ApproxDP'):\n    pass",
    "match budget:\n    case GDP(mu=m):\n        pass",
    "_KINDS = (PureDP, ApproxDP, ZCDP, GDP)",  # (a second registry: session.py, pandas/)
])
def test_the_scan_sees_each_kind_of_ladder(snippet: str) -> None:
    assert ladders(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "cost = PureDP(eps) + PureDP(1)",
    "ok = pure_to_gdp(PureDP(eps)).exact_mu <= mu",  # (a value built, not a kind compared)
    "g = (PureDP(eps), ZCDP(eps * eps / 8))",  # (a mechanism's guarantees)
    "if type(g) is kind:\n    pass",  # (generic: whatever kind is asked)
    "if isinstance(budget, KINDS):\n    pass",
    "B = TypeVar('B', PureDP, ApproxDP, ZCDP, GDP)",
    "def f(b: PureDP | ApproxDP) -> GDP: ...",
    "def f() -> tuple[PureDP, ZCDP]: ...",
    "c = cast(ApproxDP, cost)",
    "v = query_budget(GDP, mu=1)",
])
def test_the_scan_lets_values_be_used(snippet: str) -> None:
    assert not ladders(snippet), snippet
