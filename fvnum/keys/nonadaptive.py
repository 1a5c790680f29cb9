"""Theory rows under a key family (:mod:`fvnum.keys.families`): the best designs and policies found when the keys
are ``linear`` (``f = w.x``, today's ``tokens`` channel), ``weighted`` (``f = (w.x) / (x^T Q x + c)``,
``Q`` diagonal with one value per tree depth, ``c = 1``: the law of the readings is unchanged, up to a
common scale, by ``(Q, c) -> (s Q, s c)``, so ``c = 1`` loses nothing for ``c > 0``) or ``softmax``
(softmax readings with scores ``s = beta w.x - x^T Q x``, ``Q`` diagonal with one value per tree depth;
no scale invariance here, so ``beta`` (the norm of the score row) is searched too; tree prior only).

Readings are decoded by the exact Bayes posterior under the family's CLT law
(:func:`fvnum.keys.readings.law_posterior_mean`), and every number is the loss of that decoder. Every search returns a
:class:`~fvnum.estimate.SearchResult` (``name``, ``estimate``, ``how``, ``design`` the rows (B, D) of a
one-layer design, ``keys`` the key family object found):

- :func:`best_nonadaptive_keyed` (this module): one layer of ``d = B`` keys (unit class: the rows ``w_j``
  are any directions; ``Q`` shared by the layer). At ``B = 1`` the loss is a 1-D integral over the reading
  of a ``2^K``-component Gaussian mixture, computed by quadrature (exact, smooth), and the search optimises
  it directly; for ``B > 1`` it optimises a Monte Carlo loss on common random numbers (stream ``SEARCH``),
  picks among restarts on ``SELECT`` and reports the winner on ``EVAL``. On a Gaussian prior:
  :func:`gaussian_keyed`.
- ``best_adaptive_keyed`` / ``adaptive_keyed_losses`` (in :mod:`fvnum.keys.adaptive`, which builds on this module): ``d = 1``,
  ``L = B``, a greedy one-step lookahead (tree prior only).

A row found by a search is the best *found* within its family: an achievable loss, so an upper bound on the
family's optimum; it bounds no trained model (a model's keys may lie outside the family).

The one-layer search at ``B > 1`` (the slow part) takes its gradient written out: the per-sample work in the
Numba kernel ``fvnum.mc._kernels.keyed._one_layer_mc`` (numpy twin ``fvnum.mc._reference.one_layer_mc``), the chain
back to the rows and ``log q`` in numpy (:class:`_OneLayerMC`; the autograd reference :func:`_mc_loss_torch`,
held equal in tests/fvnum/test_keyed_fast.py); at ``B = 1`` the quadrature loss is differentiated by torch
autograd (small tensors, one thread). The laws on the tree prior live in :mod:`fvnum.keys.tree`.
"""
from __future__ import annotations

import math

import numpy as np

from fvnum.mc import _chunks
from fvnum.estimate import Estimate, SearchResult
from fvnum.keys.tree import (GRID, STEP, _geometry, _torch, _Tree, cholesky_grad, geometry_grad, keys_of, mixture_loss,
                             one_thread, quadrature_resolves, tree_law, tree_law_grad)
from fvnum.keys.families import FAMILIES, SoftmaxKeys, check_family, quadrature_nodes, weighted_law, weighted_moments
from fvnum.keys.readings import law_posterior_mean
from fvnum.priors.capabilities import capability
from fvnum.mc.channels import tokens_of
from fvnum.mc.simulate import check_inputs
from fvsym.errors import InputError
from fvsym._validate import check_int
from fvsym.guards.limits import check_memory, check_time


SEARCH_LOG_RATIO = 30.0  # log E[w^2] / E[w]^2 clipped there in the softmax search's objective (N e^-30: no signal)
SOFTMAX_COST_FACTOR = 8.0  # softmax keyed rows over weighted ones (torch, not Numba): 7.2x at depth 7, 1.9x at 4


# --- searches --------------------------------------------------------------------------------------
def _random_rows(rng, budget, dim, scale):
    R = rng.standard_normal((budget, dim)) * scale
    return R / np.linalg.norm(R, axis=1, keepdims=True)


def _autograd(fun_torch):
    """A numpy ``x -> (value, gradient)`` of a torch objective of a flat float64 vector (exact gradients by
    autograd)."""
    torch = _torch()

    def fun(x):
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        val = fun_torch(xt)
        (grad,) = torch.autograd.grad(val, xt)
        return float(val.detach()), grad.numpy().astype(float)

    return fun


