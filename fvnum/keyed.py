"""Theory rows under a key family (:mod:`fvnum.keys`): the best designs and policies found when the keys
are ``linear`` (``f = w.x``, today's ``tokens`` channel) or ``weighted`` (``f = (w.x) / (x^T Q x + c)``,
``Q`` diagonal with one value per tree depth, ``c = 1``: the law of the readings is unchanged, up to a
common scale, by ``(Q, c) -> (s Q, s c)``, so ``c = 1`` loses nothing for ``c > 0``).

Readings are decoded by the exact Bayes posterior under the family's CLT law (:func:`fvnum.keys.
posterior_mean`), and every number is the loss of that decoder:

- :func:`best_nonadaptive_keyed`: one layer of ``d = B`` keys (unit class: the rows ``w_j`` are any
  directions; ``Q`` shared by the layer). At ``B = 1`` the loss is a 1-D integral over the reading of a
  ``2^K``-component Gaussian mixture, computed by quadrature (exact, smooth), and the search optimises it
  directly; for ``B > 1`` it optimises a Monte Carlo loss on common random numbers (stream ``SEARCH``),
  picks among restarts on ``SELECT`` and reports the winner on ``EVAL``.
- :func:`best_adaptive_keyed`: ``d = 1``, ``L = B``; layer 1 reads the best single key; each later layer
  chooses its row, per sample, to minimise the expected loss after that reading (one-step lookahead,
  computed by quadrature under the exact conditional law of the new reading given the earlier ones and
  each leaf), by gradient descent on the sphere from three starts. ``Q`` is the best single key's, shared by
  the layers. Greedy, so the policy of budget ``B`` is the first ``B`` layers of any longer one:
  :func:`adaptive_keyed_losses` returns the loss after every layer on the same samples.

The optimisers differentiate the formulas of :mod:`fvnum.keys` with torch (imported when called);
everything else is numpy. Tree prior only for the adaptive search; on a Gaussian prior the non-adaptive
search decodes with a fixed sample of ``n_atoms`` latents from the prior as the atoms of the posterior
(a valid decoder, so its loss is achievable; not exactly Bayes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _chunks
from .estimate import Estimate
from .gaussian import GaussSpec
from .keys import LinearKeys, WeightedKeys, posterior_mean, quadrature_nodes, weighted_law, weighted_moments
from .simulate import check_budget, check_samples, check_seed
from .tree import TreeSpec, numeric_prior

FAMILIES = ("linear", "weighted")
NODE_STEP = 0.5  # adaptive search: quadrature nodes at most this many narrowest standard deviations apart
GRID = 256  # reading nodes of the 1-D quadrature of a mixture loss
STEP = 0.25  # t-quadrature step of the optimisers (error ~ exp(-pi^2 / step) ~ 1e-17)


@dataclass(frozen=True, eq=False)
class KeyedResult:
    """A theory row under a key family: ``estimate`` (the loss, how it was obtained in ``estimate.how``),
    ``family``, ``budget`` B, ``layers`` L and ``width`` d, and the design found: ``rows`` (B, D) the key
    directions of a one-layer design (for an adaptive policy: the first layer's row, (1, D)), ``q`` (D,) the
    diagonal of ``Q`` (weighted keys; ``None`` for linear) and ``c``."""

    name: str
    family: str
    estimate: Estimate
    budget: int
    layers: int
    width: int
    rows: np.ndarray
    q: np.ndarray | None
    c: float | None
    n_tokens: int
    s2: float
    what: str

    def keys(self):
        """The key family object of the design (:class:`~fvnum.keys.LinearKeys` or ``WeightedKeys``)."""
        if self.family == "linear":
            return LinearKeys(self.rows)
        return WeightedKeys(self.rows, self.q, self.c)

    def to_dict(self) -> dict:
        return {"name": self.name, "keys": self.family, **self.estimate.to_dict(), "budget": self.budget,
                "layers": self.layers, "width": self.width, "rows": self.rows.tolist(),
                "q": None if self.q is None else self.q.tolist(), "c": self.c, "tokens": self.n_tokens,
                "s2": self.s2, "what": self.what}

    def __repr__(self) -> str:
        return (f"KeyedResult({self.name}, keys={self.family}, B={self.budget}, L={self.layers}, d={self.width}, "
                f"loss={self.estimate})")


def check_family(family) -> str:
    if family not in FAMILIES:
        raise ValueError(f"unknown key family {family!r}; choose one of {', '.join(FAMILIES)}")
    return family


def _torch():
    import torch

    return torch


# --- the tree prior: structure of the laws ---------------------------------------------------------
class _Tree:
    """Leaves of the tree as atoms: ``thetas`` (M, D), path nodes (M, K) (0-based), path values (M, K),
    and the depth of every node (D,)."""

    def __init__(self, spec: TreeSpec):
        leaves = np.arange(spec.n_leaves)
        self.spec = spec
        self.thetas = spec.thetas(leaves)
        self.paths = spec.path_nodes(leaves) - 1
        self.values = spec.scales * spec.signs(leaves)
        self.depth_of = spec.node_depths(np.arange(1, spec.dim + 1)) - 1
        self.counts = 2.0 ** np.arange(spec.depth)


def _geometry(tree: _Tree, lq, s2, xp, step=STEP):
    """Per-depth moments of weighted keys with ``q_k = exp(lq_k)`` and ``c = 1`` (``lq`` None: linear keys):
    ``m`` (K,), ``g`` (K,) the diagonal of ``G`` (the same for every leaf) and ``Hbar`` (K, K)."""
    a2 = xp.asarray(tree.spec.scales**2) if xp is np else xp.tensor(tree.spec.scales**2, dtype=xp.float64)
    if lq is None:
        ones = a2 * 0 + 1.0
        Hbar = ones[:, None] * ones[None, :]
        return ones, Hbar @ a2 + s2, Hbar
    t, wt = quadrature_nodes(1.0, step)
    counts = tree.counts
    if xp is not np:
        t, wt, counts = (xp.tensor(v, dtype=xp.float64) for v in (t, wt, counts))
    S, w2, m, h = weighted_moments(xp.exp(lq), 1.0, t, wt, xp, counts)
    Hbar = (S * w2[:, None]).T @ S  # (K, K)
    return m, Hbar @ a2 + s2 * h, Hbar


def _tree_second(tree: _Tree, geo, A, B, xp):
    """``E[((theta.x)^2 + s2) f_a f_b]`` for every leaf: rows ``A`` (..., i, D), ``B`` (..., j, D) ->
    (..., M, i, j)."""
    m, g, Hbar = geo
    gd = g[tree.depth_of]  # (D,)
    common = (A * gd) @ B.swapaxes(-1, -2) if xp is np else (A * gd) @ B.transpose(-1, -2)  # (..., i, j)
    za = A[..., tree.paths] * (tree.values if xp is np else xp.tensor(tree.values))  # (..., i, M, K)
    zb = B[..., tree.paths] * (tree.values if xp is np else xp.tensor(tree.values))
    cross = xp.einsum("...imk,kl,...jml->...mij", za, Hbar, zb)
    return common[..., None, :, :] + 2.0 * cross


def _tree_mean(tree: _Tree, geo, A, xp):
    """(..., M, i) ``E[phi | leaf]`` of rows ``A`` (..., i, D)."""
    m = geo[0]
    z = A[..., tree.paths] * (tree.values if xp is np else xp.tensor(tree.values))  # (..., i, M, K)
    out = (z * m).sum(-1)  # (..., i, M)
    return out.swapaxes(-1, -2) if xp is np else out.transpose(-1, -2)


def tree_law(tree: _Tree, geo, W, n_tokens, xp=np):
    """``(mean (..., M, k), cov (..., M, k, k))`` of rows ``W`` (..., k, D) on the tree's leaves."""
    mean = _tree_mean(tree, geo, W, xp)
    second = _tree_second(tree, geo, W, W, xp)
    return mean, (second - mean[..., :, None] * mean[..., None, :]) / n_tokens


# --- exact loss of one reading by quadrature -------------------------------------------------------
def mixture_loss(mean, var, logw, thetas, xp=np, grid: int = GRID):
    """Expected loss after one reading whose law given atom ``m`` is ``N(mean_m, var_m)``, under
    belief weights ``exp(logw)`` (normalised; all (..., M)) over atoms ``thetas`` (M, D):
    ``sum_m p_m |theta_m|^2 - int |sum_m p_m N_m(phi) theta_m|^2 / sum_m p_m N_m(phi) dphi``, the integral
    by the trapezoid rule on ``grid`` nodes over the live atoms' means +- 10 standard deviations."""
    th = thetas if xp is np else xp.as_tensor(thetas, dtype=xp.float64)
    p = xp.exp(logw)
    sd = xp.sqrt(var)
    live = p > 1e-10 * (p.max(-1, keepdims=True) if xp is np else p.max(-1, keepdim=True).values)
    big = 1e300
    if xp is np:
        lo = np.where(live, mean - 10 * sd, big).min(-1)
        hi = np.where(live, mean + 10 * sd, -big).max(-1)
        u = np.linspace(0.0, 1.0, grid)
    else:
        with xp.no_grad():
            lo = xp.where(live, mean - 10 * sd, xp.full_like(mean, big)).min(-1).values
            hi = xp.where(live, mean + 10 * sd, xp.full_like(mean, -big)).max(-1).values
        u = xp.linspace(0.0, 1.0, grid, dtype=xp.float64)
    phi = lo[..., None] + (hi - lo)[..., None] * u  # (..., G)
    dphi = (hi - lo) / (grid - 1)
    z = (phi[..., :, None] - mean[..., None, :]) / sd[..., None, :]
    logd = logw[..., None, :] - 0.5 * z**2 - xp.log(sd)[..., None, :] - 0.5 * math.log(2 * math.pi)  # (..., G, M)
    top = logd.max(-1, keepdims=True) if xp is np else logd.max(-1, keepdim=True).values
    n = xp.exp(logd - top)
    num = n @ th  # (..., G, D)
    ratio = (num**2).sum(-1) / n.sum(-1) * xp.exp(top[..., 0])
    prior = (p * (th**2).sum(-1)).sum(-1)
    return prior - ratio.sum(-1) * dphi


# --- searches --------------------------------------------------------------------------------------
def _random_rows(rng, budget, dim, scale):
    R = rng.standard_normal((budget, dim)) * scale
    return R / np.linalg.norm(R, axis=1, keepdims=True)


def _minimize(fun_torch, x0, maxiter):
    """L-BFGS (scipy) on a torch objective of a flat float64 vector, exact gradients by autograd."""
    from scipy.optimize import minimize

    torch = _torch()

    def fun(x):
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        val = fun_torch(xt)
        (grad,) = torch.autograd.grad(val, xt)
        return float(val.detach()), grad.numpy().astype(float)

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


def _tree_search(tree, budget, family, N, s2, samples, seed, restarts, maxiter, start):
    """Returns (W, lq) of the best one-layer design found."""
    torch = _torch()
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
        thetas = tree.thetas
        logw = torch.full((spec.n_leaves,), -math.log(spec.n_leaves), dtype=torch.float64)

        def objective(x):
            W, lq = _unpack(x, 1, D, family)
            mean, cov = tree_law(tree, _geometry(tree, lq, s2, torch), W, N, torch)
            return mixture_loss(mean[:, 0], cov[:, 0, 0], logw, thetas, torch)

        select = objective
    else:
        def crn(purpose):
            r = np.random.default_rng(_chunks.seed_sequence(seed, purpose))
            leaves = torch.tensor(spec.sample(samples, r))
            xi = torch.tensor(r.standard_normal((samples, budget)), dtype=torch.float64)
            th = torch.tensor(tree.thetas, dtype=torch.float64)
            eye = torch.eye(budget, dtype=torch.float64)

            def loss(x):
                W, lq = _unpack(x, budget, D, family)
                mean, cov = tree_law(tree, _geometry(tree, lq, s2, torch), W, N, torch)
                L = torch.linalg.cholesky(cov)
                phi = mean[leaves] + (L[leaves] @ xi[:, :, None])[:, :, 0]
                # (phi - mean_m)^T Sigma_m^-1 (phi - mean_m) for every sample and leaf by two matrix products
                # (with Sigma_m^-1 from the Cholesky factor once per leaf), not a solve per sample and leaf
                Li = torch.linalg.solve_triangular(L, eye.expand_as(L), upper=False)
                Pm = Li.transpose(-1, -2) @ Li  # (M, k, k)
                Pmu = (Pm @ mean[..., None])[..., 0]  # (M, k)
                quad = (phi[:, :, None] * phi[:, None, :]).reshape(samples, -1) @ Pm.reshape(Pm.shape[0], -1).T
                quad = quad - 2.0 * phi @ Pmu.T + (mean * Pmu).sum(-1)
                ll = -0.5 * quad - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
                post = torch.softmax(ll, dim=1)
                return ((post @ th - th[leaves]) ** 2).sum(-1).mean()

            return loss

        objective, select = crn(_chunks.SEARCH), crn(_chunks.SELECT)
    found = []
    for W0, l0 in starts:
        x, _ = _minimize(objective, _pack(W0, l0), maxiter)
        found.append(x)
    scores = [float(select(torch.tensor(x, dtype=torch.float64))) for x in found]
    x = torch.tensor(found[int(np.argmin(scores))], dtype=torch.float64)
    W, lq = _unpack(x, budget, D, family)
    return W.numpy().copy(), None if lq is None else lq.numpy().copy()


def _family_of(tree, W, lq):
    if lq is None:
        return "linear", None, None, LinearKeys(W)
    q = np.exp(lq)[tree.depth_of]
    return "weighted", q, 1.0, WeightedKeys(W, q, 1.0)


def _eval_nonadaptive(atoms, log_prior, sample_thetas, keys, N, s2, samples, seed):
    """Monte Carlo loss (EVAL stream) of the exact decoder over ``atoms`` for readings drawn from the CLT law
    of the true latents (drawn by ``sample_thetas(n, rng)``)."""
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.EVAL))
    truth = sample_thetas(samples, rng)
    tl = keys.law(truth, n_tokens=N, s2=s2)
    L = np.linalg.cholesky(tl.cov)
    phi = tl.mean + (L @ rng.standard_normal((samples, tl.n_readings, 1)))[..., 0]
    law = keys.law(atoms, n_tokens=N, s2=s2)
    est = np.concatenate([posterior_mean(atoms, log_prior, law, phi[a : a + 2048]) for a in range(0, samples, 2048)])
    return _estimate(((est - truth) ** 2).sum(1))


