"""The row ``gd_steps`` (docs/theory.md section 13): the loss of L steps of preconditioned gradient descent in context,
``d = D`` channels a layer reading residual values, at finite ``N``, by Monte Carlo over the tokens, on any prior.

Steps are scalar, ``Gamma_l = gamma_l I`` (``shared``: every layer ``gamma / L``; ``per_layer``: ``gamma_l`` each;
or given). The error after L steps is a polynomial in ``S = X^T X / N`` (``fvsym.gd``):

    theta - theta_hat_L = sum_(k=0)^L q_k z_k,   z_0 = theta,  z_k = S^(k-1) b  (b = X^T y / N),

with ``q`` the coefficients of ``Q(lambda) = prod_l (1 - gamma_l lambda)`` (``q_0 = 1``). So one pass of ``L``
products with ``X`` and ``X^T`` per context gives the Gram matrix ``G = (<z_j, z_k>)``, and the loss of any steps is
``q^T G q``: the steps are chosen on the mean Gram matrix of one stream of contexts (``SELECT``, ``select_samples``)
and the loss is estimated on an independent one (``EVAL``, ``samples``), so the estimate is unbiased for the chosen
steps and, as a loss the best steps can only lower, an honest upper bound on the optimum over scalar steps.
``per_layer``: ``min q^T G q`` over ``q_0 = 1`` is one linear solve, the steps are the reciprocal zeros of ``Q``
(real on a noiseless context, where ``q^T G q = int Q^2`` against a positive measure; with label noise a zero may
not be real, and then a Nelder-Mead search over real steps from several starts, the shared optimum among them);
``shared``: the real zero of a polynomial's derivative with the least loss. ``fvnum.mc._reference.gd_errors`` runs
the same steps literally (residual readings, layer by layer), and a test holds the two equal. Where ``N >= D`` the
contexts are drawn through what the loss depends on, ``X^T X`` (Bartlett's factor) and ``X^T eps``, not the tokens
(:func:`bartlett_gram_matrices`; a test holds the two draws equal in law).

Many layers: the per-layer optimum has steps near the reciprocal of the spectrum's lower edge (17 at ``a = 1``,
``L = 12`` in the limit), which amplify the contexts whose ``S`` has small eigenvalues below the bulk: the per-context
loss grows heavy tails with ``L``, the standard error with it, and steps chosen on ``select_samples`` contexts
overfit them (at ``D = 32``, ``a = 1``: 0.165 +- 0.007 at ``L = 6`` against 0.143 in the limit, 0.18 +- 0.06 at
``L = 12``). Raise ``select_samples`` there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
import numpy as np

from fvsym._validate import check_int, check_real
from fvsym.errors import InputError
from fvsym.gd import STEPS, check_steps

from fvnum.estimate import Estimate
from fvnum.mc import _chunks
from fvnum.mc.channels import tokens_of
from fvnum.mc.simulate import check_inputs
from fvnum.priors.capabilities import capability

MAX_LAYERS = 12  # the Gram matrix of S^k b grows like (1 + D/N)^k: beyond this its solve loses the steps' digits
CHUNK_FLOATS = 1 << 22  # floats of the tokens of one chunk of contexts (32 MiB)
SELECT_SAMPLES = 2_000


@dataclass(frozen=True)
class GDEstimate(Estimate):
    """An :class:`~fvnum.estimate.Estimate` of the loss ``E||theta_hat_L - theta||^2`` with the ``steps`` it was
    measured at (``(gamma,)`` shared, each layer ``gamma / L``; ``(gamma_1, .., gamma_L)`` per layer) and
    ``second_moment`` ``E||theta||^2`` of the prior (``relative``: the loss over it, what ``fvsym.gd`` gives)."""

    steps: tuple = field(default=(), compare=False)
    second_moment: float = field(default=math.nan, compare=False)

    @property
    def relative(self) -> Estimate:
        return Estimate(self.value / self.second_moment, self.stderr / self.second_moment, self.n, self.how)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "steps": list(self.steps), "second_moment": self.second_moment}


def _thetas(spec, n: int, rng) -> np.ndarray:
    latents, theta = capability(spec, "draw_latents")(n, rng)
    return np.asarray(theta if theta is not None else spec.thetas(latents), dtype=float)


def gram_matrices(thetas, X, y, layers: int, P=None) -> np.ndarray:
    """(n, L+1, L+1) Gram matrices of ``z_0 = theta``, ``z_k = (P S)^(k-1) P b`` (``P`` the preconditioner, (D, D);
    None: the identity): the loss of steps with ``Q``'s coefficients ``q`` is ``q^T G q`` per context."""
    N = X.shape[1]
    z = [thetas, _apply(P, np.einsum("ni,nid->nd", y, X) / N)]
    for _ in range(layers - 1):
        z.append(_apply(P, np.einsum("ni,nid->nd", np.einsum("nid,nd->ni", X, z[-1]), X) / N))
    Z = np.stack(z, axis=1)  # (n, L+1, D)
    return Z @ np.swapaxes(Z, 1, 2)


