"""The generalised inverse Gaussian integral of the tokens channel's law (``fvnum.priors._kernels.tokens``):

    J(lam, alpha, beta) = int_0^inf r^(lam - 1) exp(-(alpha r + beta / r) / 2) dr = 2 (beta/alpha)^(lam/2) K_lam(x),

``x = sqrt(alpha beta)``: by the trapezoid rule in ``log r`` (``_log_gig``, any arguments), and through
``T(x) = log(2 K_lam(x)) + lam log x + x`` (so ``log J = T(x) - lam log alpha - x``), exactly
(``_gig_t_exact``: the trapezoid rule, or Hankel's expansion at large ``x``) or from a table of ``T`` for
one ``lam`` (``gig_table``, ``_gig_cell``, ``_tab_poly``): piecewise Chebyshev in ``x``, its cells built on
first use, relative error about 1e-14 (tested against ``scipy.special.kve``), at the cost of a polynomial.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

GIG_DROP = 38.0  # the trapezoid sum stops where the integrand is below exp(-GIG_DROP) of its peak
GIG_STEPS = 4000  # at most this many points each side of the peak


@njit(cache=True, nogil=True, inline="always")
def _gig_peak(lam, alpha, beta):
    """Peak ``(t0, u = e^t0, f0, kappa)`` of ``f(t) = lam t - (alpha e^t + beta e^-t) / 2`` and its curvature."""
    s = math.sqrt(lam * lam + alpha * beta)
    u = (lam + s) / alpha if lam >= 0 else beta / (s - lam)
    t0 = math.log(u)
    kap = 0.5 * (alpha * u + beta / u)
    return t0, u, lam * t0 - kap, kap


@njit(cache=True, nogil=True)
def _gig_sum(lam, ap, bp, h):
    """``h sum_j exp(f(t0 + j h) - f0)`` for ``f(t0 + d) - f0 = lam d - ap (e^d - 1) - bp (e^-d - 1)``, summed
    outwards from the peak ``d = 0`` until below ``exp(-GIG_DROP)``."""
    total = 1.0
    for side in (1.0, -1.0):
        for j in range(1, GIG_STEPS):
            # with e^a - 1 = E and 1 - e^-a = E / (1 + E): no cancellation of f's large terms
            a = j * h
            E = math.expm1(a)
            F = E / (1.0 + E)
            v = lam * a - ap * E + bp * F if side > 0 else -lam * a - bp * E + ap * F
            if v < -GIG_DROP:
                break
            total += math.exp(v)
    return h * total


@njit(cache=True, nogil=True, inline="always")
def _log_gig(lam, alpha, beta):
    """``log int_0^inf r^(lam - 1) exp(-(alpha r + beta / r) / 2) dr`` (``alpha, beta > 0``), by the
    trapezoid rule in ``t = log r`` from the peak of the (log-concave, entire) integrand ``exp(f(t))``:
    step ``h = min(1/8, 0.7 / sqrt(kappa))`` (errors about ``exp(-pi^2 / (2 h))`` from the strip of
    analyticity and ``exp(-2 pi^2 / (kappa h^2))`` from the peak's width: both below 1e-17), summed
    outwards until below ``exp(-GIG_DROP)`` of the peak."""
    t0, u, f0, kap = _gig_peak(lam, alpha, beta)
    h = min(0.125, 0.7 / math.sqrt(kap))
    return f0 + math.log(_gig_sum(lam, 0.5 * alpha * u, 0.5 * beta / u, h))


@njit(cache=True, nogil=True)
def _gig_t_large(lam, x):
    """``T(x)`` for ``x >= max(1e6, 4 lam^2)`` by Hankel's expansion ``K_lam(x) = sqrt(pi / (2 x)) e^-x sum_k
    a_k x^-k``, ``a_k = a_{k-1} (4 lam^2 - (2k - 1)^2) / (8 k)``: its terms fall by 8 or more per step, and the
    error is below the first term left out."""
    total = 1.0
    term = 1.0
    mu = 4.0 * lam * lam
    for k in range(1, 60):
        term *= (mu - (2 * k - 1) ** 2) / (8.0 * k * x)
        total += term
        if abs(term) < 1e-17 * abs(total):
            break
    return 0.5 * math.log(2.0 * math.pi) + (lam - 0.5) * math.log(x) + math.log(total)


@njit(cache=True, nogil=True)
def _gig_t_exact(lam, x):
    """``T(x) = log(2 K_lam(x)) + lam log x + x = log J(lam, x, x) + lam log x + x`` by the trapezoid rule of
    ``_log_gig``, without the cancellation between ``J``'s exponent (about ``-x``) and ``x``: with ``a = |lam|``
    (``K_lam = K_a``), the peak ``u = (a + s) / x``, ``s = sqrt(a^2 + x^2)``, ``f0 + a log x + x = a log(a + s)
    - x (u - 1)^2 / (2 u)``."""
    a = abs(lam)
    if x >= max(1e6, 4.0 * a * a):  # the trapezoid's terms cancel to ~x 1e-16 here: Hankel's series instead
        return _gig_t_large(lam, x)
    s = math.sqrt(a * a + x * x)
    u = (a + s) / x
    um1 = (a + a * a / (s + x)) / x  # u - 1
    kap = 0.5 * x * (u + 1.0 / u)
    h = min(0.125, 0.7 / math.sqrt(kap))
    t = a * math.log(a + s) - 0.5 * x * um1 * um1 / u + math.log(_gig_sum(a, 0.5 * x * u, 0.5 * x / u, h))
    return t + (lam - a) * math.log(x)


# --- a table of the Bessel part of J: x = sqrt(alpha beta), J = 2 (beta/alpha)^(lam/2) K_lam(x) ---------------
# T(x) = log(2 K_lam(x)) + lam log x + x, so that log J(lam, alpha, beta) = T(x) - lam log alpha - x. Its cells
# split each octave 2^e <= x < 2^(e+1) into 2^TAB_BITS equal parts (a cell's number is read off the bits of x);
# on each, the Chebyshev interpolant of degree TAB_DEG of T (relative error ~1e-15, tested against
# scipy.special.kve) in u = (x - mid) / half-width in [-1, 1], in monomials. Cells are built on first use.
TAB_BITS = 4
TAB_DEG = 7  # _tab_poly evaluates exactly this degree
TAB_E_LO, TAB_E_HI = -40, 64  # octaves held; x outside them is computed by _log_gig directly
TAB_CELLS = (TAB_E_HI - TAB_E_LO) << TAB_BITS
TAB_ROW = TAB_DEG + 3  # [mid, 1 / half-width (0: not built), a_0 .. a_TAB_DEG]
_TAB_SHIFT = 52 - TAB_BITS
_TAB_BASE = (TAB_E_LO + 1023) << TAB_BITS


def gig_table():
    """An empty table of ``T`` for one ``lam`` (cells are built by the kernels on first use)."""
    return np.zeros((TAB_CELLS, TAB_ROW))


@njit(cache=True, nogil=True)
def _gig_cell(lam, c, tab):
    """Build cell ``c`` of the table of ``T`` for ``lam``: ``T`` at the ``TAB_DEG + 1`` Chebyshev points, their
    Chebyshev coefficients, then monomials in ``u`` (``T_{j+1} = 2 u T_j - T_{j-1}``)."""
    n = TAB_DEG + 1
    e = (c >> TAB_BITS) + TAB_E_LO
    width = 2.0 ** (e - TAB_BITS)
    mid = 2.0**e + ((c & ((1 << TAB_BITS) - 1)) + 0.5) * width
    hw = 0.5 * width
    f = np.empty(n)
    for k in range(n):
        x = mid + hw * math.cos(math.pi * (k + 0.5) / n)
        f[k] = _gig_t_exact(lam, x)
    t_prev, t_cur, t_next = np.zeros(n), np.zeros(n), np.zeros(n)  # monomial coefficients of T_{j-1}, T_j
    t_cur[0] = 1.0
    for j in range(n):
        cj = 0.0
        for k in range(n):
            cj += f[k] * math.cos(math.pi * j * (k + 0.5) / n)
        cj *= (1.0 if j == 0 else 2.0) / n
        for m in range(n):
            tab[c, 2 + m] += cj * t_cur[m]
        for m in range(n):  # T_{j+1}
            t_next[m] = (2.0 * t_cur[m - 1] if m > 0 else 0.0) - (t_prev[m] if j > 0 else 0.0)
        if j == 0:
            t_next[1] = 1.0  # T_1 = u
        for m in range(n):
            t_prev[m] = t_cur[m]
            t_cur[m] = t_next[m]
    tab[c, 0] = mid
    tab[c, 1] = 1.0 / hw


@njit(cache=True, nogil=True, inline="always")
def _tab_poly(tab, c, x):
    """``T(x)`` from the built cell ``c`` of ``tab`` (Estrin's scheme: a short chain of dependent operations)."""
    u = (x - tab[c, 0]) * tab[c, 1]
    u2 = u * u
    lo = (tab[c, 2] + tab[c, 3] * u) + u2 * (tab[c, 4] + tab[c, 5] * u)
    hi = (tab[c, 6] + tab[c, 7] * u) + u2 * (tab[c, 8] + tab[c, 9] * u)
    return lo + (u2 * u2) * hi


@njit(cache=True, nogil=True)
def _gig_t(lam, x, tab):
    """``T(x) = log(2 K_lam(x)) + lam log x + x`` for one ``x`` from the table ``tab`` of ``lam`` (building the
    cell on first use), or exactly when ``x`` is off its octaves."""
    c = (np.full(1, x).view(np.int64)[0] >> _TAB_SHIFT) - _TAB_BASE
    if c < 0 or c >= TAB_CELLS:
        return _gig_t_exact(lam, x)
    if tab[c, 1] == 0.0:
        _gig_cell(lam, c, tab)
    return _tab_poly(tab, c, x)
