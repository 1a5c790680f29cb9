"""Monte Carlo of THEORY.md section 2: any prior x strategy x channel, decoded by the exact Bayes
posterior mean, with a standard error (:func:`loss_mc`).

Each chunk of samples draws, in this order and from its own seeded stream: the latents (leaf indices
for a tree prior, ``theta`` for a Gaussian prior), the gaussian-channel noise ``xi`` (n, B) (gaussian
channel only; drawn even at ``tau = 0``, so curves over ``tau`` share their noise), and the tokens
statistic (tokens channel only). The same seed therefore gives common random numbers across
strategies of the same budget, which makes their differences precise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _chunks, _kernels
from .channels import Channel, make_channel, token_statistics
from .estimate import Moments, pool
from .gaussian import GaussSpec
from .gaussian import optimal_design as gaussian_optimal_design
from .gaussian import posterior_mean as gaussian_posterior_mean
from .strategies import (
    CallablePolicy, FixedDesign, GreedyCoordinate, PathPolicy, Policy, Rows, TablePolicy, check_rows,
)
from .tree import TreeSpec, numeric_prior

STRATEGIES = ("path", "top_levels", "fixed", "optimal", "optimal_nonadaptive", "policy",
              "greedy_coordinate", "greedy_dense")
MEASUREMENTS = ("unit", "coordinate")
MAX_SAMPLES = 10**10


# --- inputs ---------------------------------------------------------------------------------------
def check_samples(samples) -> int:
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)):
        if isinstance(samples, float) and samples.is_integer():
            samples = int(samples)
        else:
            raise ValueError(f"samples must be an integer, got {samples!r}")
    if samples < 2:
        raise ValueError(f"samples must be >= 2 (a standard error needs two), got {samples}")
    if samples > MAX_SAMPLES:
        raise ValueError(f"samples must be <= {MAX_SAMPLES}, got {samples}")
    return int(samples)


def check_budget(budget, maximum=None, why="") -> int:
    """Integer ``0 <= budget <= maximum`` (no upper limit when ``maximum`` is None)."""
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)):
        raise ValueError(f"budget must be an integer, got {budget!r}")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if maximum is not None and budget > maximum:
        raise ValueError(f"budget {budget} is too large: {why}")
    return int(budget)


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return int(seed)


def check_design(design, spec, budget: int) -> np.ndarray:
    """Node list (heap numbering, 1..D) or a (B, D) matrix of unit rows."""
    if design is None:
        raise ValueError("strategy 'fixed' needs a design: node numbers or a (B, D) matrix of unit rows")
    arr = np.asarray(design)
    if arr.ndim == 1 and (arr.dtype.kind in "iu" or arr.size == 0 or np.all(np.mod(arr, 1) == 0)):
        if arr.size and arr.dtype.kind == "f":
            arr = arr.astype(np.int64)
        arr = arr.astype(np.int64)
        bad = [int(x) for x in arr if not 1 <= x <= spec.dim]
        if bad:
            raise ValueError(f"design node {bad[0]} is outside the tree (nodes 1..{spec.dim})")
        if arr.size != budget:
            raise ValueError(f"design has {arr.size} nodes but budget is {budget}")
        return arr
    if arr.ndim != 2 or arr.dtype.kind not in "fiu":
        raise ValueError(f"design must be a node list or a (B, D) matrix, got an array of shape {arr.shape}")
    arr = arr.astype(float)
    if arr.shape != (budget, spec.dim):
        raise ValueError(f"design matrix has shape {arr.shape}, expected (budget, D) = ({budget}, {spec.dim})")
    norms = np.linalg.norm(arr, axis=1)
    if not np.all(np.abs(norms - 1) <= 1e-6):
        i = int(np.argmax(np.abs(norms - 1)))
        raise ValueError(f"design row {i} has norm {norms[i]:.6g}; rows must be unit vectors")
    return arr


# --- one chunk of draws ---------------------------------------------------------------------------
@dataclass
class Draws:
    """Random inputs of ``n`` samples: ``leaves`` (tree) or ``theta`` (Gaussian), gaussian-channel
    ``noise`` (n, B), tokens ``stat`` (n, D)."""

    n: int
    leaves: np.ndarray | None = None
    theta: np.ndarray | None = None
    noise: np.ndarray | None = None
    stat: np.ndarray | None = None

    @classmethod
    def concat(cls, parts: list) -> "Draws":
        if len(parts) == 1:
            return parts[0]
        cat = lambda name: None if getattr(parts[0], name) is None else np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        return cls(sum(p.n for p in parts), cat("leaves"), cat("theta"), cat("noise"), cat("stat"))

    def dense(self, spec) -> np.ndarray:
        if self.theta is None:
            self.theta = spec.thetas(self.leaves)
        return self.theta


def draw(spec, channel: Channel, n: int, budget: int, rng) -> Draws:
    d = Draws(n)
    if isinstance(spec, TreeSpec):
        d.leaves = spec.sample(n, rng)
    else:
        d.theta = spec.sample(n, rng)
    if channel.kind == "gaussian":
        d.noise = rng.standard_normal((n, budget))
    else:
        d.stat = token_statistics([d.dense(spec)], channel.n_tokens, channel.s2, rng)[0]
    return d


def read(spec, channel: Channel, draws: Draws, rows: Rows, offset: int) -> np.ndarray:
    """Readings (n, d) of one layer whose channels are ``offset .. offset + d - 1`` of the budget."""
    n = draws.n
    if rows.coordinate:
        nodes = rows.nodes(n)
        idle = nodes == 0
        if channel.kind == "tokens":
            vals = np.take_along_axis(draws.stat, np.maximum(nodes, 1) - 1, axis=1)
            return np.where(idle, 0.0, vals)
        if isinstance(spec, TreeSpec):
            vals = spec.values(draws.leaves, nodes)
        else:
            vals = np.take_along_axis(draws.theta, np.maximum(nodes, 1) - 1, axis=1)
        vals = vals + channel.tau * draws.noise[:, offset : offset + nodes.shape[1]]
        return np.where(idle, 0.0, vals)
    W = rows.array
    src = draws.stat if channel.kind == "tokens" else draws.dense(spec)
    vals = src @ W.T if rows.shared else np.einsum("nbd,nd->nb", W, src)
    if channel.kind == "gaussian":
        vals = vals + channel.tau * draws.noise[:, offset : offset + W.shape[-2]]
    return vals


def decode_losses(spec, channel: Channel, draws: Draws, rows: list, phi: np.ndarray) -> np.ndarray:
    """Per-sample loss of the exact posterior mean given readings ``phi`` (n, B) of the rows ``rows``."""
    n = draws.n
    if isinstance(spec, TreeSpec):
        if all(r.coordinate for r in rows):
            nodes = np.concatenate([r.nodes(n) for r in rows], axis=1) if rows else np.zeros((n, 0), np.int64)
            out = np.zeros(n)
            _kernels._tree_coord_decode(
                np.ascontiguousarray(nodes), np.ascontiguousarray(phi), channel.tau, spec.scales,
                draws.leaves, out, np.zeros((0, spec.dim)),
            )
            return out
        W = _stack_dense(rows, n, spec.dim)
        out = np.zeros(n)
        _kernels._tree_dense_decode(W, np.ascontiguousarray(phi), channel.tau, 1e-9, spec.scales,
                                    draws.leaves, out, np.zeros((0, spec.dim)))
        return out
    W = _stack_dense(rows, n, spec.dim)
    mean = gaussian_posterior_mean(spec, W[0] if W.shape[0] == 1 else W, phi, channel.tau)
    return ((mean - draws.theta) ** 2).sum(axis=1)


def _stack_dense(rows: list, n: int, dim: int) -> np.ndarray:
    """(1, B, D) when every layer is shared by all samples, else (n, B, D)."""
    if not rows:
        return np.zeros((1, 0, dim))
    parts = [r.dense(n, dim) for r in rows]
    if not all(r.shared for r in rows):
        parts = [np.broadcast_to(p, (n,) + p.shape[1:]) for p in parts]
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


@dataclass
class Run:
    """Per-sample results of one chunk: ``loss`` (n,), readings ``phi`` (n, L, d), the rows the policy
    chose (``rows``, one ``Rows`` per layer) and those actually read (``actual``, differ under patching)."""

    loss: np.ndarray
    phi: np.ndarray
    rows: list
    actual: list


def run_policy(spec, channel, policy: Policy, draws: Draws, *, donor: Draws | None = None, patch_layer: int = 0,
               informed: bool = False) -> Run:
    """Route, read and decode one chunk. With ``donor`` and ``patch_layer`` l >= 1, layer ``l`` reads the
    rows the policy chooses on the donor context (key patching, THEORY.md section 8)."""
    n, L, d, D = draws.n, policy.layers, policy.width, spec.dim
    phi = np.zeros((n, L, d))
    chosen, actual = [], []
    state = policy.start(n)
    if donor is not None and patch_layer >= 1:
        dstate, dphi = policy.start(n), np.zeros((n, L, d))
    for l in range(L):
        rows = check_rows(policy.rows(l, state, phi[:, :l]), n=n, width=d, dim=D, layer=l)
        act = rows
        if donor is not None and l < patch_layer:
            drows = check_rows(policy.rows(l, dstate, dphi[:, :l]), n=n, width=d, dim=D, layer=l)
            if l == patch_layer - 1:
                act = drows
            else:
                dphi[:, l] = read(spec, channel, donor, drows, l * d)
                dstate = policy.update(l, dstate, drows, dphi[:, l])
        phi[:, l] = read(spec, channel, draws, act, l * d)
        state = policy.update(l, state, rows, phi[:, l])
        chosen.append(rows)
        actual.append(act)
    loss = decode_losses(spec, channel, draws, actual if informed else chosen, phi.reshape(n, L * d))
    return Run(loss, phi, chosen, actual)


def run_path(spec: TreeSpec, channel: Channel, draws: Draws, budget: int, *, donor: Draws | None = None,
             patch_layer: int = 0, informed: bool = False) -> Run:
    """The path strategy through the fused kernel (same numbers as ``run_policy`` with ``PathPolicy``)."""
    n, D = draws.n, spec.dim
    loss, phi, nodes = np.zeros(n), np.zeros((n, budget)), np.zeros((n, budget), dtype=np.int64)
    empty = np.zeros((0, D))
    tokens = channel.kind == "tokens"
    _kernels._tree_path_sim(
        draws.leaves, draws.noise if not tokens else np.zeros((n, budget)), draws.stat if tokens else empty,
        channel.tau, spec.scales,
        donor.leaves if donor is not None else np.zeros(0, np.int64),
        donor.stat if (donor is not None and tokens) else empty,
        int(patch_layer) if donor is not None else 0, bool(informed), loss, phi, nodes,
    )
    rows = [Rows(nodes[:, l : l + 1].copy(), True, False) for l in range(budget)]
    return Run(loss, phi[:, :, None], rows, rows)


# --- strategies -----------------------------------------------------------------------------------
def _layout(budget: int, layers, width, default_width: int = 1) -> tuple[int, int]:
    if layers is None and width is None:
        width = default_width
    if width is None:
        if layers < 1 or budget % layers:
            raise ValueError(f"budget {budget} is not a multiple of layers {layers}")
        width = budget // layers
    if layers is None:
        if width < 1 or budget % width:
            raise ValueError(f"budget {budget} is not a multiple of width {width}")
        layers = budget // width
    if layers * width != budget:
        raise ValueError(f"layers x width = {layers} x {width} does not equal the budget {budget}")
    return int(layers), int(width)


def _tree_depth_of(spec) -> int:
    if isinstance(spec, TreeSpec):
        return spec.depth
    K = (spec.dim + 1).bit_length() - 1
    if 2**K - 1 != spec.dim:
        raise ValueError(f"the path strategy needs a tree layout, D = 2^K - 1; the Gaussian prior has D = {spec.dim}")
    return K


def build_policy(prior, spec, channel: Channel, strategy: str, budget: int, *, design=None, policy=None,
                 layers=None, width=None, measurement="unit", samples=4000, seed=0, threads=None) -> Policy:
    """The Policy object for a named strategy (searches run here for ``optimal_nonadaptive``)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    tree = isinstance(spec, TreeSpec)
    if strategy == "path":
        K = _tree_depth_of(spec)
        check_budget(budget, K, f"the path strategy reads one node per level, at most depth K = {K}")
        _layout(budget, layers, width)  # must be L = B, d = 1
        if (layers not in (None, budget)) or (width not in (None, 1)):
            raise ValueError("the path strategy has layers = budget and width = 1")
        return PathPolicy(budget)
    coord_max = (spec.dim, f"a coordinate design reads at most D = {spec.dim} distinct nodes")
    if strategy == "top_levels":
        check_budget(budget, *coord_max)
        return FixedDesign(np.arange(1, budget + 1, dtype=np.int64), "top_levels")
    if strategy == "fixed":
        check_budget(budget)
        return FixedDesign(check_design(design, spec, budget), "fixed")
    if strategy == "policy":
        if policy is None:
            raise ValueError("strategy 'policy' needs policy=callable (see fvnum.strategies for the protocol)")
        check_budget(budget)
        L, d = _layout(budget, layers, width)
        return CallablePolicy(policy, L, d)
    if not tree:  # Gaussian prior: by Theorem G1 the water-filling design is optimal, adaptive or not
        if strategy in ("greedy_coordinate", "greedy_dense"):
            raise ValueError(f"strategy {strategy!r} needs a tree prior")
        check_budget(budget)
        return FixedDesign(gaussian_optimal_design(spec, budget, channel.tau), strategy)
    if strategy == "optimal":
        check_budget(budget, *coord_max)
        L, d = _layout(budget, layers, width)
        return bellman_policy(prior, spec, channel.tau, L, d)
    if strategy == "optimal_nonadaptive":
        from .search import optimal_nonadaptive_coordinate, optimal_nonadaptive_unit

        if measurement not in MEASUREMENTS:
            raise ValueError(f"unknown measurement class {measurement!r}; choose unit or coordinate")
        check_budget(budget, *((None, "") if measurement == "unit" else coord_max))
        if measurement == "unit":
            W, _ = optimal_nonadaptive_unit(spec, budget, channel.tau, samples=samples, seed=seed, threads=threads)
            return FixedDesign(W, "optimal_nonadaptive")
        nodes, _ = optimal_nonadaptive_coordinate(spec, budget, channel.tau, samples=samples, seed=seed,
                                                  threads=threads, allow_repeat=False)
        return FixedDesign(np.asarray(nodes, dtype=np.int64), "optimal_nonadaptive")
    if strategy == "greedy_coordinate":
        check_budget(budget)
        return GreedyCoordinate(spec, channel.tau, budget, allow_repeat=channel.kind == "gaussian")
    from .search import GreedyDense

    check_budget(budget)
    return GreedyDense(spec, channel.tau, budget)


