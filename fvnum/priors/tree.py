"""Tree prior, numerically (docs/theory.md section 6): float scales, sampling, coordinates of the latent,
and the exact Bayes decoders behind :func:`fvnum.posterior_mean` and every simulation.

Decoders (:func:`posterior_means`, :func:`posterior_losses` pick the channel's; docs/decoders.md):
- gaussian channel, coordinate readings: one upward and one downward pass over the tree, touching only
  the read nodes and their ancestors (``O(B K)`` per sample, at most ``O(D)``; ``_kernels._coord_posterior``);
- gaussian channel, general unit rows: enumeration of the ``2^K`` leaves, ``O(2^K B)``;
- tokens channel: the exact law of the one statistic read through all the rows (``_kernels.tokens``), on the
  same two routes: the closure for coordinate readings, the leaves (in an orthonormal basis of the span of
  the rows, :func:`row_span`) for unit rows.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
import math
from dataclasses import dataclass, field

import numpy as np

from fvsym.heap import leaf_bit, path_node

from fvnum.priors import _kernels
from fvnum.priors.analyses import register_analysis
from fvnum.priors.capabilities import Capabilities
from fvsym.errors import InputError

MAX_ATOMS_DEPTH = 20  # the tree as a finite prior: at most 2^20 leaves


@dataclass(frozen=True, eq=False)
class TreeSpec(Capabilities):
    """Numeric view of a ``fvsym.TreePrior``: ``depth`` K and float ``scales`` (a_1..a_K); ``exact`` the
    ``TreePrior`` it was made from, where it was (the symbolic solvers take its exact numbers). It answers the
    engine's questions (``fvnum.priors.capabilities.Capabilities``): its nodes form a heap of depth K, its decoder is exact
    under both channels, its atoms are its ``2^K`` leaves."""

    depth: int
    scales: np.ndarray
    exact: object = field(default=None, repr=False)

    name = "tree"
    exact_under_tokens = True

    @property
    def heap_depth(self) -> int:
        return self.depth

    @property
    def dim(self) -> int:
        return 2**self.depth - 1

    @property
    def n_leaves(self) -> int:
        return 2**self.depth

    @property
    def second_moment(self) -> float:
        return float((self.scales**2).sum())

    def sample(self, n: int, rng) -> np.ndarray:
        """Leaf indices, uniform over the ``2^K`` leaves."""
        return rng.integers(0, self.n_leaves, size=n, dtype=np.int64)

    def node_depths(self, nodes) -> np.ndarray:
        """``k(n) = bitlen(n)`` (0 for the idle node 0)."""
        nodes = np.asarray(nodes, dtype=np.int64)
        return np.frexp(nodes.astype(float))[1].astype(np.int64)

    def values(self, leaves, nodes) -> np.ndarray:
        """``theta_n`` of each leaf at nodes ``nodes`` (n, m); 0 for node 0."""
        K = self.depth
        leaves = np.asarray(leaves, dtype=np.int64)[:, None]
        nodes = np.asarray(nodes, dtype=np.int64)
        k = np.maximum(self.node_depths(nodes), 1)
        on = (path_node(leaves, K, k) == nodes) & (nodes > 0)
        sign = 1.0 - 2.0 * leaf_bit(leaves, K, k)
        return np.where(on, self.scales[k - 1] * sign, 0.0)

    def path_nodes(self, leaves) -> np.ndarray:
        """(n, K): the path nodes ``n_1..n_K`` of each leaf."""
        K = self.depth
        return path_node(np.asarray(leaves, dtype=np.int64)[:, None], K, np.arange(1, K + 1))

    def signs(self, leaves) -> np.ndarray:
        """(n, K): the signs ``s_1..s_K`` of each leaf."""
        K = self.depth
        return 1 - 2 * leaf_bit(np.asarray(leaves, dtype=np.int64)[:, None], K, np.arange(1, K + 1))

    def thetas(self, leaves) -> np.ndarray:
        """(n, D) dense latents."""
        leaves = np.asarray(leaves, dtype=np.int64)
        out = np.zeros((leaves.size, self.dim))
        rows = np.arange(leaves.size)[:, None]
        out[rows, self.path_nodes(leaves) - 1] = self.scales * self.signs(leaves)
        return out

    def coordinate_values(self, leaves, nodes) -> np.ndarray:
        """``theta_n`` at ``nodes`` read from the leaves, without the dense latents (:meth:`values`)."""
        return self.values(leaves, nodes)

    # --- the exact decoder, the checks and the other views (fvnum.priors.capabilities.Capabilities) ----------------------
    def posterior_means(self, channel, design, phi) -> np.ndarray:
        return posterior_means(self, channel, design, phi)

    def posterior_losses(self, channel, design, phi, leaves) -> np.ndarray:
        return posterior_losses(self, channel, design, phi, leaves)

    def check_floats(self) -> None:
        from fvnum.priors.checks import check_scales

        check_scales(self.scales)

    def check_resolution(self, what: str) -> None:
        from fvnum.priors.checks import check_level_resolution

        check_level_resolution(self.scales, what)

    def check_noiseless_readings(self, nodes, phi) -> None:
        from fvnum.priors.checks import check_tree_readings

        check_tree_readings(self.depth, self.scales, nodes, phi)

    def atoms_and_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Its ``2^K`` leaves, uniform (docs/theory.md section 6)."""
        if self.depth > MAX_ATOMS_DEPTH:
            raise InputError(f"the tree of depth {self.depth} has 2^{self.depth} leaves: too many atoms "
                             f"(depth <= {MAX_ATOMS_DEPTH})")
        return self.thetas(np.arange(self.n_leaves)), np.full(self.n_leaves, -self.depth * math.log(2))

    def exact_prior(self):
        """The ``fvsym.TreePrior`` it was made from, or one of its float scales (as decimal strings)."""
        if self.exact is not None:
            return self.exact
        from fvsym.priors import TreePrior

        return TreePrior(self.depth, scales=[str(a) for a in self.scales])

    @property
    def covariance(self) -> np.ndarray:
        """(D, D): each exact entry of the ``TreePrior``'s covariance rounded once."""
        C = self.exact_prior().covariance
        return np.array([[float(C[i, j]) for j in range(C.cols)] for i in range(C.rows)])

    def matched_gaussian(self):
        """``GaussianPrior.matched``: the Gaussian of its covariance, exact."""
        from fvsym.priors import GaussianPrior

        return GaussianPrior.matched(self.exact_prior())


