"""Resource guards of the engine that read no strategy: the prices of the design searches (the coordinate class's
and the unit class's) and of the keyed searches of a comparison, and the checks of a prior's numbers and of
``posterior_mean``'s inputs. The engine's price of a strategy (``mc_cost``, ``check_mc``, its own price
``check_price``), which reads the strategy's object, is :mod:`fvnum.policies.prices`; the time cap and the memory
probe are :mod:`fvsym.guards.limits`.
"""
from __future__ import annotations

from functools import lru_cache

from fvsym._validate import _short
from fvsym.errors import InputError

# The coordinate class's design search (fvnum.policies.search.optimal_nonadaptive_coordinate): every symmetry class of B
# nodes screened on min(search_samples, 1000) samples and the best 8 on search_samples where the classes are at
# most 3000, else greedy forward selection and swaps (about 3 B D designs on search_samples each). Measured on 2
# shared cores at load 9 (one thread): depth 6, budget 4 (1938 classes, 2000 searched): 5.2 s; depth 8, budget 3
# (1344 classes, 4000): 3.9 s (the old price, 2^K B D per searched sample, was 20 times that at depth 8): about
# COORD_NS per sample, design and reading-depth pair, and COORD_DESIGN_S per design.
COORD_NS, COORD_DESIGN_S = 55.0, 0.5e-3