def _estimate(values):
    values = np.asarray(values, dtype=float)
    return Estimate(float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size)), int(values.size))


def best_nonadaptive_keyed(prior, budget: int, family: str = "weighted", *, n_tokens: int = 128, s2: float = 0.01,
                           samples: int = 4000, seed: int = 0, restarts: int = 2, maxiter: int = 200,
                           start=None) -> KeyedResult:
    """Best one-layer design of ``budget`` keys of ``family`` found (unit class, ``L = 1``, ``d = B``), decoded
    by the exact Bayes posterior under the family's law. Tree prior: at ``B = 1`` the loss is exact
    (quadrature); else Monte Carlo on ``samples`` fresh samples. ``start``: optional ``(rows, lq)`` (for
    example the previous budget's design with one more row). Gaussian prior: see :func:`gaussian_keyed`."""
    from .channels import _check_s2, _check_tokens

    family = check_family(family)
    spec = numeric_prior(prior)
    N, s2 = _check_tokens(n_tokens), _check_s2(s2)
    samples, seed = check_samples(samples), check_seed(seed)
    budget = check_budget(budget)
    if budget < 1:
        raise ValueError(f"a keyed design needs budget >= 1, got {budget}")
    if isinstance(spec, GaussSpec):
        return gaussian_keyed(spec, budget, family, n_tokens=N, s2=s2, samples=samples, seed=seed)
    tree = _Tree(spec)
    W, lq = _tree_search(tree, budget, family, N, s2, samples, seed, restarts, maxiter, start)
    fam, q, c, keys = _family_of(tree, W, lq)
    log_prior = np.full(spec.n_leaves, -math.log(spec.n_leaves))
    if budget == 1:
        law = keys.law(tree.thetas, n_tokens=N, s2=s2)
        value = mixture_loss(law.mean[:, 0], law.cov[:, 0, 0], log_prior, tree.thetas, grid=4 * GRID)
        est = Estimate(float(value), 0.0, 4 * GRID, "exact (quadrature)")
    else:
        est = _eval_nonadaptive(tree.thetas, log_prior, lambda n, r: tree.thetas[spec.sample(n, r)], keys, N, s2,
                                samples, seed)
    what = f"non-adaptive, unit, {fam} keys, exact Bayes decoder under the keys' CLT law"
    return KeyedResult("best_nonadaptive_keyed", fam, est, budget, 1, budget, W, q, c, N, s2, what)


