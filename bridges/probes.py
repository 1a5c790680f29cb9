"""Function-vector probes (THEORY.md section 9): how well the workspace after layer ``l`` decodes the
path prefix ``s_1 .. s_l`` and each sign ``s_k``.

The probe is linear: a ridge-regularised least-squares fit of one-hot targets on standardised
features (with a bias), fitted on one half of the samples and scored on the other (held out).
It works on plain arrays, so the same code probes a trained model's workspace and the theory
strategy's function vector ``Phi_l``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ProbeScore:
    """Held-out accuracy of a probe with its binomial standard error and the chance level."""

    accuracy: float
    stderr: float
    chance: float
    n_test: int


def _design(features: np.ndarray, mean, scale) -> np.ndarray:
    z = (features - mean) / scale
    return np.hstack([z, np.ones((z.shape[0], 1))])


def linear_probe(features, labels, *, ridge: float = 1e-3, seed: int = 0) -> ProbeScore:
    """Fit a linear probe ``features -> labels`` on a random half, score accuracy on the other half.

    ``features``: (n, f) array; ``labels``: (n,) integer classes.
    """
    X = np.asarray(features, dtype=float)
    y = np.asarray(labels)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(f"probe needs features (n, f) and labels (n,), got {X.shape} and {y.shape}")
    if X.shape[0] < 4:
        raise ValueError(f"probe needs at least 4 samples, got {X.shape[0]}")
    classes, y_idx = np.unique(y, return_inverse=True)
    rng = np.random.default_rng(seed)
    order = rng.permutation(X.shape[0])
    half = X.shape[0] // 2
    train, test = order[:half], order[half:]
    chance = float(np.bincount(y_idx[train], minlength=len(classes)).max() / len(train))
    if len(classes) == 1 or X.shape[1] == 0:
        majority = np.bincount(y_idx[train], minlength=len(classes)).argmax()
        acc = float(np.mean(y_idx[test] == majority))
    else:
        mean = X[train].mean(axis=0)
        scale = X[train].std(axis=0) + 1e-12
        A = _design(X[train], mean, scale)
        T = np.eye(len(classes))[y_idx[train]]
        coef = np.linalg.solve(A.T @ A + ridge * len(train) * np.eye(A.shape[1]), A.T @ T)
        pred = (_design(X[test], mean, scale) @ coef).argmax(axis=1)
        acc = float(np.mean(pred == y_idx[test]))
    n = len(test)
    return ProbeScore(acc, float(np.sqrt(max(acc * (1 - acc), 1.0 / n) / n)), chance, n)


def prefix_labels(signs: np.ndarray, length: int) -> np.ndarray:
    """Integer code of the prefix ``s_1 .. s_length`` of each row of ``signs`` (n, K) in {+1, -1}."""
    signs = np.asarray(signs)
    code = np.zeros(signs.shape[0], dtype=np.int64)
    for k in range(length):
        code = 2 * code + (signs[:, k] < 0)
    return code


def probe_layers(workspaces, signs, *, seed: int = 0) -> dict:
    """Probe every layer's function vector.

    ``workspaces``: list over layers ``l = 1..L`` of (n, f_l) arrays (the state after layer ``l``);
    ``signs``: (n, K) leaf signs. Returns ``{"prefix": [[acc, se, chance] per layer],
    "sign": [[acc per k] per layer]}`` where ``prefix[l-1]`` decodes ``s_1..s_l`` (capped at ``K``).
    """
    signs = np.asarray(signs)
    K = signs.shape[1]
    prefix, per_sign = [], []
    for l, ws in enumerate(workspaces, start=1):
        m = min(l, K)
        p = linear_probe(ws, prefix_labels(signs, m), seed=seed)
        prefix.append([p.accuracy, p.stderr, p.chance])
        per_sign.append([linear_probe(ws, signs[:, k], seed=seed).accuracy for k in range(K)])
    return {"prefix": prefix, "sign": per_sign}
