"""The ``privplan`` command: ``demo``, ``query``, ``explain``, ``budget``, ``prepare``,
``ledger verify|backup|seal|migrate``, ``report plan``, ``report run``, ``audit verify``.

Errors print as one readable line (plus the detail) and exit with status 2; a budget refusal
exits with status 3. Each subcommand declares the kind of each path and count it takes
(``checks``); they are checked before it runs (:mod:`privplan.cli_args`), so a bad one is one
line, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from privplan.cli_run import EXIT_BUDGET, EXIT_FOUND, EXIT_USAGE, run_command
from privplan.errors import PolicyError, PrivplanError

__all__ = ["EXIT_BUDGET", "EXIT_FOUND", "EXIT_USAGE", "build_parser", "main"]


def _budget(args: argparse.Namespace) -> Any:
    """The query's budget from exactly one of --epsilon (with --delta), --rho, --mu: no default
    (a silent ε = 1 spent more than asked), and no mix (--epsilon with --rho ran as zCDP and read
    --total as ρ)."""
    from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP

    given = [f for f in ("epsilon", "rho", "mu") if getattr(args, f) is not None]
    if not given:
        raise PolicyError(
            "say how much privacy budget this query may use: --epsilon E (with --delta D for "
            "(ε, δ)-DP), --rho R (zCDP) or --mu M (Gaussian DP). Nothing was spent.")
    if len(given) > 1:
        raise PolicyError(
            f"--{given[0]} and --{given[1]} are two privacy definitions; give one (the "
            "session's --total is read in the same definition). Nothing was spent.")
    pld_total = getattr(args, "composition", "additive") == "pld" and args.total_delta is not None
    if given != ["epsilon"] and (args.delta is not None
                                 or (args.total_delta is not None and not pld_total)):
        raise PolicyError(f"--delta and --total-delta go with --epsilon ((ε, δ)-DP), not "
                          f"--{given[0]}. Nothing was spent.")
    with _valid_budget("query budget (--epsilon/--delta/--rho/--mu)"):
        if args.rho is not None:
            return ZCDP(args.rho)
        if args.mu is not None:
            return GDP(args.mu)
        if args.delta is not None:
            return ApproxDP(args.epsilon, args.delta)
        return PureDP(args.epsilon)


@contextlib.contextmanager
def _valid_budget(what: str) -> Iterator[None]:
    """A budget flag out of range (nan, inf, negative, δ ≥ 1) is a usage error, said plainly."""
    try:
        yield
    except (TypeError, ValueError) as err:
        raise PolicyError(f"invalid {what}: {err}") from None


def _add_budget_args(p: argparse.ArgumentParser, eps_help: str) -> None:
    p.add_argument("--epsilon", type=float, default=None, help=eps_help)
    p.add_argument("--delta", type=float, default=None, help="δ for (ε, δ)-DP (with --epsilon)")
    p.add_argument("--rho", type=float, default=None, help="zCDP ρ instead of ε")
    p.add_argument("--mu", type=float, default=None, help="Gaussian DP μ instead of ε")


def _query_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {"budget": _budget(args)}


def _open(args: argparse.Namespace) -> Any:
    from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
    from privplan.ledger import SQLiteLedger
    from privplan.session import connect

    kind = type(_budget(args))
    total = args.total
    budget = None
    pld = getattr(args, "composition", "additive") == "pld"
    if pld and (total is None or args.total_delta is None):
        raise PolicyError("--composition pld needs the session's (ε, δ): pass --total E and "
                          "--total-delta D (also when the ledger exists). Nothing was spent.")
    if pld:
        kind = ApproxDP  # the session's budget is (ε, δ); each query gives --mu or --epsilon/--delta
    if total is not None:  # checked before any ledger file is opened or created
        with _valid_budget("session budget (--total/--total-delta)"):
            if kind is ApproxDP and args.total_delta is None:
                raise PolicyError("--total-delta is required with --delta: the session's total "
                                  "δ (the query's --delta is its share). Nothing was spent.")
            budget = {PureDP: lambda: PureDP(total), ZCDP: lambda: ZCDP(total),
                      GDP: lambda: GDP(total),
                      ApproxDP: lambda: ApproxDP(total, args.total_delta)}[kind]()
    path = _ledger_path(args)
    if budget is None and (path is None or not path.exists()):
        raise PrivplanError("--total is required (the session's whole privacy budget), unless "
                            "the ledger exists already (it remembers its budget). Nothing was "
                            "spent.")
    if path is not None and not path.exists() and not args.ledger:
        print(f"privplan: new budget ledger {path} (the default, beside the database; "
              "--ledger chooses another).", file=sys.stderr)
    ledger = SQLiteLedger(path) if path is not None else None
    if budget is None:
        assert ledger is not None
        budget = ledger.stored_budget()
        if budget is None:
            ledger.close()
            raise PrivplanError(f"the ledger {path} records no budget yet: pass --total. "
                                "Nothing was spent.")
    return connect(args.database, policy=args.policy, budget=budget, ledger=ledger,
                   composition="pld" if pld else "additive")


def _ledger_path(args: argparse.Namespace) -> Path | None:
    """The ledger a command charges (``query``) or reads (``explain``): --ledger, else one
    beside the database (``<database>.ledger.sqlite``), so that every call shares one budget
    (each call used to start a new one). --no-ledger keeps it in memory, said on stderr."""
    if args.no_ledger:
        if args.ledger:
            raise PolicyError("--ledger and --no-ledger contradict each other; give one.")
        print("privplan: --no-ledger: this budget lives in memory and is forgotten when the "
              "command ends; the next call starts a new one.", file=sys.stderr)
        return None
    if args.ledger:
        return Path(args.ledger)
    db = Path(args.database)
    path = db.with_name(db.stem + ".ledger.sqlite")
    if not path.exists() and args.command == "explain":  # spends nothing: creates no file
        print(f"privplan: no ledger at {path} yet: explaining against an empty history.",
              file=sys.stderr)
        return None
    return path


def cmd_prepare(args: argparse.Namespace) -> int:
    """Make the durable copies of a database's private tables (bounded rows, SUM grids)."""
    from privplan.engines.durable_copies import copies_path
    from privplan.prepare import prepare_copies

    made = prepare_copies(args.database, args.policy)
    if not made:
        print("nothing to prepare: the policy has no user-level table and no bounded numeric "
              "column (no bounded rows or SUM grids to store)")
        return 0
    print(f"made the copies of {', '.join(made)} in {copies_path(Path(args.database))}; "
          "sessions on this database file read them until it changes (then run this again)")
    return 0


