"""Gaussian prior, numerically (docs/theory.md section 5): sampling, the closed-form Bayes decoder, the
exact loss of a design, and the water-filling optimal design realised with unit rows.

The decoder is linear: ``E[theta | phi] = C W^T (W C W^T + tau^2 I)^+ phi`` (pseudo-inverse, so it also
holds at ``tau = 0`` and for singular ``C``); with per-sample rows (adaptive policies) it is applied
sample by sample in batches.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from fvnum.priors.capabilities import Capabilities
from fvsym.errors import InputError

@dataclass(frozen=True, eq=False)
class GaussSpec(Capabilities):
    """Numeric view of a ``fvsym.GaussianPrior``: covariance ``cov`` (D, D) and a square root. It answers the
    engine's questions (``fvnum.priors.capabilities.Capabilities``): its posterior mean is linear, its decoder takes unit
    rows, a sample is its value ``theta``."""

    cov: np.ndarray
    root: np.ndarray  # (D, D) with root @ root.T == cov
    eigenvalues: np.ndarray  # largest first
    eigenvectors: np.ndarray  # columns, in the same order
    exact: object = field(default=None, repr=False)  # the fvsym GaussianPrior it was made from, where it was

    name = "gaussian"

    @classmethod
    def from_cov(cls, cov, exact=None) -> "GaussSpec":
        cov = np.asarray(cov, dtype=float)
        vals, vecs = np.linalg.eigh(cov)
        order = np.argsort(-vals, kind="stable")
        vals, vecs = np.maximum(vals[order], 0.0), vecs[:, order]
        if np.count_nonzero(cov - np.diag(np.diag(cov))) == 0:
            root = np.diag(np.sqrt(np.maximum(np.diag(cov), 0.0)))
        else:
            root = vecs * np.sqrt(vals)
        return cls(cov, root, vals, vecs, exact)

    @property
    def dim(self) -> int:
        return self.cov.shape[0]

    @property
    def second_moment(self) -> float:
        return float(np.trace(self.cov))

    def sample(self, n: int, rng) -> np.ndarray:
        """(n, D) draws of ``theta ~ N(0, C)``."""
        return rng.standard_normal((n, self.dim)) @ self.root.T

    # --- fvnum.priors.capabilities.Capabilities ---------------------------------------------------------------------------
    linear_posterior = True
    decodes_nodes = False

    def draw_latents(self, n: int, rng):
        return None, self.sample(n, rng)

    def posterior_means(self, channel, design, phi) -> np.ndarray:
        """(n, D) posterior means given readings ``phi`` (n, B) of ``design``: node numbers (B,) or (n, B) (0:
        idle; node ``n`` reads ``e_n``) or unit rows (B, D) or (n, B, D) (the gaussian channel's decoder)."""
        design = np.asarray(design)
        if design.dtype.kind in "iu":
            design = np.vstack([np.zeros(self.dim), np.eye(self.dim)])[np.broadcast_to(design, np.shape(phi))]
        return _posterior_means(self, design.astype(float), phi, channel.tau)

    def posterior_losses(self, channel, design, phi, theta) -> np.ndarray:
        """(n,) ``||E[theta | phi] - theta||^2`` given readings of unit rows ``design`` (1, B, D) shared or
        (n, B, D)."""
        W = np.asarray(design, dtype=float)
        mean = _posterior_means(self, W[0] if W.ndim == 3 and W.shape[0] == 1 else W, phi, channel.tau)
        return ((mean - theta) ** 2).sum(axis=1)

    def exact_prior(self):
        """The ``fvsym.GaussianPrior`` it was made from, or one of its float covariance."""
        from fvsym.priors import GaussianPrior

        return self.exact if self.exact is not None else GaussianPrior(self.cov)

    @property
    def covariance(self) -> np.ndarray:
        """(D, D): each exact entry of the ``GaussianPrior``'s covariance rounded once (else ``cov``)."""
        if self.exact is None:
            return self.cov
        C = self.exact.cov
        return np.array([[float(C[i, j]) for j in range(C.cols)] for i in range(C.rows)])

    def matched_gaussian(self):
        return self.exact_prior()

    def check_floats(self) -> None:
        from fvnum.priors.checks import check_variance

        check_variance(self.eigenvalues)


def _posterior_means(spec: GaussSpec, W, phi, tau: float) -> np.ndarray:
    """(n, D) posterior means; ``W`` (B, D) shared or (n, B, D) per sample; ``phi`` (n, B)."""
    C = spec.cov
    W = np.asarray(W, dtype=float)
    phi = np.asarray(phi, dtype=float)
    if W.ndim == 2:
        if W.shape[0] == 0:
            return np.zeros((phi.shape[0], spec.dim))
        gain = C @ W.T @ np.linalg.pinv(W @ C @ W.T + tau**2 * np.eye(W.shape[0]), hermitian=True)
        return phi @ gain.T
    if W.shape[1] == 0:
        return np.zeros((phi.shape[0], spec.dim))
    CW = np.einsum("de,nbe->ndb", C, W)  # (n, D, B)
    M = np.einsum("nbd,ndc->nbc", W, CW) + tau**2 * np.eye(W.shape[1])
    return np.einsum("ndb,nb->nd", CW, np.einsum("nbc,nc->nb", np.linalg.pinv(M, hermitian=True), phi))


def numeric_design_loss(spec: GaussSpec, W, tau: float) -> float:
    """Exact loss ``tr P`` of the fixed design ``W`` (B, D) (docs/theory.md section 5)."""
    C = spec.cov
    W = np.asarray(W, dtype=float)
    if W.shape[0] == 0:
        return float(np.trace(C))
    CW = C @ W.T
    return float(np.trace(C) - np.trace(np.linalg.pinv(W @ CW + tau**2 * np.eye(W.shape[0]), hermitian=True) @ CW.T @ CW))


@lru_cache(maxsize=256)
def water_filling_weights(eigenvalues: tuple, budget: int, tau: float) -> np.ndarray:
    """The optimal weights ``s_i`` (aligned with ``eigenvalues``, floats) of rank-constrained water-filling,
    solved exactly by ``fvsym.gaussian.water_filling`` (each float read exactly) and rounded once; cached,
    read-only."""
    from fvsym.gaussian import water_filling

    weights = np.array([float(w) for w in water_filling(eigenvalues, int(budget), float(tau)).weights])
    weights.flags.writeable = False
    return weights


def unit_rows(weights, n_rows: int) -> np.ndarray:
    """``n_rows x j`` matrix ``M`` with unit rows and ``M^T M = diag(weights)`` (``sum = n_rows``), by the
    rotation construction of ``fvsym.gaussian._unit_rows`` (a constructive Schur-Horn step): rotate a
    row of squared norm > 1 with one < 1 until the first has norm exactly 1."""
    w = np.asarray(weights, dtype=float)
    j = w.size
    M = np.zeros((n_rows, j))
    M[np.arange(j), np.arange(j)] = np.sqrt(w)
    norms = np.concatenate([w, np.zeros(n_rows - j)])
    done = np.abs(norms - 1) < 1e-12
    while not done.all():
        open_rows = np.flatnonzero(~done)
        big = [r for r in open_rows if norms[r] > 1]
        small = [r for r in open_rows if norms[r] < 1]
        if not big or not small:  # rounding: the remaining norms are all ~1
            break
        a, b = big[0], small[0]
        cos2 = (1 - norms[b]) / (norms[a] - norms[b])
        cos, sin = np.sqrt(cos2), np.sqrt(1 - cos2)
        ra, rb = M[a].copy(), M[b].copy()
        M[a], M[b] = cos * ra + sin * rb, -sin * ra + cos * rb
        norms[a], norms[b] = 1.0, norms[a] + norms[b] - 1
        done[a] = True
        done[b] = abs(norms[b] - 1) < 1e-12
    return M / np.linalg.norm(M, axis=1, keepdims=True)


def numeric_optimal_design(spec: GaussSpec, budget: int, tau: float) -> np.ndarray:
    """A water-filling optimal design (B x D, unit rows): ``W = M V^T`` on the active eigen-directions.
    By Theorem G1 no adaptive policy beats it."""
    B = int(budget)
    if B == 0:
        return np.zeros((0, spec.dim))
    weights = water_filling_weights(tuple(float(c) for c in spec.eigenvalues), B, float(tau))
    active = np.flatnonzero(weights > 0)
    return unit_rows(weights[active], B) @ spec.eigenvectors[:, active].T


# --- Theorem G1, numerically -------------------------------------------------------------
def numeric_deep_shallow_gap(prior, budget, tau, *, seed: int = 0, n_starts: int = 8, method: str = "auto"):
    """Theorem G1, the independent numeric check of :func:`fvsym.gaussian.deep_shallow_gap`: the deep optimum
    (``L = B`` layers of width 1) equals the shallow one (``L = 1``); the result (a
    ``fvsym.gaussian.DepthComparison``) has ``gap = deep - shallow`` and ``route`` says how ``deep`` was found.

    ``method="auto"``: ``"symbolic"`` when ``tau`` or the covariance is symbolic, else ``"numeric"``.
    ``"symbolic"``: exact, :func:`fvsym.gaussian.deep_shallow_gap`. ``"numeric"``, as follows.

    ``shallow``: the exact water-filling optimum (a fixed ``B x D`` design). ``deep``: the Bellman
    recursion over Gaussian beliefs. The posterior covariance after a reading does not depend on the
    value read, so the recursion is a deterministic dynamic programme over ``P`` and the optimal
    policy is a fixed sequence ``w_1 .. w_B``; it is found here by minimising ``tr P_B`` over the
    sequence, ``P`` evolving by rank-one updates, with BFGS (scipy) from ``n_starts`` random starts
    drawn from ``seed``. This uses no water-filling, so the two are independent computations of the
    same number.
    """
    from fvsym import gaussian
    from fvsym._validate import check_choice, check_int, check_tau

    gauss = gaussian._as_gaussian(prior)
    C = gauss.cov
    B = check_int(budget, "budget", minimum=0)
    n_starts = check_int(n_starts, "n_starts", minimum=1)
    t = check_tau(tau)
    method = check_choice(method, "method", ("auto", "symbolic", "numeric"))
    numeric = t.is_number and all(x.is_number for x in C)
    if method == "numeric" and not numeric:
        raise InputError("method 'numeric' needs a numeric covariance and tau; use 'symbolic'")
    if method == "symbolic" or not numeric:
        return gaussian.deep_shallow_gap(gauss, B, t)
    from scipy.optimize import minimize

    shallow = gaussian.water_filling(gauss.eigenvalues, B, t).loss
    C_np = np.array(C.evalf(), dtype=float)
    if B == 0:
        return gaussian.DepthComparison(float(np.trace(C_np)), shallow, "numeric", False, "nothing read")
    rng = np.random.default_rng(seed)
    best = np.inf
    for _ in range(n_starts):
        x0 = rng.standard_normal(B * C.rows)
        res = minimize(
            _sequential_trace, x0, args=(C_np, B, float(t) ** 2), jac=True, method="BFGS",
            options={"gtol": 1e-12, "maxiter": 5000},
        )
        best = min(best, float(res.fun))
    return gaussian.DepthComparison(best, shallow, "numeric", False, f"BFGS over the sequence, {n_starts} starts")


def _sequential_trace(params, C, n_layers: int, tau2: float):
    """``tr P_B`` after ``B`` successive rank-one updates and its gradient in the raw row vectors.

    ``P <- P - P w w^T P / (w^T P w + tau^2)`` with ``w = v / |v|``; gradients by a backward pass:
    with ``G = d tr P_B / d P_l``, ``u = P w`` and ``delta = w^T u + tau^2``,
    ``d/dw = (2/delta) ((u^T G u / delta) u - P G u)`` and
    ``G_{l-1} = G - (G u w^T + w u^T G) / delta + (u^T G u / delta^2) w w^T``.
    """
    D = C.shape[0]
    V = params.reshape(n_layers, D)
    norms = np.linalg.norm(V, axis=1)
    tape, P = [], C
    floor = 1e-14 * max(np.trace(C), 1.0)
    for v, n in zip(V, norms):
        w = v / n
        u = P @ w
        delta = w @ u + tau2
        tape.append((P, w, u, delta))
        if delta > floor:
            P = P - np.outer(u, u) / delta
    value = float(np.trace(P))
    G = np.eye(D)
    grad = np.zeros_like(V)
    for l in range(n_layers - 1, -1, -1):
        P, w, u, delta = tape[l]
        if delta <= floor:
            continue
        Gu = G @ u
        q = u @ Gu
        g_w = (2 / delta) * ((q / delta) * u - P @ Gu)
        grad[l] = (g_w - (w @ g_w) * w) / norms[l]
        G = G - (np.outer(Gu, w) + np.outer(w, Gu)) / delta + (q / delta**2) * np.outer(w, w)
    return value, grad.ravel()