def _minimize(fun, x0, maxiter):
    """L-BFGS (scipy) on ``fun: x -> (value, gradient)`` of a flat float64 vector."""
    from scipy.optimize import minimize

    res = minimize(fun, np.asarray(x0, dtype=float), jac=True, method="L-BFGS-B", options={"maxiter": int(maxiter)})
    return res.x, float(res.fun)


def _unpack(x, budget, dim, family):
    torch = _torch()
    U = x[: budget * dim].reshape(budget, dim)
    W = U / torch.linalg.norm(U, dim=1, keepdim=True)
    lq = x[budget * dim :] if family == "weighted" else None
    return W, lq


def _pack(W, lq):
    return np.concatenate([np.asarray(W).ravel(), [] if lq is None else np.asarray(lq)])


class _OneLayerMC:
    """The Monte Carlo loss of a one-layer design on common random numbers and its exact gradient, without
    autograd (:func:`_mc_loss_torch` is the autograd reference): ``samples`` leaves and standard normal draws
    from stream ``purpose``; readings ``phi = mean_leaf + L_leaf xi`` from the keys' CLT law, decoded by the
    exact Bayes posterior over the leaves. The per-sample work is the Numba kernel
    ``fvnum.mc._kernels.keyed._one_layer_mc`` (single-threaded, no temporaries of size samples x leaves); the
    chain back to the rows and ``log q`` (``x``: the rows unnormalised, then for weighted keys the per-depth
    ``log q``) is written out in :mod:`fvnum.keys.tree` (:func:`~fvnum.keys.tree.tree_law_grad`,
    :func:`~fvnum.keys.tree.geometry_grad`, :func:`~fvnum.keys.tree.cholesky_grad`)."""

    def __init__(self, tree, budget, family, N, s2, samples, seed, purpose):
        r = np.random.default_rng(_chunks.seed_sequence(seed, purpose))
        self.leaves = np.ascontiguousarray(tree.spec.sample(samples, r), dtype=np.int64)
        self.xi = r.standard_normal((samples, budget))
        self.paths = np.ascontiguousarray(tree.paths, dtype=np.int64)
        self.vals = np.ascontiguousarray(tree.values, dtype=float)
        self.tree, self.budget, self.family, self.N, self.s2 = tree, budget, family, N, s2

    def __call__(self, x):
        from fvnum.mc._kernels.keyed import _one_layer_mc

        tree, k, N = self.tree, self.budget, self.N
        D, M = tree.spec.dim, tree.spec.n_leaves
        U = x[: k * D].reshape(k, D)
        norms = np.linalg.norm(U, axis=1, keepdims=True)
        W = U / norms
        lq = x[k * D :] if self.family == "weighted" else None
        geo = _geometry(tree, lq, self.s2, np)
        mean, cov = tree_law(tree, geo, W, N)
        L = np.linalg.cholesky(cov)  # (M, k, k)
        Linv = np.linalg.inv(L)
        P = np.swapaxes(Linv, -1, -2) @ Linv  # Sigma_m^-1
        hl = np.log(np.einsum("mii->mi", L)).sum(-1)  # half the log-determinant
        g_mean, g_L, g_P, g_hl = np.zeros((M, k)), np.zeros((M, k, k)), np.zeros((M, k, k)), np.zeros(M)
        value = _one_layer_mc(mean, L, P, hl, self.leaves, self.xi, self.paths, self.vals, g_mean, g_L, g_P, g_hl)
        G_cov = -P @ g_P @ P + 0.5 * g_hl[:, None, None] * P + cholesky_grad(L, g_L)
        GW, Gm, Gg, GH = tree_law_grad(tree, geo, W, N, g_mean, G_cov)
        GU = (GW - (GW * W).sum(1, keepdims=True) * W) / norms
        if lq is None:
            return float(value), GU.ravel()
        return float(value), np.concatenate([GU.ravel(), geometry_grad(tree, lq, self.s2, Gm, Gg, GH)])

