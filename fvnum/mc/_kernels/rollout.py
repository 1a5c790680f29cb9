"""The rollout policy (approximate noisy Bellman, coordinate class, docs/theory.md section 3): one-step
rollout over the greedy step of ``greedy_coord`` (``O(closure K)`` per step), with common random
numbers for every candidate.

The greedy steps inside the rollouts score nodes from a table of likelihood ratios (``_ratio_table``)
instead of exponentials: the reading ``x = v_o + tau z_q`` of outcome ``o`` at Gauss-Hermite point
``q`` gives outcome ``o'`` the likelihood ratio ``exp(-d (d / 2 + z_q))``, ``d = (v_o - v_o') / tau``,
relative to outcome ``o`` itself. It depends on the node only through its depth, and the score
``r.G.r / (W.r)^2`` does not change when ``r`` is scaled, so a table score equals ``_node_score``'s up
to rounding. The top candidates are found by branch and bound on the noiseless bound (``_node_gram``)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from fvnum.priors._kernels.common import NEG_INF, _bitlen, _theta_at
from fvnum.priors._kernels.coord import _coord_done, _coord_posterior, _coord_scratch, _posterior_norm2, _sample_leaf
from fvnum.mc._kernels.greedy_coord import _cand_gram, _closure_sums, _greedy_candidates, _greedy_scratch, _greedy_step

MARGIN = 2.0  # standard errors by which a candidate must beat the greedy node over the rollouts


@njit(cache=True, nogil=True)
def _greedy_next(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, cs, gs):
    """The node the greedy one-step lookahead reads after ``readings`` of ``nodes``."""
    return _greedy_step(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, cs, gs)


@njit(cache=True, nogil=True)
def _ratio_table(tau, scales, gh_x, out):
    """``out[k, o, q, o']`` (K, 3, Q, 3): likelihood ratio of outcome ``o'`` to outcome ``o`` at the
    reading ``v_o + tau gh_x[q]`` of a depth-``k + 1`` node (outcome means ``v = (a, -a, 0)``)."""
    for k in range(scales.shape[0]):
        a = scales[k]
        for o in range(3):
            vo = a if o == 0 else (-a if o == 1 else 0.0)
            for o2 in range(3):
                vo2 = a if o2 == 0 else (-a if o2 == 1 else 0.0)
                d = (vo - vo2) / tau
                for q in range(gh_x.shape[0]):
                    out[k, o, q, o2] = math.exp(-d * (0.5 * d + gh_x[q]))


@njit(cache=True, nogil=True)
def _table_score(k, gh_w, T, G, W3):
    """``_node_score`` of a depth-``k + 1`` node from the ratio table ``T`` (an empty outcome gets ratio 0)."""
    e0 = 1.0 if W3[0] > 0 else 0.0
    e1 = 1.0 if W3[1] > 0 else 0.0
    e2 = 1.0 if W3[2] > 0 else 0.0
    g00, g11, g22 = G[0, 0], G[1, 1], G[2, 2]
    g01, g02, g12 = 2.0 * G[0, 1], 2.0 * G[0, 2], 2.0 * G[1, 2]
    score = 0.0
    for o in range(3):
        if W3[o] <= 0:
            continue
        acc = 0.0
        for q in range(gh_w.shape[0]):
            r0 = T[k, o, q, 0] * e0
            r1 = T[k, o, q, 1] * e1
            r2 = T[k, o, q, 2] * e2
            den = W3[0] * r0 + W3[1] * r1 + W3[2] * r2
            num = r0 * (g00 * r0 + g01 * r1 + g02 * r2) + r1 * (g11 * r1 + g12 * r2) + g22 * r2 * r2
            acc += gh_w[q] * num / (den * den)
        score += W3[o] * acc
    return score


@njit(cache=True, nogil=True)
def _table_pick(m, T1sq, gh_w, T, gs):
    """``greedy_coord._greedy_pick`` with table scores: the candidate of largest score (ties: the smaller
    node), scored in decreasing order of the noiseless bound until the bound falls below the best.
    Returns ``(node, score)``."""
    ci, cx, bound, G, W3 = gs[4], gs[5], gs[6], gs[7], gs[8]
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
        bound[i] = NEG_INF
        _cand_gram(cx[i], T1sq, G, W3)
        b = _table_score(_bitlen(ci[i]) - 1, gh_w, T, G, W3)
        if b > best or (b == best and ci[i] < bn):
            best = b
            bn = ci[i]
    return bn, best


@njit(cache=True, nogil=True)
def _table_step(nodes, readings, tau, scales, gh_w, T, allow_repeat, cs, gs):
    """The greedy step (``greedy_coord._greedy_step``) with table scores: ``(node, score)``."""
    _coord_posterior(nodes, readings, tau, scales, cs)
    T1sq = _closure_sums(scales, cs, gs)
    m = _greedy_candidates(nodes, scales, allow_repeat, cs, gs, T1sq)
    n, s = _table_pick(m, T1sq, gh_w, T, gs)
    _coord_done(cs)
    return n, s


@njit(cache=True, nogil=True)
def _top_candidates(nodes, readings, tau, scales, gh_w, T, allow_repeat, U, cs, gs, cand, score, leaf):
    """Posterior of the readings: leaves ``leaf[j]`` drawn with uniforms ``U[j]``, and the ``cand.size``
    nodes of best greedy score into ``cand`` (best first: ``cand[0]`` is the greedy node; ties: the
    smaller node), by branch and bound: candidates are scored in decreasing order of their noiseless
    bound until the bound falls below the ``cand.size``-th best score. Returns how many there are."""
    ci, cx, bound, G, W3 = gs[4], gs[5], gs[6], gs[7], gs[8]
    _coord_posterior(nodes, readings, tau, scales, cs)
    for j in range(U.shape[0]):
        leaf[j] = _sample_leaf(U[j], scales, cs)
    T1sq = _closure_sums(scales, cs, gs)
    m = _greedy_candidates(nodes, scales, allow_repeat, cs, gs, T1sq)
    _coord_done(cs)
    C = min(cand.shape[0], m)
    for i in range(m):
        bound[i] = _cand_gram(cx[i], T1sq, G, W3)
        score[i] = NEG_INF
    scored = 0
    for it in range(m):
        i = -1
        for j in range(m):
            if bound[j] > NEG_INF and (i < 0 or bound[j] > bound[i]):
                i = j
        if i < 0:
            break
        if scored >= C:  # the C-th best score so far: stop when no bound reaches it
            kth = _kth_largest(score, m, C)
            if bound[i] * (1.0 + 1e-9) + 1e-15 < kth:
                break
        bound[i] = NEG_INF
        _cand_gram(cx[i], T1sq, G, W3)
        score[i] = _table_score(_bitlen(ci[i]) - 1, gh_w, T, G, W3)
        scored += 1
    for c in range(C):  # selection of the best C among the scored, ties: the smaller node
        b = -1
        for i in range(m):
            if score[i] > NEG_INF and (b < 0 or score[i] > score[b] or (score[i] == score[b] and ci[i] < ci[b])):
                b = i
        cand[c] = ci[b]
        score[b] = NEG_INF
    return C


@njit(cache=True, nogil=True, inline="always")
def _kth_largest(score, m, C):
    """The ``C``-th largest of ``score[:m]`` (at least ``C`` finite)."""
    prev = np.inf
    val = NEG_INF
    for c in range(C):
        val = NEG_INF
        for i in range(m):
            if score[i] < prev and score[i] > val:
                val = score[i]
        prev = val
    return val


@njit(cache=True, nogil=True)
def _rollout_value(nodes, readings, c, leaf, z, tau, scales, gh_w, T, allow_repeat, L, bn, br, cs, gs):
    """Expected final loss after reading node ``c`` (leaf ``leaf``, noise ``z[0]``) and then the greedy
    policy up to ``L`` readings (noise ``z[1:]``). The last reading is not drawn: its expectation is the
    greedy step's own score, so the value is ``sum a_k^2 - max_n E ||mean after reading n||^2`` (the
    conditional expectation of ``sum a_k^2 - ||mean||^2`` given the readings before it)."""
    K = scales.shape[0]
    l = nodes.shape[0]
    for b in range(l):
        bn[b] = nodes[b]
        br[b] = readings[b]
    bn[l] = c
    br[l] = _theta_at(leaf, c, K, scales) + tau * z[0]
    A = 0.0
    for k in range(K):
        A += scales[k] * scales[k]
    if l + 1 >= L:  # nothing after c: the loss of the posterior
        _coord_posterior(bn[: l + 1], br[: l + 1], tau, scales, cs)
        v = A - _posterior_norm2(scales, cs)
        _coord_done(cs)
        return v
    for t in range(l + 1, L):
        nxt, sc = _table_step(bn[:t], br[:t], tau, scales, gh_w, T, allow_repeat, cs, gs)
        if nxt == 0:  # nothing left to read (no repeats): the loss of the posterior so far
            _coord_posterior(bn[:t], br[:t], tau, scales, cs)
            v = A - _posterior_norm2(scales, cs)
            _coord_done(cs)
            return v
        if t == L - 1:
            return A - sc
        bn[t] = nxt
        br[t] = _theta_at(leaf, nxt, K, scales) + tau * z[t - l]
    return A


@njit(cache=True, nogil=True)
def _paired_gain(val, c, M):
    """Mean and standard error of ``val[c] - val[0]`` over the first ``M`` rollouts."""
    d1 = 0.0
    d2 = 0.0
    for j in range(M):
        d = val[c, j] - val[0, j]
        d1 += d
        d2 += d * d
    mean = d1 / M
    return mean, math.sqrt(max(0.0, d2 / M - mean * mean) / max(M - 1, 1))


@njit(cache=True, nogil=True)
def _rollout_rows(nodes, readings, tau, scales, gh_x, gh_w, allow_repeat, U, Z, L, n_cand, screen, out):
    """One-step rollout over the greedy policy: for each sample ``s`` (readings ``readings[s]`` of
    ``nodes[s]``), each of the ``n_cand`` nodes of best greedy score is read and followed by the greedy
    policy up to ``L`` readings, over ``M`` rollouts (leaf ``j`` drawn from the posterior with uniforms
    ``U[j]``, channel noise ``Z[j]``: the same for every candidate). The greedy node is kept unless a
    candidate's mean final loss is lower by more than ``MARGIN`` standard errors of the paired
    differences, so the rollout policy departs from greedy only where its rollouts say it pays.
    The comparison stops early (``screen`` < ``M``): every candidate is first rolled out ``screen``
    times, and only those whose mean final loss is below the greedy node's over these get the other
    ``M - screen`` rollouts (the greedy node too, when one does). Without ``allow_repeat`` (the tokens
    channel, whose repeated reading says nothing new) no node is read twice."""
    M = U.shape[0]
    M1 = min(max(screen, 2), M)
    K = scales.shape[0]
    T = np.zeros((K, 3, gh_x.shape[0], 3))
    _ratio_table(tau, scales, gh_x, T)
    cs = _coord_scratch(K, L)
    gs = _greedy_scratch(K, L)
    bn = np.zeros(L, dtype=np.int64)
    br = np.zeros(L)
    cand = np.zeros(n_cand, dtype=np.int64)
    score = np.zeros(gs[4].shape[0])
    leaf = np.zeros(M, dtype=np.int64)
    val = np.zeros((n_cand, M))
    alive = np.zeros(n_cand, dtype=np.bool_)
    for s in range(nodes.shape[0]):
        C = _top_candidates(nodes[s], readings[s], tau, scales, gh_w, T, allow_repeat, U, cs, gs, cand, score, leaf)
        out[s] = cand[0]
        if C < 2:
            continue
        for c in range(C):
            for j in range(M1):
                val[c, j] = _rollout_value(nodes[s], readings[s], cand[c], leaf[j], Z[j], tau, scales, gh_w, T,
                                           allow_repeat, L, bn, br, cs, gs)
        n_alive = 0
        for c in range(1, C):
            alive[c] = M1 == M or _paired_gain(val, c, M1)[0] < 0.0
            n_alive += alive[c]
        if n_alive == 0:
            continue
        alive[0] = True
        for c in range(C):
            if alive[c]:
                for j in range(M1, M):
                    val[c, j] = _rollout_value(nodes[s], readings[s], cand[c], leaf[j], Z[j], tau, scales, gh_w,
                                               T, allow_repeat, L, bn, br, cs, gs)
        best = 0.0
        for c in range(1, C):
            if not alive[c]:
                continue
            mean, se = _paired_gain(val, c, M)
            if mean + MARGIN * se < 0.0 and mean < best:
                best = mean
                out[s] = cand[c]
