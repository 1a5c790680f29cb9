"""Samples per second under the tokens channel (tree prior), this checkout against a baseline measured in
the same run: the cost of decoding with the exact law of the tokens' statistic (docs/decoders.md).

    git worktree add --detach /tmp/base-tokens c3dee08   # the gaussian decoder at tau(N), before the exact law
    python benchmarks/bench_tokens.py --baseline /tmp/base-tokens
    python benchmarks/bench_tokens.py --baseline /tmp/base-tokens --only fixed --rounds 5
    python benchmarks/bench_tokens.py --only path --min-time 1

Every row is ``loss_mc`` (seeded chunks, one thread, after a warm-up call that compiles the kernels)
timed in a child process whose ``PYTHONPATH`` is the checkout measured; the implementations alternate
for ``--rounds`` rounds on the sample count the first run settled on (a policy's set-up, such as
``greedy_dense``'s first row, is paid once a run), and each keeps its best round (a loaded machine only
slows runs down). Rows:
``path`` at depth 10, budget 4 (target: at least half the baseline's samples/s); ``top_levels`` (depth 10;
the closure route of the decoder); a fixed design of 4 random unit rows at depths 4, 6 and 10 and
``greedy_dense`` (budget 4) at depths 4, 6 and 10 (the leaf-enumeration route; target: at least the
baseline's samples/s), and ``decoder``: that route alone (``fvnum.mc.simulate.decode_losses`` of the fixed
design's readings, drawn once; same target) and ``decoder_rows``: the same with 4 random unit rows of each
sample's own (the decoding of ``greedy_dense``'s readings); ``greedy_coordinate`` (depth 8). The loss column shows what changed: the
baseline c3dee08 decodes with the gaussian likelihood at tau(N), readings treated as independent.
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
import fvnum
run = lambda n: loss_mc(prior, a["strategy"], a["budget"], fvnum.tokens(a["tokens"]),
                        options=fvnum.StrategyOptions(design=design), samples=n, seed=0, threads=1)
if a["strategy"].startswith("decoder"):  # the decoder alone: losses of readings of unit rows, drawn once
    from fvnum.mc.channels import make_channel
    from fvnum.mc.simulate import decode_losses, draw_samples, read
    from fvnum.policies.policies import Rows
    from fvnum.priors.tree import numeric_prior
    spec = numeric_prior(prior)
    channel = make_channel(spec, fvnum.tokens(a["tokens"]))
    shared = a["strategy"] == "decoder"  # else decoder_rows: rows of each sample's own, as greedy_dense reads
    def run(n):  # the best of repeated decodes of the same readings, for about min_time seconds
        design = np.random.default_rng(0).standard_normal(((a["budget"],) if shared else (n, a["budget"])) + (spec.dim,))
        design /= np.linalg.norm(design, axis=-1, keepdims=True)
        rows = Rows(array=design, coordinate=False, shared=shared)
        draws = draw_samples(spec, channel, n, a["budget"], np.random.default_rng(0))
        phi = read(spec, channel, draws, rows, 0)
        run.spent, start = np.inf, time.perf_counter()
        while time.perf_counter() - start < a["min_time"] or run.spent == np.inf:
            t0 = time.perf_counter()
            loss = decode_losses(spec, channel, draws, [rows], phi)
            run.spent = min(run.spent, time.perf_counter() - t0)
        return type("E", (), dict(value=loss.mean(), stderr=loss.std() / np.sqrt(n)))
    a["max_samples"] = a["samples"]
run(2)  # warm up: compile (or load) the kernels
n = a["samples"]
while True:
    t0 = time.perf_counter()
    est = run(n)
    spent = getattr(run, "spent", time.perf_counter() - t0)
    if spent >= a["min_time"] or n >= a["max_samples"]:
        break
    n *= 2
print(json.dumps({"samples_per_s": n / spent, "n": n, "seconds": spent, "value": est.value, "stderr": est.stderr}))
"""

CELLS = [  # (strategy, depth, budget, first batch, target ratio against the baseline)
    ("path", 10, 4, 20_000, 0.5),
    ("top_levels", 10, 4, 20_000, None),
    ("decoder", 4, 4, 100_000, 1.0),
    ("decoder", 6, 4, 50_000, 1.0),
    ("decoder", 10, 4, 4_000, 1.0),
    ("decoder_rows", 4, 4, 20_000, 1.0),
    ("decoder_rows", 6, 4, 5_000, 1.0),
    ("decoder_rows", 10, 4, 500, 1.0),
    ("fixed", 4, 4, 20_000, 1.0),
    ("fixed", 6, 4, 5_000, 1.0),
    ("fixed", 10, 4, 500, 1.0),
    ("greedy_dense", 4, 4, 200, 1.0),
    ("greedy_dense", 6, 4, 100, 1.0),
    ("greedy_dense", 10, 4, 4, 1.0),
    ("greedy_coordinate", 8, 4, 500, None),
]


def run_child(src: Path, strategy: str, depth: int, budget: int, samples: int, args, max_samples=10**7) -> dict:
    payload = dict(strategy=strategy, depth=depth, budget=budget, samples=samples, alpha=args.alpha,
                   tokens=args.tokens, min_time=args.min_time, max_samples=max_samples)
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
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds; each keeps its best (default 3)")
    p.add_argument("--only", nargs="+", default=None, help="strategies to time (default: all rows)")
    p.add_argument("--depths", nargs="+", type=int, default=None, help="depths to time (default: all rows)")
    args = p.parse_args(argv)

    impls = [("current", ROOT)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    cells = [c for c in CELLS if (not args.only or c[0] in args.only) and (not args.depths or c[1] in args.depths)]
    res = {}
    print(f"{'strategy':18} {'K':>3} {'B':>3} {'impl':9} {'samples/s':>11} {'n':>8}  loss (tokens N={args.tokens})")
    for strategy, depth, budget, n0, _ in cells:
        n_run = None  # the first run's sample count, then every run's: a policy's set-up cost is per run
        for _ in range(max(1, args.rounds) if args.baseline else 1):
            for name, src in impls:
                r = run_child(src, strategy, depth, budget, n_run or n0, args, n_run or 10**7)
                n_run = r["n"]
                best = res.get((strategy, depth, name))
                if best is None or r["samples_per_s"] > best["samples_per_s"]:
                    res[(strategy, depth, name)] = r
        for name, _ in impls:
            r = res[(strategy, depth, name)]
            print(f"{strategy:18} {depth:3d} {budget:3d} {name:9} {r['samples_per_s']:11.4g} {r['n']:8d}  "
                  f"{r['value']:.5f} +- {r['stderr']:.5f}", flush=True)
    if args.baseline:
        print()
        for strategy, depth, _, _, target in cells:
            c, b = res.get((strategy, depth, "current")), res.get((strategy, depth, "baseline"))
            print(f"{strategy} (depth {depth}): current / baseline = {c['samples_per_s'] / b['samples_per_s']:.3g}x"
                  + (f"  (target >= {target:g}x)" if target else ""))


if __name__ == "__main__":
    main()
