"""Slow, obvious numpy oracles for every kernel in ``_kernels.py``: they enumerate all ``2^K`` leaves
(dense ``theta`` vectors) and apply Bayes' rule literally. Used by the tests and the benchmarks only."""
from __future__ import annotations

import numpy as np


def leaf_thetas(scales) -> np.ndarray:
    """``(2^K, D)``: row ``i`` is ``theta`` of leaf ``i`` (docs/theory.md section 6)."""
    scales = np.asarray(scales, dtype=float)
    K = scales.size
    out = np.zeros((2**K, 2**K - 1))
    for i in range(2**K):
        n = 1
        for k in range(1, K + 1):
            s = -1.0 if (i >> (K - k)) & 1 else 1.0
            out[i, n - 1] = scales[k - 1] * s
            n = 2 * n + (1 if s < 0 else 0)
    return out


TAU0_FALLBACK = 1e-2  # as in _kernels: the tau -> 0 limit for observations no leaf explains


def _posterior_mean(loglik: np.ndarray, thetas: np.ndarray) -> np.ndarray:
    """Posterior mean under the uniform prior over leaves, ``loglik`` (n, 2^K)."""
    mx = loglik.max(axis=1, keepdims=True)
    w = np.exp(loglik - mx)
    w /= w.sum(axis=1, keepdims=True)
    return w @ thetas


def coord_posterior_mean(nodes, readings, tau, scales) -> np.ndarray:
    """Exact posterior mean given readings of nodes (node 0: no reading). ``nodes``, ``readings`` (n, B).
    At ``tau = 0`` a sample that no leaf explains is decoded at ``tau = TAU0_FALLBACK * a_K``."""
    scales = np.asarray(scales, dtype=float)
    thetas = leaf_thetas(scales)
    nodes = np.asarray(nodes)
    readings = np.asarray(readings, dtype=float)

    def loglik(s, t):
        out = np.zeros(thetas.shape[0])
        for b in range(nodes.shape[1]):
            if nodes[s, b] <= 0:
                continue
            values = thetas[:, nodes[s, b] - 1]
            if t > 0:
                out -= (readings[s, b] - values) ** 2 / (2 * t**2)
            else:
                out[values != readings[s, b]] = -np.inf
        if t == 0 and np.all(out == -np.inf):
            return loglik(s, TAU0_FALLBACK * scales[-1])
        return out

    return _posterior_mean(np.array([loglik(s, tau) for s in range(nodes.shape[0])]), thetas)


def dense_posterior_mean(W, phi, tau, scales, tol=1e-9) -> np.ndarray:
    """Exact posterior mean given ``phi = W theta + tau xi``; ``W`` (m, B, D), ``m`` in {1, n}."""
    scales = np.asarray(scales, dtype=float)
    thetas = leaf_thetas(scales)
    W = np.asarray(W, dtype=float)
    phi = np.asarray(phi, dtype=float)
    proj = np.einsum("mbd,id->mib", W, thetas)  # (m, 2^K, B)
    diff = phi[:, None, :] - proj  # (n, 2^K, B)
    gauss = -(diff**2).sum(axis=2)
    if tau > 0:
        loglik = gauss / (2 * tau**2)
    else:
        ok = (np.abs(diff) <= tol * (1 + np.abs(phi[:, None, :]))).all(axis=2)
        loglik = np.where(ok, 0.0, -np.inf)
        none = ~ok.any(axis=1)
        loglik[none] = gauss[none] / (2 * (TAU0_FALLBACK * scales[-1]) ** 2)
    return _posterior_mean(loglik, thetas)


def losses(means: np.ndarray, leaves, scales) -> np.ndarray:
    return ((means - leaf_thetas(scales)[np.asarray(leaves)]) ** 2).sum(axis=1)


