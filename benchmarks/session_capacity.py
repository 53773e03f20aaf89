"""Session capacity (issue #20): how many grouped COUNT queries a total budget of (ε = 1, δ = 1e-6)
admits at a *fixed noise level*, under privplan's accounting rules and in OpenDP and Tumult.

Table ``t``: ``--rows`` rows (default 1,000; only admissions are counted), ``g`` a text column with
4 public values (declared in the policy: no partition selection) and ``x`` an int in [0, 100000).
Every query is ``SELECT g, COUNT(*) FROM t [WHERE x BETWEEN 10k AND 10k+9] GROUP BY g``:
sensitivity 1 under row-level add/remove neighbours, one group per row (parallel composition
over the groups inside a query, in every system).

Noise levels (fixed, per released count):

* Gaussian: σ = 50, i.e. μ = 1/50 (Gaussian DP), ρ = 1/(2·50²) = 1/5000 (zCDP);
* Laplace: scale 20, i.e. ε = 0.05 per query.

Workloads: ``gaussian_overlapping`` and ``laplace_overlapping`` (every query reads the whole
table); ``gaussian_half_disjoint`` and ``laplace_half_disjoint`` (queries alternate: the even ones
read the whole table, the odd one number 2k+1 reads only the slice ``x BETWEEN 10k AND 10k+9``,
a slice no other query reads).

Admitted queries are counted by asking until the first refusal (cap ``--cap``, default 5,000)
wherever a system can be asked; the rules:

* ``additive``: privplan's ApproxDP session today (sum of (ε, δ) over the worst affected set).
  Laplace: the session itself is asked (``epsilon=0.05, delta=0``). Gaussian: today's ApproxDP
  session calibrates Laplace noise for a COUNT even when δ > 0, so a Gaussian of σ = 50 is given
  its own (ε_q, δ_q): δ_q = δ/k and ε_q the smallest ε with the Gaussian (μ = 1/50) being
  (ε_q, δ_q)-DP (exact Gaussian-DP conversion, ``gdp_to_approx``); the mechanisms the session
  plans for the query (its regions and groups), costed at (ε_q, δ_q), are admitted one query at
  a time by privplan's ``Accountant`` until it refuses; k is searched for the best count.
* ``advanced``: a planned batch under ``composition: advanced`` (heterogeneous
  Kairouz–Oh–Viswanath bound inside every maximal co-affected set). Computed with
  ``privplan.accounting.allocation.advanced_total`` on the planned mechanisms (not by driving a
  report: a report under ApproxDP calibrates Laplace noise for counts): the largest n whose
  batch composes within the budget, δ' and δ_q searched on a grid. A batch is not asked query by
  query; n is found by search over the batch size.
* ``gdp_session``: privplan's μ-GDP session today, ``budget=pp.GDP(μ)`` with μ the largest
  whose (ε = 1)-DP δ is 1e-6 (exact conversion), queries at ``mu=1/50`` (Gaussian; rounded
  Gaussian noise of σ = 50) — Laplace cannot be forced at a given scale in a GDP session, so the
  Laplace rows are n/a. It is the accounting the PLD session uses for Gaussian noise.
* ``pld_session``: ``pp.connect(..., budget=pp.ApproxDP(1, 1e-6), composition="pld")``, asked
  ``mu=1/50`` or ``epsilon=0.05, delta=0`` until ``BudgetExceededError`` (skipped, status
  "unavailable", when the installed privplan has no such option). The PLD session as landed
  takes Gaussian noise only (``delta=0`` is refused with a PolicyError): the Laplace rows are
  then n/a with its message.
* ``pld_batch``: a planned batch under ``composition: pld`` (``privplan.accounting.pld``); a
  hook, "unavailable" until that module exists.

Peers, each in its own virtual environment (``<envs>/<peer>/bin/python``) running
``benchmarks/peers/capacity_<peer>.py`` with a JSON job (see that file):

* OpenDP: ``dp.Context.compositor`` without a split (a privacy filter over fully adaptive
  composition), zCDP at ρ_total (the largest ρ OpenDP's own zCDP→(ε, δ) conversion maps to
  (1, 1e-6)) with queries at ``rho=1/3200`` (Gaussian); pure ε = 1 with queries at
  ``epsilon=0.05`` (Laplace). Asked until it refuses.
* Tumult Analytics: a ``Session`` with ``RhoZCDPBudget(ρ)`` (Gaussian: Tumult only allows
  Gaussian noise under zCDP; ρ from its own Bun–Steinke zCDP→(ε, δ) rule for (1, 1e-6)) and
  ``CountMechanism.GAUSSIAN`` at ``RhoZCDPBudget(1/3200)``; ``PureDPBudget(1)`` with
  ``CountMechanism.LAPLACE`` at ``PureDPBudget(0.05)``. Asked until it refuses. On the
  half-disjoint workloads also ``tumult_partition``: the slices declared in advance with
  ``partition_and_create`` (one query's budget set aside for all slices, parallel composition),
  the whole-table queries asked on the parent session.

    python benchmarks/session_capacity.py [--rules additive,advanced,gdp_session,pld_session,pld_batch]
        [--peers opendp,tumult] [--envs DIR] [--cap 5000] [--rows 1000] [--quick] [--out PATH]

``--quick --peers none`` (the smoke test) caps at 300 queries.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import machine_info, write_json
from scipy import optimize

import privplan as pp
from privplan.accounting.accountant import Accountant
from privplan.accounting.conversions import gdp_delta, gdp_to_approx
from privplan.accounting.definitions import GDP, ApproxDP
from privplan.errors import BudgetExceededError

HERE = Path(__file__).resolve().parent
PEERS_DIR = HERE / "peers"

EPSILON, DELTA = 1.0, 1e-6
SIGMA = 50  # Gaussian noise per count (sensitivity 1): μ = 1/50, ρ = 1/5000
LAPLACE_SCALE = 20  # Laplace noise per count: ε = 0.05
KEYS = ["A", "B", "C", "D"]
X_MAX = 100_000
SEED = 20250120
ALL_RULES = ("additive", "advanced", "gdp_session", "pld_session", "pld_batch")
ALL_PEERS = ("opendp", "tumult")
PEER_ROWS = ("opendp", "tumult", "tumult_partition")
RULE_TITLES = {
    "additive": "privplan additive (ApproxDP session)",
    "advanced": "privplan advanced (planned batch)",
    "gdp_session": "privplan μ-GDP session (today)",
    "pld_session": "privplan PLD session",
    "pld_batch": "privplan PLD (planned batch)",
    "opendp": "OpenDP (filter, fully adaptive)",
    "tumult": "Tumult Analytics (Session)",
    "tumult_partition": "Tumult, partition_and_create",
}

WORKLOADS = [
    {"id": "gaussian_overlapping", "title": "(a) Gaussian σ=50, all overlapping",
     "noise": "gaussian", "disjoint": False},
    {"id": "laplace_overlapping", "title": "(b) Laplace scale 20, all overlapping",
     "noise": "laplace", "disjoint": False},
    {"id": "gaussian_half_disjoint", "title": "(c) Gaussian σ=50, half disjoint",
     "noise": "gaussian", "disjoint": True},
    {"id": "laplace_half_disjoint", "title": "(d) Laplace scale 20, half disjoint",
     "noise": "laplace", "disjoint": True},
]


# ============================================================================== workload


def make_table(rows: int, seed: int = SEED) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"g": rng.choice(KEYS, rows), "x": rng.integers(0, X_MAX, rows)})


def policy() -> pp.Policy:
    return pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
        "g": {"type": "str", "nullable": False, "public_values": KEYS},
        "x": {"type": "int", "nullable": False, "lower": 0, "upper": X_MAX}}}}})


def query_sql(i: int, disjoint: bool) -> str:
    """Query number i (0-based) of a workload: with ``disjoint``, the odd ones read one slice."""
    where = ""
    if disjoint and i % 2:
        k = i // 2
        where = f" WHERE x BETWEEN {10 * k} AND {10 * k + 9}"
    return f"SELECT g, COUNT(*) AS n FROM t{where} GROUP BY g"


def gdp_mu_total(epsilon: float = EPSILON, delta: float = DELTA) -> float:
    """The largest μ whose μ-GDP guarantee implies (ε, δ)-DP (δ(ε) of Dong–Roth–Su), rounded
    down by 1e-9 relative."""
    mu = optimize.brentq(lambda m: gdp_delta(m, epsilon) - delta, 1e-3, 10, xtol=1e-14)
    mu *= 1 - 1e-9
    assert gdp_delta(mu, epsilon) <= delta
    return mu


def gaussian_approx(delta_q: Fraction) -> ApproxDP:
    """(ε_q, δ_q) of the Gaussian of σ = 50 at sensitivity 1 (μ = 1/50), exact conversion."""
    return gdp_to_approx(GDP(Fraction(1, SIGMA)), delta_q)


class Specs:
    """The mechanisms privplan plans for query i of a workload, planned once (by a session,
    nothing spent) and re-costed as needed."""

    def __init__(self, df: pd.DataFrame, disjoint: bool) -> None:
        self.sess = pp.connect(":memory:", policy=policy(), budget=pp.ApproxDP(1e9, Fraction(1, 2)))
        self.sess.register("t", df)
        self.disjoint = disjoint
        self._cache: dict[int, list[Any]] = {}
        self.tables = self.sess.table_models()

    def __call__(self, i: int, cost: ApproxDP) -> list[Any]:
        if i not in self._cache:
            planned, _ = self.sess.plan(query_sql(i, self.disjoint), {"epsilon": 1, "delta": 0})
            self._cache[i] = [m.spec for m in planned.measures]
        return [replace(s, id=f"q{i}.{s.id}", cost=cost) for s in self._cache[i]]

    def close(self) -> None:
        self.sess.close()


# ============================================================================== privplan rules


def ask_session(sess: Any, disjoint: bool, kw: dict[str, Any], cap: int) -> dict[str, Any]:
    """Ask queries 0, 1, ... until the session refuses one (or ``cap``)."""
    n, refusal = 0, None
    t0 = time.perf_counter()
    for i in range(cap):
        try:
            sess.sql(query_sql(i, disjoint), **kw)
        except BudgetExceededError as e:
            refusal = str(e).splitlines()[0][:300]
            break
        n += 1
    return {"admitted": n, "refusal": refusal, "capped": refusal is None,
            "spent": str(sess.spent()), "seconds": time.perf_counter() - t0}


def ask_accountant(specs: Specs, cost: ApproxDP, cap: int) -> tuple[int, str | None]:
    """Admit queries 0, 1, ... at ``cost`` per mechanism into a fresh ApproxDP accountant
    until the composed total would exceed (ε, δ); (admitted, composed total)."""
    acc = Accountant(specs.tables, ApproxDP)
    budget = ApproxDP(Fraction(EPSILON), Fraction(DELTA))
    for i in range(cap):
        new = specs(i, cost)
        if not acc.preview(new).cost <= budget:
            return i, str(acc.total.cost)
        acc.admit(new)
    return cap, str(acc.total.cost)


def rule_additive(w: dict[str, Any], df: pd.DataFrame, cap: int) -> dict[str, Any]:
    if w["noise"] == "laplace":
        sess = pp.connect(":memory:", policy=policy(), budget=pp.ApproxDP(EPSILON, DELTA))
        sess.register("t", df)
        out = ask_session(sess, w["disjoint"], {"epsilon": 1 / LAPLACE_SCALE, "delta": 0}, cap)
        sess.close()
        return {**out, "method": "session asked until refusal",
                "config": f"ApproxDP(1, 1e-6) session, epsilon={1 / LAPLACE_SCALE:g}, delta=0 "
                          "(discrete Laplace, scale 20)"}
    specs = Specs(df, w["disjoint"])
    best: tuple[int, int, Any, str | None] = (-1, 0, None, None)
    tried = []
    t0 = time.perf_counter()
    for k in range(1, 2 * cap + 2):
        cost = gaussian_approx(Fraction(Fraction(DELTA), k))
        ceiling = math.floor(EPSILON / cost.epsilon) * (2 if w["disjoint"] else 1) + 1
        if ceiling < best[0]:
            break  # ε_q only grows with k: no larger k can admit more
        n, total = ask_accountant(specs, cost, cap)
        tried.append({"k": k, "epsilon_q": cost.epsilon, "admitted": n})
        if n > best[0]:
            best = (n, k, cost, total)
    specs.close()
    n, k, cost, total = best
    return {"admitted": n, "capped": n >= cap, "method": "accountant asked until refusal, "
            "δ_q = δ/k searched for the best count",
            "config": f"each query ApproxDP(ε_q={cost.epsilon:.5g}, δ_q=δ/{k}) — what a Gaussian "
                      f"of σ={SIGMA} is (exact conversion); today's ApproxDP session would "
                      "calibrate Laplace noise for these budgets",
            "spent": total, "search": tried, "seconds": time.perf_counter() - t0}


def _batch_fits(specs: Specs, n: int, cost: ApproxDP, delta_prime: Fraction) -> tuple[bool, Any]:
    from privplan.accounting.allocation import advanced_total

    mechs = [m for i in range(n) for m in specs(i, cost)]
    total = advanced_total(mechs, specs.tables, delta_prime).cost
    return total <= ApproxDP(Fraction(EPSILON), Fraction(DELTA)), total


def _largest_n(fits: Callable[[int], bool], cap: int) -> int:
    """The largest n in [0, cap] with fits(n) (fits is monotone: a batch's subset fits too)."""
    lo, hi = 0, 1
    while fits(hi):
        if hi >= cap:
            return cap
        lo, hi = hi, min(2 * hi, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def rule_advanced(w: dict[str, Any], df: pd.DataFrame, cap: int) -> dict[str, Any]:
    specs = Specs(df, w["disjoint"])
    t0 = time.perf_counter()
    best: dict[str, Any] = {"admitted": -1}
    d = Fraction(DELTA)
    fractions = ([Fraction(1)] if w["noise"] == "laplace"
                 else [Fraction(j, 20) for j in range(1, 20)])
    for f in fractions:  # δ' = f·δ, the rest split evenly over the worst affected set
        delta_prime = f * d

        def cost_for(n: int, delta_prime: Fraction = delta_prime) -> ApproxDP:
            if w["noise"] == "laplace":
                return ApproxDP(Fraction(1, LAPLACE_SCALE), 0)
            # queries one row can affect: every whole-table one and one slice
            worst = ((n + 1) // 2 + (n >= 2)) if w["disjoint"] else n
            return gaussian_approx((d - delta_prime) / max(worst, 1))

        n = _largest_n(lambda n, dp=delta_prime: n == 0 or _batch_fits(specs, n, cost_for(n), dp)[0],
                       min(cap, 2000))
        if n > best["admitted"]:
            cost = cost_for(max(n, 1))
            best = {"admitted": n, "delta_prime": float(delta_prime), "epsilon_q": cost.epsilon,
                    "delta_q": cost.delta,
                    "spent": str(_batch_fits(specs, n, cost, delta_prime)[1]) if n else None}
    specs.close()
    noise = ("Laplace ε_q = 0.05, δ_q = 0" if w["noise"] == "laplace" else
             f"Gaussian σ={SIGMA} as (ε_q, δ_q), δ_q = (δ − δ')/|worst affected set|")
    return {**best, "capped": best["admitted"] >= min(cap, 2000),
            "method": "advanced_total on the planned mechanisms, largest batch size n by search "
                      "(δ' on a grid of δ/20 steps); a planned batch is not asked query by query",
            "config": f"{noise}; δ' = {best['delta_prime']:.3g}",
            "seconds": time.perf_counter() - t0}


def rule_gdp_session(w: dict[str, Any], df: pd.DataFrame, cap: int) -> dict[str, Any]:
    mu = gdp_mu_total()
    if w["noise"] == "laplace":
        return {"admitted": None, "status": "n/a",
                "reason": "a GDP session picks its own noise for mu= (the rounded Gaussian or "
                          "discrete Laplace, whichever is smaller): Laplace at scale 20 cannot be "
                          "asked for"}
    sess = pp.connect(":memory:", policy=policy(), budget=pp.GDP(mu))
    sess.register("t", df)
    out = ask_session(sess, w["disjoint"], {"mu": Fraction(1, SIGMA)}, cap)
    sess.close()
    return {**out, "method": "session asked until refusal",
            "config": f"GDP(μ={mu:.6f}) session (μ-GDP ⇒ (1, 1e-6)-DP exactly), mu=1/{SIGMA} "
                      "per query (rounded Gaussian, σ = 50)"}


def pld_session_available() -> bool:
    return "composition" in inspect.signature(pp.connect).parameters


def rule_pld_session(w: dict[str, Any], df: pd.DataFrame, cap: int) -> dict[str, Any]:
    if not pld_session_available():
        return {"admitted": None, "status": "unavailable",
                "reason": "this privplan's connect() has no composition= option (PLD session "
                          "not landed)"}
    sess = pp.connect(":memory:", policy=policy(), budget=pp.ApproxDP(EPSILON, DELTA),
                      composition="pld")
    sess.register("t", df)
    kw: dict[str, Any] = ({"mu": Fraction(1, SIGMA)} if w["noise"] == "gaussian"
                          else {"epsilon": 1 / LAPLACE_SCALE, "delta": 0})
    try:
        out = ask_session(sess, w["disjoint"], kw, cap)
    except pp.PrivplanError as e:  # the query is refused for another reason than the budget
        return {"admitted": None, "status": "n/a",
                "reason": f"{type(e).__name__}: {str(e).splitlines()[0][:400]}"}
    finally:
        sess.close()
    args = ", ".join(f"{k}={v}" for k, v in kw.items())
    return {**out, "method": "session asked until refusal",
            "config": f"ApproxDP(1, 1e-6) session, composition='pld', {args}"}


def rule_pld_batch(w: dict[str, Any], df: pd.DataFrame, cap: int) -> dict[str, Any]:
    try:
        from privplan.accounting import pld  # noqa: F401
    except ImportError:
        return {"admitted": None, "status": "unavailable",
                "reason": "privplan.accounting.pld does not exist in this privplan"}
    return pld_batch_capacity(w, df, cap)


def pld_batch_capacity(w: dict[str, Any], df: pd.DataFrame, cap: int) -> dict[str, Any]:
    """The largest planned batch at this noise level under ``composition: pld``
    (:func:`privplan.accounting.allocation.pld.pld_total` on the planned mechanisms, n by
    :func:`_largest_n`). Laplace only: the batch composes each release's canonical (ε, δ) pair,
    exact for the discrete Laplace of a count; a Gaussian's pair would be looser than the exact
    Gaussian composition the PLD session already does (its row)."""
    if w["noise"] != "laplace":
        return {"admitted": None, "status": "n/a",
                "reason": "Gaussian releases compose exactly in the PLD session (that row); a "
                          "batch's canonical (ε, δ) pairs would be looser"}
    from privplan.accounting.allocation.pld import pld_total

    specs = Specs(df, w["disjoint"])
    cost = ApproxDP(Fraction(1, LAPLACE_SCALE), 0)
    budget = ApproxDP(Fraction(EPSILON), Fraction(DELTA))
    t0 = time.perf_counter()

    def total(n: int) -> Any:
        return pld_total([m for i in range(n) for m in specs(i, cost)], specs.tables,
                         Fraction(DELTA)).cost

    n = _largest_n(lambda n: n == 0 or total(n) <= budget, min(cap, 2000))
    spent = str(total(n)) if n else None
    specs.close()
    return {"admitted": n, "capped": n >= min(cap, 2000), "spent": spent,
            "method": "pld_total on the planned mechanisms, largest batch size n by search (a "
                      "planned batch is not asked query by query)",
            "config": f"Laplace ε_q = {1 / LAPLACE_SCALE:g} per count (discrete Laplace, scale "
                      f"{LAPLACE_SCALE}), composition: pld at δ = {DELTA:g}",
            "seconds": time.perf_counter() - t0}


RULES: dict[str, Callable[[dict[str, Any], pd.DataFrame, int], dict[str, Any]]] = {
    "additive": rule_additive, "advanced": rule_advanced, "gdp_session": rule_gdp_session,
    "pld_session": rule_pld_session, "pld_batch": rule_pld_batch,
}


# ============================================================================== peers


def run_peer(peer: str, envs: Path, job_path: Path, timeout: float) -> dict[str, Any]:
    """Run a peer's capacity adapter with its venv's python; a status dict when it cannot."""
    python = envs / peer / "bin" / "python"
    if not python.exists():
        return {"status": "not installed", "reason": f"no virtual environment at {python.parent}"}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([str(python), str(PEERS_DIR / f"capacity_{peer}.py"),
                               str(job_path)], check=False, capture_output=True, text=True,
                              timeout=timeout, cwd=PEERS_DIR)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"status": "failed", "reason": f"exit {proc.returncode}: {tail[:400]}"}
    out = json.loads(lines[-1])
    out.update(status="ok", seconds=time.perf_counter() - t0)
    return out


# ============================================================================== output


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    if r.get("admitted") is None:
        return r.get("status", "n/a")
    return f"{r['admitted']}{'+' if r.get('capped') else ''}"


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    def n(key: str) -> int | None:
        r = results.get(key)
        return r.get("admitted") if r else None

    pld_key = "pld_session" if n("pld_session") is not None else None
    out: dict[str, Any] = {"pld_rule": pld_key}
    add = n("additive")
    out["pld_over_additive"] = (n(pld_key) / add if pld_key and add else None)
    out["gdp_session_over_additive"] = (n("gdp_session") / add
                                        if n("gdp_session") is not None and add else None)
    peers = {p: n(p) for p in PEER_ROWS if n(p) is not None}
    best = max(peers, key=lambda p: peers[p]) if peers else None
    out["best_peer"] = best
    out["best_peer_admitted"] = peers.get(best) if best else None
    out["pld_over_best_peer"] = (n(pld_key) / peers[best]
                                 if pld_key and best and peers[best] else None)
    mine = {r: n(r) for r in ALL_RULES if n(r) is not None}
    top = max(mine, key=lambda r: mine[r]) if mine else None
    out["best_privplan_rule"] = top
    out["best_privplan_over_best_peer"] = (mine[top] / peers[best]
                                           if top and best and peers[best] else None)
    out["gdp_session_over_best_peer"] = (n("gdp_session") / peers[best]
                                         if n("gdp_session") is not None and best and peers[best]
                                         else None)
    return out


def print_table(workloads: list[dict[str, Any]], columns: list[str]) -> None:
    head = ["workload"] + [RULE_TITLES[c] for c in columns] + ["PLD/additive", "PLD/best peer",
                                                                "best privplan/best peer"]
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for w in workloads:
        r = w["ratios"]
        f = (lambda x: "-" if x is None else f"{x:.2f}x")
        cells = [w["title"]] + [_cell(w["results"].get(c)) for c in columns]
        cells += [f(r["pld_over_additive"]), f(r["pld_over_best_peer"])
                  + (f" ({r['best_peer']})" if r["best_peer"] else ""),
                  f(r["best_privplan_over_best_peer"])
                  + (f" ({r['best_privplan_rule']})" if r["best_privplan_rule"] else "")]
        print("| " + " | ".join(cells) + " |")
    print("(+ : reached the cap; n/a / unavailable: see the JSON's reason)")


# ============================================================================== main


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rules", default=",".join(ALL_RULES),
                    help=f"privplan rules, comma-separated, from {','.join(ALL_RULES)}")
    ap.add_argument("--peers", default=",".join(ALL_PEERS), help="peers or 'none'")
    ap.add_argument("--envs", type=Path, default=Path(__file__).resolve().parents[2] / "peer-envs",
                    help="one virtual environment per peer: <envs>/<peer>/bin/python")
    ap.add_argument("--cap", type=int, default=5000, help="stop asking after this many")
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--workloads", nargs="*", default=None, help="workload ids (default all)")
    ap.add_argument("--timeout", type=float, default=3600, help="per peer, seconds")
    ap.add_argument("--peer-output", action="append", default=[], metavar="PEER=FILE",
                    help="read a peer's adapter output (its JSON line) from FILE instead of "
                         "running it (same job: same --rows and seed)")
    ap.add_argument("--quick", action="store_true", help="cap 300 (smoke test)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "session_capacity.json")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    cap = min(args.cap, 300) if args.quick else args.cap
    rules = [r for r in args.rules.split(",") if r]
    unknown = set(rules) - set(ALL_RULES)
    if unknown:
        raise SystemExit(f"unknown rules: {sorted(unknown)}")
    peers = [] if args.peers == "none" else [p for p in args.peers.split(",") if p]
    ws = [w for w in WORKLOADS if args.workloads is None or w["id"] in args.workloads]
    df = make_table(args.rows)

    out_ws = [{**w, "results": {}} for w in ws]
    for w in out_ws:
        for rule in rules:
            t0 = time.perf_counter()
            r = RULES[rule](w, df, cap)
            r.setdefault("status", "ok" if r.get("admitted") is not None else "n/a")
            out_ws[out_ws.index(w)]["results"][rule] = r
            print(f"  {w['id']}: {rule} -> {_cell(r)} ({time.perf_counter() - t0:.1f} s)",
                  flush=True)

    peer_info: dict[str, Any] = {}
    if peers:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "t.csv"
            df.to_csv(data, index=False)
            job = {"data": str(data), "table": "t", "keys": KEYS, "epsilon": EPSILON,
                   "delta": DELTA, "sigma": SIGMA, "laplace_scale": LAPLACE_SCALE, "cap": cap,
                   "workloads": [{"id": w["id"], "noise": w["noise"], "disjoint": w["disjoint"]}
                                 for w in ws]}
            job_path = Path(tmp) / "job.json"
            job_path.write_text(json.dumps(job))
            saved = dict(item.split("=", 1) for item in args.peer_output)
            for peer in peers:
                if peer in saved:
                    lines = [ln for ln in Path(saved[peer]).read_text().splitlines()
                             if ln.startswith("{")]
                    res = {**json.loads(lines[-1]), "status": "ok",
                           "reason": f"adapter output read from {saved[peer]}"}
                else:
                    print(f"running {peer} ...", flush=True)
                    res = run_peer(peer, args.envs, job_path, args.timeout)
                peer_info[peer] = {k: res.get(k) for k in ("status", "reason", "versions",
                                                           "seconds", "notes")}
                for w in out_ws:
                    for name, r in (res.get("results") or {}).get(w["id"], {}).items():
                        w["results"][name] = r
                    if res["status"] != "ok":
                        w["results"][peer] = {"admitted": None, "status": res["status"],
                                              "reason": res.get("reason")}
                print(f"  {peer}: {res['status']} {res.get('reason') or ''}", flush=True)

    for w in out_ws:
        w["ratios"] = ratios(w["results"])
    columns = [c for c in (*ALL_RULES, *PEER_ROWS)
               if any(c in w["results"] for w in out_ws)]
    print_table(out_ws, columns)
    payload = {
        "benchmark": "session_capacity",
        "budget": {"epsilon": EPSILON, "delta": DELTA},
        "noise": {"gaussian_sigma": SIGMA, "gaussian_mu": 1 / SIGMA,
                  "gaussian_rho": 1 / (2 * SIGMA ** 2), "laplace_scale": LAPLACE_SCALE,
                  "laplace_epsilon": 1 / LAPLACE_SCALE, "sensitivity": 1,
                  "neighbours": "row-level add/remove"},
        "rows": args.rows, "cap": cap, "quick": args.quick, "rules": rules, "peers": peers,
        "peer_runs": peer_info, "rule_titles": RULE_TITLES,
        "pld_session_available": pld_session_available(),
        "workloads": out_ws, "machine": machine_info(),
        "targets": {"pld_over_additive_gaussian_overlapping": ">= 3x (100+ queries)",
                    "half_disjoint": "privplan PLD admits more than every peer"},
    }
    write_json(args.out, payload)


if __name__ == "__main__":
    main()