def _apply(P, v):
    """``P v`` for a batch of vectors ``v`` (n, D); ``P`` None is the identity."""
    return v if P is None else v @ P.T


def bartlett_gram_matrices(thetas, A, xi, N: int, s2: float, layers: int, P=None) -> np.ndarray:
    """:func:`gram_matrices` from the Bartlett factor ``A`` (n, D, D) of ``X^T X = A A^T`` and ``xi`` (n, D) standard
    normal: ``X^T eps`` given ``X`` is ``N(0, s2 X^T X)``, so ``(X^T X, X^T eps)`` has the law of ``(A A^T, sqrt(s2) A
    xi)`` and ``b = A (A^T theta + sqrt(s2) xi) / N``; every ``z_k`` is a product with ``A`` and ``A^T``."""
    def apply(v):  # P (A A^T / N) v, batched
        return _apply(P, (A @ (np.swapaxes(A, 1, 2) @ v[..., None]))[..., 0] / N)

    b = (A @ ((np.swapaxes(A, 1, 2) @ thetas[..., None])[..., 0] + math.sqrt(s2) * xi)[..., None])[..., 0] / N
    z = [thetas, _apply(P, b)]
    for _ in range(layers - 1):
        z.append(apply(z[-1]))
    Z = np.stack(z, axis=1)
    return Z @ np.swapaxes(Z, 1, 2)


def _bartlett(rng, m: int, N: int, D: int) -> np.ndarray:
    """(m, D, D) lower-triangular ``A`` with ``A A^T`` Wishart(``I_D``, ``N``), ``N >= D``: ``A_ii = sqrt(chi2(N - i))``,
    ``A_ij ~ N(0, 1)`` below the diagonal (Bartlett's decomposition)."""
    A = np.zeros((m, D, D))
    rows, cols = np.tril_indices(D, -1)
    A[:, rows, cols] = rng.standard_normal((m, rows.size))
    A[:, np.arange(D), np.arange(D)] = np.sqrt(rng.chisquare(N - np.arange(D), size=(m, D)))
    return A


