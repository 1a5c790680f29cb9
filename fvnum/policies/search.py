"""Searches for good non-adaptive designs under noise (docs/theory.md sections 2, 3, 7).

Every search optimises a Monte Carlo loss on one fixed set of samples (common random numbers, stream
``SEARCH`` of the seed), picks among its candidates on a second independent set (``SELECT``), and
reports the winner's loss on a third (``EVAL``, the stream ``loss_mc`` uses), so the reported Estimate
is not biased by the selection. Each returns a ``fvnum.estimate.SearchResult`` (design, estimate, how).

- :func:`optimal_nonadaptive_unit`: unit-class design, L-BFGS on the exact gradient of the Monte Carlo
  loss (``_kernels._tree_dense_value_grad``) from several starts (top levels, random orthonormal rows,
  random rows). A local optimum: more ``restarts`` can only help.
- :func:`optimal_nonadaptive_coordinate`: the best set of distinct nodes, exhaustively over the
  subsets up to the tree's symmetry (swapping the two children of any node) when there are at most
  ``max_exhaustive`` classes, else greedy forward selection followed by single-swap local search.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from fvnum.mc import _chunks
from fvnum.priors import _kernels
from fvnum.estimate import SearchResult
from fvnum.guards.limits import count_classes  # noqa: F401 (the count lives beside its price; callers import it from here too)
from fvnum.priors.gaussian import numeric_design_loss as gaussian_design_loss
from fvnum.priors.gaussian import numeric_optimal_design as gaussian_optimal_design
from fvnum.priors.capabilities import capability
from fvnum.mc.channels import check_channel
from fvnum.mc.simulate import check_inputs, decode_losses, draw_samples, read, simulate
from fvnum.policies.policies import FixedDesign
from fvnum.mc.protocol import Rows
from fvnum.priors.tree import TreeSpec, numeric_prior

GRAD_CHUNK = 2048


# --- unit class ------------------------------------------------------------------------------------
def _design_value_grad(spec: TreeSpec, W, leaves, noise, tau, threads):
    """Mean loss of design ``W`` on the CRN samples and its gradient (chunks summed in fixed order)."""
    starts = range(0, leaves.size, GRAD_CHUNK)

    def task(a, _rng=None):
        g = np.zeros_like(W)
        v = _kernels._tree_dense_value_grad(W, noise[a : a + GRAD_CHUNK], leaves[a : a + GRAD_CHUNK], tau,
                                            spec.scales, g)
        return v, g

    nthreads = _chunks.default_threads() if threads is None else threads
    if nthreads > 1 and len(starts) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(nthreads, len(starts))) as ex:
            parts = list(ex.map(task, starts))
    else:
        parts = [task(a) for a in starts]
    value = sum(p[0] for p in parts) / leaves.size
    grad = sum(p[1] for p in parts) / leaves.size
    return value, grad


def _start_designs(spec, budget, restarts, rng):
    D = spec.dim
    starts = []
    top = np.zeros((budget, D))
    top[np.arange(budget), np.arange(budget) % D] = 1.0
    starts.append(top)
    if budget <= D:
        q, _ = np.linalg.qr(rng.standard_normal((D, budget)))
        starts.append(q.T.copy())
    while len(starts) < max(1, restarts):
        starts.append(rng.standard_normal((budget, D)))
    return [s / np.linalg.norm(s, axis=1, keepdims=True) for s in starts[: max(1, restarts)]]


def optimal_nonadaptive_unit(prior, budget: int, channel, *, samples: int = 4000, seed: int = 0, restarts: int = 4,
                             maxiter: int = 200, threads=None) -> SearchResult:
    """Best non-adaptive unit-class design (``L = 1``, ``d = B``) found by optimising the Monte Carlo loss
    with common random numbers. Returns a ``SearchResult``: ``design`` ``W`` (B, D) with unit rows and
    ``estimate`` its loss on ``samples`` fresh samples (under ``channel``: ``fvnum.gaussian(tau)``, or
    ``fvnum.tokens(N)`` decoded at ``tau(N)``). Gaussian prior: the water-filling design (exactly optimal). Tree prior at
    ``tau = 0``: any generic row separates the ``2^K`` leaves, so a random design is optimal (loss 0)."""
    from scipy.optimize import minimize

    spec, channel, samples, seed, budget = check_inputs(prior, check_channel(channel), samples=samples, seed=seed,
                                                        budget=budget)
    if capability(spec, "linear_posterior"):
        W = gaussian_optimal_design(spec, budget, channel.tau)
        how = "water-filling (the unit class's exact optimum, adaptive or not: Theorem G1)"
        return _found(spec, channel, FixedDesign(W, "optimal_nonadaptive_unit"), budget, samples, seed, threads, how)
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.SEARCH))
    if budget == 0:
        W, how = np.zeros((0, spec.dim)), "nothing to read (budget 0)"
    elif channel.tau == 0:
        W = _start_designs(spec, budget, 3, rng)[-1]
        how = "a random design: at tau = 0 any generic row separates the leaves (loss 0)"
    else:
        leaves, noise = spec.sample(samples, rng), rng.standard_normal((samples, budget))
        shape = (budget, spec.dim)

        def fun(x):
            V = x.reshape(shape)
            norms = np.linalg.norm(V, axis=1, keepdims=True)
            W = V / norms
            value, G = _design_value_grad(spec, np.ascontiguousarray(W), leaves, noise, channel.tau, threads)
            dV = (G - (G * W).sum(axis=1, keepdims=True) * W) / norms
            return value, dV.ravel()

        found = []
        for W0 in _start_designs(spec, budget, restarts, rng):
            res = minimize(fun, W0.ravel(), jac=True, method="L-BFGS-B", options={"maxiter": int(maxiter)})
            V = res.x.reshape(shape)
            found.append(V / np.linalg.norm(V, axis=1, keepdims=True))
        if len(found) > 1:  # choose on independent samples
            srng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.SELECT))
            sl, sn = spec.sample(samples, srng), srng.standard_normal((samples, budget))
            scores = [_design_value_grad(spec, np.ascontiguousarray(W), sl, sn, channel.tau, threads)[0] for W in found]
            W = found[int(np.argmin(scores))]
        else:
            W = found[0]
        how = (f"L-BFGS on the Monte Carlo loss of {samples} common samples from {len(found)} "
               f"start{'s' if len(found) != 1 else ''}" + (f", the best chosen on {samples} independent samples"
                                                           if len(found) > 1 else "") + " (a local optimum)")
    W = np.ascontiguousarray(W)
    return _found(spec, channel, FixedDesign(W, "optimal_nonadaptive_unit"), budget, samples, seed, threads, how)


def _found(spec, channel, design: FixedDesign, budget: int, samples: int, seed: int, threads, how: str) -> SearchResult:
    """The ``SearchResult`` of a design found: its loss on ``samples`` fresh samples (stream ``EVAL``)."""
    est = simulate(spec, channel, design, budget, samples=samples, seed=seed, threads=threads)
    return SearchResult(design.name, est, how, design.design, design)


# --- coordinate class ------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _shapes(height: int, count: int) -> tuple:
    """Canonical node subsets of a full subtree with ``height`` levels and ``count`` chosen nodes, up to
    swapping children: nested tuples ``(root_chosen, left, right)`` with ``left <= right``."""
    if count == 0:
        return ((),) if height >= 0 else ()
    if height == 0 or count > 2**height - 1:
        return ()
    out = []
    for r in (0, 1):
        rest = count - r
        for a in range(rest + 1):
            b = rest - a
            if a > b:
                continue
            left, right = _shapes(height - 1, a), _shapes(height - 1, b)
            for i, L in enumerate(left):
                for k, R in enumerate(right):
                    if a == b and k < i:
                        continue
                    out.append((r, L, R))
    return tuple(out)


def _expand(shape, node: int) -> list:
    if shape == ():
        return []
    r, L, R = shape
    return ([node] if r else []) + _expand(L, 2 * node) + _expand(R, 2 * node + 1)


def coordinate_classes(depth: int, budget: int) -> list:
    """One node set (sorted) per symmetry class of ``budget`` distinct nodes of the depth-``depth`` tree."""
    return [tuple(sorted(_expand(s, 1))) for s in _shapes(depth, budget)]


def optimal_nonadaptive_coordinate(prior, budget: int, channel, *, samples: int = 4000, seed: int = 0,
                                   allow_repeat: bool = False, max_exhaustive: int = 3000,
                                   screen_samples: int = 1000, keep: int = 8, threads=None) -> SearchResult:
    """Best non-adaptive coordinate design of ``budget`` distinct nodes under noise. Returns a
    ``SearchResult`` (``design``: the node numbers (B,), sorted). Exhaustive over symmetry classes when
    they are at most ``max_exhaustive`` (each screened on ``screen_samples`` CRN samples, the best ``keep``
    compared on ``samples``), else greedy forward selection and single-swap local search on ``samples``
    CRN samples. With ``allow_repeat`` (gaussian channel) the local search may also read a node more than
    once. Gaussian prior: the same searches on the exact loss of each design."""
    spec = numeric_prior(prior)
    spec, channel, samples, seed, budget = check_inputs(
        spec, check_channel(channel), samples=samples, seed=seed, budget=budget,
        max_budget=None if allow_repeat else spec.dim, why=f"at most D = {spec.dim} distinct nodes")
    if budget == 0:
        nodes, how = (), "nothing to read (budget 0)"
    elif capability(spec, "linear_posterior"):  # the exact loss of a design
        eye = np.eye(spec.dim)
        cost = lambda nodes_: gaussian_design_loss(spec, eye[np.asarray(nodes_) - 1], channel.tau)  # noqa: E731
        nodes = _local_search(spec.dim, budget, cost, allow_repeat)
        how = "greedy forward selection and single swaps on the exact loss of each design"
    else:
        def evaluator(n_eval, purpose):
            rng = np.random.default_rng(_chunks.seed_sequence(seed, purpose))
            draws = draw_samples(spec, channel, n_eval, budget, rng)

            def cost(nodes_):
                rows = Rows(np.asarray(nodes_, dtype=np.int64), True, True)
                phi = read(spec, channel, draws, rows, 0)
                return float(decode_losses(spec, channel, draws, [rows], phi).mean())

            return cost

        depth = capability(spec, "heap_depth")  # the symmetry classes of a tree's nodes
        classes = count_classes(depth, budget) if depth is not None else None
        if not allow_repeat and classes is not None and classes <= max_exhaustive:
            n_screen = min(samples, screen_samples)
            screen = evaluator(n_screen, _chunks.SEARCH)
            ranked = sorted(coordinate_classes(depth, budget), key=screen)[:keep]
            select = evaluator(samples, _chunks.SELECT)
            nodes = min(ranked, key=select)
            how = (f"exhaustive over the {classes} symmetry classes on {n_screen} common samples, the best "
                   f"{len(ranked)} compared on {samples} independent samples")
        else:
            nodes = _local_search(spec.dim, budget, evaluator(samples, _chunks.SEARCH), allow_repeat)
            how = f"greedy forward selection and single swaps on {samples} common samples (a local optimum)"
    design = FixedDesign(np.asarray(nodes, dtype=np.int64), "optimal_nonadaptive_coordinate")
    return _found(spec, channel, design, budget, samples, seed, threads, how)


def _local_search(dim: int, budget: int, cost, allow_repeat: bool, max_rounds: int = 20) -> tuple:
    nodes: list = []
    for _ in range(budget):  # greedy forward selection
        options = [n for n in range(1, dim + 1) if allow_repeat or n not in nodes]
        nodes.append(min(options, key=lambda n: cost(tuple(sorted(nodes + [n])))))
    best = cost(tuple(sorted(nodes)))
    for _ in range(max_rounds):  # single swaps, first improvement
        improved = False
        for i in range(budget):
            for n in range(1, dim + 1):
                if n == nodes[i] or (not allow_repeat and n in nodes):
                    continue
                trial = nodes[:i] + [n] + nodes[i + 1 :]
                c = cost(tuple(sorted(trial)))
                if c < best:
                    nodes, best, improved = trial, c, True
        if not improved:
            break
    return tuple(sorted(nodes))

