"""Prices of the exact derivations (pure arithmetic): what ``fv derive`` and the studies' time estimates
read before doing any work. The guards that compare them with the limits (time cap, memory) are
:mod:`fvsym.guards.limits`; each price sits here beside the derivation it prices (``fvsym.tree``, ``fvsym.bellman``)."""
from __future__ import annotations


# ``fv derive tree-loss`` at numeric alpha, measured on a shared 2-core machine (alpha = 1/2, the whole command
# after imports; benchmarks/bench_derive_prices.py reruns the table). The adaptive optimum (width 1) grows
# as D^2 times a factor per unit of budget: 1.7 s at depth 9, budget 3 and 5.8 s at depth 10, budget 3;
# 5.9 s at depth 8, budget 4 and 16.7 s at depth 9, budget 4; 5.1 s at depth 7, budget 5 and 22.6 s at depth
# 8, budget 5; 26 s at depth 7, budget 6; 1.7 s at depth 11, budget 2; its resident memory about 60 MB plus
# 15 MB per second of work. A budget B >= K resolves every leaf along the first path found (0.4 s at depth 6,
# budget 7). The one-layer table of optimal_nonadaptive: 1.2 s at depth 10, budget 5; 2.1 s at depth 12,
# budget 4; 15.8 s at depth 12, budget 6; 6.3 s at depth 14, budget 3, about 3 times per depth and 2.6
# times per unit of budget, about 12 MB per second of work.
_OPTIMAL_PER_D2 = {0: 2e-8, 1: 2e-8, 2: 3.3e-7, 3: 5.3e-6, 4: 7.3e-5, 5: 3.2e-4, 6: 1.6e-3}


def tree_loss_cost(depth: int, budget: int, strategy: str, symbolic: bool, layers=None, width=None):
    """``(bytes, seconds)`` estimated for ``fv derive tree-loss`` (numeric alpha; symbolic alpha has
    its own depth limit in ``bellman``): the price of ``strategy``'s derivation (:data:`TREE_LOSS_COSTS`, one
    entry a formula of ``fvsym.tree.FORMULAS`` and the fixed design)."""
    from fvsym.strategy_names import CLASS_NAMED

    strategy = CLASS_NAMED.get(strategy, strategy)
    if strategy not in TREE_LOSS_COSTS:
        from fvsym.errors import InputError

        raise InputError(f"fv derive tree-loss has no price for strategy {strategy!r}; choose one of "
                         f"{', '.join(TREE_LOSS_COSTS)}")
    return TREE_LOSS_COSTS[strategy](depth, budget, layers, width)


_BASE_BYTES = 60e6


def _closed_form_cost(depth, budget, layers, width):
    """``path`` and ``top_levels``: a sum over the K depths (0.4-1.2 s measured at depth 30 with parsing and
    printing, symbolic alpha the slower)."""
    return _BASE_BYTES, 0.5


def _fixed_cost(depth, budget, layers, width):
    """A fixed design: one bottom-up pass over the tree, O(D K) Fractions."""
    D = 2**depth - 1
    return _BASE_BYTES + 200.0 * D * depth, 2e-5 * D * depth


def _nonadaptive_cost(depth, budget, layers, width):
    """``optimal_nonadaptive``: the one-layer table."""
    D = 2**depth - 1
    seconds = 0.3 + 0.08 * 3.0 ** (depth - 10) * 2.6 ** (budget - 3) + 2e-6 * D
    return _BASE_BYTES + 12e6 * seconds + 200.0 * D * depth, seconds


def _optimal_cost(depth, budget, layers, width):
    """``optimal``: the adaptive Bellman optimum."""
    D = 2**depth - 1
    if layers is not None and width is not None and width > 1:  # several nodes a layer (less measured)
        b = layers * width
        seconds = 0.13 * (D / 255) ** 2 * (D / 25) ** max(b - 3, 0)
        return _BASE_BYTES + 1e8 * seconds, seconds
    b = budget if layers is None else layers
    if b >= depth:  # the first path found resolves every leaf: the search stops there
        return _BASE_BYTES, 0.3 + 1e-6 * D * depth
    per = _OPTIMAL_PER_D2[b] if b in _OPTIMAL_PER_D2 else _OPTIMAL_PER_D2[6] * 5.0 ** (b - 6)
    seconds = 0.3 + per * D * D
    return _BASE_BYTES + 15e6 * seconds, seconds


