"""Samples per second of the adaptive policies under noise (issues 10 and 23), measured in one run.

    python benchmarks/bench_policies.py                          # this checkout
    git worktree add /tmp/base main
    python benchmarks/bench_policies.py --baseline /tmp/base     # also time an earlier commit

Every row is ``loss_mc`` (seeded chunks, one thread, after a warm-up call that compiles the kernels)
timed in a child process whose ``PYTHONPATH`` is the checkout being measured, so both implementations
run the same way; a call includes building the policy (for ``rollout``, its first layer decided on
4096 rollouts). Rows: ``path`` and ``greedy_coordinate`` at depth 10, budget 4 (target:
``greedy_coordinate`` at least 1/100 of ``path``'s samples/s), ``rollout`` at depth 10, budget 4
(target: at least 10x the baseline, issue 23), ``greedy_dense`` at depth 6, budget 4 (target: at least
10x the baseline of issue 10). Each cell runs until ``--min-time`` seconds have passed (at least
``--samples``-sized batches, doubling). With ``--baseline`` the rollout's losses are also compared on
the same ``--loss-samples`` draws (common random numbers: the paired difference and its standard error).
Measured numbers: docs/benchmarks/2026-12-02-policies.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
from fvnum import loss_mc
from fvsym.priors import TreePrior
a = json.loads(sys.argv[1])
import os, fvnum
if os.path.exists(os.path.join(os.path.dirname(fvnum.__file__), "registry.py")):
    from fvnum.policies.registry import STRATEGIES
else:  # an implementation from before the registry module
    from fvnum.mc.simulate import STRATEGIES
if a["strategy"] not in STRATEGIES:
    print(json.dumps(None))
    sys.exit(0)
prior = TreePrior(a["depth"], a["alpha"])
NEW = callable(getattr(fvnum, "gaussian", None))  # the channel as one object (issue 59), else tau=
ch = {"channel": fvnum.gaussian(a["tau"])} if NEW else {"tau": a["tau"]}
run = lambda n: loss_mc(prior, a["strategy"], a["budget"], samples=n, seed=0, threads=1, **ch)
run(2)  # warm up: compile (or load) the kernels
n, spent = a["samples"], 0.0
while True:
    t0 = time.perf_counter()
    est = run(n)
    spent = time.perf_counter() - t0
    if spent >= a["min_time"] or n >= a["max_samples"]:
        break
    n *= 2
out = {"samples_per_s": n / spent, "n": n, "seconds": spent, "value": est.value, "stderr": est.stderr}
if a.get("losses"):  # per-sample losses on fixed draws, for a paired comparison between checkouts
    import numpy as np
    import inspect
    kw = dict(samples=a["loss_samples"], seed=0, threads=1, **ch)
    if "record" in inspect.signature(loss_mc).parameters:  # the readings ride on the Estimate
        fv = loss_mc(prior, a["strategy"], a["budget"], record=True, **kw).function_vectors
    else:  # an implementation from before: (Estimate, FunctionVectors)
        _, fv = loss_mc(prior, a["strategy"], a["budget"], return_phi=True, **kw)
    np.save(a["losses"], fv.loss)
print(json.dumps(out))
"""

CELLS = [  # (strategy, depth, budget, first batch)
    ("path", 10, 4, 100_000),
    ("greedy_coordinate", 10, 4, 200),
    ("rollout", 10, 4, 20),
    ("greedy_dense", 6, 4, 20),
]


def run_child(src: Path, strategy: str, depth: int, budget: int, samples: int, args, losses=None) -> dict | None:
    payload = dict(strategy=strategy, depth=depth, budget=budget, samples=samples, alpha=args.alpha, tau=args.tau,
                   min_time=args.min_time, max_samples=10**7, losses=losses, loss_samples=args.loss_samples)
    env = dict(os.environ, PYTHONPATH=str(src), FVNUM_THREADS="1", NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(payload)], cwd=src, env=env, capture_output=True,
                         text=True)
    if out.returncode:
        raise SystemExit(f"timing {strategy} in {src} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default=None, metavar="DIR", help="checkout of an earlier commit to time too")
    p.add_argument("--alpha", default="1/2")
    p.add_argument("--tau", type=float, default=0.3)
    p.add_argument("--min-time", type=float, default=2.0, help="seconds of timed work per cell (default 2)")
    p.add_argument("--only", nargs="+", default=None, help="strategies to time (default: all rows)")
    p.add_argument("--loss-samples", type=int, default=1000,
                   help="draws on which the rollout's losses are compared with the baseline's (default 1000)")
    args = p.parse_args(argv)

    impls = [("current", ROOT)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    res, losses = {}, {}
    tmp = tempfile.mkdtemp(prefix="bench_policies_")
    print(f"{'strategy':18} {'K':>3} {'B':>3} {'impl':9} {'samples/s':>11} {'n':>8}  loss")
    for strategy, depth, budget, n0 in CELLS:
        if args.only and strategy not in args.only:
            continue
        for name, src in impls:
            keep = os.path.join(tmp, f"{strategy}-{name}.npy") if strategy == "rollout" and args.baseline else None
            r = run_child(src, strategy, depth, budget, n0, args, losses=keep)
            res[(strategy, name)] = r
            if keep and r is not None:
                losses[name] = np.load(keep)
            if r is None:
                print(f"{strategy:18} {depth:3d} {budget:3d} {name:9} {'(absent)':>11}")
                continue
            print(f"{strategy:18} {depth:3d} {budget:3d} {name:9} {r['samples_per_s']:11.4g} {r['n']:8d}  "
                  f"{r['value']:.5f} +- {r['stderr']:.5f}", flush=True)
    print()
    for name, _ in impls:
        g, pa = res.get(("greedy_coordinate", name)), res.get(("path", name))
        if g and pa:
            ratio = g["samples_per_s"] / pa["samples_per_s"]
            print(f"{name}: greedy_coordinate / path at depth 10, budget 4 = 1/{1 / ratio:.4g}  (target >= 1/100)")
    if args.baseline:
        for strategy in ("rollout", "greedy_dense", "greedy_coordinate", "path"):
            c, b = res.get((strategy, "current")), res.get((strategy, "baseline"))
            if c and b:
                print(f"{strategy}: current / baseline = {c['samples_per_s'] / b['samples_per_s']:.4g}x"
                      + {"rollout": "  (target >= 10x, issue 23)",
                         "greedy_dense": "  (target >= 10x against b7ff683, issue 10)"}.get(strategy, ""))
        if len(losses) == 2:
            d = losses["current"] - losses["baseline"]
            se = d.std(ddof=1) / np.sqrt(d.size)
            z = d.mean() / se if se > 0 else 0.0
            print(f"rollout losses, current - baseline on the same {d.size} draws: {d.mean():+.5f} +- {se:.5f} "
                  f"(z = {z:+.2f}; samples that differ: {np.mean(d != 0):.3f}; unchanged within noise: |z| < 5)")


if __name__ == "__main__":
    main()
