"""The owner key and the seal: what catches a ledger rewritten on purpose, or put back.

Why: the hash chain (:mod:`privplan.ledger.chain`) has no secret. Whoever can write the ledger
file and compute SHA-256 can drop its last entries and recompute the head, and a copy of the
file taken earlier (or another ledger with the same budget and policy) is a valid chain too:
putting it back gives spent budget back. Two things close that, when the data owner sets a key
that the analyst cannot read (``PRIVPLAN_LEDGER_KEY_FILE``: a file of at least 16 bytes readable
by the process that runs privplan only, or ``PRIVPLAN_LEDGER_KEY``; or ``key=`` to
:class:`~privplan.ledger.store.SQLiteLedger`):

* **the head MAC**: ``HMAC(key, ledger id, root, last entry)`` in the ledger's meta row, written
  in the same transaction as each entry. An edit of the file that changes what it records, even
  one that recomputes every hash, no longer matches it.
* **the seal**: a small file beside the ledger (``<ledger>.seal``, or in
  ``PRIVPLAN_LEDGER_SEAL_DIR``) naming the ledger's id and its last sealed entry, with its HMAC,
  advanced after each commit (never backwards). A session refuses a ledger that does not hold
  the sealed entry: an older copy, another ledger, or a truncated one.

What stays possible: whoever can write *both* the ledger and the seal can put back an older
pair (or delete both: a new ledger). Keep the seal where the analyst cannot write
(``PRIVPLAN_LEDGER_SEAL_DIR``) to close that too. Without a key, neither check runs; then only
``privplan ledger backup`` copies and the owner's file permissions protect against rollback.

Privacy: with the owner key, a ledger rewritten with recomputed hashes, or put back, is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path

from privplan.errors import LedgerError
from privplan.ledger.chain import ChainHead

KEY_ENV = "PRIVPLAN_LEDGER_KEY"
KEY_FILE_ENV = "PRIVPLAN_LEDGER_KEY_FILE"
SEAL_DIR_ENV = "PRIVPLAN_LEDGER_SEAL_DIR"
_MIN_KEY = 16


def owner_key(key: bytes | str | None = None) -> bytes | None:
    """The owner key: ``key`` if given, else the file named by ``PRIVPLAN_LEDGER_KEY_FILE``,
    else ``PRIVPLAN_LEDGER_KEY``; None when none is set."""
    if key is None:
        file = os.environ.get(KEY_FILE_ENV)
        if file:
            try:
                key = Path(file).read_bytes().strip()
            except (OSError, ValueError) as err:
                raise LedgerError(
                    f"the ledger owner key file '{file}' ({KEY_FILE_ENV}) cannot be read: "
                    f"{getattr(err, 'strerror', None) or err}. Check the path and that this "
                    "process may read it.") from None
        else:
            key = os.environ.get(KEY_ENV) or None
    if key is None:
        return None
    raw = key.encode() if isinstance(key, str) else bytes(key)
    if len(raw) < _MIN_KEY:
        raise LedgerError(f"the ledger owner key is {len(raw)} bytes; use at least {_MIN_KEY} "
                          "random bytes (e.g. `head -c 32 /dev/urandom > key`).")
    return raw


def head_mac(key: bytes, ledger_id: str, root: str, head: ChainHead) -> str:
    """The owner's MAC over the ledger's last entry (and what the chain starts from)."""
    text = json.dumps(["privplan-ledger-3/head-mac", ledger_id, root, head.seq, head.hash],
                      separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def seal_path(ledger: Path) -> Path:
    """Where a ledger's seal is kept: ``PRIVPLAN_LEDGER_SEAL_DIR`` (named after the ledger's
    full path, so one directory serves many ledgers), else beside the ledger."""
    folder = os.environ.get(SEAL_DIR_ENV)
    if folder:
        where = str(ledger.resolve())
        tag = hashlib.sha256(where.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return Path(folder) / f"{ledger.name}.{tag}.seal"
    return ledger.with_name(ledger.name + ".seal")


@dataclass(frozen=True)
class Seal:
    """The last entry the owner's key sealed: (ledger id, seq, hash)."""

    ledger_id: str
    head: ChainHead