def path_sim(leaves, noise, stat, tau, scales, donors=None, dstat=None, patch_layer=0, informed=False, layers=None,
             n_tok=0.0, sigma2=0.0):
    """The path strategy written out layer by layer over the whole batch, decoded by enumeration (under the
    tokens law ``(n_tok, sigma2)`` when ``n_tok > 0``, else the gaussian likelihood of noise ``tau``).
    Same inputs and meaning as ``_kernels._tree_path_sim``; returns (loss, phi, nodes)."""
    thetas = leaf_thetas(scales)
    leaves = np.asarray(leaves)
    n = leaves.size
    L = noise.shape[1] if layers is None else layers
    tokens = stat is not None and np.size(stat) > 0
    rows = np.arange(n)
    node = np.ones(n, dtype=np.int64)
    dnode = np.ones(n, dtype=np.int64)
    phi = np.zeros((n, L))
    routed = np.zeros((n, L), dtype=np.int64)
    actual = np.zeros((n, L), dtype=np.int64)
    for l in range(L):
        act = node.copy()
        if patch_layer >= 1 and l < patch_layer:
            if l == patch_layer - 1:
                act = dnode.copy()
            else:
                dr = dstat[rows, dnode - 1] if tokens else thetas[donors, dnode - 1] + tau * noise[:, l]
                dnode = 2 * dnode + (dr < 0)
        r = stat[rows, act - 1] if tokens else thetas[leaves, act - 1] + tau * noise[:, l]
        phi[:, l] = r
        routed[:, l] = node
        actual[:, l] = act
        node = 2 * node + (r < 0)
    read = actual if informed else routed
    means = (tokens_posterior_mean(read, phi, n_tok, sigma2, scales) if n_tok > 0
             else coord_posterior_mean(read, phi, tau, scales))
    return losses(means, leaves, scales), phi, routed


def dense_design_loss(W, noise, leaves, tau, scales) -> float:
    """Summed loss of the fixed design ``W`` (B, D) under the gaussian channel (gradient oracle)."""
    thetas = leaf_thetas(scales)
    phi = thetas[leaves] @ W.T + tau * noise
    means = dense_posterior_mean(W[None], phi, tau, scales)
    return float(losses(means, leaves, scales).sum())


def greedy_coord_scores(nodes, readings, tau, scales, gh_x, gh_w) -> np.ndarray:
    """``E ||posterior mean after one more reading of n||^2`` for every candidate ``n``, by enumeration:
    the current leaf posterior, the three outcomes of the new reading and the same quadrature rule."""
    thetas = leaf_thetas(scales)
    nl, D = thetas.shape
    nodes = np.asarray(nodes)
    out = np.zeros((nodes.shape[0], D))
    for s in range(nodes.shape[0]):
        loglik = np.zeros(nl)
        for b in range(nodes.shape[1]):
            if nodes[s, b] <= 0:
                continue
            values = thetas[:, nodes[s, b] - 1]
            if tau > 0:
                loglik -= (readings[s, b] - values) ** 2 / (2 * tau**2)
            else:
                loglik[values != readings[s, b]] = -np.inf
        w = np.exp(loglik - loglik.max())
        w /= w.sum()
        for n in range(1, D + 1):
            values = thetas[:, n - 1]
            score = 0.0
            for v in np.unique(values):
                pv = w[values == v].sum()
                if pv <= 0:
                    continue
                xs = [v] if tau == 0 else v + tau * np.asarray(gh_x)
                ws = [1.0] if tau == 0 else np.asarray(gh_w)
                for x, q in zip(xs, ws):
                    like = (values == x).astype(float) if tau == 0 else np.exp(-((x - values) ** 2) / (2 * tau**2))
                    post = w * like
                    post /= post.sum()
                    m = post @ thetas
                    score += pv * q * (m @ m)
            out[s, n - 1] = score
    return out


def token_statistic(theta, n_tokens, s2, rng) -> np.ndarray:
    """``S = (1/N) sum_i y_i x_i`` from ``N`` explicitly sampled tokens, for each row of ``theta`` (n, D)."""
    theta = np.atleast_2d(np.asarray(theta, dtype=float))
    n, D = theta.shape
    X = rng.standard_normal((n, n_tokens, D))
    y = np.einsum("nid,nd->ni", X, theta) + np.sqrt(s2) * rng.standard_normal((n, n_tokens))
    return np.einsum("nid,ni->nd", X, y) / n_tokens