# --- adaptive: greedy one-step lookahead ---------------------------------------------------------------
def _posterior_state(tree, geo, rows, phi, N, torch):
    """Cholesky factors of the joint law of the readings so far, ``Sigma^-1 (phi - mean)`` and the log
    posterior weights, per sample and leaf."""
    mean, cov = tree_law(tree, geo, rows, N, torch)  # (n, M, l), (n, M, l, l)
    L = torch.linalg.cholesky(cov)
    r = phi[:, None, :] - mean
    alpha = torch.cholesky_solve(r[..., None], L)[..., 0]
    ll = -0.5 * (r * alpha).sum(-1) - torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    return mean, L, alpha, torch.log_softmax(ll, dim=1)


def _next_law(tree, geo, rows, w, mean, L, alpha, N, torch):
    """Conditional law (mean, var) (n, S, M) of the reading of rows ``w`` (n, S, D) given the earlier
    readings, for every leaf (Gaussian conditioning of the joint CLT law)."""
    mu = _tree_mean(tree, geo, w[..., None, :], torch)[..., 0]  # (n, S, M)
    cross = _tree_second(tree, geo, rows[:, None], w[..., None, :], torch)[..., 0]  # (n, S, M, l)
    own = _tree_second(tree, geo, w[..., None, :], w[..., None, :], torch)[..., 0, 0]  # (n, S, M)
    s_cross = (cross - mean[:, None] * mu[..., None]) / N
    s_own = (own - mu**2) / N
    S = w.shape[1]
    v = torch.cholesky_solve(s_cross[..., None], L[:, None].expand(-1, S, -1, -1, -1))[..., 0]
    cmean = mu + (s_cross * alpha[:, None]).sum(-1)
    cvar = torch.clamp(s_own - (s_cross * v).sum(-1), min=1e-14 * float(s_own.detach().max()))
    return cmean, cvar