def _grams(spec, layers: int, N: int, s2: float, n: int, seed: int, purpose: int, tokens: bool | None = None, P=None):
    """(n, L+1, L+1) Gram matrices of ``n`` contexts of the stream ``purpose``. The tokens ``X`` are drawn where
    ``N < D`` (or ``tokens``); otherwise only what the loss depends on, ``X^T X`` by its Bartlett factor and ``X^T eps``
    (``D^2 / 2`` normals a context instead of ``N D``: the same law, other draws)."""
    rng = np.random.default_rng(_chunks.seed_sequence(seed, purpose))
    D = spec.dim
    tokens = N < D if tokens is None else tokens
    chunk = max(1, CHUNK_FLOATS // ((N if tokens else D) * D))
    out = []
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        thetas = _thetas(spec, m, rng)
        if tokens:
            X = rng.standard_normal((m, N, D))
            y = np.einsum("nid,nd->ni", X, thetas) + math.sqrt(s2) * rng.standard_normal((m, N))
            out.append(gram_matrices(thetas, X, y, layers, P))
        else:
            out.append(bartlett_gram_matrices(thetas, _bartlett(rng, m, N, D), rng.standard_normal((m, D)), N, s2,
                                              layers, P))
    return np.concatenate(out)


def coefficients(steps, layers: int, kind: str) -> np.ndarray:
    """``q`` (L+1,): the coefficients of ``Q(lambda)`` in powers of ``lambda`` for the steps."""
    if kind == "shared":
        g = float(steps[0]) / layers
        return np.array([math.comb(layers, k) * (-g) ** k for k in range(layers + 1)])
    q = np.array([1.0])
    for gamma in steps:
        q = np.concatenate([q, [0.0]]) - float(gamma) * np.concatenate([[0.0], q])
    return q


def _per_layer(G: np.ndarray, layers: int) -> tuple:
    first = np.linalg.solve(G, np.eye(layers + 1)[0])
    q = first / first[0]
    zeros = np.roots(q[::-1])  # np.roots takes the highest power first
    if np.all(np.abs(zeros.imag) <= 1e-9 * np.abs(zeros)) and np.all(zeros.real != 0):
        return tuple(sorted(1.0 / zeros.real))
    from scipy.optimize import minimize  # a zero off the real line (label noise): search the real steps

    def loss(gammas):
        q = coefficients(gammas, layers, "per_layer")
        return float(q @ G @ q)

    real_parts = np.sort(1.0 / np.where(zeros.real != 0, zeros.real, 1.0))
    shared = np.full(layers, _shared(G, layers)[0] / layers)  # a feasible point: per layer never loses to shared
    starts = [real_parts, shared, shared * np.linspace(0.5, 1.5, layers), real_parts * np.linspace(0.9, 1.1, layers)]
    found = [minimize(loss, x, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20_000})
             for x in starts]
    return tuple(sorted(min(found, key=lambda f: f.fun).x))


def _shared(G: np.ndarray, layers: int) -> tuple:
    poly = np.zeros(2 * layers + 1)  # loss(g) = sum_(j,k) C(L,j) C(L,k) (-g)^(j+k) G_jk, in powers of g
    for j in range(layers + 1):
        for k in range(layers + 1):
            poly[j + k] += math.comb(layers, j) * math.comb(layers, k) * (-1) ** (j + k) * G[j, k]
    loss = np.polynomial.Polynomial(poly)
    zeros = loss.deriv().roots()
    real = zeros.real[np.abs(zeros.imag) <= 1e-9 * np.maximum(1.0, np.abs(zeros))]
    g = min(real, key=loss)
    return (float(g) * layers,)


def best_steps(G: np.ndarray, layers: int, steps: str) -> tuple:
    """The steps minimising ``q^T G q`` (``G`` a mean Gram matrix): ``(gamma,)`` shared, per layer one each."""
    return _per_layer(G, layers) if steps == "per_layer" else _shared(G, layers)


def _check_given(steps, layers: int) -> tuple:
    try:
        values = tuple(steps)
    except TypeError:
        raise InputError(f"steps must be 'shared', 'per_layer' or {layers} numbers (one a layer), got {steps!r}") \
            from None
    if len(values) != layers:
        raise InputError(f"steps must hold one number a layer, {layers}, got {len(values)}")
    return tuple(check_real(v, f"step {i + 1}") for i, v in enumerate(values))


