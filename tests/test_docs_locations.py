"""Every location the design documents name exists: a page that says where an invariant is
enforced is wrong the day a module moves, and nothing else would notice.

Read from ``docs/DESIGN.md`` and ``docs/FEATURES.md``: every code span (text in backticks)
that names

* a path with a slash (``sql/builder.py``, ``analysis/predicates/``, ``tests/gate/``,
  ``benchmarks/ledger.py``): it exists under ``src/privplan/`` or the repository's root (a
  path that starts below a package, ``solver/records.py`` in the row of ``accounting/``, in
  some package); ``path/module.name`` (``engines/base.SchemaChanged``): the module binds
  ``name``;
* a module file alone (``three_valued.py``): some file of that name exists under
  ``src/privplan/`` (the page says which package, beside it);
* ``privplan.module`` (or ``privplan.module.name``, ``privplan.cli:main``): the module exists
  and binds the name;
* ``module.name`` where ``module`` is the name of one of privplan's modules or packages
  (``gate.admit``, ``plan_cache.reuse``): one module of that name binds ``name``;
* ``Class.name`` where privplan defines ``Class`` (``Session._charge``): that class's module
  binds ``name``.

A module *binds* a name when it defines, assigns or imports it anywhere (methods included).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "privplan"
PAGES = ("docs/DESIGN.md", "docs/FEATURES.md")

_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_SLASHED = re.compile(r"^[a-z_][\w.*-]*(?:/[\w.*-]+)*/[\w.*-]*$")
_FILE = re.compile(r"^\w+\.py$")
_DOTTED = re.compile(r"^privplan(?:\.\w+)+(?::\w+)?$")
_ATTR = re.compile(r"^([a-z_]\w*)\.(\w+)$")
_CLASS_ATTR = re.compile(r"^([A-Z]\w*[a-z]\w*)\.(\w+)$")


def code_spans(text: str) -> list[str]:
    """The words of every inline code span of a Markdown text, fenced blocks left out."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return [word.strip(".,;:()") for span in _SPAN.findall(text) for word in span.split()]


@functools.cache
def _bound(path: Path) -> frozenset[str]:
    """Every name a module defines, assigns or imports, at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return frozenset(names)


def _module_file(base: Path) -> Path | None:
    """``base.py`` or ``base/__init__.py``."""
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _modules_named(name: str) -> tuple[Path, ...]:
    return tuple(p for p in sorted(SRC.rglob("*.py"))
                 if p.stem == name or (p.name == "__init__.py" and p.parent.name == name))


@functools.cache
def _classes() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(path)
    return found


def problem(word: str, src: Path = SRC, root: Path = ROOT) -> str | None:
    """Why ``word`` names nothing that exists (None when it does, or names no location)."""
    if _SLASHED.match(word):
        top = word.split("/")[0]
        # a path from the root or from src/privplan/ exactly; one inside a package named
        # beside it (``solver/records.py`` in the row of ``accounting/``) anywhere below
        exact = (src / top).exists() or (root / top).exists()
        bases = [src, root] if exact else [src, *(d for d in src.rglob("*") if d.is_dir())]
        head, _, attr = word.rpartition(".")
        for base in bases:
            if list(base.glob(word.rstrip("/"))) if "*" in word else (base / word).exists():
                return None
            module = _module_file(base / head) if attr.isidentifier() and "/" in head else None
            if module is not None:
                return None if attr in _bound(module) else f"{head} binds no {attr}"
        return "no such file or directory"
    if _FILE.match(word):
        found = [p for p in (src, root / "tests", root / "benchmarks") if any(p.rglob(word))]
        return None if found else "no module of that name"
    if _DOTTED.match(word):
        parts = word.replace(":", ".").split(".")[1:]
        for cut in range(len(parts), 0, -1):
            module = _module_file(src.joinpath(*parts[:cut]))
            if module is not None:
                rest = parts[cut:]
                if not rest or rest[0] in _bound(module):
                    return None
                return f"privplan.{'.'.join(parts[:cut])} binds no {rest[0]}"
        return "no such module"
    if (m := _ATTR.match(word)) and src == SRC and _modules_named(m[1]):
        if any(m[2] in _bound(p) for p in _modules_named(m[1])):
            return None
        return f"no module named {m[1]} binds {m[2]}"
    if (m := _CLASS_ATTR.match(word)) and src == SRC and m[1] in _classes():
        if any(m[2] in _bound(p) for p in _classes()[m[1]]):
            return None
        return f"the module of class {m[1]} binds no {m[2]}"
    return None


@pytest.mark.parametrize("page", PAGES)
def test_every_location_a_design_page_names_exists(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    stale = sorted({f"`{w}`: {why}" for w in code_spans(text) if (why := problem(w)) is not None})
    assert not stale, f"{page} names locations that do not exist:\n" + "\n".join(stale)


def test_the_check_finds_a_stale_location(tmp_path: Path) -> None:
    """The check can fail: on a made-up tree, each kind of name that does not exist is found."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("def real() -> None: ...\n")
    (tmp_path / "pkg" / "sub").mkdir()
    (tmp_path / "pkg" / "sub" / "deep.py").write_text("X = 1\n")
    words = code_spans("`pkg/mod.py` and `pkg/gone.py`, `pkg/mod.real`, `pkg/mod.fake` "
                       "(`mod.py`; `gone.py`; `sub/deep.py`, `sub/gone.py`, `pkg/sub/`)\n"
                       "```\n`inside/a/fence.py`\n```\n")
    assert words == ["pkg/mod.py", "pkg/gone.py", "pkg/mod.real", "pkg/mod.fake", "mod.py",
                     "gone.py", "sub/deep.py", "sub/gone.py", "pkg/sub/"]
    found = {w: problem(w, src=tmp_path, root=tmp_path) for w in words}
    assert found == {"pkg/mod.py": None, "pkg/gone.py": "no such file or directory",
                     "pkg/mod.real": None, "pkg/mod.fake": "pkg/mod binds no fake",
                     "mod.py": None, "gone.py": "no module of that name",
                     "sub/deep.py": None, "sub/gone.py": "no such file or directory",
                     "pkg/sub/": None}
    assert problem("privplan.no_such_module") == "no such module"
    assert problem("privplan.gate.no_such_name") == "privplan.gate binds no no_such_name"
    assert problem("gate.no_such_name") == "no module named gate binds no_such_name"
    assert problem("Session.no_such_method") == "the module of class Session binds no no_such_method"
