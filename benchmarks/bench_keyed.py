"""Seconds of the keyed theory rows (fvnum.keyed, tree prior, alpha 1/2, N 128, weighted keys), this checkout
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
from fvnum.keyed import best_nonadaptive_keyed
from fvnum.keyed_adaptive import adaptive_keyed_losses
from fvsym.priors import TreePrior
a = json.loads(sys.argv[1])
kw = dict(n_tokens=128, s2=0.01, seed=0)
def run(row, n):
    if row == "nonadaptive":
        return [best_nonadaptive_keyed(TreePrior(6, "1/2"), 4, "weighted", samples=n, **kw)]
    if row == "adaptive":
        prior = TreePrior(6, "1/2")
        first = best_nonadaptive_keyed(prior, 1, "weighted", restarts=1, maxiter=30, **kw)
        t0 = time.process_time()
        out = adaptive_keyed_losses(prior, 4, "weighted", samples=n, first=first, **kw)
        run.spent = time.process_time() - t0
        return out
    if row == "cell6":
        prior = TreePrior(6, "1/2")
        return adaptive_keyed_losses(prior, 4, "weighted", samples=n, **kw)[-1:] + [
            best_nonadaptive_keyed(prior, 4, "weighted", samples=n, **kw)]
    if row == "adaptive7":
        return adaptive_keyed_losses(TreePrior(7, "1/2"), 6, "weighted", samples=n, **kw)
run("adaptive", 4)  # warm up: compile (or load) the kernels
run.spent = None
t0 = time.process_time()
out = run(a["row"], a["samples"])
spent = run.spent if run.spent is not None else time.process_time() - t0
print(json.dumps({"seconds": spent, "values": [r.estimate.value for r in out],
                  "stderrs": [r.estimate.stderr for r in out]}))
"""

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
    args = p.parse_args(argv)
    impls = [("new", ROOT)] + ([("old", Path(args.old).resolve())] if args.old else [])
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
