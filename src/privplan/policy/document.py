"""The whole policy: :class:`Policy`, the tables a session may read.

Its constructors are the entry points of each input format (:meth:`Policy.from_yaml`,
:meth:`Policy.from_dict`, :meth:`Policy.from_smartnoise_yaml`); it also holds the table lookup
by (optionally schema-qualified) name, the serialisation back to the policy-file form, and the
one-line and notebook displays. It sits above the format readers, which build only its parts.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from privplan.errors import PolicyError
from privplan.policy.checks import _Loc, _suggest
from privplan.policy.model import FrozenMap, TablePolicy
from privplan.policy.native import _parse_policy
from privplan.policy.smartnoise import _parse_smartnoise
from privplan.policy.strict_yaml import _load_yaml, _read_source


@dataclass(frozen=True)
class Policy:
    """The privacy policy of every table a session may read, keyed by lower-case table name."""

    tables: Mapping[str, TablePolicy]
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.tables, FrozenMap):
            object.__setattr__(self, "tables", FrozenMap(self.tables))
        object.__setattr__(self, "notes", tuple(self.notes))

    # ---- construction ------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """Validate a policy given as a dict (the parsed form of the YAML file)."""
        return Policy(*_parse_policy(d, _Loc()))

    @classmethod
    def from_yaml(cls, source: str | os.PathLike[str]) -> Policy:
        """Read a policy from a YAML file path, or from YAML text (anything with a newline)."""
        text, label = _read_source(source)
        return _policy_of_yaml(text, label)

    @classmethod
    def from_smartnoise_yaml(cls, source: str | os.PathLike[str] | Mapping[str, Any]) -> Policy:
        """Read SmartNoise SQL metadata (collection → schema → table → options and columns).

        ``row_privacy: true`` → privacy_unit "row"; the ``private_id: true`` column → the
        privacy unit with ``max_ids`` (default 1) as max_rows_per_unit; ``rows`` (or
        ``rows_exact``) → rows; types int/float/string/boolean/datetime map to
        int/float/str/bool/timestamp. Options privplan does not use are listed in ``notes``.
        """
        if isinstance(source, Mapping):
            return Policy(*_parse_smartnoise(source, "<dict>"))
        text, label = _read_source(source)
        try:
            return Policy(*_parse_smartnoise(_load_yaml(text), label))
        except PolicyError as e:
            if label == "<text>":
                raise
            raise PolicyError(f"{label}: {e}") from None

    # ---- lookup ------------------------------------------------------------------------------

    def table(self, name: str) -> TablePolicy:
        """The table called ``name``: accepts ``t``, ``T``, ``schema.t`` or ``db.schema.t``."""
        parts = [p.strip().strip('"`[]') for p in name.split(".")]
        key = parts[-1].lower()
        qualifier = parts[-2].lower() if len(parts) >= 2 else None
        t = self.tables.get(key)
        if t is not None and (
            qualifier is None or t.schema is None or t.schema.lower() == qualifier
        ):
            return t
        known = ", ".join(t.qualified_name for t in self.tables.values())
        if t is not None:
            what = (
                f"table '{name}' is not in the policy: '{key}' is declared in schema "
                f"'{t.schema}', not '{parts[-2]}'"
            )
        else:
            what = f"table '{name}' is not in the policy"
        raise PolicyError(
            f"{what}; known tables: {known}. Why: privplan reads only tables the policy "
            f"declares, since it cannot know how to protect any other. Fix: "
            f"{_suggest(key, list(self.tables))}add it under `tables:` (with `public: true` if "
            f"it holds no personal data)."
        )

    def private_tables(self) -> tuple[TablePolicy, ...]:
        """The private tables, in policy order."""
        return tuple(t for t in self.tables.values() if not t.public)

    def public_tables(self) -> tuple[TablePolicy, ...]:
        """The public tables, in policy order."""
        return tuple(t for t in self.tables.values() if t.public)

    # ---- serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The policy-file form; ``Policy.from_dict(p.to_dict()) == p``."""
        d: dict[str, Any] = {"tables": {n: t.to_dict() for n, t in self.tables.items()}}
        if self.notes:
            d["notes"] = list(self.notes)
        return d

    def to_yaml(self) -> str:
        """The policy as YAML text; ``Policy.from_yaml(p.to_yaml()) == p``."""
        d = self.to_dict()
        text = yaml.safe_dump(d, sort_keys=False, allow_unicode=True)
        if yaml.safe_load(text) != d:  # PyYAML writes some characters (e.g. U+0085) raw
            text = yaml.safe_dump(d, sort_keys=False, allow_unicode=False)
        return text

    # ---- display -----------------------------------------------------------------------------

    def __repr__(self) -> str:
        """One line naming each table (the dataclass default printed every column of every
        table); ``to_yaml()`` or the notebook view show the whole policy."""
        parts = [f"{t.qualified_name} (" + ("public" if t.public else
                                            f"private, unit {t.privacy_unit}, {t.neighbourhood}")
                 + f", {len(t.columns)} columns)" for t in self.tables.values()]
        text = f"Policy({'; '.join(parts)})"
        return text if len(text) <= 160 else text[:156] + " …)"

    def _repr_html_(self) -> str:
        """The notebook view: every table and column (see :func:`privplan.views.html.policy_html`)."""
        from privplan.policy.html import policy_html

        return policy_html(self)


@functools.lru_cache(maxsize=8)
def _policy_of_yaml(text: str, label: str) -> Policy:
    """The policy written in ``text``, parsed and checked once per process and text: a file
    read again (a session per request) gives the same frozen Policy, without parsing a long
    ``public_values`` list again. A policy is immutable, so sharing one object is safe; a
    changed file is another text (errors are not cached: they are raised every time)."""
    try:
        return Policy(*_parse_policy(_load_yaml(text), _Loc()))
    except PolicyError as e:
        if label == "<text>":
            raise
        raise PolicyError(f"{label}: {e}") from None
