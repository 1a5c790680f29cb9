"""Seconds of the keyed theory rows (fvnum.keys.nonadaptive, tree prior, alpha 1/2, N 128, weighted keys), this checkout
against an older one measured in the same run (new / old ratios), one thread each.

    git worktree add --detach /tmp/old-keyed 3899f02   # the torch search, before the Numba kernel
    python benchmarks/bench_keyed.py --old /tmp/old-keyed
    python benchmarks/bench_keyed.py                    # this checkout only: the cells' seconds

Every row runs in a child process whose ``PYTHONPATH`` is the checkout measured (torch, Numba and BLAS on
one thread), after a warm-up call that compiles or loads the kernels; the figure is the child's CPU time
(``time.process_time``: a loaded machine slows the wall clock, much less the CPU time). With ``--old`` the
two alternate for ``--rounds`` rounds and each keeps its best. Rows:

- ``nonadaptive``: ``best_nonadaptive_keyed`` at depth 6, budget 4, 2000 samples (the Monte Carlo search);
- ``adaptive``: ``adaptive_keyed_losses`` at depth 6 to budget 4 on ``--samples`` samples (default 300; its
  cost is linear in the samples), from one fixed layer-1 design;
- ``cell6`` (this checkout only unless ``--full``): a depth-6, budget-4 cell's keyed rows as ``fvnum.theory.
  keyed_rows`` computes them: the layer-1 design, the adaptive policy on 2000 samples, the non-adaptive
  design on 2000 samples (target: under about 15 s);
- ``adaptive7`` (likewise): depth 7 to budget 6 on 1000 samples (target: under about 2 minutes).

With ``--prices``: the table :data:`PRICE_CASES` of whole keyed rows (``fvnum.theory.keyed_curves`` as a
comparison runs them: tree and Gaussian priors, small to large budgets), each in a child process, CPU seconds
and peak memory beside their prices (``fvnum.guards.limits.keyed_cost``, ``fvnum.keys.nonadaptive.keyed_memory``) and the
ratio price / measured (the guards want it within 3x both ways). With ``--compare-cell`` the theory part of
the small comparison of issue 32 (tree, depth 3, budget 2, N 128, 2000 samples) in this checkout and,
with ``--old``, in the old one, alternating ``--rounds`` times (the paired ratio).

The loss columns show what changed (same seeds): the adaptive rows differ by the optimiser's steps and the
quadrature nodes (the paired differences are in docs/benchmarks/2026-12-02-keyed.md).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from fvnum.keys.nonadaptive import best_nonadaptive_keyed
from fvnum.keys.adaptive import adaptive_keyed_losses
from fvsym.priors import TreePrior
a = json.loads(sys.argv[1])
from inspect import signature
NEW = "n_tokens" not in signature(best_nonadaptive_keyed).parameters  # the channel as one object (issue 59)
if NEW:
    from fvnum import tokens
family = (tokens(128, 0.01, keys="weighted"),) if NEW else ("weighted",)
kw = dict(seed=0) if NEW else dict(n_tokens=128, s2=0.01, seed=0)
def given_first(first):  # the layer-1 design: in a fvnum.KeyedSearch where the search takes one
    if "search" in signature(adaptive_keyed_losses).parameters:
        from fvnum.options import KeyedSearch
        return dict(search=KeyedSearch(first=first))
    return dict(first=first)
def run(row, n):
    if row == "nonadaptive":
        return [best_nonadaptive_keyed(TreePrior(6, "1/2"), 4, *family, samples=n, **kw)]
    if row == "adaptive":
        prior = TreePrior(6, "1/2")
        first = best_nonadaptive_keyed(prior, 1, *family, restarts=1, maxiter=30, **kw)
        t0 = time.process_time()
        out = adaptive_keyed_losses(prior, 4, *family, samples=n, **given_first(first), **kw)
        run.spent = time.process_time() - t0
        return out
    if row == "cell6":
        prior = TreePrior(6, "1/2")
        return adaptive_keyed_losses(prior, 4, *family, samples=n, **kw)[-1:] + [
            best_nonadaptive_keyed(prior, 4, *family, samples=n, **kw)]
    if row == "adaptive7":
        return adaptive_keyed_losses(TreePrior(7, "1/2"), 6, *family, samples=n, **kw)
run("adaptive", 4)  # warm up: compile (or load) the kernels
run.spent = None
t0 = time.process_time()
out = run(a["row"], a["samples"])
spent = run.spent if run.spent is not None else time.process_time() - t0
print(json.dumps({"seconds": spent, "values": [r.estimate.value for r in out],
                  "stderrs": [r.estimate.stderr for r in out]}))
"""

