"""Numba kernels of the rollout policy (approximate noisy Bellman, coordinate class, THEORY.md section 3).

Built on the coordinate-posterior and greedy-step helpers of ``_kernels`` (``O(closure K)`` per step).
Scratch arrays travel as two tuples: ``cs`` (``_kernels._coord_scratch``) and ``gs``
(``_kernels._greedy_scratch``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._kernels import (
    _closure_sums, _coord_posterior, _coord_reset, _coord_scratch, _greedy_candidates, _greedy_pick,
    _greedy_scratch, _node_gram, _node_score, _posterior_norm2, _sample_leaf, _theta_at,
)

MARGIN = 2.0  # standard errors by which a candidate must beat the greedy node over the rollouts


@njit(cache=True, nogil=True)
def _greedy_next(nodes, readings, tau, scales, gh_x, gh_w, cs, gs):
    """The node the greedy one-step lookahead reads after ``readings`` of ``nodes`` (repeats allowed)."""
    lp, lm, l0, U, O, pplus, pp, mark, byd, cnt = cs
    Wp, Wm, Vsq, Qp, ci, cx, bound, G, W3, v3, r3 = gs
    _coord_posterior(nodes, readings, tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
    T1sq = _closure_sums(scales, pplus, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp)
    m = _greedy_candidates(nodes, scales, True, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp, T1sq, ci, cx)
    n = _greedy_pick(ci, cx, m, tau, T1sq, gh_x, gh_w, G, W3, v3, r3, bound)
    _coord_reset(mark, byd, cnt)
    return n


@njit(cache=True, nogil=True)
def _top_candidates(nodes, readings, tau, scales, gh_x, gh_w, U, cs, gs, cand, score, leaf):
    """Posterior of the readings: leaves ``leaf[j]`` drawn with uniforms ``U[j]``, and the ``cand.size``
    nodes of best greedy score into ``cand`` (best first: ``cand[0]`` is the greedy node). Returns
    how many candidates there are."""
    lp, lm, l0, Uu, O, pplus, pp, mark, byd, cnt = cs
    Wp, Wm, Vsq, Qp, ci, cx, bound, G, W3, v3, r3 = gs
    _coord_posterior(nodes, readings, tau, scales, lp, lm, l0, Uu, O, pplus, pp, mark, byd, cnt)
    for j in range(U.shape[0]):
        leaf[j] = _sample_leaf(U[j], scales, pplus, mark)
    T1sq = _closure_sums(scales, pplus, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp)
    m = _greedy_candidates(nodes, scales, True, pp, mark, byd, cnt, Wp, Wm, Vsq, Qp, T1sq, ci, cx)
    _coord_reset(mark, byd, cnt)
    for i in range(m):
        x = cx[i]
        _node_gram(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], T1sq, G, W3)
        score[i] = _node_score(x[3], tau, gh_x, gh_w, G, W3, v3, r3)
    C = min(cand.shape[0], m)
    for c in range(C):  # selection of the best C, ties: the smaller node
        b = -1
        for i in range(m):
            if score[i] > -np.inf and (b < 0 or score[i] > score[b] or (score[i] == score[b] and ci[i] < ci[b])):
                b = i
        cand[c] = ci[b]
        score[b] = -np.inf
    return C


@njit(cache=True, nogil=True)
def _rollout_value(nodes, readings, c, leaf, z, tau, scales, gh_x, gh_w, L, bn, br, cs, gs):
    """Expected final loss ``sum a_k^2 - ||mean||^2`` after reading node ``c`` (leaf ``leaf``, noise
    ``z[0]``) and then the greedy policy up to ``L`` readings (noise ``z[1:]``)."""
    lp, lm, l0, U, O, pplus, pp, mark, byd, cnt = cs
    K = scales.shape[0]
    l = nodes.shape[0]
    for b in range(l):
        bn[b] = nodes[b]
        br[b] = readings[b]
    bn[l] = c
    br[l] = _theta_at(leaf, c, K, scales) + tau * z[0]
    for t in range(l + 1, L):
        nxt = _greedy_next(bn[:t], br[:t], tau, scales, gh_x, gh_w, cs, gs)
        bn[t] = nxt
        br[t] = _theta_at(leaf, nxt, K, scales) + tau * z[t - l]
    _coord_posterior(bn, br, tau, scales, lp, lm, l0, U, O, pplus, pp, mark, byd, cnt)
    A = 0.0
    for k in range(K):
        A += scales[k] * scales[k]
    v = A - _posterior_norm2(scales, pplus, pp, byd, cnt)
    _coord_reset(mark, byd, cnt)
    return v


@njit(cache=True, nogil=True)
def _rollout_rows(nodes, readings, tau, scales, gh_x, gh_w, U, Z, L, n_cand, out):
    """One-step rollout over the greedy policy: for each sample ``s`` (readings ``readings[s]`` of
    ``nodes[s]``), each of the ``n_cand`` nodes of best greedy score is read and followed by the greedy
    policy up to ``L`` readings, over ``M`` rollouts (leaf ``j`` drawn from the posterior with uniforms
    ``U[j]``, channel noise ``Z[j]``: the same for every candidate). The greedy node is kept unless a
    candidate's mean final loss is lower by more than ``MARGIN`` standard errors of the paired
    differences, so the rollout policy departs from greedy only where its rollouts say it pays."""
    M = U.shape[0]
    cs = _coord_scratch(scales.shape[0], L)
    gs = _greedy_scratch(scales.shape[0], L)
    bn = np.zeros(L, dtype=np.int64)
    br = np.zeros(L)
    cand = np.zeros(n_cand, dtype=np.int64)
    score = np.zeros(gs[4].shape[0])
    leaf = np.zeros(M, dtype=np.int64)
    val = np.zeros((n_cand, M))
    for s in range(nodes.shape[0]):
        C = _top_candidates(nodes[s], readings[s], tau, scales, gh_x, gh_w, U, cs, gs, cand, score, leaf)
        for c in range(C):
            for j in range(M):
                val[c, j] = _rollout_value(nodes[s], readings[s], cand[c], leaf[j], Z[j], tau, scales, gh_x,
                                           gh_w, L, bn, br, cs, gs)
        out[s] = cand[0]
        best = 0.0
        for c in range(1, C):
            d1 = 0.0
            d2 = 0.0
            for j in range(M):
                d = val[c, j] - val[0, j]
                d1 += d
                d2 += d * d
            mean = d1 / M
            se = math.sqrt(max(0.0, d2 / M - mean * mean) / max(M - 1, 1))
            if mean + MARGIN * se < 0.0 and mean < best:
                best = mean
                out[s] = cand[c]
