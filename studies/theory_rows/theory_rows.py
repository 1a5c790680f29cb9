"""Theory rows under key families for the scaling study and the grid cells (docs/theory.md, section 11).

Command: ``PYTHONPATH=. python studies/theory_rows/theory_rows.py [--quick]``; writes theory_rows.json beside it
(atomically, after every row, so an interrupted run keeps what it finished). About an hour on one busy core.
``--table`` prints the tables of docs/theory.md from it without computing anything.
"""
from fvnum.options import KeyedSearch
import json
import os
import sys
import time

if __name__ == "__main__":  # a stray word is refused in one line, before anything is computed
    from bridges.runs.options import script_options

    script_options(sys.argv[1:], {"quick", "table"})

import numpy as np
import torch

from fvnum.keys.nonadaptive import best_nonadaptive_keyed, gaussian_keyed, tokens_loss_mc
from fvnum.keys.adaptive import adaptive_keyed_losses
from fvnum.mc.channels import tokens
from fvsym.priors import GaussianPrior, TreePrior

QUICK = "--quick" in sys.argv
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "theory_rows.json")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # studies/theory_rows/../..
N, S2, SEED = 128, 0.01, 0
NA = dict(samples=500 if QUICK else 2000, maxiter=20 if QUICK else 200)
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
    if result.design is None or len(result.design) > 1:  # the rows of a larger design are stored apart
        rows[key].pop("design", None)
        rows[key]["keys"].pop("W", None)
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
                start = (np.vstack([prev.design, new / np.linalg.norm(new)]),
                         None if prev.keys.name == "linear" else np.log(prev.keys.Q[[2**k - 1 for k in range(depth)]]))
            # budget 1 is cheap (exact quadrature): more starts; larger budgets: the chained start and
            # random ones (tree depth 4: eight in all; depth 6: three)
            restarts = 4 if B == 1 else (8 if depth <= 4 else 3)
            r = best_nonadaptive_keyed(prior, B, tokens(N, S2, keys=fam), seed=SEED, start=start,
                                       restarts=restarts, **NA)
            extra = {}
            if B == 1:
                extra["tokens_check"] = tokens_loss_mc(prior, r, tokens(N, S2), samples=2000 if QUICK else 20000,
                                                       seed=SEED).to_dict()
            rows[key + " design"] = {"rows": r.design.tolist()}
            record(key, r, t0, **extra)
            prev = r
        key = f"{tag} {fam} adaptive"
        if f"{key} B{max(budgets)}" in rows:
            continue
        t0 = time.time()
        first = best_nonadaptive_keyed(prior, 1, tokens(N, S2, keys=fam), seed=SEED)
        for b, r in enumerate(adaptive_keyed_losses(prior, max(budgets), tokens(N, S2, keys=fam), seed=SEED,
                                                    samples=AD["samples"],
                                                    search=KeyedSearch(first=first, steps=AD["steps"])), start=1):
            record(f"{key} B{b}", r, t0)


def gaussian_cell(depth, B, tag, **kw):
    prior = GaussianPrior.matched(TreePrior(depth, "1/2"))
    for fam in ("linear", "weighted"):
        key = f"{tag} {fam} nonadaptive B{B}"
        if key in rows:
            continue
        t0 = time.time()
        record(key, gaussian_keyed(prior, B, tokens(N, S2, keys=fam), seed=SEED, **kw), t0)


def table():
    """The markdown tables of docs/theory.md section 11 from theory_rows.json and the trained means of
    the previous scaling study, studies/scaling/previous (scaling.json: 3 seeds, 1000 x budget steps; recipe_A:
    1 seed, 5000 x budget steps)."""
    previous = os.path.join(ROOT, "studies", "scaling", "previous")
    runs = json.load(open(os.path.join(previous, "scaling.json")))["runs"]
    recipe = json.load(open(os.path.join(previous, "recipe_A", "scaling.json")))["runs"]

    def mean(rs, model, B):
        v = [r["loss"] for r in rs if r["model"] == model and r["budget"] == B]
        return np.mean(v) if v else float("nan")

    def cell(key):
        r = rows.get(key)
        if r is None:
            return "n/a"
        r = r.get("estimate", r)  # SearchResult.to_dict nests the loss; rows stored before held it flat
        return f"{r['value']:.4f}" + (f" ± {r['stderr']:.4f}" if r["stderr"] > 0 else " (exact)")

    out = ["| B | trained A (3 seeds) | A recipe (1 seed) | trained B (3 seeds) | adaptive, linear | adaptive, weighted "
           "| one layer, linear | one layer, weighted |", "|---|---|---|---|---|---|---|---|"]
    for B in range(1, 7):
        out.append(f"| {B} | {mean(runs, 'A', B):.4f} | {mean(recipe, 'A', B):.4f} | {mean(runs, 'B', B):.4f} | "
                   f"{cell(f'tree K6 linear adaptive B{B}')} | {cell(f'tree K6 weighted adaptive B{B}')} | "
                   f"{cell(f'tree K6 linear nonadaptive B{B}')} | {cell(f'tree K6 weighted nonadaptive B{B}')} |")
    grid = json.load(open(os.path.join(ROOT, "studies", "grid", "table.json")))["runs"]

    def trained(prior, depth, B, model):
        v = [r["trained"] for r in grid if (r["prior"], r["depth"], r["budget"], r["model"]) == (prior, depth, B, model)]
        return " / ".join(f"{t['loss']:.4f} ± {t['stderr']:.4f}" for t in v) or "n/a"

    out += ["", "| grid cell | trained A | trained B | adaptive, linear | adaptive, weighted | one layer, linear "
            "| one layer, weighted |", "|---|---|---|---|---|---|---|"]
    for prior, depth, B in (("tree", 4, 3), ("tree", 6, 4), ("gaussian", 4, 3), ("gaussian", 6, 4)):
        tag = f"{prior} K{depth}"
        out.append(f"| {prior} K{depth} B{B} | {trained(prior, depth, B, 'A')} | {trained(prior, depth, B, 'B')} | "
                   f"{cell(f'{tag} linear adaptive B{B}')} | {cell(f'{tag} weighted adaptive B{B}')} | "
                   f"{cell(f'{tag} linear nonadaptive B{B}')} | {cell(f'{tag} weighted nonadaptive B{B}')} |")
    return "\n".join(out)


if "--table" in sys.argv:
    print(table())
    sys.exit(0)


torch.set_num_threads(1)
tree_study(6, range(1, 7), "tree K6")
gaussian_cell(4, 3, "gaussian K4", samples=500 if QUICK else 2000, maxiter=8 if QUICK else 40)
tree_study(4, range(1, 4), "tree K4")
gaussian_cell(6, 4, "gaussian K6", samples=300 if QUICK else 1000, maxiter=6 if QUICK else 25, nodes=9)

