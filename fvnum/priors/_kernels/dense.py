"""General (unit) rows: the exact leaf posterior by enumerating the ``2^K`` leaves, O(2^K B) per
sample; the decoder of a batch and the loss of a fixed design with its exact gradient."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from fvnum.priors._kernels.common import NEG_INF, TAU0_FALLBACK, _bitlen, _path_node, _signed_scale, _subtree_masses


@njit(cache=True, nogil=True)
def _leaf_projections(W, scales, P, V):
    """``V[i] = W theta_i`` for every leaf, by incremental prefix sums ``P`` (K+1, B): O(2^K B)."""
    K = scales.shape[0]
    B = W.shape[0]
    for i in range(1 << K):
        start = 1 if i == 0 else K - _bitlen(i ^ (i - 1)) + 1
        for k in range(start, K + 1):
            n = _path_node(i, K, k)
            v = _signed_scale(i, K, k, scales)
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
    _normalise_leaf_masses(mass, nl)


@njit(cache=True, nogil=True)
def _normalise_leaf_masses(mass, nl):
    """Leaf log-likelihoods ``mass[nl:]`` (not all ``-inf``) to the posterior under the uniform prior, and
    the subtree masses of every inner node."""
    mx = NEG_INF
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
    _subtree_masses(mass, nl)


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
def _mean_and_error(mass, scales, leaf, mean, e):
    """Posterior mean ``mean`` (D + 1,) from node masses and, when ``leaf >= 0``, ``e = mean - theta_leaf``
    (into ``e``, which may be ``mean`` itself)."""
    K = scales.shape[0]
    D = (1 << K) - 1
    for n in range(1, D + 1):
        mean[n] = scales[_bitlen(n) - 1] * (mass[2 * n] - mass[2 * n + 1])
        e[n] = mean[n]
    if leaf >= 0:
        for k in range(1, K + 1):
            e[_path_node(leaf, K, k)] -= _signed_scale(leaf, K, k, scales)


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


@njit(cache=True, nogil=True)
def _design_reading(W, leaf, noise_s, tau, scales, phi):
    """``phi = W theta_leaf + tau xi``."""
    K = scales.shape[0]
    for b in range(W.shape[0]):
        phi[b] = tau * noise_s[b]
    for k in range(1, K + 1):
        n = _path_node(leaf, K, k)
        t = _signed_scale(leaf, K, k, scales)
        for b in range(W.shape[0]):
            phi[b] += t * W[b, n - 1]


@njit(cache=True, nogil=True)
def _grad_terms(mass, e, em, phi, V, scales, dots, H, gr):
    """Per leaf ``g_i = 2 w_i (<e, theta_i> - <e, m>)``, ``H[2^K + i] = g_i r_i`` with subtree sums in
    ``H``, and ``gr = sum_i g_i r_i``."""
    K = scales.shape[0]
    nl = 1 << K
    B = phi.shape[0]
    for b in range(B):
        gr[b] = 0.0
    for i in range(nl):
        start = 1 if i == 0 else K - _bitlen(i ^ (i - 1)) + 1
        for k in range(start, K + 1):
            dots[k] = dots[k - 1] + _signed_scale(i, K, k, scales) * e[_path_node(i, K, k)]
        g = 2.0 * mass[nl + i] * (dots[K] - em)
        for b in range(B):
            h = g * (phi[b] - V[i, b])
            H[nl + i, b] = h
            gr[b] += h
    for h in range(nl - 1, 0, -1):
        for b in range(B):
            H[h, b] = H[2 * h, b] + H[2 * h + 1, b]


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
    P, V, mass = np.zeros((K + 1, B)), np.zeros((nl, B)), np.zeros(2 * nl)
    mean, e, phi = np.zeros(D + 1), np.zeros(D + 1), np.zeros(B)
    H, dots, gr = np.zeros((2 * nl, B)), np.zeros(K + 1), np.zeros(B)
    _leaf_projections(W, scales, P, V)
    total = 0.0
    for s in range(leaves.shape[0]):
        leaf = leaves[s]
        _design_reading(W, leaf, noise[s], tau, scales, phi)
        _leaf_posterior(V, phi, tau, 0.0, TAU0_FALLBACK * scales[K - 1], mass)
        _mean_and_error(mass, scales, leaf, mean, e)
        loss = 0.0
        em = 0.0
        for n in range(1, D + 1):
            loss += e[n] * e[n]
            em += e[n] * mean[n]
        total += loss
        _grad_terms(mass, e, em, phi, V, scales, dots, H, gr)
        # + (1/tau^2) sum_i g_i r_i theta_i^T: column n gets a_k (H[2n] - H[2n+1])
        for n in range(1, D + 1):
            a = scales[_bitlen(n) - 1]
            for b in range(B):
                out_grad[b, n - 1] += inv * a * (H[2 * n, b] - H[2 * n + 1, b])
        # - (1/tau^2) (sum_i g_i r_i) theta^T
        for k in range(1, K + 1):
            n = _path_node(leaf, K, k)
            t = _signed_scale(leaf, K, k, scales)
            for b in range(B):
                out_grad[b, n - 1] -= inv * gr[b] * t
    return total
