"""The tree prior under a key family (:mod:`fvnum.keys.families`), the pieces both keyed searches share
(:mod:`fvnum.keys.nonadaptive`, the one-layer design; :mod:`fvnum.keys.adaptive`, the adaptive policy): the leaves as
atoms, the per-depth moments of weighted keys (``Q`` diagonal with one value per tree depth, ``c = 1``) or
the softmax keys' geometry (:class:`SoftmaxGeometry`: unit rows ``w`` scored ``beta w.x - x^T Q x``),
the law of the readings of any rows on every leaf (:func:`tree_law`, numpy or torch), the exact loss of one
reading by quadrature (:func:`mixture_loss`) and the key family object of a design found
(:func:`keys_of`)."""
from __future__ import annotations

import math
import sys
from contextlib import contextmanager

import numpy as np

from fvnum.keys.families import LinearKeys, SoftmaxKeys, WeightedKeys, quadrature_nodes, weighted_moments
from fvnum.keys.readings import softmax_law
from fvnum.priors.tree import TreeSpec

GRID = 256  # reading nodes of the 1-D quadrature of a mixture loss
STEP = 0.25  # t-quadrature step of the optimisers (error ~ exp(-pi^2 / step) ~ 1e-17)


def _torch():
    import torch

    return torch


@contextmanager
def one_thread():
    """Torch on one thread while the keyed searches run (their tensors are small: on more threads torch's
    intra-op pool costs more than it saves, 10x on a loaded 2-core machine), restored after; also a
    decorator."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


# --- the tree prior: structure of the laws ---------------------------------------------------------
class _Tree:
    """Leaves of the tree as atoms: ``thetas`` (M, D), path nodes (M, K) (0-based), path values (M, K),
    and the depth of every node (D,)."""

    def __init__(self, spec: TreeSpec):
        leaves = np.arange(spec.n_leaves)
        self.spec = spec
        self.thetas = spec.thetas(leaves)
        self.paths = spec.path_nodes(leaves) - 1
        self.values = spec.scales * spec.signs(leaves)
        self.depth_of = spec.node_depths(np.arange(1, spec.dim + 1)) - 1
        self.counts = 2.0 ** np.arange(spec.depth)


def _geometry(tree: _Tree, lq, s2, xp, step=STEP):
    """Per-depth moments of weighted keys with ``q_k = exp(lq_k)`` and ``c = 1`` (``lq`` None: linear keys):
    ``m`` (K,), ``g`` (K,) the diagonal of ``G`` (the same for every leaf) and ``Hbar`` (K, K)."""
    a2 = xp.asarray(tree.spec.scales**2) if xp is np else xp.tensor(tree.spec.scales**2, dtype=xp.float64)
    if lq is None:
        ones = a2 * 0 + 1.0
        Hbar = ones[:, None] * ones[None, :]
        return ones, Hbar @ a2 + s2, Hbar
    t, wt = quadrature_nodes(1.0, step)
    counts = tree.counts
    if xp is not np:
        t, wt, counts = (xp.tensor(v, dtype=xp.float64) for v in (t, wt, counts))
    S, w2, m, h = weighted_moments(xp.exp(lq), 1.0, t, wt, xp, counts)
    Hbar = (S * w2[:, None]).T @ S  # (K, K)
    return m, Hbar @ a2 + s2 * h, Hbar


class SoftmaxGeometry:
    """Softmax keys on the tree (docs/theory.md section 2, :func:`fvnum.keys.readings.softmax_law`): rows ``w`` scored
    ``s = beta w.x - x^T diag(q) x``, ``beta`` and ``q`` (D,) shared by every row (the adaptive search takes
    ``beta = 1`` and the rows as the score rows, :func:`rows_of`); :func:`tree_law` and the
    adaptive search's conditional laws ask it for the mean and the second moment ``N Cov + mean mean^T`` of
    any rows, on every leaf (dense: ``M`` leaves by ``D`` coordinates). The Numba kernels of the weighted
    geometry do not apply (``kernel = False``: the adaptive search runs its torch engine)."""

    kernel = False

    def __init__(self, tree: _Tree, beta, q, s2, xp=np):
        self.tree, self.beta, self.q, self.s2, self.xp = tree, beta, q, float(s2), xp
        self.th = tree.thetas if xp is np else xp.as_tensor(tree.thetas, dtype=xp.float64)

    def mean(self, A):
        """(..., M, i) of rows ``A`` (..., i, D)."""
        out = (self.beta * A / (1.0 + 2.0 * self.q)) @ self.th.T  # (..., i, M)
        return out.swapaxes(-1, -2) if self.xp is np else out.transpose(-1, -2)

    def second(self, A, B):
        """(..., M, i, j) ``N Cov + mean mean^T`` of rows ``A`` (..., i, D) and ``B`` (..., j, D)."""
        xp, q, th = self.xp, self.q, self.th
        a1, a2 = 1.0 + 2.0 * q, 1.0 + 4.0 * q
        bA, bB = self.beta * A, self.beta * B
        lz = xp.log(a1).sum() - 0.5 * xp.log(a2).sum()  # the determinants of E[w w'] / (E[w] E[w'])
        b2 = bA[..., :, None, :] + bB[..., None, :, :]  # (..., i, j, D)
        log_ratio = (0.5 * (b2**2 / a2).sum(-1) - 0.5 * (bA**2 / a1).sum(-1)[..., :, None]
                     - 0.5 * (bB**2 / a1).sum(-1)[..., None, :] + lz)
        muA, muB = (bA / a1) @ th.T, (bB / a1) @ th.T  # (..., i, M), (..., j, M)
        pm = (b2 / a2) @ th.T  # (..., i, j, M)
        ma, mb = muA[..., :, None, :], muB[..., None, :, :]
        second = xp.exp(log_ratio)[..., None] * ((th**2) @ (1.0 / a2) + (pm - ma) * (pm - mb) + self.s2) + ma * mb
        return xp.moveaxis(second, -1, -3) if xp is np else second.movedim(-1, -3)


def geometry_of(tree: _Tree, keys, s2, xp=np):
    """The geometry the tree laws take for the key family object ``keys`` (one layer's key, as the adaptive
    search shares it): the weighted moments of :func:`_geometry` (linear, weighted) or a
    :class:`SoftmaxGeometry` (softmax: the key's ``Q``, ``beta = 1``: the rows are the score rows, see
    :func:`rows_of`)."""
    if keys.name == "softmax":
        q = keys.Q if xp is np else xp.as_tensor(keys.Q, dtype=xp.float64)
        return SoftmaxGeometry(tree, 1.0, q, s2, xp)
    lq = log_q_of(tree, keys)
    return _geometry(tree, lq if xp is np or lq is None else xp.tensor(lq), s2, xp)


def rows_of(geo, U, xp=np):
    """The rows a geometry reads from free vectors ``U`` (..., D): unit rows for linear and weighted keys
    (their law depends on the direction only, up to a common scale), ``U`` itself for softmax keys (the
    score row ``b = beta w``: its norm ``beta`` matters and is searched)."""
    if isinstance(geo, SoftmaxGeometry):
        return U
    return U / (np.linalg.norm(U, axis=-1, keepdims=True) if xp is np else xp.linalg.norm(U, dim=-1, keepdim=True))


def first_rows(geo, first):
    """(1, D) layer 1's row of an adaptive policy from the one-key design ``first`` (a ``SearchResult``): its
    unit row ``design``, or for softmax keys its score row."""
    return first.keys.B if isinstance(geo, SoftmaxGeometry) else first.design


def _tree_second(tree: _Tree, geo, A, B, xp):
    """``E[((theta.x)^2 + s2) f_a f_b]`` for every leaf: rows ``A`` (..., i, D), ``B`` (..., j, D) ->
    (..., M, i, j) (softmax keys: ``N Cov + mean mean^T``, :class:`SoftmaxGeometry`)."""
    if isinstance(geo, SoftmaxGeometry):
        return geo.second(A, B)
    m, g, Hbar = geo
    gd = g[tree.depth_of]  # (D,)
    common = (A * gd) @ B.swapaxes(-1, -2) if xp is np else (A * gd) @ B.transpose(-1, -2)  # (..., i, j)
    za = A[..., tree.paths] * (tree.values if xp is np else xp.tensor(tree.values))  # (..., i, M, K)
    zb = B[..., tree.paths] * (tree.values if xp is np else xp.tensor(tree.values))
    cross = xp.einsum("...imk,kl,...jml->...mij", za, Hbar, zb)
    return common[..., None, :, :] + 2.0 * cross


def _tree_mean(tree: _Tree, geo, A, xp):
    """(..., M, i) ``E[phi | leaf]`` of rows ``A`` (..., i, D)."""
    if isinstance(geo, SoftmaxGeometry):
        return geo.mean(A)
    m = geo[0]
    z = A[..., tree.paths] * (tree.values if xp is np else xp.tensor(tree.values))  # (..., i, M, K)
    out = (z * m).sum(-1)  # (..., i, M)
    return out.swapaxes(-1, -2) if xp is np else out.transpose(-1, -2)


def tree_law(tree: _Tree, geo, W, n_tokens, xp=np):
    """``(mean (..., M, k), cov (..., M, k, k))`` of rows ``W`` (..., k, D) on the tree's leaves."""
    mean = _tree_mean(tree, geo, W, xp)
    second = _tree_second(tree, geo, W, W, xp)
    return mean, (second - mean[..., :, None] * mean[..., None, :]) / n_tokens


