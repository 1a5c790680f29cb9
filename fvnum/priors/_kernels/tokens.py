"""The exact decoder of the tokens channel on the tree prior (docs/theory.md section 2; docs/decoders.md).

Every reading is ``phi_b = <w_b, S>`` of the one statistic ``S = (1/N) sum_i y_i x_i``. Its law given
the latent, exactly (not only at the CLT level): with ``sigma2 = |theta|^2 + s2``, ``y ~ N(0, sigma2 I_N)``
and ``x_i | y_i ~ N(theta y_i / sigma2, I - theta theta^T / sigma2)``, so with ``r = |y|^2 / (N sigma2) ~
chi2_N / N``,

    S | theta, r ~ N(theta r, (sigma2 r / N) (I - theta theta^T / sigma2)),

a Gaussian scale mixture (its covariance is the CLT's ``(sigma2 I + theta theta^T) / N``, its shape is
not Gaussian at small N). Let ``V`` (``rk`` orthonormal rows) span the rows read and ``z = V S`` (what the
readings determine, ``z = V W^+ phi``: a repeated row, or one in the span of others, adds nothing). On
the tree prior ``sigma2`` is the same for every leaf; with ``y = V theta_m``, ``p = |y|^2``, ``q = <y, z>``,
``zz = |z|^2``, integrating ``r`` out (a generalised inverse Gaussian integral) gives, up to a constant of
the leaf,

    log p(z | m) = log J(lam, alpha, beta) - 1/2 log(1 - p / sigma2) + N q / (sigma2 - p),
    J = int_0^inf r^(lam - 1) exp(-(alpha r + beta / r) / 2) dr,  lam = (N - rk) / 2,
    alpha = N sigma2 / (sigma2 - p),  beta = N (zz + q^2 / (sigma2 - p)) / sigma2     (_tokens_loglik).

For coordinate rows ``V`` is the set of distinct read nodes, ``z_n`` the mean of node ``n``'s readings
(identical numbers in a simulation), and along a leaf's path ``p = sum a_k^2``, ``q = sum a_k s_k z_{n_k}``
over the read path nodes. Leaves below an unread child of the closure share ``(p, q)``: one downward
pass (prefix sums), one group per such child and one upward pass (log masses) give the exact posterior
in O(closure) (``_tokens_posterior``), written into the coordinate scratch ``cs`` (``pplus``, ``pp``,
marks), so ``coord._coord_loss`` and friends read it unchanged. General rows enumerate the ``2^K``
leaves (``_tokens_dense_decode``), O(2^K rk); there ``J = 2 (beta/alpha)^(lam/2) K_lam(sqrt(alpha beta))``
is read from a table of the Bessel function for the batch's ``lam`` (``_gig_t``: piecewise Chebyshev in
``x = sqrt(alpha beta)``, built on first use, kept across calls by ``fvnum.priors.tree``), so a leaf costs about
what the gaussian channel's does. The law travels as ``(n_tok, sigma2)``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from fvnum.priors._kernels.common import LOG2, _bitlen, _lae, _path_node, _signed_scale, _subtree_masses
from fvnum.priors._kernels.coord import _coord_downward, _coord_loss, _coord_mean_at, _coord_reset, _coord_scratch, _coord_write
from fvnum.priors._kernels.gig import TAB_CELLS, TAB_ROW, _TAB_BASE, _TAB_SHIFT, _gig_cell, _gig_t_exact, _log_gig, _tab_poly

EXP_FLOOR = -708.0  # leaf weights below exp(EXP_FLOOR) of the largest are set to 0 (they add < 1e-307)
ONE_PASS_COND = 8.0  # row spans: one Gram-Schmidt pass up to this condition bound, two above
_REASSOC = {"reassoc", "contract"}  # sums in any order (SIMD), fused multiply-adds: rounding only
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # ln 2 = hi + lo, k hi exact


@njit(cache=True, nogil=True, inline="always")
def _tokens_terms(p, q, zz, rk, n_tok, sigma2):
    """``(lam, alpha, beta, rest)`` of ``log p(z | leaf) = log J(lam, alpha, beta) + rest``."""
    g = sigma2 - p
    beta = max(n_tok * (zz + q * q / g) / sigma2, 1e-300)
    return 0.5 * (n_tok - rk), n_tok * sigma2 / g, beta, -0.5 * math.log1p(-p / sigma2) + n_tok * q / g


@njit(cache=True, nogil=True, inline="always")
def _tokens_loglik(p, q, zz, rk, n_tok, sigma2):
    """``log p(z | leaf)`` up to a constant, from ``p = |y|^2``, ``q = <y, z>``, ``zz = |z|^2`` and the rank
    ``rk`` of the rows read (module docstring)."""
    lam, alpha, beta, rest = _tokens_terms(p, q, zz, rk, n_tok, sigma2)
    return _log_gig(lam, alpha, beta) + rest


@njit(cache=True, nogil=True)
def _tokens_posterior(nodes, readings, n_tok, sigma2, scales, cs):
    """Exact tokens-channel posterior given readings ``readings[b]`` of nodes ``nodes[b]`` (0: idle), in
    the coordinate scratch ``cs``. Its arrays hold here: ``lp`` the mean reading of a read node, ``lm``
    its number of readings, ``l0`` and ``O`` the prefix sums ``p`` and ``q`` of the path down to a
    closure node, ``U`` the log mass of its subtree; ``pplus``, ``pp``, ``mark``, ``byd``, ``cnt`` as in
    ``coord``. The caller reads the posterior and then calls ``coord._coord_done``."""
    lp, lm, l0, U, O, pplus, mark, byd, cnt = cs[0], cs[1], cs[2], cs[3], cs[4], cs[5], cs[7], cs[8], cs[9]
    K = scales.shape[0]
    for k in range(K):
        cnt[k] = 0
    for b in range(nodes.shape[0]):
        n = nodes[b]
        if n <= 0:
            continue
        m = n
        km = _bitlen(n)
        while m >= 1 and mark[m] == 0:
            mark[m] = 1
            lp[m] = 0.0
            lm[m] = 0.0
            byd[km - 1, cnt[km - 1]] = m
            cnt[km - 1] += 1
            m >>= 1
            km -= 1
        lm[n] += 1.0
        lp[n] += (readings[b] - lp[n]) / lm[n]  # running mean: exact when the readings are equal
    if cnt[0] == 0:
        return
    zz = 0.0  # |z|^2 and the rank: the distinct read nodes
    rk = 0.0
    for k in range(1, K + 1):
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            if lm[n] > 0:
                zz += lp[n] * lp[n]
                rk += 1.0
    l0[1] = 0.0
    O[1] = 0.0
    for k in range(1, K):  # prefix sums, parents before children
        a = scales[k - 1]
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            p = l0[n]
            dq = 0.0
            if lm[n] > 0:
                p += a * a
                dq = a * lp[n]
            for ch in (2 * n, 2 * n + 1):
                if mark[ch]:
                    l0[ch] = p
                    O[ch] = O[n] + (dq if ch == 2 * n else -dq)
    for k in range(K, 0, -1):  # log masses, children before parents
        a = scales[k - 1]
        lg = (K - k) * LOG2  # log of the number of leaves below a child of a depth-k node
        for t in range(cnt[k - 1]):
            n = byd[k - 1, t]
            p = l0[n]
            q = O[n]
            dq = 0.0
            if lm[n] > 0:
                p += a * a
                dq = a * lp[n]
            if k < K and mark[2 * n]:
                up = U[2 * n]
            else:
                up = lg + _tokens_loglik(p, q + dq, zz, rk, n_tok, sigma2)
            if k < K and mark[2 * n + 1]:
                um = U[2 * n + 1]
            else:
                um = lg + _tokens_loglik(p, q - dq, zz, rk, n_tok, sigma2)
            z = _lae(up, um)
            U[n] = z
            pplus[n] = math.exp(up - z)
    _coord_downward(K, cs)


@njit(cache=True, nogil=True)
def _tokens_coord_decode(nodes, readings, n_tok, sigma2, scales, leaves, out_loss, out_mean):
    """``coord._tree_coord_decode`` under the tokens law ``(n_tok, sigma2)``: coordinate readings ``nodes``
    (n, B), ``readings`` (n, B); losses against ``leaves`` into ``out_loss`` unless empty, posterior means
    into ``out_mean`` (n, D) unless empty."""
    cs = _coord_scratch(scales.shape[0], nodes.shape[1])
    byd, cnt = cs[8], cs[9]
    for s in range(nodes.shape[0]):
        _tokens_posterior(nodes[s], readings[s], n_tok, sigma2, scales, cs)
        _coord_write(s, leaves, scales, cs, out_loss, out_mean)
        _coord_reset(cs[7], byd, cnt)


@njit(cache=True, nogil=True)
def _exp_weights(mass, nl, mx, ebits, scale):
    """``mass[nl + i] = exp(mass[nl + i] - mx)`` (0 below ``exp(EXP_FLOOR)``); returns their sum. ``exp(d) =
    2^k e^r`` with ``d = k ln 2 + r``, ``|r| <= ln 2 / 2``, ``e^r`` by its Taylor polynomial of degree 13
    (truncation below 1e-17; within a few ulp of libm's, tested) and ``2^k`` from its bits (``ebits``, a
    work array of length ``nl``, and ``scale``, its float64 view): unlike libm's ``exp`` in a loop, this runs
    in SIMD."""
    for i in range(nl):
        d = max(mass[nl + i] - mx, EXP_FLOOR)
        k = math.floor(d * 1.4426950408889634 + 0.5)
        r = (d - k * _LN2_HI) - k * _LN2_LO
        r2 = r * r  # Estrin's scheme
        r4 = r2 * r2
        p = ((1.0 + r) + r2 * (0.5 + r * (1.0 / 6.0))) + r4 * ((1.0 / 24.0 + r * (1.0 / 120.0))
                                                              + r2 * (1.0 / 720.0 + r * (1.0 / 5040.0)))
        p += (r4 * r4) * ((1.0 / 40320.0 + r * (1.0 / 362880.0)) + r2 * (1.0 / 3628800.0 + r * (1.0 / 39916800.0))
                          + r4 * (1.0 / 479001600.0 + r * (1.0 / 6227020800.0)))
        ebits[i] = (np.int64(k) + 1023) << 52
        mass[nl + i] = p if d > EXP_FLOOR else 0.0
    total = 0.0
    for i in range(nl):
        e = mass[nl + i] * scale[i]
        mass[nl + i] = e
        total += e
    return total


_SQRT2 = 1.4142135623730951
_MANT = (1 << 52) - 1
_ONE_BITS = 1023 << 52


@njit(cache=True, nogil=True)
def _log_pass(x, out, xi, mbits, mant, nl):
    """``out[i] = log(x[i])`` for ``nl`` positive normal ``x`` (``xi``: the int64 view of ``x``; ``mbits``
    and ``mant``: an int64 work array of length ``nl`` and its float64 view). ``x = 2^e m`` read off the
    bits, ``m`` moved into ``[sqrt(1/2), sqrt(2))``, ``log m = 2 atanh(t)``, ``t = (m - 1) / (m + 1)``,
    ``|t| < 0.172``, by its series to ``t^23`` (truncation below 1e-18; within a few ulp of libm's, tested):
    in passes without branches or calls (SIMD), unlike libm's ``log`` in a loop."""
    for i in range(nl):
        b = xi[i]
        mbits[i] = (b & _MANT) | _ONE_BITS
        out[i] = ((b >> 52) & 0x7FF) - 1023
    for i in range(nl):
        m = mant[i]
        big = m > _SQRT2
        m = m * 0.5 if big else m
        e = out[i] + 1.0 if big else out[i]
        t = (m - 1.0) / (m + 1.0)
        t2 = t * t
        t4 = t2 * t2
        t8 = t4 * t4
        p = ((2.0 + t2 * (2.0 / 3.0)) + t4 * (2.0 / 5.0 + t2 * (2.0 / 7.0))) + t8 * (
            (2.0 / 9.0 + t2 * (2.0 / 11.0)) + t4 * (2.0 / 13.0 + t2 * (2.0 / 15.0))) + (t8 * t8) * (
            (2.0 / 17.0 + t2 * (2.0 / 19.0)) + t4 * (2.0 / 21.0 + t2 * (2.0 / 23.0)))
        out[i] = (e * _LN2_HI + t * p) + e * _LN2_LO


@njit(cache=True, nogil=True)
def _tokens_leaf_loglik(YT, z, s, ginv, asc, lead, n_tok, cb, lam, tab, use_tab, built, w, mass):
    """Leaf log-likelihoods (up to a constant) into ``mass[2^K:]`` given the readings ``z[s]`` (r,) in the
    basis whose leaf projections are ``YT`` (r, 2^K), with ``ginv``, ``asc``, ``lead`` of the leaves (see
    ``_tokens_dense_decode``); returns their maximum. ``T`` from ``tab`` when ``use_tab`` (cells built
    here on first use; ``built = [lo, hi]``: every cell in between is built), else exactly. In passes over
    the leaves without branches or calls (SIMD); ``w = (q, xs, xi, base, cs)``: work arrays of length 2^K
    (``xi``: the int64 view of ``xs``, the bits of x: its table cell)."""
    qs, xs, xi, base, cs = w
    r, nl = YT.shape
    zz = 0.0
    for b in range(r):
        zz += z[s, b] * z[s, b]
    for i in range(nl):
        qs[i] = 0.0
    for b in range(r):
        zb = z[s, b]
        for i in range(nl):
            qs[i] += YT[b, i] * zb
    for i in range(nl):
        q = qs[i]
        g = ginv[i]
        x = math.sqrt(asc[i] * max(cb * (zz + q * q * g), 1e-300))  # sqrt(alpha beta)
        xs[i] = x
        base[i] = lead[i] + n_tok * q * g - x
    lo = TAB_CELLS
    hi = -1
    for i in range(nl):
        c = (xi[i] >> _TAB_SHIFT) - _TAB_BASE
        cs[i] = c
        lo = min(lo, c)
        hi = max(hi, c)
    mx = -np.inf
    if use_tab and lo >= 0 and hi < TAB_CELLS:  # the common case: every x on the table
        if lo < built[0] or hi > built[1]:  # make [lo, hi] and the cells between it and [built] built
            if built[0] <= built[1]:
                lo = min(lo, built[0])
                hi = max(hi, built[1])
            for c in range(lo, hi + 1):
                if tab[c, 1] == 0.0:
                    _gig_cell(lam, c, tab)
            built[0] = lo
            built[1] = hi
        for i in range(nl):
            v = base[i] + _tab_poly(tab, cs[i], xs[i])
            mass[nl + i] = v
            mx = max(mx, v)
        return mx
    for i in range(nl):
        c = cs[i]
        if use_tab and 0 <= c < TAB_CELLS:
            if tab[c, 1] == 0.0:
                _gig_cell(lam, c, tab)
            v = base[i] + _tab_poly(tab, c, xs[i])
        else:
            v = base[i] + _gig_t_exact(lam, xs[i])
        mass[nl + i] = v
        mx = max(mx, v)
    return mx


@njit(cache=True, nogil=True, fastmath=_REASSOC)
def _tokens_rows(V, sv, scales, n_tok, sigma2, R, rows, lw):
    """What depends on the rows ``V[sv]`` only: their rank ``rk`` (returned), and per leaf the projections ``y = V
    theta_m`` (``YT``, (r, 2^K)), ``ginv = 1 / (sigma2 - p)``, ``asc = alpha = N sigma2 ginv`` and ``lead =
    (lam - 1/2) log(1 - p / sigma2)``, ``p = |y|^2``, in ``rows = (YT, ginv, asc, lead)``. The projections
    top-down over the heap (``R[:, c]`` (r, 2^K): the partial sum of the path down to node ``c``; leaf ``i``
    is ``c = 2^K + i``, in ``YT[:, i]``), in passes along contiguous memory: O(2^K r). ``lw``: the work
    arrays of ``_log_pass``."""
    YT, ginv, asc, lead = rows
    r, D = V.shape[1], V.shape[2]
    K = scales.shape[0]
    nl = 1 << K
    rk = 0
    for b in range(r):
        nrm = 0.0
        for d in range(D):
            nrm += V[sv, b, d] * V[sv, b, d]
        if nrm > 0.5:
            rk += 1
        R[b, 1] = 0.0
        for k in range(1, K):
            a = scales[k - 1]
            for n in range(1 << (k - 1), 1 << k):
                w = a * V[sv, b, n - 1]
                R[b, 2 * n] = R[b, n] + w
                R[b, 2 * n + 1] = R[b, n] - w
        a = scales[K - 1]
        for n in range(nl >> 1, nl):  # the last level: the leaves
            w = a * V[sv, b, n - 1]
            YT[b, 2 * n - nl] = R[b, n] + w
            YT[b, 2 * n + 1 - nl] = R[b, n] - w
    lam = 0.5 * (n_tok - rk)
    for i in range(nl):
        ginv[i] = 0.0
    for b in range(r):
        for i in range(nl):
            y = YT[b, i]
            ginv[i] += y * y
    for i in range(nl):
        p = ginv[i]
        g = 1.0 / (sigma2 - p)
        ginv[i] = g
        asc[i] = n_tok * sigma2 * g
        lw[2][i] = (sigma2 - p) / sigma2  # 1 - p / sigma2 >= s2 / sigma2 > 0
    _log_pass(lw[2], lead, lw[3], lw[0], lw[1], nl)
    for i in range(nl):
        lead[i] *= lam - 0.5
    return rk


@njit(cache=True, nogil=True, inline="always")
def _leaf_mean(mass, mx, scales, eb, mean):
    """Posterior mean ``mean`` (D + 1,) from leaf log-likelihoods ``mass[2^K:]`` of maximum ``mx`` (uniform
    prior); ``eb = (bits, scale)`` for ``_exp_weights``."""
    K = scales.shape[0]
    nl = 1 << K
    inv = 1.0 / _exp_weights(mass, nl, mx, eb[0], eb[1])
    _subtree_masses(mass, nl)  # unnormalised
    for k in range(1, K + 1):
        a = scales[k - 1] * inv
        for n in range(1 << (k - 1), 1 << k):
            mean[n] = a * (mass[2 * n] - mass[2 * n + 1])


@njit(cache=True, nogil=True)
def _tokens_dense_decode(V, z, n_tok, sigma2, scales, tabs, tab_of_rank, leaves, out_loss, out_mean):
    """General rows under the tokens law ``(n_tok, sigma2)``: ``V`` (m, r, D) orthonormal rows of the span
    read (zero rows allowed: they carry nothing), ``m = 1`` (shared) or ``m = n``; ``z`` (n, r) the
    readings in that basis (0 on a zero row). ``tabs[tab_of_rank[rk]]`` (TAB_CELLS, TAB_ROW): the table of
    ``T`` for ``lam = (N - rk) / 2`` (cells built here on first use; ``-1``: none, ``T`` computed exactly).
    Writes losses against ``leaves`` into ``out_loss`` unless empty and posterior means into ``out_mean``
    (n, D) unless empty. O(2^K r) per sample; per leaf ``log p(z | m) = T(x) - x + N q / (sigma2 - p) +
    (lam - 1/2) log(1 - p / sigma2)`` up to a constant (``log alpha = log(N sigma2) - log(1 - p / sigma2)``),
    with what depends on ``p`` only computed once per set of rows (``_tokens_rows``)."""
    K = scales.shape[0]
    D = (1 << K) - 1
    nl = 1 << K
    r = V.shape[1]
    R = np.zeros((r, nl))
    lbits, lx = np.zeros(nl, dtype=np.int64), np.zeros(nl)
    lw = (lbits, lbits.view(np.float64), lx, lx.view(np.int64))
    rows = (np.zeros((r, nl)), np.zeros(nl), np.zeros(nl), np.zeros(nl))
    xs = np.zeros(nl)
    w = (np.zeros(nl), xs, xs.view(np.int64), np.zeros(nl), np.zeros(nl, dtype=np.int64))
    bits = np.zeros(nl, dtype=np.int64)
    eb = (bits, bits.view(np.float64))  # views made once: making one costs about as much as 50 leaves
    built = np.zeros(2, dtype=np.int64)
    mass, mean = np.zeros(2 * nl), np.zeros(D + 1)
    held = tabs if tabs.shape[0] > 0 else np.zeros((1, 1, TAB_ROW))
    tab = held[0]
    rk = 0
    ti = -1
    for s in range(z.shape[0]):
        if s == 0 or V.shape[0] > 1:
            rk = _tokens_rows(V, s if V.shape[0] > 1 else 0, scales, n_tok, sigma2, R, rows, lw)
            t_prev = ti
            ti = tab_of_rank[rk] if rk < tab_of_rank.shape[0] else -1
            if s == 0 or ti != t_prev:
                tab = held[max(ti, 0)]
                built[0] = TAB_CELLS  # no cell of this table known built yet
                built[1] = -1
        mx = 0.0
        if rk == 0:  # nothing read: the prior
            mass[nl:] = 0.0
        else:
            mx = _tokens_leaf_loglik(rows[0], z, s, rows[1], rows[2], rows[3], n_tok, n_tok / sigma2,
                                     0.5 * (n_tok - rk), tab, ti >= 0, built, w, mass)
        _leaf_mean(mass, mx, scales, eb, mean)
        if out_mean.shape[0] > 0:
            for n in range(1, D + 1):
                out_mean[s, n - 1] = mean[n]
        if out_loss.shape[0] > 0:
            leaf = leaves[s]
            for k in range(1, K + 1):  # the error: the mean less theta (on the leaf's path)
                mean[_path_node(leaf, K, k)] -= _signed_scale(leaf, K, k, scales)
            loss = 0.0
            for n in range(1, D + 1):
                loss += mean[n] * mean[n]
            out_loss[s] = loss


@njit(cache=True, nogil=True)
def _chain_loss(leaf, nodes, readings, tau, n_tok, sigma2, scales, w):
    """Loss of the exact posterior mean when ``nodes[l]`` is a node of depth ``l + 1`` and each is a child
    of the one before (the path strategy's own routing), in O(L): the closure is the chain itself.
    ``n_tok > 0``: the tokens law ``(n_tok, sigma2)``; else the gaussian likelihood of noise ``tau > 0``.
    ``w = (Z, pl, P, Q)``, four arrays of length ``L``: log subtree masses, P(+ | passes the node),
    prefix sums ``p`` and ``q``."""
    Z, pl, P, Q = w
    K = scales.shape[0]
    L = nodes.shape[0]
    tokens = n_tok > 0
    zz = 0.0
    if tokens:
        p = 0.0
        q = 0.0
        for l in range(L):
            P[l] = p
            Q[l] = q
            a = scales[l]
            p += a * a
            zz += readings[l] * readings[l]
            if l + 1 < L:
                q += a * readings[l] if nodes[l + 1] == 2 * nodes[l] else -a * readings[l]
    inv = 0.0 if tokens else 1.0 / (tau * tau)
    for l in range(L - 1, -1, -1):
        a = scales[l]
        r = readings[l]
        plus_on = l + 1 < L and nodes[l + 1] == 2 * nodes[l]
        minus_on = l + 1 < L and not plus_on
        if tokens:
            lg = (K - l - 1) * LOG2
            pp_ = P[l] + a * a
            up = Z[l + 1] if plus_on else lg + _tokens_loglik(pp_, Q[l] + a * r, zz, L, n_tok, sigma2)
            um = Z[l + 1] if minus_on else lg + _tokens_loglik(pp_, Q[l] - a * r, zz, L, n_tok, sigma2)
        else:  # log mean likelihood against "no reading"; an unread subtree contributes 0
            up = (r * a - 0.5 * a * a) * inv + (Z[l + 1] if plus_on else 0.0)
            um = (-r * a - 0.5 * a * a) * inv + (Z[l + 1] if minus_on else 0.0)
        zl = _lae(up, um)
        Z[l] = zl if tokens else zl - LOG2
        pl[l] = math.exp(up - zl)
    loss = 0.0
    pp = 1.0
    for l in range(L):
        a = scales[l]
        mean = a * pp * (2.0 * pl[l] - 1.0)
        if _path_node(leaf, K, l + 1) == nodes[l]:
            d = mean - _signed_scale(leaf, K, l + 1, scales)
            loss += d * d
        else:  # the true node at this depth is off the chain: posterior mean 0 there
            loss += mean * mean + a * a
        if l + 1 < L:
            pp *= pl[l] if nodes[l + 1] == 2 * nodes[l] else 1.0 - pl[l]
    for k in range(L, K):
        loss += scales[k] * scales[k]
    return loss


@njit(cache=True, nogil=True, fastmath=_REASSOC)
def _row_span_qr(W, phi, V, z, ok, cond_max):
    """Orthonormal rows ``V[s]`` (B, D) of the span of each sample's rows ``W[s]`` (n, B, D) and the readings
    ``z[s] = V[s] S`` of ``phi[s] = W[s] S`` in them, by modified Gram-Schmidt (once where the bound below
    is at most ``ONE_PASS_COND``, so the rows are orthogonal to about 1e-15; else twice) and
    ``R^T z = phi`` (``W = R^T V``, ``R`` upper triangular). ``ok[s]`` is set where the rows are surely of
    full rank and well conditioned: ``|R|_F |R^-1|_F <= cond_max`` bounds ``sigma_max / sigma_min``, so an
    SVD keeps every row and finds the same span and readings; elsewhere ``ok[s] = False`` and the caller
    uses the SVD (``fvnum.priors.tree.row_span``)."""
    n, B, D = W.shape
    Rm = np.zeros((B, B))
    Ri = np.zeros((B, B))
    for s in range(n):
        for passes in range(1, 3):  # one Gram-Schmidt pass where that is well conditioned, else two
            good = True
            fro = 0.0
            for b in range(B):
                for j in range(B):
                    Rm[j, b] = 0.0
                for d in range(D):
                    V[s, b, d] = W[s, b, d]
                for _ in range(passes):
                    for j in range(b):
                        c = 0.0
                        for d in range(D):
                            c += V[s, j, d] * V[s, b, d]
                        Rm[j, b] += c
                        for d in range(D):
                            V[s, b, d] -= c * V[s, j, d]
                nrm = 0.0
                for d in range(D):
                    nrm += V[s, b, d] * V[s, b, d]
                nrm = math.sqrt(nrm)
                Rm[b, b] = nrm
                if not nrm > 0.0:
                    good = False
                    break
                for d in range(D):
                    V[s, b, d] /= nrm
                for j in range(b + 1):
                    fro += Rm[j, b] * Rm[j, b]
            if good:  # |R^-1|_F: R^-1 column by column (back substitution)
                ifro = 0.0
                for c in range(B):
                    for j in range(B - 1, -1, -1):
                        v = 1.0 if j == c else 0.0
                        for t in range(j + 1, B):
                            v -= Rm[j, t] * Ri[t, c]
                        v /= Rm[j, j]
                        Ri[j, c] = v
                        ifro += v * v
                cond = math.sqrt(fro * ifro)
                good = cond <= cond_max
                if passes == 1 and cond > ONE_PASS_COND:
                    continue  # orthogonal only to about 1e-16 cond: again, with two passes
            ok[s] = good
            if good:
                for b in range(B):  # forward substitution: R^T z = phi
                    v = phi[s, b]
                    for j in range(b):
                        v -= Rm[j, b] * z[s, j]
                    z[s, b] = v / Rm[b, b]
            break


@njit(cache=True, nogil=True)
def _readings_in_basis(phi, A, z):
    """``z[s] = A^T phi[s]`` for readings ``phi`` (n, B) of shared rows and ``A`` (B, r) (``fvnum.priors.tree.row_span``):
    one pass, without the overhead of a matrix product this thin."""
    B, r = A.shape
    for s in range(phi.shape[0]):
        for j in range(r):
            v = 0.0
            for b in range(B):
                v += phi[s, b] * A[b, j]
            z[s, j] = v