def _starts(tree, logw, torch, fixed):
    """(n, 3, D) starting rows: the difference of the two most probable leaves, the principal direction of
    the posterior covariance (power iteration), and a fixed direction."""
    th = torch.as_tensor(tree.thetas, dtype=torch.float64)
    p = torch.exp(logw)
    top = torch.topk(logw, 2, dim=1).indices
    a = th[top[:, 0]] - th[top[:, 1]]
    mu = p @ th
    v = fixed.expand_as(mu).clone()
    for _ in range(30):
        v = (p[:, :, None] * th[None] * (th[None] @ v[:, :, None])).sum(1) - mu * (mu * v).sum(-1, keepdim=True)
        v = v / torch.clamp(torch.linalg.norm(v, dim=-1, keepdim=True), min=1e-300)
    out = torch.stack([a, v, fixed.expand_as(mu)], dim=1)
    return out / torch.clamp(torch.linalg.norm(out, dim=-1, keepdim=True), min=1e-300)


def _next_rows_torch(tree, geo, rows, mean, L, alpha, logw, lt, xcol, fixed, N, steps, chunk, grid, torch):
    """The next layer's rows and readings by autograd (the reference of :func:`_next_rows`): chunks of
    samples that share their most probable leaf, each chunk's mixtures over the leaves alive in any of its
    samples (posterior above 1e-12 of the sample's largest), Adam on the sum of the chunk's objectives."""
    samples = rows.shape[0]
    new_rows, new_phi = [], []
    order = torch.argsort(logw.argmax(1), stable=True)
    for a in range(0, samples, chunk):
        sl = order[a : a + chunk]
        live = (logw[sl] > logw[sl].max(1, keepdim=True).values - 27.6).any(0)
        sub = tree.thetas[live.numpy()]
        with torch.no_grad():
            U0 = _starts(tree, logw[sl], torch, fixed)
        U = U0.clone().requires_grad_(True)
        opt = torch.optim.Adam([U], lr=0.05)
        for _ in range(steps):
            w = U / torch.linalg.norm(U, dim=-1, keepdim=True)
            cm, cv = _next_law(tree, geo, rows[sl], w, mean[sl], L[sl], alpha[sl], N, torch)
            loss = mixture_loss(cm[..., live], cv[..., live], logw[sl][:, live][:, None, :], sub, torch, grid)
            opt.zero_grad()
            loss.sum().backward()
            opt.step()
        with torch.no_grad():
            w = U / torch.linalg.norm(U, dim=-1, keepdim=True)
            cm, cv = _next_law(tree, geo, rows[sl], w, mean[sl], L[sl], alpha[sl], N, torch)
            best = mixture_loss(cm[..., live], cv[..., live], logw[sl][:, live][:, None, :], sub, torch,
                                grid).argmin(1)
            idx = torch.arange(best.shape[0])
            new_rows.append(w[idx, best])
            n_idx = lt[sl]
            mu_t, var_t = cm[idx, best, n_idx], cv[idx, best, n_idx]
            new_phi.append(mu_t + torch.sqrt(var_t) * xcol[sl])
    back = torch.argsort(order)
    return torch.cat(new_rows)[back], torch.cat(new_phi)[back]


