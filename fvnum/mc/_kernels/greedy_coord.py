"""Greedy one-step lookahead over coordinates (docs/theory.md section 3, under noise): the node whose next
reading maximises ``E ||posterior mean||^2``, in O(closure x K) per step.

With ``T(m) = sum_{leaves under m} w_i theta_i`` the three outcomes of reading ``n`` (path passes with
+1, with -1, avoids n) have vectors ``T(2n), T(2n+1), T(1) - T(n)``; their Gram matrix follows from
O(D) recursions: ``|V(m)|^2`` (subtree part, upward), ``Q(m) = pi(m).T(1)`` (prefix part, downward).
The greedy step's work arrays travel as one tuple ``gs = (Wp, Wm, Vsq, Qp, ci, cx, bound, G, W3, v3,
r3)`` made by ``_greedy_scratch``; the posterior's as ``cs`` (``coord._coord_scratch``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from fvnum.priors._kernels.common import MASS_TOL, NEG_INF, _bitlen, _theta_at
from fvnum.priors._kernels.coord import _coord_done, _coord_loss, _coord_posterior, _coord_scratch
from fvnum.priors._kernels.tokens import _tokens_posterior


@njit(cache=True, nogil=True)
def _gram3(wp, wm, a, Ak, Akm1, vp, vm, q2, q3, T1sq, G):
    """Gram matrix ``G`` (3, 3) of the outcome vectors of reading a node of amplitude ``a`` (see the
    module docstring): masses ``wp, wm`` of passing with +1 / -1, ``A_k, A_(k-1)`` partial sums of
    ``a_k^2``, subtree terms ``vp, vm`` of the children and prefix terms ``q2, q3``."""
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


@njit(cache=True, nogil=True, inline="always")
def _outcome_weights(x, tau, W3, v3, r3):
    """Relative likelihoods ``r3[o]`` of reading ``x`` under each outcome of positive mass (max 1)."""
    mx = NEG_INF
    for o2 in range(3):
        if W3[o2] > 0:
            r3[o2] = -0.5 * ((x - v3[o2]) / tau) ** 2
            if r3[o2] > mx:
                mx = r3[o2]
    for o2 in range(3):
        r3[o2] = math.exp(r3[o2] - mx) if W3[o2] > 0 else 0.0


# --- the full scan over every node (the reference of the greedy step) -------------------------------
@njit(cache=True, nogil=True)
def _full_tree_sums(scales, cs, P, Wp, Wm, Vsq, Q):
    """On every node of the tree after a finished ``_coord_posterior``: ``P`` (passes), ``Wp, Wm``,
    ``Vsq`` (upward) and ``Q`` (downward, children may be leaves: index up to 2D + 1)."""
    pplus, mark = cs[5], cs[7]
    D = P.shape[0] - 1
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
        Q[2 * n] = Q[n] + q
        Q[2 * n + 1] = Q[n] - q


@njit(cache=True, nogil=True)
def _scan_score(a, tau, gh_x, gh_w, G, W3, v3, r3):
    """The score of one node from its Gram ``G`` and masses ``W3`` (no outcome dropped; ``tau = 0`` exact)."""
    if tau == 0:
        score = 0.0
        for o in range(3):
            if W3[o] > 0:
                score += G[o, o] / W3[o]
        return score
    return _node_score(a, tau, gh_x, gh_w, G, W3, v3, r3)


@njit(cache=True, nogil=True)
def _greedy_coord_scores(nodes, readings, tau, scales, gh_x, gh_w, out):
    """For each sample and each node ``n``: ``E ||E[theta | readings, next reading of n]||^2``
    (maximising it minimises the expected posterior loss after one more reading of ``n``), written to
    ``out`` (n, D). Exact up to the Gauss-Hermite rule (``gh_x``, ``gh_w`` normalised to sum 1) for
    the 1-d integral over the new reading; ``tau = 0`` is exact. O(D) per sample: the full scan that
    ``_greedy_coord_rows`` prunes."""
    K = scales.shape[0]
    D = (1 << K) - 1
    cs = _coord_scratch(K, nodes.shape[1])
    P, Wp, Wm = np.zeros(D + 1), np.zeros(D + 1), np.zeros(D + 1)
    Vsq, Q = np.zeros(2 * D + 2), np.zeros(2 * D + 2)
    A = np.zeros(K + 1)  # A_k = sum_{k' <= k} a_k'^2
    for k in range(1, K + 1):
        A[k] = A[k - 1] + scales[k - 1] ** 2
    G, W3, v3, r3 = np.zeros((3, 3)), np.zeros(3), np.zeros(3), np.zeros(3)
    for s in range(nodes.shape[0]):
        _coord_posterior(nodes[s], readings[s], tau, scales, cs)
        _full_tree_sums(scales, cs, P, Wp, Wm, Vsq, Q)
        for n in range(1, D + 1):
            k = _bitlen(n)
            vp = Vsq[2 * n] if 2 * n <= D else 0.0
            vm = Vsq[2 * n + 1] if 2 * n <= D else 0.0
            _gram3(Wp[n], Wm[n], scales[k - 1], A[k], A[k - 1], vp, vm, Q[2 * n], Q[2 * n + 1], Vsq[1], G)
            W3[0] = Wp[n]
            W3[1] = Wm[n]
            W3[2] = max(0.0, 1.0 - P[n])
            out[s, n - 1] = _scan_score(scales[k - 1], tau, gh_x, gh_w, G, W3, v3, r3)
        _coord_done(cs)


# --- the greedy step on the closure, by branch and bound ----------------------------------------------
@njit(cache=True, nogil=True)
def _node_gram(wp, wm, Pn, a, Ak, Akm1, vp, vm, q2, q3, T1sq, G, W3):
    """Gram matrix ``G`` (``_gram3``) and the outcome masses ``W3`` of reading a node: passes with +1,
    with -1, avoids it. Returns the noiseless score ``sum_o G[o, o] / W_o``, an upper bound of the
    noisy one (Blackwell)."""
    _gram3(wp, wm, a, Ak, Akm1, vp, vm, q2, q3, T1sq, G)
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
    ``a``), by the Gauss-Hermite rule per outcome."""
    v3[0] = a
    v3[1] = -a
    v3[2] = 0.0
    score = 0.0
    for o in range(3):
        if W3[o] <= 0:
            continue
        acc = 0.0
        for q in range(gh_x.shape[0]):
            _outcome_weights(v3[o] + tau * gh_x[q], tau, W3, v3, r3)
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
def _closure_sums(scales, cs, gs):
    """On the closure of a finished ``_coord_posterior``: ``Wp, Wm`` (P(passes with +1 / -1)), ``Vsq``
    (upward) and ``Qp`` (downward, also at the closure's children). Returns ``T1sq = Vsq[1]`` (0 with
    no readings)."""
    pplus, pp, mark, byd, cnt = cs[5], cs[6], cs[7], cs[8], cs[9]
    Wp, Wm, Vsq, Qp = gs[0], gs[1], gs[2], gs[3]
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
    Qp[1] = 0.0
    if cnt[0] == 0:
        return 0.0
    for k in range(1, K + 1):
        a = scales[k - 1]
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            q = a * a * (Wp[n] - Wm[n])
            Qp[2 * n] = Qp[n] + q
            Qp[2 * n + 1] = Qp[n] - q
    return Vsq[1]


