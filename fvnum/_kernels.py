"""Numba kernels (THEORY.md sections 2, 6, 8). No validation, no random numbers, no allocation inside
the per-sample loops: work arrays are allocated once per call, outputs are written into ``out`` arrays.
Each public kernel has a plain numpy twin in ``_reference.py``; tests hold them equal.

Tree conventions (THEORY.md section 6): heap nodes ``1 .. D = 2^K - 1``; node ``n`` has depth
``k = bitlen(n)``; leaf ``i`` takes sign ``s_k = -1`` iff bit ``K - k`` of ``i`` is set; its depth-``k``
path node is ``(i >> (K - k + 1)) | (1 << (k - 1))``; in heap numbering leaf ``i`` is node ``2^K + i``.
A node number ``0`` in a reading list means "no reading" (an idle channel) and is skipped.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

LOG2 = math.log(2.0)
NEG_INF = -np.inf
TAU0_FALLBACK = 1e-2  # tau -> 0 limit for observations of zero likelihood, in units of a_K
MASS_TOL = 1e-12  # outcome masses below this (contributing at most MASS_TOL sum a_k^2) are dropped


# --- small helpers (inlined by numba) ------------------------------------------------------------
@njit(cache=True, nogil=True)
def _bitlen(n):
    k = 0
    while n > 0:
        n >>= 1
        k += 1
    return k


@njit(cache=True, nogil=True)
def _lae(a, b):
    """log(exp(a) + exp(b)), exact for -inf arguments."""
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@njit(cache=True, nogil=True)
def _theta_at(leaf, n, K, scales):
    """Coordinate ``theta_n`` of leaf ``leaf``: ``a_k s_k`` on its path, else 0."""
    k = _bitlen(n)
    if ((leaf >> (K - k + 1)) | (1 << (k - 1))) != n:
        return 0.0
    if (leaf >> (K - k)) & 1:
        return -scales[k - 1]
    return scales[k - 1]


# --- coordinate readings: exact posterior by one upward and one downward pass ----------------------
@njit(cache=True, nogil=True)
def _coord_scratch(K, B):
    """Work arrays of ``_coord_posterior`` for depth ``K`` and up to ``B`` readings (allocated once per batch)."""
    D = (1 << K) - 1
    return (np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1),
            np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1, dtype=np.int8),
            np.zeros((K, max(B, 1)), dtype=np.int64), np.zeros(K, dtype=np.int64))


@njit(cache=True, nogil=True)
def _coord_posterior(nodes, readings, tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt):
    """Exact posterior (see ``_coord_pass``). At ``tau = 0`` an observation that no leaf explains (a
    patched run can produce one) is decoded by the ``tau -> 0`` limit, computed at
    ``tau = TAU0_FALLBACK * a_K``: the posterior is uniform over the leaves nearest to the readings."""
    _coord_pass(nodes, readings, tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
    if tau == 0 and cnt[0] > 0 and U[1] == NEG_INF:
        _coord_reset(mark, byd, cnt)
        _coord_pass(nodes, readings, TAU0_FALLBACK * scales[scales.shape[0] - 1], scales,
                    lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)


@njit(cache=True, nogil=True)
def _coord_pass(nodes, readings, tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt):
    """Posterior of the tree prior given readings ``readings[b]`` of nodes ``nodes[b]`` (gaussian
    likelihood with noise ``tau``; ``tau = 0``: exact readings).

    Only the closure (read nodes and their ancestors) is touched: an unread subtree keeps a uniform
    posterior given its root, hence zero posterior mean. For a closure node ``n`` at depth ``k``:
    ``lp, lm, l0``: log-likelihood of its readings if the path passes ``n`` with sign +1 / -1 / not at all;
    ``U[n]``: log mean likelihood of the subtree's readings given the path passes ``n``; ``O[n]``: given
    it avoids the subtree; ``pplus[n]``: P(sign +1 | passes n); ``pp[n]``: P(path passes n).
    Afterwards ``byd[k-1, :cnt[k-1]]`` lists the closure nodes of depth ``k`` and ``mark`` flags them;
    the caller reads the posterior and then calls ``_coord_reset``.
    Posterior mean of coordinate ``n``: ``a_k pp[n] (2 pplus[n] - 1)``.
    """
    K = scales.shape[0]
    for k in range(K):
        cnt[k] = 0
    inv = 1.0 / (tau * tau) if tau > 0 else 0.0
    for b in range(nodes.shape[0]):
        n = nodes[b]
        if n <= 0:
            continue
        k = _bitlen(n)
        if mark[n] == 0:
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
    # upward pass: children before parents
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
    # downward pass: parents before children
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


@njit(cache=True, nogil=True)
def _coord_loss(leaf, scales, pplus, pp, mark, byd, cnt):
    """``||E[theta | readings] - theta_leaf||^2`` from a finished ``_coord_posterior``: O(closure + K)."""
    K = scales.shape[0]
    loss = 0.0
    for k in range(1, K + 1):
        a = scales[k - 1]
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            d = a * pp[n] * (2.0 * pplus[n] - 1.0) - _theta_at(leaf, n, K, scales)
            loss += d * d
        n = (leaf >> (K - k + 1)) | (1 << (k - 1))
        if mark[n] == 0:  # posterior mean 0 off the closure
            loss += a * a
    return loss


@njit(cache=True, nogil=True)
def _tree_coord_decode(nodes, readings, tau, scales, leaves, out_loss, out_mean):
    """Batch of coordinate readings: ``nodes`` (n, B) int64, ``readings`` (n, B). Writes per-sample
    losses against ``leaves`` into ``out_loss`` (n,) unless it is empty, and posterior means into
    ``out_mean`` (n, D) unless it is empty."""
    K = scales.shape[0]
    D = (1 << K) - 1
    B = nodes.shape[1]
    lp, lm, l0, U, O, pplus, pp, mark, byd, cnt = _coord_scratch(K, B)
    want_loss = out_loss.shape[0] > 0
    want_mean = out_mean.shape[0] > 0
    for s in range(nodes.shape[0]):
        _coord_posterior(nodes[s], readings[s], tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
        if want_loss:
            out_loss[s] = _coord_loss(leaves[s], scales, pplus, pp, mark, byd, cnt)
        if want_mean:
            for j in range(D):
                out_mean[s, j] = 0.0
            for k in range(1, K + 1):
                for t in range(cnt[k - 1]):
                    n = byd[k - 1, t]
                    out_mean[s, n - 1] = scales[k - 1] * pp[n] * (2.0 * pplus[n] - 1.0)
        _coord_reset(mark, byd, cnt)


# --- the path strategy, fused: routing, reading, optional key patching, decoding -----------------
@njit(cache=True, nogil=True)
def _tree_path_sim(leaves, noise, stat, tau, scales, donors, dstat, patch_layer, informed,
                   out_loss, out_phi, out_nodes):
    """Path strategy (THEORY.md section 6) for ``L = out_phi.shape[1]`` layers of width 1.

    Layer ``l`` reads the depth-``l`` node of the path decoded so far (sign of each reading, a tie
    counts as +1). Channel: ``stat`` (n, D) non-empty means the tokens channel (reading = ``stat[node]``),
    else the gaussian channel (reading = ``theta_node + tau * noise[s, l]``). Decoding: exact posterior
    with gaussian likelihood of noise ``tau``.
    Key patching (section 8) when ``patch_layer >= 1``: the donor (leaf ``donors[s]``, same noise, or
    its statistic ``dstat``) runs its own path; at layer ``patch_layer`` the target reads the donor's
    node but keeps routing by its own readings. The decoder assumes the target's own routing
    (``informed = False``) or knows the nodes actually read (``informed = True``).
    Writes ``out_loss`` (n,), ``out_phi`` (n, L) readings and ``out_nodes`` (n, L) routed nodes.
    """
    K = scales.shape[0]
    L = out_phi.shape[1]
    tokens = stat.shape[0] > 0
    lp, lm, l0, U, O, pplus, pp, mark, byd, cnt = _coord_scratch(K, L)
    actual = np.zeros(L, dtype=np.int64)
    for s in range(leaves.shape[0]):
        leaf = leaves[s]
        node = 1
        dnode = 1
        for l in range(L):
            act = node
            if patch_layer >= 1 and l < patch_layer:
                if l == patch_layer - 1:
                    act = dnode
                else:
                    if tokens:
                        dr = dstat[s, dnode - 1]
                    else:
                        dr = _theta_at(donors[s], dnode, K, scales) + tau * noise[s, l]
                    dnode = 2 * dnode + (1 if dr < 0 else 0)
            if tokens:
                r = stat[s, act - 1]
            else:
                r = _theta_at(leaf, act, K, scales) + tau * noise[s, l]
            out_phi[s, l] = r
            out_nodes[s, l] = node
            actual[l] = act
            node = 2 * node + (1 if r < 0 else 0)
        if informed:
            _coord_posterior(actual, out_phi[s], tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
        else:
            _coord_posterior(out_nodes[s], out_phi[s], tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
        out_loss[s] = _coord_loss(leaf, scales, pplus, pp, mark, byd, cnt)
        _coord_reset(mark, byd, cnt)


# --- general (unit) rows: enumerate the 2^K leaves, O(2^K B) per sample ---------------------------
@njit(cache=True, nogil=True)
def _leaf_projections(W, scales, P, V):
    """``V[i] = W theta_i`` for every leaf, by incremental prefix sums ``P`` (K+1, B): O(2^K B)."""
    K = scales.shape[0]
    B = W.shape[0]
    for i in range(1 << K):
        start = 1 if i == 0 else K - _bitlen(i ^ (i - 1)) + 1
        for k in range(start, K + 1):
            n = (i >> (K - k + 1)) | (1 << (k - 1))
            v = -scales[k - 1] if (i >> (K - k)) & 1 else scales[k - 1]
            for b in range(B):
                P[k, b] = P[k - 1, b] + v * W[b, n - 1]
        for b in range(B):
            V[i, b] = P[K, b]


@njit(cache=True, nogil=True)
def _leaf_posterior(V, phi, tau, tol, fallback, mass):
    """Leaf posterior from projections ``V`` (2^K, B) and readings ``phi``; writes the posterior mass
    of every heap node (leaves at ``2^K + i``) into ``mass`` (2^(K+1),). ``tau = 0``: a leaf is
    consistent when every reading matches within ``tol (1 + |phi_b|)``; when none is, the ``tau -> 0``
    limit is computed at ``tau = fallback``."""
    nl = V.shape[0]
    _leaf_loglik(V, phi, tau, tol, mass)
    mx = NEG_INF
    for i in range(nl):
        if mass[nl + i] > mx:
            mx = mass[nl + i]
    if mx == NEG_INF:  # only at tau = 0: no leaf explains the readings
        _leaf_loglik(V, phi, fallback, tol, mass)
        for i in range(nl):
            if mass[nl + i] > mx:
                mx = mass[nl + i]
    total = 0.0
    for i in range(nl):
        w = math.exp(mass[nl + i] - mx) if mass[nl + i] > NEG_INF else 0.0
        mass[nl + i] = w
        total += w
    for i in range(nl):
        mass[nl + i] /= total
    for h in range(nl - 1, 0, -1):
        mass[h] = mass[2 * h] + mass[2 * h + 1]


@njit(cache=True, nogil=True)
def _leaf_loglik(V, phi, tau, tol, mass):
    nl = V.shape[0]
    B = V.shape[1]
    for i in range(nl):
        ll = 0.0
        for b in range(B):
            d = phi[b] - V[i, b]
            if tau > 0:
                ll -= d * d
            elif abs(d) > tol * (1.0 + abs(phi[b])):
                ll = NEG_INF
                break
        if tau > 0:
            ll *= 0.5 / (tau * tau)
        mass[nl + i] = ll


@njit(cache=True, nogil=True)
def _tree_dense_decode(W, phi, tau, tol, scales, leaves, out_loss, out_mean):
    """Batch of general readings ``phi`` (n, B) through rows ``W`` (m, B, D), ``m = 1`` (one design
    for all samples) or ``m = n`` (per-sample rows). Writes losses against ``leaves`` into
    ``out_loss`` unless empty and posterior means into ``out_mean`` (n, D) unless empty."""
    K = scales.shape[0]
    D = (1 << K) - 1
    nl = 1 << K
    B = W.shape[1]
    P = np.zeros((K + 1, B))
    V = np.zeros((nl, B))
    mass = np.zeros(2 * nl)
    mean = np.zeros(D + 1)
    want_loss = out_loss.shape[0] > 0
    want_mean = out_mean.shape[0] > 0
    for s in range(phi.shape[0]):
        if s == 0 or W.shape[0] > 1:
            _leaf_projections(W[s if W.shape[0] > 1 else 0], scales, P, V)
        _leaf_posterior(V, phi[s], tau, tol, TAU0_FALLBACK * scales[K - 1], mass)
        for n in range(1, D + 1):
            mean[n] = scales[_bitlen(n) - 1] * (mass[2 * n] - mass[2 * n + 1])
        if want_mean:
            for n in range(1, D + 1):
                out_mean[s, n - 1] = mean[n]
        if want_loss:
            leaf = leaves[s]
            for k in range(1, K + 1):  # mean - theta, in place
                n = (leaf >> (K - k + 1)) | (1 << (k - 1))
                mean[n] -= -scales[k - 1] if (leaf >> (K - k)) & 1 else scales[k - 1]
            loss = 0.0
            for n in range(1, D + 1):
                loss += mean[n] * mean[n]
            out_loss[s] = loss


@njit(cache=True, nogil=True)
def _tree_dense_value_grad(W, noise, leaves, tau, scales, out_grad):
    """Sum over samples of the loss of the fixed design ``W`` (B, D) under the gaussian channel
    (``phi = W theta + tau xi``, exact Bayes decoder), and its gradient with respect to ``W``,
    added into ``out_grad`` (B, D). ``tau > 0``. With ``w_i`` the leaf posterior, ``m`` the posterior
    mean, ``e = m - theta``, ``r_i = phi - W theta_i`` and ``g_i = 2 w_i <e, theta_i - m>``:
    ``d loss / d W = -(1/tau^2) sum_i g_i r_i (theta - theta_i)^T``. O(2^K B + D B) per sample."""
    K = scales.shape[0]
    D = (1 << K) - 1
    nl = 1 << K
    B = W.shape[0]
    inv = 1.0 / (tau * tau)
    P = np.zeros((K + 1, B))
    V = np.zeros((nl, B))
    mass = np.zeros(2 * nl)
    mean = np.zeros(D + 1)
    e = np.zeros(D + 1)
    phi = np.zeros(B)
    H = np.zeros((2 * nl, B))
    dots = np.zeros(K + 1)
    gr = np.zeros(B)
    _leaf_projections(W, scales, P, V)
    total = 0.0
    for s in range(leaves.shape[0]):
        leaf = leaves[s]
        for b in range(B):
            phi[b] = tau * noise[s, b]
        for k in range(1, K + 1):
            n = (leaf >> (K - k + 1)) | (1 << (k - 1))
            t = -scales[k - 1] if (leaf >> (K - k)) & 1 else scales[k - 1]
            for b in range(B):
                phi[b] += t * W[b, n - 1]
        _leaf_posterior(V, phi, tau, 0.0, TAU0_FALLBACK * scales[K - 1], mass)
        loss = 0.0
        em = 0.0
        for n in range(1, D + 1):
            mean[n] = scales[_bitlen(n) - 1] * (mass[2 * n] - mass[2 * n + 1])
            e[n] = mean[n]
        for k in range(1, K + 1):
            n = (leaf >> (K - k + 1)) | (1 << (k - 1))
            e[n] -= -scales[k - 1] if (leaf >> (K - k)) & 1 else scales[k - 1]
        for n in range(1, D + 1):
            loss += e[n] * e[n]
            em += e[n] * mean[n]
        total += loss
        for b in range(B):
            gr[b] = 0.0
        for i in range(nl):
            start = 1 if i == 0 else K - _bitlen(i ^ (i - 1)) + 1
            for k in range(start, K + 1):
                n = (i >> (K - k + 1)) | (1 << (k - 1))
                v = -scales[k - 1] if (i >> (K - k)) & 1 else scales[k - 1]
                dots[k] = dots[k - 1] + v * e[n]
            g = 2.0 * mass[nl + i] * (dots[K] - em)
            for b in range(B):
                h = g * (phi[b] - V[i, b])
                H[nl + i, b] = h
                gr[b] += h
        for h in range(nl - 1, 0, -1):
            for b in range(B):
                H[h, b] = H[2 * h, b] + H[2 * h + 1, b]
        # + (1/tau^2) sum_i g_i r_i theta_i^T: column n gets a_k (H[2n] - H[2n+1])
        for n in range(1, D + 1):
            a = scales[_bitlen(n) - 1]
            for b in range(B):
                out_grad[b, n - 1] += inv * a * (H[2 * n, b] - H[2 * n + 1, b])
        # - (1/tau^2) (sum_i g_i r_i) theta^T
        for k in range(1, K + 1):
            n = (leaf >> (K - k + 1)) | (1 << (k - 1))
            t = -scales[k - 1] if (leaf >> (K - k)) & 1 else scales[k - 1]
            for b in range(B):
                out_grad[b, n - 1] -= inv * gr[b] * t
    return total


# --- greedy one-step lookahead over coordinates ----------------------------------------------------
@njit(cache=True, nogil=True)
def _greedy_coord_scores(nodes, readings, tau, scales, gh_x, gh_w, out):
    """For each sample and each candidate node ``n``: ``E ||E[theta | readings, next reading of n]||^2``
    (maximising it minimises the expected posterior loss after one more reading of ``n``), written to
    ``out`` (n, D). Exact up to the Gauss-Hermite rule (``gh_x``, ``gh_w`` normalised to sum 1) for
    the 1-d integral over the new reading; ``tau = 0`` is exact.

    With ``T(m) = sum_{leaves under m} w_i theta_i`` the three outcomes of reading ``n`` (path passes
    with +1, with -1, avoids n) have vectors ``T(2n), T(2n+1), T(1) - T(n)``; their Gram matrix follows
    from O(D) recursions: ``|V(m)|^2`` (subtree part, upward), ``Q(m) = pi(m).T(1)`` (prefix part, downward).
    """
    K = scales.shape[0]
    D = (1 << K) - 1
    B = nodes.shape[1]
    lp, lm, l0, U, O, pplus, pp, mark, byd, cnt = _coord_scratch(K, B)
    P = np.zeros(D + 1)  # P(path passes n), every node
    Wp = np.zeros(D + 1)  # P(passes n with +1)
    Wm = np.zeros(D + 1)
    Vsq = np.zeros(2 * D + 2)
    Q = np.zeros(2 * D + 2)
    A = np.zeros(K + 1)  # A_k = sum_{k' <= k} a_k'^2
    for k in range(1, K + 1):
        A[k] = A[k - 1] + scales[k - 1] ** 2
    G = np.zeros((3, 3))
    W3 = np.zeros(3)
    v3 = np.zeros(3)
    r3 = np.zeros(3)
    nq = gh_x.shape[0]
    for s in range(nodes.shape[0]):
        _coord_posterior(nodes[s], readings[s], tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
        P[1] = 1.0
        for n in range(1, D + 1):
            pl = pplus[n] if mark[n] else 0.5
            Wp[n] = P[n] * pl
            Wm[n] = P[n] * (1.0 - pl)
            if 2 * n <= D:
                P[2 * n] = Wp[n]
                P[2 * n + 1] = Wm[n]
        for n in range(D, 0, -1):
            a = scales[_bitlen(n) - 1]
            d = Wp[n] - Wm[n]
            Vsq[n] = a * a * d * d
            if 2 * n <= D:
                Vsq[n] += Vsq[2 * n] + Vsq[2 * n + 1]
        Q[1] = 0.0
        for n in range(1, D + 1):
            a = scales[_bitlen(n) - 1]
            q = a * a * (Wp[n] - Wm[n])
            Q[2 * n] = Q[n] + q  # children may be leaves (index up to 2D + 1)
            Q[2 * n + 1] = Q[n] - q
        T1sq = Vsq[1]
        for n in range(1, D + 1):
            k = _bitlen(n)
            a = scales[k - 1]
            wp = Wp[n]
            wm = Wm[n]
            vp = Vsq[2 * n] if 2 * n <= D else 0.0
            vm = Vsq[2 * n + 1] if 2 * n <= D else 0.0
            gpp = wp * wp * A[k] + vp
            gmm = wm * wm * A[k] + vm
            gpm = wp * wm * (A[k - 1] - a * a)
            tp1 = wp * Q[2 * n] + vp
            tm1 = wm * Q[2 * n + 1] + vm
            G[0, 0] = gpp
            G[1, 1] = gmm
            G[0, 1] = gpm
            G[1, 0] = gpm
            G[0, 2] = tp1 - gpp - gpm
            G[2, 0] = G[0, 2]
            G[1, 2] = tm1 - gpm - gmm
            G[2, 1] = G[1, 2]
            G[2, 2] = T1sq - 2.0 * (tp1 + tm1) + gpp + gmm + 2.0 * gpm
            W3[0] = wp
            W3[1] = wm
            W3[2] = max(0.0, 1.0 - P[n])
            v3[0] = a
            v3[1] = -a
            v3[2] = 0.0
            score = 0.0
            if tau == 0:
                for o in range(3):
                    if W3[o] > 0:
                        score += G[o, o] / W3[o]
            else:
                for o in range(3):
                    if W3[o] <= 0:
                        continue
                    acc = 0.0
                    for q in range(nq):
                        x = v3[o] + tau * gh_x[q]
                        # outcome weights W_o' exp(-(x - v_o')^2 / (2 tau^2)), relative to their max
                        mx = NEG_INF
                        for o2 in range(3):
                            if W3[o2] > 0:
                                r3[o2] = -0.5 * ((x - v3[o2]) / tau) ** 2
                                if r3[o2] > mx:
                                    mx = r3[o2]
                        for o2 in range(3):
                            r3[o2] = math.exp(r3[o2] - mx) if W3[o2] > 0 else 0.0
                        num = 0.0
                        den = 0.0
                        for o2 in range(3):
                            den += W3[o2] * r3[o2]
                            for o3 in range(3):
                                num += r3[o2] * G[o2, o3] * r3[o3]
                        acc += gh_w[q] * num / (den * den)
                    score += W3[o] * acc
            out[s, n - 1] = score
        _coord_reset(mark, byd, cnt)


# --- greedy one-step lookahead over unit rows ------------------------------------------------------
@njit(cache=True, nogil=True)
def _dense_objective(w, live, m, p, logp, pn, pa, tau, gh_x, gh_w, vv, mvec, seen, stamp, pi, nz, dv, grad):
    """``F(w) = E ||E[theta | readings, phi = w.theta + tau z]||^2`` under the leaf posterior ``p`` (m,)
    (``logp = log p``) on the live leaves ``live`` (path nodes ``pn``, signed amplitudes ``pa``), with Gauss-Hermite over
    ``z``; the gradient in ``w`` is written to ``grad``. ``seen``/``stamp`` mark the nodes summed once.
    Posterior terms below ``exp(-40)`` of the largest are dropped (relative effect < 1e-17); ``nz``
    lists the others. O(m^2 + m |nz| K Q). Returns ``(F, stamp)``."""
    K = pn.shape[1]
    inv = 1.0 / (tau * tau)
    for a in range(m):
        j = live[a]
        v = 0.0
        for k in range(K):
            v += pa[j, k] * w[pn[j, k] - 1]
        vv[a] = v
        dv[a] = 0.0
    F = 0.0
    for a in range(m):
        for q in range(gh_x.shape[0]):
            x = vv[a] + tau * gh_x[q]
            wq = p[a] * gh_w[q]
            mx = NEG_INF
            for b in range(m):
                pi[b] = logp[b] - 0.5 * (x - vv[b]) ** 2 * inv
                if pi[b] > mx:
                    mx = pi[b]
            tot = 0.0
            n_nz = 0
            for b in range(m):
                if pi[b] - mx > -40.0:
                    pi[b] = math.exp(pi[b] - mx)
                    tot += pi[b]
                    nz[n_nz] = b
                    n_nz += 1
            stamp += 1
            for t in range(n_nz):
                b = nz[t]
                pi[b] /= tot
                j = live[b]
                for k in range(K):
                    n = pn[j, k]
                    if seen[n] != stamp:
                        seen[n] = stamp
                        mvec[n] = 0.0
            for t in range(n_nz):
                b = nz[t]
                j = live[b]
                for k in range(K):
                    mvec[pn[j, k]] += pi[b] * pa[j, k]
            stamp += 1
            f = 0.0
            for t in range(n_nz):
                j = live[nz[t]]
                for k in range(K):
                    n = pn[j, k]
                    if seen[n] != stamp:
                        seen[n] = stamp
                        f += mvec[n] * mvec[n]
            F += wq * f
            sc = 0.0
            for t in range(n_nz):
                b = nz[t]
                j = live[b]
                tb = 0.0
                for k in range(K):
                    tb += pa[j, k] * mvec[pn[j, k]]
                c = 2.0 * pi[b] * (tb - f)
                r = (x - vv[b]) * inv
                dv[b] += wq * c * r
                sc += c * r
            dv[a] -= wq * sc
    for i in range(grad.shape[0]):
        grad[i] = 0.0
    for b in range(m):
        j = live[b]
        for k in range(K):
            grad[pn[j, k] - 1] += dv[b] * pa[j, k]
    return F, stamp


@njit(cache=True, nogil=True)
def _greedy_dense_rows(Wh, phi, tau, scales, gh_x, gh_w, extra, n_iter, n_ascend, live_tol, out, out_value):
    """Greedy one-step lookahead over unit rows: for each sample, the unit row ``w`` maximising
    ``F(w) = E ||posterior mean after reading w.theta + tau z||^2`` (minimising the expected loss after
    one more reading) given readings ``phi`` (n, l) of rows ``Wh`` (n, l, D), by projected gradient
    ascent on the sphere from several starts: the top principal direction of the posterior, the
    difference of the two most probable leaves, the coordinate of largest posterior variance, and the
    shared directions ``extra`` (R, D); every start is scored and the best ``n_ascend`` are refined
    for up to ``n_iter`` steps. Leaves of posterior weight below ``live_tol`` times the largest
    are left out of the lookahead (not of any decoder). Writes ``out`` (n, D) and ``F`` to ``out_value``."""
    K = scales.shape[0]
    D = (1 << K) - 1
    nl = 1 << K
    l = Wh.shape[1]
    P = np.zeros((K + 1, max(l, 1)))
    V = np.zeros((nl, max(l, 1)))
    mass = np.zeros(2 * nl)
    pn = np.zeros((nl, K), dtype=np.int64)
    pa = np.zeros((nl, K))
    for i in range(nl):
        for k in range(1, K + 1):
            pn[i, k - 1] = (i >> (K - k + 1)) | (1 << (k - 1))
            pa[i, k - 1] = -scales[k - 1] if (i >> (K - k)) & 1 else scales[k - 1]
    live = np.zeros(nl, dtype=np.int64)
    p = np.zeros(nl)
    logp = np.zeros(nl)
    vv = np.zeros(nl)
    pi = np.zeros(nl)
    nz = np.zeros(nl, dtype=np.int64)
    dv = np.zeros(nl)
    mvec = np.zeros(D + 1)
    seen = np.zeros(D + 1, dtype=np.int64)
    stamp = 0
    w = np.zeros(D)
    wt = np.zeros(D)
    g = np.zeros(D)
    gt = np.zeros(D)
    best = np.zeros(D)
    x = np.zeros(D)
    y = np.zeros(D)
    mu = np.zeros(D)
    n_starts = 3 + extra.shape[0]
    fstart = np.zeros(n_starts)
    wstart = np.zeros((n_starts, D))
    for s in range(phi.shape[0]):
        if l > 0:
            _leaf_projections(Wh[s], scales, P, V)
            _leaf_posterior(V, phi[s], tau, 1e-9, TAU0_FALLBACK * scales[K - 1], mass)
        else:
            for i in range(nl):
                mass[nl + i] = 1.0 / nl
        top = 0.0
        for i in range(nl):
            top = max(top, mass[nl + i])
        m = 0
        tot = 0.0
        for i in range(nl):
            if mass[nl + i] >= live_tol * top:
                live[m] = i
                p[m] = mass[nl + i]
                tot += p[m]
                m += 1
        for a in range(m):
            p[a] /= tot
            logp[a] = math.log(p[a])
        # posterior mean of the live leaves
        for d in range(D):
            mu[d] = 0.0
        for a in range(m):
            for k in range(K):
                mu[pn[live[a], k] - 1] += p[a] * pa[live[a], k]
        best_F = NEG_INF
        for d in range(D):
            best[d] = 0.0
        best[0] = 1.0
        if m == 1 or tau == 0:  # nothing left to learn, or any generic row will do
            for d in range(D):
                best[d] = extra[0, d] if extra.shape[0] > 0 else (1.0 if d == 0 else 0.0)
            best_F = NEG_INF
            n_run = 0
        else:
            n_run = n_starts
        for r in range(n_run):  # build the starts and score them
            for d in range(D):
                w[d] = 0.0
            if r == 0:  # top principal direction: power iteration in the span of the live leaves
                for d in range(D):
                    x[d] = 1.0 + 0.01 * d
                for it in range(30):
                    for d in range(D):
                        y[d] = 0.0
                    mux = 0.0
                    for d in range(D):
                        mux += mu[d] * x[d]
                    for a in range(m):
                        t = 0.0
                        for k in range(K):
                            t += pa[live[a], k] * x[pn[live[a], k] - 1]
                        for k in range(K):
                            y[pn[live[a], k] - 1] += p[a] * t * pa[live[a], k]
                    nrm = 0.0
                    for d in range(D):
                        y[d] -= mu[d] * mux
                        nrm += y[d] * y[d]
                    nrm = math.sqrt(nrm)
                    if nrm == 0:
                        break
                    for d in range(D):
                        x[d] = y[d] / nrm
                for d in range(D):
                    w[d] = x[d]
            elif r == 1:  # separate the two most probable leaves
                i1 = 0
                i2 = -1
                for a in range(1, m):
                    if p[a] > p[i1]:
                        i1 = a
                for a in range(m):
                    if a != i1 and (i2 < 0 or p[a] > p[i2]):
                        i2 = a
                for k in range(K):
                    w[pn[live[i1], k] - 1] += pa[live[i1], k]
                    w[pn[live[i2], k] - 1] -= pa[live[i2], k]
            elif r == 2:  # coordinate of largest posterior variance
                bv = -1.0
                bn = 0
                for d in range(D):
                    x[d] = 0.0
                for a in range(m):
                    for k in range(K):
                        x[pn[live[a], k] - 1] += p[a] * pa[live[a], k] ** 2
                for d in range(D):
                    if x[d] - mu[d] ** 2 > bv:
                        bv = x[d] - mu[d] ** 2
                        bn = d
                w[bn] = 1.0
            else:
                for d in range(D):
                    w[d] = extra[r - 3, d]
            nrm = 0.0
            for d in range(D):
                nrm += w[d] * w[d]
            nrm = math.sqrt(nrm)
            if nrm == 0:
                fstart[r] = NEG_INF
                continue
            for d in range(D):
                w[d] /= nrm
            Fs, stamp = _dense_objective(w, live, m, p, logp, pn, pa, tau, gh_x, gh_w, vv, mvec, seen, stamp, pi, nz, dv, g)
            fstart[r] = Fs
            for d in range(D):
                wstart[r, d] = w[d]
        for rr in range(min(n_ascend, n_run)):  # ascend from the best-scoring starts
            r = 0
            for r2 in range(n_run):
                if fstart[r2] > fstart[r]:
                    r = r2
            if fstart[r] == NEG_INF:
                break
            fstart[r] = NEG_INF
            for d in range(D):
                w[d] = wstart[r, d]
            F, stamp = _dense_objective(w, live, m, p, logp, pn, pa, tau, gh_x, gh_w, vv, mvec, seen, stamp, pi, nz, dv, g)
            eta = 0.5
            for it in range(n_iter):
                gw = 0.0
                for d in range(D):
                    gw += g[d] * w[d]
                gn = 0.0
                for d in range(D):
                    g[d] -= gw * w[d]
                    gn += g[d] * g[d]
                gn = math.sqrt(gn)
                if gn < 1e-12:
                    break
                nrm = 0.0
                for d in range(D):
                    wt[d] = w[d] + eta * g[d] / gn
                    nrm += wt[d] * wt[d]
                nrm = math.sqrt(nrm)
                for d in range(D):
                    wt[d] /= nrm
                Ft, stamp = _dense_objective(wt, live, m, p, logp, pn, pa, tau, gh_x, gh_w, vv, mvec, seen, stamp, pi, nz, dv, gt)
                if Ft > F:
                    F = Ft
                    for d in range(D):
                        w[d] = wt[d]
                        g[d] = gt[d]
                    eta = min(1.0, 1.5 * eta)
                else:
                    eta *= 0.5
                    if eta < 1e-3:
                        break
            if F > best_F:
                best_F = F
                for d in range(D):
                    best[d] = w[d]
        for d in range(D):
            out[s, d] = best[d]
        out_value[s] = best_F


# --- the noisy Bellman recursion over leaf weights (THEORY.md section 3, under noise) ---------------
# A belief is a weight vector ``p`` over the ``2^K`` leaves. Reading node ``n`` sorts the leaves into
# three classes (path passes ``n`` with +1, with -1, avoids ``n``: ``cls[n-1, leaf]`` in 0, 1, 2) of
# means ``+a_k, -a_k, 0``. The reading's law is a mixture of three gaussians; the integral over it is a
# Gauss-Hermite rule per component: reading ``phi = mean_o + tau x_q``, weight ``W_o w_q``, likelihood
# ratios ``lik[n-1, o, q, c]`` of the classes at that reading (relative to the largest).
@njit(cache=True, nogil=True)
def _belief_loss(p, scales, mass):
    """Expected loss of the posterior mean under leaf weights ``p`` (unnormalised, positive sum):
    ``U(p) / sum(p) = sum_k a_k^2 - ||mu||^2``, with subtree masses in ``mass`` (2^(K+1),)."""
    K = scales.shape[0]
    nl = p.shape[0]
    tot = 0.0
    A = 0.0
    for k in range(K):
        A += scales[k] * scales[k]
    for i in range(nl):
        mass[nl + i] = p[i]
        tot += p[i]
    for h in range(nl - 1, 0, -1):
        mass[h] = mass[2 * h] + mass[2 * h + 1]
    m2 = 0.0
    for n in range(1, nl):
        d = scales[_bitlen(n) - 1] * (mass[2 * n] - mass[2 * n + 1]) / tot
        m2 += d * d
    return A - m2


@njit(cache=True, nogil=True)
def _class_weights(p, cls_n, W3):
    """Normalised mass ``W3[o]`` of each reading class ``o`` under weights ``p``."""
    W3[0] = 0.0
    W3[1] = 0.0
    W3[2] = 0.0
    tot = 0.0
    for i in range(p.shape[0]):
        W3[cls_n[i]] += p[i]
        tot += p[i]
    for o in range(3):
        W3[o] /= tot


@njit(cache=True, nogil=True)
def _posterior_at(p, cls_n, lik_noq, post):
    """``post = p * lik`` for one reading (classes' likelihood ratios ``lik_noq`` (3,)); returns its sum."""
    tot = 0.0
    for i in range(p.shape[0]):
        post[i] = p[i] * lik_noq[cls_n[i]]
        tot += post[i]
    return tot


@njit(cache=True, nogil=True)
def _dp_last(P, cand, cls, lik, gh_w, scales, out_q):
    """One layer left: for each belief ``P[s]`` (M, 2^K) and candidate node ``cand[c]``, the expected loss
    after reading it, ``sum_o W_o sum_q w_q U(post) / |post|``, into ``out_q[s, c]`` (M, C)."""
    nl = P.shape[1]
    Q = gh_w.shape[0]
    post = np.zeros(nl)
    mass = np.zeros(2 * nl)
    W3 = np.zeros(3)
    for s in range(P.shape[0]):
        for c in range(cand.shape[0]):
            n = cand[c]
            _class_weights(P[s], cls[n - 1], W3)
            v = 0.0
            for o in range(3):
                if W3[o] <= 0.0:
                    continue
                acc = 0.0
                for q in range(Q):
                    tot = _posterior_at(P[s], cls[n - 1], lik[n - 1, o, q], post)
                    if tot > 0.0:
                        acc += gh_w[q] * _belief_loss(post, scales, mass)
                v += W3[o] * acc
            out_q[s, c] = v


@njit(cache=True, nogil=True)
def _dp_children(P, cand, cls, lik, gh_w, out_child, out_weight):
    """The beliefs after one more reading: for belief ``s``, candidate ``c``, class ``o`` and point ``q``,
    ``out_child[s, c, o, q]`` (normalised posterior, 2^K) and its weight ``out_weight[s, c, o, q] = W_o w_q``
    (0, with a uniform child, when the class is empty or the posterior underflows)."""
    nl = P.shape[1]
    Q = gh_w.shape[0]
    W3 = np.zeros(3)
    for s in range(P.shape[0]):
        for c in range(cand.shape[0]):
            n = cand[c]
            _class_weights(P[s], cls[n - 1], W3)
            for o in range(3):
                for q in range(Q):
                    child = out_child[s, c, o, q]
                    tot = _posterior_at(P[s], cls[n - 1], lik[n - 1, o, q], child) if W3[o] > 0.0 else 0.0
                    if tot > 0.0:
                        for i in range(nl):
                            child[i] /= tot
                        out_weight[s, c, o, q] = W3[o] * gh_w[q]
                    else:
                        for i in range(nl):
                            child[i] = 1.0 / nl
                        out_weight[s, c, o, q] = 0.0


# --- posterior summaries for the rollout policy (fvnum._rollout) ------------------------------------
@njit(cache=True, nogil=True)
def _posterior_norm2(scales, pplus, pp, byd, cnt):
    """``||E[theta | readings]||^2`` from a finished ``_coord_posterior``."""
    m2 = 0.0
    for k in range(1, scales.shape[0] + 1):
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            v = scales[k - 1] * pp[n] * (2.0 * pplus[n] - 1.0)
            m2 += v * v
    return m2


@njit(cache=True, nogil=True)
def _sample_leaf(u, scales, pplus, mark):
    """A leaf drawn from a finished ``_coord_posterior`` with uniforms ``u`` (K,): descend by P(+ | node)."""
    K = scales.shape[0]
    n = 1
    for k in range(K):
        q = pplus[n] if mark[n] else 0.5
        n = 2 * n + (0 if u[k] < q else 1)
    return n - (1 << K)


# --- greedy one-step lookahead over coordinates, O(closure x K) per step -----------------------------
@njit(cache=True, nogil=True)
def _node_gram(wp, wm, Pn, a, Ak, Akm1, vp, vm, q2, q3, T1sq, G, W3):
    """Gram matrix ``G`` (3, 3) of the outcome vectors of reading a node (see ``_greedy_coord_scores``)
    and the outcome masses ``W3``: passes with +1, with -1, avoids it. Returns the noiseless score
    ``sum_o G[o, o] / W_o``, an upper bound of the noisy one (Blackwell)."""
    gpp = wp * wp * Ak + vp
    gmm = wm * wm * Ak + vm
    gpm = wp * wm * (Akm1 - a * a)
    tp1 = wp * q2 + vp
    tm1 = wm * q3 + vm
    G[0, 0] = gpp
    G[1, 1] = gmm
    G[0, 1] = gpm
    G[1, 0] = gpm
    G[0, 2] = tp1 - gpp - gpm
    G[2, 0] = G[0, 2]
    G[1, 2] = tm1 - gpm - gmm
    G[2, 1] = G[1, 2]
    G[2, 2] = T1sq - 2.0 * (tp1 + tm1) + gpp + gmm + 2.0 * gpm
    W3[0] = wp
    W3[1] = wm
    W3[2] = max(0.0, 1.0 - Pn)
    for o in range(3):  # a negligible outcome is dropped: its Gram row is rounding noise
        if W3[o] < MASS_TOL:
            W3[o] = 0.0
    bound = 0.0
    for o in range(3):
        if W3[o] > 0:
            bound += G[o, o] / W3[o]
    return bound


@njit(cache=True, nogil=True)
def _node_score(a, tau, gh_x, gh_w, G, W3, v3, r3):
    """``E ||posterior mean after reading the node||^2`` from its Gram ``G`` and masses ``W3`` (amplitude
    ``a``), by the Gauss-Hermite rule per outcome, as in ``_greedy_coord_scores``."""
    v3[0] = a
    v3[1] = -a
    v3[2] = 0.0
    score = 0.0
    for o in range(3):
        if W3[o] <= 0:
            continue
        acc = 0.0
        for q in range(gh_x.shape[0]):
            x = v3[o] + tau * gh_x[q]
            mx = NEG_INF
            for o2 in range(3):
                if W3[o2] > 0:
                    r3[o2] = -0.5 * ((x - v3[o2]) / tau) ** 2
                    if r3[o2] > mx:
                        mx = r3[o2]
            for o2 in range(3):
                r3[o2] = math.exp(r3[o2] - mx) if W3[o2] > 0 else 0.0
            num = 0.0
            den = 0.0
            for o2 in range(3):
                den += W3[o2] * r3[o2]
                for o3 in range(3):
                    num += r3[o2] * G[o2, o3] * r3[o3]
            acc += gh_w[q] * (num / den) / den
        score += W3[o] * acc
    return score


@njit(cache=True, nogil=True)
def _closure_sums(scales, pplus, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp):
    """On the closure of a finished ``_coord_posterior``: ``Wp, Wm`` (P(passes with +1 / -1)), ``Vsq``
    (upward) and ``Qp`` (downward, also at the closure's children), as in ``_greedy_coord_scores``.
    Returns ``T1sq = Vsq[1]`` (0 with no readings)."""
    K = scales.shape[0]
    for k in range(K, 0, -1):
        a = scales[k - 1]
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            Wp[n] = pp[n] * pplus[n]
            Wm[n] = pp[n] * (1.0 - pplus[n])
            d = Wp[n] - Wm[n]
            Vsq[n] = a * a * d * d
            if k < K:
                for c in (2 * n, 2 * n + 1):
                    if mark[c]:
                        Vsq[n] += Vsq[c]
    if cnt[0] == 0:
        Qp[1] = 0.0
        return 0.0
    Qp[1] = 0.0
    for k in range(1, K + 1):
        a = scales[k - 1]
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            q = a * a * (Wp[n] - Wm[n])
            Qp[2 * n] = Qp[n] + q
            Qp[2 * n + 1] = Qp[n] - q
    return Vsq[1]


@njit(cache=True, nogil=True)
def _greedy_candidates(nodes, scales, allow_repeat, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp, T1sq, ci, cx):
    """Candidates of the greedy step after ``_closure_sums``: every closure node (a read one only with
    ``allow_repeat``) and, below each closure child never read, one node per depth (the leftmost: the
    nodes of a depth in an unread subtree are equivalent). Writes nodes ``ci`` and Gram inputs ``cx``
    (m, 10): ``wp, wm, P, a, A_k, A_(k-1), vp, vm, q2, q3``; returns ``m``."""
    K = scales.shape[0]
    D = (1 << K) - 1
    m = 0
    if cnt[0] == 0:
        return _subtree_classes(1, 1.0, 0.0, scales, ci, cx, 0)
    for k in range(1, K + 1):
        a = scales[k - 1]
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            read = False
            for b in range(nodes.shape[0]):
                if nodes[b] == n:
                    read = True
            if allow_repeat or not read:
                ci[m] = n
                _set_inputs(cx[m], Wp[n], Wm[n], pp[n], scales, k)
                if k < K:
                    cx[m, 6] = Vsq[2 * n] if mark[2 * n] else 0.0
                    cx[m, 7] = Vsq[2 * n + 1] if mark[2 * n + 1] else 0.0
                cx[m, 8] = Qp[2 * n]
                cx[m, 9] = Qp[2 * n + 1]
                m += 1
            if k < K:
                for c in (2 * n, 2 * n + 1):
                    if not mark[c]:
                        m = _subtree_classes(c, Wp[n] if c == 2 * n else Wm[n], Qp[c], scales, ci, cx, m)
    return m


@njit(cache=True, nogil=True)
def _set_inputs(x, wp, wm, P, scales, k):
    A = 0.0
    for j in range(k - 1):
        A += scales[j] * scales[j]
    a = scales[k - 1]
    x[0] = wp
    x[1] = wm
    x[2] = P
    x[3] = a
    x[4] = A + a * a
    x[5] = A
    x[6] = 0.0
    x[7] = 0.0


@njit(cache=True, nogil=True)
def _subtree_classes(c, P, q, scales, ci, cx, m):
    """One candidate per depth of the unread subtree of ``c`` (passed with probability ``P``, prefix term ``q``)."""
    K = scales.shape[0]
    k = _bitlen(c)
    n = c
    while k <= K:
        ci[m] = n
        _set_inputs(cx[m], 0.5 * P, 0.5 * P, P, scales, k)
        cx[m, 8] = q
        cx[m, 9] = q
        m += 1
        P *= 0.5
        n *= 2
        k += 1
    return m


@njit(cache=True, nogil=True)
def _greedy_pick(ci, cx, m, tau, T1sq, gh_x, gh_w, G, W3, v3, r3, bound):
    """The candidate of largest noisy score (ties: the smaller node), by branch and bound: candidates
    are scored in decreasing order of their noiseless bound until the bound falls below the best."""
    for i in range(m):
        x = cx[i]
        bound[i] = _node_gram(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], T1sq, G, W3)
    best = NEG_INF
    bn = 0
    for it in range(m):
        i = -1
        for j in range(m):
            if bound[j] > NEG_INF and (i < 0 or bound[j] > bound[i]):
                i = j
        if i < 0 or bound[i] * (1.0 + 1e-9) + 1e-15 < best:
            break
        b = bound[i]
        bound[i] = NEG_INF
        if tau > 0:
            x = cx[i]
            _node_gram(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], T1sq, G, W3)
            b = _node_score(x[3], tau, gh_x, gh_w, G, W3, v3, r3)
        if b > best or (b == best and ci[i] < bn):
            best = b
            bn = ci[i]
    return bn


