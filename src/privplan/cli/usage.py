"""The ``privplan`` command's argument mistakes, said as privplan says every other mistake.

Why: argparse answers a missing flag, an unknown flag or a word where a number goes with a usage
block and one bare line (``privplan prepare: error: the following arguments are required:
--policy``) that says what is wrong but not why the flag matters or what to type, and it exits
from inside the parser. :class:`Parser` (argparse's parser with another ``error``) turns each of
those into a :class:`~privplan.errors.PolicyError` whose message names the flag, why the command
needs it and the command line that fixes it; :func:`privplan.cli.commands.main` prints it as one line
(``privplan: PolicyError: ...``) and exits with status 2, before anything is opened or spent.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from privplan.errors import PolicyError

# why each command needs an argument it requires (by its dest), and what to type for it
_WHY: dict[str, tuple[str, str]] = {
    "sql": ("it is the query to answer", "'SELECT COUNT(*) FROM visits'"),
    "database": ("it is the data the query reads", "--database data.duckdb"),
    "policy": ("the policy says which tables are private and how far each value may reach; "
               + "privplan never guesses it", "--policy policy.yaml"),
    "ledger": ("the ledger is the file that records what was spent",
               "--ledger data.ledger.sqlite"),
    "out": ("the results and the audit file are written there", "--out report-2026-01"),
    "spec": ("the report spec names the queries and the budget", "report.yaml"),
    "path": ("it is the ledger file to work on", "data.ledger.sqlite"),
    "dest": ("it is where the copy is written", "backup.ledger.sqlite"),
    "audit": ("it is the report's audit file", "out/audit.json"),
}
_SUBCOMMAND_DESTS = ("command", "ledger_command", "report_command", "audit_command")


class Parser(argparse.ArgumentParser):
    """argparse's parser whose mistakes are :class:`PolicyError` with what, where, why and fix
    (its subcommands' parsers are of this class too: argparse makes them of the parent's)."""

    def error(self, message: str) -> NoReturn:
        raise PolicyError(usage_message(self, message))

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            raise PolicyError(_unknown(_command_parser(self, parsed), extras))
        return parsed


def _command_parser(top: argparse.ArgumentParser, args: argparse.Namespace
                    ) -> argparse.ArgumentParser:
    """The (sub)command's own parser: the one whose flags an unknown flag is compared with."""
    parser = top
    for dest in _SUBCOMMAND_DESTS:
        name = getattr(args, dest, None)
        sub = _subcommands(parser)
        if name is None or name not in sub:
            continue
        parser = sub[name]
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--")]


def _help(parser: argparse.ArgumentParser) -> str:
    return f"`{parser.prog} --help` shows every option"


def _unknown(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    first = extras[0]
    if first.startswith("-"):
        name = first.split("=", 1)[0]
        close = difflib.get_close_matches(name, _flags(parser), n=1, cutoff=0.6)
        fix = (f"did you mean {close[0]}?" if close
               else f"use one of its options ({_help(parser)})")
        if name == "--version":  # (privplan's own flag, given after a command)
            fix = "ask privplan itself: `privplan --version`"
        return (f"unknown option {name} for `{parser.prog}`: it takes no such flag, so the "
                f"command would not do what was asked. Fix: {fix}")
    shown = first if len(first) <= 60 else first[:57] + "..."
    return (f"unexpected argument '{shown}' for `{parser.prog}`: it takes no more positional "
            "arguments, so the command would not do what was asked. Fix: quote an argument "
            "that has spaces (the SQL as one argument), or drop the extra word "
            f"({_help(parser)}).")


def usage_message(parser: argparse.ArgumentParser, message: str) -> str:
    """argparse's one-line ``message`` (raised in ``parser``) said with what, where, why and
    how to fix it."""
    required = re.match(r"the following arguments are required: (.*)", message)
    if required:
        return _missing(parser, [n.strip() for n in required.group(1).split(",")])
    m = re.match(r"argument (\S+?)(?:/\S+)?: (.*)", message)
    if m:
        return _bad_value(parser, m.group(1), m.group(2))
    return f"{message} (in `{parser.prog}`). Fix: see {_help(parser)}."


def _missing(parser: argparse.ArgumentParser, names: list[str]) -> str:
    subs = [n for n in names if n in _SUBCOMMAND_DESTS]
    if subs:
        choices = ", ".join(_subcommands(parser))
        return (f"no command given to `{parser.prog}`: it needs to be told what to do. Fix: "
                f"add one of {choices} (e.g. `{parser.prog} {next(iter(_subcommands(parser)))} "
                f"--help`).")
    flags = list(names)
    dests = [n.lstrip("-").replace("-", "_") for n in names]
    why = "; ".join(f"{n}: {_WHY[d][0]}" for n, d in zip(flags, dests) if d in _WHY)
    example = " ".join(_WHY[d][1] if d in _WHY else f"{n} ..." for n, d in zip(flags, dests))
    what = "missing required argument" + ("s" if len(names) > 1 else "")
    return (f"{what} {', '.join(flags)} for `{parser.prog}`"
            + (f" ({why})" if why else "")
            + f". Fix: add {example} ({_help(parser)}).")


def _bad_value(parser: argparse.ArgumentParser, name: str, problem: str) -> str:
    where = f"`{parser.prog}`" if name in _SUBCOMMAND_DESTS else f"{name} of `{parser.prog}`"
    choice = re.match(r"invalid choice: '?(.*?)'? \(choose from (.*)\)", problem)
    if choice:
        given, allowed = choice.group(1), choice.group(2).replace("'", "")
        close = difflib.get_close_matches(given, [c.strip() for c in allowed.split(",")], n=1)
        command = name in _SUBCOMMAND_DESTS
        what = "unknown command" if command else "unknown value"
        fix = (f"did you mean {parser.prog + ' ' if command else name + ' '}{close[0]}?"
               if close else f"give one of {allowed}.")
        return f"{what} '{given}' for {where}: it is not one of {allowed}. Fix: {fix}"
    typed = re.match(r"invalid (float|int) value: '(.*)'", problem)
    if typed:
        kind, given = typed.groups()
        number = "a number" if kind == "float" else "a whole number"
        example = "0.5" if kind == "float" else "1000"
        return (f"{name} '{given}' is not {number}: {name} takes {number}. Fix: write it as "
                f"{number}, e.g. {name} {example}.")
    if "expected one argument" in problem:
        return (f"{name} has no value: it takes one (the next word on the command line), and "
                f"none was given. Fix: write {name} VALUE ({_help(parser)}).")
    return f"{name}: {problem} (in `{parser.prog}`). Fix: see {_help(parser)}."


def version_text() -> str:
    """``privplan <version>``: the installed distribution's version (the package's own when it
    runs from a source tree that is not installed)."""
    from importlib import metadata

    try:
        version = metadata.version("privplan")
    except metadata.PackageNotFoundError:
        from privplan import __version__ as version
    return f"privplan {version}"


def new_parser(**kwargs: Any) -> Parser:
    """The top-level ``privplan`` parser, with ``--version``."""
    parser = Parser(**kwargs)
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print privplan's version and exit")
    return parser