@njit(cache=True, nogil=True)
def _greedy_candidates(nodes, scales, allow_repeat, cs, gs, T1sq):
    """Candidates of the greedy step after ``_closure_sums``: every closure node (a read one only with
    ``allow_repeat``) and, below each closure child never read, one node per depth (the leftmost: the
    nodes of a depth in an unread subtree are equivalent). Writes nodes ``ci`` and Gram inputs ``cx``
    (m, 10): ``wp, wm, P, a, A_k, A_(k-1), vp, vm, q2, q3``; returns ``m``."""
    pp, mark, byd, cnt = cs[6], cs[7], cs[8], cs[9]
    Wp, Wm, Vsq, Qp, ci, cx = gs[0], gs[1], gs[2], gs[3], gs[4], gs[5]
    K = scales.shape[0]
    m = 0
    if cnt[0] == 0:
        return _subtree_classes(1, 1.0, 0.0, scales, ci, cx, 0)
    for k in range(1, K + 1):
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


@njit(cache=True, nogil=True, inline="always")
def _cand_gram(x, T1sq, G, W3):
    """``_node_gram`` of candidate inputs ``x`` (a row of ``cx``)."""
    return _node_gram(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], T1sq, G, W3)


@njit(cache=True, nogil=True)
def _greedy_pick(m, tau, T1sq, gh_x, gh_w, gs):
    """The candidate of largest noisy score (ties: the smaller node), by branch and bound: candidates
    are scored in decreasing order of their noiseless bound until the bound falls below the best."""
    ci, cx, bound, G, W3, v3, r3 = gs[4], gs[5], gs[6], gs[7], gs[8], gs[9], gs[10]
    for i in range(m):
        bound[i] = _cand_gram(cx[i], T1sq, G, W3)
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
            _cand_gram(cx[i], T1sq, G, W3)
            b = _node_score(cx[i, 3], tau, gh_x, gh_w, G, W3, v3, r3)
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


