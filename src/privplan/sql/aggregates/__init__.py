"""Aggregates as rows: the one table parsing, the measures, post-processing and accuracy read.

Each aggregate function is one :class:`~privplan.sql.aggregates.base.Aggregate` row, defined in
its family's module (``counts``: COUNT and SUM; ``moments``: AVG, VAR and STDDEV;
``quantile``: the quantiles, MIN and MAX) and registered by one line below. The parser's
spellings (:mod:`privplan.sql.parse`), the builder's reading of a call and the measures it
makes (:mod:`privplan.sql.builder`, :mod:`privplan.sql.measures`), the released value
(:func:`privplan.rewrite.postprocess.derived_values`), its interval
(:mod:`privplan.assemble`) and a report's expected error (:mod:`privplan.report.
expected_errors`) read the row of :attr:`AggregateUse.func <privplan.sql.plan.AggregateUse.
func>` instead of branching on the name. A new aggregate is its row plus its registration line.

Privacy: a query is answered only through a registered row; any other aggregate is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from sqlglot import exp

from privplan.sql.aggregates import counts, moments, quantile
from privplan.sql.aggregates.base import PARTS, Aggregate, Part, measure_ids

__all__ = ["AGGREGATES", "ANON", "CONTRIBUTION_BOUNDS", "PARTS", "SPELLINGS", "Aggregate", "Part", "aggregate_of",
           "measure_ids", "supported"]


def _registry(*rows: Aggregate) -> Mapping[str, Aggregate]:
    """The rows by name, each name, node and spelling registered once."""
    keys = {"name": [r.name for r in rows], "node": [n.__qualname__ for r in rows for n in r.nodes],
            "spelling": [s.lower() for r in rows for s in r.spellings],
            "ANON_ name": [a.upper() for r in rows for a in r.anon]}
    for what, items in keys.items():
        twice = {i for i in items if items.count(i) > 1}
        assert not twice, f"aggregates registered twice by {what}: {twice}"
    unbounded = [r.name for r in rows if r.anon and r.contribution_bounds is None]
    assert not unbounded, f"aggregates with ANON_ names but no contribution bounds: {unbounded}"
    return MappingProxyType({r.name: r for r in rows})


AGGREGATES: Mapping[str, Aggregate] = _registry(  # one registration line per aggregate
    counts.COUNT,
    counts.SUM,
    moments.AVG,
    moments.VAR_POP,
    moments.VAR_SAMP,
    moments.STDDEV_POP,
    moments.STDDEV_SAMP,
    moments.SEM,
    quantile.QUANTILE,
)
"""Every aggregate privplan answers, by :attr:`Aggregate.name`, in registration order."""

_BY_NODE: Mapping[type[exp.Expr], Aggregate] = MappingProxyType(
    {node: row for row in AGGREGATES.values() for node in row.nodes})

SPELLINGS: Mapping[str, type[exp.Expression]] = MappingProxyType(
    {s.lower(): row.nodes[0] for row in AGGREGATES.values() for s in row.spellings})
"""Other names of registered aggregates (lower case), and the node each is parsed as."""


ANON: Mapping[str, str] = MappingProxyType(
    {f"ANON_{name}": name for row in AGGREGATES.values() for name in row.anon})
"""BigQuery's ANON_ functions, each to the name of the registered aggregate it is."""

CONTRIBUTION_BOUNDS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    kind: tuple(n for row in AGGREGATES.values() if row.contribution_bounds == kind
                for n in row.anon) for kind in ("per_group", "per_row")})
"""The BigQuery names that take ``contribution_bounds_per_group`` (COUNT, SUM, AVG) and
``contribution_bounds_per_row`` (VAR_POP, STDDEV_POP, PERCENTILE_CONT)."""


def aggregate_of(node: exp.Expr) -> Aggregate | None:
    """The row of an aggregate call node (without its FILTER), or None: not one privplan
    answers."""
    return _BY_NODE.get(type(node))


def supported() -> str:
    """The aggregates privplan answers, as a refusal lists them."""
    listed = [row.listed for row in AGGREGATES.values() if row.listed]
    return ", ".join(listed[:-1]) + ", and " + listed[-1]