def bellman_policy(prior, spec: TreeSpec, tau: float, layers: int, width: int) -> Policy:
    """The noiseless-optimal policy of ``fvsym.bellman.solve`` as a TablePolicy (run under noise)."""
    try:
        from fvsym import bellman
    except ImportError:
        raise ValueError("strategy 'optimal' needs fvsym.bellman, which this installation lacks") from None
    from fvsym.priors import TreePrior

    if not isinstance(prior, TreePrior):
        prior = TreePrior(spec.depth, scales=[str(a) for a in spec.scales])
    solution = bellman.solve(prior, layers, width)
    if solution.policy is None:  # nothing to read
        return FixedDesign(np.zeros(0, dtype=np.int64), "optimal")
    return TablePolicy(solution.policy, spec, tau, layers, width)


# --- the public estimator -------------------------------------------------------------------------
@dataclass(frozen=True)
class FunctionVectors:
    """What ``loss_mc(..., return_phi=True)`` returns next to the Estimate (THEORY.md section 9).

    ``phi`` (n, L, d): the readings of every layer, so ``Phi_l = phi[:, :l].reshape(n, l * d)``;
    ``nodes`` (n, L, d): the nodes read (coordinate policies), else None; ``rows`` (L, d, D): the design
    of a non-adaptive dense strategy, else None; ``leaves`` (n,) for a tree prior (the path prefix
    ``s_1..s_l`` of a sample follows from its leaf), ``theta`` (n, D) for a Gaussian prior; ``loss`` (n,).
    """

    phi: np.ndarray
    loss: np.ndarray
    nodes: np.ndarray | None = None
    rows: np.ndarray | None = None
    leaves: np.ndarray | None = None
    theta: np.ndarray | None = None

    def Phi(self, layer: int) -> np.ndarray:
        """The function vector after ``layer`` layers, (n, layer * d)."""
        return self.phi[:, :layer].reshape(self.phi.shape[0], -1)