def numeric_prior(prior):
    """``TreeSpec`` or ``GaussSpec`` of a fvsym prior with numeric parameters (or pass one through)."""
    from fvnum.priors.gaussian import GaussSpec

    if isinstance(prior, Capabilities):  # a numeric prior already (the numeric views, every prior object)
        return prior
    if all(callable(getattr(prior, m, None)) for m in ("sample", "thetas", "posterior_losses", "policy")):
        return prior  # a prior object (fvnum.priors.registry) without the base class: it computes its own numbers
    from fvsym.priors import GaussianPrior, TreePrior

    if isinstance(prior, TreePrior):
        if not prior.is_numeric:
            raise InputError(f"Monte Carlo needs numeric tree scales, got {prior!r}; give alpha a value")
        return TreeSpec(prior.depth, np.array([float(a) for a in prior.scales]), prior)
    if isinstance(prior, GaussianPrior):
        if not all(x.is_number for x in prior.cov):
            raise InputError(f"Monte Carlo needs a numeric covariance, got {prior!r} with symbols")
        return GaussSpec.from_cov(np.array(prior.cov.evalf(), dtype=float), prior)
    raise InputError(f"prior must be a fvsym TreePrior or GaussianPrior, got {type(prior).__name__}")


def coordinate_posterior_mean(spec: TreeSpec, nodes, readings, tau: float) -> np.ndarray:
    """(n, D) posterior means from coordinate readings ``nodes`` (n, B) int (0: no reading)."""
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    readings = np.ascontiguousarray(readings, dtype=float)
    out = np.zeros((nodes.shape[0], spec.dim))
    _kernels._tree_coord_decode(nodes, readings, float(tau), spec.scales, np.zeros(0, np.int64), np.zeros(0), out)
    return out


def dense_posterior_mean(spec: TreeSpec, W, phi, tau: float, tol: float = 1e-9) -> np.ndarray:
    """(n, D) posterior means from readings ``phi`` (n, B) through rows ``W`` (B, D) or (n, B, D)."""
    W = np.asarray(W, dtype=float)
    W = np.ascontiguousarray(W[None] if W.ndim == 2 else W)
    phi = np.ascontiguousarray(phi, dtype=float)
    out = np.zeros((phi.shape[0], spec.dim))
    _kernels._tree_dense_decode(W, phi, float(tau), tol, spec.scales, np.zeros(0, np.int64), np.zeros(0), out)
    return out


