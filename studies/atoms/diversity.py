"""Task diversity in the theory (docs/atoms.md): the loss of the Bayes decoder over ``M`` atoms (dMMSE) against
the ridge baseline (the Gaussian prior of the atoms' covariance) as ``M`` grows, at a fixed budget, with a fixed
design and with an adaptive one.

Command: ``PYTHONPATH=. python studies/atoms/diversity.py [--quick]``; writes studies/atoms/diversity.json (after every
point, atomically) and studies/atoms/diversity.png. The atoms of every ``M`` are ``AtomsPrior.draw(M, D, seed)``
(one seed for all: the sets are nested, the first rows of one stream); every Monte Carlo point has its seed,
samples and standard error. About 10 minutes on one busy core (``--quick``: under a minute, fewer samples).
"""
from __future__ import annotations
import fvnum

import itertools
import json
import math
import os
import sys
import time

import numpy as np

from fvnum import loss_mc
from fvnum.linear_theory import ridge_loss, ridge_optimum
from fvnum.priors.atoms import AtomsPrior

QUICK = "--quick" in sys.argv
HERE = os.path.dirname(os.path.abspath(__file__))
OUT_JSON, OUT_PNG = os.path.join(HERE, "diversity.json"), os.path.join(HERE, "diversity.png")
D, B, N, S2, SEED = 8, 4, 64, 0.01, 0
TAU = math.sqrt((D + S2) / N)  # the tokens channel's tau(N) with E||theta||^2 = D (atoms from N(0, I_D))
MS = [2**k for k in range(1, 9 if QUICK else 13)]
SAMPLES = {"fixed": 2000 if QUICK else 20_000, "greedy_coordinate": 300 if QUICK else 2000}
FIXED = list(range(1, B + 1))  # the first B coordinates


def ridge_best_coordinate(prior) -> tuple[float, list]:
    """The ridge decoder's best coordinate design of B reads (repeats allowed), exhaustively: its loss does not
    depend on the readings, so no adaptive design does better (Theorem G1)."""
    best = min((ridge_loss(prior, list(d), TAU), list(d))
               for d in itertools.combinations_with_replacement(range(1, D + 1), B))
    return best


def save(doc) -> None:
    tmp = OUT_JSON + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, OUT_JSON)


def crossover(points, key_dmmse, key_ridge, within=0.05):
    """The smallest M from which dMMSE lies within ``within`` (relative) of ridge at every larger M."""
    for i, p in enumerate(points):
        if all(q[key_dmmse]["value"] >= (1 - within) * q[key_ridge] for q in points[i:]):
            return p["M"]
    return None


def main() -> dict:
    doc = {"D": D, "budget": B, "tokens_N": N, "s2": S2, "tau": TAU, "atoms_seed": SEED, "fixed_design": FIXED,
           "how": "dMMSE: loss_mc (exact posterior over the atoms, gaussian channel at tau(N)); ridge: the exact "
                  "Gaussian formula tr P with the atoms' covariance (fvnum.linear_theory.ridge_loss)",
           "points": []}
    done = {}
    if not QUICK and os.path.exists(OUT_JSON):  # a run cut short goes on where it stopped
        done = {p["M"]: p for p in json.load(open(OUT_JSON)).get("points", [])}
    for M in MS:
        if M in done:
            doc["points"].append(done[M])
            continue
        t0 = time.time()
        prior = AtomsPrior.draw(M, D, seed=SEED)
        fixed = loss_mc(prior, "fixed", B, fvnum.gaussian(TAU), options=fvnum.StrategyOptions(design=FIXED), samples=SAMPLES["fixed"], seed=SEED)
        greedy = loss_mc(prior, "greedy_coordinate", B, fvnum.gaussian(TAU), samples=SAMPLES["greedy_coordinate"], seed=SEED)
        best_value, best_design = ridge_best_coordinate(prior)
        point = {"M": M, "second_moment": prior.second_moment,
                 "dmmse_fixed": {**fixed.to_dict(), "seed": SEED}, "ridge_fixed": ridge_loss(prior, FIXED, TAU),
                 "dmmse_greedy_coordinate": {**greedy.to_dict(), "seed": SEED},
                 "ridge_best_coordinate": best_value, "ridge_best_coordinate_design": best_design,
                 "ridge_water_filling": ridge_optimum(prior, B, TAU), "seconds": round(time.time() - t0, 1)}
        doc["points"].append(point)
        print(f"M={M:5d} fixed: dMMSE {fixed.value:.4f} +- {fixed.stderr:.4f} ridge {point['ridge_fixed']:.4f} | "
              f"adaptive: dMMSE {greedy.value:.4f} +- {greedy.stderr:.4f} ridge {best_value:.4f} "
              f"({point['seconds']} s)", flush=True)
        if not QUICK:
            save(doc)
    for within in (0.05, 0.10, 0.25):  # the smallest M from which dMMSE stays within this much of ridge
        doc[f"crossover_fixed_{within:g}"] = crossover(doc["points"], "dmmse_fixed", "ridge_fixed", within)
        doc[f"crossover_adaptive_{within:g}"] = crossover(doc["points"], "dmmse_greedy_coordinate",
                                                          "ridge_best_coordinate", within)
    if not QUICK:
        save(doc)
        plot(doc)
    return doc


def plot(doc) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = doc["points"]
    Ms = [p["M"] for p in pts]
    fig, ax = plt.subplots(figsize=(7.2, 5.0))
    curves = (("dmmse_fixed", "ridge_fixed", "fixed design (coordinates 1..4)", "C0"),
              ("dmmse_greedy_coordinate", "ridge_best_coordinate", "adaptive (greedy_coordinate)", "C3"))
    for key, ridge, label, color in curves:
        v = np.array([p[key]["value"] for p in pts])
        se = np.array([p[key]["stderr"] for p in pts])
        ax.errorbar(Ms, v, yerr=2 * se, color=color, marker="o", ms=3, label=f"dMMSE, {label}")
        ax.plot(Ms, [p[ridge] for p in pts], color=color, ls="--", label="ridge, " + ("the same design" if
                key == "dmmse_fixed" else "its best coordinate design"))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("task diversity M (atoms drawn from N(0, I_8))")
    ax.set_ylabel("loss E||theta_hat - theta||^2")
    ax.set_title(f"D = {D}, budget {B}, tau = tau(N = {N}) = {TAU:.3f}")
    fig.legend(loc="lower center", ncol=2, fontsize=7)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    tmp = OUT_PNG + ".tmp.png"
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, OUT_PNG)


if __name__ == "__main__":
    from bridges.runs.options import script_options

    script_options(sys.argv[1:], {"quick"})  # a stray word is refused in one line, before anything is computed
    main()
