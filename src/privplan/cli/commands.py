"""The ``privplan`` command: ``demo``, ``query``, ``explain``, ``budget``, ``prepare``,
``ledger verify|backup|seal|migrate``, ``report plan``, ``report run``, ``audit verify``,
``serve``, ``users add``.

Errors print as one readable line (plus the detail) and exit with status 2; a budget refusal
exits with status 3. A mistake in the arguments themselves (a missing or unknown flag, a word
where a number goes) is such a line too (:mod:`privplan.cli.usage`), and library messages name
flags, not Python keywords (:func:`privplan.cli.run.flag_words`). Each subcommand declares the
kind of each path and count it takes (``checks``); they are checked before it runs
(:mod:`privplan.cli.args`), so a bad one is one line, never a traceback. ``--json`` output is
UTF-8 with ISO 8601 times (:mod:`privplan.cli.output`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from privplan.cli.output import emit_json, iso_time, tolerant_text
from privplan.cli.run import EXIT_BUDGET, EXIT_FOUND, EXIT_USAGE, run_command, say_error
from privplan.cli.usage import new_parser
from privplan.errors import PolicyError, PrivplanError

__all__ = ["EXIT_BUDGET", "EXIT_FOUND", "EXIT_USAGE", "build_parser", "main"]


def _budget(args: argparse.Namespace) -> Any:
    """The query's budget from exactly one leading flag of a registered definition (--epsilon,
    with --delta; --rho; --mu): no default (a silent ε = 1 spent more than asked), and no mix
    (--epsilon with --rho ran as zCDP and read --total as ρ)."""
    from privplan.accounting.definitions import (
        budget_keywords,
        build,
        join_or,
        keyword_menu,
        kind_for,
        kind_with,
        leader_of,
        leading_keywords,
    )

    values = {k: getattr(args, k) for k in budget_keywords() if getattr(args, k) is not None}
    given = [k for k in leading_keywords() if k in values]
    if not given:
        raise PolicyError(
            f"say how much privacy budget this query may use: {join_or(keyword_menu(_flag))}. "
            "Why: every answer spends budget, and privplan never picks the amount for you. "
            "Nothing was spent.")
    if len(given) > 1:
        raise PolicyError(
            f"--{given[0]} and --{given[1]} are two privacy definitions; give one (the "
            "session's --total is read in the same definition). Nothing was spent.")
    pld_total = getattr(args, "composition", "additive") == "pld" and args.total_delta is not None
    seconds = [k for k in budget_keywords() if k not in leading_keywords()]
    stray = [k for k in seconds if k in values and leader_of(k) != given[0]]
    if (stray or (args.total_delta is not None and not pld_total
                  and not any(leader_of(k) == given[0] for k in seconds))) and seconds:
        second = (stray or seconds)[0]
        raise PolicyError(f"--{second} and --total-{second} go with --{leader_of(second)} "
                          f"({kind_with(second).title()}), not --{given[0]}. Nothing was spent.")
    flags = "/".join(f"--{k}" for k in budget_keywords())
    with _valid_budget(f"query budget ({flags})"):
        kind = kind_for(values)
        if kind is None:
            raise ValueError(f"{' with '.join(f'--{k}' for k in values)} name no privacy "
                             "definition")
        return build(kind, values)


def _flag(keyword: str) -> str:
    """A budget keyword as its flag with a placeholder: ``--epsilon E``."""
    return f"--{keyword} {keyword[0].upper()}"


@contextlib.contextmanager
def _valid_budget(what: str) -> Iterator[None]:
    """A budget flag out of range (nan, inf, negative, δ ≥ 1) is a usage error, said plainly."""
    try:
        yield
    except (TypeError, ValueError) as err:
        raise PolicyError(f"invalid {what}: {err}. Why: a budget that is not a finite positive "
                          "number (δ below 1) bounds nothing. Fix: pass a positive number, e.g. "
                          "--epsilon 0.5.") from None


def _add_budget_args(p: argparse.ArgumentParser, eps_help: str) -> None:
    """One flag per keyword of the registered definitions (``eps_help`` for the first)."""
    from privplan.accounting.definitions import budget_keywords, kind_with, leading_keywords

    first = budget_keywords()[0]
    instead = kind_with(first).symbol(first)
    for keyword in budget_keywords():
        kind = kind_with(keyword)
        if keyword == first:
            text = eps_help
        elif keyword in leading_keywords():
            text = f"{kind.title()} {kind.symbol(keyword)} instead of {instead}"
        else:
            lead = kind.keywords()[0]
            text = f"{kind.symbol(keyword)} for {kind.title()} (with --{lead})"
        p.add_argument(f"--{keyword}", type=float, default=None, help=text)


def _query_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {"budget": _budget(args)}


def _open(args: argparse.Namespace) -> Any:
    """The session a ``query`` or ``explain`` runs in: the flags' budget, the ledger's (checked
    against the flags before anything is opened with it), the database and the policy."""
    from privplan.ledger.store import SQLiteLedger
    from privplan.session.session import connect

    kind, budget = _session_budget(args)
    path = _ledger_path(args)
    if budget is None and (path is None or not path.exists()):
        why = (f"there is no ledger at {path}" if path is not None else "--no-ledger keeps "
               "none" if args.no_ledger else "this command reads no ledger")
        raise PrivplanError(
            "--total is required (the session's whole privacy budget), unless the ledger exists "
            f"already (it remembers its budget): {why}. Nothing was spent. Fix: pass --total E"
            + (_hint(args, path) if path is not None else "") + ".")
    if path is not None and not path.exists():
        _announce_new_ledger(args, path, budget)
    ledger = SQLiteLedger(path) if path is not None else None
    pld = getattr(args, "composition", "additive") == "pld"
    if ledger is not None and not pld:  # (a PLD ledger holds the μ its (ε, δ) converts to)
        try:
            budget = _ledger_budget(ledger, kind, budget)
        except BaseException:
            ledger.close()
            raise
    return connect(args.database, policy=args.policy, budget=budget, ledger=ledger,
                   composition="pld" if pld else "additive")


def _session_budget(args: argparse.Namespace) -> tuple[type, Any]:
    """The session's privacy definition (the query's, or (ε, δ) for PLD) and its budget from
    --total/--total-delta (None without --total: the ledger's own is used)."""
    from privplan.accounting.definitions import ApproxDP

    kind: type = type(_budget(args))
    total = args.total
    pld = getattr(args, "composition", "additive") == "pld"
    if pld and (total is None or args.total_delta is None):
        raise PolicyError("--composition pld needs the session's (ε, δ) from --total and "
                          "--total-delta: PLD accounting converts the composed noise into ε at "
                          "that δ, so it needs them even when the ledger exists. Nothing was "
                          "spent. Fix: pass --total E and --total-delta D (e.g. --total 1 "
                          "--total-delta 1e-6).")
    if pld:
        kind = ApproxDP  # the session's budget is (ε, δ); each query gives --mu or --epsilon/--delta
    if total is None:
        return kind, None
    with _valid_budget("session budget (--total/--total-delta)"):  # (before any file is opened)
        if "delta" in _keywords(kind) and args.total_delta is None:
            raise PolicyError("--total-delta is required with --delta: the session's total "
                              "δ (the query's --delta is its share). Nothing was spent.")
        # (--total is the first parameter, --total-delta the second: (ε, δ)'s δ)
        return kind, kind(*(total, args.total_delta)[:len(_keywords(kind))])


def _keywords(kind: Any) -> tuple[str, ...]:
    """A definition's query keywords (the definition says them: ``PrivacyValue.keywords``)."""
    return tuple(kind.keywords())


def _flags(kind: Any) -> str:
    """A definition's query flags as the command line spells them (``--epsilon with --delta``)."""
    return " with ".join(f"--{n}" for n in kind.keywords())


def _ledger_budget(ledger: Any, kind: type, budget: Any) -> Any:
    """The session's budget given the ledger's: a ledger's budget is fixed when it is created,
    so --total must repeat it (or be left out) and the query's flags must be of its definition;
    each mismatch is said in flags before the ledger is bound (which would refuse it too)."""
    stored: Any = ledger.stored_budget()
    where = f"the ledger {ledger.path}"
    if stored is None:
        if budget is None:
            raise PrivplanError(f"{where} records no budget yet (it was never used), so nothing "
                                "says the session's whole budget. Nothing was spent. Fix: pass "
                                "--total.")
        return budget
    stored_kind: type = type(stored)  # (one definition per ledger: no subclass matches)
    if stored_kind is not kind:
        raise PolicyError(
            f"this query's budget flags are {_flags(kind)}, but {where} was created "
            f"with the budget {stored.describe()}: a ledger composes "
            f"one privacy definition. Nothing was spent. Fix: give the query's budget with "
            f"{_flags(stored_kind)}, or pass --ledger NEW.ledger.sqlite to start a "
            "new ledger.")
    if budget is not None and budget != stored:
        raise PolicyError(
            f"--total says {budget.describe()}, but {where} was created with the budget "
            f"{stored.describe()}, and a ledger's budget is fixed (what it spent counts against "
            "it). Nothing was spent. Fix: leave out --total (the ledger remembers its budget), "
            "or pass --ledger NEW.ledger.sqlite to start a new ledger (e.g. for a new release "
            "period) with the new total.")
    return stored


def _hint(args: argparse.Namespace, path: Path) -> str:
    """For a --ledger that does not exist: the ledgers beside the database it may have meant."""
    from privplan.cli.args import ledger_hint

    if not args.ledger:
        return ""
    return ledger_hint(path, "--ledger", [Path(args.database)]
                       if not _is_url(args.database) else [])


def _announce_new_ledger(args: argparse.Namespace, path: Path, budget: Any) -> None:
    """Say on stderr that a new ledger (a new, whole budget) is being created, and offer the
    existing ledgers a mistyped --ledger may have meant (a typo must not pass unnoticed)."""
    how = "--ledger" if args.ledger else "the default, beside the database; --ledger chooses another"
    print(f"privplan: new budget ledger {path} ({how}), budget {budget.describe()}.",
          file=sys.stderr)
    hint = _hint(args, path)
    if hint:
        print(f"privplan: a new ledger is a new, whole budget{hint}", file=sys.stderr)


def _is_url(database: str) -> bool:
    return database == ":memory:" or "://" in database


def _ledger_path(args: argparse.Namespace) -> Path | None:
    """The ledger a command charges (``query``) or reads (``explain``): --ledger, else one
    beside the database file named after it without its extension (``data.duckdb`` ->
    ``data.ledger.sqlite``), so that every call shares one budget (each call used to start a
    new one). --no-ledger keeps it in memory, said on stderr.

    Why that name and not ``data.duckdb.ledger.sqlite``: it is the name privplan has always
    used. Another default would leave every existing ledger behind and silently start a new,
    whole budget beside it; a ledger must be found by the name it was created with."""
    if args.no_ledger:
        if args.ledger:
            raise PolicyError("--ledger and --no-ledger contradict each other. Why: one keeps the "
                          "budget in a file, the other forgets it when the command ends. "
                          "Fix: give one.")
        print("privplan: --no-ledger: this budget lives in memory and is forgotten when the "
              "command ends; the next call starts a new one.", file=sys.stderr)
        return None
    if args.ledger:
        given = Path(args.ledger)
        if not given.exists() and args.command == "explain":  # (spends nothing: makes no file)
            print(f"privplan: no ledger at {given}: explaining against an empty history"
                  f"{_hint(args, given)}.", file=sys.stderr)
            return None
        return given
    if _is_url(args.database):
        if args.command == "explain":
            print("privplan: --database is not a file, so there is no default ledger beside "
                  "it: explaining against an empty history (--ledger names one).",
                  file=sys.stderr)
            return None
        raise PolicyError(
            f"--database {args.database} is not a file, so there is no default ledger beside "
            "it to record what is spent. Nothing was spent. Fix: pass --ledger FILE (the budget "
            "ledger to charge), or --no-ledger for a budget kept in memory.")
    path = default_ledger(args.database)
    if not path.exists() and args.command == "explain":  # spends nothing: creates no file
        print(f"privplan: no ledger at {path} yet: explaining against an empty history.",
              file=sys.stderr)
        return None
    return path


def default_ledger(database: str | Path) -> Path:
    """The default ledger of a database file: ``<name without extension>.ledger.sqlite`` beside
    it (``data.duckdb`` -> ``data.ledger.sqlite``)."""
    db = Path(database)
    return db.with_name(db.stem + ".ledger.sqlite")


def cmd_prepare(args: argparse.Namespace) -> int:
    """Make the durable copies of a database's private tables (bounded rows, SUM grids)."""
    from privplan.engines.durable_copies import copies_path
    from privplan.session.prepare import prepare_copies

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
    from privplan.ledger.store import SQLiteLedger
    from privplan.session.session import connect

    ledger = SQLiteLedger(args.ledger)  # (--ledger exists: checked with the other arguments)
    budget = ledger.stored_budget()
    if budget is None:
        ledger.close()
        raise PrivplanError(f"--ledger {args.ledger} has no budget yet: it was created but "
                            "never used, so there is nothing to show. Fix: run a query with "
                            "it first (privplan query ... --ledger FILE --total E).")
    with connect(args.database or ":memory:", policy=args.policy, budget=budget,
                 ledger=ledger) as sess:
        from privplan.explain import session_witness

        entries = sess.ledger.entries()  # (every entry verified from the chain's root)
        if args.plot:
            _save_budget_plot(sess, Path(args.plot))
        why = session_witness(sess)  # (in the words of the queries, e.g. age < 18)
        if args.json:
            emit_json({
                "budget": budget.describe(), "spent": sess.spent().describe(),
                "chain_verified": True,
                "remaining": sess.remaining().describe(), "why": why,
                "queries": [{"id": e.query_id, "added": e.marginal.describe(),
                             "total_after": e.total_after.describe(), "sql": e.sql,
                             "time": iso_time(e.time)} for e in entries]})
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
        raise PrivplanError(f"--plot {path}: the file name must end in .png, .svg or .pdf, "
                            "since its ending chooses the image format. Fix: e.g. --plot "
                            "budget.png")
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
            # (budget, spent and remaining as `privplan budget --json` says them)
            emit_json({"rows": json.loads(answer.to_json(orient="records")),
                       "accuracy": accuracy, "cost": res.cost.describe(),
                       "budget": sess.budget.describe(), "spent": sess.spent().describe(),
                       "remaining": sess.remaining().describe(), **pld})
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
        if args.json:
            emit_json(json.loads(plan.to_json()))
        else:
            print(plan)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from privplan.demo.run import run_demo

    run_demo(Path(args.dir), rows=args.rows, out=sys.stdout)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
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

    from privplan.cli.ledger import add_ledger_commands

    add_ledger_commands(sub)

    for name, func, helptext in (("query", cmd_query, "answer one SQL query with DP"),
                                 ("explain", cmd_explain, "show plan, costs and accuracy")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("sql", help="the SQL query")
        p.add_argument("--database", required=True, help="DuckDB file")
        p.add_argument("--policy", required=True, help="policy YAML file")
        p.add_argument("--ledger", default=None,
                       help="durable SQLite ledger (default: beside the database, named "
                            "after it without its extension: data.duckdb -> "
                            "data.ledger.sqlite)")
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
    from privplan.cli.report import add_report_commands
    from privplan.cli.server import add_server_commands

    add_report_commands(sub)
    add_server_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``privplan`` with ``argv``; return the exit status (a mistake in the arguments: 2,
    said as one line by :func:`privplan.cli.run.say_error`)."""
    tolerant_text()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except PrivplanError as err:
        return say_error(err)
    return run_command(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