@lru_cache(maxsize=None)
def count_classes(depth: int, budget: int) -> int:
    """The symmetry classes of ``budget`` distinct nodes of a depth-``depth`` tree (``len`` of
    ``fvnum.policies.search.coordinate_classes``); here, beside its price, so that the price imports no search (the
    search imports the engine, which imports these guards)."""
    if budget == 0:
        return 1
    if depth == 0 or budget > 2**depth - 1:
        return 0
    total = 0
    for r in (0, 1):
        rest = budget - r
        for a in range(rest // 2 + 1):
            left, right = count_classes(depth - 1, a), count_classes(depth - 1, rest - a)
            total += left * right if a < rest - a else left * (left + 1) // 2
    return total


def coordinate_search_seconds(depth: int, dim: int, budget: int, search_samples: int) -> float:
    if budget == 0:
        return 0.0
    classes = count_classes(depth, min(budget, dim)) if budget <= dim else 10**9
    if classes <= 3000:
        designs, evaluated = classes + 8, classes * min(search_samples, 1000) + 8 * search_samples
    else:
        designs = 3 * budget * dim
        evaluated = designs * search_samples
    return evaluated * budget * depth * COORD_NS * 1e-9 + designs * COORD_DESIGN_S


# The unit class's design search (fvnum.policies.search.optimal_nonadaptive_unit): 4 starts of L-BFGS, each evaluation
# the Monte Carlo loss and its gradient on search_samples common samples (the posterior over the 2^K leaves
# of B readings, its mean in D coordinates), then the design's loss on the samples. Measured on 2 shared cores
# at load 9 (one thread): depth 4, budget 3, 100,000 samples, 4000 searched: 5.0 s; depth 6, budget 4, 20,000
# and 2000: 7.7 s; depth 8, budget 3, 20,000 and 1000: 13.4 s (the old price, 2^K B D per searched sample, was
# 0.15 to 1.6 times that); on a quiet machine 3.5 times less (0.57 s and 2.2 s): about UNIT_EVAL_S of Python and
# scipy per evaluation whatever the size, which dominates small trees. The constants price a quiet machine
# about twice over, a machine at load 9 about half.
UNIT_EVALUATIONS = 400  # starts x evaluations of each (4 x up to 200; about 100 seen)
UNIT_EVAL_S = 2.5e-3
UNIT_NS = 0.3  # per searched sample, leaf and (B + D), per evaluation
UNIT_EVAL_NS = 3.0  # per sample, leaf and (B + D), the final estimate


def unit_search_seconds(depth: int, dim: int, budget: int, samples: int, search_samples: int, threads: int) -> float:
    """Upper price of ``loss_mc(..., 'optimal_nonadaptive_unit')`` on a tree (see the constants above)."""
    leaves = 2.0**depth * (budget + dim)
    search = UNIT_EVALUATIONS * (UNIT_EVAL_S + UNIT_NS * 1e-9 * search_samples * leaves)
    return search + UNIT_EVAL_NS * 1e-9 * samples * leaves / max(1, threads)


# The sizes of the keyed searches in a comparison (fvnum.theory.keyed_curves), and their price.
DESIGN_SAMPLES_PER_SAMPLE = 4  # the one-layer keyed search's samples per sample of the adaptive policy's


def gaussian_design_settings(budget: int, samples: int) -> dict:
    """The settings of ``fvnum.keys.nonadaptive.gaussian_keyed`` in a comparison: its decoder costs ``nodes^B`` per
    sample and Powell evaluation on a product grid, so at budget 4 it runs on 9 nodes a coordinate, 25
    evaluations and half the samples (depth 6, budget 4: minutes, where the defaults would take an hour);
    from budget 5 on (where ``9^B`` nodes would not fit: :data:`GRID_POINTS`) the decoder's nodes are
    importance-sampled (:data:`IS_POINTS`), on a quarter of the samples and 15 evaluations."""
    if budget <= 3:
        return dict(samples=samples, nodes=11, maxiter=60)
    if budget == 4:
        return dict(samples=max(2, samples // 2), nodes=9, maxiter=25)
    return dict(samples=max(2, samples // 4), nodes=9, maxiter=15)


# fvnum.keys.nonadaptive's searches (docs/benchmarks/2026-12-03-keyed.md: CPU seconds on the shared 2-core machine, one
# thread, benchmarks/bench_keyed.py --prices checks the prices against a table of cases): the layer-1 search
# (quadrature, torch autograd on small tensors) KEYED_SEARCH_S plus KEYED_LEAF_S per leaf (0.25 s at depth 3,
# 0.7 s at depth 6); the one-layer Monte Carlo search at budget b (two starts of up to 200 L-BFGS steps, the
# gradient written out: fvnum.mc._kernels.keyed._one_layer_mc) KEYED_SEARCH_S plus KEYED_DESIGN s per design
# sample, leaf and (b^2 + D) (0.9 s at depth 3, budget 2 on 8000 samples; 9.3 s at depth 6, budget 2); the
# greedy adaptive policy KEYED_ADAPTIVE s per sample, lookahead layer and leaf (0.74 s for 2000 samples to 2
# layers at depth 3, 5.1 s at depth 6), plus KEYED_STATE per sample, layer, leaf and coordinate; the Gaussian one
# KEYED_GAUSSIAN s per decoder node, sample, evaluation and b^2 (4.6 s at depth 3, budget 2 on 2000 samples;
# 21 s at depth 4, budget 3 on 500; 20 s at budget 7 of an isotropic D = 7, importance-sampled nodes).
KEYED_SEARCH_S, KEYED_LEAF_S, KEYED_DESIGN = 0.3, 0.01, 5e-7
KEYED_ADAPTIVE, KEYED_STATE, KEYED_GAUSSIAN = 5e-5, 2e-7, 8e-8


def keyed_cost(*, tree: bool, depth: int, dim: int, budgets, samples: int) -> float:
    """Seconds (an estimate within 3x of the measured, both ways, on the table of bench_keyed.py --prices) of
    ``fvnum.theory.keyed_curves`` at ``budgets`` on ``samples`` samples: the adaptive keyed policy once to the
    largest budget (tree prior), the one-layer search at every budget."""
    budgets = sorted({max(int(b), 1) for b in budgets})
    if not budgets:
        return 0.0
    if tree:
        leaves, design_samples, last = 2**depth, DESIGN_SAMPLES_PER_SAMPLE * samples, budgets[-1]
        seconds = KEYED_SEARCH_S + KEYED_LEAF_S * leaves  # layer 1
        seconds += samples * leaves * (KEYED_ADAPTIVE * (last - 1) + KEYED_STATE * last * dim)
        return seconds + sum(KEYED_SEARCH_S + KEYED_DESIGN * design_samples * leaves * (b * b + dim)
                             for b in budgets if b > 1)
    seconds = 0.0
    for b in budgets:
        kw = gaussian_design_settings(b, samples)
        nodes = decoder_nodes(b, kw["nodes"])
        seconds += KEYED_SEARCH_S + KEYED_GAUSSIAN * nodes * kw["samples"] * (kw["maxiter"] + 1) * b * b
    return seconds


def seconds_cap() -> float:
    from fvsym.guards.limits import max_seconds

    return max_seconds()


def check_posterior_args(spec, design, phi, tau: float):
    """``posterior_mean``'s inputs: finite readings of the design's shape; without noise, readings some
    latent can produce (tree prior, coordinate design). Returns ``(design, phi)`` as arrays."""
    import numpy as np

    from fvnum.priors.capabilities import capability

    check_spec(spec)
    try:
        phi = np.atleast_2d(np.asarray(phi, dtype=float))
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"readings phi must be numbers, got {_short(phi)}") from None
    if phi.ndim != 2:
        raise InputError(f"readings phi must have shape (n, B), got {phi.shape}")
    if not np.isfinite(phi).all():
        raise InputError("readings phi must be finite (got NaN or inf)")
    if isinstance(design, (str, bytes)):
        raise InputError(f"design must be node numbers or unit rows, got {_short(design)}")
    try:
        arr = np.asarray(design)
        if arr.dtype.kind not in "iuf":
            raise TypeError
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"design must be node numbers or unit rows, got {_short(design)}") from None
    if arr.dtype.kind in "iu":
        if arr.shape not in ((phi.shape[1],), phi.shape):
            raise InputError(f"design nodes of shape {arr.shape} do not match readings of shape {phi.shape}")
        if tau == 0:
            capability(spec, "check_noiseless_readings")(np.broadcast_to(arr, phi.shape), phi)
    elif not np.isfinite(arr).all():
        raise InputError("design rows must be finite")
    return design, phi


def check_spec(spec) -> None:
    """Float numbers of a prior the kernels square must neither underflow nor overflow: the prior's own
    ``check_floats`` (the tree: ``fvnum.priors.checks.check_scales``; a Gaussian: ``check_variance``)."""
    from fvnum.priors.capabilities import capability

    capability(spec, "check_floats")()


def check_resolution(spec, what: str) -> None:
    """The lookahead policies (greedy, rollout, the noisy Bellman recursion) compare expected values of
    ``||E[theta | readings]||^2``, numbers near ``E||theta||^2``; a gain of ``a_K^2`` below ``RESOLUTION``
    of it is lost in doubles, and the policy silently stops reading deep levels (measured: greedy at
    ``alpha = 1e-6``, depth 4, ties the path strategy instead of the optimum). Refused in one line by the
    prior's own ``check_resolution`` (the tree: ``fvnum.priors.checks.check_level_resolution``)."""
    from fvnum.priors.capabilities import capability

    capability(spec, "check_resolution")(what)


GRID_POINTS = 6561  # Gaussian keyed decoder nodes per sample on a product grid (9^4); larger gives way to IS_POINTS
IS_POINTS = 1024  # importance-sampled decoder nodes per sample where a product grid would exceed GRID_POINTS


def decoder_nodes(budget: int, nodes: int) -> int:
    """Nodes per sample of the Gaussian keyed decoder (``fvnum.keys.nonadaptive._gaussian_losses``): ``nodes^B`` on a product
    grid up to :data:`GRID_POINTS`, else :data:`IS_POINTS` importance-sampled ones."""
    return nodes**budget if nodes**budget <= GRID_POINTS else IS_POINTS
