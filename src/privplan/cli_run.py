"""How every ``privplan`` command ends: its exit status, and errors printed as one readable line.

Shared by :mod:`privplan.cli` and :mod:`privplan.cli_report` (which used to import each other).
A budget refusal exits with :data:`EXIT_BUDGET`, any other privplan error with
:data:`EXIT_USAGE`; a check that finds a problem (``ledger verify``) returns :data:`EXIT_FOUND`.
"""

from __future__ import annotations

import argparse
import sys

from privplan.errors import BudgetExceededError, PrivplanError

EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command's ``func``; print a privplan error's first line (then its detail)
    on stderr and return its exit status."""
    try:
        return int(args.func(args))
    except PrivplanError as err:
        budget = isinstance(err, BudgetExceededError)  # (its message says what it is)
        first, _, rest = str(err).partition("\n")
        print(f"privplan: {first}" if budget else f"privplan: {type(err).__name__}: {first}",
              file=sys.stderr)
        if rest:
            print(rest, file=sys.stderr)
        return EXIT_BUDGET if budget else EXIT_USAGE
