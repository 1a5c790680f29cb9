"""The work of the exact noisy Bellman recursion on a tree prior (:mod:`fvnum.optimum.noisy_dp`): the lattice of
readings its trapezoid rules share (:func:`lattice`), the points of its rules per budget (:data:`POINTS`, refined and
coarser), the work a solve does (:func:`tree_work`, against :data:`MAX_WORK`: whether it is solved at all,
:func:`exact_feasible`) and its price in seconds (:func:`tree_solve_seconds`, :func:`tree_policy_seconds`, and
:func:`mc_seconds`, the price of the strategy ``optimal``). A finite prior's recursion prices itself
(:mod:`fvnum.optimum.atoms_dp`).
"""
from __future__ import annotations

import numpy as np

from fvnum.priors.tree import TreeSpec

POINTS = {1: (65,), 2: (49, 161), 3: (33, 65, 81)}  # per budget: points when 1, 2, 3 layers remain
SPAN = 6.5  # each rule covers +-SPAN standard deviations of its class
MAX_WORK = 3e10  # largest work (``work``) solved exactly
LAST_OPS = 20  # operations per lattice point of the last layer (``_kernels._dp_last``)
EXACT_RATE = 2.5e9  # work per second and thread priced: measured 1.8e9 to 5.4e9 on one thread at load 5 (depths 2 to
# 7, budgets 1 to 3, default and refined points), about 3 times more on a quiet machine, 0.7e9 to 2.1e9 at load 9
# (docs/benchmarks/2026-12-03-prices.md)
EXACT_OVERHEAD = 0.05  # seconds of tables and Python per solve


def lattice(a: float, tau: float, points: int):
    """The readings of a node of amplitude ``a``: the points of the lattice ``h Z``, ``h = 2 SPAN tau /
    (points - 1)``, within ``SPAN`` standard deviations of a class mean ``+a, -a, 0`` (so each class sees
    at least its own ``points``-point trapezoid rule). Where the three windows are disjoint nothing is
    shared and each class gets its own rule centred on its mean. Returns readings ``x`` (J,), rule
    weights ``w`` (3, J) (``h phi``, normalised per class), likelihood ratios ``lik`` (J, 3) and
    ``adjacent`` (J,) (whether point ``j + 1`` is the rule neighbour of point ``j``)."""
    points = int(points)
    h = 2 * SPAN * tau / (points - 1)
    means = np.array([a, -a, 0.0])
    if a <= 2 * SPAN * tau:  # overlapping windows: one lattice, at most 2 (points - 1) * 1.5 + 1 points
        top = int(np.floor((a + SPAN * tau) / h + 1e-9))
        idx = np.arange(-top, top + 1)
        x = idx * h
        keep = (np.abs(x[:, None] - means[None]) <= SPAN * tau * (1 + 1e-12)).any(axis=1)
        idx, x = idx[keep], x[keep]
        adjacent = np.r_[np.diff(idx) == 1, False]
        z = (x[:, None] - means[None]) / tau  # (J, 3)
    else:  # disjoint windows: the rule of each class around its own mean, in increasing order
        zq = np.linspace(-SPAN, SPAN, points)
        order = (1, 2, 0)  # means -a, 0, +a
        x = np.concatenate([means[o] + tau * zq for o in order])
        adjacent = np.tile(np.r_[np.ones(points - 1, dtype=bool), False], 3)
        z = np.concatenate([(means[o] - means)[None, :] / tau + zq[:, None] for o in order])
    with np.errstate(over="ignore"):  # a class far away (tiny tau): likelihood ratio 0
        e = -0.5 * z**2
    w = np.exp(e - e.max(axis=0, keepdims=True)).T  # (3, J)
    w /= w.sum(axis=1, keepdims=True)
    lik = np.exp(e - e.max(axis=1, keepdims=True))
    return x, w, lik, adjacent


def default_points(budget: int) -> tuple:
    return POINTS[min(max(budget, 1), 3)][:max(budget, 1)]


def refined_points(points) -> tuple:
    """The refined quadrature of ``points``: the lattice step halved (``2 (p - 1) + 1`` points per rule)."""
    return tuple(2 * (int(p) - 1) + 1 for p in points)


