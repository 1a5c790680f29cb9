"""Greedy one-step lookahead over a finite prior's atoms (docs/theory.md section 6; ``fvnum.priors.atoms``).

A candidate read (one coordinate or one unit row) projects the atoms to ``b`` (M,). With weights ``w`` (the
posterior so far, unnormalised), the value of reading it is ``int ||sum_m w_m p(y | m) theta_m||^2 /
sum_m w_m p(y | m) dy`` (``W E||E[theta | y]||^2``: the larger, the smaller the expected loss after the read).
Noiseless (``tau = 0``) the outcomes are the distinct projections (a sum over the groups of equal ``b``);
under noise the integral over ``y`` is the trapezoid rule on a grid of step ``GRID_STEP tau`` (at most
``GRID_MAX`` points) from ``min b - GRID_TAIL tau`` to ``max b + GRID_TAIL tau``: the integrand is a ratio of
Gaussian mixtures, for which the trapezoid rule at that step is accurate far beyond what the choice needs.
Weights below ``LIVE_TOL`` of the largest count as zero. Ties: the first candidate within ``TIE_TOL``
(relative) of the best is kept, so a plain numpy twin picks the same read.
"""
import math

import numpy as np
from numba import njit

GRID_STEP = 0.5
GRID_TAIL = 8.0
GRID_MAX = 2048
LIVE_TOL = 1e-16
TIE_TOL = 1e-12


@njit(cache=True)
def _atoms_read_value(b, w, atoms, tau, s):
    """``W E||E[theta | y]||^2`` of one candidate read (projections ``b``, weights ``w``; ``s``: (D,) scratch)."""
    M, D = atoms.shape
    total = 0.0
    if tau == 0.0:
        order = np.argsort(b)
        i = 0
        while i < M:
            j, p = i, 0.0
            s[:] = 0.0
            while j < M and b[order[j]] == b[order[i]]:
                m = order[j]
                if w[m] > 0.0:
                    p += w[m]
                    for d in range(D):
                        s[d] += w[m] * atoms[m, d]
                j += 1
            if p > 0.0:
                total += (s * s).sum() / p
            i = j
        return total
    lo, hi = np.inf, -np.inf
    for m in range(M):
        if w[m] > 0.0:
            lo, hi = min(lo, b[m]), max(hi, b[m])
    lo, hi = lo - GRID_TAIL * tau, hi + GRID_TAIL * tau
    G = min(GRID_MAX, int(math.ceil((hi - lo) / (GRID_STEP * tau))) + 1)
    h = (hi - lo) / (G - 1)
    for g in range(G):
        y = lo + g * h
        p = 0.0
        s[:] = 0.0
        for m in range(M):
            if w[m] > 0.0:
                e = w[m] * math.exp(-0.5 * ((y - b[m]) / tau) ** 2)
                p += e
                for d in range(D):
                    s[d] += e * atoms[m, d]
        if p > 0.0:
            total += (s * s).sum() / p
    return total * h / (math.sqrt(2.0 * math.pi) * tau)


@njit(cache=True)
def _atoms_greedy_rows(P, logw, atoms, tau, out):
    """``out[i]``: the candidate of largest read value for sample ``i``; ``P`` (m, C, M) the candidates'
    projections of the atoms (``m = 1``: shared by every sample, else one set per sample), ``logw`` (n, M)
    the log posterior weights."""
    n, M = logw.shape
    D = atoms.shape[1]
    C = P.shape[1]
    w = np.empty(M)
    s = np.empty(D)
    for i in range(n):
        top = logw[i].max()
        for m in range(M):
            w[m] = math.exp(logw[i, m] - top) if logw[i, m] > -np.inf else 0.0
            if w[m] < LIVE_TOL:
                w[m] = 0.0
        k = 0 if P.shape[0] == 1 else i
        best, best_value = 0, -np.inf
        for c in range(C):
            v = _atoms_read_value(P[k, c], w, atoms, tau, s)
            if v > best_value + TIE_TOL * abs(best_value) or best_value == -np.inf:
                best, best_value = c, v
        out[i] = best