def preconditioner_of(spec, preconditioner) -> np.ndarray | None:
    """The (D, D) preconditioner ``P`` of ``Gamma_l = gamma_l P``: None or ``"identity"`` (None: scalar steps),
    ``"prior"`` (the prior's covariance scaled to mean eigenvalue 1, so an isotropic prior gives the identity), or
    a symmetric positive semi-definite (D, D) array, used as given."""
    D = spec.dim
    if preconditioner is None or (isinstance(preconditioner, str) and preconditioner == "identity"):
        return None
    if isinstance(preconditioner, str):
        if preconditioner != "prior":
            raise InputError(f"preconditioner must be 'identity', 'prior' or a ({D}, {D}) matrix, got {preconditioner!r}")
        C = getattr(spec, "covariance", None)
        if C is None:
            raise InputError(f"preconditioner 'prior' needs the prior's covariance; {type(spec).__name__} has none")
        C = np.asarray(C, dtype=float)
        return C / (np.trace(C) / D)
    P = np.asarray(preconditioner, dtype=float)
    if P.shape != (D, D) or not np.all(np.isfinite(P)):
        raise InputError(f"preconditioner must be a finite ({D}, {D}) matrix, got shape {P.shape}")
    if not np.allclose(P, P.T) or np.linalg.eigvalsh((P + P.T) / 2).min() < -1e-12 * max(1.0, np.abs(P).max()):
        raise InputError("preconditioner must be symmetric positive semi-definite")
    return P


def gd_steps(prior, layers: int, channel, *, steps="shared", preconditioner=None, samples: int = 10_000,
             select_samples: int = SELECT_SAMPLES, seed: int = 0) -> GDEstimate:
    """Loss ``E||theta_hat_L - theta||^2`` of ``layers`` steps of preconditioned gradient descent in context (L
    layers of ``d = D`` channels reading residual values, docs/theory.md section 13) under ``channel``, the tokens
    channel ``fvnum.tokens(N, s2=...)``: ``N`` tokens ``x_i ~ N(0, I_D)``, ``y_i = <theta, x_i> + eps_i``,
    ``eps_i ~ N(0, s2)`` (gradient descent reads the values, so the channel's key family plays no part), for any
    prior that samples ``theta`` (tree, Gaussian, atoms, mixtures, registered priors).

    ``steps``: ``"shared"`` (``Gamma_l = (gamma / L) I``), ``"per_layer"`` (``gamma_l I``), both chosen on
    ``select_samples`` contexts of the ``SELECT`` stream, or ``L`` given numbers (per layer). The loss is measured on
    ``samples`` independent contexts (``EVAL``): a :class:`GDEstimate` with the steps and ``relative`` (the loss over
    ``E||theta||^2``, what the limit ``fvsym.gd.gd_steps_limit`` gives as ``N, D -> oo``). Same ``seed``, same
    numbers. ``preconditioner`` (:func:`preconditioner_of`): ``Gamma_l = gamma_l P`` instead of ``gamma_l I``; the
    error is then the same polynomial in ``P S`` applied to ``P b``, so the steps are chosen the same way."""
    spec, channel, samples, seed, _ = check_inputs(prior, tokens_of(channel, "gd_steps"), samples=samples, seed=seed)
    layers = check_int(layers, "layers (L)", 1, MAX_LAYERS)
    N, s2, D = channel.n_tokens, channel.s2, spec.dim
    P = preconditioner_of(spec, preconditioner)
    pre = "" if P is None else f", preconditioned ({preconditioner if isinstance(preconditioner, str) else 'given P'})"
    if isinstance(steps, str):
        kind = check_steps(steps)
        select_samples = check_int(select_samples, "select_samples", 2)
        G = _grams(spec, layers, N, s2, select_samples, seed, _chunks.SELECT, P=P).mean(axis=0)
        chosen = best_steps(G, layers, kind)
        how = f"mc, {kind} steps{pre} chosen on {select_samples} contexts (SELECT), loss on independent ones (EVAL)"
    else:
        kind, chosen = "per_layer", _check_given(steps, layers)
        how = f"mc, given steps{pre}"
    q = coefficients(chosen, layers, kind)
    grams = _grams(spec, layers, N, s2, samples, seed, _chunks.EVAL, P=P)
    losses = np.einsum("j,njk,k->n", q, grams, q)
    est = Estimate.of(losses, how)
    return GDEstimate(est.value, est.stderr, est.n, how, None, None, tuple(float(s) for s in chosen),
                      float(spec.second_moment))


__all__ = ["GDEstimate", "MAX_LAYERS", "STEPS", "bartlett_gram_matrices", "best_steps", "coefficients", "gd_steps",
           "gram_matrices", "preconditioner_of"]
