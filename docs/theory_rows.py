"""Theory rows under key families for the scaling study and the grid cells (docs/theory.md, section 11).

Command: ``PYTHONPATH=. python docs/theory_rows.py [--quick]``; writes docs/theory_rows.json (atomically,
after every row, so an interrupted run keeps what it finished). About an hour on one busy core.
"""
import json
import os
import sys
import time

import numpy as np
import torch

from fvnum.keyed import adaptive_keyed_losses, best_nonadaptive_keyed, gaussian_keyed, tokens_loss_mc
from fvsym.priors import GaussianPrior, TreePrior

QUICK = "--quick" in sys.argv
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "theory_rows.json")
N, S2, SEED = 128, 0.01, 0
NA = dict(samples=500 if QUICK else 2000, maxiter=20 if QUICK else 100)
AD = dict(samples=200 if QUICK else 1000, steps=10 if QUICK else 25)
rows = json.load(open(OUT)) if os.path.exists(OUT) and not QUICK else {}


def save():
    if QUICK:
        return
    tmp = OUT + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(rows, fh, indent=1)
    os.replace(tmp, OUT)


def record(key, result, t0, **extra):
    rows[key] = {**result.to_dict(), "seconds": round(time.time() - t0, 1), **extra}
    rows[key].pop("rows", None) if result.budget > 1 or result.layers > 1 else None
    print(key, result.estimate, rows[key]["seconds"], "s", flush=True)
    save()


def tree_study(depth, budgets, tag):
    prior = TreePrior(depth, "1/2")
    for fam in ("linear", "weighted"):
        prev = None
        for B in budgets:
            key = f"{tag} {fam} nonadaptive B{B}"
            if key in rows:
                continue
            t0 = time.time()
            start = None
            if prev is not None:  # the previous budget's design with one more row, same Q
                rng = np.random.default_rng(B)
                new = rng.standard_normal((1, prior.n_nodes))
                start = (np.vstack([prev.rows, new / np.linalg.norm(new)]),
                         None if prev.q is None else np.log(prev.q[[2**k - 1 for k in range(depth)]]))
            r = best_nonadaptive_keyed(prior, B, fam, n_tokens=N, s2=S2, seed=SEED, start=start,
                                       restarts=1 if start is not None else 2, **NA)
            extra = {}
            if B == 1:
                extra["tokens_check"] = tokens_loss_mc(prior, r, samples=2000 if QUICK else 20000, seed=SEED).to_dict()
            rows[key + " design"] = {"rows": r.rows.tolist()}
            record(key, r, t0, **extra)
            prev = r
        key = f"{tag} {fam} adaptive"
        if f"{key} B{max(budgets)}" in rows:
            continue
        t0 = time.time()
        first = best_nonadaptive_keyed(prior, 1, fam, n_tokens=N, s2=S2, seed=SEED)
        for r in adaptive_keyed_losses(prior, max(budgets), fam, n_tokens=N, s2=S2, seed=SEED, first=first, **AD):
            record(f"{key} B{r.budget}", r, t0)


def gaussian_cell(depth, B, tag, **kw):
    prior = GaussianPrior.matched(TreePrior(depth, "1/2"))
    for fam in ("linear", "weighted"):
        key = f"{tag} {fam} nonadaptive B{B}"
        if key in rows:
            continue
        t0 = time.time()
        record(key, gaussian_keyed(prior, B, fam, n_tokens=N, s2=S2, seed=SEED, **kw), t0)


torch.set_num_threads(1)
tree_study(6, range(1, 7), "tree K6")
gaussian_cell(4, 3, "gaussian K4", samples=500 if QUICK else 2000, maxiter=8 if QUICK else 40)
tree_study(4, range(1, 4), "tree K4")
gaussian_cell(6, 4, "gaussian K6", samples=300 if QUICK else 1000, maxiter=6 if QUICK else 25, nodes=9)