def _mc_loss_torch(tree, budget, family, N, s2, samples, seed, purpose):
    """The autograd reference of :class:`_OneLayerMC` (the same samples, the loss in torch)."""
    torch = _torch()
    spec, D = tree.spec, tree.spec.dim
    r = np.random.default_rng(_chunks.seed_sequence(seed, purpose))
    leaves = torch.tensor(spec.sample(samples, r))
    xi = torch.tensor(r.standard_normal((samples, budget)), dtype=torch.float64)
    th = torch.tensor(tree.thetas, dtype=torch.float64)

    def loss(x):
        W, lq = _unpack(x, budget, D, family)
        mean, cov = tree_law(tree, _geometry(tree, lq, s2, torch), W, N, torch)
        L = torch.linalg.cholesky(cov)
        phi = mean[leaves] + (L[leaves] @ xi[:, :, None])[:, :, 0]
        r_ = phi[:, None, :] - mean[None]  # (n, M, k)
        z = torch.linalg.solve_triangular(L[None].expand(samples, -1, -1, -1), r_[..., None], upper=False)[..., 0]
        ll = -0.5 * (z**2).sum(-1) - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        post = torch.softmax(ll, dim=1)
        return ((post @ th - th[leaves]) ** 2).sum(-1).mean()

    return loss


def _tree_search(tree, budget, family, N, s2, samples, seed, restarts, maxiter, start):
    """Returns (W, lq) of the best one-layer design found."""
    spec, D = tree.spec, tree.spec.dim
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.SEARCH))
    var = (spec.scales**2 / 2.0 ** np.arange(spec.depth))[tree.depth_of]
    lq0 = np.log(var[[int(np.argmax(tree.depth_of == k)) for k in range(spec.depth)]] / 6.0)  # Q = C / 6
    starts = []
    if start is not None:
        starts.append(start)
    while len(starts) < max(1, restarts):
        starts.append((_random_rows(rng, budget, D, np.sqrt(var)), lq0 if family == "weighted" else None))
    if budget == 1:
        torch = _torch()
        thetas = tree.thetas
        logw = torch.full((spec.n_leaves,), -math.log(spec.n_leaves), dtype=torch.float64)

        def objective_torch(x):
            W, lq = _unpack(x, 1, D, family)
            mean, cov = tree_law(tree, _geometry(tree, lq, s2, torch), W, N, torch)
            return mixture_loss(mean[:, 0], cov[:, 0, 0], logw, thetas, torch)

        objective = _autograd(objective_torch)
        select = objective
    else:  # the Monte Carlo loss and its gradient in numpy (_OneLayerMC)
        objective = _OneLayerMC(tree, budget, family, N, s2, samples, seed, _chunks.SEARCH)
        select = _OneLayerMC(tree, budget, family, N, s2, samples, seed, _chunks.SELECT)
    found = []
    for W0, l0 in starts:
        x, _ = _minimize(objective, _pack(W0, l0), maxiter)
        found.append(x)
    scores = [select(x)[0] for x in found]
    x = found[int(np.argmin(scores))]
    W = x[: budget * D].reshape(budget, D)
    W = W / np.linalg.norm(W, axis=1, keepdims=True)
    return W, (x[budget * D :].copy() if family == "weighted" else None)


