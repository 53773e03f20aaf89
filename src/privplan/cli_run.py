"""How every ``privplan`` command ends: its exit status, and errors printed as one readable line.

Shared by :mod:`privplan.cli` and :mod:`privplan.cli_report` (which used to import each other).
A budget refusal exits with :data:`EXIT_BUDGET`, any other privplan error with
:data:`EXIT_USAGE`; a check that finds a problem (``ledger verify``) returns :data:`EXIT_FOUND`.
"""

from __future__ import annotations

import argparse
import os
import sys

from privplan.cli_args import check_args
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
        budget = isinstance(err, BudgetExceededError)  # (its message says what it is)
        first, _, rest = str(err).partition("\n")
        print(f"privplan: {first}" if budget else f"privplan: {type(err).__name__}: {first}",
              file=sys.stderr)
        if rest:
            print(rest, file=sys.stderr)
        return EXIT_BUDGET if budget else EXIT_USAGE
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
