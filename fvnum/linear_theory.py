"""The exact linear theory (docs/theory.md section 3) beside the comparison table of :mod:`fvnum.theory`: the linear
(LMMSE) readout of a design under a :class:`~fvnum.mc.channels.Channel` (:func:`lmmse`; of softmax readings,
:func:`softmax_lmmse`), the best linear non-adaptive loss and the water-filling optimum. Every name is importable
from :mod:`fvnum.theory` too.

For a design ``W`` (B, D) and prior covariance ``C``:
``Cov(phi) = (1 + 1/N) W C W^T + tau^2 W W^T`` under ``tokens`` (``Cov(y x | theta) = (||theta||^2 + s2) I
+ theta theta^T``) and ``W C W^T + tau^2 I_B`` under ``gaussian`` (fresh noise on every row);
``E[theta phi^T] = C W^T``; the linear (LMMSE) readout is ``U = C W^T Cov(phi)^-1`` with loss ``tr C - tr(C W^T Cov(phi)^-1 W C)``
(:func:`lmmse`). Under ``tokens`` a reading is a projection ``W S`` of one statistic ``S`` whose
covariance is ``Sigma = k C + tau^2 I``, so the loss depends on the row space of ``W`` only; ``Sigma``
commutes with ``C``, and the best linear non-adaptive design reads the top ``B`` eigen-directions of
``C``: loss ``tr C - sum_{i <= B} c_i^2 / (k c_i + tau^2)`` (eigenvalues ``c_1 >= c_2 >= ..``; Ky Fan),
:func:`best_linear_loss`. Under ``gaussian`` a repeated reading brings fresh noise and the optimum is
the rank-constrained water-filling of section 5 (``fvsym.gaussian.water_filling``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fvsym._validate import _short
from fvsym.errors import InputError

from fvnum.mc.channels import Channel, effective_tau2
from fvnum.priors.registry import atoms_of


@dataclass(frozen=True)
class LinearDecoder:
    """The exact linear (LMMSE) readout ``U`` (D, B) of a design under a channel, and its ``loss``."""

    U: np.ndarray
    loss: float

    def to_dict(self) -> dict:
        return {"U": self.U.tolist(), "loss": self.loss}

    def __repr__(self) -> str:
        return f"LinearDecoder(loss={self.loss:.6g}, U of shape {self.U.shape})"


def prior_covariance(prior) -> np.ndarray:
    """(D, D) float64 covariance of a numeric prior (each exact entry of a fvsym prior rounded once): the
    numeric prior's ``covariance``."""
    from fvnum.priors.registry import numeric

    return np.array(numeric(prior).covariance, dtype=np.float64)


def _check_channel(channel) -> Channel:
    if not isinstance(channel, Channel):
        raise InputError(f"channel must be a fvnum Channel (fvnum.mc.channels.make_channel), got {type(channel).__name__}")
    return channel


def _token_factor(channel: Channel) -> float:
    """``k`` of ``Cov(phi) = k W C W^T + noise``: ``1 + 1/N`` (tokens) or ``1`` (gaussian)."""
    return 1 + 1 / channel.n_tokens if channel.kind == "tokens" else 1.0


def lmmse(prior, W, channel: Channel) -> LinearDecoder:
    """Exact linear readout of the design ``W`` (B, D) under ``channel`` (module docstring)."""
    channel = _check_channel(channel)
    C = prior_covariance(prior)  # (D, D)
    W = np.asarray(W, dtype=np.float64)  # (B, D)
    if W.ndim != 2 or W.shape[1] != C.shape[0] or W.shape[0] < 1:
        raise InputError(f"design must be (B, D) with D = {C.shape[0]}, got shape {W.shape}")
    # noise: tau^2 W W^T under tokens (one statistic S, projected), tau^2 I_B under gaussian (fresh per row)
    noise = W @ W.T if channel.kind == "tokens" else np.eye(W.shape[0])  # (B, B)
    M = _token_factor(channel) * W @ C @ W.T + channel.tau2 * noise  # (B, B) Cov(phi)
    U = np.linalg.solve(M, W @ C).T  # (D, B), M symmetric
    return LinearDecoder(U, float(np.trace(C) - np.trace(U @ W @ C)))


