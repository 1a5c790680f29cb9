"""The rollout policy (approximate noisy Bellman, coordinate class, THEORY.md section 3): one-step
rollout over the greedy step of ``greedy_coord`` (``O(closure K)`` per step), with common random
numbers for every candidate."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .common import _theta_at
from .coord import _coord_done, _coord_posterior, _coord_scratch, _posterior_norm2, _sample_leaf
from .greedy_coord import (
    _cand_gram, _closure_sums, _greedy_candidates, _greedy_scratch, _greedy_step, _node_score,
)

MARGIN = 2.0  # standard errors by which a candidate must beat the greedy node over the rollouts


@njit(cache=True, nogil=True)
def _greedy_next(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, cs, gs):
    """The node the greedy one-step lookahead reads after ``readings`` of ``nodes``."""
    return _greedy_step(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, cs, gs)


@njit(cache=True, nogil=True)
def _top_candidates(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, U, cs, gs, cand, score, leaf):
    """Posterior of the readings: leaves ``leaf[j]`` drawn with uniforms ``U[j]``, and the ``cand.size``
    nodes of best greedy score into ``cand`` (best first: ``cand[0]`` is the greedy node). Returns
    how many candidates there are."""
    ci, cx, G, W3, v3, r3 = gs[4], gs[5], gs[7], gs[8], gs[9], gs[10]
    _coord_posterior(nodes, readings, tau, scales, cs)
    for j in range(U.shape[0]):
        leaf[j] = _sample_leaf(U[j], scales, cs)
    T1sq = _closure_sums(scales, cs, gs)
    m = _greedy_candidates(nodes, scales, allow_repeat, cs, gs, T1sq)
    _coord_done(cs)
    for i in range(m):
        _cand_gram(cx[i], T1sq, G, W3)
        score[i] = _node_score(cx[i, 3], tau, gh_x, gh_w, G, W3, v3, r3)
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
def _rollout_value(nodes, readings, c, leaf, z, tau, scales, gh_x, gh_w, allow_repeat, L, bn, br, cs, gs):
    """Expected final loss ``sum a_k^2 - ||mean||^2`` after reading node ``c`` (leaf ``leaf``, noise
    ``z[0]``) and then the greedy policy up to ``L`` readings (noise ``z[1:]``)."""
    K = scales.shape[0]
    l = nodes.shape[0]
    for b in range(l):
        bn[b] = nodes[b]
        br[b] = readings[b]
    bn[l] = c
    br[l] = _theta_at(leaf, c, K, scales) + tau * z[0]
    for t in range(l + 1, L):
        nxt = _greedy_next(bn[:t], br[:t], tau, scales, gh_x, gh_w, allow_repeat, cs, gs)
        bn[t] = nxt
        br[t] = _theta_at(leaf, nxt, K, scales) + tau * z[t - l]
    _coord_posterior(bn, br, tau, scales, cs)
    A = 0.0
    for k in range(K):
        A += scales[k] * scales[k]
    v = A - _posterior_norm2(scales, cs)
    _coord_done(cs)
    return v


@njit(cache=True, nogil=True)
def _paired_gain(val, c, M):
    """Mean and standard error of ``val[c] - val[0]`` over the ``M`` rollouts."""
    d1 = 0.0
    d2 = 0.0
    for j in range(M):
        d = val[c, j] - val[0, j]
        d1 += d
        d2 += d * d
    mean = d1 / M
    return mean, math.sqrt(max(0.0, d2 / M - mean * mean) / max(M - 1, 1))


@njit(cache=True, nogil=True)
def _rollout_rows(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, U, Z, L, n_cand, out):
    """One-step rollout over the greedy policy: for each sample ``s`` (readings ``readings[s]`` of
    ``nodes[s]``), each of the ``n_cand`` nodes of best greedy score is read and followed by the greedy
    policy up to ``L`` readings, over ``M`` rollouts (leaf ``j`` drawn from the posterior with uniforms
    ``U[j]``, channel noise ``Z[j]``: the same for every candidate). The greedy node is kept unless a
    candidate's mean final loss is lower by more than ``MARGIN`` standard errors of the paired
    differences, so the rollout policy departs from greedy only where its rollouts say it pays. Without
    ``allow_repeat`` (the tokens channel, whose repeated reading says nothing new) no node is read twice."""
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
        C = _top_candidates(nodes[s], readings[s], tau, scales, gh_x, gh_w, allow_repeat, U, cs, gs, cand, score, leaf)
        for c in range(C):
            for j in range(M):
                val[c, j] = _rollout_value(nodes[s], readings[s], cand[c], leaf[j], Z[j], tau, scales, gh_x,
                                           gh_w, allow_repeat, L, bn, br, cs, gs)
        out[s] = cand[0]
        best = 0.0
        for c in range(1, C):
            mean, se = _paired_gain(val, c, M)
            if mean + MARGIN * se < 0.0 and mean < best:
                best = mean
                out[s] = cand[c]
