"""How the ``privplan`` command writes: JSON as UTF-8 with ISO 8601 times, text that never fails.

Why: ``--json`` output is read by programs and by people. ``json.dumps`` escapes every
non-ASCII character (``"\\u03b5=1"`` for ``"ε=1"``), and a ledger's times are seconds since 1970;
both are valid JSON and both are unreadable. :func:`emit_json` writes the characters themselves,
encoded as UTF-8 (the encoding JSON is defined in) even where the terminal's encoding is ASCII or
Latin-1, and :func:`iso_time` turns a time into ISO 8601 in UTC with its offset
(``2026-01-31T09:30:00+00:00``). :func:`tolerant_text` keeps the text output of a terminal that
cannot show ``ε`` from ending in a ``UnicodeEncodeError``: it shows ``\\u03b5`` there instead.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import sys
from typing import Any

__all__ = ["emit_json", "iso_time", "tolerant_text"]


def iso_time(seconds: float) -> str:
    """A time (seconds since the epoch) as ISO 8601 in UTC with its offset, to the second."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout, its characters as they are, in UTF-8."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n"
    out = sys.stdout
    encoding = (getattr(out, "encoding", None) or "").replace("-", "").replace("_", "").lower()
    buffer = getattr(out, "buffer", None)
    if encoding == "utf8" or buffer is None:
        out.write(text)
        return
    out.flush()  # (what was printed before goes first)
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def tolerant_text() -> None:
    """Let stdout and stderr show what their encoding cannot (``ε`` on an ASCII terminal) as
    escapes rather than fail: a command that charged its budget must still print its answer."""
    for stream in (sys.stdout, sys.stderr):
        if not isinstance(stream, io.TextIOWrapper):
            continue
        try:
            "ε δ ρ μ".encode(stream.encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            stream.reconfigure(errors="backslashreplace")
