"""Truth regions: where a predicate is TRUE and where it is FALSE, and the notes on what is
not analysed.

Under SQL's three-valued logic a predicate is TRUE, FALSE or UNKNOWN on each record, so a
predicate's analysis is a *pair* of regions (:class:`TruthRegions`), never one region and its
complement. Both are over-approximations: a record may be missing from a set only if the
predicate is certainly not TRUE (resp. FALSE) on it. The conservative answer for anything not
analysed is (full, full) with a note naming the construct -- sound, because a larger region only
makes disjointness harder to prove.

Privacy: both regions over-approximate; what is not analysed is (full, full) with a note.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from privplan.analysis.node_text import snippet
from privplan.analysis.regions import Region


@dataclass(frozen=True)
class TruthRegions:
    """Over-approximations of where a predicate is TRUE and where it is FALSE.

    Records where the predicate is UNKNOWN (NULL) belong to neither set unless an
    over-approximation put them there.
    """

    true: Region
    false: Region

    def negate(self) -> TruthRegions:
        """``NOT p``: UNKNOWN stays UNKNOWN, so the sets swap (never complement)."""
        return TruthRegions(self.false, self.true)


# --------------------------------------------------------------------------------------------
# Notes
# --------------------------------------------------------------------------------------------


def _snippet(e: exp.Expr) -> str:
    return snippet(e, 80)


def _describe(e: exp.Expr) -> str:
    """What kind of expression this is, for a note."""
    if isinstance(e, exp.Column):
        return f"column {e.name}"
    if isinstance(e, (exp.Subquery, exp.Select, exp.Exists)):
        return "a subquery"
    if isinstance(e, exp.Case):
        return "a CASE expression"
    if isinstance(e, exp.Cast):
        return "a cast of a non-constant"
    if isinstance(e, exp.Func):
        name = e.sql_name() if not isinstance(e, exp.Anonymous) else str(e.this)
        return f"function call {name.upper()}()"
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.DPipe)):
        return "arithmetic"
    return f"expression {e.key.upper()}"


def _unsupported(reason: str, e: exp.Expr) -> TruthRegions:
    note = f"{reason} (`{_snippet(e)}`); assuming the whole domain (conservative)"
    return TruthRegions(Region.full(note), Region.full(note))


_TRUE = TruthRegions(Region.full(), Region.empty())
_FALSE = TruthRegions(Region.empty(), Region.full())
_NEITHER = TruthRegions(Region.empty(), Region.empty())
