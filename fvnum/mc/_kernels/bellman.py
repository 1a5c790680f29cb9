"""The noisy Bellman recursion over leaf weights (docs/theory.md section 3, under noise; driven by
``fvnum.noisy_bellman``)."""
from __future__ import annotations

import numpy as np
from numba import njit

from fvnum.priors._kernels.common import _bitlen, _subtree_masses


# --- the noisy Bellman recursion over leaf weights (THEORY.md section 3, under noise) ---------------
# A belief is a weight vector ``p`` over the ``2^K`` leaves. Reading node ``n`` (depth ``k``) sorts the
# leaves into three classes (path passes ``n`` with +1, with -1, avoids ``n``: ``cls[n-1, leaf]`` in 0, 1,
# 2) of means ``+a_k, -a_k, 0``. The reading's law is a mixture of three gaussians; its integral is a
# trapezoid rule on one lattice of readings per depth (``fvnum.optimum.noisy_dp.Quadrature``): point ``j`` has
# rule weight ``w[k-1, o, j]`` under class ``o`` (each class's rule sums to 1) and likelihood ratios
# ``lik[k-1, j, o']`` of the classes at that reading (relative to the largest); ``nj[k-1]`` points.
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
    _subtree_masses(mass, nl)
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


@njit(cache=True, nogil=True, inline="always")
def _class_gram(p, cls_n, paths, pvals, S, G, W3):
    """Masses ``W3`` (3,) of the classes and the Gram matrix ``G[o, o'] = <m_o, m_o'>`` of their mean
    latents ``m_o = sum_{i in o} p_i theta_i / W_o`` (``p`` normalised; ``theta_i`` sparse: ``pvals[i, k]``
    at node ``paths[i, k]``). After a reading of likelihood ratios ``r`` the posterior gives class ``o``
    the probability ``q_o = W_o r_o / r.W`` and its mean is ``sum_o q_o m_o``: ``||mu||^2 = q.G.q``."""
    nl, K = paths.shape
    S[:, :] = 0.0
    W3[0] = 0.0
    W3[1] = 0.0
    W3[2] = 0.0
    tot = 0.0
    for i in range(nl):
        tot += p[i]
    inv = 1.0 / tot
    for i in range(nl):
        o = cls_n[i]
        q = p[i] * inv
        W3[o] += q
        for k in range(K):
            S[o, paths[i, k]] += q * pvals[i, k]
    for o in range(3):  # class means m_o = S_o / W_o (0 for an empty class)
        if W3[o] > 0.0:
            for d in range(S.shape[1]):
                S[o, d] /= W3[o]
    for o in range(3):
        for o2 in range(o, 3):
            g = 0.0
            for d in range(S.shape[1]):
                g += S[o, d] * S[o2, d]
            G[o, o2] = g
            G[o2, o] = g


@njit(cache=True, nogil=True, inline="always")
def _lattice_loss(k, lik, w, nj, A, G, W3):
    """``sum_j (sum_o W_o w_oj) (A - q_j.G.q_j)`` over the lattice of depth ``k + 1`` (class Gram ``G``,
    masses ``W3``); a reading whose likelihood underflows for every class is skipped."""
    v = 0.0
    for j in range(nj[k]):
        om = W3[0] * w[k, 0, j] + W3[1] * w[k, 1, j] + W3[2] * w[k, 2, j]
        if om <= 0.0:
            continue
        den = W3[0] * lik[k, j, 0] + W3[1] * lik[k, j, 1] + W3[2] * lik[k, j, 2]
        if den <= 0.0:
            continue
        q0 = W3[0] * lik[k, j, 0] / den  # the posterior's class probabilities
        q1 = W3[1] * lik[k, j, 1] / den
        q2 = W3[2] * lik[k, j, 2] / den
        v += om * (A - (q0 * q0 * G[0, 0] + q1 * q1 * G[1, 1] + q2 * q2 * G[2, 2]
                        + 2.0 * (q0 * q1 * G[0, 1] + q0 * q2 * G[0, 2] + q1 * q2 * G[1, 2])))
    return v


@njit(cache=True, nogil=True, inline="always")
def _sum_sq(scales):
    A = 0.0
    for k in range(scales.shape[0]):
        A += scales[k] * scales[k]
    return A


