"""The greedy keyed policy's row search (``fvnum.keys.adaptive.adaptive_keyed_losses``): per sample, the next key
direction ``w`` minimising the expected loss after its reading, by Adam on the sphere from three starts,
with the objective and its exact gradient written out (the reference differentiates the same formulas
with torch autograd; ``tests/fvnum/test_keyed_fast.py`` holds the two together).

The reading of ``w`` given leaf ``m`` and the earlier readings is ``N(cm_m, cv_m)`` (Gaussian conditioning
of the keys' CLT law): with ``zb = w[path_m] * values_m`` (K,), ``mu = <zb, mg>``, ``own = sum_d gd_d w_d^2 +
2 zb^T H zb``, the earlier rows' ``common_i = sum_d rows_id gd_d w_d`` and ``hz_im = H za_im``,

    sc_i = (common_i + 2 <hz_im, zb> - mean_mi mu) / N,   so = (own - mu^2) / N,
    cm = mu + <sc, alpha_m>,   cv = so - sc^T P_m sc    (P_m the inverse covariance of the earlier readings).

The expected loss after the reading is ``sum_m p_m |theta|^2 - int |sum_m p_m N_m(phi) theta_m|^2 /
sum_m p_m N_m(phi) dphi`` over the sample's live leaves, by the same Riemann sum on ``grid`` nodes over the
live means +- 10 standard deviations as ``fvnum.keys.nonadaptive.mixture_loss`` (the nodes do not move with ``w``
inside a gradient, as there). Work per step: O(grid * live * K) and O(live * (K^2 + l K + l^2)).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
LIVE_DROP = 27.6  # a leaf is live where its log posterior is within this of the sample's largest (1e-12)
MIN_NODES = 16  # the fewest quadrature nodes of an adaptive grid
DENSITY_DROP = 40.0  # at a quadrature node, leaves below exp(-DENSITY_DROP) of the largest density are left out
ADAM_B1, ADAM_B2, ADAM_EPS = 0.9, 0.999, 1e-8  # torch.optim.Adam's defaults


@njit(cache=True, nogil=True)
def _leaf_law(w, s, m, j, ow, st, wk):
    """``(cm, cv)`` of leaf ``m`` for row ``w`` (module docstring); keeps ``zb``, ``H zb``, ``mu``, ``sc``,
    ``P sc`` and ``so`` in slot ``j`` of the work arrays for the gradient."""
    rgd, gd, paths, vals, mg, H, hz, mean, alpha, P, logw, live, a2, N = st[:14]
    zb, hzb, mu_, sc, vv, so_, common = wk[0], wk[1], wk[2], wk[3], wk[4], wk[5], wk[14]
    K = paths.shape[1]
    l = rgd.shape[1]
    mu = 0.0
    for k in range(K):
        z = w[paths[m, k]] * vals[m, k]
        zb[j, k] = z
        mu += z * mg[k]
    own2 = 0.0
    for k in range(K):
        h = 0.0
        for t in range(K):
            h += H[k, t] * zb[j, t]
        hzb[j, k] = h
        own2 += zb[j, k] * h
    so = (ow + 2.0 * own2 - mu * mu) / N
    cm = mu
    for i in range(l):
        c = 0.0
        for k in range(K):
            c += hz[s, i, m, k] * zb[j, k]
        sc[j, i] = (common[i] + 2.0 * c - mean[s, m, i] * mu) / N
        cm += sc[j, i] * alpha[s, m, i]
    cv = so
    for i in range(l):
        v = 0.0
        for t in range(l):
            v += P[s, m, i, t] * sc[j, t]
        vv[j, i] = v
        cv -= sc[j, i] * v
    mu_[j] = mu
    so_[j] = so
    return cm, max(cv, 1e-14 * so)


@njit(cache=True, nogil=True)
def _leaf_back(w, s, m, j, gcm, gcv, st, wk, gw):
    """Adds the gradient through leaf ``m``'s ``(cm, cv)`` (slot ``j``) to ``gw`` and the work slots of the
    shared sums ``ow`` (``wk[13][0]``) and ``common`` (``wk[15]``)."""
    rgd, gd, paths, vals, mg, H, hz, mean, alpha, P, logw, live, a2, N = st[:14]
    zb, hzb, mu_, sc, vv, gsc, gow, gcommon = wk[0], wk[1], wk[2], wk[3], wk[4], wk[12], wk[13], wk[15]
    K = paths.shape[1]
    l = rgd.shape[1]
    mu = mu_[j]
    gmu = gcm - 2.0 * mu * gcv / N
    for i in range(l):
        g = gcm * alpha[s, m, i] - 2.0 * gcv * vv[j, i]
        gsc[i] = g
        gmu -= g * mean[s, m, i] / N
        gcommon[i] += g / N
    gown = gcv / N
    gow[0] += gown
    for k in range(K):
        g = gmu * mg[k] + 4.0 * gown * hzb[j, k]
        for i in range(l):
            g += 2.0 / N * gsc[i] * hz[s, i, m, k]
        gw[paths[m, k]] += g * vals[m, k]


@njit(cache=True, nogil=True)
def _mixture_nodes(s, n_live, grid, st, wk):
    """The quadrature's ``(lo, hi, nodes)``, the prior term ``sum_m p_m |theta|^2`` and per leaf ``1 / sd``
    and ``log p_m - log sd - log(2 pi) / 2`` (``wk[10]``, ``wk[20]``); clears the gradient sums."""
    logw, live, a2 = st[10], st[11], st[12]
    cv, cm, isd, cst = wk[7], wk[6], wk[10], wk[20]
    lmax = -np.inf
    for j in range(n_live):
        lmax = max(lmax, logw[s, live[s, j]])
    lo, hi, sdmin = np.inf, -np.inf, np.inf
    node_step = st[15]
    prior = 0.0
    for j in range(n_live):
        lw = logw[s, live[s, j]]
        prior += math.exp(lw) * a2
        sd = math.sqrt(cv[j])
        isd[j] = 1.0 / sd
        cst[j] = lw - math.log(sd) - HALF_LOG_2PI
        if lw > lmax + math.log(1e-10):
            lo = min(lo, cm[j] - 10.0 * sd)
            hi = max(hi, cm[j] + 10.0 * sd)
            sdmin = min(sdmin, sd)
        wk[17][j] = 0.0
        wk[18][j] = 0.0
        wk[19][j] = 0.0
    if node_step > 0:  # nodes no farther apart than node_step of the narrowest density, at most grid of them
        grid = min(grid, max(MIN_NODES, int(math.ceil((hi - lo) / (node_step * sdmin))) + 1))
    return lo, hi, grid, prior


@njit(cache=True, nogil=True)
def _mixture(s, n_live, grid, want, st, wk):
    """Expected loss after the reading (module docstring) from the live leaves' ``(cm, cv)`` in ``wk[6]``,
    ``wk[7]``; with ``want``, its derivatives in ``cm`` and ``cv`` into ``wk[8]``, ``wk[9]``. At each node
    only the leaves whose density is within ``exp(-DENSITY_DROP)`` of the largest there are summed (the
    rest change the sums by less than 1e-17 relative)."""
    paths, vals, live = st[2], st[3], st[11]
    cm, cv, gcm, gcv, isd, nj, num = wk[6], wk[7], wk[8], wk[9], wk[10], wk[11], wk[16]
    S0, S1, S2, cst, act, mass = wk[17], wk[18], wk[19], wk[20], wk[21], wk[22]
    anode = st[14]
    K = paths.shape[1]
    M = anode.shape[0]
    lo, hi, grid, prior = _mixture_nodes(s, n_live, grid, st, wk)
    dphi = (hi - lo) / (grid - 1)
    total = 0.0
    for g in range(grid):
        phi = lo + (hi - lo) * (g / (grid - 1))
        top = -np.inf
        for j in range(n_live):
            z = (phi - cm[j]) * isd[j]
            v = cst[j] - 0.5 * z * z
            nj[j] = v
            top = max(top, v)
        na = 0
        for j in range(n_live):  # the leaves that count at this node
            if nj[j] > top - DENSITY_DROP:
                act[na] = j
                na += 1
        den = 0.0
        for a in range(na):
            j = int(act[a])
            e = math.exp(nj[j] - top)
            nj[j] = e
            den += e
            mass[M + live[s, j]] = e
        ns2 = 0.0
        for n in range(M - 1, 0, -1):  # subtree masses: num at node n is a_n (mass left - mass right)
            left = mass[2 * n]
            right = mass[2 * n + 1]
            mass[n] = left + right
            v = anode[n] * (left - right)
            num[n - 1] = v
            ns2 += v * v
        et = math.exp(top)
        total += ns2 / den * et
        if want:
            for a in range(na):
                j = int(act[a])
                m = live[s, j]
                t = 0.0
                for k in range(K):
                    t += num[paths[m, k]] * vals[m, k]
                wg = (2.0 * t - ns2 / den) / den * nj[j] * et
                dd = phi - cm[j]
                S0[j] += wg
                S1[j] += wg * dd
                S2[j] += wg * dd * dd
        for a in range(na):
            mass[M + live[s, int(act[a])]] = 0.0
    if want:
        for j in range(n_live):
            gcm[j] = -dphi * S1[j] / cv[j]
            gcv[j] = -dphi * (S2[j] / (2.0 * cv[j] * cv[j]) - S0[j] / (2.0 * cv[j]))
    return prior - dphi * total


@njit(cache=True, nogil=True)
def _value_grad(w, s, n_live, grid, want, st, wk, gw):
    """The objective at row ``w`` (unit) for sample ``s``, and with ``want`` its gradient in ``w`` into ``gw``."""
    rgd, gd, paths, vals, mg, H, hz, mean, alpha, P, logw, live, a2, N = st[:14]
    cm, cv, gcm, gcv, gow, common, gcommon = wk[6], wk[7], wk[8], wk[9], wk[13], wk[14], wk[15]
    D = w.shape[0]
    l = rgd.shape[1]
    ow = 0.0
    for d in range(D):
        ow += gd[d] * w[d] * w[d]
    for i in range(l):
        c = 0.0
        for d in range(D):
            c += rgd[s, i, d] * w[d]
        common[i] = c
    for j in range(n_live):
        m = live[s, j]
        cm[j], cv[j] = _leaf_law(w, s, m, j, ow, st, wk)
    value = _mixture(s, n_live, grid, want, st, wk)
    if want:
        for d in range(D):
            gw[d] = 0.0
        gow[0] = 0.0
        for i in range(l):
            gcommon[i] = 0.0
        for j in range(n_live):
            clamped = cv[j] <= 1e-14 * wk[5][j]
            _leaf_back(w, s, live[s, j], j, gcm[j], 0.0 if clamped else gcv[j], st, wk, gw)
        for d in range(D):
            g = 2.0 * gd[d] * w[d] * gow[0]
            for i in range(l):
                g += gcommon[i] * rgd[s, i, d]
            gw[d] += g
    return value


def work_arrays(n_leaves: int, K: int, l: int, D: int) -> tuple:
    """The scratch of ``_value_grad`` for up to ``n_leaves`` live leaves (one slot more for the true leaf)."""
    heap = np.zeros(2 << K)  # leaf masses at 2^K + m, subtree masses above
    M = n_leaves + 1
    return (np.zeros((M, K)), np.zeros((M, K)), np.zeros(M), np.zeros((M, max(l, 1))), np.zeros((M, max(l, 1))),
            np.zeros(M), np.zeros(M), np.zeros(M), np.zeros(M), np.zeros(M), np.zeros(M), np.zeros(M),
            np.zeros(max(l, 1)), np.zeros(1), np.zeros(max(l, 1)), np.zeros(max(l, 1)), np.zeros(D),
            np.zeros(M), np.zeros(M), np.zeros(M), np.zeros(M), np.zeros(M), heap)


@njit(cache=True, nogil=True)
def _adam(U, mo, ve, w, gw, t0, t1, last, lr, s, nl, grid, st, wk):
    """Adam steps ``t0 .. t1 - 1`` on ``U`` (moments ``mo``, ``ve``); returns the objective at ``U / |U|``
    (in ``w``) after them, or, when not ``last``, at the start of the last step (where the reference's
    screening reads it: the value its gradient came with)."""
    D = U.shape[0]
    value = np.inf
    for t in range(t0, t1 + (1 if last else 0)):
        nrm = 0.0
        for d in range(D):
            nrm += U[d] * U[d]
        nrm = math.sqrt(nrm)
        if nrm == 0.0:  # a zero start (the posterior left nothing to tell apart): every row reads alike, take e_1
            U[0], nrm = 1.0, 1.0
        for d in range(D):
            w[d] = U[d] / nrm
        value = _value_grad(w, s, nl, grid, t < t1, st, wk, gw)
        if t == t1:
            break
        dot = 0.0
        for d in range(D):
            dot += w[d] * gw[d]
        bc1 = 1.0 - ADAM_B1 ** (t + 1)
        bc2 = math.sqrt(1.0 - ADAM_B2 ** (t + 1))
        for d in range(D):
            g = (gw[d] - w[d] * dot) / nrm
            mo[d] = ADAM_B1 * mo[d] + (1.0 - ADAM_B1) * g
            ve[d] = ADAM_B2 * ve[d] + (1.0 - ADAM_B2) * g * g
            U[d] -= lr / bc1 * mo[d] / (math.sqrt(ve[d]) / bc2 + ADAM_EPS)
    return value


@njit(cache=True, nogil=True)
def _adam_rows(U0, n_live, truth, xi, steps, screen, lr, grid, st, wk, out_w, out_phi):
    """For every sample ``s``: Adam (``lr``, torch's defaults otherwise) on each start ``U0[s, a]`` (the row is
    ``U / |U|``) for ``screen`` steps, then on the start then best for ``steps - screen`` more (``screen =
    steps``: every start the whole way); the best row found into ``out_w[s]`` and the reading of it given
    the true leaf ``truth[s]`` and the earlier readings, ``cm + sqrt(cv) xi[s]``, into ``out_phi[s]``."""
    n, S, D = U0.shape
    U, gw, w = np.zeros((S, D)), np.zeros(D), np.zeros(D)
    mo, ve = np.zeros((S, D)), np.zeros((S, D))
    best_w = np.zeros(D)
    vals_ = np.zeros(S)
    for s in range(n):
        nl = n_live[s]
        for a in range(S):
            for d in range(D):
                U[a, d] = U0[s, a, d]
                mo[a, d] = 0.0
                ve[a, d] = 0.0
        if screen >= steps:  # every start the whole way
            best = np.inf
            for a in range(S):
                value = _adam(U[a], mo[a], ve[a], w, gw, 0, steps, True, lr, s, nl, grid, st, wk)
                if value < best:
                    best = value
                    best_w[:] = w
        else:
            for a in range(S):
                vals_[a] = _adam(U[a], mo[a], ve[a], w, gw, 0, screen, False, lr, s, nl, grid, st, wk)
            a = int(np.argmin(vals_))
            _adam(U[a], mo[a], ve[a], w, gw, screen, steps, True, lr, s, nl, grid, st, wk)
            best_w[:] = w
        ow = 0.0
        rgd, gd = st[0], st[1]
        for d in range(D):
            ow += gd[d] * best_w[d] * best_w[d]
            out_w[s, d] = best_w[d]
        common = wk[14]
        for i in range(rgd.shape[1]):
            c = 0.0
            for d in range(D):
                c += rgd[s, i, d] * best_w[d]
            common[i] = c
        cm, cv = _leaf_law(best_w, s, truth[s], nl, ow, st, wk)
        out_phi[s] = cm + math.sqrt(cv) * xi[s]


@njit(cache=True, nogil=True)
def _power_starts(logw, paths, vals, fixed, out):
    """(n, 3, D) starting rows (unit): the difference of the two most probable leaves, the principal direction
    of the posterior covariance (30 power iterations from ``fixed``), and ``fixed``."""
    n, M = logw.shape
    K = paths.shape[1]
    D = fixed.shape[0]
    mu, v, nv = np.zeros(D), np.zeros(D), np.zeros(D)
    for s in range(n):
        i1, i2 = 0, -1
        for m in range(1, M):
            if logw[s, m] > logw[s, i1]:
                i2, i1 = i1, m
            elif i2 < 0 or logw[s, m] > logw[s, i2]:
                i2 = m
        for d in range(D):
            out[s, 0, d] = 0.0
            mu[d] = 0.0
            v[d] = fixed[d]
        for k in range(K):
            out[s, 0, paths[i1, k]] += vals[i1, k]
            out[s, 0, paths[i2, k]] -= vals[i2, k]
        for m in range(M):
            p = math.exp(logw[s, m])
            for k in range(K):
                mu[paths[m, k]] += p * vals[m, k]
        for _ in range(30):
            muv = 0.0
            for d in range(D):
                muv += mu[d] * v[d]
                nv[d] = 0.0
            for m in range(M):
                p = math.exp(logw[s, m])
                c = 0.0
                for k in range(K):
                    c += v[paths[m, k]] * vals[m, k]
                for k in range(K):
                    nv[paths[m, k]] += p * c * vals[m, k]
            nrm = 0.0
            for d in range(D):
                nv[d] -= mu[d] * muv
                nrm += nv[d] * nv[d]
            nrm = max(math.sqrt(nrm), 1e-300)
            for d in range(D):
                v[d] = nv[d] / nrm
        for d in range(D):
            out[s, 1, d] = v[d]
            out[s, 2, d] = fixed[d]
        for a in range(3):
            nrm = 0.0
            for d in range(D):
                nrm += out[s, a, d] * out[s, a, d]
            nrm = max(math.sqrt(nrm), 1e-300)
            for d in range(D):
                out[s, a, d] /= nrm


# --- the one-layer design's Monte Carlo loss (fvnum.keys.nonadaptive._OneLayerMC) ------------------------------
@njit(cache=True, nogil=True)
def _one_layer_mc(mean, L, P, hl, leaves, xi, paths, vals, g_mean, g_L, g_P, g_hl):
    """Mean loss of the exact Bayes decoder over the leaves for the readings ``phi_s = mean_l + L_l xi_s``
    (``l = leaves[s]``; the law of leaf ``m``: ``N(mean_m, Sigma_m)``, ``P_m`` its inverse, ``hl_m`` half its
    log-determinant; leaf ``m``'s latent is ``vals[m]`` on the nodes ``paths[m]`` (0-based), zero elsewhere),
    and its gradient, added into ``g_mean`` (M, k), ``g_L`` (M, k, k) (lower triangle), ``g_P`` (M, k, k) and
    ``g_hl`` (M,) (``P`` and ``hl`` taken as free variables). Work per sample: O(M (k^2 + K)). The numpy twin
    is ``fvnum.mc._reference.one_layer_mc``."""
    n, k = xi.shape
    M, K = paths.shape
    D = paths.max() + 1
    phi = np.empty(k)
    r = np.empty((M, k))
    v = np.empty((M, k))
    post = np.empty(M)
    a = np.empty(M)
    err = np.zeros(D)
    gphi = np.empty(k)
    total = 0.0
    scale = 2.0 / n
    for s in range(n):
        lf = leaves[s]
        for i in range(k):
            acc = mean[lf, i]
            for j in range(i + 1):
                acc += L[lf, i, j] * xi[s, j]
            phi[i] = acc
        top = -np.inf
        for m in range(M):
            for i in range(k):
                r[m, i] = phi[i] - mean[m, i]
            q = 0.0
            for i in range(k):
                acc = 0.0
                for j in range(k):
                    acc += P[m, i, j] * r[m, j]
                v[m, i] = acc
                q += r[m, i] * acc
            post[m] = -0.5 * q - hl[m]
            if post[m] > top:
                top = post[m]
        z = 0.0
        for m in range(M):
            post[m] = math.exp(post[m] - top)
            z += post[m]
        for t in range(K):
            err[paths[lf, t]] -= vals[lf, t]
        for m in range(M):
            post[m] /= z
            for t in range(K):
                err[paths[m, t]] += post[m] * vals[m, t]
        abar = 0.0
        for m in range(M):
            acc = 0.0
            for t in range(K):
                acc += err[paths[m, t]] * vals[m, t]
            a[m] = scale * acc
            abar += post[m] * a[m]
        for d in range(D):
            total += err[d] * err[d]
            err[d] = 0.0
        for i in range(k):
            gphi[i] = 0.0
        for m in range(M):
            b = post[m] * (a[m] - abar)
            if b == 0.0:
                continue
            for i in range(k):
                gphi[i] -= b * v[m, i]  # d quad / d phi = 2 v, d ll / d quad = -1/2
                g_mean[m, i] += b * v[m, i]
                for j in range(k):
                    g_P[m, i, j] -= 0.5 * b * r[m, i] * r[m, j]
            g_hl[m] -= b
        for i in range(k):
            g_mean[lf, i] += gphi[i]
            for j in range(i + 1):
                g_L[lf, i, j] += gphi[i] * xi[s, j]
    return total / n
