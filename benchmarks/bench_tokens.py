"""Samples per second under the tokens channel (tree prior), this checkout against a baseline measured in
the same run: the cost of decoding with the exact law of the tokens' statistic (docs/decoders.md).

    git worktree add --detach /tmp/base-tokens main      # or the commit to compare with
    python benchmarks/bench_tokens.py --baseline /tmp/base-tokens
    python benchmarks/bench_tokens.py --only path --min-time 1

Every row is ``loss_mc`` (seeded chunks, one thread, after a warm-up call that compiles the kernels)
timed in a child process whose ``PYTHONPATH`` is the checkout measured. Rows: ``path`` at depth 10,
budget 4 (target: at least half the baseline's samples/s), ``top_levels`` and a fixed design of 4 unit
rows (depth 10, budget 4: the closure and the leaf-enumeration routes of the decoder), and
``greedy_coordinate`` (depth 8, budget 4). The loss column shows what changed: the baseline decodes with
the gaussian likelihood at tau(N), readings treated as independent.
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
import numpy as np
from fvnum import loss_mc
from fvsym.priors import TreePrior
a = json.loads(sys.argv[1])
prior = TreePrior(a["depth"], a["alpha"])
design = None
if a["strategy"] == "fixed":
    design = np.random.default_rng(0).standard_normal((a["budget"], 2 ** a["depth"] - 1))
    design /= np.linalg.norm(design, axis=1, keepdims=True)
run = lambda n: loss_mc(prior, a["strategy"], a["budget"], tokens=a["tokens"], design=design, samples=n, seed=0,
                        threads=1)
run(2)  # warm up: compile (or load) the kernels
n = a["samples"]
while True:
    t0 = time.perf_counter()
    est = run(n)
    spent = time.perf_counter() - t0
    if spent >= a["min_time"] or n >= a["max_samples"]:
        break
    n *= 2
print(json.dumps({"samples_per_s": n / spent, "n": n, "seconds": spent, "value": est.value, "stderr": est.stderr}))
"""

CELLS = [  # (strategy, depth, budget, first batch)
    ("path", 10, 4, 20_000),
    ("top_levels", 10, 4, 20_000),
    ("fixed", 10, 4, 2_000),
    ("greedy_coordinate", 8, 4, 500),
]


def run_child(src: Path, strategy: str, depth: int, budget: int, samples: int, args) -> dict:
    payload = dict(strategy=strategy, depth=depth, budget=budget, samples=samples, alpha=args.alpha,
                   tokens=args.tokens, min_time=args.min_time, max_samples=10**7)
    env = dict(os.environ, PYTHONPATH=str(src), FVNUM_THREADS="1", NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(payload)], cwd=src, env=env, capture_output=True,
                         text=True)
    if out.returncode:
        raise SystemExit(f"timing {strategy} in {src} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default=None, metavar="DIR", help="checkout of an earlier commit to time too")
    p.add_argument("--alpha", default="1/2")
    p.add_argument("--tokens", type=int, default=128, help="tokens N (default 128)")
    p.add_argument("--min-time", type=float, default=2.0, help="seconds of timed work per cell (default 2)")
    p.add_argument("--only", nargs="+", default=None, help="strategies to time (default: all rows)")
    args = p.parse_args(argv)

    impls = [("current", ROOT)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    res = {}
    print(f"{'strategy':18} {'K':>3} {'B':>3} {'impl':9} {'samples/s':>11} {'n':>8}  loss (tokens N={args.tokens})")
    for strategy, depth, budget, n0 in CELLS:
        if args.only and strategy not in args.only:
            continue
        for name, src in impls:
            r = run_child(src, strategy, depth, budget, n0, args)
            res[(strategy, name)] = r
            print(f"{strategy:18} {depth:3d} {budget:3d} {name:9} {r['samples_per_s']:11.4g} {r['n']:8d}  "
                  f"{r['value']:.5f} +- {r['stderr']:.5f}", flush=True)
    if args.baseline:
        print()
        for strategy, *_ in CELLS:
            c, b = res.get((strategy, "current")), res.get((strategy, "baseline"))
            if c and b:
                print(f"{strategy}: current / baseline = {c['samples_per_s'] / b['samples_per_s']:.4g}x"
                      + ("  (target >= 0.5x)" if strategy == "path" else ""))


if __name__ == "__main__":
    main()