def _softmax_search(tree, budget, N, s2, samples, seed, restarts, maxiter):
    """The best one-layer softmax design found (``s_j = b_j.x - x^T Q x``, ``Q`` diagonal with one value
    ``q_k = exp(lq_k)`` per tree depth, shared by the rows; ``x``: the score rows ``b_j`` (their norm is
    ``beta_j``), then ``lq``): at ``B = 1`` the exact quadrature loss, else the Monte Carlo loss on common
    random numbers (stream ``SEARCH``; restarts picked on ``SELECT``), both by torch autograd on the closed
    form :func:`fvnum.keys.readings.softmax_law`. Starts: random directions with ``beta = 1`` (the signal-to-noise
    optimum of one score row at ``Q = 0``, ``beta^2 e^(-beta^2)``) and ``q = 0.02``. Returns ``(B, lq)``."""
    from fvnum.keys.readings import softmax_law

    torch = _torch()
    spec, D, M = tree.spec, tree.spec.dim, tree.spec.n_leaves
    depth_of = torch.as_tensor(tree.depth_of)
    th = torch.as_tensor(tree.thetas, dtype=torch.float64)
    logw = torch.full((M,), -math.log(M), dtype=torch.float64)
    eye = torch.eye(budget, dtype=torch.float64).expand(M, -1, -1)

    def law(x):
        B = x[: budget * D].reshape(budget, D)
        q = torch.exp(x[budget * D :])[depth_of]
        mean, cov, _ = softmax_law(B, q, th, N, s2, torch, max_log_ratio=SEARCH_LOG_RATIO)
        return mean, 0.5 * (cov + cov.transpose(1, 2))

    worst = float((th**2).sum(1).mean()) * 10.0  # far above the loss of reading nothing

    def guarded(fun):
        """A line search may stray where the law overflows: there the objective is ``worst``, flat."""
        def safe(x):
            try:
                value, grad = fun(x)
            except RuntimeError:  # torch.linalg: a covariance that is not positive definite
                return worst, np.zeros_like(x)
            return (value, grad) if np.isfinite(value) and np.all(np.isfinite(grad)) else (worst, np.zeros_like(x))

        return safe

    def mc(purpose):
        r = np.random.default_rng(_chunks.seed_sequence(seed, purpose))
        leaves = torch.as_tensor(spec.sample(samples, r))
        xi = torch.as_tensor(r.standard_normal((samples, budget)), dtype=torch.float64)

        def loss(x):
            mean, cov = law(x)
            L = torch.linalg.cholesky(cov)
            Linv = torch.linalg.solve_triangular(L, eye, upper=False)  # (M, k, k): one small solve per leaf
            phi = mean[leaves] + (L[leaves] @ xi[:, :, None])[:, :, 0]
            z = torch.einsum("mij,nmj->nmi", Linv, phi[:, None, :] - mean[None])
            ll = -0.5 * (z**2).sum(-1) - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
            return ((torch.softmax(ll, dim=1) @ th - th[leaves]) ** 2).sum(-1).mean()

        return guarded(_autograd(loss))

    def one_reading(x):
        mean, cov = law(x)
        return mixture_loss(mean[:, 0], cov[:, 0, 0], logw, tree.thetas, torch)

    if budget == 1:
        objective = select = guarded(_autograd(one_reading))
    else:
        objective, select = mc(_chunks.SEARCH), mc(_chunks.SELECT)
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.SEARCH))
    var = (spec.scales**2 / 2.0 ** np.arange(spec.depth))[tree.depth_of]
    found = []
    for _ in range(max(1, restarts)):
        x0 = _pack(_random_rows(rng, budget, D, np.sqrt(var)), np.full(spec.depth, math.log(0.02)))
        found.append(_minimize(objective, x0, maxiter)[0])
    x = found[int(np.argmin([select(v)[0] for v in found]))]
    return x[: budget * D].reshape(budget, D).copy(), x[budget * D :].copy()


def _eval_nonadaptive(atoms, log_prior, sample_thetas, keys, N, s2, samples, seed):
    """Monte Carlo loss (EVAL stream) of the exact decoder over ``atoms`` for readings drawn from the CLT law
    of the true latents (drawn by ``sample_thetas(n, rng)``)."""
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.EVAL))
    truth = sample_thetas(samples, rng)
    tl = keys.law(truth, n_tokens=N, s2=s2)
    L = np.linalg.cholesky(tl.cov)
    phi = tl.mean + (L @ rng.standard_normal((samples, tl.n_readings, 1)))[..., 0]
    law = keys.law(atoms, n_tokens=N, s2=s2)
    est = np.concatenate([law_posterior_mean(atoms, log_prior, law, phi[a : a + 2048])
                          for a in range(0, samples, 2048)])
    return Estimate.of(((est - truth) ** 2).sum(1))


