"""The key channel (docs/theory.md section 2, corrected in docs/theory.md): the law of the readings
``phi = (1/N) sum_i y_i f(x_i)`` of a key function ``f`` given each latent, and the Bayes decoder on it.

The law at the CLT level of any keys' readings (:class:`ReadingLaw`) and the exact Bayes decoder on it
(:func:`law_posterior_mean`) are :mod:`fvnum.keys.readings`; its names are importable from here too.

Key families (each a :class:`KeyFamily` with ``law(thetas, n_tokens=, s2=)``):

- :class:`LinearKeys` ``f(x) = W x``: closed form ``mean = W theta``,
  ``cov = ((|theta|^2 + s2) W W^T + W theta theta^T W^T) / N`` (today's ``tokens`` channel);
- :class:`LearnedKeys`: any callable, its law by :func:`law_from_key_values` on a fixed token sample;
- :class:`SoftmaxKeys`: softmax readings ``phi = sum_i softmax_i(s(x_i)) y_i`` (docs/theory.md section 2), a
  self-normalised average of the values: the parametric scores ``s = b.x - x^T Q x`` (closed form,
  :func:`softmax_law`) or any score function (:func:`law_from_scores` on a fixed token sample).
"""
from __future__ import annotations

import numpy as np

from fvsym._validate import check_int, check_real
from fvsym.errors import InputError

from fvnum.keys.readings import (
    MAX_LOG_RATIO, ReadingLaw, _check_law_args, _check_scores, _check_thetas, law_from_key_values, law_from_scores, softmax_law)

from fvnum.defaults import FAMILIES, check_family  # noqa: E402,F401 (the key families: their names importable from here too)


# --- key families ----------------------------------------------------------------------------------
class KeyFamily:
    """A family of key functions: ``name`` and ``law(thetas, n_tokens=, s2=)`` (a :class:`ReadingLaw`)."""

    name: str = ""

    def law(self, thetas, *, n_tokens, s2) -> ReadingLaw:  # pragma: no cover - interface
        raise NotImplementedError(f"key family {type(self).__name__} must define law(thetas, n_tokens=, s2=)")

    def readings(self, X, y) -> np.ndarray:
        """(n, k) exact readings ``phi = (1/N) sum_i y_i f(x_i)`` of ``n`` contexts: tokens ``X`` (n, N, D),
        values ``y`` (n, N) (families whose object maps tokens to key values)."""
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        F = np.asarray(self(X.reshape(-1, X.shape[-1])), dtype=float).reshape(*X.shape[:-1], -1)
        return (y[..., None] * F).mean(axis=-2)

    def to_dict(self) -> dict:
        return {"keys": self.name}


class LinearKeys(KeyFamily):
    """``f(x) = W x`` (``W`` (k, D)): mean ``W theta``, cov ``((|theta|^2 + s2) W W^T + W theta theta^T W^T)
    / N`` (``Cov(y x | theta) = (|theta|^2 + s2) I + theta theta^T``)."""

    name = "linear"

    def __init__(self, W):
        W = np.asarray(W, dtype=float)
        if W.ndim == 1:
            W = W[None]
        if W.ndim != 2 or not np.all(np.isfinite(W)):
            raise InputError(f"linear keys need a finite (k, D) matrix W, got shape {W.shape}")
        self.W = W

    def law(self, thetas, *, n_tokens, s2) -> ReadingLaw:
        N, s2 = _check_law_args(n_tokens, s2)
        thetas = _check_thetas(thetas, self.W.shape[1])
        W = self.W
        mean = thetas @ W.T  # (M, k)
        norms = (thetas**2).sum(axis=1)  # (M,)
        cov = ((norms + s2)[:, None, None] * (W @ W.T) + mean[:, :, None] * mean[:, None, :]) / N
        return ReadingLaw(mean, cov)

    def __call__(self, X) -> np.ndarray:
        """(n, k) key values ``W x`` of tokens ``X`` (n, D)."""
        return np.asarray(X, dtype=float) @ self.W.T

    def to_dict(self) -> dict:
        return {"keys": self.name, "W": self.W.tolist()}

    def __repr__(self) -> str:
        return f"LinearKeys(k={self.W.shape[0]}, D={self.W.shape[1]})"


