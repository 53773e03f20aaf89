"""How every ``privplan`` command ends: its exit status, and errors printed as one readable line.

Shared by :mod:`privplan.cli.commands` and :mod:`privplan.cli.report` (which used to import each other).
A budget refusal exits with :data:`EXIT_BUDGET`, any other privplan error with
:data:`EXIT_USAGE`; a check that finds a problem (``ledger verify``) returns :data:`EXIT_FOUND`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from privplan.accounting.definitions import budget_keywords
from privplan.cli.args import check_args
from privplan.errors import BudgetExceededError, PrivplanError

EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command's ``func``; print a privplan error's first line (then its detail)
    on stderr and return its exit status. Whatever else escapes is one line too, never a
    traceback (``PRIVPLAN_DEBUG=1`` shows it): a file error names the file and the cause; any
    other exception only its type (a bug: its message could quote data)."""
    try:
        check_args(args, **getattr(args, "checks", {}))
        return int(args.func(args))
    except PrivplanError as err:
        return say_error(err)
    except OSError as err:  # (a path the argument checks could not foresee: a race, a disk)
        if os.environ.get("PRIVPLAN_DEBUG"):
            raise
        where = f"{err.filename}: " if err.filename is not None else ""
        print(f"privplan: {where}{err.strerror or err}", file=sys.stderr)
        return EXIT_USAGE
    except UnicodeDecodeError:
        if os.environ.get("PRIVPLAN_DEBUG"):
            raise
        print("privplan: a file given is not UTF-8 text (a binary file, or the wrong file?)",
              file=sys.stderr)
        return EXIT_USAGE
    except Exception as err:
        if os.environ.get("PRIVPLAN_DEBUG"):
            raise
        print(f"privplan: InternalError: unexpected {type(err).__name__}; please report it "
              "(PRIVPLAN_DEBUG=1 shows the traceback)", file=sys.stderr)
        return EXIT_USAGE


def say_error(err: PrivplanError) -> int:
    """Print a privplan error on stderr in the command line's words (its first line, then the
    detail) and return its exit status."""
    budget = isinstance(err, BudgetExceededError)  # (its message says what it is)
    first, _, rest = flag_words(str(err)).partition("\n")
    print(f"privplan: {first}" if budget else f"privplan: {type(err).__name__}: {first}",
          file=sys.stderr)
    if rest:
        print(rest, file=sys.stderr)
    return EXIT_BUDGET if budget else EXIT_USAGE


_KEYWORD = re.compile(r"(?<![\w.\-])(" + "|".join(map(re.escape, (*budget_keywords(), "ledger")))
                      + r")=(\.\.\.|[-+]?[0-9][0-9.eE+\-]*)?")
"""A Python keyword of the API (each registered definition's budget keywords, ``ledger``)."""
_SQL_OPTIONS = re.compile(r"OPTIONS\s*\([^)]*\)", re.IGNORECASE)
_PHRASES = (("composition='additive'", "--composition additive"),
            ("(pp.ApproxDP, additive composition)", "(--epsilon with --delta, additive composition)"),
            ("as an argument", "as a flag"))


def flag_words(message: str) -> str:
    """``message`` with the Python keywords it names (``epsilon=``, ``delta=1e-6``,
    ``ledger=...``) said as the command's flags (``--epsilon``, ``--delta 1e-6``, ``--ledger``).

    Why: the library raises its errors far below the command line, in the words of the Python
    API, and a command-line user cannot type ``epsilon=``. Only the words change (the SQL's own
    ``OPTIONS(epsilon=...)`` is left as written), so nothing is added to what the message says."""
    kept: list[str] = []

    def keep(m: re.Match[str]) -> str:
        kept.append(m.group(0))
        return f"\x00{len(kept) - 1}\x00"

    text = _SQL_OPTIONS.sub(keep, message)
    for python, flag in _PHRASES:
        text = text.replace(python, flag)
    text = _KEYWORD.sub(lambda m: f"--{m.group(1)}" + (f" {m.group(2)}" if m.group(2) else ""),
                        text)
    return re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m.group(1))], text)