def gaussian_posterior_mean(C, W, phi, tau) -> np.ndarray:
    """``(C^-1 + W^T W / tau^2)^-1 W^T phi / tau^2`` for each sample (``C`` invertible, ``tau > 0``);
    ``W`` (m, B, D), ``m`` in {1, n}."""
    Ci = np.linalg.inv(C)
    out = np.zeros((phi.shape[0], C.shape[0]))
    for s in range(phi.shape[0]):
        Ws = W[s if W.shape[0] > 1 else 0]
        P = np.linalg.inv(Ci + Ws.T @ Ws / tau**2)
        out[s] = P @ Ws.T @ phi[s] / tau**2
    return out


def dense_lookahead_value(w, live, p, tau, scales, per_tau, tail) -> float:
    """``E ||E[theta | phi]||^2`` for ``phi = w.theta + tau z`` under the leaf distribution ``p`` on the
    leaves ``live``: the trapezoid rule on the lattice ``x = g tau / per_tau`` over every ``x`` within
    ``tail tau`` of a leaf's projection (oracle of ``_kernels._dense_objective``)."""
    thetas = leaf_thetas(scales)[np.asarray(live)]
    v = thetas @ np.asarray(w, dtype=float)
    h = tau / per_tau
    lattice = set()
    for vb in v:
        lattice.update(range(int(np.ceil((vb - tail * tau) / h)), int(np.floor((vb + tail * tau) / h)) + 1))
    total = 0.0
    for g in sorted(lattice):
        like = p * np.exp(-((g * h - v) ** 2) / (2 * tau**2)) / (np.sqrt(2 * np.pi) * tau)
        m = (like / like.sum()) @ thetas
        total += h * like.sum() * (m @ m)
    return float(total)


def noisy_last_q(P, cand, cls, lik, w, nj, scales) -> np.ndarray:
    """Oracle of ``_kernels._dp_last``: (M, C) expected loss after one more reading of each candidate,
    from each reading's posterior (lattice tables of ``fvnum.optimum.noisy_dp.Quadrature``, one per depth)."""
    thetas = leaf_thetas(scales)
    A = float((np.asarray(scales) ** 2).sum())
    out = np.zeros((P.shape[0], len(cand)))
    for s, p in enumerate(np.asarray(P, dtype=float)):
        p = p / p.sum()
        for c, n in enumerate(cand):
            k = int(n).bit_length() - 1
            W = np.array([p[cls[n - 1] == o].sum() for o in range(3)])
            for j in range(nj[k]):
                post = p * lik[k, j][cls[n - 1]]
                if post.sum() > 0:
                    m = (post / post.sum()) @ thetas
                    out[s, c] += (W @ w[k, :, j]) * (A - m @ m)
    return out


def _log_kv(nu: float, y: float) -> float:
    """``log K_nu(y)``: scipy's scaled Bessel function where it is finite and positive in doubles, else mpmath's
    (large ``nu`` at small ``y`` overflows ``kve``, and large ``y`` underflows it)."""
    from scipy.special import kve

    k = kve(nu, y)
    if np.isfinite(k) and k > 0:
        return float(np.log(k) - y)
    import mpmath

    return float(mpmath.log(mpmath.besselk(nu, y)))