def quadrature_nodes(c: float, step: float = 0.2):
    """Nodes ``t`` and weights of ``int_0^inf g(t) dt`` by the trapezoid rule in ``v = log t`` (the integrands
    of :class:`WeightedKeys` are analytic in a strip of half-width pi/2 around the real ``v`` axis and decay
    like ``e^v`` at ``-inf`` and like ``exp(-c e^v)`` at ``+inf``, so the error falls like
    ``exp(-pi^2 / step)``)."""
    v = np.arange(-40.0, np.log(60.0 / c) + 1.0 + step, step)
    t = np.exp(v)
    return t, step * t


def weighted_moments(q, c, t, wt, xp=np, counts=None):
    """The 1-D integrals behind :class:`WeightedKeys` for a diagonal ``Q = diag(q)``: ``S`` (T, D) the
    diagonal of ``S_t = (I + 2tQ)^-1`` at the nodes, ``w2`` (T,) the weights of
    ``int t e^(-tc) det(I + 2tQ)^(-1/2) (.) dt``, ``m = E[x_d^2 / (q + c)]`` and ``h = E[x_d^2 / (q + c)^2]``
    (D,). ``q`` may hold one value per block of equal entries, ``counts`` the block sizes (for the
    determinant). ``xp`` is ``numpy`` or ``torch`` (the optimisers of :mod:`fvnum.keys.nonadaptive` differentiate it)."""
    S = 1.0 / (1.0 + 2.0 * t[:, None] * q[None, :])  # (T, D)
    logS = xp.log(S) if counts is None else xp.log(S) * counts
    base = wt * xp.exp(-t * c + 0.5 * logS.sum(1))  # e^(-tc) det(I + 2tQ)^(-1/2) dt
    w2 = base * t
    return S, w2, base @ S, w2 @ S


def weighted_law(W, S, w2, m, h, thetas, n_tokens, s2, xp=np, theta2=None):
    """``(mean (M, k), cov (M, k, k))`` of weighted keys with rows ``W`` (k, D) from the moments of
    :func:`weighted_moments` (the formulas of :class:`WeightedKeys`; numpy or torch). ``theta2`` (M, D):
    the squares of the latents' coordinates where they differ from ``thetas**2`` (a coordinate no row reads
    enters the law only through its square)."""
    mean = (thetas * m) @ W.T  # (M, k)
    theta2 = thetas**2 if theta2 is None else theta2
    diag = (w2 * (theta2 @ S.T)) @ S + s2 * h  # (M, D): H theta^2 + s2 h
    second = xp.einsum("jd,md,ld->mjl", W, diag, W)
    P = (thetas[:, None, :] * W[None, :, :]) @ S.T  # (M, k, T)
    second = second + 2.0 * xp.einsum("mjt,t,mlt->mjl", P, w2, P)
    cov = (second - mean[:, :, None] * mean[:, None, :]) / n_tokens
    return mean, 0.5 * (cov + cov.transpose(0, 2, 1) if xp is np else cov + cov.transpose(1, 2))