def _lookahead_state(tree, geo, rows, mean, L, alpha, logw, N, node_step, torch):
    """The arguments ``st`` of ``fvnum._kernels.keyed`` for the samples' current state (rows read, their
    law per leaf from :func:`_posterior_state`) and each sample's number of live leaves."""
    from ._kernels import keyed as KK

    spec = tree.spec
    M = spec.n_leaves
    m_, g_, H = (np.ascontiguousarray(v.detach().numpy(), dtype=float) for v in geo)
    gd = g_[tree.depth_of]
    R = rows.detach().numpy()
    hz = np.ascontiguousarray(R[:, :, tree.paths] * tree.values @ H.T)  # H za, (n, l, M, K)
    lw = np.ascontiguousarray(logw.detach().numpy())
    keep = lw > lw.max(1, keepdims=True) - KK.LIVE_DROP
    live = np.ascontiguousarray(np.argsort(~keep, axis=1, kind="stable"), dtype=np.int64)
    P = torch.cholesky_inverse(L).numpy()
    heap_scales = np.concatenate([[0.0], spec.scales[spec.node_depths(np.arange(1, M)) - 1]])
    st = (np.ascontiguousarray(R * gd), gd, np.ascontiguousarray(tree.paths, dtype=np.int64),
          np.ascontiguousarray(tree.values, dtype=float), m_, H, hz, np.ascontiguousarray(mean.numpy()),
          np.ascontiguousarray(alpha.numpy()), np.ascontiguousarray(P), lw, live, float((spec.scales**2).sum()),
          float(N), heap_scales, float(node_step))
    return st, keep.sum(1).astype(np.int64)