# --- exact loss of one reading by quadrature -------------------------------------------------------
def mixture_loss(mean, var, logw, thetas, xp=np, grid: int = GRID):
    """Expected loss after one reading whose law given atom ``m`` is ``N(mean_m, var_m)``, under
    belief weights ``exp(logw)`` (normalised; all (..., M)) over atoms ``thetas`` (M, D):
    ``sum_m p_m |theta_m|^2 - int |sum_m p_m N_m(phi) theta_m|^2 / sum_m p_m N_m(phi) dphi``, the integral
    by the trapezoid rule on ``grid`` nodes over the live atoms' means +- 10 standard deviations."""
    th = thetas if xp is np else xp.as_tensor(thetas, dtype=xp.float64)
    p = xp.exp(logw)
    sd = xp.sqrt(var)
    if xp is np:
        lo, hi, _ = _span(mean, sd, p, np)
        u = np.linspace(0.0, 1.0, grid)
    else:
        with xp.no_grad():
            lo, hi, _ = _span(mean, sd, p, xp)
        u = xp.linspace(0.0, 1.0, grid, dtype=xp.float64)
    phi = lo[..., None] + (hi - lo)[..., None] * u  # (..., G)
    dphi = (hi - lo) / (grid - 1)
    z = (phi[..., :, None] - mean[..., None, :]) / sd[..., None, :]
    logd = logw[..., None, :] - 0.5 * z**2 - xp.log(sd)[..., None, :] - 0.5 * math.log(2 * math.pi)  # (..., G, M)
    top = logd.max(-1, keepdims=True) if xp is np else logd.max(-1, keepdim=True).values
    n = xp.exp(logd - top)
    num = n @ th  # (..., G, D)
    ratio = (num**2).sum(-1) / n.sum(-1) * xp.exp(top[..., 0])
    prior = (p * (th**2).sum(-1)).sum(-1)
    return prior - ratio.sum(-1) * dphi