def softmax_lmmse(prior, W, channel: Channel) -> LinearDecoder:
    """The linear readout ``U`` (D, B), without intercept, of softmax readings with linear scores
    ``s_j(x) = W_j . x`` (rows ``W`` (B, D): Model C under softmax attention, whose bilinear score
    ``q_c(p) . W_c x`` has one layer and so a fixed ``q_c``) and its loss ``E||U phi - theta||^2``, under the
    tokens channel: the readings' CLT law of docs/theory.md section 10.6 (``fvnum.keys.families.SoftmaxKeys``), averaged
    exactly over the prior's atoms (a tree: its ``2^K`` leaves). Unlike :func:`lmmse` of linear keys, whose
    second moments are exact, this is the law's approximation, good where ``R = E[w^2] / E[w]^2`` is small
    against N (measured against real tokens in ``tests/fvnum/test_softmax.py``: within 0.5% at ``R / N`` of 3%;
    its first-order bias correction, ``SoftmaxKeys.bias``, made the loss worse there and is not applied)."""
    from fvnum.keys.families import SoftmaxKeys

    channel = _check_channel(channel)
    if channel.kind != "tokens":
        raise InputError("softmax readings average tokens: softmax_lmmse needs the tokens channel (n_tokens=)")
    atoms, log_w = atoms_of(prior)  # (M, D), (M,)
    p = np.exp(log_w - log_w.max())
    p /= p.sum()
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[1] != atoms.shape[1] or W.shape[0] < 1:
        raise InputError(f"score rows must be (B, D) with D = {atoms.shape[1]}, got shape {W.shape}")
    keys = SoftmaxKeys(W)
    law = keys.law(atoms, n_tokens=channel.n_tokens, s2=channel.s2)
    mean = law.mean  # (M, B)
    second = np.einsum("m,mi,mj->ij", p, mean, mean) + np.einsum("m,mij->ij", p, law.cov)  # (B, B) E[phi phi^T]
    cross = np.einsum("m,mi,md->id", p, mean, atoms)  # (B, D) E[phi theta^T]
    U = np.linalg.solve(second, cross).T  # (D, B)
    return LinearDecoder(U, float(p @ (atoms**2).sum(1) - np.trace(U @ cross)))


SOFTMAX_LAW_RANGE = 0.05  # the law holds where the weights' R = E[w^2] / E[w]^2 = exp(beta^2) stays below this x N


def top_levels_softmax(prior, budget: int, channel: Channel, *, starts=(0.2, 0.5, 0.8)) -> tuple:
    """Model C's row under softmax attention: the top levels' coordinates ``e_1 .. e_B`` read with scores
    ``beta_j x_j``, the scales ``beta`` (one per row) chosen to minimise :func:`softmax_lmmse` (L-BFGS-B from
    each of ``starts``: all rows alike, and all but the last, which starts near 0), within the range where the
    law holds:
    ``exp(beta^2) <= SOFTMAX_LAW_RANGE x N`` (beyond it the law's ``O(R/N)`` terms are not small: 5% of the
    loss at ``R / N`` of 7%). Returns ``(LinearDecoder, beta (B,))``."""
    from scipy.optimize import minimize

    channel = _check_channel(channel)
    if channel.kind != "tokens":
        raise InputError("softmax readings average tokens: top_levels_softmax needs the tokens channel (n_tokens=)")
    if channel.n_tokens * SOFTMAX_LAW_RANGE <= 1.0:
        raise InputError(f"the softmax law needs N well above R >= 1: N = {channel.n_tokens} tokens is too few "
                         f"(at least {int(1 / SOFTMAX_LAW_RANGE) + 1})")
    dim = atoms_of(prior)[0].shape[1]
    rows = top_levels_rows(dim, budget)
    high = float(np.sqrt(np.log(SOFTMAX_LAW_RANGE * channel.n_tokens)))

    def loss(beta):
        return softmax_lmmse(prior, beta[:, None] * rows, channel).loss

    # every start twice: all rows alike, and with the last row at the bottom of the range, a reference channel
    # (at small scores a reading is the mean of y plus beta times a linear key's; differences cancel the mean)
    inits = [np.full(budget, min(b, high)) for b in starts]
    inits += [np.r_[np.full(budget - 1, min(b, high)), 1e-4] for b in starts] if budget > 1 else []
    best = min((minimize(loss, x0, method="L-BFGS-B", bounds=[(1e-4, high)] * budget) for x0 in inits),
               key=lambda r: r.fun)
    return softmax_lmmse(prior, best.x[:, None] * rows, channel), best.x


def top_levels_rows(dim: int, budget: int) -> np.ndarray:
    """Rows ``e_1 .. e_B`` (the first ``B`` nodes in heap order), (B, D)."""
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or not 1 <= budget <= dim:
        raise InputError(f"budget must be an integer in 1..D={dim}, got {_short(budget)}")
    return np.eye(dim)[:budget]


def _exact_noise(prior, channel: Channel):
    """``tau^2`` as an exact sympy number (decimal inputs read exactly), from the one definition."""
    import sympy as sp

    if channel.kind == "tokens":
        return effective_tau2(prior, n_tokens=channel.n_tokens, s2=sp.Rational(repr(channel.s2)))
    return sp.Rational(repr(channel.tau)) ** 2


def _gaussian_of(prior):
    """The fvsym Gaussian of the prior's covariance (``matched_gaussian``, ``fvnum.priors.capabilities.Capabilities``)."""
    from fvnum.priors.registry import capability, numeric

    return capability(numeric(prior), "matched_gaussian")()