def best_nonadaptive_keyed(prior, budget: int, channel, *, samples: int = 4000, seed: int = 0, restarts: int = 2,
                           maxiter: int = 200, start=None) -> SearchResult:
    """Best one-layer design of ``budget`` keys found (unit class, ``L = 1``, ``d = B``) under ``channel``, the
    tokens channel ``fvnum.tokens(N, s2=..., keys=...)`` whose ``keys`` is the family searched, decoded by the
    exact Bayes posterior under the family's law. Tree prior: at ``B = 1`` the loss is exact (quadrature); else
    Monte Carlo on ``samples`` fresh samples. ``start``: optional ``(rows, lq)`` (for example the previous
    budget's design with one more row). Gaussian prior: see :func:`gaussian_keyed`."""
    family = tokens_of(channel, "best_nonadaptive_keyed", keys=True).keys
    spec, channel, samples, seed, budget = check_inputs(prior, channel, samples=samples, seed=seed, budget=budget)
    N, s2 = channel.n_tokens, channel.s2
    if budget < 1:
        raise InputError(f"a keyed design needs budget >= 1, got {budget}")
    if budget > spec.dim:
        raise InputError(f"a keyed design reads at most D = {spec.dim} directions, got budget {budget}")
    if capability(spec, "linear_posterior"):
        return gaussian_keyed(spec, budget, channel, samples=samples, seed=seed)
    if capability(spec, "heap_depth") is None:
        raise InputError(f"keyed designs are searched on the tree prior and Gaussian priors, not on the {getattr(spec, 'name', None) or type(spec).__name__} prior")
    tree = _Tree(spec)
    with one_thread():
        if family == "softmax":
            B, lq = _softmax_search(tree, budget, N, s2, samples, seed, restarts, maxiter)
            keys = SoftmaxKeys(B, np.exp(lq)[tree.depth_of])
            W = B / np.linalg.norm(B, axis=1, keepdims=True)
        else:
            W, lq = _tree_search(tree, budget, family, N, s2, samples, seed, restarts, maxiter, start)
            keys = keys_of(tree, W, lq)
    log_prior = np.full(spec.n_leaves, -math.log(spec.n_leaves))
    law = keys.law(tree.thetas, n_tokens=N, s2=s2) if budget == 1 else None
    if budget == 1 and quadrature_resolves(law.mean[:, 0], law.cov[:, 0, 0], log_prior, 4 * GRID):
        value = mixture_loss(law.mean[:, 0], law.cov[:, 0, 0], log_prior, tree.thetas, grid=4 * GRID)
        est = Estimate(float(value), 0.0, 4 * GRID, "exact (quadrature)")
    else:  # Monte Carlo, also at B = 1 where the readings' laws are narrower than the quadrature resolves
        est = _eval_nonadaptive(tree.thetas, log_prior, lambda n, r: tree.thetas[spec.sample(n, r)], keys, N, s2,
                                samples, seed)
    how = f"non-adaptive, unit, {keys.name} keys, exact Bayes decoder under the keys' CLT law"
    return SearchResult("best_nonadaptive_keyed", est, how, W, keys=keys)


# --- Gaussian prior: one layer on the eigen-directions, decoded by quadrature ---------------------------
from fvnum.guards.limits import GRID_POINTS, IS_POINTS, decoder_nodes  # noqa: E402 (the price needs them without this module)
IS_WIDTH = 1.5  # their spread, in standard deviations of the Gaussian approximation of the posterior
WORKING_SET = 8 * 2**20  # bytes of the searches whatever their size (compiled kernels, scipy, small arrays)
# bytes the torch engine of the softmax adaptive search holds whatever its size (autograd buffers of the
# per-sample row search): measured 410-510 MB of peak growth at depth 6, budget 3 on 300-600 samples, where the
# weighted search grew 140 MB (peak resident size before and after one search, one process a run)
SOFTMAX_WORKING_SET = 640 * 2**20
CHUNK_FLOATS = 1 << 23  # floats of one chunk of the decoder: (sample, node) pairs times (6 B + 4 B^2), 64 MiB


def _decoder_mesh(budget: int, nodes: int, width: float):
    """``(points (G, B), log weights (G,) or None, label)`` of the decoder: a product grid on +- ``width``
    (uniform weights), or scrambled Sobol normal points of spread :data:`IS_WIDTH` (fixed seed) with the
    importance weights of their density."""
    if nodes**budget <= GRID_POINTS:
        u = np.linspace(-1.0, 1.0, nodes)
        mesh = np.stack(np.meshgrid(*([u] * budget), indexing="ij"), -1).reshape(-1, budget)
        return mesh * width, None, f"quadrature on {nodes}^{budget} nodes"
    from scipy.special import ndtri
    from scipy.stats import qmc

    u = qmc.Sobol(budget, scramble=True, seed=20261203).random(IS_POINTS)
    z = ndtri(np.clip(u, 1e-12, 1 - 1e-12))
    return z * IS_WIDTH, 0.5 * (z**2).sum(1), (f"importance sampling on {IS_POINTS} Sobol nodes, as a "
                                              f"{nodes}^{budget} grid would not fit in memory")


