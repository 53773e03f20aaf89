"""Reading YAML as privplan reads its own files (policies, report specs).

Duplicate keys are refused (PyYAML silently keeps the last one, which would drop a setting), a
syntax error names the line and shows it, and a policy source is either a file path or YAML
text. Every failure is a :class:`PolicyError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from privplan.errors import PolicyError

# libyaml's parser where PyYAML was built with it (the same documents and marks, about ten
# times faster: a fresh session, the CLI or a DB-API connection per request, reads its policy)
_SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:
                continue
            if first is not None:
                raise PolicyError(
                    f"duplicate key '{key}' at line {line} (first at line {first}). Why: YAML "
                    f"keeps only the last one, so a setting would be silently dropped. Fix: keep "
                    f"one of them."
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _read_source(source: str | os.PathLike[str]) -> tuple[str, str]:
    """(text, label): ``source`` is a path unless it is a str that looks like YAML text."""
    if isinstance(source, str) and (
        "\n" in source or (": " in source and not os.path.exists(source))
    ):
        return source, "<text>"
    path = Path(source)
    if not path.exists():
        raise PolicyError(
            f"policy file '{path}' does not exist (working directory: {Path.cwd()}). Why: "
            f"without its policy privplan cannot know what to protect. Fix: check the path, or "
            f"pass the YAML text itself."
        )
    if not path.is_file():
        raise PolicyError(
            f"policy path '{path}' is not a file. Why: a policy is one YAML file. Fix: pass the "
            f"path of the .yaml file."
        )
    return path.read_text(encoding="utf-8"), str(path)


def load_strict_yaml(text: str) -> Any:
    """YAML as privplan reads its own files (policies, report specs): duplicate keys refused, a
    syntax error naming the line (a :class:`PolicyError`)."""
    return _load_yaml(text)


def _load_yaml(text: str) -> Any:
    """Parse with duplicate keys refused; a syntax error names the line and shows it."""
    lines = text.splitlines()

    def show(mark: Any) -> str:
        src = lines[mark.line].strip() if mark.line < len(lines) else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: `{src}`"

    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        problem_mark = getattr(e, "problem_mark", None)
        context_mark = getattr(e, "context_mark", None)
        where = f" at {show(problem_mark)}" if problem_mark is not None else ""
        detail = getattr(e, "problem", None) or str(e)
        context = getattr(e, "context", None)
        if (
            context
            and context_mark is not None
            and (problem_mark is None or context_mark.line != problem_mark.line)
        ):
            detail += f"; {context} started at {show(context_mark)}"
        raise PolicyError(
            f"the YAML does not parse{where} ({detail}). Why: privplan needs the whole policy "
            f"to know what to protect. Fix: check the indentation, colons and brackets near "
            f"that line; quote values that contain ': ' or '#'."
        ) from None
