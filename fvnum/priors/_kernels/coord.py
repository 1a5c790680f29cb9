"""Coordinate readings (the coordinate class): the exact posterior of the tree prior by one upward and
one downward pass over the closure of the read nodes, O(closure) per sample.

The work arrays travel as one tuple ``cs = (lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)`` made by
``_coord_scratch``. For a closure node ``n`` at depth ``k``: ``lp, lm, l0``: log-likelihood of its
readings if the path passes ``n`` with sign +1 / -1 / not at all; ``U[n]``: log mean likelihood of the
subtree's readings given the path passes ``n``; ``O[n]``: given it avoids the subtree; ``pplus[n]``:
P(sign +1 | passes n); ``pp[n]``: P(path passes n). ``byd[k-1, :cnt[k-1]]`` lists the closure nodes
of depth ``k`` and ``mark`` flags them. Posterior mean of coordinate ``n``: ``a_k pp[n] (2 pplus[n] - 1)``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from fvnum.priors._kernels.common import LOG2, NEG_INF, TAU0_FALLBACK, _bitlen, _lae, _path_node, _theta_at


@njit(cache=True, nogil=True)
def _coord_scratch(K, B):
    """Work arrays of ``_coord_posterior`` for depth ``K`` and up to ``B`` readings (allocated once per batch)."""
    D = (1 << K) - 1
    return (np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1),
            np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1, dtype=np.int8),
            np.zeros((K, max(B, 1)), dtype=np.int64), np.zeros(K, dtype=np.int64))


@njit(cache=True, nogil=True, inline="always")
def _coord_posterior(nodes, readings, tau, scales, cs):
    """Exact posterior (see ``_coord_pass``). At ``tau = 0`` an observation that no leaf explains (a
    patched run can produce one) is decoded by the ``tau -> 0`` limit, computed at
    ``tau = TAU0_FALLBACK * a_K``: the posterior is uniform over the leaves nearest to the readings."""
    _coord_pass(nodes, readings, tau, scales, cs)
    U, mark, byd, cnt = cs[3], cs[7], cs[8], cs[9]
    if tau == 0 and cnt[0] > 0 and U[1] == NEG_INF:
        _coord_reset(mark, byd, cnt)
        _coord_pass(nodes, readings, TAU0_FALLBACK * scales[scales.shape[0] - 1], scales, cs)


@njit(cache=True, nogil=True, inline="always")
def _coord_pass(nodes, readings, tau, scales, cs):
    """Posterior of the tree prior given readings ``readings[b]`` of nodes ``nodes[b]`` (gaussian
    likelihood with noise ``tau``; ``tau = 0``: exact readings). Only the closure (read nodes and their
    ancestors) is touched: an unread subtree keeps a uniform posterior given its root, hence zero
    posterior mean. The caller reads the posterior from ``cs`` and then calls ``_coord_reset``."""
    _coord_likelihoods(nodes, readings, tau, scales, cs)
    _coord_upward(scales.shape[0], cs)
    _coord_downward(scales.shape[0], cs)


@njit(cache=True, nogil=True)
def _coord_likelihoods(nodes, readings, tau, scales, cs):
    """Mark the closure (listing it by depth) and add each reading's log-likelihood to its node."""
    lp, lm, l0, mark, byd, cnt = cs[0], cs[1], cs[2], cs[7], cs[8], cs[9]
    for k in range(scales.shape[0]):
        cnt[k] = 0
    inv = 1.0 / (tau * tau) if tau > 0 else 0.0
    for b in range(nodes.shape[0]):
        n = nodes[b]
        if n <= 0:
            continue
        k = _bitlen(n)
        m = n
        km = k
        while m >= 1 and mark[m] == 0:
            mark[m] = 1
            lp[m] = 0.0
            lm[m] = 0.0
            l0[m] = 0.0
            byd[km - 1, cnt[km - 1]] = m
            cnt[km - 1] += 1
            m >>= 1
            km -= 1
        a = scales[k - 1]
        r = readings[b]
        if tau > 0:
            lp[n] += (r * a - 0.5 * a * a) * inv
            lm[n] += (-r * a - 0.5 * a * a) * inv
        else:
            if r != a:
                lp[n] = NEG_INF
            if r != -a:
                lm[n] = NEG_INF
            if r != 0.0:
                l0[n] = NEG_INF


@njit(cache=True, nogil=True)
def _coord_upward(K, cs):
    """``U``, ``O`` and ``pplus`` of the closure, children before parents."""
    lp, lm, l0, U, O, pplus, mark, byd, cnt = cs[0], cs[1], cs[2], cs[3], cs[4], cs[5], cs[7], cs[8], cs[9]
    for k in range(K, 0, -1):
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            u1 = 0.0
            u2 = 0.0
            o1 = 0.0
            o2 = 0.0
            if k < K:
                if mark[2 * n]:
                    u1 = U[2 * n]
                    o1 = O[2 * n]
                if mark[2 * n + 1]:
                    u2 = U[2 * n + 1]
                    o2 = O[2 * n + 1]
            qp = lp[n] + u1 + o2
            qm = lm[n] + u2 + o1
            z = _lae(qp, qm)
            U[n] = z - LOG2
            O[n] = l0[n] + o1 + o2
            pplus[n] = math.exp(qp - z) if z > NEG_INF else 0.5


