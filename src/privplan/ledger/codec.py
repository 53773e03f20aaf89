"""Lossless JSON encoding of charged mechanisms (regions, partitions, exact costs) for the ledger.

Every value keeps its type (int, exact Fraction, float, str, bool, date, datetime, Decimal) so
a ledger re-read later composes to exactly the same total.

Privacy: decoding gives back exactly what was encoded: a re-read ledger composes to the same total.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction
from typing import Any

from privplan.accounting.definitions import kind_named
from privplan.accounting.model import GROWTHS, MechanismSpec, Partition
from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet, Interval
from privplan.errors import LedgerError


def encode_value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, Fraction):
        return {"frac": f"{v.numerator}/{v.denominator}"}
    if isinstance(v, float):
        return {"float": repr(v)}
    if isinstance(v, Decimal):
        return {"dec": str(v)}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, dt.datetime):
        return {"ts": v.isoformat()}
    if isinstance(v, dt.date):
        return {"date": v.isoformat()}
    raise LedgerError(f"cannot record a region value of type {type(v).__name__}")


def decode_value(d: Any) -> Any:
    if d is None:
        return None
    (tag, raw), = d.items()
    if tag == "bool":
        return bool(raw)
    if tag == "int":
        return int(raw)
    if tag == "frac":
        return Fraction(raw)
    if tag == "float":
        return float(raw)
    if tag == "dec":
        return Decimal(raw)
    if tag == "str":
        return str(raw)
    if tag == "ts":
        return dt.datetime.fromisoformat(raw)
    if tag == "date":
        return dt.date.fromisoformat(raw)
    raise LedgerError(f"unknown value tag {tag!r} in the ledger")


def encode_cost(cost: Any) -> dict[str, Any]:
    return {"kind": type(cost).__name__,
            "weights": [f"{w.numerator}/{w.denominator}" for w in cost.weights()]}


def decode_cost(d: dict[str, Any]) -> Any:
    kind = kind_named(d["kind"])
    if kind is None:
        raise LedgerError(f"unknown privacy definition {d['kind']!r} in the ledger")
    return kind.from_weights(tuple(Fraction(w) for w in d["weights"]))


def encode_region(region: Region) -> dict[str, Any]:
    return {
        "boxes": [
            [
                [col, {"null": s.null, "intervals": [
                    [encode_value(iv.lo), encode_value(iv.hi), iv.lo_closed, iv.hi_closed]
                    for iv in s.intervals]}]
                for col, s in box.constraints
            ]
            for box in region.boxes
        ],
        "notes": list(region.notes),
    }


def decode_region(d: dict[str, Any]) -> Region:
    boxes = []
    for box in d["boxes"]:
        constraints = {}
        for col, s in box:
            intervals = [Interval(decode_value(lo), decode_value(hi), lc, hc)
                         for lo, hi, lc, hc in s["intervals"]]
            constraints[col] = ColumnSet.of(intervals, s["null"])
        boxes.append(Box.of(constraints))
    return Region.of(boxes, d.get("notes", ()))


def encode_mechanism(m: MechanismSpec) -> dict[str, Any]:
    part = None
    if m.partition is not None:
        part = {"keys": list(m.partition.keys),
                "key_columns": list(m.partition.key_columns)
                if m.partition.key_columns is not None else None,
                "max_groups_per_unit": m.partition.max_groups_per_unit}
        if m.partition.max_rows_per_group is not None:
            part["max_rows_per_group"] = m.partition.max_rows_per_group
    out = {"id": m.id, "table": m.table, "region": encode_region(m.region),
           "cost": encode_cost(m.cost), "partition": part, "label": m.label}
    if m.growth != "flat":  # entries written before per-row growth are all flat
        out["growth"] = m.growth
    return out


def decode_mechanism(d: dict[str, Any]) -> MechanismSpec:
    p = d.get("partition")
    part = None
    if p is not None:
        part = Partition(keys=tuple(p["keys"]),
                         key_columns=tuple(p["key_columns"]) if p["key_columns"] is not None
                         else None,
                         max_groups_per_unit=p["max_groups_per_unit"],
                         max_rows_per_group=p.get("max_rows_per_group"))
    growth = d.get("growth", "flat")
    if growth not in GROWTHS:
        raise ValueError(f"unknown cost growth {growth!r}")
    return MechanismSpec(id=d["id"], table=d["table"], region=decode_region(d["region"]),
                         cost=decode_cost(d["cost"]), partition=part, label=d.get("label", ""),
                         growth=growth)
