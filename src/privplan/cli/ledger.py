"""``privplan ledger verify|backup|seal|migrate``: the owner's tools for a durable ledger.

* ``verify PATH``: the hash chain, the recorded totals, the total recomposed from every
  mechanism (:mod:`privplan.ledger.verify`); exit status 1 when something is found.
* ``backup PATH DEST``: a consistent copy (SQLite's backup API, every committed charge, WAL
  included), verified; DEST must be new (:func:`privplan.ledger.tools.backup_ledger`).
* ``seal PATH``: adopt the ledger under the owner key (``PRIVPLAN_LEDGER_KEY_FILE``): verify it,
  MAC its head, write a new seal (:func:`privplan.ledger.tools.seal_ledger`).
* ``migrate PATH``: bring a ledger of an earlier format to the current one. Format 2 is verified
  then migrated (as any session opening it does); format 1 has no chain, so it takes
  ``--from-format-1`` and the policy it was charged under (:mod:`privplan.ledger.migrate`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from privplan.cli.output import emit_json
from privplan.cli.run import EXIT_FOUND


def cmd_ledger_verify(args: argparse.Namespace) -> int:
    """Verify a ledger on its own: hash chain, recorded totals, recomputed composed total.
    Exit status 0 when every check passes, 1 when something was found."""
    from privplan.ledger.verify import verification_json, verify_ledger

    result = verify_ledger(args.path, policy=args.policy)
    if args.json:
        emit_json(json.loads(verification_json(result)))
    else:
        print(result)
    return 0 if result.ok else EXIT_FOUND


def cmd_ledger_backup(args: argparse.Namespace) -> int:
    from privplan.ledger.tools import backup_ledger

    entries, total = backup_ledger(args.path, args.dest)
    spent = total.describe() if total is not None else "nothing"
    print(f"backed up {args.path} to {args.dest}: {entries} entries, spent {spent} (verified)")
    return 0


def cmd_ledger_seal(args: argparse.Namespace) -> int:
    from privplan.ledger.migrate import policy_json_of
    from privplan.ledger.tools import seal_ledger
    from privplan.session.inputs import as_policy

    text = None if args.policy is None else policy_json_of(as_policy(args.policy))
    entries = seal_ledger(args.path, policy_json=text)
    print(f"sealed {args.path} under the owner key at entry {entries} (its chain verified)")
    return 0


def cmd_ledger_migrate(args: argparse.Namespace) -> int:
    from privplan.errors import LedgerError, PolicyError
    from privplan.ledger.file import FORMAT
    from privplan.ledger.migrate import migrate_1, policy_json_of
    from privplan.ledger.store import SQLiteLedger
    from privplan.session.inputs import as_policy

    if args.from_format_1:
        if args.policy is None:
            raise PolicyError("--from-format-1 needs --policy: the policy the ledger was "
                              "charged under (format 1 did not record it).")
        n = migrate_1(args.path, policy_json_of(as_policy(args.policy)), None)
        print(f"migrated {args.path} from format 1 to {FORMAT}: {n} entries, chained as they "
              "were (format 1 had nothing to verify them by)")
        return 0
    ledger = SQLiteLedger(args.path)
    try:
        if ledger.format == FORMAT:
            print(f"{args.path} is already of format {FORMAT}")
            return 0
        budget, recorded = ledger.stored_budget(), ledger.stored_policy()
        if budget is None:
            raise LedgerError(f"ledger '{args.path}' has no budget yet: nothing to migrate")
        policy = as_policy(args.policy if args.policy is not None else recorded)
        ledger.bind(budget, policy)  # (verifies it whole under format 2's rules, migrates)
    finally:
        ledger.close()
    print(f"migrated {args.path} to {FORMAT} (verified first)")
    return 0


def add_ledger_commands(sub: Any) -> None:
    """Add ``ledger`` (verify, backup, seal, migrate) to an argparse subparsers object."""
    ledger = sub.add_parser("ledger", help="durable ledger tools")
    ledger_sub = ledger.add_subparsers(dest="ledger_command", required=True)
    verify = ledger_sub.add_parser(
        "verify", help="check a ledger's hash chain and recompute its composed total")
    verify.add_argument("path", help="SQLite ledger file")
    verify.add_argument("--policy", default=None,
                        help="policy YAML (only for ledgers that do not record their policy)")
    verify.add_argument("--json", action="store_true", help="machine-readable output")
    verify.set_defaults(func=cmd_ledger_verify, checks={"path": "ledger", "policy": "policy"})

    backup = ledger_sub.add_parser(
        "backup", help="copy a ledger consistently (every committed charge, even while "
                       "sessions are open), then verify the copy")
    backup.add_argument("path", help="SQLite ledger file")
    backup.add_argument("dest", help="the copy (a new file)")
    backup.set_defaults(func=cmd_ledger_backup, checks={"path": "ledger", "dest": "new_ledger"})

    seal = ledger_sub.add_parser(
        "seal", help="adopt a ledger under the owner key (PRIVPLAN_LEDGER_KEY_FILE): verify "
                     "it, MAC its head and write a new seal (after restoring it on purpose)")
    seal.add_argument("path", help="SQLite ledger file")
    seal.add_argument("--policy", default=None,
                      help="the policy it was charged under (only for a ledger of the previous "
                           "format that does not record it)")
    seal.set_defaults(func=cmd_ledger_seal, checks={"path": "ledger", "policy": "policy"})

    migrate = ledger_sub.add_parser(
        "migrate", help="bring a ledger of an earlier format to the current one (format 2: "
                        "verified first; format 1: only with --from-format-1)")
    migrate.add_argument("path", help="SQLite ledger file")
    migrate.add_argument("--policy", default=None,
                         help="the policy the ledger was charged under")
    migrate.add_argument("--from-format-1", action="store_true",
                         help="the file is of format 1 (no hash chain): its entries are "
                              "chained as they are; only for a file you know privplan wrote")
    migrate.set_defaults(func=cmd_ledger_migrate, checks={"path": "ledger", "policy": "policy"})