def tokens_posterior_mean(W, phi, n_tok, sigma2, scales, tol=1e-9) -> np.ndarray:
    """Exact tokens-channel posterior mean by enumeration (oracle of ``_kernels.tokens``). Given leaf ``m``
    and ``r ~ chi2_N / N``, the readings ``phi = W S`` are ``N(v_m r, r C_m)`` with ``v_m = W theta_m`` and
    ``C_m = (sigma2 / N) (W W^T - v_m v_m^T / sigma2)``, singular when rows repeat or are dependent: the
    log-density on the row span, by the pseudo-inverse and pseudo-determinant of ``C_m``, is quadratic
    in ``r`` and ``1/r``, so the mixture over ``r`` is a Bessel function (``scipy.special.kve``).
    ``W`` (m, B, D), ``m`` in {1, n}, or node numbers (n, B) (0: idle)."""
    thetas = leaf_thetas(scales)
    phi = np.asarray(phi, dtype=float)
    W = np.asarray(W)
    if W.dtype.kind in "iu":  # node numbers: rows e_n (a zero row for an idle channel)
        eye = np.vstack([np.zeros(thetas.shape[1]), np.eye(thetas.shape[1])])
        W = eye[np.broadcast_to(W, phi.shape)]
    W = np.asarray(W, dtype=float)
    N = float(n_tok)
    loglik = np.zeros((phi.shape[0], thetas.shape[0]))
    for s in range(phi.shape[0]):
        Ws = W[s if W.shape[0] > 1 else 0]
        G = Ws @ Ws.T
        g = np.linalg.eigvalsh(G)
        rk = int((g > tol * max(g.max(initial=0.0), np.finfo(float).tiny)).sum())
        if rk == 0:  # nothing read: the prior
            continue
        for i, v in enumerate(thetas @ Ws.T):
            lam, E = np.linalg.eigh(sigma2 / N * (G - np.outer(v, v) / sigma2))
            E, lam = E[:, np.argsort(lam)[::-1][:rk]], np.sort(lam)[::-1][:rk]
            x, u = E.T @ phi[s], E.T @ v  # in the span: exponent -(a0 / r - 2 a1 + a2 r) / 2
            a0, a1, a2 = (x * x / lam).sum(), (x * u / lam).sum(), (u * u / lam).sum()
            nu, alpha, beta = (N - rk) / 2, a2 + N, max(a0, 1e-300)  # with the chi2_N / N density of r
            y = np.sqrt(alpha * beta)
            log_j = np.log(2.0) + 0.5 * nu * np.log(beta / alpha) + _log_kv(nu, y)
            loglik[s, i] = log_j + a1 - 0.5 * np.log(lam).sum()
    return _posterior_mean(loglik, thetas)


def one_layer_mc(mean, L, P, hl, leaves, xi, paths, vals):
    """Numpy twin of ``fvnum.mc._kernels.keyed._one_layer_mc``: ``(value, g_mean, g_L, g_P, g_hl)``."""
    n, k = xi.shape
    M = paths.shape[0]
    th = np.zeros((M, int(paths.max()) + 1))
    np.put_along_axis(th, paths, vals, axis=1)
    phi = mean[leaves] + np.einsum("nij,nj->ni", np.tril(L)[leaves], xi)
    r = phi[:, None, :] - mean[None]  # (n, M, k)
    v = np.einsum("mij,nmj->nmi", P, r)
    ll = -0.5 * (r * v).sum(-1) - hl
    post = np.exp(ll - ll.max(1, keepdims=True))
    post /= post.sum(1, keepdims=True)
    err = post @ th - th[leaves]
    a = (2.0 / n) * err @ th.T
    b = post * (a - (post * a).sum(1, keepdims=True))  # (n, M) d loss / d ll
    gphi = -np.einsum("nm,nmi->ni", b, v)
    onehot = np.zeros((n, M))
    onehot[np.arange(n), leaves] = 1.0
    g_mean = np.einsum("nm,nmi->mi", b, v) + onehot.T @ gphi
    g_L = np.tril(np.einsum("nl,ni,nj->lij", onehot, gphi, xi))
    g_P = -0.5 * np.einsum("nm,nmi,nmj->mij", b, r, r)
    return float((err**2).sum(1).mean()), g_mean, g_L, g_P, -b.sum(0)


def gd_errors(thetas, X, y, gammas, P=None) -> np.ndarray:
    """(n, L+1, D): ``theta - theta_hat_l`` after ``l = 0..L`` steps of gradient descent with scalar steps
    ``gammas``, run literally: each layer reads the residuals ``r_i = y_i - <theta_hat, x_i>`` with the ``D`` unit
    keys, ``phi = (1/N) sum_i r_i x_i``, and adds ``gamma_l phi`` (docs/theory.md section 13). ``X`` (n, N, D), ``y``
    (n, N). ``P`` (D, D): the preconditioned step ``gamma_l P phi``. The twin of ``fvnum.values.gd``'s Krylov form."""
    thetas, X, y = (np.asarray(v, dtype=float) for v in (thetas, X, y))
    theta_hat = np.zeros_like(thetas)
    out = [thetas - theta_hat]
    for gamma in gammas:
        r = y - np.einsum("nid,nd->ni", X, theta_hat)
        phi = np.einsum("ni,nid->nd", r, X) / X.shape[1]
        theta_hat = theta_hat + gamma * (phi if P is None else phi @ np.asarray(P, dtype=float).T)
        out.append(thetas - theta_hat)
    return np.stack(out, axis=1)