TREE_LOSS_COSTS = {"path": _closed_form_cost, "top_levels": _closed_form_cost, "fixed": _fixed_cost,
                   "optimal_nonadaptive": _nonadaptive_cost, "optimal": _optimal_cost}


# ``fv derive bellman --unroll`` (``bellman.unroll_cost``), measured twice over 21 cases on a shared 2-core
# machine (the two passes differed up to 4x with the load; benchmarks/bench_derive_prices.py reruns the
# table): numeric scales 3e-6 to 3e-5 s per node of the expression written out (``bellman.unrolled_size``;
# depth 7, 2 layers: 160k nodes, 1.0-4.1 s; depth 5, 2 layers of width 2: 2.0M nodes, 12-19 s) after about
# 0.4 s of fixed work; symbolic alpha 0.01 to 0.1 s per distinct action (simplifying the Min over them:
# depth 4, 2 layers, 205 actions, 14-21 s), a few ms when the optimum is zero (the Min collapses).
UNROLL_BASE_SECONDS = 0.4
UNROLL_SECONDS_PER_NODE = 1.2e-5
UNROLL_SYMBOLIC_SECONDS_PER_ACTION = {False: 0.06, True: 0.002}  # keyed by "the optimum is zero"
UNROLL_BASE_BYTES = 60e6
UNROLL_BYTES_PER_NODE = 15.0  # depth 6, 3 layers (2.1M nodes) grew 38 MB; depth 5, 2 layers of width 2, 28 MB

# Measured (a busy 2-core machine): listing the top_levels design with ``--policy`` (the B node numbers, in
# the JSON record and the text) took 3.8 s and 200 MB above the interpreter for B = 10^6.
DESIGN_LISTING_SECONDS_PER_NODE = 3e-6
DESIGN_LISTING_BYTES_PER_NODE = 200.0


# ``fv derive gaussian-loss`` (the whole command after imports, tau = 1/2, budget 3; a shared 2-core machine):
# a covariance file is read into about 130 bytes and 12 microseconds per entry (a 1023 x 1023 diagonal .npy:
# 13 s, 136 MB); a matrix that is not diagonal then needs its exact eigenvalues (the characteristic
# polynomial's real roots): 3.1, 3.6, 4.8, 10.7, 19.4 and 35 s at D = 3, 5, 6, 8, 10, 12, about
# 3 s + 5.2e-3 D^3.5 (twice that at symbolic tau: 9.5 s at D = 6). The matched Gaussian: 0.65 s at depth 10
# with alpha = 1/2, 4.8 s with symbolic alpha (1.9 s at depth 8); isotropic: 0.5 s at any D.
def gaussian_loss_cost(kind: str, dim: int, *, diagonal: bool = True, symbolic_tau: bool = False,
                       symbolic_alpha: bool = False, budget: int = 0) -> tuple[float, float]:
    """``(bytes, seconds)`` of ``fv derive gaussian-loss``: ``kind`` is ``"isotropic"``, ``"matched"`` (``dim``
    = 2^depth - 1), ``"eigenvalues"`` (``dim`` values) or ``"matrix"`` (a D x D covariance, ``diagonal`` or
    not). The matched Gaussian with symbolic alpha grows with the budget: at depth 10, 4.2, 9.6, 74 and 105 s
    at B = 10, 30, 100, 300 (about 3e-4 s per dimension and unit of budget on top)."""
    base_bytes, base_seconds = 60e6, 0.4
    if kind == "isotropic":
        return base_bytes, base_seconds + 0.1
    if kind == "matched":
        seconds = base_seconds + (4.5e-3 + 3e-4 * max(int(budget), 0) if symbolic_alpha else 2e-4) * dim
        return base_bytes + 2e3 * dim, seconds
    if kind == "eigenvalues":
        return base_bytes + 2e3 * dim, base_seconds + 2e-4 * dim
    entries = dim * dim
    seconds = base_seconds + 1.2e-5 * entries
    if not diagonal:
        seconds += (2.6 + 5.2e-3 * dim**3.5) * (2.0 if symbolic_tau else 1.0)
    return base_bytes + 130.0 * entries, seconds
