"""The one-step lookahead of the adaptive keyed search (:mod:`fvnum.keys.adaptive`, which these names are importable
from too; tree prior, ``d = 1``): the state of a sample after the readings so far (the Cholesky factors of their joint
law on every leaf and the log posterior, :func:`_posterior_state`), the conditional law of a next reading given them
(:func:`_next_law`, Gaussian conditioning of the joint CLT law), the three starting rows (:func:`_starts`), and the next
layer's rows chosen by Adam on the sphere: by the Numba kernel ``fvnum.mc._kernels.keyed`` (:func:`_next_rows`, with
its arguments :func:`_lookahead_state`) or by torch autograd, the reference (:func:`_next_rows_torch`).
"""
from __future__ import annotations

import numpy as np

from fvnum.keys.tree import _tree_mean, _tree_second, mixture_loss, rows_of, tree_law


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
            w = rows_of(geo, U, torch)
            cm, cv = _next_law(tree, geo, rows[sl], w, mean[sl], L[sl], alpha[sl], N, torch)
            loss = mixture_loss(cm[..., live], cv[..., live], logw[sl][:, live][:, None, :], sub, torch, grid)
            opt.zero_grad()
            loss.sum().backward()
            opt.step()
        with torch.no_grad():
            w = rows_of(geo, U, torch)
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
    """The arguments ``st`` of ``fvnum.mc._kernels.keyed`` for the samples' current state (rows read, their
    law per leaf from :func:`_posterior_state`) and each sample's number of live leaves."""
    from fvnum.mc._kernels import keyed as KK

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
    """The next layer's rows and readings (``fvnum.mc._kernels.keyed``): per sample, its own live leaves
    (posterior above 1e-12 of its largest), the objective's gradient written out, Adam from the three starts
    of :func:`_starts`; ``chunk`` is not used (the reference's batching)."""
    from fvnum.mc._kernels import keyed as KK

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