def _seal_mac(key: bytes, ledger_id: str, head: ChainHead) -> str:
    text = json.dumps(["privplan-ledger-3/seal", ledger_id, head.seq, head.hash],
                      separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def read_seal(path: Path, key: bytes) -> Seal | None:
    """The seal at ``path`` (None if there is none). A seal that does not verify under the
    key is refused: it was edited, or it was made with another key."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise LedgerError(f"the ledger seal '{path}' cannot be read ({err}). Restore it, or "
                          "run `privplan ledger seal` to make a new one.") from None
    try:
        doc = json.loads(text)
        seal = Seal(str(doc["ledger"]), ChainHead(int(doc["seq"]), str(doc["hash"])))
        mac = str(doc["mac"])
    except (ValueError, KeyError, TypeError):
        mac, seal = "", Seal("", ChainHead(0, ""))
    if not hmac.compare_digest(mac, _seal_mac(key, seal.ledger_id, seal.head)):
        raise LedgerError(
            f"the ledger seal '{path}' does not verify under the owner key: it was changed, or "
            "it was made with another key. Nothing was charged. If you (the owner) know why, "
            "run `privplan ledger seal` on the ledger to make a new one.")
    return seal


def write_seal(path: Path, key: bytes, ledger_id: str, head: ChainHead, *,
               force: bool = False) -> None:
    """Advance the seal to ``head`` (never backwards unless ``force``, the owner re-sealing).
    Runs under an exclusive ``flock`` on the seal's directory (never on the ledger file: closing
    a descriptor of it would drop SQLite's locks), so two processes cannot move it back;
    written to a temporary file and renamed, so a crash leaves the old seal or the new one."""
    import fcntl  # (POSIX; only a keyed ledger writes a seal)

    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError as err:
        raise LedgerError(f"the ledger seal's directory '{path.parent}' cannot be opened: "
                          f"{err.strerror or err}.") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not force:
            with contextlib.suppress(LedgerError):
                now = read_seal(path, key)
                if now is not None and now.ledger_id == ledger_id and now.head.seq >= head.seq:
                    return
        doc = {"ledger": ledger_id, "seq": head.seq, "hash": head.hash,
               "mac": _seal_mac(key, ledger_id, head)}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(doc) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as err:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise LedgerError(f"the ledger seal '{path}' cannot be written: "
                              f"{err.strerror or err}. Check that its directory is writable."
                              ) from None
        with contextlib.suppress(OSError):
            os.fsync(fd)  # (the rename is durable)
    finally:
        os.close(fd)  # (releases the flock)


def check_seal(path: Path, ledger: Path, seal: Seal | None, ledger_id: str, head: ChainHead,
               sealed_hash: str | None) -> None:
    """Refuse a ledger that does not hold its sealed entry. ``sealed_hash``: the stored hash of
    the ledger's entry at the seal's seq (the root for 0), None if there is no such entry."""
    if seal is None:
        if head.seq == 0:
            return  # nothing charged yet: the seal is written with the first commit
        raise LedgerError(
            f"ledger '{ledger}' is kept under the owner key but its seal '{path}' is missing, "
            "so an older copy of the ledger could not be told apart. Nothing was charged. "
            "Restore the seal; or, if you (the owner) know this file is the latest, run "
            "`privplan ledger seal` on it.")
    if seal.ledger_id != ledger_id:
        raise LedgerError(
            f"ledger '{ledger}' is not the ledger its seal '{path}' names (another ledger file "
            "was put in its place). Nothing was charged. Put the sealed ledger back, or run "
            "`privplan ledger seal` if this file is meant to replace it.")
    if seal.head.seq > head.seq or sealed_hash != seal.head.hash:
        raise LedgerError(
            f"ledger '{ledger}' was rolled back: its seal '{path}' names entry {seal.head.seq}, "
            f"which the file {'does not hold' if seal.head.seq > head.seq else 'holds changed'} "
            f"(it ends at entry {head.seq}). An older copy would give spent budget back, so "
            "nothing was charged. Restore the latest ledger.")
