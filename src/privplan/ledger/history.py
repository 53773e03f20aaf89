"""What ``explain`` reads of a SQLite ledger: its last entries, and the entries of named
queries — never the whole history (DESIGN.md §6: ``explain`` reads what ``sql`` reads).

Why reading the last entries is as safe as reading from the root: the entries are checked
hash by hash from the stored hash of the entry before them up to the head this process verified
(:func:`~privplan.ledger.chain.verify_suffix`); any change in between would have to be a
SHA-256 collision.

Privacy: what explain reads is verified hash by hash back to the head this process verified.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from privplan.accounting.model import MechanismSpec
from privplan.ledger.chain import ChainHead, changed, verify_suffix
from privplan.ledger.codec import decode_mechanism
from privplan.ledger.record import Record
from privplan.ledger.txn import FIELDS


class LedgerHistory:
    """The history reads of :class:`~privplan.ledger.store.SQLiteLedger` (its base class)."""

    con: Any  # (set by SQLiteLedger, with the attributes below)
    path: Any
    _lock: Any
    _verified: ChainHead
    _recent: list[tuple[int, str, list[MechanismSpec]]]
    _recent_limit: int

    def recent_mechanisms(self, limit: int) -> list[MechanismSpec]:
        """The mechanisms of the last ``limit`` entries, in order, verified against the head
        (hash by hash from the entry before them: :func:`verify_suffix`), not from the root.
        Kept between calls: a later call decodes only the entries added since."""
        with self._lock, self._reading():
            record, head = self._advance()
            first = max(1, head.seq - limit + 1)
            kept = [r for r in self._recent if r[0] >= first] if limit == self._recent_limit \
                else []
            if kept:
                rows = self._suffix(record, kept[-1][0] + 1, ChainHead(kept[-1][0], kept[-1][1]))
            else:
                rows = self._suffix(record, first)
        self._recent_limit = limit
        self._recent = kept + [(int(r[0]), str(r[7]), [decode_mechanism(m)
                                                       for m in json.loads(r[6])])
                               for r in rows]
        return [m for _, _, specs in self._recent for m in specs]

    def mechanisms_of(self, query_ids: Collection[str]) -> list[MechanismSpec]:
        """The mechanisms of the entries of ``query_ids`` (verified as in
        :meth:`recent_mechanisms`, from the earliest of them)."""
        if not query_ids:
            return []
        with self._lock, self._reading():
            self._advance()
            marks = ", ".join("?" * len(query_ids))
            (first,) = self.con.execute(f"SELECT MIN(seq) FROM entries WHERE query_id IN "
                                        f"({marks})", tuple(query_ids)).fetchone()
            rows = [] if first is None else self._suffix(self._record(), int(first))
        wanted = set(query_ids)
        return [decode_mechanism(m) for r in rows if r[1] in wanted for m in json.loads(r[6])]

    def _suffix(self, record: Record, first: int, before: ChainHead | None = None
                ) -> list[tuple[Any, ...]]:
        """Entries ``first`` .. the verified head (with their hashes), checked to lead to it
        from entry ``first - 1`` (``before``, or as stored; for the first entry, the root)."""
        rows = self.con.execute(f"SELECT {FIELDS}, hash FROM entries WHERE seq >= ? AND "
                                "seq <= ? ORDER BY seq", (first - 1, self._verified.seq)
                                ).fetchall()
        if rows and int(rows[0][0]) == first - 1:
            if before is None:
                before = ChainHead(first - 1, str(rows[0][7]))
            rows = rows[1:]
        if first == 1:
            before = record.start()
        elif before is None:
            raise changed(self.path, f"entry {first - 1} is missing")
        verify_suffix(self.path, before, rows, self._verified)
        return rows

    # (defined by SQLiteLedger)
    def _reading(self) -> Any:
        raise NotImplementedError

    def _advance(self) -> tuple[Record, ChainHead]:
        raise NotImplementedError

    def _record(self) -> Record:
        raise NotImplementedError