def quadrature_resolves(mean, var, logw, grid: int = GRID) -> bool:
    """Whether :func:`mixture_loss`'s trapezoid rule on ``grid`` nodes (numpy inputs, as there) resolves every
    live atom's reading law: its step over the live means +- 10 standard deviations is at most the narrowest
    live standard deviation (the rule's error is then below ``exp(-2 pi^2)``, about 3e-9, relative). A very
    precise channel (tokens N of 10^5 and more on the tree) makes the laws narrower than that step."""
    mean, var, logw = (np.asarray(x, dtype=float) for x in (mean, var, logw))
    sd = np.sqrt(var)
    lo, hi, live = _span(mean, sd, np.exp(logw), np)
    return bool(np.all((hi - lo) / (grid - 1) <= np.where(live, sd, np.inf).min(-1)))


def _span(mean, sd, p, xp):
    """``(lo, hi, live)``: the live atoms (weight above 1e-10 of the largest) and the span of their means
    +- 10 standard deviations, over which :func:`mixture_loss` integrates (numpy or torch)."""
    big = 1e300
    if xp is np:
        live = p > 1e-10 * p.max(-1, keepdims=True)
        return (np.where(live, mean - 10 * sd, big).min(-1), np.where(live, mean + 10 * sd, -big).max(-1), live)
    live = p > 1e-10 * p.max(-1, keepdim=True).values
    return (xp.where(live, mean - 10 * sd, xp.full_like(mean, big)).min(-1).values,
            xp.where(live, mean + 10 * sd, xp.full_like(mean, -big)).max(-1).values, live)


def keys_of(tree: _Tree, W, lq):
    """The key family object of rows ``W`` (k, D) with per-depth ``log q`` ``lq`` (K,) (None: linear keys),
    ``c = 1``: :class:`~fvnum.keys.families.LinearKeys` or :class:`~fvnum.keys.families.WeightedKeys` (``Q`` its diagonal)."""
    if lq is None:
        return LinearKeys(W)
    return WeightedKeys(W, np.exp(lq)[tree.depth_of], 1.0)