def draw_floats(spec, channel: Channel, budget: int) -> int:
    """Floats drawn per sample (sets the random block size: strategy-independent)."""
    dense_theta = isinstance(spec, GaussSpec) or channel.kind == "tokens"
    return 1 + budget + (spec.dim if dense_theta else 0) + (spec.dim if channel.kind == "tokens" else 0)


def work_floats(spec, channel: Channel, pol: Policy, budget: int) -> int:
    """Floats of work per sample of a policy (sets its chunk size)."""
    base = draw_floats(spec, channel, budget) + 4 * budget
    if isinstance(pol, (PathPolicy, TablePolicy, GreedyCoordinate)):
        return base
    if isinstance(pol, FixedDesign):
        return base + (0 if np.asarray(pol.design).dtype.kind in "iu" else spec.dim)
    return base + spec.dim * (budget + 1)  # per-sample dense rows (user policies, greedy_dense)


def blocks(spec, channel: Channel, pol: Policy, budget: int, factor: int = 1) -> dict:
    """Random block (strategy-independent; room for a dense latent per sample) and the policy's chunk."""
    block = _chunks.block_size(draw_floats(spec, channel, budget) + spec.dim)
    return {"block": block, "chunk": _chunks.chunk_size(factor * work_floats(spec, channel, pol, budget), block)}


