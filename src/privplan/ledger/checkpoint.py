"""The ledger's checkpoint: the composed state of its first entries, so a session opens fast.

Why: composing a ledger means solving the general composition theorem over every mechanism it
holds. Replaying 100,000 entries (decoding each region, then solving) takes seconds, and every
CLI call, report run and pool worker would pay it. So a charging session stores, every
:data:`CHECKPOINT_EVERY` entries (further apart in a long ledger: :data:`CHECKPOINT_SPACING`),
the accountant's solver state after entry ``seq``
(:class:`~privplan.accounting.solver.SolverState`: atom axes, boxes, weights, the worst pair
found), and a new session resumes from it and admits only the entries after ``seq``.

Why it is safe: a checkpoint is a *cache* of what the entries already say. It is bound to the
chain (:func:`binding` hashes it with the hash of entry ``seq`` and the chain's root, so it
belongs to exactly those entries, that budget and that policy); one that does not match, or
cannot be read, is ignored and the state is rebuilt from the entries (which are verified from
the root when read). Restoring gives the very solver that was saved, so the totals are the ones
the saving session computed; ``tests/test_ledger_checkpoint.py`` checks that against a solver
that never saved.

The encoding is data only (JSON for values, raw little-endian arrays of allow-listed dtypes):
a file is never a way to run code (no pickle).

Privacy: a checkpoint is a cache bound by hash to its entries; one that does not bind is ignored.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import struct
from fractions import Fraction
from typing import Any

import numpy as np

from privplan.accounting.solver import SolverState
from privplan.ledger.chain import ChainHead
from privplan.ledger.codec import decode_value, encode_value

__all__ = ["CHECKPOINT_EVERY", "CHECKPOINT_SPACING", "binding", "bound_checkpoint",
           "checkpoint_due", "decode_states", "encode_states"]

CHECKPOINT_EVERY = 32
"""Entries a charging session lets accumulate after the checkpoint before writing a new one,
while the ledger is short (see :data:`CHECKPOINT_SPACING` for a long one): a new session admits
about this many entries beyond the checkpoint. (With 256 a new session's first admission took
about 0.3 s at 100,000 entries; with 32 it stays near 50 ms.)"""

CHECKPOINT_SPACING = 64
"""In a long ledger a checkpoint is due 1/CHECKPOINT_SPACING of its length after the last one,
when that is more than :data:`CHECKPOINT_EVERY`. Writing one is a pass over the whole state
(~5 µs an entry; about 18 MB and 0.2 s at 100,000 entries), so a fixed interval made every
charge pay for the history (about 6 ms a charge amortised at 100,000); spaced by the length the
amortised cost per charge stays constant, and a new session replays at most about 1/64 of the
ledger after the checkpoint (a one-off at open, like restoring it)."""


def checkpoint_due(seen: int, last: int, every: int) -> bool:
    """Whether a checkpoint is due after entry ``seen``, the last one written after ``last``:
    ``every`` entries later, or 1/:data:`CHECKPOINT_SPACING` of the ledger when that is more."""
    return seen - last >= max(every, last // CHECKPOINT_SPACING)


_MAGIC = b"privplan-checkpoint-1\n"
_DTYPES: dict[str, np.dtype[Any]] = {"<i8": np.dtype("<i8"), "<f8": np.dtype("<f8"), "|i1": np.dtype("i1"),
           "|b1": np.dtype("?")}


def binding(seq: int, entry_hash: str, root: str, blob: bytes) -> str:
    """What ties a checkpoint to the chain: the state, the entry it follows, and the root."""
    h = hashlib.sha256(f"privplan-checkpoint|{seq}|{entry_hash}|{root}|".encode())
    h.update(blob)
    return h.hexdigest()


def bound_checkpoint(con: sqlite3.Connection, root: str
                     ) -> tuple[int, bytes, ChainHead] | None:
    """The ledger's stored checkpoint, its entry, and the chain head just before that entry
    (as stored: the entries from it on are verified by the caller), if the checkpoint is bound
    to the chain from ``root``; else None (then it is ignored: it is only a cache)."""
    if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                       "AND name = 'checkpoint'").fetchone():
        return None
    # read as bytes: a damaged checkpoint is ignored, whatever its bytes (or its table's
    # columns) became
    try:
        row = con.execute("SELECT seq, CAST(binding AS BLOB), CAST(state AS BLOB) "
                          "FROM checkpoint WHERE id = 1").fetchone()
    except sqlite3.OperationalError:
        return None
    if row is None or not isinstance(row[0], int) or not isinstance(row[2], bytes):
        return None
    seq, bound, blob = row
    hashes = dict(con.execute("SELECT seq, hash FROM entries WHERE seq IN (?, ?)",
                              (seq - 1, seq)).fetchall())
    if seq not in hashes or bound != binding(seq, hashes[seq], root, blob).encode():
        return None
    return seq, blob, ChainHead(seq - 1, root if seq == 1 else hashes.get(seq - 1, ""))


def _frac(x: Fraction) -> str:
    return f"{x.numerator}/{x.denominator}"


def encode_states(states: list[SolverState]) -> bytes:
    """The solver states as bytes (raises ``LedgerError`` for a value the ledger cannot hold)."""
    tables = []
    chunks: list[bytes] = []
    offset = 0
    for st in states:
        arrays = {}
        for name, arr in st.arrays.items():
            a = np.ascontiguousarray(arr)
            a = a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a
            if a.dtype.str not in _DTYPES:
                raise ValueError(f"cannot store an array of {a.dtype}")
            raw = a.tobytes()
            arrays[name] = [a.dtype.str, list(a.shape), offset, len(raw)]
            chunks.append(raw)
            offset += len(raw)
        tables.append({
            "table": st.table, "kind": st.kind, "exact_limit": st.exact_limit,
            "model": [st.model[0], st.model[1], list(st.model[2])],
            "columns": list(st.columns),
            "axes": [[encode_value(v) for v in axis] for axis in st.axes],
            "poisoned": list(st.poisoned), "headroom": st.headroom, "widened": st.widened,
            "notes": list(st.notes),
            "scales": [[None if d is None else str(d), str(t), repr(tol)]
                       for d, t, tol in st.scales],
            "ids": st.ids, "wx_table": [[_frac(w) for w in ws] for ws in st.wx_table],
            "keys_table": [list(k) for k in st.keys_table],
            "bests": {name: [[_frac(v), e, [list(c) for c in cells], note]
                             for v, e, cells, note in bs] for name, bs in st.bests.items()},
            "arrays": arrays,
        })
    header = json.dumps({"tables": tables}, separators=(",", ":"),
                        ensure_ascii=False).encode("utf-8", "surrogatepass")
    return b"".join([_MAGIC, struct.pack("<Q", len(header)), header, *chunks])


def _strings(value: Any) -> list[str]:
    """The mechanism ids (the checkpoint's binding already vouches for every byte of them)."""
    if not isinstance(value, list):
        raise TypeError("mechanism ids must be a list")
    return value


def decode_states(blob: bytes) -> list[SolverState]:
    """The solver states :func:`encode_states` wrote. Raises ``ValueError`` (or another
    exception of the decoders) for bytes it did not write; callers treat any failure as "no
    checkpoint"."""
    if not blob.startswith(_MAGIC):
        raise ValueError("not a privplan checkpoint")
    at = len(_MAGIC)
    (n,) = struct.unpack_from("<Q", blob, at)
    at += 8
    header: dict[str, Any] = json.loads(blob[at:at + n].decode("utf-8", "surrogatepass"))
    data = memoryview(blob)[at + n:]
    states = []
    for t in header["tables"]:
        arrays = {}
        for name, (dtype, shape, offset, nbytes) in t["arrays"].items():
            dt = _DTYPES[dtype]
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if count * dt.itemsize != nbytes or offset < 0 or offset + nbytes > len(data):
                raise ValueError(f"array {name!r} does not fit the checkpoint")
            arrays[name] = np.frombuffer(data, dtype=dt, count=count,
                                         offset=offset).reshape(shape)
        states.append(SolverState(
            table=str(t["table"]), kind=str(t["kind"]), exact_limit=int(t["exact_limit"]),
            model=(str(t["model"][0]), int(t["model"][1]), tuple(map(str, t["model"][2]))),
            columns=tuple(map(str, t["columns"])),
            axes=tuple(tuple(decode_value(v) for v in axis) for axis in t["axes"]),
            poisoned=tuple(map(str, t["poisoned"])), headroom=int(t["headroom"]),
            widened=bool(t["widened"]), notes=tuple(map(str, t["notes"])),
            scales=tuple((None if d is None else int(d), int(tot), float(tol))
                         for d, tot, tol in t["scales"]),
            ids=_strings(t["ids"]),
            wx_table=[tuple(Fraction(w) for w in ws) for ws in t["wx_table"]],
            keys_table=[tuple(int(k) for k in ks) for ks in t["keys_table"]],
            arrays=arrays,
            bests={str(name): tuple((Fraction(v), bool(e), tuple(tuple(int(x) for x in c)
                                                                  for c in cells), str(note))
                                    for v, e, cells, note in bs)
                   for name, bs in t["bests"].items()},
        ))
    return states
