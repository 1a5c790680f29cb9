"""The noisy Bellman recursion over leaf weights (THEORY.md section 3, under noise; driven by
``fvnum.bellman``)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .common import _bitlen, _subtree_masses


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
