"""``privplan report plan|run`` and ``privplan audit verify``: argparse subcommand builders.

Wire them into ``privplan.cli.commands.build_parser`` with one call after the other subcommands::

    from privplan.cli.report import add_report_commands
    add_report_commands(sub)

Each command's ``func`` returns the exit status; errors derive from ``PrivplanError`` and are
printed by :func:`privplan.cli.run.run_command` (status 2, or 3 for a budget refusal). ``audit verify`` returns
0 when every check passes and 1 when one fails. ``python -m privplan.cli.report ...`` runs these
commands alone (same error handling).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privplan.cli.output import emit_json, tolerant_text
from privplan.cli.run import run_command, say_error
from privplan.errors import PrivplanError

EXIT_OK = 0
EXIT_AUDIT_FAILED = 1


def cmd_report_plan(args: argparse.Namespace) -> int:
    from privplan.report import ReportSpec, plan_report

    spec = ReportSpec.load(args.spec, database=args.database, ledger=args.ledger)
    plan = plan_report(spec, ledger=args.ledger)
    if args.json:
        emit_json(json.loads(plan.to_json()))
    else:
        print(plan)
    return EXIT_OK


def cmd_report_run(args: argparse.Namespace) -> int:
    from privplan.report import ReportSpec, run_report

    spec = ReportSpec.load(args.spec, database=args.database, ledger=args.ledger)
    progress = False if args.no_progress else None
    ledger = Path(args.ledger) if args.ledger else spec.ledger_path(args.out)
    if not ledger.exists():  # (a new ledger is a new, whole budget: said, never silent)
        print(f"privplan: new budget ledger {ledger}, budget {spec.budget.describe()}.",
              file=sys.stderr)
    run = run_report(spec, args.out, ledger=args.ledger, progress=progress)
    if args.json:
        # (the ledger's budget: the spec's, or for advanced/pld the summed figure it was made with)
        ledger_budget = spec.budget if spec.composition == "basic" else run.plan.basic_total.cost
        emit_json({
            "report": spec.name, "out": str(args.out), "audit": str(run.audit_path),
            "ledger": str(run.ledger_path), "total": run.total.describe(),
            "budget": spec.budget.describe(), "spent": run.total.describe(),
            "remaining": (ledger_budget - run.total).describe(),
            "results": {n: {fmt: str(p) for fmt, p in f.items()} for n, f in run.files.items()},
        })
    else:
        plan = run.plan
        print(f"Report '{spec.name}': {len(run.results)} queries answered; results in "
              f"{args.out}/results/")
        print(f"Report cost (composed): {plan.report_total.cost.describe()}; sequential "
              f"composition would charge {plan.sequential.describe()}")
        if spec.composition in ("advanced", "pld"):
            print(f"Ledger {run.ledger_path}: summed total {run.total.describe()} (its budget); "
                  f"{spec.composition} total {plan.report_total.cost.describe()} of "
                  f"{spec.budget.describe()}")
        else:
            print(f"Ledger {run.ledger_path}: total {run.total.describe()} of "
                  f"{spec.budget.describe()}")
        print(f"Audit: {run.audit_path} (check with: privplan audit verify {run.audit_path})")
    return EXIT_OK


def cmd_audit_verify(args: argparse.Namespace) -> int:
    from privplan.audit import verify_audit

    result = verify_audit(args.audit, ledger=args.ledger, check_files=not args.no_files,
                          replan=not args.no_replan)
    if args.json:
        emit_json(result.to_dict())
    else:
        print(result)
    return EXIT_OK if result.ok else EXIT_AUDIT_FAILED


def add_report_commands(sub: Any) -> None:
    """Add ``report`` (plan, run) and ``audit`` (verify) to an argparse subparsers object."""
    report = sub.add_parser("report", help="plan or run a batch report (joint budget allocation)")
    rsub = report.add_subparsers(dest="report_command", required=True)

    plan = rsub.add_parser("plan", help="show the overlap structure, allocation, errors and "
                                        "total of a report spec (spends nothing)")
    plan.add_argument("spec", help="report spec (YAML)")
    plan.add_argument("--database", default=None, help="override the spec's database")
    plan.add_argument("--ledger", default=None,
                      help="plan against this existing ledger's history (default: the spec's "
                           "ledger if it exists, else an empty history)")
    plan.add_argument("--json", action="store_true", help="machine-readable output")
    plan.set_defaults(func=cmd_report_plan, checks={"spec": "spec", "database": "database",
                                                    "ledger": "ledger"})

    run = rsub.add_parser("run", help="run a report: charge it, write results (Parquet, CSV) and "
                                      "an audit file")
    run.add_argument("spec", help="report spec (YAML)")
    run.add_argument("--out", required=True, help="output directory (new, or without audit.json)")
    run.add_argument("--database", default=None, help="override the spec's database")
    run.add_argument("--ledger", default=None,
                     help="ledger file (default: the spec's `ledger:`, else one beside the "
                          "spec named after it without its extension: report.yaml -> "
                          "report.ledger.sqlite, so a re-run charges the same budget)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    run.add_argument("--json", action="store_true", help="machine-readable summary")
    run.set_defaults(func=cmd_report_run, checks={"spec": "spec", "out": "directory",
                                                  "database": "database",
                                                  "ledger": "new_ledger"})

    audit = sub.add_parser("audit", help="verify a report's audit file offline")
    asub = audit.add_subparsers(dest="audit_command", required=True)
    verify = asub.add_parser("verify", help="recompose the recorded mechanisms (no database) and "
                                            "check totals, budget and result-file hashes")
    verify.add_argument("audit", help="path to audit.json")
    verify.add_argument("--ledger", default=None,
                        help="also cross-check this ledger (default: the recorded one, if found)")
    verify.add_argument("--no-files", action="store_true", help="skip the result-file hashes")
    verify.add_argument("--no-replan", action="store_true",
                        help="skip re-planning the queries from their SQL")
    verify.add_argument("--json", action="store_true", help="machine-readable output")
    verify.set_defaults(func=cmd_audit_verify, checks={"audit": "audit", "ledger": "ledger"})


def build_parser() -> argparse.ArgumentParser:
    from privplan.cli.usage import new_parser

    parser = new_parser(prog="privplan", description="privplan reports and audits")
    sub = parser.add_subparsers(dest="command", required=True)
    add_report_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the report/audit commands alone, with the same error handling as ``privplan``."""
    tolerant_text()
    try:
        args = build_parser().parse_args(argv)
    except PrivplanError as err:
        return say_error(err)
    return run_command(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