def coordinate_losses(spec: TreeSpec, nodes, readings, tau: float, leaves) -> np.ndarray:
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    out = np.zeros(nodes.shape[0])
    _kernels._tree_coord_decode(
        nodes, np.ascontiguousarray(readings, dtype=float), float(tau), spec.scales,
        np.ascontiguousarray(leaves, dtype=np.int64), out, np.zeros((0, spec.dim)),
    )
    return out


S2_FLOOR = 1e-9  # the tokens decoder's smallest s2, in units of |theta|^2 (see tokens_law)


def tokens_law(spec, channel) -> tuple[float, float]:
    """``(n_tok, sigma2)`` of the tokens channel's law on the tree prior, ``sigma2 = |theta|^2 + s2`` (the
    same for every leaf): ``S | theta, r ~ N(theta r, (sigma2 r / N) (I - theta theta^T / sigma2))`` with
    ``r ~ chi2_N / N`` (``fvnum.priors._kernels.tokens``). ``s2`` is floored at ``S2_FLOOR |theta|^2`` (at
    ``s2 = 0`` the law is singular along a fully read latent; ``fvnum.mc.channels.decoder_of`` then says approximate).
    ``(0, 0)`` for the gaussian channel (``n_tok = 0`` tells the kernels to use the gaussian likelihood)."""
    if channel.kind == "gaussian":
        return 0.0, 0.0
    m2 = spec.second_moment
    return float(channel.n_tokens), m2 + max(channel.s2, S2_FLOOR * m2)


