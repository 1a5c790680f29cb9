"""The law of the readings of a key channel given each latent, and the Bayes decoder on it (docs/theory.md section 2,
corrected in docs/theory.md; the key families whose laws these are: :mod:`fvnum.keys.families`, which these names
are importable from too).

Tokens ``x_i ~ N(0, I_D)``, ``y_i = <theta, x_i> + eps_i`` (``eps_i ~ N(0, s2)``). For ``k`` keys
``f = (f_1..f_k)`` the readings are a mean of ``N`` i.i.d. vectors ``y_i f(x_i)``, so at the CLT level
they are jointly Gaussian given ``theta`` with

- mean ``E[y f(x)] = E[(theta.x) f(x)] = (E grad f)^T theta`` (Stein's lemma), and
- covariance ``(E[((theta.x)^2 + s2) f f^T] - mean mean^T) / N``.

A :class:`ReadingLaw` holds both for each of ``M`` latents. :func:`law_posterior_mean` is the exact Bayes
decoder under that law (a finite set of latents with prior weights): readings that are functions of others
(a repeated row, rows in the span of others) give a singular covariance and carry nothing new; the
decoder works in the span of the covariances (pseudo-inverse, log-pseudo-determinant).

Laws from samples: :func:`law_from_key_values` (any key values on a fixed token sample) and :func:`law_from_scores`
(softmax readings of any scores, with :func:`finite_n_terms`, the next order in ``1/N``); in closed form:
:func:`softmax_law` (the parametric softmax scores ``s = b.x - x^T Q x``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fvsym._validate import check_int, check_real
from fvsym.errors import InputError

MAX_CHUNK = 1 << 22  # entries of the (n_x, M) projection matrix held at once


@dataclass(frozen=True)
class ReadingLaw:
    """Law of the stacked readings ``phi`` (``k`` values) given each of ``M`` latents (CLT level):
    ``mean`` (M, k) ``E[phi | theta_m]`` and ``cov`` (M, k, k) ``Cov[phi | theta_m]`` (already divided by N).
    A law per sample (adaptive rows) has ``mean`` (n, M, k) and ``cov`` (n, M, k, k)."""

    mean: np.ndarray
    cov: np.ndarray

    def __post_init__(self):
        mean, cov = np.asarray(self.mean, dtype=float), np.asarray(self.cov, dtype=float)
        if mean.ndim not in (2, 3) or cov.shape != mean.shape + mean.shape[-1:]:
            raise InputError(f"a reading law needs mean (M, k) and cov (M, k, k) (or with a leading sample axis), "
                             f"got mean {mean.shape} and cov {cov.shape}")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "cov", cov)

    @property
    def n_latents(self) -> int:
        return self.mean.shape[-2]

    @property
    def n_readings(self) -> int:
        return self.mean.shape[-1]

    def to_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "cov": self.cov.tolist()}

    def __repr__(self) -> str:
        return f"ReadingLaw(M={self.n_latents}, k={self.n_readings}, shape={self.mean.shape})"


def _check_law_args(n_tokens, s2) -> tuple:
    from fvnum.mc.channels import MAX_TAU, MAX_TOKENS

    return (check_int(n_tokens, "tokens N", minimum=1, maximum=MAX_TOKENS), check_real(s2, "s2", 0.0, MAX_TAU))


def _check_thetas(thetas, dim=None) -> np.ndarray:
    thetas = np.asarray(thetas, dtype=float)
    if thetas.ndim != 2 or thetas.shape[0] < 1 or (dim is not None and thetas.shape[1] != dim):
        want = f"(M, {dim})" if dim is not None else "(M, D)"
        raise InputError(f"thetas must be {want} with M >= 1, got shape {thetas.shape}")
    if not np.all(np.isfinite(thetas)):
        raise InputError("thetas must be finite")
    return thetas


def law_from_key_values(X, F, thetas, *, n_tokens, s2) -> ReadingLaw:
    """Fixed-sample Monte Carlo law of ``phi = (1/N) sum_i y_i f(x_i)`` from key values ``F = f(X)`` on a
    token sample ``X ~ N(0, I_D)`` (``X`` (n_x, D), ``F`` (n_x, k)); ``y = theta.x + eps``:
    ``mean_m = mean_i (theta_m.x_i) F_i``,
    ``cov_m = (mean_i ((theta_m.x_i)^2 + s2) F_i F_i^T - mean_m mean_m^T) / N`` (the label noise integrated
    exactly)."""
    N, s2 = _check_law_args(n_tokens, s2)
    X = np.asarray(X, dtype=float)
    F = np.asarray(F, dtype=float)
    if F.ndim == 1:
        F = F[:, None]
    if X.ndim != 2 or F.ndim != 2 or X.shape[0] != F.shape[0] or X.shape[0] < 1:
        raise InputError(f"X must be (n_x, D) and F (n_x, k) with the same n_x >= 1, got {X.shape} and {F.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(F))):
        raise InputError("key values F (and tokens X) must be finite")
    thetas = _check_thetas(thetas, X.shape[1])
    n_x, k = F.shape
    M = thetas.shape[0]
    first = np.zeros((M, k))
    second = np.zeros((M, k, k))
    step = max(1, MAX_CHUNK // max(M, 1))
    for a in range(0, n_x, step):
        P = X[a : a + step] @ thetas.T  # (n, M) theta_m . x_i
        Fa = F[a : a + step]
        first += P.T @ Fa
        second += np.einsum("im,ij,il->mjl", P**2 + s2, Fa, Fa, optimize=True)
    mean = first / n_x
    cov = (second / n_x - mean[:, :, None] * mean[:, None, :]) / N
    return ReadingLaw(mean, 0.5 * (cov + np.swapaxes(cov, -1, -2)))


MAX_LOG_RATIO = 600.0  # largest log E[w_c w_c'] / (E[w_c] E[w_c']) a softmax law accepts (exp(600) ~ 1e260)


def _check_scores(X, S) -> tuple:
    X = np.asarray(X, dtype=float)
    S = np.asarray(S, dtype=float)
    if S.ndim == 1:
        S = S[:, None]
    if X.ndim != 2 or S.ndim != 2 or X.shape[0] != S.shape[0] or X.shape[0] < 1:
        raise InputError(f"X must be (T, D) and S (T, d) with the same T >= 1, got {X.shape} and {S.shape}")
    if not np.all(np.isfinite(X)):
        raise InputError("tokens X must be finite")
    bad = np.argwhere(~np.isfinite(S))
    if bad.size:
        t, c = bad[0]
        raise InputError(f"softmax scores must be finite, got {S[t, c]} (overflow) at token {t}, channel {c}")
    return X, S


def law_from_scores(X, S, thetas, *, n_tokens, s2) -> ReadingLaw:
    """Fixed-sample law of softmax readings ``phi_c = sum_i softmax_i(s_c(x_i)) y_i`` (docs/theory.md section 2)
    from scores ``S`` (T, d), ``S[t, c] = s_c(x_t)``, on a token sample ``X`` (T, D) ``~ N(0, I_D)``, at the
    latents ``thetas`` (M, D); ``w_c = exp(s_c)``, ``y = theta.x + eps``:

    - mean ``mu_c = E[w_c y] / E[w_c]``, with ``E[w_c y] = E[w_c theta.x]`` the sample average (not the
      gradient form ``<theta, E grad w_c>``, equal to it by Stein's identity for Gaussian ``x``);
    - CLT covariance (delta method for a ratio of means, values centred at each reading's own mean)
      ``E[w_c w_c' ((theta.x)^2 + s2 - (mu_c + mu_c') theta.x + mu_c mu_c')] / (N E[w_c] E[w_c'])``
      (the label noise integrated exactly).

    The per-channel largest score is subtracted before ``exp`` (log-sum-exp; the ratios do not change), so
    large finite scores are safe; a score that is not finite raises a one-line ValueError naming it."""
    N, s2 = _check_law_args(n_tokens, s2)
    X, S = _check_scores(X, S)
    thetas = _check_thetas(thetas, X.shape[1])
    w = np.exp(S - S.max(axis=0))  # (T, d) in (0, 1], the largest 1 in every channel
    T, k = w.shape
    M = thetas.shape[0]
    first, pair = np.zeros((M, k)), np.zeros((k, k))
    pair_y, pair_y2 = np.zeros((M, k, k)), np.zeros((M, k, k))
    step = max(1, MAX_CHUNK // max(M * k, k * k, 1))
    for a in range(0, T, step):
        P = X[a : a + step] @ thetas.T  # (n, M) theta_m . x_t
        wa = w[a : a + step]
        ww = wa[:, :, None] * wa[:, None, :]  # (n, k, k)
        first += P.T @ wa
        pair += ww.sum(axis=0)
        pair_y += np.einsum("tm,tjl->mjl", P, ww, optimize=True)
        pair_y2 += np.einsum("tm,tjl->mjl", P**2, ww, optimize=True)
    A = w.sum(axis=0)  # (k,) T E[w]
    mean = first / A
    mj, ml = mean[:, :, None], mean[:, None, :]
    bracket = pair_y2 + (s2 + mj * ml) * pair - (mj + ml) * pair_y  # T E[w w' (y - mu)(y - mu')]
    cov = bracket * T / (N * A[:, None] * A[None, :])
    return ReadingLaw(mean, 0.5 * (cov + np.swapaxes(cov, -1, -2)))


def finite_n_terms(X, S, thetas, *, n_tokens, s2) -> tuple:
    """The next order of the softmax law at ``N`` tokens (second-order delta method for a ratio of means),
    from scores ``S`` (T, k) on a token sample ``X`` (T, D): ``E[phi] = mu + bias + O(N^-2)`` and
    ``Cov[phi] = law.cov + correction + O(N^-3)``. Per token, ``zeta_c = w_c (y - mu_c) / E[w_c]`` and
    ``alpha_c = w_c / E[w_c] - 1``; with ``kappa_cd = E[zeta_c alpha_d]``, ``V_cd = E[zeta_c zeta_d]``,
    ``R_cd = E[w_c w_d] / (E[w_c] E[w_d])``: ``bias_c = -kappa_cc / N`` and ``N^2 correction_cd =
    V_cd (R_cc + R_dd + R_cd - 3) - E[zeta_c zeta_d (alpha_c + alpha_d)] + 2 kappa_cc kappa_dc +
    2 kappa_dd kappa_cd + kappa_cd kappa_dc`` (the label noise integrated exactly). Returns
    ``(bias (M, k), correction (M, k, k))``."""
    N, s2 = _check_law_args(n_tokens, s2)
    X, S = _check_scores(X, S)
    thetas = _check_thetas(thetas, X.shape[1])
    w = np.exp(S - S.max(axis=0))
    wn = w / w.mean(axis=0)  # (T, k) w / E[w]
    al = wn - 1.0
    T = X.shape[0]
    R = wn.T @ wn / T
    bias, corr = [], []
    for t in thetas:
        y = X @ t
        mu = y @ wn / T
        z = wn * (y[:, None] - mu)  # (T, k) zeta without the label noise
        V = (z.T @ z + s2 * (wn.T @ wn)) / T
        kap = z.T @ al / T  # (k, k) kappa_cd
        pair = z[:, :, None] * z[:, None, :] + s2 * wn[:, :, None] * wn[:, None, :]  # (T, k, k)
        third = np.einsum("tcd,tc->cd", pair, al) / T  # E[zeta_c zeta_d alpha_c]
        dk = np.diag(kap)
        c2 = (V * (np.diag(R)[:, None] + np.diag(R)[None, :] + R - 3.0) - third - third.T
              + 2.0 * dk[:, None] * kap.T + 2.0 * dk[None, :] * kap + kap * kap.T)
        bias.append(-dk / N)
        corr.append(0.5 * (c2 + c2.T) / N**2)
    return np.array(bias), np.array(corr)


def softmax_law(B, q, thetas, n_tokens, s2, xp=np, max_log_ratio=None):
    """Closed-form law of softmax readings with scores ``s_c(x) = b_c.x - x^T diag(q_c) x`` (rows ``B`` (k, D),
    ``q`` (D,) shared or (k, D), ``q >= 0``) for ``x ~ N(0, I)``; numpy or torch (the searches differentiate
    it). ``w_c = exp(s_c)`` tilts ``N(0, I)`` into ``N(Sigma_c b_c, Sigma_c)``, ``Sigma_c = (I + 2 Q_c)^-1``,
    with ``E[w_c] = det(I + 2Q_c)^(-1/2) exp(b_c^T Sigma_c b_c / 2)``; a pair ``w_c w_c'`` tilts it into
    ``N(Sigma_cc' (b_c + b_c'), Sigma_cc')``, ``Sigma_cc' = (I + 2Q_c + 2Q_c')^-1``. So
    ``mu_c = theta^T Sigma_c b_c`` (the Stein row ``Sigma_c b_c = E[grad w_c] / E[w_c]``) and
    ``Cov_cc' = R_cc' (theta^T Sigma_cc' theta + (theta.m_cc' - mu_c)(theta.m_cc' - mu_c') + s2) / N``,
    ``m_cc' = Sigma_cc' (b_c + b_c')``, ``R_cc' = E[w_c w_c'] / (E[w_c] E[w_c'])``.
    ``max_log_ratio``: ``log R`` clipped there in ``cov`` (the searches' objectives, which must stay finite
    where a line search strays); the returned ``log R`` is not clipped.
    Returns ``(mean (M, k), cov (M, k, k), log R (k, k))``."""
    k, D = B.shape
    qk = q + 0.0 * B  # (k, D)
    a1 = 1.0 + 2.0 * qk
    logz = 0.5 * ((B**2 / a1).sum(-1) - xp.log(a1).sum(-1))  # (k,) log E[w_c]
    a2 = a1[:, None, :] + a1[None, :, :] - 1.0  # (k, k, D) 1 + 2 q_c + 2 q_c'
    b2 = B[:, None, :] + B[None, :, :]
    logz2 = 0.5 * ((b2**2 / a2).sum(-1) - xp.log(a2).sum(-1))  # (k, k) log E[w_c w_c']
    log_ratio = logz2 - logz[:, None] - logz[None, :]
    M = thetas.shape[0]
    mean = thetas @ (B / a1).T  # (M, k)
    t2 = ((thetas**2) @ (1.0 / a2).reshape(k * k, D).T).reshape(M, k, k)
    pm = (thetas @ (b2 / a2).reshape(k * k, D).T).reshape(M, k, k)  # theta . m_cc'
    bracket = t2 + (pm - mean[:, :, None]) * (pm - mean[:, None, :]) + s2
    clipped = log_ratio
    if max_log_ratio is not None:
        clipped = np.minimum(log_ratio, max_log_ratio) if xp is np else xp.clamp(log_ratio, max=max_log_ratio)
    return mean, xp.exp(clipped) * bracket / n_tokens, log_ratio


def _reduced_basis(cov: np.ndarray, rtol: float) -> np.ndarray:
    """Orthonormal basis (k, r) of the span of the covariances (the readings' directions that carry noise)."""
    total = cov.reshape(-1, *cov.shape[-2:]).sum(axis=0)
    vals, vecs = np.linalg.eigh(0.5 * (total + total.T))
    keep = vals > rtol * max(vals.max(initial=0.0), 0.0)
    return vecs[:, keep]


def log_likelihoods(law: ReadingLaw, phi, *, rtol: float = 1e-10) -> np.ndarray:
    """(n, M) Gaussian log-likelihood of readings ``phi`` ((k,) or (n, k)) under each latent's law, up to a
    constant shared by the latents; computed in the span of the covariances (pseudo-inverse and
    log-pseudo-determinant), so a reading that repeats others adds nothing."""
    phi = np.asarray(phi, dtype=float)
    if phi.ndim == 1:
        phi = phi[None]
    k = law.n_readings
    if phi.ndim != 2 or phi.shape[1] != k:
        raise InputError(f"readings must be (k,) or (n, k) with k = {k}, got shape {phi.shape}")
    if law.mean.ndim == 3 and law.mean.shape[0] != phi.shape[0]:
        raise InputError(f"a law per sample has {law.mean.shape[0]} samples but the readings have {phi.shape[0]}")
    if k == 0:
        return np.zeros((phi.shape[0], law.n_latents))
    U = _reduced_basis(law.cov, rtol)  # (k, r), shared: the span is the same for every latent of a family
    mean = law.mean @ U  # (.., M, r)
    cov = U.T @ law.cov @ U  # (.., M, r, r)
    vals, vecs = np.linalg.eigh(cov)
    top = vals.max(axis=-1, keepdims=True)
    ok = vals > rtol * np.maximum(top, 1e-300)
    inv = np.where(ok, 1.0 / np.where(ok, vals, 1.0), 0.0)
    logdet = np.where(ok, np.log(np.where(ok, vals, 1.0)), 0.0).sum(axis=-1)  # (.., M)
    resid = (phi @ U)[:, None, :] - mean  # (n, M, r)
    proj = np.einsum("...mr,...mrs->...ms", resid, vecs) if cov.ndim == 4 else np.einsum("nmr,mrs->nms", resid, vecs)
    quad = (proj**2 * inv).sum(axis=-1)  # (n, M)
    return -0.5 * (quad + logdet)


def posterior_weights(log_prior, law: ReadingLaw, phi, *, rtol: float = 1e-10) -> np.ndarray:
    """(n, M) posterior probabilities of the latents given readings ``phi``."""
    ll = log_likelihoods(law, phi, rtol=rtol)
    log_prior = np.asarray(log_prior, dtype=float)
    if log_prior.shape != (law.n_latents,):
        raise InputError(f"log_prior must be (M,) with M = {law.n_latents}, got shape {log_prior.shape}")
    logw = ll + log_prior
    logw -= logw.max(axis=1, keepdims=True)
    w = np.exp(logw)
    return w / w.sum(axis=1, keepdims=True)


def law_posterior_mean(thetas, log_prior, law: ReadingLaw, phi, *, rtol: float = 1e-10) -> np.ndarray:
    """Bayes posterior mean of theta given readings ``phi`` ((k,) or (n, k); with a law per sample, ``mean``
    (n, M, k) and ``cov`` (n, M, k, k)) under the Gaussian law per latent; rows in the span of others
    (singular cov) are handled by working in the span (pseudo-inverse, log-pseudo-determinant).
    Returns (n, D) (or (D,) for a single reading vector)."""
    thetas = _check_thetas(thetas)
    if thetas.shape[0] != law.n_latents:
        raise InputError(f"thetas has {thetas.shape[0]} latents but the law has {law.n_latents}")
    single = np.ndim(phi) == 1
    out = posterior_weights(log_prior, law, phi, rtol=rtol) @ thetas
    return out[0] if single else out
