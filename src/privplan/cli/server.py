"""``privplan serve`` and ``privplan users add``: the PostgreSQL-protocol server and its analysts.

* ``users add USERS_FILE NAME --epsilon E [--delta D | --rho R | --mu M] [--password-file F]``:
  adds an analyst, reading the password from ``--password-file`` or standard input (asked twice
  on a terminal) and storing only its SCRAM-SHA-256 verifier (:mod:`privplan.server.users`).
  The budget is stored for the next step (per-analyst budgets); this version does not enforce
  it separately: every analyst spends the data's one total, in the server's ledger.
* ``serve --database DB --policy P --ledger L --users U [--listen HOST:PORT] [--tls-cert C
  --tls-key K] [--tls-required] [--statement-timeout SECONDS] [--max-connections-per-user N]
  [--total-epsilon E ...]``: runs :func:`privplan.server.serve`
  until interrupted. The total budget is the ledger's own when it exists; a new ledger needs
  ``--total-epsilon`` (``--total-delta``, ``--total-rho``, ``--total-mu``).

Every check runs before anything is written or listened on; a failing command changes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import signal
import sys
from pathlib import Path
from typing import Any

from privplan.errors import PolicyError

_BUDGET = ("epsilon", "delta", "rho", "mu")


def _password(args: argparse.Namespace) -> str:
    if args.password_file is not None:
        try:
            text = Path(args.password_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise PolicyError(f"--password-file '{args.password_file}' cannot be read "
                              f"({type(err).__name__}). Fix: pass a readable UTF-8 text file "
                              "holding the password.") from None
        return text.removesuffix("\n").removesuffix("\r")
    if sys.stdin.isatty():
        first = getpass.getpass("password: ")
        if getpass.getpass("again: ") != first:
            raise PolicyError("the two passwords differ. Nothing was written.")
        return first
    return sys.stdin.readline().removesuffix("\n").removesuffix("\r")


def cmd_users_add(args: argparse.Namespace) -> int:
    from privplan.server.users import add_user, check_budget, load_users, make_user

    budget = {k: getattr(args, k) for k in _BUDGET if getattr(args, k) is not None}
    if not budget:
        raise PolicyError("say the analyst's budget: --epsilon E (optionally with --delta D), "
                          "--rho R or --mu M. Nothing was written.")
    check_budget(budget)
    if Path(args.path).exists():
        load_users(args.path)  # (a broken file is reported before the password is read)
    user = make_user(args.name, _password(args), budget)
    add_user(args.path, user)
    shown = ", ".join(f"{k}={v:g}" for k, v in user.budget.items())
    print(f"added user {user.name!r} to {args.path} (budget {shown}: their answers must fit "
          "it, and the data's total with every analyst's)")
    return 0


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise PolicyError(f"--listen {value!r}: give HOST:PORT, e.g. --listen 127.0.0.1:5433.")
    return host.strip("[]"), int(port)


def _total(args: argparse.Namespace) -> Any:
    from privplan.accounting.definitions import build, kind_for

    values = {k: getattr(args, f"total_{k}") for k in _BUDGET
              if getattr(args, f"total_{k}") is not None}
    if not values:
        return None
    kind = kind_for(values)
    if kind is None:
        raise PolicyError(f"{' with '.join(f'--total-{k}' for k in values)} name no privacy "
                          "definition. Fix: --total-epsilon (with --total-delta), --total-rho "
                          "or --total-mu.")
    try:
        return build(kind, values)
    except (ValueError, TypeError) as err:
        raise PolicyError(f"the total budget: {err}.") from None


def cmd_serve(args: argparse.Namespace) -> int:
    from privplan.server import serve

    server = serve(args.database, policy=args.policy, ledger=args.ledger, users=args.users,
                   budget=_total(args), listen=_listen(args.listen), tls_cert=args.tls_cert,
                   tls_key=args.tls_key, tls_required=args.tls_required,
                   statement_timeout=args.statement_timeout,
                   max_connections_per_user=args.max_connections_per_user)
    # (SIGTERM stops it as Ctrl-C does; set before "serving on" is said, so a supervisor that
    # stops it as soon as it reads that line finds the handler in place; main thread only)
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    host, port = server.address
    try:  # (a stop from the moment the handler is set: the server closed either way)
        print(f"privplan: serving on {host}:{port} (TLS {'on' if args.tls_cert else 'off'}); "
              "Ctrl-C stops", file=sys.stderr)
        if not args.tls_cert:
            print("privplan: without TLS the password stays safe (SCRAM) but queries and "
                  "answers cross the network in cleartext: pass --tls-cert and --tls-key",
                  file=sys.stderr)
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def add_server_commands(sub: Any) -> None:
    """Add ``serve`` and ``users add`` to an argparse subparsers object."""
    users = sub.add_parser("users", help="analysts of `privplan serve`")
    users_sub = users.add_subparsers(dest="users_command", required=True)
    add = users_sub.add_parser("add", help="add an analyst (only the SCRAM verifier of the "
                               "password is stored)")
    add.add_argument("path", metavar="USERS_FILE", help="the users file (created if missing)")
    add.add_argument("name", help="the analyst's user name")
    for k in _BUDGET:
        add.add_argument(f"--{k}", type=float, default=None,
                         help=f"the analyst's budget: {k} (their answers must fit it, and "
                              "the data's total)")
    add.add_argument("--password-file", default=None,
                     help="read the password from this file (default: standard input)")
    add.set_defaults(func=cmd_users_add, checks={"path": "new_file"})

    p = sub.add_parser("serve", help="a DP SQL server for PostgreSQL clients")
    p.add_argument("--database", required=True, help="DuckDB file")
    p.add_argument("--policy", required=True, help="policy YAML file")
    p.add_argument("--ledger", required=True, help="the data's durable SQLite ledger")
    p.add_argument("--users", required=True, help="users file (`privplan users add`)")
    p.add_argument("--listen", default="127.0.0.1:5433", help="HOST:PORT (default %(default)s)")
    p.add_argument("--tls-cert", default=None, help="PEM certificate (enables TLS)")
    p.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert")
    p.add_argument("--tls-required", action="store_true",
                   help="refuse clients that do not use TLS")
    p.add_argument("--statement-timeout", type=float, default=0.0, metavar="SECONDS",
                   help="cancel a statement that runs longer (57014); 0 for none (default); "
                        "a client may SET statement_timeout")
    p.add_argument("--max-connections-per-user", type=int, default=16, metavar="N",
                   help="connections one analyst may hold at once (default %(default)s; 0: "
                        "no limit)")
    for k in _BUDGET:
        p.add_argument(f"--total-{k}", type=float, default=None,
                       help=f"the data's total budget: {k} (for a new ledger)")
    p.set_defaults(func=cmd_serve, checks={"database": "database", "policy": "policy",
                                           "ledger": "new_ledger"})
