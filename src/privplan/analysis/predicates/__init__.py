"""Regions from SQL predicates, under SQL's three-valued logic.

``WHERE p`` makes a mechanism depend on the table only through ``{x : p(x) is TRUE}`` (CSF'24
Definition IV.8), so that set is the mechanism's region. A predicate is TRUE, FALSE or UNKNOWN
(NULL) on each record, and ``NOT`` maps UNKNOWN to UNKNOWN, so the TRUE-set of ``NOT p`` is the
FALSE-set of ``p`` -- never the complement of its TRUE-set (DESIGN.md invariant 6). We therefore
carry both sets, each an over-approximation (invariant 1):

* ``AND``: T = T1 ∩ T2, F = F1 ∪ F2;  ``OR``: T = T1 ∪ T2, F = F1 ∩ F2;  ``NOT`` swaps T and F.
  These are exact on exact inputs and monotone, so over-approximated inputs give
  over-approximated outputs.
* A comparison ``column op constant`` is exact: NULL is in neither set; a NULL operand puts
  every record in neither set. ``column BETWEEN c1 AND c2`` is ``>= AND <=``;
  ``column IN (c1, ...)`` is an ``OR`` of ``=`` (so a NULL item makes it never FALSE). DuckDB
  types IN / BETWEEN operands together, so numbers there are widened when a DOUBLE may round them.
* Anything else (LIKE, function calls, arithmetic, two-column comparisons, subqueries, CASE,
  unknown columns, constants that do not fit the column's type) gets ``(full, full)`` and a note.
* Regions are capped at :data:`MAX_BOXES` boxes; above, the per-column hull (sound, noted).

Literal semantics follow DuckDB (checked against it in the tests). ``int`` and ``date`` columns
are discrete, so their sets are normalised to closed integer / day intervals and emptiness is
exact (``x > 2 AND x < 3`` is empty). ``float`` columns hold binary floating point values
(DOUBLE or REAL) or exact decimals; a literal that one of these would round is widened to the
interval of every value it may round to, so the sets stay sound for all three storage types
(exact for literals that REAL represents exactly, such as ``2.5``). String comparison assumes
the engine's default binary (code point) collation. ``timestamp`` means a timestamp without time
zone. A float NaN, which DuckDB orders above every number, belongs exactly to the sets with an
unbounded upper end (``x > c``, ``x <> c``), so regions stay consistent for it.

Privacy: TRUE- and FALSE-sets over-approximate, NOT swaps them, the rest is (full, full).

>>> import sqlglot
>>> cols = {"age": "int", "grp": "str"}
>>> p = sqlglot.parse_one("NOT (age < 18) AND grp IN ('a', 'b')", dialect="duckdb")
>>> region_of(p, cols)
Region(boxes=(Box(constraints=(('age', {[18, +inf)}), ('grp', {'a', 'b'}))),), notes=())
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from privplan.analysis.predicates.region_algebra import MAX_BOXES, _intersect_sets
from privplan.analysis.predicates.three_valued import COLUMN_TYPES, ColumnType, _Analyser
from privplan.analysis.predicates.truth import TruthRegions
from privplan.analysis.regions import Region

__all__ = [
    "COLUMN_TYPES",
    "MAX_BOXES",
    "ColumnType",
    "TruthRegions",
    "_intersect_sets",
    "region_of",
    "simplify_region",
    "truth_regions",
]


def region_of(predicate: exp.Expression | None, columns: Mapping[str, ColumnType]) -> Region:
    """The region of ``WHERE predicate``: an over-approximation of its TRUE-set.

    ``None`` (no WHERE clause) reads every record, so its region is the whole domain.
    """
    if predicate is None:
        return Region.full()
    return _region(predicate, columns, positive=True)


def truth_regions(predicate: exp.Expression, columns: Mapping[str, ColumnType]) -> TruthRegions:
    """TRUE- and FALSE-regions of a predicate over one table's ``columns`` (name -> type).

    Column references match by name, case-insensitively; any table qualifier is ignored (the
    caller passes a predicate over this one table). The input tree is not modified.
    """
    return TruthRegions(
        _region(predicate, columns, positive=True), _region(predicate, columns, positive=False)
    )


def _region(predicate: exp.Expression, columns: Mapping[str, str], *, positive: bool) -> Region:
    analyser = _Analyser({name.lower(): kind for name, kind in columns.items()})
    try:
        return analyser.visit(predicate, positive)
    except RecursionError:
        note = "predicate is nested too deeply to analyse; assuming the whole domain (conservative)"
        return Region.full(note)


def simplify_region(region: Region, columns: Mapping[str, ColumnType]) -> Region:
    """Canonical per-column sets, merged and absorbed boxes, capped at :data:`MAX_BOXES`.

    The result describes the same set of records (or, above the cap, a superset with a note).
    """
    return _Analyser({name.lower(): kind for name, kind in columns.items()}).finish(region)
