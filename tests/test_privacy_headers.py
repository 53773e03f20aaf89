"""Every module a differential-privacy reviewer must read says, in one line, what it must
guarantee for privacy: a line starting with ``Privacy:`` in its module docstring.

The modules: every module of the accounting, noise, analysis, planning, rewrite, gate and
ledger packages (subpackages included) and of the aggregates' rows (``sql/aggregates/``), the
session's charge order (``session/session.py``), the plan builder and its measures
(``sql/builder.py``, ``sql/measures.py``), per-unit pre-aggregation (``sql/per_unit.py``) and
the assembly of noisy answers (``assemble.py``). A new module in one of those packages needs
its line too.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "privplan"
PACKAGES = ("accounting", "mechanisms", "analysis", "planning", "rewrite", "gate", "ledger",
            "sql/aggregates", "server")
MODULES = ("session/session.py", "sql/builder.py", "sql/measures.py", "sql/per_unit.py",
           "assemble.py")


def reviewed() -> list[Path]:
    """The modules that must carry a ``Privacy:`` line."""
    found = [p for package in PACKAGES for p in sorted((SRC / package).rglob("*.py"))]
    return found + [SRC / m for m in MODULES]


def problem(source: str) -> str | None:
    """What is wrong with a module's ``Privacy:`` line (None when it has exactly one)."""
    doc = ast.get_docstring(ast.parse(source), clean=True)
    if doc is None:
        return "no module docstring"
    lines = [line for line in doc.splitlines() if line.startswith("Privacy:")]
    if not lines:
        return "no line starting with 'Privacy:' in its docstring"
    if len(lines) > 1:
        return f"{len(lines)} lines starting with 'Privacy:' (one says it)"
    if not lines[0].removeprefix("Privacy:").strip():
        return "an empty 'Privacy:' line"
    return None


def test_every_reviewed_module_says_what_it_guarantees() -> None:
    modules = reviewed()
    assert len(modules) > 80 and all(p.is_file() for p in modules)
    problems = [f"{p.relative_to(SRC).as_posix()}: {why}" for p in modules
                if (why := problem(p.read_text(encoding="utf-8"))) is not None]
    assert not problems, "\n".join(problems)


def test_the_check_fails_on_modules_without_one_line() -> None:
    assert problem('"""A module.\n\nPrivacy: it adds nothing.\n"""\nx = 1\n') is None
    assert problem('"""A module."""\n') == "no line starting with 'Privacy:' in its docstring"
    assert problem("x = 1\n") == "no module docstring"
    assert problem('"""A.\n\nPrivacy: one.\n\nPrivacy: two.\n"""\n') == (
        "2 lines starting with 'Privacy:' (one says it)")
    assert problem('"""A.\n\nPrivacy:\n"""\n') == "an empty 'Privacy:' line"
    assert problem('"""A.\n\nThe privacy: not a header.\n"""\n') is not None
    assert problem('# Privacy: in a comment\n"""A."""\n') is not None