@njit(cache=True, nogil=True)
def _coord_downward(K, cs):
    """``pp`` (P(path passes n)) of the closure, parents before children."""
    pplus, pp, mark, byd, cnt = cs[5], cs[6], cs[7], cs[8], cs[9]
    if cnt[0] > 0:
        pp[1] = 1.0
    for k in range(1, K):
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            if mark[2 * n]:
                pp[2 * n] = pp[n] * pplus[n]
            if mark[2 * n + 1]:
                pp[2 * n + 1] = pp[n] * (1.0 - pplus[n])


@njit(cache=True, nogil=True)
def _coord_reset(mark, byd, cnt):
    for k in range(cnt.shape[0]):
        for t in range(cnt[k]):
            mark[byd[k, t]] = 0


@njit(cache=True, nogil=True, inline="always")
def _coord_done(cs):
    """Clear the marks of a finished ``_coord_posterior`` (``_coord_reset`` on the tuple)."""
    _coord_reset(cs[7], cs[8], cs[9])


@njit(cache=True, nogil=True, inline="always")
def _coord_mean_at(n, a, cs):
    """Posterior mean of closure node ``n`` (scale ``a``): ``a pp[n] (2 pplus[n] - 1)``."""
    return a * cs[6][n] * (2.0 * cs[5][n] - 1.0)


@njit(cache=True, nogil=True)
def _coord_loss(leaf, scales, cs):
    """``||E[theta | readings] - theta_leaf||^2`` from a finished ``_coord_posterior``: O(closure + K)."""
    mark, byd, cnt = cs[7], cs[8], cs[9]
    K = scales.shape[0]
    loss = 0.0
    for k in range(1, K + 1):
        a = scales[k - 1]
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            d = _coord_mean_at(n, a, cs) - _theta_at(leaf, n, K, scales)
            loss += d * d
        if mark[_path_node(leaf, K, k)] == 0:  # posterior mean 0 off the closure
            loss += a * a
    return loss


@njit(cache=True, nogil=True, inline="always")
def _coord_write(s, leaves, scales, cs, out_loss, out_mean):
    """Sample ``s``'s loss (``out_loss[s]``, unless ``out_loss`` is empty) and posterior mean (``out_mean[s]``, unless
    empty) from the posterior in the scratch ``cs``: the nodes read carry their means, the others 0."""
    if out_loss.shape[0] > 0:
        out_loss[s] = _coord_loss(leaves[s], scales, cs)
    if out_mean.shape[0] > 0:
        byd, cnt = cs[8], cs[9]
        for j in range(out_mean.shape[1]):
            out_mean[s, j] = 0.0
        for k in range(1, scales.shape[0] + 1):
            for t in range(cnt[k - 1]):
                n = byd[k - 1, t]
                out_mean[s, n - 1] = _coord_mean_at(n, scales[k - 1], cs)


@njit(cache=True, nogil=True, inline="always")
def _posterior_norm2(scales, cs):
    """``||E[theta | readings]||^2`` from a finished ``_coord_posterior``."""
    byd, cnt = cs[8], cs[9]
    m2 = 0.0
    for k in range(1, scales.shape[0] + 1):
        for t in range(cnt[k - 1]):
            v = _coord_mean_at(byd[k - 1, t], scales[k - 1], cs)
            m2 += v * v
    return m2


@njit(cache=True, nogil=True, inline="always")
def _sample_leaf(u, scales, cs):
    """A leaf drawn from a finished ``_coord_posterior`` with uniforms ``u`` (K,): descend by P(+ | node)."""
    pplus, mark = cs[5], cs[7]
    K = scales.shape[0]
    n = 1
    for k in range(K):
        q = pplus[n] if mark[n] else 0.5
        n = 2 * n + (0 if u[k] < q else 1)
    return n - (1 << K)


@njit(cache=True, nogil=True)
def _tree_coord_decode(nodes, readings, tau, scales, leaves, out_loss, out_mean):
    """Batch of coordinate readings: ``nodes`` (n, B) int64, ``readings`` (n, B). Writes per-sample
    losses against ``leaves`` into ``out_loss`` (n,) unless it is empty, and posterior means into
    ``out_mean`` (n, D) unless it is empty."""
    cs = _coord_scratch(scales.shape[0], nodes.shape[1])
    for s in range(nodes.shape[0]):
        _coord_posterior(nodes[s], readings[s], tau, scales, cs)
        _coord_write(s, leaves, scales, cs, out_loss, out_mean)
        _coord_done(cs)