def _chunk_samples(budget: int, nodes: int, chunk: int = 64) -> int:
    """Samples per chunk of the Gaussian decoder: at most ``chunk``, about :data:`CHUNK_FLOATS` floats."""
    return max(1, min(int(chunk), CHUNK_FLOATS // (nodes * (6 * budget + 4 * budget * budget))))


def _gaussian_losses(vals, budget, q, N, s2, truth, xi, nodes: int = 11, width: float = 7.0, chunk: int = 64):
    """Per-sample losses of keys ``e_1 .. e_B`` (eigenbasis, largest eigenvalues first) with ``Q = diag(q)``
    (``q`` None: linear keys), ``c = 1``, for latents ``truth`` (n, D) (eigenbasis) and standard normal
    draws ``xi`` (n, B): readings from the keys' CLT law, decoded by the posterior mean of the read
    coordinates on nodes around the Gaussian approximation of their posterior: a product grid (``nodes``
    per coordinate, +- ``width`` posterior standard deviations) while ``nodes^B`` is at most
    :data:`GRID_POINTS`, else :data:`IS_POINTS` importance-sampled nodes (self-normalised; a valid decoder, so
    its loss is achievable, only less close to Bayes); the squares of the unread coordinates set to their
    prior mean in the decoder's law. An unread coordinate enters the law only through its square, so its
    posterior mean is 0 by symmetry and it adds its prior variance. Memory: about :data:`CHUNK_FLOATS`
    floats at once (``chunk`` samples, fewer on a large grid; one sample's nodes at the least)."""
    D = vals.size
    t, wt = quadrature_nodes(1.0, STEP)
    S, w2, m, h = weighted_moments(np.zeros(D) if q is None else np.asarray(q, dtype=float), 1.0, t, wt)
    W = np.eye(D)[:budget]
    tl = weighted_law(W, S, w2, m, h, truth, N, s2)
    phi = tl[0] + (np.linalg.cholesky(tl[1]) @ xi[..., None])[..., 0]
    # Gaussian approximation of each read coordinate's posterior: centre and width of the nodes
    noise = np.einsum("jj->j", weighted_law(W, S, w2, m, h, np.zeros((1, D)), N, s2, theta2=vals[None])[1][0])
    prec = m[:budget] ** 2 / noise + 1 / vals[:budget]
    centre = phi * (m[:budget] / noise) / prec  # (n, B)
    half = 1.0 / np.sqrt(prec)
    mesh, log_proposal, _ = _decoder_mesh(budget, nodes, width)  # (G, B), in units of half
    chunk = _chunk_samples(budget, mesh.shape[0], chunk)
    out = np.zeros(truth.shape[0])
    unread = vals[budget:].sum()
    H = (S * w2[:, None]).T @ S  # (D, D)
    fixed = vals[budget:] @ H[budget:, :budget] + s2 * h[:budget]  # unread coordinates at their prior mean
    for a in range(0, truth.shape[0], chunk):
        c_, ph = centre[a : a + chunk], phi[a : a + chunk]
        grid = c_[:, None, :] + mesh[None] * half  # (n, G, B)
        n_, G_ = grid.shape[:2]
        # the law of weighted_law for the rows e_1..e_B, in O(D B) per atom: with H = int w2 S S^T,
        # second_jl = delta_jl (H theta^2 + s2 h)_j + 2 theta_j theta_l H_jl
        ga = grid.reshape(-1, budget)
        mean = ga * m[:budget]
        diag = ga**2 @ H[:budget, :budget] + fixed
        second = 2.0 * ga[:, :, None] * ga[:, None, :] * H[:budget, :budget]
        second[:, np.arange(budget), np.arange(budget)] += diag
        cov = (second - mean[:, :, None] * mean[:, None, :]) / N
        L = np.linalg.cholesky(cov)
        r = ph[:, None, :].repeat(G_, 1).reshape(-1, budget) - mean
        white = np.linalg.solve(L, r[..., None])[..., 0]
        logw = (-0.5 * (white**2).sum(-1) - np.log(np.einsum("gii->gi", L)).sum(-1)).reshape(n_, G_)
        logw -= 0.5 * (grid**2 / vals[:budget]).sum(-1)
        if log_proposal is not None:
            logw += log_proposal
        logw -= logw.max(1, keepdims=True)
        w = np.exp(logw)
        est = np.einsum("ng,ngb->nb", w, grid) / w.sum(1, keepdims=True)
        out[a : a + chunk] = ((est - truth[a : a + chunk, :budget]) ** 2).sum(1) + unread
    return out


def keyed_memory(*, tree: bool, depth: int, dim: int, budgets, samples: int, family: str = "weighted") -> float:
    """Bytes (an upper estimate) of the largest arrays :func:`fvnum.theory.keyed_curves` holds at once at
    ``budgets`` on ``samples`` samples: on the tree prior the adaptive policy's laws per sample and leaf
    (to the largest budget ``l``: the law, its Cholesky factor and inverse, ``H z``) or the one-layer
    search's evaluation chunks; on a Gaussian prior one chunk of the decoder (about :data:`CHUNK_FLOATS`
    floats, twice for numpy's temporaries, whatever the budget while one sample's nodes fit in it). The
    softmax family's adaptive search (torch engine) adds :data:`SOFTMAX_WORKING_SET`."""
    from fvnum.guards.limits import DESIGN_SAMPLES_PER_SAMPLE, gaussian_design_settings

    budgets = sorted({max(int(b), 1) for b in budgets})
    if not budgets:
        return 0.0
    if tree:
        M, l = 2**depth, budgets[-1]
        adaptive = samples * M * (4 * l * l + 2 * l * depth + 4 * l + 8)
        design = max(DESIGN_SAMPLES_PER_SAMPLE * samples * (l + 4), 2048 * M * (4 * l * l + 4 * l + 4))
        extra = SOFTMAX_WORKING_SET if family == "softmax" else 0
        return 8.0 * (adaptive + design + M * (dim + depth) * 4) + WORKING_SET + extra
    worst = 0.0
    for b in budgets:
        kw = gaussian_design_settings(b, samples)
        G = decoder_nodes(b, kw["nodes"])
        pairs = G * _chunk_samples(b, G)
        worst = max(worst, 2.0 * pairs * (6 * b + 4 * b * b) + 8.0 * kw["samples"] * dim)
    return 8.0 * worst + WORKING_SET


def gaussian_keyed(prior, budget: int, channel, *, samples: int = 4000, seed: int = 0, maxiter: int = 60,
                   nodes: int = 11) -> SearchResult:
    """One layer of ``budget`` keys of the family ``channel.keys`` (``channel``: ``fvnum.tokens(N, s2=...,
    keys=...)``) on a Gaussian prior ``N(0, C)``: the keys read the top ``B``
    eigen-directions of ``C`` (the optimal rows of the gaussian channel, section 5); weighted keys have
    ``Q`` diagonal in the eigenbasis with one value per distinct eigenvalue, ``c = 1``, chosen by Powell's
    method on the Monte Carlo loss (common random numbers, stream ``SEARCH``). Decoder: the posterior mean
    of the read coordinates by quadrature (see :func:`_gaussian_losses`; unread coordinates' squares at
    their prior mean in the decoder's law, so it is near-Bayes, and its loss is achievable). The loss is
    reported on ``samples`` fresh latents (``EVAL``); ``keys`` holds ``Q`` in the prior's coordinates."""
    from scipy.optimize import minimize

    from fvnum.keys.families import LinearKeys, WeightedKeys

    family = tokens_of(channel, "gaussian_keyed", keys=True).keys
    spec, channel, samples, seed, budget = check_inputs(prior, channel, samples=samples, seed=seed, budget=budget)
    if family == "softmax":
        raise InputError("softmax keyed rows are searched on the tree prior only (no Gaussian-prior decoder for "
                         "softmax keys yet)")
    if not capability(spec, "linear_posterior"):
        raise InputError("gaussian_keyed is for a Gaussian prior; on the tree prior use best_nonadaptive_keyed")
    n_tokens, s2 = channel.n_tokens, channel.s2
    vals, vecs = spec.eigenvalues, spec.eigenvectors
    D = spec.dim
    if budget > D:
        raise InputError(f"a keyed design on a Gaussian prior reads at most D = {D} directions, got budget {budget}")
    groups = np.unique(-np.round(vals, 12), return_inverse=True)[1].ravel()  # one Q value per eigenvalue

    def draws(purpose):
        r = np.random.default_rng(_chunks.seed_sequence(seed, purpose))
        return r.standard_normal((samples, D)) * np.sqrt(vals), r.standard_normal((samples, budget))

    lq = None
    if family == "weighted":
        truth, xi = draws(_chunks.SEARCH)
        first = np.array([vals[groups == g][0] for g in range(int(groups.max()) + 1)])

        def fun(x):
            return float(_gaussian_losses(vals, budget, np.exp(x)[groups], n_tokens, s2, truth, xi, nodes).mean())

        lq = minimize(fun, np.log(first / 6.0), method="Powell", options={"maxfev": int(maxiter), "xtol": 1e-2}).x
    q = None if lq is None else np.exp(lq)[groups]
    truth, xi = draws(_chunks.EVAL)
    decoder = _decoder_mesh(budget, nodes, 7.0)[2]
    est = Estimate.of(_gaussian_losses(vals, budget, q, n_tokens, s2, truth, xi, nodes), f"mc, decoder: {decoder}")
    rows = vecs[:, :budget].T.copy()  # in the prior's coordinates
    if q is None:
        keys = LinearKeys(rows)
    else:
        Q = (vecs * q) @ vecs.T  # the eigenbasis' diagonal Q in the prior's coordinates
        keys = WeightedKeys(rows, 0.5 * (Q + Q.T), 1.0)
    how = (f"non-adaptive, top-{budget} eigen-directions, {family} keys, near-Bayes decoder ({decoder}) under "
           f"the keys' CLT law")
    return SearchResult("best_nonadaptive_keyed", est, how, rows, keys=keys)


TOKEN_DRAWS_PER_SECOND = 3e7  # context x token x dimension a second: 3.4e7 measured (N = 10^3, 10^4; D = 15; 2 cores)
TOKENS_CHUNK_BYTES = 64e6  # a chunk's tokens (N (D + 2) doubles a context) stay under this: N = 4096 keeps 1000 contexts


def tokens_loss_mc(prior, result: SearchResult, channel, *, samples: int = 20_000, seed: int = 0,
                   chunk: int = 1000) -> Estimate:
    """Loss of a one-layer keyed design (``result.keys``, found under ``channel``, ``fvnum.tokens(N, s2=...)``;
    the family is the design's own) under the real
    tokens channel (tree prior): ``N`` tokens and labels drawn per context, the readings computed exactly
    (``keys.readings``: ``(1/N) sum_i y_i f(x_i)``, or the softmax average for softmax keys), decoded by the
    Bayes decoder of the CLT law (a valid decoder, so the number is
    achievable; it checks the CLT at this ``N``)."""
    spec, channel, samples, seed, _ = check_inputs(prior, tokens_of(channel, "tokens_loss_mc"), samples=samples,
                                                   seed=seed,
                                                   tree="tokens_loss_mc checks one-layer keyed designs on the tree prior")
    if result.design is None or result.keys is None:
        raise InputError(f"tokens_loss_mc checks one-layer keyed designs (best_nonadaptive_keyed), got {result.name}")
    tree, keys, N, s2 = _Tree(spec), result.keys, channel.n_tokens, channel.s2
    chunk = check_int(chunk, "chunk", minimum=1)
    what = f"tokens_loss_mc: {samples} contexts of N = {N} tokens in D = {spec.dim}"
    check_time(what, samples * N * spec.dim / TOKEN_DRAWS_PER_SECOND, " (fewer samples or a smaller N)")
    chunk = max(1, min(chunk, int(TOKENS_CHUNK_BYTES // (8 * N * (spec.dim + 2)))))  # contexts a chunk: bounded memory
    check_memory(what, 3 * 8.0 * chunk * N * (spec.dim + 2))
    law = keys.law(tree.thetas, n_tokens=N, s2=s2)
    log_prior = np.full(spec.n_leaves, -math.log(spec.n_leaves))
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.EVAL))
    out = []
    for a in range(0, samples, chunk):
        n = min(chunk, samples - a)
        truth = tree.thetas[spec.sample(n, rng)]
        X = rng.standard_normal((n, N, spec.dim))
        y = np.einsum("nid,nd->ni", X, truth) + math.sqrt(s2) * rng.standard_normal((n, N))
        phi = keys.readings(X, y)  # (n, k): (1/N) sum_i y_i f(x_i), or sum_i softmax_i(s(x_i)) y_i
        out.append((((law_posterior_mean(tree.thetas, log_prior, law, phi) - truth) ** 2).sum(1)))
    return Estimate.of(np.concatenate(out), "mc, exact tokens, CLT-law Bayes decoder")


__all__ = ["SOFTMAX_COST_FACTOR", "best_nonadaptive_keyed", "gaussian_keyed", "keyed_memory", "tokens_loss_mc"]