class WeightedKeys(KeyFamily):
    """``f_j(x) = (w_j.x) / (x^T Q x + c)`` (``W`` (k, D) rows ``w_j``, one ``Q`` (D,) diagonal or (D, D)
    symmetric positive semi-definite, and ``c > 0`` shared by the ``k`` keys).

    With ``1/(q + c)^m = (1/Gamma(m)) int_0^inf t^(m-1) e^(-t(q+c)) dt`` and
    ``E[g(x) e^(-t x^T Q x)] = det(I + 2tQ)^(-1/2) E_{N(0, S_t)}[g]``, ``S_t = (I + 2tQ)^-1``, every moment
    is a 1-D integral in ``t`` of Gaussian moments (Isserlis), computed by quadrature (``step``; the default
    is exact to about 1e-12 relative):

    - mean ``E[(theta.x) f_j] = sum_d W_jd m_d theta_d``, ``m_d = E[x_d^2 / (q + c)]`` (= ``theta . E grad f_j``);
    - second moment ``E[((theta.x)^2 + s2) f_j f_l] = w_j^T G(theta) w_l`` with
      ``G(theta) = diag(H theta^2 + s2 h) + 2 (theta theta^T) o H``,
      ``H = int t e^(-tc) det^(-1/2) S_t S_t^T dt`` (diagonal ``S_t`` as a vector), ``h = diag`` part of
      ``E[x x^T / (q + c)^2]``.

    Linear keys are the limit ``Q = 0`` (``m = 1/c``, ``H = 1/c^2``).
    """

    name = "weighted"

    def __init__(self, W, Q, c, *, step: float = 0.2):
        W = np.asarray(W, dtype=float)
        if W.ndim == 1:
            W = W[None]
        if W.ndim != 2 or not np.all(np.isfinite(W)):
            raise InputError(f"weighted keys need a finite (k, D) matrix W, got shape {W.shape}")
        D = W.shape[1]
        Q = np.asarray(Q, dtype=float)
        if Q.ndim == 0:
            Q = np.full(D, float(Q))
        if Q.shape == (D, D):
            if not np.allclose(Q, Q.T, rtol=0, atol=1e-12 * max(1.0, np.abs(Q).max())):
                raise InputError("weighted keys need a symmetric Q")
            if np.count_nonzero(Q - np.diag(np.diag(Q))) == 0:
                q, basis = np.diag(Q).copy(), None
            else:
                q, basis = np.linalg.eigh(Q)
        elif Q.shape == (D,):
            q, basis = Q.copy(), None
        else:
            raise InputError(f"Q must be (D,) (its diagonal) or (D, D) with D = {D}, got shape {Q.shape}")
        if not np.all(np.isfinite(q)) or q.min() < -1e-12 * max(1.0, np.abs(q).max()):
            raise InputError(f"Q must be positive semi-definite, got smallest eigenvalue {q.min():.3g}")
        c = check_real(c, "weighted key offset c", 0.0, 1e100, open_low=True)
        self.W, self.Q, self.c, self.step = W, Q, c, float(step)
        self._q, self._basis = np.maximum(q, 0.0), basis
        t, wt = quadrature_nodes(c, self.step)
        self._S, self._w2, self.m_, self.h_ = weighted_moments(self._q, c, t, wt)

    def _rotated(self, A):
        return A if self._basis is None else A @ self._basis

    def stein_rows(self) -> np.ndarray:
        """(k, D) ``E grad f_j``: the mean of the readings is ``stein_rows() @ theta``."""
        V = self._rotated(self.W) * self.m_
        return V if self._basis is None else V @ self._basis.T

    def law(self, thetas, *, n_tokens, s2) -> ReadingLaw:
        N, s2 = _check_law_args(n_tokens, s2)
        thetas = self._rotated(_check_thetas(thetas, self.W.shape[1]))
        W = self._rotated(self.W)
        mean, cov = weighted_law(W, self._S, self._w2, self.m_, self.h_, thetas, N, s2)
        return ReadingLaw(mean, cov)

    def __call__(self, X) -> np.ndarray:
        """(n, k) key values ``f(X)`` of tokens ``X`` (n, D)."""
        X = np.asarray(X, dtype=float)
        Xr = self._rotated(X)
        quad = (Xr**2) @ self._q
        return (X @ self.W.T) / (quad + self.c)[:, None]

    def to_dict(self) -> dict:
        return {"keys": self.name, "W": self.W.tolist(), "Q": self.Q.tolist(), "c": self.c}

    def __repr__(self) -> str:
        return f"WeightedKeys(k={self.W.shape[0]}, D={self.W.shape[1]}, c={self.c:.4g})"


class LearnedKeys(KeyFamily):
    """Any key function ``fn``: (n, D) float array -> (n, k) float array (numpy, or a torch module/callable,
    run under ``torch.no_grad`` on float64 tensors), its law by :func:`law_from_key_values` on a fixed
    sample of ``n_samples`` tokens ``x ~ N(0, I_D)`` drawn from ``seed`` (the sample and the key values are
    computed once and reused for every law)."""

    name = "learned"

    def __init__(self, fn, dim: int, *, n_samples: int = 200_000, seed: int = 0, chunk: int = 65536):
        if not callable(fn):
            raise InputError(f"learned keys need a callable key function, got {type(fn).__name__}")
        self.fn = fn
        self.dim = check_int(dim, "dimension D", minimum=1)
        self.n_samples = check_int(n_samples, "n_samples", minimum=2)
        self.seed = check_int(seed, "seed", minimum=0)
        self.chunk = int(chunk)
        self._X = None
        self._F = None

    def _evaluate(self, X):
        fn = self.fn
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a project dependency
            torch = None
        if torch is not None and isinstance(fn, torch.nn.Module):
            param = next(iter(fn.parameters()), None)
            dtype = param.dtype if param is not None else torch.float64
            with torch.no_grad():
                return fn(torch.as_tensor(X, dtype=dtype)).double().numpy()
        out = fn(X)
        if torch is not None and isinstance(out, torch.Tensor):
            out = out.detach().double().numpy()
        return np.asarray(out, dtype=float)

    def sample(self):
        """The fixed token sample ``X`` (n_samples, D) and the key values ``F`` (n_samples, k)."""
        if self._X is None:
            X = np.random.default_rng(self.seed).standard_normal((self.n_samples, self.dim))
            parts = [self._evaluate(X[a : a + self.chunk]) for a in range(0, self.n_samples, self.chunk)]
            F = np.concatenate([p[:, None] if p.ndim == 1 else p for p in parts])
            if F.ndim != 2 or F.shape[0] != self.n_samples:
                raise InputError(f"the key function must map (n, {self.dim}) to (n, k), got {F.shape}")
            self._X, self._F = X, F
        return self._X, self._F

    def law(self, thetas, *, n_tokens, s2) -> ReadingLaw:
        X, F = self.sample()
        return law_from_key_values(X, F, thetas, n_tokens=n_tokens, s2=s2)

    def to_dict(self) -> dict:
        return {"keys": self.name, "n_samples": self.n_samples, "seed": self.seed}

    def __repr__(self) -> str:
        return f"LearnedKeys({getattr(self.fn, '__name__', type(self.fn).__name__)}, D={self.dim}, n={self.n_samples})"