def cmd_budget(args: argparse.Namespace) -> int:
    """Spent, remaining and the per-query table of a durable ledger."""
    from privplan.ledger import SQLiteLedger
    from privplan.session import connect

    if not Path(args.ledger).exists():
        raise PrivplanError(f"no ledger at '{args.ledger}'. Check the path (a ledger is the "
                            "file a session was opened with, ledger=...).")
    ledger = SQLiteLedger(args.ledger)
    budget = ledger.stored_budget()
    if budget is None:
        raise PrivplanError(f"ledger '{args.ledger}' has no budget yet (never used)")
    with connect(args.database or ":memory:", policy=args.policy, budget=budget,
                 ledger=ledger) as sess:
        from privplan.explain import readable_witness

        entries = sess.ledger.entries()  # (every entry verified from the chain's root)
        if args.plot:
            _save_budget_plot(sess, Path(args.plot))
        total = sess.accountant.total
        why = readable_witness(total.witness_detail, sess.accountant.mechanisms())
        if args.json:
            print(json.dumps({
                "budget": budget.describe(), "spent": sess.spent().describe(),
                "chain_verified": True,
                "remaining": sess.remaining().describe(), "why": why,
                "queries": [{"id": e.query_id, "added": e.marginal.describe(),
                             "total_after": e.total_after.describe(), "sql": e.sql,
                             "time": e.time} for e in entries]}, indent=2))
            return 0
        print(f"budget {budget.describe()}; spent {sess.spent().describe()}; "
              f"remaining {sess.remaining().describe()}")
        print(f"ledger: hash chain verified over {len(entries)} entries "
              "(`privplan ledger verify` also recomputes the total)")
        print(f"why: {why}")
        for e in entries:
            print(f"  {e.query_id:>5}  +{e.marginal.describe():<14} -> "
                  f"{e.total_after.describe():<14} {' '.join(e.sql.split())[:80]}")
    return 0


def _save_budget_plot(sess: Any, path: Path) -> None:
    """Draw the ledger's budget over its queries into ``path`` (PNG, SVG or PDF)."""
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise PrivplanError(f"--plot {path}: the file name must end in .png, .svg or .pdf")
    if not path.parent.is_dir():
        raise PrivplanError(f"--plot {path}: the directory '{path.parent}' does not exist")
    ax = sess.plot_budget()
    try:
        ax.figure.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as err:
        raise PrivplanError(f"--plot {path}: cannot write the file ({err.strerror})") from None
    finally:
        import matplotlib.pyplot as plt

        plt.close(ax.figure)
    print(f"privplan: budget plot written to {path}", file=sys.stderr)


_NO_PARAMS = ("The command line takes no query parameters: write each value into the SQL "
              "argument in place of its placeholder, e.g. WHERE age > 30")


