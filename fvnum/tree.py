"""Tree prior, numerically (THEORY.md section 6): float scales, sampling, coordinates of the latent,
and the exact Bayes decoders behind :func:`posterior_mean`.

Decoders (exact posterior mean under the gaussian-channel likelihood):
- coordinate readings: one upward and one downward pass over the tree, touching only the read nodes
  and their ancestors (``O(B K)`` per sample, at most ``O(D)``; see ``_kernels._coord_posterior``);
- general unit rows: enumeration of the ``2^K`` leaves with incremental projections, ``O(2^K B)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _kernels


@dataclass(frozen=True, eq=False)
class TreeSpec:
    """Numeric view of a ``fvsym.TreePrior``: ``depth`` K and float ``scales`` (a_1..a_K)."""

    depth: int
    scales: np.ndarray

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
        on = (((leaves >> (K - k + 1)) | (1 << (k - 1))) == nodes) & (nodes > 0)
        sign = 1.0 - 2.0 * ((leaves >> (K - k)) & 1)
        return np.where(on, self.scales[k - 1] * sign, 0.0)

    def path_nodes(self, leaves) -> np.ndarray:
        """(n, K): the path nodes ``n_1..n_K`` of each leaf."""
        K = self.depth
        k = np.arange(1, K + 1)
        leaves = np.asarray(leaves, dtype=np.int64)[:, None]
        return (leaves >> (K - k + 1)) | (1 << (k - 1))

    def signs(self, leaves) -> np.ndarray:
        """(n, K): the signs ``s_1..s_K`` of each leaf."""
        K = self.depth
        k = np.arange(1, K + 1)
        return 1 - 2 * ((np.asarray(leaves, dtype=np.int64)[:, None] >> (K - k)) & 1)

    def thetas(self, leaves) -> np.ndarray:
        """(n, D) dense latents."""
        leaves = np.asarray(leaves, dtype=np.int64)
        out = np.zeros((leaves.size, self.dim))
        rows = np.arange(leaves.size)[:, None]
        out[rows, self.path_nodes(leaves) - 1] = self.scales * self.signs(leaves)
        return out


def numeric_prior(prior):
    """``TreeSpec`` or ``GaussSpec`` of a fvsym prior with numeric parameters (or pass one through)."""
    from .gaussian import GaussSpec

    if isinstance(prior, (TreeSpec, GaussSpec)):
        return prior
    from fvsym.priors import GaussianPrior, TreePrior

    if isinstance(prior, TreePrior):
        if not prior.is_numeric:
            raise ValueError(f"Monte Carlo needs numeric tree scales, got {prior!r}; give alpha a value")
        return TreeSpec(prior.depth, np.array([float(a) for a in prior.scales]))
    if isinstance(prior, GaussianPrior):
        if not all(x.is_number for x in prior.cov):
            raise ValueError(f"Monte Carlo needs a numeric covariance, got {prior!r} with symbols")
        return GaussSpec.from_cov(np.array(prior.cov.evalf(), dtype=float))
    raise ValueError(f"prior must be a fvsym TreePrior or GaussianPrior, got {type(prior).__name__}")


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


def dense_losses(spec: TreeSpec, W, phi, tau: float, leaves, tol: float = 1e-9) -> np.ndarray:
    W = np.asarray(W, dtype=float)
    W = np.ascontiguousarray(W[None] if W.ndim == 2 else W)
    out = np.zeros(phi.shape[0])
    _kernels._tree_dense_decode(
        W, np.ascontiguousarray(phi, dtype=float), float(tau), tol, spec.scales,
        np.ascontiguousarray(leaves, dtype=np.int64), out, np.zeros((0, spec.dim)),
    )
    return out