class SoftmaxKeys(KeyFamily):
    """Softmax readings ``phi_c = sum_i softmax_i(s_c(x_i)) y_i`` (docs/theory.md section 2), ``k`` channels:

    - parametric: ``SoftmaxKeys(B, Q)``, scores ``s_c(x) = b_c.x - x^T Q x`` (``b_c = beta_c w_c``, rows of
      ``B`` (k, D); ``Q`` diagonal, a scalar, its diagonal (D,) or a diagonal (D, D), ``Q >= 0``, shared by
      the channels): the law in closed form (:func:`softmax_law`, Gaussian integrals);
    - any score function: ``SoftmaxKeys.of_scores(fn, dim)``, ``fn`` (n, D) -> (n, k) scores (numpy, or
      torch as :class:`LearnedKeys` takes a key function), the law by :func:`law_from_scores` on a fixed
      sample of ``n_samples`` tokens drawn from ``seed``.

    The law is the large-``N`` (CLT) law; at finite ``N`` the ratio's mean is off by :meth:`bias`, ``O(1/N)``
    (``-E[w^2 (y - mu)] / (N E[w]^2)``), and the law needs ``N`` well above ``R_cc = E[w^2] / E[w]^2`` (the
    inverse of the weights' effective sample fraction)."""

    name = "softmax"

    def __init__(self, B, Q=0.0):
        B = np.asarray(B, dtype=float)
        if B.ndim == 1:
            B = B[None]
        if B.ndim != 2 or B.shape[0] < 1 or B.shape[1] < 1:
            raise InputError(f"softmax keys need a (k, D) matrix of score rows b = beta w, got shape {B.shape}")
        if not np.all(np.isfinite(B)):
            raise InputError("softmax keys need finite score rows b = beta w (beta not finite)")
        D = B.shape[1]
        Q = np.asarray(Q, dtype=float)
        if Q.ndim == 2 and Q.shape == (D, D):
            if np.count_nonzero(Q - np.diag(np.diag(Q))):
                raise InputError("softmax keys take a diagonal Q (its closed form is per coordinate)")
            Q = np.diag(Q).copy()
        elif Q.ndim == 0:
            Q = np.full(D, float(Q))
        if Q.shape != (D,):
            raise InputError(f"Q must be a scalar, (D,) (its diagonal) or diagonal (D, D) with D = {D}, got shape "
                             f"{Q.shape}")
        if not np.all(np.isfinite(Q)) or Q.min() < 0:
            raise InputError(f"softmax keys need a finite Q >= 0, got smallest entry {Q.min()!r}")
        self.B, self.Q, self.fn, self._learned = B, Q, None, None

    @classmethod
    def of_scores(cls, fn, dim: int, *, n_samples: int = 200_000, seed: int = 0, chunk: int = 65536):
        """Softmax keys of any score function ``fn`` (n, D) -> (n, k) (numpy or torch)."""
        self = cls.__new__(cls)
        self._learned = LearnedKeys(fn, dim, n_samples=n_samples, seed=seed, chunk=chunk)
        self.fn, self.B, self.Q = fn, None, None
        return self

    @property
    def dim(self) -> int:
        return self._learned.dim if self.fn is not None else self.B.shape[1]

    def scores(self, X) -> np.ndarray:
        """(n, k) scores ``s(X)`` of tokens ``X`` (n, D)."""
        X = np.asarray(X, dtype=float)
        if self.fn is not None:
            out = self._learned._evaluate(X)
            return out[:, None] if out.ndim == 1 else out
        return X @ self.B.T - ((X**2) @ self.Q)[:, None]

    def stein_rows(self) -> np.ndarray:
        """(k, D) ``E[grad w] / E[w]`` (parametric keys): the mean of the readings is ``stein_rows() @ theta``."""
        if self.fn is not None:
            raise InputError("stein_rows is the closed form of parametric softmax keys; a score function's law "
                             "comes from its token sample")
        return self.B / (1.0 + 2.0 * self.Q)

    def _closed(self, thetas, n_tokens, s2):
        N, s2 = _check_law_args(n_tokens, s2)
        thetas = _check_thetas(thetas, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):  # refused below, in one line
            mean, cov, log_ratio = softmax_law(self.B, self.Q, thetas, N, s2)
        if not log_ratio.max() <= MAX_LOG_RATIO or not np.all(np.isfinite(cov)) or not np.all(np.isfinite(mean)):
            largest = np.linalg.norm(self.B, axis=1).max()
            raise InputError(f"the softmax keys' law overflows: E[w^2] / E[w]^2 = exp({log_ratio.max():.4g}) (the "
                             f"score rows b = beta w are too large: |b| up to {largest:.4g})")
        return mean, cov, log_ratio, thetas

    def law(self, thetas, *, n_tokens, s2) -> ReadingLaw:
        if self.fn is not None:
            X, S = self._learned.sample()
            return law_from_scores(X, S, thetas, n_tokens=n_tokens, s2=s2)
        mean, cov, _, _ = self._closed(thetas, n_tokens, s2)
        return ReadingLaw(mean, 0.5 * (cov + np.swapaxes(cov, -1, -2)))

    def bias(self, thetas, *, n_tokens) -> np.ndarray:
        """(M, k) the ``O(1/N)`` bias of the readings' mean at ``N`` tokens (second-order delta method for a
        ratio of means): ``E[phi] = mu + bias + O(1/N^2)``, ``bias = -E[w^2 (y - mu)] / (N E[w]^2)``
        (parametric keys: ``-R_cc theta.(m_cc - Sigma_c b_c) / N``)."""
        if self.fn is not None:
            N, _ = _check_law_args(n_tokens, 0.0)
            X, S = self._learned.sample()
            X, S = _check_scores(X, S)
            thetas = _check_thetas(thetas, X.shape[1])
            w = np.exp(S - S.max(axis=0))
            P = X @ thetas.T  # (T, M)
            A = w.mean(axis=0)
            mean = (P.T @ w) / X.shape[0] / A
            return -((P.T @ w**2) / X.shape[0] - mean * (w**2).mean(axis=0)) / (N * A**2)
        mean, _, log_ratio, thetas = self._closed(thetas, n_tokens, 0.0)
        m2 = 2.0 * self.B / (1.0 + 4.0 * self.Q)  # Sigma_cc (2 b_c)
        return -np.exp(np.diag(log_ratio)) * (thetas @ m2.T - mean) / int(n_tokens)

    def readings(self, X, y) -> np.ndarray:
        """(n, k) exact softmax readings ``sum_i softmax_i(s(x_i)) y_i`` of ``n`` contexts: tokens ``X``
        (n, N, D), values ``y`` (n, N) (the largest score of each context subtracted before ``exp``)."""
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        S = self.scores(X.reshape(-1, X.shape[-1]))
        _check_scores(X.reshape(-1, X.shape[-1]), S)
        S = S.reshape(*X.shape[:-1], -1)  # (n, N, k)
        a = np.exp(S - S.max(axis=-2, keepdims=True))
        a /= a.sum(axis=-2, keepdims=True)
        return np.einsum("nik,ni->nk", a, y)

    def to_dict(self) -> dict:
        if self.fn is not None:
            return {"keys": self.name, "scores": "function", "n_samples": self._learned.n_samples,
                    "seed": self._learned.seed}
        return {"keys": self.name, "B": self.B.tolist(), "Q": self.Q.tolist()}

    def __repr__(self) -> str:
        if self.fn is not None:
            return f"SoftmaxKeys(scores={getattr(self.fn, '__name__', type(self.fn).__name__)}, D={self.dim})"
        return (f"SoftmaxKeys(k={self.B.shape[0]}, D={self.dim}, |b| max={np.linalg.norm(self.B, axis=1).max():.4g}, "
                f"q max={self.Q.max():.4g})")


__all__ = [
    "FAMILIES", "KeyFamily", "LearnedKeys", "LinearKeys", "SoftmaxKeys", "WeightedKeys", "check_family",
    "quadrature_nodes", "weighted_law", "weighted_moments",
]