def coarser_points(points) -> tuple:
    """The coarser quadrature of ``points``: the lattice step doubled (``(p - 1) // 2 + 1`` points, at least 3)."""
    return tuple(max(3, (int(p) - 1) // 2 + 1) for p in points)


def check_points(spec, budget: int, points, tau) -> tuple | None:
    """The second quadrature :func:`noisy_bellman` solves for its error estimate: the refined one
    (:func:`refined_points`) where it is feasible, else the coarser one (:func:`coarser_points`);
    None for budget 0 (nothing to integrate)."""
    if budget == 0:
        return None
    fine = refined_points(points)
    return fine if exact_feasible(spec, budget, fine, tau) else coarser_points(points)


def tree_work(spec: TreeSpec, budget: int, points=None, tau=None, root: str = "prior") -> float:
    """Operations of the exact recursion (about one multiply-add each): the child beliefs of every level
    (a lattice point per node read, ``2^K`` weights each) and, per belief of the last level, each node's
    class Gram (``2^K K + 6 D``) and its lattice (``LAST_OPS`` per point). ``tau`` sets the lattices (their
    classes overlap); without it each class counts its own ``points`` (an upper bound). ``root``: ``"prior"``
    (one node per depth at the uniform prior, as ``noisy_bellman`` solves it) or ``"any"`` (every node:
    the policy's decision from a sample's posterior)."""
    if budget == 0:
        return 0.0
    points = default_points(budget) if points is None else points
    K, D, nl = spec.depth, spec.dim, spec.n_leaves
    scales = [float(a) for a in spec.scales]

    def npts(R, k):  # lattice points of a depth-k node when R layers remain
        Q = points[R - 1]
        return 3 * Q if tau is None else lattice_size(scales[k], float(tau), Q)

    beliefs, total = 1.0, 0.0
    for R in range(budget, 1, -1):
        one = R == budget and root == "prior"
        kids = sum(npts(R, k) for k in range(K)) if one else sum(2**k * npts(R, k) for k in range(K))
        beliefs *= kids
        total += beliefs * nl
    last = sum(2**k * (LAST_OPS * npts(1, k) + nl * K + 6 * D) for k in range(K))
    if budget == 1 and root == "prior":
        last = sum(LAST_OPS * npts(1, k) + nl * K + 6 * D for k in range(K))
    return total + beliefs * last


def lattice_size(a: float, tau: float, points: int) -> int:
    """Number of readings of ``lattice(a, tau, points)``."""
    if a > 2 * SPAN * tau:
        return 3 * int(points)
    return int(lattice(a, tau, points)[0].size)


def tree_solve_seconds(spec, budget: int, tau=None, threads: int = 1, points=None, refine: bool = True) -> float:
    """Upper price of ``noisy_bellman``: ``tree_work / EXACT_RATE`` over the threads, plus ``EXACT_OVERHEAD``; with
    ``refine`` (its default) the second quadrature of the error estimate (:func:`check_points`) too."""
    busy = max(1, int(threads))
    points = default_points(budget) if points is None else tuple(points)
    total = tree_work(spec, budget, points, tau)
    other = check_points(spec, budget, points, tau) if refine else None
    if other is not None:
        total += tree_work(spec, budget, other, tau)
    return EXACT_OVERHEAD + total / (EXACT_RATE * busy)


def tree_policy_seconds(spec, budget: int, samples: int, tau=None, threads: int = 1, points=None) -> float:
    """Upper price of ``samples`` samples of ``NoisyBellmanPolicy``: at layer ``l >= 1`` each sample runs
    the recursion of the ``budget - l`` remaining layers from its own posterior (every node a candidate)."""
    points = default_points(budget) if points is None else points
    per = sum(tree_work(spec, budget - l, points[: budget - l], tau, root="any") for l in range(1, budget))
    busy = max(1, min(int(threads), -(-int(samples) // 1024)))
    return EXACT_OVERHEAD + samples * (per / EXACT_RATE + 5e-6 * budget) / busy


def mc_seconds(prior, channel, budget: int, samples: int, *, threads: int = 1) -> float:
    """The price of ``optimal`` (its ``Strategy.price``): upper seconds of ``samples`` Monte Carlo samples on the
    numeric ``prior`` under ``channel`` (a ``fvnum.Channel``). Under noise, where the exact recursion is solved
    (:func:`exact_feasible`), its solve (one quadrature: the policy alone) and the samples of
    :class:`NoisyBellmanPolicy`; elsewhere (``tau = 0``: the noiseless Bellman policy with its solve; a Gaussian
    prior: water-filling) the engine's price of its coordinate kernels (``fvnum.policies.prices.engine_seconds``). A size
    the recursion does not solve is refused by the strategy itself, not by its price."""
    from fvnum.policies.prices import engine_seconds
    from fvnum.policies.strategies import strategy_of
    from fvnum.priors.analyses import analysis

    tau = channel.tau
    own = analysis(prior, "mc_seconds")  # a prior that prices its own (a finite prior: fvnum.optimum.finite)
    if own is not None:
        return own("optimal", budget, channel, samples, threads)
    if tau > 0 and 1 <= budget <= 3 and exact_feasible(prior, budget, tau=tau):
        return (tree_solve_seconds(prior, budget, tau, threads, refine=False)
                + tree_policy_seconds(prior, budget, samples, tau, threads))
    return engine_seconds(strategy_of("optimal"), prior, channel, budget, samples, threads=threads)


def exact_feasible(spec, budget: int, points=None, tau=None) -> bool:
    """Whether the exact recursion is small enough: tree prior, ``budget <= 3``, work below MAX_WORK."""
    from fvnum.priors.capabilities import capability

    return capability(spec, "heap_depth") is not None and budget <= 3 and tree_work(spec, budget, points, tau) <= MAX_WORK