def _next_rows(tree, geo, rows, mean, L, alpha, logw, lt, xcol, fixed, N, steps, chunk, grid, torch, screen=None,
               node_step=0.0):
    """The next layer's rows and readings (``fvnum._kernels.keyed``): per sample, its own live leaves
    (posterior above 1e-12 of its largest), the objective's gradient written out, Adam from the three starts
    of :func:`_starts`; ``chunk`` is not used (the reference's batching)."""
    from ._kernels import keyed as KK

    screen = steps if screen is None else screen
    spec = tree.spec
    n, K, D = rows.shape[0], spec.depth, spec.dim
    st, n_live = _lookahead_state(tree, geo, rows, mean, L, alpha, logw, N, node_step, torch)
    paths, vals, lw = st[2], st[3], st[10]
    U0 = np.zeros((n, 3, D))
    KK._power_starts(lw, paths, vals, fixed.numpy(), U0)
    out_w, out_phi = np.zeros((n, D)), np.zeros(n)
    wk = KK.work_arrays(int(n_live.max()), K, rows.shape[1], D)
    KK._adam_rows(U0, n_live, np.ascontiguousarray(lt.numpy(), dtype=np.int64),
                  np.ascontiguousarray(xcol.numpy()), int(steps), int(screen), 0.05, int(grid), st, wk, out_w, out_phi)
    return torch.from_numpy(out_w), torch.from_numpy(out_phi)


def adaptive_keyed_losses(prior, max_budget: int, family: str = "weighted", *, n_tokens: int = 128, s2: float = 0.01,
                          samples: int = 2000, seed: int = 0, first: KeyedResult | None = None, steps: int = 25,
                          chunk: int = 200, grid: int = 128, engine: str = "numba", screen: int | None = None,
                          node_step: float | None = None) -> list:
    """The greedy keyed policy (module docstring) run to ``max_budget`` layers on ``samples`` samples (stream
    ``EVAL``); returns one :class:`KeyedResult` per budget ``1..max_budget`` (the loss after that many
    layers, same samples). ``first``: the layer-1 design (default: :func:`best_nonadaptive_keyed` at
    budget 1, whose ``Q`` every layer uses). Each later layer's row: ``steps`` Adam steps from each of
    three starts (``screen < steps``: all starts for ``screen`` steps, then only the best), the lookahead
    by quadrature on at most ``grid`` nodes, no farther apart than ``node_step`` standard deviations of the
    narrowest live density (``0``: always ``grid`` nodes; default :data:`NODE_STEP`, for ``engine = "torch"``
    0: the reference takes neither ``screen`` nor ``node_step``). The defaults (25 steps, ``node_step =
    0.5``: the objective within about 1e-5 relative of 128 nodes' at a fraction of the nodes) give the
    losses of 40 steps on 128 nodes within their standard error, paired on the same samples
    (docs/benchmarks/2026-12-02-keyed.md). ``engine``: ``"numba"`` (:func:`_next_rows`) or ``"torch"`` (the
    autograd reference, :func:`_next_rows_torch`, minutes where the other takes seconds)."""
    from .channels import _check_s2, _check_tokens

    if engine not in ("numba", "torch"):
        raise ValueError(f"engine must be 'numba' or 'torch', got {engine!r}")
    if engine == "torch" and (screen not in (None, steps) or node_step not in (None, 0)):
        raise ValueError(f"the torch reference runs every start the whole way on {grid} nodes; got screen={screen!r}, "
                         f"node_step={node_step!r}")
    node_step = (NODE_STEP if engine == "numba" else 0.0) if node_step is None else float(node_step)
    if not node_step >= 0:
        raise ValueError(f"node_step must be >= 0 (0: always grid nodes), got {node_step!r}")

    torch = _torch()
    family = check_family(family)
    spec = numeric_prior(prior)
    if not isinstance(spec, TreeSpec):
        raise ValueError("the adaptive keyed search is for the tree prior; on a Gaussian prior use "
                         "best_nonadaptive_keyed")
    N, s2 = _check_tokens(n_tokens), _check_s2(s2)
    samples, seed = check_samples(samples), check_seed(seed)
    max_budget = check_budget(max_budget)
    if first is None:
        first = best_nonadaptive_keyed(spec, 1, family, n_tokens=N, s2=s2, seed=seed)
    tree = _Tree(spec)
    D = spec.dim
    lq = None if first.q is None else torch.tensor(np.log(first.q[[int(np.argmax(tree.depth_of == k))
                                                                  for k in range(spec.depth)]]))
    with torch.no_grad():
        geo = _geometry(tree, lq, s2, torch)
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.EVAL))
    leaves = spec.sample(samples, rng)
    xi = torch.tensor(rng.standard_normal((samples, max(1, max_budget))), dtype=torch.float64)
    fixed = torch.tensor(np.random.default_rng(20240229).standard_normal(D), dtype=torch.float64)
    th = torch.tensor(tree.thetas, dtype=torch.float64)
    truth = th[torch.tensor(leaves)]
    lt = torch.tensor(leaves)
    rows = torch.tensor(first.rows, dtype=torch.float64)[None].expand(samples, -1, -1).clone()  # (n, 1, D)
    with torch.no_grad():
        mean, cov = tree_law(tree, geo, rows, N, torch)
        m1, v1 = mean[torch.arange(samples), lt, 0], cov[torch.arange(samples), lt, 0, 0]
        phi = (m1 + torch.sqrt(v1) * xi[:, 0])[:, None]
    out = []
    for layer in range(max_budget):
        with torch.no_grad():
            mean, L, alpha, logw = _posterior_state(tree, geo, rows, phi, N, torch)
            values = ((torch.exp(logw) @ th - truth) ** 2).sum(-1).numpy()
        est = _estimate(values)
        what = (f"adaptive (d = 1, L = {layer + 1}), unit, {family} keys: greedy one-step lookahead, exact Bayes "
                f"decoder under the keys' CLT law")
        out.append(KeyedResult("best_adaptive_keyed", family, est, layer + 1, layer + 1, 1, first.rows, first.q,
                               first.c, N, s2, what))
        if layer + 1 == max_budget:
            break
        args = (tree, geo, rows, mean, L, alpha, logw, lt, xi[:, layer + 1], fixed, N, steps, chunk, grid, torch)
        new_w, new_phi = _next_rows_torch(*args) if engine == "torch" else _next_rows(*args, screen=screen,
                                                                                     node_step=node_step)
        rows = torch.cat([rows, new_w[:, None, :]], dim=1)
        phi = torch.cat([phi, new_phi[:, None]], dim=1)
    return out


