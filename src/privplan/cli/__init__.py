"""The ``privplan`` command (:mod:`privplan.cli.commands`); its argument checks, ledger and
report subcommands and exit handling live beside it in this package."""

from __future__ import annotations

from privplan.cli.commands import (
    EXIT_BUDGET,
    EXIT_FOUND,
    EXIT_USAGE,
    build_parser,
    main,
)

__all__ = [
    "EXIT_BUDGET", "EXIT_FOUND", "EXIT_USAGE", "build_parser", "main",
]