def log_q_of(tree: _Tree, keys):
    """The per-depth ``log q`` (K,) of weighted or softmax keys on the tree (None for linear keys): the
    inverse of :func:`keys_of`."""
    if keys.name == "linear":
        return None
    if keys.name == "softmax":
        return np.log(keys.Q[[int(np.argmax(tree.depth_of == k)) for k in range(tree.spec.depth)]])
    q = np.diag(keys.Q) if keys.Q.ndim == 2 else keys.Q
    return np.log(q[[int(np.argmax(tree.depth_of == k)) for k in range(tree.spec.depth)]])


# --- gradients in numpy: the one-layer searches' objectives without autograd -----------------------
def geometry_grad(tree: _Tree, lq, s2, Gm, Gg, GH, step=STEP):
    """The gradient (K,) in ``lq`` of ``Gm.m + Gg.g + <GH, Hbar>`` for the geometry of :func:`_geometry`
    (weighted keys; the derivative of ``weighted_moments`` written out: ``S = 1 / (1 + 2 t q)``, ``base =
    wt e^-t prod_k S_k^(n_k / 2)``, ``w2 = t base``, ``m = base S``, ``h = w2 S``, ``Hbar = S^T diag(w2) S``,
    ``g = Hbar a^2 + s2 h``)."""
    t, wt = quadrature_nodes(1.0, step)
    q = np.exp(np.asarray(lq, dtype=float))
    a2, counts = tree.spec.scales**2, tree.counts
    S = 1.0 / (1.0 + 2.0 * t[:, None] * q[None, :])  # (T, K)
    base = wt * np.exp(-t + 0.5 * (np.log(S) * counts).sum(1))
    w2 = base * t
    GH = np.asarray(GH, dtype=float) + np.outer(Gg, a2)
    Gh = s2 * np.asarray(Gg, dtype=float)
    Gb = S @ Gm + t * (S @ Gh + ((S @ GH) * S).sum(1))  # (T,)
    GS = base[:, None] * Gm + w2[:, None] * (Gh + S @ (GH + GH.T))  # (T, K)
    tq = t[:, None] * q[None, :]
    return (GS * (-2.0 * tq * S**2)).sum(0) + ((Gb * base)[:, None] * (-counts * tq * S)).sum(0)


def tree_law_grad(tree: _Tree, geo, W, n_tokens, G_mean, G_cov):
    """Backward of :func:`tree_law` for one design ``W`` (k, D) (numpy): given the gradients of a function of
    ``mean`` (M, k) and ``cov`` (M, k, k) (``G_cov`` symmetric), returns ``(G_W (k, D), Gm, Gg, GH)``, the
    gradients in ``W`` and in the geometry ``(m, g, Hbar)``."""
    m, g, H = geo
    D, K = W.shape[1], tree.spec.depth
    gd = g[tree.depth_of]
    z = W[:, tree.paths] * tree.values  # (k, M, K)
    mean = (z * m).sum(-1).T  # (M, k)
    Gs = G_cov / n_tokens  # gradient of the second moment (M, k, k), symmetric
    Gmt = G_mean - 2.0 * (Gs @ mean[..., None])[..., 0]  # (M, k)
    Gc = Gs.sum(0)  # (k, k) the part common to the leaves
    GW = 2.0 * Gc @ (W * gd)
    Gg = np.bincount(tree.depth_of, weights=((Gc @ W) * W).sum(0), minlength=K)
    Hz = z @ H  # (k, M, K)
    Gz = 4.0 * np.einsum("mij,jmk->imk", Gs, Hz) + Gmt.T[:, :, None] * m
    GH = 2.0 * np.einsum("mij,imk,jml->kl", Gs, z, z)
    Gm = np.einsum("mi,imk->k", Gmt, z)
    flat = tree.paths.ravel()
    for i in range(W.shape[0]):
        GW[i] += np.bincount(flat, weights=(Gz[i] * tree.values).ravel(), minlength=D)
    return GW, Gm, Gg, GH


def cholesky_grad(L, G_L):
    """The gradient in a symmetric matrix ``A = L L^T`` (batched) of a function of its Cholesky factor ``L``,
    given its gradient ``G_L`` in ``L`` (lower triangle): ``L^-T Phi(L^T G_L) L^-1``, symmetrised (``Phi``:
    the lower triangle with half the diagonal)."""
    P = np.tril(np.swapaxes(L, -1, -2) @ G_L)
    P[..., np.arange(L.shape[-1]), np.arange(L.shape[-1])] *= 0.5
    Linv = np.linalg.inv(L)
    A = np.swapaxes(Linv, -1, -2) @ P @ Linv
    return 0.5 * (A + np.swapaxes(A, -1, -2))
