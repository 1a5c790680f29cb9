"""Prices of the exact derivations (pure arithmetic): what ``fv derive`` and the studies' time estimates
read before doing any work. The resource checks themselves (time cap, memory) live in ``fvnum.resources``."""
from __future__ import annotations


# Measured on one slow shared core (solve and optimal_nonadaptive at alpha = 1/2): the adaptive solver
# took 0.13 s at depth 8, budget 3, about D^2 times that per depth and D/25 times per unit of budget
# (depth 7: 0.19, 0.96, 4.75 s at budgets 4, 5, 6), with about 100 MB per second of work; the one-layer
# table of optimal_nonadaptive, built up to the budget asked for, took 0.04 s at depth 10, budget 3, about
# 3 times that per depth and 2.6 times per unit of budget (0.69 s at depth 10, budget 6).
def tree_loss_cost(depth: int, budget: int, strategy: str, symbolic: bool, layers=None, width=None):
    """``(bytes, seconds)`` estimated for ``fv derive tree-loss`` (numeric alpha; symbolic alpha has
    its own depth limit in ``bellman``)."""
    D = 2**depth - 1
    base = 150e6
    if strategy in ("path", "top_levels"):  # closed forms: a sum over the K depths
        return base, 0.01
    if strategy == "fixed":  # a fixed design: one bottom-up pass over the tree, O(D K) Fractions
        return base + 200.0 * D * depth, 2e-5 * D * depth
    if strategy == "optimal_nonadaptive":
        seconds = 0.04 * 3.0 ** (depth - 10) * 2.6 ** (budget - 3) + 2e-6 * D
        return base + 2e8 * seconds + 200.0 * D * depth, seconds
    b = budget if layers is None or width is None else layers * width
    seconds = 0.13 * (D / 255) ** 2 * (D / 25) ** max(b - 3, 0)
    return base + 1e8 * seconds, seconds


# ``fv derive bellman --unroll`` (``bellman.unroll_cost``), measured twice over 21 cases on a shared 2-core
# machine (the two passes differed up to 4x with the load; benchmarks/bench_derive_prices.py reruns the
# table): numeric scales 3e-6 to 3e-5 s per node of the expression written out (``bellman.unrolled_size``;
# depth 7, 2 layers: 160k nodes, 1.0-4.1 s; depth 5, 2 layers of width 2: 2.0M nodes, 12-19 s) after about
# 0.4 s of fixed work; symbolic alpha 0.01 to 0.1 s per distinct action (simplifying the Min over them:
# depth 4, 2 layers, 205 actions, 14-21 s), a few ms when the optimum is zero (the Min collapses).
UNROLL_BASE_SECONDS = 0.4
UNROLL_SECONDS_PER_NODE = 1.2e-5
UNROLL_SYMBOLIC_SECONDS_PER_ACTION = {False: 0.04, True: 0.002}  # keyed by "the optimum is zero"
UNROLL_BASE_BYTES = 60e6
UNROLL_BYTES_PER_NODE = 100.0  # depth 6, 3 layers (2.1M nodes) grew 38 MB

# Measured (a busy 2-core machine): listing the top_levels design with ``--policy`` (the B node numbers, in
# the JSON record and the text) took 3.8 s and 200 MB above the interpreter for B = 10^6.
DESIGN_LISTING_SECONDS_PER_NODE = 3e-6
DESIGN_LISTING_BYTES_PER_NODE = 200.0