def _no_placeholders(sql: str) -> None:
    """A placeholder in the SQL argument: refused with the CLI's fix (before anything opens)."""
    from privplan.sql.params import Style, bind_params

    bind_params(sql, None, Style(call="", named="$", none=_NO_PARAMS))


def cmd_query(args: argparse.Namespace) -> int:
    _no_placeholders(args.sql)
    with _open(args) as sess:
        res = sess.sql(args.sql, **_query_kwargs(args))
        answer = res.with_intervals()  # each noisy column, then its 95% interval
        if args.json:
            accuracy = {c: {"method": a.method, "std": a.std, "halfwidth_95": a.halfwidth}
                        for c, a in res.accuracy.items()}
            pld = {"spent_approx": sess.pld.as_approx(sess.spent()).describe()} if sess.pld else {}
            print(json.dumps({"rows": json.loads(answer.to_json(orient="records")),
                              "accuracy": accuracy, "cost": res.cost.describe(),
                              "spent": sess.spent().describe(), **pld}, indent=2))
        else:
            print(answer.to_string(index=False))
            print(f"\ncost: {res.cost.describe()}; spent: {sess.spent().describe()}; "
                  f"remaining: {sess.remaining().describe()}")
            if sess.pld is not None:
                print(f"PLD accounting: spent {sess.pld.describe(sess.spent())} of "
                      f"{sess.pld.target.describe()}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    _no_placeholders(args.sql)
    with _open(args) as sess:
        plan = sess.explain(args.sql, **_query_kwargs(args))
        print(plan.to_json() if args.json else plan)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from privplan.demo.run import run_demo

    run_demo(Path(args.dir), rows=args.rows, out=sys.stdout)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="privplan",
        description="Differentially private SQL, charged with the general composition theorem.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="generate a synthetic hospital dataset and run DP queries")
    demo.add_argument("--dir", default="privplan-demo", help="where to write the demo database")
    demo.add_argument("--rows", type=int, default=200_000, help="visits to generate")
    demo.set_defaults(func=cmd_demo, checks={"dir": "directory", "rows": "count"})

    budget = sub.add_parser("budget", help="spent, remaining and per-query table of a ledger")
    budget.add_argument("--ledger", required=True, help="SQLite ledger file")
    budget.add_argument("--policy", required=True, help="policy YAML file")
    budget.add_argument("--database", default=None, help="DuckDB file (optional)")
    budget.add_argument("--json", action="store_true", help="machine-readable output")
    budget.add_argument("--plot", default=None, metavar="FILE",
                        help="also draw the budget over the queries (.png/.svg/.pdf; needs "
                             "matplotlib): composed vs sequential total, free queries marked")
    budget.set_defaults(func=cmd_budget, checks={"ledger": "ledger", "policy": "policy",
                                                 "database": "database", "plot": "new_file"})

    prepare = sub.add_parser(
        "prepare", help="make the copies of the private tables once, beside the database "
        "(user-level tables' bounded rows, every table's SUM grids), so fresh sessions answer "
        "without clamping or bounding every row again")
    prepare.add_argument("database", help="DuckDB file")
    prepare.add_argument("--policy", required=True, help="policy YAML file")
    prepare.set_defaults(func=cmd_prepare, checks={"database": "database_file",
                                                   "policy": "policy"})

    from privplan.cli_ledger import add_ledger_commands

    add_ledger_commands(sub)

    for name, func, helptext in (("query", cmd_query, "answer one SQL query with DP"),
                                 ("explain", cmd_explain, "show plan, costs and accuracy")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("sql", help="the SQL query")
        p.add_argument("--database", required=True, help="DuckDB file")
        p.add_argument("--policy", required=True, help="policy YAML file")
        p.add_argument("--ledger", default=None,
                       help="durable SQLite ledger (default: <database>.ledger.sqlite beside "
                            "the database)")
        p.add_argument("--no-ledger", action="store_true",
                       help="keep the budget in memory only (forgotten when the command ends)")
        p.add_argument("--total", type=float, default=None,
                       help="the session's total budget (same definition as the query's)")
        p.add_argument("--total-delta", type=float, default=None,
                       help="the session's total δ (with --epsilon and --delta)")
        p.add_argument("--composition", choices=("additive", "pld"), default="additive",
                       help="pld: compose (ε, δ) by exact Gaussian privacy-loss distributions "
                            "(Gaussian noise; queries give --mu, or --epsilon with --delta)")
        _add_budget_args(p, "the query's ε")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(func=func, checks={"database": "database", "policy": "policy",
                                          "ledger": "new_ledger"})
    from privplan.cli_report import add_report_commands

    add_report_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_command(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