PRICE_CHILD = r"""
import json, resource, sys, time
import torch
from fvnum.mc.channels import tokens as tokens_channel
from fvnum.theory import keyed_curves
from fvsym.priors import GaussianPrior, TreePrior
a = json.loads(sys.argv[1])
def prior_of(kind, depth):
    if kind == "tree":
        return TreePrior(depth, "1/2")
    if kind == "matched":
        return GaussianPrior.matched(TreePrior(depth, "1/2"))
    return GaussianPrior.isotropic(2**depth - 1)
def run(kind, depth, budgets, samples, tokens):
    prior = prior_of(kind, depth)
    ch = tokens_channel(tokens, 0.01)
    return keyed_curves(prior, budgets, ch, "weighted", samples=samples, seed=0)
if a.get("warm", True):
    run(a["kind"], 2, [2], 50, a["tokens"])  # compile (or load) the kernels
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0, w0 = time.process_time(), time.perf_counter()
out = run(a["kind"], a["depth"], a["budgets"], a["samples"], a["tokens"])
rows = [{"name": r.name, "budget": b, "value": r.value, "stderr": r.stderr} for b, rs in out.items() for r in rs]
print(json.dumps({"seconds": time.process_time() - t0, "wall": time.perf_counter() - w0,
                  "peak_bytes": 1024.0 * resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "base_bytes": 1024.0 * base,
                  "rows": rows}))
"""

# (prior, depth, budgets, samples, tokens): comparisons' keyed rows, small to large
PRICE_CASES = [("tree", 3, [2], 2000, 128), ("tree", 4, [3], 2000, 128), ("tree", 4, [1, 2, 3], 1000, 128),
               ("tree", 5, [2], 500, 128), ("tree", 6, [4], 500, 128), ("matched", 3, [2], 2000, 128),
               ("matched", 4, [3], 500, 128), ("matched", 3, [4], 500, 128), ("isotropic", 3, [7], 2000, 16),
               ("isotropic", 3, [5], 1000, 16)]


ONE_THREAD = True  # children on one thread (torch, BLAS, Numba); --default-threads: as a user's process runs