def best_linear_loss(prior, budget: int, channel: Channel) -> float:
    """Best linear non-adaptive loss (unit class, linear decoder) of ``budget`` rows under ``channel``:
    exact (sympy), returned as a float. ``tokens``: the top-``B`` eigen-directions; ``gaussian``:
    water-filling (module docstring)."""
    import sympy as sp
    from fvsym.gaussian import water_filling

    channel = _check_channel(channel)
    gauss = _gaussian_of(prior)
    tau2 = _exact_noise(prior, channel)
    if channel.kind == "gaussian":
        return float(water_filling(gauss.eigenvalues, budget, sp.sqrt(tau2)).loss)
    k = 1 + sp.Rational(1, channel.n_tokens)
    c = sorted(gauss.eigenvalues, key=lambda v: float(v), reverse=True)
    gain = sum((ci**2 / (k * ci + tau2) for ci in c[:budget]), sp.Integer(0))
    return float(sum(c, sp.Integer(0)) - gain)


def gaussian_optimum(prior, budget: int, channel: Channel) -> float:
    """Water-filling optimum (unit class, docs/theory.md section 5) of the Gaussian with the prior's covariance
    under the *gaussian* channel at ``channel``'s ``tau``; exact in ``fvsym``, returned as a float."""
    import sympy as sp
    from fvsym.gaussian import water_filling

    channel = _check_channel(channel)
    return float(water_filling(_gaussian_of(prior).eigenvalues, budget, sp.sqrt(_exact_noise(prior, channel))).loss)


__all__ = ["LinearDecoder", "SOFTMAX_LAW_RANGE", "best_linear_loss", "gaussian_optimum", "lmmse", "prior_covariance",
           "softmax_lmmse", "top_levels_rows", "top_levels_softmax"]


# --- the ridge baseline and the linear readout without intercept of a prior with atoms (fvnum.priors.atoms) -------
def ridge_loss(prior, design, tau: float) -> float:
    """Exact loss of the ridge (LMMSE) decoder on ``prior`` (a finite prior) for a fixed ``design`` (node numbers or
    unit rows): ``tr P`` of docs/theory.md section 5 with the atoms' covariance
    (``fvnum.priors.gaussian.numeric_design_loss``); the loss of a linear decoder depends on the prior through its first
    two moments only."""
    from fvnum.priors.gaussian import GaussSpec, numeric_design_loss

    return numeric_design_loss(GaussSpec.from_cov(prior.covariance), _unit_rows(design, prior.dim), float(tau))


def ridge_optimum(prior, budget: int, tau: float) -> float:
    """The ridge decoder's best loss on ``prior`` with ``budget`` unit rows (water-filling on its covariance; by
    Theorem G1 no adaptive design of a linear-Gaussian decoder does better)."""
    from fvnum.priors.gaussian import GaussSpec, numeric_design_loss, numeric_optimal_design

    spec = GaussSpec.from_cov(prior.covariance)
    return numeric_design_loss(spec, numeric_optimal_design(spec, int(budget), float(tau)), float(tau))


def linear_loss(prior, design, channel) -> float:
    """Exact loss of the best linear readout WITHOUT intercept, ``theta_hat = U phi``, of a fixed ``design``
    (node numbers or unit rows (B, D)) with linear keys, on a finite ``prior``: Model C's readout ``x_q^T U p``
    (docs/theory.md sections 3, 7). It depends on the prior through ``S = E[theta theta^T]`` only, exactly, for any
    ``N``: under ``tokens`` ``E[phi phi^T] = (1 + 1/N) W S W^T + tau^2 W W^T`` (``E[y^2 x x^T | theta] =
    (||theta||^2 + s2) I + 2 theta theta^T``), under ``gaussian`` ``W S W^T + tau^2 I``; loss
    ``tr S - tr(S W^T E[phi phi^T]^-1 W S)``."""
    S, W = prior.second_moment_matrix, _unit_rows(design, prior.dim)
    if channel.kind == "tokens":
        G = (1 + 1 / channel.n_tokens) * W @ S @ W.T + channel.tau2 * W @ W.T
    else:
        G = W @ S @ W.T + channel.tau2 * np.eye(W.shape[0])
    SW = S @ W.T  # (D, B)
    return float(np.trace(S) - np.trace(SW @ np.linalg.pinv(G, hermitian=True) @ SW.T))


def top_directions(prior, budget: int) -> np.ndarray:
    """The ``budget`` leading eigen-directions of ``S = E[theta theta^T]`` of a finite ``prior`` as unit rows (B, D):
    the best linear design without intercept under either channel (``E[phi phi^T]`` commutes with ``S``; Ky Fan)."""
    _, V = np.linalg.eigh(prior.second_moment_matrix)
    return np.ascontiguousarray(V[:, ::-1][:, : int(budget)].T)


def _unit_rows(design, dim: int) -> np.ndarray:
    """A design as unit rows (B, D): node numbers (coordinates 1..D) become ``e_n``."""
    arr = np.asarray(design)
    if arr.ndim == 1:
        if arr.size and (arr.dtype.kind not in "iu" or arr.min() < 1 or arr.max() > dim):
            raise InputError(f"a coordinate design holds coordinates 1..{dim}, got {_short(design)}")
        W = np.zeros((arr.size, dim))
        W[np.arange(arr.size), arr.astype(np.int64) - 1] = 1.0
        return W
    W = arr.astype(float)
    if W.ndim != 2 or W.shape[1] != dim:
        raise InputError(f"a design of unit rows has shape (B, {dim}), got {W.shape}")
    return W
