"""Time the tree kernels against their numpy references (fvnum/mc/_reference.py: enumerate all 2^K leaves),
measured in the same run, and print samples per second and the speed-up.

    python benchmarks/bench_tree.py                 # depths 8 and 12
    python benchmarks/bench_tree.py --depths 8 10 12 --threads 2 --big

Rows: ``decoder`` (exact posterior from coordinate readings of the path nodes, B = K), ``path`` (the
whole path strategy: routing, noisy readings, decoding, loss), ``dense`` (general unit rows, B = 3),
and ``loss_mc`` (the public estimator, path, all threads). ``--big`` also runs ten million path
samples at depth 12 and reports the peak resident memory.
"""
from __future__ import annotations
import fvnum

import argparse
import resource
import time

import numpy as np

from fvnum.mc import _kernels as K
from fvnum.mc import _reference as R
from fvnum import loss_mc
from fvsym.priors import TreePrior


def timed(fn, min_time=0.5):
    """Best-of-repeats seconds per call (at least one call, repeats until ``min_time`` has passed)."""
    fn()  # warm up (compilation)
    best, start = np.inf, time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        if time.perf_counter() - start > min_time:
            return best


def bench_depth(depth: int, tau: float, n_fast: int, n_ref: int) -> list[tuple]:
    rng = np.random.default_rng(0)
    scales = 0.5 ** (np.arange(depth) / 2)
    D, B = 2**depth - 1, depth
    leaves = rng.integers(0, 2**depth, n_fast)
    noise = rng.standard_normal((n_fast, B))
    empty = np.zeros((0, D))
    rows = []

    # full path strategy
    loss, phi, nodes = np.zeros(n_fast), np.zeros((n_fast, B)), np.zeros((n_fast, B), dtype=np.int64)
    path_fast = lambda: K._tree_path_sim(leaves, noise, empty, tau, 0.0, 0.0, scales, leaves, empty, 0, False,  # noqa: E731
                                         loss, phi, nodes)
    path_ref = lambda: R.path_sim(leaves[:n_ref], noise[:n_ref], None, tau, scales)  # noqa: E731
    t_fast, t_ref = timed(path_fast), timed(path_ref)
    ref_loss = R.path_sim(leaves[:n_ref], noise[:n_ref], None, tau, scales)[0]
    diff = float(np.max(np.abs(loss[:n_ref] - ref_loss)))
    rows.append(("path", depth, B, n_fast / t_fast, n_ref / t_ref, diff))

    # decoder alone, on the readings of the path nodes
    out = np.zeros(n_fast)
    dec_fast = lambda: K._tree_coord_decode(nodes, phi, tau, scales, leaves, out, np.zeros((0, D)))  # noqa: E731
    dec_ref = lambda: R.coord_posterior_mean(nodes[:n_ref], phi[:n_ref], tau, scales)  # noqa: E731
    t_fast, t_ref = timed(dec_fast), timed(dec_ref)
    mean = np.zeros((n_ref, D))
    K._tree_coord_decode(nodes[:n_ref], phi[:n_ref], tau, scales, leaves[:n_ref], np.zeros(0), mean)
    diff = float(np.max(np.abs(mean - R.coord_posterior_mean(nodes[:n_ref], phi[:n_ref], tau, scales))))
    rows.append(("decoder", depth, B, n_fast / t_fast, n_ref / t_ref, diff))

    # general unit rows (O(2^K B) per sample)
    Bd, n_dense = 3, max(n_ref, n_fast // 50)
    W = rng.standard_normal((1, Bd, D))
    W /= np.linalg.norm(W, axis=2, keepdims=True)
    phid = R.leaf_thetas(scales)[leaves[:n_dense]] @ W[0].T + tau * noise[:n_dense, :Bd]
    outd = np.zeros(n_dense)
    dense_fast = lambda: K._tree_dense_decode(W, phid, tau, 1e-9, scales, leaves[:n_dense], outd, np.zeros((0, D)))  # noqa: E731
    dense_ref = lambda: R.dense_posterior_mean(W, phid[:n_ref], tau, scales)  # noqa: E731
    t_fast, t_ref = timed(dense_fast), timed(dense_ref)
    meand = np.zeros((n_ref, D))
    K._tree_dense_decode(W, phid[:n_ref], tau, 1e-9, scales, leaves[:n_ref], np.zeros(0), meand)
    diff = float(np.max(np.abs(meand - R.dense_posterior_mean(W, phid[:n_ref], tau, scales))))
    rows.append(("dense", depth, Bd, n_dense / t_fast, n_ref / t_ref, diff))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depths", type=int, nargs="+", default=[8, 12])
    parser.add_argument("--tau", type=float, default=0.3)
    parser.add_argument("--threads", type=int, default=None, help="threads for the loss_mc row (default: all)")
    parser.add_argument("--big", action="store_true", help="ten million path samples at depth 12")
    args = parser.parse_args(argv)

    print(f"{'what':8} {'K':>3} {'B':>3} {'kernel samples/s':>17} {'numpy ref samples/s':>20} {'ratio':>8}  max|diff|")
    per_sample = {}
    for depth in args.depths:
        n_ref = 400 if depth <= 8 else 20
        for what, k, b, fast, ref, diff in bench_depth(depth, args.tau, 200_000 if depth <= 10 else 50_000, n_ref):
            per_sample[(what, k)] = 1 / fast
            print(f"{what:8} {k:3d} {b:3d} {fast:17.4g} {ref:20.4g} {fast / ref:8.4g}x  {diff:.1e}")
        prior = TreePrior(depth, "1/2")
        n = 200_000
        t0 = time.perf_counter()
        loss_mc(prior, "path", depth, fvnum.gaussian(args.tau), samples=n, seed=0, threads=args.threads)
        print(f"{'loss_mc':8} {depth:3d} {depth:3d} {n / (time.perf_counter() - t0):17.4g}   (path, seeded chunks, "
              f"threads={args.threads or 'all'})")
    if len(args.depths) > 1:
        a, b = min(args.depths), max(args.depths)
        for what in ("path", "decoder", "dense"):
            growth = per_sample[(what, b)] / per_sample[(what, a)]
            print(f"per-sample cost of {what}, depth {a} -> {b}: x{growth:.3g} "
                  f"(D grows x{(2**b - 1) / (2**a - 1):.3g}, 2^K B grows x{2 ** (b - a) * (b / a if what != 'dense' else 1):.3g})")
    if args.big:
        t0 = time.perf_counter()
        est = loss_mc(TreePrior(12, "1/2"), "path", 12, fvnum.gaussian(args.tau), samples=10_000_000, seed=0, threads=args.threads)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"10^7 path samples at depth 12: {est}, {time.perf_counter() - t0:.1f} s, peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