@njit(cache=True, nogil=True, inline="always")
def _greedy_step(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, cs, gs):
    """The node the greedy step reads after ``readings`` of ``nodes``."""
    _coord_posterior(nodes, readings, tau, scales, cs)
    T1sq = _closure_sums(scales, cs, gs)
    m = _greedy_candidates(nodes, scales, allow_repeat, cs, gs, T1sq)
    n = _greedy_pick(m, tau, T1sq, gh_x, gh_w, gs)
    _coord_done(cs)
    return n


@njit(cache=True, nogil=True)
def _greedy_coord_rows(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, out):
    """Greedy step for a batch: ``out[s]`` = the node of largest ``_greedy_coord_scores`` (ties: the
    smallest; with ``allow_repeat`` False, never a read node), in O(closure x K) per sample."""
    K = scales.shape[0]
    L = nodes.shape[1]
    cs = _coord_scratch(K, L)
    gs = _greedy_scratch(K, L)
    for s in range(nodes.shape[0]):
        out[s] = _greedy_step(nodes[s], readings[s], tau, scales, gh_x, gh_w, allow_repeat, cs, gs)


@njit(cache=True, nogil=True)
def _tree_greedy_sim(leaves, noise, stat, tau, n_tok, sigma2, scales, gh_x, gh_w, allow_repeat, out_loss, out_phi,
                     out_nodes):
    """The greedy coordinate policy fused with its channel and decoder (``_tree_path_sim``'s inputs):
    ``L = out_phi.shape[1]`` layers of width 1, each reading the node ``_greedy_coord_rows`` picks. The
    choice uses the gaussian likelihood of noise ``tau`` (under the tokens channel an approximate
    belief); the loss is decoded under the tokens law ``(n_tok, sigma2)`` when ``n_tok > 0``, else under that
    gaussian likelihood."""
    K = scales.shape[0]
    L = out_phi.shape[1]
    tokens = stat.shape[0] > 0
    cs = _coord_scratch(K, L)
    gs = _greedy_scratch(K, L)
    for s in range(leaves.shape[0]):
        for l in range(L):
            n = _greedy_step(out_nodes[s, :l], out_phi[s, :l], tau, scales, gh_x, gh_w, allow_repeat, cs, gs)
            out_nodes[s, l] = n
            if tokens:
                out_phi[s, l] = stat[s, n - 1]
            else:
                out_phi[s, l] = _theta_at(leaves[s], n, K, scales) + tau * noise[s, l]
        if n_tok > 0:
            _tokens_posterior(out_nodes[s], out_phi[s], n_tok, sigma2, scales, cs)
        else:
            _coord_posterior(out_nodes[s], out_phi[s], tau, scales, cs)
        out_loss[s] = _coord_loss(leaves[s], scales, cs)
        _coord_done(cs)