def run_price_child(src: Path, case, warm=True) -> dict:
    kind, depth, budgets, samples, tokens = case
    env = dict(os.environ, PYTHONPATH=str(src))
    if ONE_THREAD:
        env.update(NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   FVNUM_THREADS="1")
    arg = json.dumps({"kind": kind, "depth": depth, "budgets": budgets, "samples": samples, "tokens": tokens,
                      "warm": warm})
    out = subprocess.run([sys.executable, "-c", PRICE_CHILD, arg], cwd=src, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"timing {case} in {src} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def prices(cases=PRICE_CASES) -> list:
    """Measured CPU seconds and peak memory of each case beside its price (this checkout)."""
    sys.path.insert(0, str(ROOT))
    from fvnum.keys.nonadaptive import keyed_memory
    from fvnum.guards.limits import keyed_cost

    print(f"{'case':34} {'seconds':>8} {'price':>8} {'ratio':>6} {'peak MB':>8} {'price MB':>8} {'ratio':>6}")
    out = []
    for case in cases:
        kind, depth, budgets, samples, tokens = case
        tree, dim = kind == "tree", 2**depth - 1
        r = run_price_child(ROOT, case)
        price = keyed_cost(tree=tree, depth=depth, dim=dim, budgets=budgets, samples=samples)
        mem = keyed_memory(tree=tree, depth=depth, dim=dim, budgets=budgets, samples=samples)
        used = max(r["peak_bytes"] - r["base_bytes"], 1.0)
        label = f"{kind} K{depth} B{budgets} n{samples} N{tokens}"
        print(f"{label:34} {r['seconds']:8.2f} {price:8.2f} {price / r['seconds']:6.2f} {used / 2**20:8.1f} "
              f"{mem / 2**20:8.1f} {mem / used:6.2f}", flush=True)
        out.append({"case": label, "seconds": r["seconds"], "price": price, "bytes": used, "price_bytes": mem})
    return out


def compare_cell(impls, rounds: int) -> None:
    """The theory part of issue 32's small comparison (tree K3 B2, N 128, 2000 samples), paired rounds."""
    case = ("tree", 3, [2], 2000, 128)
    best: dict = {}
    print(f"{'impl':5} {'round':>5} {'cpu s':>7} {'wall s':>7}  rows")
    for i in range(max(1, rounds)):
        for name, src in impls:
            r = run_price_child(src, case)
            vals = ", ".join(f"{x['name']} {x['value']:.6g} +- {x['stderr']:.2g}" for x in r["rows"])
            print(f"{name:5} {i:5d} {r['seconds']:7.2f} {r['wall']:7.2f}  {vals}", flush=True)
            best[name] = min(best.get(name, 1e300), r["seconds"])
    if "old" in best:
        print(f"\ncompare cell: new / old CPU seconds = {best['new'] / best['old']:.3g} "
              f"({best['old'] / best['new']:.3g}x faster)")


ROWS = [("nonadaptive", 2000, True), ("adaptive", None, True), ("cell6", 2000, False), ("adaptive7", 1000, False)]


def run_child(src: Path, row: str, samples: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", FVNUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps({"row": row, "samples": samples})], cwd=src,
                         env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"timing {row} in {src} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old", default=None, metavar="DIR", help="checkout of an earlier commit to time too")
    p.add_argument("--samples", type=int, default=300, help="samples of the adaptive row (default 300)")
    p.add_argument("--rounds", type=int, default=1, help="alternating rounds; each keeps its best (default 1)")
    p.add_argument("--full", action="store_true", help="time the old checkout on the whole cells too (many minutes)")
    p.add_argument("--only", nargs="+", default=None, help="rows to time (default: all)")
    p.add_argument("--prices", action="store_true", help="the price table (PRICE_CASES) instead of the rows")
    p.add_argument("--compare-cell", action="store_true", help="the small comparison's theory part, paired")
    p.add_argument("--default-threads", action="store_true", help="children on the default threads (as fv runs)")
    args = p.parse_args(argv)
    impls = [("new", ROOT)] + ([("old", Path(args.old).resolve())] if args.old else [])
    global ONE_THREAD
    ONE_THREAD = not args.default_threads
    if args.prices:
        prices()
        return
    if args.compare_cell:
        compare_cell(impls, args.rounds)
        return
    print(f"{'row':12} {'impl':5} {'seconds':>9}  losses")
    ratios = []
    for row, n, both in ROWS:
        if args.only and row not in args.only:
            continue
        n = n or args.samples
        best = {}
        for _ in range(max(1, args.rounds)):
            for name, src in impls:
                if name == "old" and not (both or args.full):
                    continue
                r = run_child(src, row, n)
                if name not in best or r["seconds"] < best[name]["seconds"]:
                    best[name] = r
        for name, r in best.items():
            vals = ", ".join(f"{v:.5f} +- {e:.5f}" for v, e in zip(r["values"], r["stderrs"]))
            print(f"{row:12} {name:5} {r['seconds']:9.2f}  {vals}", flush=True)
        if "old" in best:
            ratios.append(f"{row}: new / old seconds = {best['new']['seconds'] / best['old']['seconds']:.3g} "
                          f"({best['old']['seconds'] / best['new']['seconds']:.3g}x faster)")
    if ratios:
        print("\n" + "\n".join(ratios))


if __name__ == "__main__":
    main()