def row_span(W, phi, tol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """An orthonormal basis ``V`` (m, r, D) of the span of the rows ``W`` (m, B, D) (``m = 1``: shared, or
    ``m = n``; ``r = min(B, D)``, zero rows past each sample's rank) and the readings ``z`` (n, r) in it:
    ``z = V S`` for readings ``phi = W S``, by the SVD ``W = U diag(sigma) V`` (directions with
    ``sigma <= tol * max sigma`` dropped: a repeated row, or one in the span of others, adds nothing;
    readings off the span of ``W`` are projected on it, least squares). Rows of each sample's own that are
    surely of full rank and well conditioned take Gram-Schmidt instead (``_kernels.tokens._row_span_qr``:
    the same span and readings in another basis, at a fraction of the SVD's cost)."""
    W = np.asarray(W, dtype=float)
    phi = np.asarray(phi, dtype=float)
    m, B, D = W.shape
    if B == 0:
        return np.zeros((m, 0, D)), np.zeros((phi.shape[0], 0))
    if m > 1 and B <= D:  # rows of each sample's own: Gram-Schmidt where well conditioned, the SVD elsewhere
        V, z, ok = np.zeros((m, B, D)), np.zeros((m, B)), np.zeros(m, dtype=np.bool_)
        _kernels.tokens._row_span_qr(np.ascontiguousarray(W), np.ascontiguousarray(phi), V, z, ok, 1e-3 / tol)
        if not ok.all():
            bad = ~ok
            V[bad], z[bad] = _row_span_svd(W[bad], phi[bad], tol)
        return V, z
    return _row_span_svd(W, phi, tol)


def _row_span_svd(W, phi, tol):
    m = W.shape[0]
    U, sig, Vt = np.linalg.svd(W, full_matrices=False)  # (m, B, r), (m, r), (m, r, D)
    keep = sig > tol * np.maximum(sig.max(axis=1, keepdims=True), np.finfo(float).tiny)
    A = U * np.where(keep, 1.0 / np.where(keep, sig, 1.0), 0.0)[:, None, :]  # phi -> z, (m, B, r)
    if m == 1:
        z = np.zeros((phi.shape[0], A.shape[2]))
        _kernels.tokens._readings_in_basis(np.ascontiguousarray(phi), np.ascontiguousarray(A[0]), z)
    else:
        z = np.ascontiguousarray(np.einsum("nbr,nb->nr", A, phi))
    return np.ascontiguousarray(Vt * keep[..., None]), z


_GIG_TABLES: OrderedDict = OrderedDict()  # lam -> table of the Bessel part of J (``_kernels.tokens._gig_t``)
_GIG_LOCK = threading.Lock()
GIG_TABLES_KEPT = 64  # tables kept (about 80 KiB each), the least recently used dropped first


def tokens_dense_decode(V, z, n_tok, sigma2, scales, leaves, out_loss, out_mean) -> None:
    """``_kernels._tokens_dense_decode`` with the Bessel tables of its ``lam = (N - rank) / 2``: each call
    builds the cells it needs in private copies, which then replace the kept tables (together with the
    cells other threads built meanwhile), so later calls find them built."""
    ranks = np.unique((np.einsum("mrd,mrd->mr", V, V) > 0.5).sum(axis=1))
    lams = [0.5 * (n_tok - int(rk)) for rk in ranks]
    tab_of_rank = np.full(V.shape[1] + 1, -1, dtype=np.int64)
    tab_of_rank[ranks] = np.arange(ranks.size)
    with _GIG_LOCK:
        tabs = np.stack([_GIG_TABLES[lam] if lam in _GIG_TABLES else _kernels.gig_table() for lam in lams])
    _kernels._tokens_dense_decode(V, z, n_tok, sigma2, scales, tabs, tab_of_rank, leaves, out_loss, out_mean)
    with _GIG_LOCK:
        for lam, tab in zip(lams, tabs):
            kept = _GIG_TABLES.pop(lam, None)
            if kept is not None:
                other = (kept[:, 1] > 0) & (tab[:, 1] == 0)
                tab[other] = kept[other]
            _GIG_TABLES[lam] = tab
        while len(_GIG_TABLES) > GIG_TABLES_KEPT:
            _GIG_TABLES.popitem(last=False)


def _decode(spec: TreeSpec, channel, design, phi, leaves, want_mean: bool):
    """Posterior means (n, D) or losses (n,) against ``leaves`` under ``channel``'s decoder."""
    phi = np.ascontiguousarray(phi, dtype=float)
    n = phi.shape[0]
    design = np.asarray(design)
    out_mean = np.zeros((n, spec.dim)) if want_mean else np.zeros((0, spec.dim))
    out_loss = np.zeros(0) if want_mean else np.zeros(n)
    leaves = np.zeros(0, np.int64) if want_mean else np.ascontiguousarray(leaves, dtype=np.int64)
    n_tok, sigma2 = tokens_law(spec, channel)
    if design.dtype.kind in "iu":
        nodes = np.ascontiguousarray(np.broadcast_to(design, phi.shape), dtype=np.int64)
        if n_tok > 0:
            _kernels._tokens_coord_decode(nodes, phi, n_tok, sigma2, spec.scales, leaves, out_loss, out_mean)
        else:
            _kernels._tree_coord_decode(nodes, phi, float(channel.tau), spec.scales, leaves, out_loss, out_mean)
    else:
        W = design.astype(float, copy=False)
        W = np.ascontiguousarray(W[None] if W.ndim == 2 else W)
        if n_tok > 0:
            V, z = row_span(W, phi)
            tokens_dense_decode(V, z, n_tok, sigma2, spec.scales, leaves, out_loss, out_mean)
        else:
            _kernels._tree_dense_decode(W, phi, float(channel.tau), 1e-9, spec.scales, leaves, out_loss, out_mean)
    return out_mean if want_mean else out_loss


def posterior_means(spec: TreeSpec, channel, design, phi) -> np.ndarray:
    """(n, D) exact posterior means under the channel (``fvnum.mc.channels.Channel``) given readings ``phi``
    (n, B) of ``design``: node numbers (B,) or (n, B) (0: idle), or unit rows (B, D) or (n, B, D)."""
    return _decode(spec, channel, design, phi, None, True)


def posterior_losses(spec: TreeSpec, channel, design, phi, leaves) -> np.ndarray:
    """(n,) ``||E[theta | phi] - theta_leaf||^2`` under the channel's exact decoder (see :func:`posterior_means`)."""
    return _decode(spec, channel, design, phi, leaves, False)


# the analyses of the tree found by its class (fvnum.priors.analyses; loaded on first use): its noisy optimum
register_analysis(TreeSpec, "noisy_bellman", "fvnum.optimum.noisy_dp:tree_noisy_bellman")
