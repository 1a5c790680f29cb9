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


# Measured (numeric alpha, depths 3 to 6, 2 to 4 layers, a busy 2-core machine): building the unrolled
# expression, evaluating and printing it took 40 to 300 microseconds per node of the expression written out
# (``bellman.unrolled_size``); simplifying it for symbolic alpha 2 to 8 ms per node.
UNROLL_SECONDS_PER_NODE = {False: 5e-4, True: 2e-2}

# Measured (a busy 2-core machine): listing the top_levels design with ``--policy`` (the B node numbers, in
# the JSON record and the text) took 3.8 s and 200 MB above the interpreter for B = 10^6.
DESIGN_LISTING_SECONDS_PER_NODE = 3e-6
DESIGN_LISTING_BYTES_PER_NODE = 200.0