@njit(cache=True, nogil=True)
def _dp_last(P, cand, cls, lik, w, nj, paths, pvals, scales, out_q):
    """One layer left: for each belief ``P[s]`` (M, 2^K) and candidate node ``cand[c]``, the expected loss
    after reading it, ``sum_j (sum_o W_o w_oj) (A - ||mu(phi_j)||^2)`` over the lattice of its depth,
    into ``out_q[s, c]`` (M, C)."""
    K = scales.shape[0]
    A = _sum_sq(scales)
    S = np.zeros((3, (1 << K)))
    G = np.zeros((3, 3))
    W3 = np.zeros(3)
    for s in range(P.shape[0]):
        for c in range(cand.shape[0]):
            n = cand[c]
            _class_gram(P[s], cls[n - 1], paths, pvals, S, G, W3)
            out_q[s, c] = _lattice_loss(_bitlen(n) - 1, lik, w, nj, A, G, W3)


@njit(cache=True, nogil=True)
def _dp_last_at(P, nodes, cls, lik, w, nj, paths, pvals, scales, out):
    """``_dp_last`` of one node per belief: ``out[s]`` = expected loss after reading ``nodes[s]`` from ``P[s]``."""
    K = scales.shape[0]
    A = _sum_sq(scales)
    S = np.zeros((3, (1 << K)))
    G = np.zeros((3, 3))
    W3 = np.zeros(3)
    for s in range(P.shape[0]):
        n = nodes[s]
        _class_gram(P[s], cls[n - 1], paths, pvals, S, G, W3)
        out[s] = _lattice_loss(_bitlen(n) - 1, lik, w, nj, A, G, W3)


@njit(cache=True, nogil=True)
def _dp_last_min(P, cand, cls, lik, w, nj, paths, pvals, scales, out_g, out_a):
    """``min_c`` of ``_dp_last`` (value ``out_g[s]``, index ``out_a[s]``; ties: the first candidate) by
    branch and bound: a noiseless reading is at least as informative (Blackwell), so the loss after a
    noiseless reading of ``n``, ``A - sum_o W_o |m_o|^2``, bounds its noisy loss from below; candidates are
    evaluated in increasing order of that bound until it exceeds the best value found."""
    K = scales.shape[0]
    C = cand.shape[0]
    A = _sum_sq(scales)
    S = np.zeros((3, (1 << K)))
    Gc = np.zeros((C, 3, 3))
    Wc = np.zeros((C, 3))
    lb = np.zeros(C)
    for s in range(P.shape[0]):
        for c in range(C):
            _class_gram(P[s], cls[cand[c] - 1], paths, pvals, S, Gc[c], Wc[c])
            lb[c] = A - (Wc[c, 0] * Gc[c, 0, 0] + Wc[c, 1] * Gc[c, 1, 1] + Wc[c, 2] * Gc[c, 2, 2])
        best = np.inf
        ba = 0
        for it in range(C):
            i = -1
            for c in range(C):
                if lb[c] < np.inf and (i < 0 or lb[c] < lb[i]):
                    i = c
            if i < 0 or lb[i] > best + 1e-12 * abs(best) + 1e-300:
                break
            lb[i] = np.inf
            v = _lattice_loss(_bitlen(cand[i]) - 1, lik, w, nj, A, Gc[i], Wc[i])
            if v < best or (v == best and i < ba):
                best = v
                ba = i
        out_g[s] = best
        out_a[s] = ba


@njit(cache=True, nogil=True)
def _dp_children(P, cand, cls, lik, w, nj, out_child, out_weight):
    """The beliefs after one more reading: for belief ``s``, candidate ``c`` and lattice point ``j``,
    ``out_child[s, c, j]`` (normalised posterior, 2^K) and its weight ``out_weight[s, c, j] = sum_o W_o w_oj``
    (0, with a uniform child, beyond the lattice or where the posterior underflows)."""
    nl = P.shape[1]
    W3 = np.zeros(3)
    for s in range(P.shape[0]):
        for c in range(cand.shape[0]):
            n = cand[c]
            k = _bitlen(n) - 1
            _class_weights(P[s], cls[n - 1], W3)
            for j in range(out_weight.shape[2]):
                child = out_child[s, c, j]
                om = 0.0
                tot = 0.0
                if j < nj[k]:
                    om = W3[0] * w[k, 0, j] + W3[1] * w[k, 1, j] + W3[2] * w[k, 2, j]
                    if om > 0.0:
                        tot = _posterior_at(P[s], cls[n - 1], lik[k, j], child)
                if om > 0.0 and tot > 0.0:
                    for i in range(nl):
                        child[i] /= tot
                    out_weight[s, c, j] = om
                else:
                    for i in range(nl):
                        child[i] = 1.0 / nl
                    out_weight[s, c, j] = 0.0