@njit(cache=True, nogil=True)
def _greedy_scratch(K, L):
    D = (1 << K) - 1
    cap = (L * K + 1) * (2 * K + 1) + K + 1
    return (np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1), np.zeros(2 * D + 2), np.zeros(cap, dtype=np.int64),
            np.zeros((cap, 10)), np.zeros(cap), np.zeros((3, 3)), np.zeros(3), np.zeros(3), np.zeros(3))


@njit(cache=True, nogil=True)
def _greedy_coord_rows(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, out):
    """Greedy step for a batch: ``out[s]`` = the node of largest ``_greedy_coord_scores`` (ties: the
    smallest; with ``allow_repeat`` False, never a read node), in O(closure x K) per sample."""
    K = scales.shape[0]
    L = nodes.shape[1]
    lp, lm, l0, U, O, pplus, pp, mark, byd, cnt = _coord_scratch(K, L)
    Wp, Wm, Vsq, Qp, ci, cx, bound, G, W3, v3, r3 = _greedy_scratch(K, L)
    for s in range(nodes.shape[0]):
        _coord_posterior(nodes[s], readings[s], tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
        T1sq = _closure_sums(scales, pplus, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp)
        m = _greedy_candidates(nodes[s], scales, allow_repeat, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp, T1sq, ci, cx)
        out[s] = _greedy_pick(ci, cx, m, tau, T1sq, gh_x, gh_w, G, W3, v3, r3, bound)
        _coord_reset(mark, byd, cnt)


@njit(cache=True, nogil=True)
def _tree_greedy_sim(leaves, noise, stat, tau, scales, gh_x, gh_w, allow_repeat, out_loss, out_phi, out_nodes):
    """The greedy coordinate policy fused with its channel and decoder (``_tree_path_sim``'s inputs):
    ``L = out_phi.shape[1]`` layers of width 1, each reading the node ``_greedy_coord_rows`` picks."""
    K = scales.shape[0]
    L = out_phi.shape[1]
    tokens = stat.shape[0] > 0
    lp, lm, l0, U, O, pplus, pp, mark, byd, cnt = _coord_scratch(K, L)
    Wp, Wm, Vsq, Qp, ci, cx, bound, G, W3, v3, r3 = _greedy_scratch(K, L)
    for s in range(leaves.shape[0]):
        for l in range(L):
            nodes = out_nodes[s, :l]
            _coord_posterior(nodes, out_phi[s, :l], tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
            T1sq = _closure_sums(scales, pplus, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp)
            m = _greedy_candidates(nodes, scales, allow_repeat, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp, T1sq, ci, cx)
            n = _greedy_pick(ci, cx, m, tau, T1sq, gh_x, gh_w, G, W3, v3, r3, bound)
            _coord_reset(mark, byd, cnt)
            out_nodes[s, l] = n
            if tokens:
                out_phi[s, l] = stat[s, n - 1]
            else:
                out_phi[s, l] = _theta_at(leaves[s], n, K, scales) + tau * noise[s, l]
        _coord_posterior(out_nodes[s], out_phi[s], tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
        out_loss[s] = _coord_loss(leaves[s], scales, pplus, pp, mark, byd, cnt)
        _coord_reset(mark, byd, cnt)