def loss_mc(prior, strategy: str, budget: int, *, tau=None, tokens=None, s2=0.01, design=None, policy=None,
            layers=None, width=None, samples: int = 100_000, seed: int = 0, return_phi: bool = False,
            measurement: str = "unit", search_samples: int = 4000, threads=None, progress=False):
    """Monte Carlo loss ``E||theta_hat - theta||^2`` of a strategy with the exact Bayes decoder.

    ``prior``: a fvsym ``TreePrior`` with numeric alpha/scales or a ``GaussianPrior``.
    ``strategy``: ``path`` (L = B, d = 1), ``top_levels``, ``fixed`` (``design`` = node list or (B, D)
    unit rows), ``optimal`` (tree: the noiseless Bellman policy of ``fvsym`` for ``layers`` x ``width``,
    run under noise; Gaussian: water-filling, optimal by Theorem G1), ``optimal_nonadaptive`` (tree:
    the design found by :func:`fvnum.optimal_nonadaptive_unit`, or ``_coordinate`` with
    ``measurement="coordinate"``, searched on ``search_samples`` independent samples; Gaussian:
    water-filling), ``policy`` (``policy`` = a callable, see ``fvnum.strategies``), and the greedy
    adaptive policies ``greedy_coordinate`` and ``greedy_dense`` (tree prior).
    Channel: exactly one of ``tau`` (gaussian) or ``tokens`` = N (tokens channel with label noise ``s2``;
    decoded with ``tau = tau_of_tokens(prior, N, s2)``).
    Returns an ``Estimate``; with ``return_phi`` also the ``FunctionVectors`` of every sample.
    Same ``seed``, same numbers, whatever ``threads`` (default: all cores; env ``FVNUM_THREADS``).
    """
    spec = numeric_prior(prior)
    channel = make_channel(spec, tau, tokens, s2)
    samples = check_samples(samples)
    seed = check_seed(seed)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    pol = build_policy(prior, spec, channel, strategy, budget, design=design, policy=policy, layers=layers,
                       width=width, measurement=measurement, samples=check_samples(search_samples), seed=seed,
                       threads=threads)
    est, fv = simulate(spec, channel, pol, budget, samples=samples, seed=seed, record=return_phi,
                       threads=threads, progress=progress)
    return (est, fv) if return_phi else est