def has_adaptive_search(prior) -> bool:
    """Whether :func:`best_adaptive_keyed` applies to ``prior`` (the tree prior)."""
    return isinstance(numeric_prior(prior), TreeSpec)


def best_adaptive_keyed(prior, budget: int, family: str = "weighted", **kw) -> KeyedResult:
    """The best adaptive keyed policy found (``d = 1``, ``L = B``): :func:`adaptive_keyed_losses` at
    ``budget`` layers."""
    return adaptive_keyed_losses(prior, budget, family, **kw)[-1]


# --- Gaussian prior: one layer on the eigen-directions, decoded by quadrature ---------------------------
def _gaussian_losses(vals, budget, q, N, s2, truth, xi, nodes: int = 11, width: float = 7.0, chunk: int = 64):
    """Per-sample losses of keys ``e_1 .. e_B`` (eigenbasis, largest eigenvalues first) with ``Q = diag(q)``
    (``q`` None: linear keys), ``c = 1``, for latents ``truth`` (n, D) (eigenbasis) and standard normal
    draws ``xi`` (n, B): readings from the keys' CLT law, decoded by quadrature of the posterior of the read
    coordinates on a product grid (``nodes`` per coordinate, +- ``width`` posterior standard deviations of
    the Gaussian approximation), the squares of the unread coordinates set to their prior mean in the
    decoder's law. An unread coordinate enters the law only through its square, so its posterior mean is
    0 by symmetry and it adds its prior variance."""
    D = vals.size
    t, wt = quadrature_nodes(1.0, STEP)
    S, w2, m, h = weighted_moments(np.zeros(D) if q is None else np.asarray(q, dtype=float), 1.0, t, wt)
    W = np.eye(D)[:budget]
    tl = weighted_law(W, S, w2, m, h, truth, N, s2)
    phi = tl[0] + (np.linalg.cholesky(tl[1]) @ xi[..., None])[..., 0]
    # Gaussian approximation of each read coordinate's posterior: centre and width of the grid
    noise = np.einsum("jj->j", weighted_law(W, S, w2, m, h, np.zeros((1, D)), N, s2, theta2=vals[None])[1][0])
    prec = m[:budget] ** 2 / noise + 1 / vals[:budget]
    centre = phi * (m[:budget] / noise) / prec  # (n, B)
    half = width / np.sqrt(prec)
    u = np.linspace(-1.0, 1.0, nodes)
    mesh = np.stack(np.meshgrid(*([u] * budget), indexing="ij"), -1).reshape(-1, budget)  # (G, B)
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
        logw -= logw.max(1, keepdims=True)
        w = np.exp(logw)
        est = np.einsum("ng,ngb->nb", w, grid) / w.sum(1, keepdims=True)
        out[a : a + chunk] = ((est - truth[a : a + chunk, :budget]) ** 2).sum(1) + unread
    return out


