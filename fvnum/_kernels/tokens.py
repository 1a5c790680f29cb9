"""The exact decoder of the tokens channel on the tree prior (THEORY.md section 2; docs/decoders.md).

Every reading is ``phi_b = <w_b, S>`` of the one statistic ``S = (1/N) sum_i y_i x_i``. Its law given
the latent, exactly (not only at the CLT level): with ``sigma2 = |theta|^2 + s2``, ``y ~ N(0, sigma2 I_N)``
and ``x_i | y_i ~ N(theta y_i / sigma2, I - theta theta^T / sigma2)``, so with ``r = |y|^2 / (N sigma2) ~
chi2_N / N``,

    S | theta, r ~ N(theta r, (sigma2 r / N) (I - theta theta^T / sigma2)),

a Gaussian scale mixture (its covariance is the CLT's ``(sigma2 I + theta theta^T) / N``, its shape is
not Gaussian at small N). Let ``V`` (``rk`` orthonormal rows) span the rows read and ``z = V S`` (what the
readings determine, ``z = V W^+ phi``: a repeated row, or one in the span of others, adds nothing). On
the tree prior ``sigma2`` is the same for every leaf; with ``y = V theta_m``, ``p = |y|^2``, ``q = <y, z>``,
``zz = |z|^2``, integrating ``r`` out (a generalised inverse Gaussian integral) gives, up to a constant of
the leaf,

    log p(z | m) = log J(lam, alpha, beta) - 1/2 log(1 - p / sigma2) + N q / (sigma2 - p),
    J = int_0^inf r^(lam - 1) exp(-(alpha r + beta / r) / 2) dr,  lam = (N - rk) / 2,
    alpha = N sigma2 / (sigma2 - p),  beta = N (zz + q^2 / (sigma2 - p)) / sigma2     (_tokens_loglik).

For coordinate rows ``V`` is the set of distinct read nodes, ``z_n`` the mean of node ``n``'s readings
(identical numbers in a simulation), and along a leaf's path ``p = sum a_k^2``, ``q = sum a_k s_k z_{n_k}``
over the read path nodes. Leaves below an unread child of the closure share ``(p, q)``: one downward
pass (prefix sums), one group per such child and one upward pass (log masses) give the exact posterior
in O(closure) (``_tokens_posterior``), written into the coordinate scratch ``cs`` (``pplus``, ``pp``,
marks), so ``coord._coord_loss`` and friends read it unchanged. General rows enumerate the ``2^K``
leaves (``_tokens_dense_decode``), O(2^K rk), evaluating ``J`` only for the leaves whose O(1) upper bound
(``_tokens_loglik_bound``) comes within ``SCREEN`` of the best. The law travels as ``(n_tok, sigma2)``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .common import LOG2, NEG_INF, _bitlen, _lae, _path_node, _signed_scale
from .coord import _coord_downward, _coord_loss, _coord_mean_at, _coord_reset, _coord_scratch
from .dense import _leaf_projections, _mean_and_error, _normalise_leaf_masses

GIG_DROP = 38.0  # the trapezoid sum stops where the integrand is below exp(-GIG_DROP) of its peak
GIG_STEPS = 4000  # at most this many points each side of the peak
SCREEN = 40.0  # leaves whose log-likelihood is surely this far below the best are given weight 0


@njit(cache=True, nogil=True, inline="always")
def _gig_peak(lam, alpha, beta):
    """Peak ``(t0, u = e^t0, f0, kappa)`` of ``f(t) = lam t - (alpha e^t + beta e^-t) / 2`` and its curvature."""
    s = math.sqrt(lam * lam + alpha * beta)
    u = (lam + s) / alpha if lam >= 0 else beta / (s - lam)
    t0 = math.log(u)
    kap = 0.5 * (alpha * u + beta / u)
    return t0, u, lam * t0 - kap, kap


@njit(cache=True, nogil=True, inline="always")
def _log_gig(lam, alpha, beta):
    """``log int_0^inf r^(lam - 1) exp(-(alpha r + beta / r) / 2) dr`` (``alpha, beta > 0``), by the
    trapezoid rule in ``t = log r`` from the peak of the (log-concave, entire) integrand ``exp(f(t))``:
    step ``h = min(1/8, 0.7 / sqrt(kappa))`` (errors about ``exp(-pi^2 / (2 h))`` from the strip of
    analyticity and ``exp(-2 pi^2 / (kappa h^2))`` from the peak's width: both below 1e-17), summed
    outwards until below ``exp(-GIG_DROP)`` of the peak."""
    t0, u, f0, kap = _gig_peak(lam, alpha, beta)
    h = min(0.125, 0.7 / math.sqrt(kap))
    ap = 0.5 * alpha * u
    bp = 0.5 * beta / u
    total = 1.0
    for side in (1.0, -1.0):
        for j in range(1, GIG_STEPS):
            d = side * j * h  # f(t0 + d) - f0, without the cancellation of f's large terms
            e = math.expm1(d)
            v = lam * d - ap * e + bp * e / (1.0 + e)
            if v < -GIG_DROP:
                break
            total += math.exp(v)
    return f0 + math.log(h * total)


@njit(cache=True, nogil=True, inline="always")
def _tokens_terms(p, q, zz, rk, n_tok, sigma2):
    """``(lam, alpha, beta, rest)`` of ``log p(z | leaf) = log J(lam, alpha, beta) + rest``."""
    g = sigma2 - p
    beta = max(n_tok * (zz + q * q / g) / sigma2, 1e-300)
    return 0.5 * (n_tok - rk), n_tok * sigma2 / g, beta, -0.5 * math.log1p(-p / sigma2) + n_tok * q / g


@njit(cache=True, nogil=True, inline="always")
def _tokens_loglik(p, q, zz, rk, n_tok, sigma2):
    """``log p(z | leaf)`` up to a constant, from ``p = |y|^2``, ``q = <y, z>``, ``zz = |z|^2`` and the rank
    ``rk`` of the rows read (module docstring)."""
    lam, alpha, beta, rest = _tokens_terms(p, q, zz, rk, n_tok, sigma2)
    return _log_gig(lam, alpha, beta) + rest


@njit(cache=True, nogil=True, inline="always")
def _tokens_loglik_bound(p, q, zz, rk, n_tok, sigma2):
    """An upper bound of ``_tokens_loglik`` in O(1): ``f'' <= -sqrt(alpha beta)`` everywhere, so
    ``J <= e^f0 sqrt(2 pi / sqrt(alpha beta))``."""
    lam, alpha, beta, rest = _tokens_terms(p, q, zz, rk, n_tok, sigma2)
    f0 = _gig_peak(lam, alpha, beta)[2]
    return f0 + 0.5 * math.log(2.0 * math.pi / math.sqrt(alpha * beta)) + rest


@njit(cache=True, nogil=True, inline="always")
def _tokens_posterior(nodes, readings, n_tok, sigma2, scales, cs):
    """Exact tokens-channel posterior given readings ``readings[b]`` of nodes ``nodes[b]`` (0: idle), in
    the coordinate scratch ``cs``. Its arrays hold here: ``lp`` the mean reading of a read node, ``lm``
    its number of readings, ``l0`` and ``O`` the prefix sums ``p`` and ``q`` of the path down to a
    closure node, ``U`` the log mass of its subtree; ``pplus``, ``pp``, ``mark``, ``byd``, ``cnt`` as in
    ``coord``. The caller reads the posterior and then calls ``coord._coord_done``."""
    lp, lm, l0, U, O, pplus, mark, byd, cnt = cs[0], cs[1], cs[2], cs[3], cs[4], cs[5], cs[7], cs[8], cs[9]
    K = scales.shape[0]
    for k in range(K):
        cnt[k] = 0
    for b in range(nodes.shape[0]):
        n = nodes[b]
        if n <= 0:
            continue
        m = n
        km = _bitlen(n)
        while m >= 1 and mark[m] == 0:
            mark[m] = 1
            lp[m] = 0.0
            lm[m] = 0.0
            byd[km - 1, cnt[km - 1]] = m
            cnt[km - 1] += 1
            m >>= 1
            km -= 1
        lm[n] += 1.0
        lp[n] += (readings[b] - lp[n]) / lm[n]  # running mean: exact when the readings are equal
    if cnt[0] == 0:
        return
    zz = 0.0  # |z|^2 and the rank: the distinct read nodes
    rk = 0.0
    for k in range(1, K + 1):
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            if lm[n] > 0:
                zz += lp[n] * lp[n]
                rk += 1.0
    l0[1] = 0.0
    O[1] = 0.0
    for k in range(1, K):  # prefix sums, parents before children
        a = scales[k - 1]
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            p = l0[n]
            dq = 0.0
            if lm[n] > 0:
                p += a * a
                dq = a * lp[n]
            for ch in (2 * n, 2 * n + 1):
                if mark[ch]:
                    l0[ch] = p
                    O[ch] = O[n] + (dq if ch == 2 * n else -dq)
    for k in range(K, 0, -1):  # log masses, children before parents
        a = scales[k - 1]
        lg = (K - k) * LOG2  # log of the number of leaves below a child of a depth-k node
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            p = l0[n]
            q = O[n]
            dq = 0.0
            if lm[n] > 0:
                p += a * a
                dq = a * lp[n]
            if k < K and mark[2 * n]:
                up = U[2 * n]
            else:
                up = lg + _tokens_loglik(p, q + dq, zz, rk, n_tok, sigma2)
            if k < K and mark[2 * n + 1]:
                um = U[2 * n + 1]
            else:
                um = lg + _tokens_loglik(p, q - dq, zz, rk, n_tok, sigma2)
            z = _lae(up, um)
            U[n] = z
            pplus[n] = math.exp(up - z)
    _coord_downward(K, cs)


@njit(cache=True, nogil=True)
def _tokens_coord_decode(nodes, readings, n_tok, sigma2, scales, leaves, out_loss, out_mean):
    """``coord._tree_coord_decode`` under the tokens law ``(n_tok, sigma2)``: coordinate readings ``nodes``
    (n, B), ``readings`` (n, B); losses against ``leaves`` into ``out_loss`` unless empty, posterior means
    into ``out_mean`` (n, D) unless empty."""
    K = scales.shape[0]
    D = (1 << K) - 1
    cs = _coord_scratch(K, nodes.shape[1])
    byd, cnt = cs[8], cs[9]
    want_loss = out_loss.shape[0] > 0
    want_mean = out_mean.shape[0] > 0
    for s in range(nodes.shape[0]):
        _tokens_posterior(nodes[s], readings[s], n_tok, sigma2, scales, cs)
        if want_loss:
            out_loss[s] = _coord_loss(leaves[s], scales, cs)
        if want_mean:
            for j in range(D):
                out_mean[s, j] = 0.0
            for k in range(1, K + 1):
                for t in range(cnt[k - 1]):
                    n = byd[k - 1, t]
                    out_mean[s, n - 1] = _coord_mean_at(n, scales[k - 1], cs)
        _coord_reset(cs[7], byd, cnt)


@njit(cache=True, nogil=True)
def _tokens_dense_decode(V, z, n_tok, sigma2, scales, leaves, out_loss, out_mean):
    """General rows under the tokens law ``(n_tok, sigma2)``: ``V`` (m, r, D) orthonormal rows of the span
    read (zero rows allowed: they carry nothing), ``m = 1`` (shared) or ``m = n``; ``z`` (n, r) the
    readings in that basis (0 on a zero row). Writes losses against ``leaves`` into ``out_loss`` unless
    empty and posterior means into ``out_mean`` (n, D) unless empty. O(2^K r) per sample."""
    K = scales.shape[0]
    D = (1 << K) - 1
    nl = 1 << K
    r = V.shape[1]
    P = np.zeros((K + 1, r))
    Y = np.zeros((nl, r))
    pn = np.zeros(nl)
    qs = np.zeros(nl)
    mass = np.zeros(2 * nl)
    mean = np.zeros(D + 1)
    want_loss = out_loss.shape[0] > 0
    want_mean = out_mean.shape[0] > 0
    rk = 0.0
    for s in range(z.shape[0]):
        Vs = V[s if V.shape[0] > 1 else 0]
        if s == 0 or V.shape[0] > 1:
            _leaf_projections(Vs, scales, P, Y)
            for i in range(nl):
                p = 0.0
                for b in range(r):
                    p += Y[i, b] * Y[i, b]
                pn[i] = p
            rk = 0.0
            for b in range(r):
                nrm = 0.0
                for d in range(D):
                    nrm += Vs[b, d] * Vs[b, d]
                if nrm > 0.5:
                    rk += 1.0
        zz = 0.0
        for b in range(r):
            zz += z[s, b] * z[s, b]
        best = 0
        for i in range(nl):  # upper bounds first; the exact value only where it can matter
            q = 0.0
            for b in range(r):
                q += Y[i, b] * z[s, b]
            qs[i] = q
            mass[nl + i] = _tokens_loglik_bound(pn[i], q, zz, rk, n_tok, sigma2)
            if mass[nl + i] > mass[nl + best]:
                best = i
        top = _tokens_loglik(pn[best], qs[best], zz, rk, n_tok, sigma2)
        for i in range(nl):
            if mass[nl + i] < top - SCREEN:
                mass[nl + i] = NEG_INF  # relative weight below exp(-SCREEN): nothing at double precision
            else:
                mass[nl + i] = _tokens_loglik(pn[i], qs[i], zz, rk, n_tok, sigma2)
        _normalise_leaf_masses(mass, nl)
        _mean_and_error(mass, scales, -1, mean, mean)
        if want_mean:
            for n in range(1, D + 1):
                out_mean[s, n - 1] = mean[n]
        if want_loss:
            _mean_and_error(mass, scales, leaves[s], mean, mean)
            loss = 0.0
            for n in range(1, D + 1):
                loss += mean[n] * mean[n]
            out_loss[s] = loss


@njit(cache=True, nogil=True, inline="always")
def _chain_loss(leaf, nodes, readings, tau, n_tok, sigma2, scales, w):
    """Loss of the exact posterior mean when ``nodes[l]`` is a node of depth ``l + 1`` and each is a child
    of the one before (the path strategy's own routing), in O(L): the closure is the chain itself.
    ``n_tok > 0``: the tokens law ``(n_tok, sigma2)``; else the gaussian likelihood of noise ``tau > 0``.
    ``w = (Z, pl, P, Q)``, four arrays of length ``L``: log subtree masses, P(+ | passes the node),
    prefix sums ``p`` and ``q``."""
    Z, pl, P, Q = w
    K = scales.shape[0]
    L = nodes.shape[0]
    tokens = n_tok > 0
    zz = 0.0
    if tokens:
        p = 0.0
        q = 0.0
        for l in range(L):
            P[l] = p
            Q[l] = q
            a = scales[l]
            p += a * a
            zz += readings[l] * readings[l]
            if l + 1 < L:
                q += a * readings[l] if nodes[l + 1] == 2 * nodes[l] else -a * readings[l]
    inv = 0.0 if tokens else 1.0 / (tau * tau)
    for l in range(L - 1, -1, -1):
        a = scales[l]
        r = readings[l]
        plus_on = l + 1 < L and nodes[l + 1] == 2 * nodes[l]
        minus_on = l + 1 < L and not plus_on
        if tokens:
            lg = (K - l - 1) * LOG2
            pp_ = P[l] + a * a
            up = Z[l + 1] if plus_on else lg + _tokens_loglik(pp_, Q[l] + a * r, zz, L, n_tok, sigma2)
            um = Z[l + 1] if minus_on else lg + _tokens_loglik(pp_, Q[l] - a * r, zz, L, n_tok, sigma2)
        else:  # log mean likelihood against "no reading"; an unread subtree contributes 0
            up = (r * a - 0.5 * a * a) * inv + (Z[l + 1] if plus_on else 0.0)
            um = (-r * a - 0.5 * a * a) * inv + (Z[l + 1] if minus_on else 0.0)
        zl = _lae(up, um)
        Z[l] = zl if tokens else zl - LOG2
        pl[l] = math.exp(up - zl)
    loss = 0.0
    pp = 1.0
    for l in range(L):
        a = scales[l]
        mean = a * pp * (2.0 * pl[l] - 1.0)
        if _path_node(leaf, K, l + 1) == nodes[l]:
            d = mean - _signed_scale(leaf, K, l + 1, scales)
            loss += d * d
        else:  # the true node at this depth is off the chain: posterior mean 0 there
            loss += mean * mean + a * a
        if l + 1 < L:
            pp *= pl[l] if nodes[l + 1] == 2 * nodes[l] else 1.0 - pl[l]
    for k in range(L, K):
        loss += scales[k] * scales[k]
    return loss
