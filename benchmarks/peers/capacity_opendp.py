"""OpenDP adapter for ``benchmarks/session_capacity.py``: how many grouped COUNTs a privacy filter
admits at a fixed noise level, asked one by one until it refuses.

Job (JSON): ``{"data": csv, "keys": [...], "epsilon": 1, "delta": 1e-6, "sigma": 40,
"laplace_scale": 20, "cap": 5000, "workloads": [{"id", "noise": "gaussian"|"laplace",
"disjoint": bool}]}``. Prints ``{"versions", "notes", "results": {wid: {"opendp": {...}}}}``.

Configuration: ``dp.Context.compositor`` with no split, which OpenDP builds as a privacy filter
(``make_privacy_filter``) over ``make_fully_adaptive_composition``: each query states its own
loss. Gaussian: zero-concentrated DP with ρ_total the largest ρ that OpenDP's own
``make_zCDP_to_approxDP`` maps to ε <= 1 at δ = 1e-6 (bisection), each query
``ctx.query(rho=1/(2σ²))``, whose ``dp.len()`` then gets Gaussian noise of scale σ. Laplace: pure
DP, ``privacy_loss=dp.loss_of(epsilon=1)``, each query ``epsilon=1/scale`` (Laplace noise of
that scale). Row level, ``dp.unit_of(contributions=1)``; public keys through ``.with_keys``.
Slices: ``.filter((pl.col("x") >= 10k) & (pl.col("x") <= 10k+9))`` (``is_between`` is not
supported by OpenDP 0.16); OpenDP composes separately asked
queries sequentially (no parallel composition across them), so disjoint slices cost as much as
whole-table queries.

    python benchmarks/peers/capacity_opendp.py job.json
"""

from __future__ import annotations

import warnings
from typing import Any

import opendp.prelude as dp
import polars as pl
from _spec import emit, read_job, versions

dp.enable_features("contrib")
warnings.simplefilter("ignore", FutureWarning)


def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """The largest ρ whose OpenDP zCDP → (ε, δ) conversion gives at most ``epsilon`` at
    ``delta`` (bisection on a Gaussian's scale; ρ = 1/(2·scale²) at sensitivity 1)."""
    def eps_of(scale: float) -> float:
        m = dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(
            dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale))
        return m.map(1.0).epsilon(delta)

    lo, hi = 0.1, 100.0  # eps_of(lo) > epsilon >= eps_of(hi)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if eps_of(mid) > epsilon else (lo, mid)
    assert eps_of(hi) <= epsilon
    return 1 / (2 * hi * hi)


def capacity(job: dict[str, Any], w: dict[str, Any], rho_total: float) -> dict[str, Any]:
    data = pl.scan_csv(job["data"])
    keys = pl.DataFrame({"g": job["keys"]})
    gaussian = w["noise"] == "gaussian"
    loss = dp.loss_of(rho=rho_total) if gaussian else dp.loss_of(epsilon=job["epsilon"])
    ctx = dp.Context.compositor(
        data=data, privacy_unit=dp.unit_of(contributions=1), privacy_loss=loss,
        margins=[dp.polars.Margin(by=["g"], max_length=1_000_000)])
    per_query = ({"rho": 1 / (2 * job["sigma"] ** 2)} if gaussian
                 else {"epsilon": 1 / job["laplace_scale"]})
    n, refusal, scale = 0, None, None
    for i in range(job["cap"]):
        try:
            q = ctx.query(**per_query)
            if w["disjoint"] and i % 2:
                k = i // 2
                q = q.filter((pl.col("x") >= 10 * k) & (pl.col("x") <= 10 * k + 9))
            q = q.group_by("g").agg(dp.len()).with_keys(keys)
            if scale is None:
                scale = float(q.summarize()["scale"][0])
            q.release().collect()
        except Exception as e:  # noqa: BLE001 - the filter's refusal is an OpenDPException
            refusal = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
            break
        n += 1
    try:
        spent = str(ctx.current_privacy_loss())
    except Exception as e:  # noqa: BLE001 - an exhausted filter no longer reports its loss
        spent = f"(not reported once exhausted: {str(e).strip().splitlines()[0][:120]})"
    return {"admitted": n, "capped": refusal is None, "refusal": refusal,
            "method": "privacy filter asked until refusal", "noise_scale": scale,
            "spent": spent,
            "config": (f"Context.compositor(privacy_loss=loss_of(rho={rho_total:.6g})), "
                       f"query(rho={per_query.get('rho', 0):.6g}) — Gaussian" if gaussian else
                       f"Context.compositor(privacy_loss=loss_of(epsilon={job['epsilon']:g})), "
                       f"query(epsilon={per_query.get('epsilon', 0):g}) — Laplace")
            + ("; slices composed sequentially (no parallel composition across queries)"
               if w["disjoint"] else "")}


def main() -> None:
    job = read_job()
    rho_total = zcdp_rho_for(job["epsilon"], job["delta"])
    results: dict[str, Any] = {}
    for w in job["workloads"]:
        results[w["id"]] = {"opendp": capacity(job, w, rho_total)}
    emit({"versions": versions("opendp", "polars"),
          "notes": {"rho_total": rho_total,
                    "rho_rule": "largest ρ with make_zCDP_to_approxDP ε(δ=1e-6) <= 1"},
          "results": results})


if __name__ == "__main__":
    main()