def simulate(spec, channel: Channel, pol: Policy, budget: int, *, samples: int, seed: int, record=False,
             threads=None, progress=False, purpose=_chunks.EVAL):
    """Estimate (and, with ``record``, FunctionVectors) of a Policy object."""
    fast_path = isinstance(pol, PathPolicy) and isinstance(spec, TreeSpec)

    def chunk(sizes, rngs):
        draws = Draws.concat([draw(spec, channel, n, budget, rng) for n, rng in zip(sizes, rngs)])
        size = draws.n
        run = run_path(spec, channel, draws, budget) if fast_path else run_policy(spec, channel, pol, draws)

        extra = None
        if record:
            nodes = (np.stack([r.nodes(size) for r in run.rows], axis=1)
                     if run.rows and all(r.coordinate for r in run.rows) else None)
            extra = (run.phi, run.loss, nodes, draws.leaves, draws.theta if draws.leaves is None else None)
        return Moments.of(run.loss), extra

    parts = _chunks.run_chunks(chunk, samples, seed, **blocks(spec, channel, pol, budget), purpose=purpose,
                               threads=threads, progress=progress)
    est = pool(p[0] for p in parts).estimate()
    if not record:
        return est, None
    cat = lambda i: None if parts[0][1][i] is None else np.concatenate([p[1][i] for p in parts])  # noqa: E731
    rows = None
    if not pol.adaptive and np.asarray(pol.design).dtype.kind not in "iu":
        rows = np.asarray(pol.design)[None]
    return est, FunctionVectors(cat(0), cat(1), cat(2), rows, cat(3), cat(4))