def gaussian_keyed(prior, budget: int, family: str = "weighted", *, n_tokens: int = 128, s2: float = 0.01,
                   samples: int = 4000, seed: int = 0, maxiter: int = 60, nodes: int = 11) -> KeyedResult:
    """One layer of ``budget`` keys on a Gaussian prior ``N(0, C)``: the keys read the top ``B``
    eigen-directions of ``C`` (the optimal rows of the gaussian channel, section 5); weighted keys have
    ``Q`` diagonal in the eigenbasis with one value per distinct eigenvalue, ``c = 1``, chosen by Powell's
    method on the Monte Carlo loss (common random numbers, stream ``SEARCH``). Decoder: the posterior mean
    of the read coordinates by quadrature (see :func:`_gaussian_losses`; unread coordinates' squares at
    their prior mean in the decoder's law, so it is near-Bayes, and its loss is achievable). The loss is
    reported on ``samples`` fresh latents (``EVAL``)."""
    from scipy.optimize import minimize

    spec = prior if isinstance(prior, GaussSpec) else numeric_prior(prior)
    family = check_family(family)
    vals, vecs = spec.eigenvalues, spec.eigenvectors
    D = spec.dim
    if budget > D:
        raise ValueError(f"a keyed design on a Gaussian prior reads at most D = {D} directions, got budget {budget}")
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
    est = _estimate(_gaussian_losses(vals, budget, q, n_tokens, s2, truth, xi, nodes))
    est = Estimate(est.value, est.stderr, est.n, f"mc, quadrature decoder ({nodes}^{budget} nodes)")
    rows = vecs[:, :budget].T.copy()  # in the prior's coordinates
    q_full = None if q is None else (vecs * q) @ vecs.T
    what = (f"non-adaptive, top-{budget} eigen-directions, {family} keys, near-Bayes decoder (quadrature) under "
            f"the keys' CLT law")
    return KeyedResult("best_nonadaptive_keyed", family, est, budget, 1, budget, rows,
                       None if q_full is None else np.diag(q_full).copy(), None if q is None else 1.0, n_tokens, s2,
                       what)


def tokens_loss_mc(prior, result: KeyedResult, *, samples: int = 20_000, seed: int = 0, chunk: int = 1000) -> Estimate:
    """Loss of a one-layer keyed design under the real tokens channel (tree prior): ``N`` tokens and labels
    drawn per context, ``phi = (1/N) sum_i y_i f(x_i)`` computed exactly, decoded by the Bayes decoder of the
    CLT law (a valid decoder, so the number is achievable; it checks the CLT at this ``N``)."""
    spec = numeric_prior(prior)
    if not isinstance(spec, TreeSpec) or result.layers != 1:
        raise ValueError("tokens_loss_mc checks one-layer keyed designs on the tree prior")
    tree, keys, N = _Tree(spec), result.keys(), result.n_tokens
    law = keys.law(tree.thetas, n_tokens=N, s2=result.s2)
    log_prior = np.full(spec.n_leaves, -math.log(spec.n_leaves))
    rng = np.random.default_rng(_chunks.seed_sequence(check_seed(seed), _chunks.EVAL))
    out = []
    for a in range(0, check_samples(samples), chunk):
        n = min(chunk, samples - a)
        truth = tree.thetas[spec.sample(n, rng)]
        X = rng.standard_normal((n, N, spec.dim))
        y = np.einsum("nid,nd->ni", X, truth) + math.sqrt(result.s2) * rng.standard_normal((n, N))
        F = keys(X.reshape(-1, spec.dim)).reshape(n, N, -1)
        phi = (y[..., None] * F).mean(1)
        out.append((((posterior_mean(tree.thetas, log_prior, law, phi) - truth) ** 2).sum(1)))
    est = _estimate(np.concatenate(out))
    return Estimate(est.value, est.stderr, est.n, "mc, exact tokens, CLT-law Bayes decoder")
