"""The greedy keyed policy (:mod:`fvnum.keys.adaptive`) run on drawn contexts of tokens (docs/theory.md section 8):
target leaves ``s`` uniform, tokens ``x_1..x_N ~ N(0, I_D)`` and label noise drawn once (:func:`contexts`), values
``y_i = <theta, x_i> + eps_i`` (:func:`target_values`); every reading is the family's exact reading of the drawn
tokens (:func:`family_readings`: ``phi = (1/N) sum_i y_i f(x_i)``, or ``sum_i softmax_i(s(x_i)) y_i``), not a draw
from its CLT law; the policy's decoder is its exact Bayes decoder under the family's CLT law
(:func:`posterior_means`). Its key patching is :mod:`fvnum.patching.keyed`, its rows on real tokens
:mod:`fvnum.keys.real_tokens`.
"""
from __future__ import annotations

import numpy as np

from fvnum.mc import _chunks
from fvsym.errors import InputError


def family_readings(keys, rows: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(n,) exact readings of one row per context: ``rows`` (n, D) as the keyed policy reads them (unit rows of
    linear and weighted keys with the layer-1 key's ``Q`` and ``c``; softmax score rows ``b`` with its ``Q``),
    tokens ``X`` (n, N, D), values ``y`` (n, N)."""
    proj = np.einsum("nid,nd->ni", X, rows)  # (n, N)
    if keys.name == "softmax":
        s = proj - (X**2) @ keys.Q
        a = np.exp(s - s.max(axis=1, keepdims=True))
        return (a * y).sum(1) / a.sum(1)
    if keys.name == "weighted":
        if keys.Q.ndim != 1:
            raise InputError("the keyed policy's weighted key has a diagonal Q; got a full matrix")
        proj = proj / ((X**2) @ keys.Q + keys.c)
    return (proj * y).mean(1)


def posterior_means(spec, keys, rows: np.ndarray, phi: np.ndarray, n_tokens: int, s2: float) -> np.ndarray:
    """(n, D) the policy's decoder: the exact posterior mean of the tree's leaves given readings ``phi`` (n, k)
    of ``rows`` (n, k, D) under the family's CLT law (:func:`fvnum.keys.tree.tree_law`)."""
    from fvnum.keys.lookahead import _posterior_state
    from fvnum.keys.tree import _torch, _Tree, geometry_of

    torch = _torch()
    tree = _Tree(spec)
    with torch.no_grad():
        geo = geometry_of(tree, keys, s2, torch)
        *_, logw = _posterior_state(tree, geo, torch.as_tensor(rows, dtype=torch.float64),
                                    torch.as_tensor(phi, dtype=torch.float64), n_tokens, torch)
        return (torch.exp(logw) @ torch.as_tensor(tree.thetas, dtype=torch.float64)).numpy()


def contexts(spec, samples: int, n_tokens: int, s2: float, seed: int) -> tuple:
    """The target contexts of :func:`keyed_patching_table`: leaves (n,), tokens (n, N, D), label noise (n, N)."""
    rng = np.random.default_rng(_chunks.seed_sequence(seed, _chunks.DONOR))
    leaves = spec.sample(samples, rng)
    X = rng.standard_normal((samples, n_tokens, spec.dim))
    return leaves, X, np.sqrt(s2) * rng.standard_normal((samples, n_tokens))


def target_values(spec, samples: int, n_tokens: int, s2: float, seed: int) -> tuple:
    """The target contexts of :func:`contexts` with their latents and values: leaves (n,), ``theta`` (n, D), tokens
    ``X`` (n, N, D), label noise (n, N) and values ``y = <theta, x_i> + eps_i`` (n, N)."""
    leaves, X, eps = contexts(spec, samples, n_tokens, s2, seed)
    theta = spec.thetas(leaves)
    return leaves, theta, X, eps, np.einsum("nid,nd->ni", X, theta) + eps


def decoded_losses(spec, keys, rows: np.ndarray, phi: np.ndarray, theta: np.ndarray, n_tokens: int,
                   s2: float) -> np.ndarray:
    """(n,) ``||theta_hat - theta||^2`` of the policy's decoder (:func:`posterior_means` of readings ``phi`` (n, k)
    of ``rows`` (n, k, D)) against the latents ``theta`` (n, D)."""
    return ((posterior_means(spec, keys, rows, phi, n_tokens, s2) - theta) ** 2).sum(-1)


class _Policy:
    """The keyed policy of ``first`` on ``n`` contexts: the rows it reads after given readings."""

    def __init__(self, prior, family, first, n, n_tokens, s2, seed, steps, search=None):
        """``search``: the policy's ``fvnum.KeyedSearch`` (its ``first`` replaced by ``first``; default one of
        ``steps`` Adam steps)."""
        from dataclasses import replace

        from fvnum.mc.channels import tokens
        from fvnum.options import KeyedSearch

        self.prior, self.family, self.first, self.n = prior, family, first, n
        self.channel = tokens(n_tokens, s2, keys=family)
        search = KeyedSearch(first=first, steps=steps) if search is None else replace(search, first=first)
        self.kw = dict(samples=n, seed=seed, search=search)

    def rows(self, readings: np.ndarray) -> np.ndarray:
        """(n, k + 1, D): the rows of layers ``1..k + 1`` after ``readings`` (n, k) of layers ``1..k``."""
        from fvnum.keys.adaptive import adaptive_keyed_trace

        k = readings.shape[1]
        pad = np.concatenate([readings, np.zeros((self.n, 1))], axis=1)
        return adaptive_keyed_trace(self.prior, k + 1, self.channel, readings=pad, **self.kw).rows

    def run(self, X, y, budget, patch=None, prefix=None):
        """Readings (n, budget) and the rows read (n, budget, D) of the policy on values ``y``; ``patch = (l,
        rows)``: layer ``l`` reads ``rows`` (n, D) instead of its own choice; ``prefix = (phi, rows)``: the
        readings and rows of the first layers, already known (the same values, the same policy)."""
        keys = self.first.keys
        phi, read = (np.zeros((self.n, 0)), self.rows(np.zeros((self.n, 0)))) if prefix is None else prefix
        for k in range(phi.shape[1] + 1, budget + 1):
            if read.shape[1] < k:
                read = np.concatenate([read, self.rows(phi)[:, k - 1 : k]], axis=1)
            if patch is not None and patch[0] == k:
                read = read.copy()
                read[:, k - 1] = patch[1]
            phi = np.concatenate([phi, family_readings(keys, read[:, k - 1], X, y)[:, None]], axis=1)
        return phi, read
