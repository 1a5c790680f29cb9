"""The two channels of docs/theory.md section 2.

``gaussian``: ``phi_l = W_l theta + tau xi_l`` with fresh ``xi_l ~ N(0, I_d)`` at every layer.

``tokens``: ``N`` tokens ``x_i ~ N(0, I_D)``, ``y_i = <theta, x_i> + eps_i`` (``eps_i ~ N(0, s2)``) and
``phi_l = (1/N) sum_i y_i W_l x_i = W_l S`` with the single statistic ``S = (1/N) sum_i y_i x_i`` of the
context (so re-reading a direction gives the same value, not a fresh one). ``S`` is sampled *exactly in
law*, without materialising the ``N x D`` tokens: write ``x_i = G_i U^T + z_i`` with ``U`` an orthonormal
basis of the span of the latent(s) and ``z_i`` orthogonal to it. The Gram matrix of the columns
``(G_1, .., G_r, eps / sqrt(s2))`` (``N``-vectors) is Wishart(``N``, ``I``), drawn by its Bartlett
decomposition; and ``sum_i y_i z_i`` given ``y`` is Gaussian with covariance ``|y|^2`` times the
projector onto the orthogonal complement. Cost O(D) per sample, independent of ``N``.
Target and donor contexts of a key-patching experiment share the tokens ``x_i`` and the label noise
``eps_i`` (docs/theory.md section 8): their statistics are drawn jointly in the same way.

Noise too small for floating point: a gaussian-channel ``tau`` at most ``NOISELESS_RATIO`` times the
prior's smallest scale (the tree's ``a_K``; a Gaussian prior's smallest positive standard deviation) is
noiseless in effect: coordinate readings of distinct leaves lie at least ``a_K`` apart, so one is misread
with probability below ``exp(-1e17)``; unit rows are resolved to the noiseless decoder's own tolerance
(``1e-9``); a Gaussian loss moves by ``tau^2 <= 1e-18`` of its smallest variance; and ``tau^2`` would
underflow in the kernels. Such a channel is computed at ``tau = 0`` and remembers the ``tau`` asked for
(``Channel.tau_given``). A ``tau`` above that bound but below ``FLOAT_RATIO`` times the tree's largest scale (possible only when the scales span more
than ``NOISELESS_RATIO / FLOAT_RATIO``) cannot be computed in doubles by the tree kernels and is refused,
naming the range (a Gaussian prior's linear algebra copes with any tau).

Decoders (docs/decoders.md; :func:`decoder_of` names the one a result used):
- ``gaussian``: the Bayes posterior under the likelihood ``N(W theta, tau^2 I)``: exact.
- ``tokens`` on the tree prior: the Bayes posterior under the law of the stacked readings given each
  leaf, one statistic ``S`` shared by all layers (a repeated row carries nothing new). Not only the CLT
  law ``N(W theta, ((|theta|^2 + s2) W W^T + W theta theta^T W^T) / N)``: the exact law of ``S``, a
  Gaussian scale mixture with those moments (``fvnum.priors._kernels.tokens``); at small ``N`` the CLT decoder
  loses to the exact one, and even to the gaussian channel's (docs/decoders.md). Its two constants are
  ``fvnum.priors.tree.tokens_law``.
- ``tokens`` on a Gaussian prior: the CLT posterior is not closed form; the decoder is the gaussian
  channel's at ``tau^2 = (E||theta||^2 + s2) / N`` (:func:`effective_tau2`), treating the readings as
  independent: an approximation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from fvsym._validate import _short, check_int, check_real
from fvsym.errors import InputError

from fvnum.defaults import KEYED, check_family
from fvnum.mc._scalars import plain_scalar

CHANNELS = ("gaussian", "tokens")


def effective_tau2(prior, *, n_tokens, s2=0.01):
    """``tau^2 = (E||theta||^2 + s2) / N``, the effective noise of an ``N``-token context (docs/theory.md
    section 2): the one definition of tau in the project. ``prior``: a prior (its ``second_moment``) or the
    number ``E||theta||^2`` itself; the tokens channel's pieces, ``n_tokens=`` with ``s2``. Works on floats and
    on exact sympy numbers (``TreePrior``'s second moment is exact)."""
    return (getattr(prior, "second_moment", prior) + s2) / n_tokens


@dataclass(frozen=True)
class Channel:
    """A channel, the one way to give one to a function of ``fvnum``: build it with :func:`gaussian` (``tau``) or
    :func:`tokens` (``N``, ``s2``, ``keys``). ``kind``; the decoder's noise ``tau``, ``None`` in a tokens channel
    not yet resolved against a prior (its ``tau`` is :func:`effective_tau2` of the prior's second moment: every
    function resolves the channel it is given, :meth:`resolve`); for ``tokens``, ``n_tokens`` and ``s2``, and
    ``keys``, the key family of the keyed predictions (``fvnum.keys.families.FAMILIES``, or None): the readings
    of a strategy's design are its linear keys ``W S`` whatever ``keys`` says. ``tau2`` is ``tau^2`` as computed
    (for ``tokens``: :func:`effective_tau2`, before the square root)."""

    kind: str
    tau: float | None = None
    n_tokens: int | None = None
    s2: float = 0.01
    tau2: float | None = None
    tau_given: float | None = None  # the tau asked for, where it was noiseless in effect (computed as 0)
    keys: str | None = field(default=None, compare=False)  # the keyed rows' family: not part of the readings

    def __post_init__(self):
        if self.kind not in CHANNELS:
            raise InputError(f"unknown channel {self.kind!r}; choose one of {', '.join(CHANNELS)}")
        if self.kind == "tokens" and self.n_tokens is None:
            raise InputError("the tokens channel needs n_tokens (N)")
        if self.kind == "gaussian" and self.tau is None:
            raise InputError("the gaussian channel needs tau")
        if self.tau2 is None and self.tau is not None:
            object.__setattr__(self, "tau2", float(self.tau) ** 2)

    def resolve(self, prior) -> Channel:
        """This channel against ``prior``: the tokens channel's ``tau`` of the prior's second moment, the
        gaussian channel's ``tau`` checked against the prior's scales (:func:`make_channel`)."""
        return make_channel(prior, self)

    def to_dict(self) -> dict:
        out = {"channel": self.kind, "tau": self.tau}
        if self.tau_given is not None:
            out["tau_given"] = self.tau_given
        if self.kind == "tokens":
            out.update(tokens=self.n_tokens, s2=self.s2)
        return out


def gaussian(tau) -> Channel:
    """The gaussian channel of noise ``tau >= 0`` (docs/theory.md section 2): ``phi_l = W_l theta + tau xi_l``."""
    return Channel("gaussian", check_tau(plain_scalar(tau, "tau")))


def tokens(n_tokens, s2=0.01, keys=KEYED) -> Channel:
    """The tokens channel of ``N = n_tokens`` tokens with label noise ``s2`` (docs/theory.md section 2); its
    effective ``tau = sqrt((E||theta||^2 + s2) / N)`` is the prior's, resolved where the channel is used.
    ``keys``: the key family of the keyed predictions that read these tokens (the keyed rows of
    ``fvnum.comparison_table``): ``"weighted"`` (default, as ``fv compare``), ``"linear"``, ``"softmax"`` or None
    (``"none"``: no keyed rows)."""
    N = _check_tokens(plain_scalar(n_tokens, "tokens N"))
    return Channel("tokens", None, N, _check_s2(plain_scalar(s2, "s2")), keys=check_family(keys, optional=True))


def check_channel(channel, name: str = "channel") -> Channel:
    """``channel`` itself when it is a :class:`Channel`; anything else (a number, a string) one line naming it
    and the two ways to build one."""
    if not isinstance(channel, Channel):
        raise InputError(f"{name} must be a channel, fvnum.gaussian(tau) or fvnum.tokens(N), got {_short(channel)}")
    return channel


def tokens_of(channel, verb: str, *, keys: bool = False) -> Channel:
    """``channel`` itself when it is a tokens channel (with a key family, where ``keys``): ``verb`` reads tokens.
    The gaussian channel, or a channel without the key family ``verb`` searches, one line naming it."""
    channel = check_channel(channel)
    if channel.kind != "tokens":
        raise InputError(f"{verb} reads tokens: give fvnum.tokens(N, s2=...), not the gaussian channel "
                         f"(tau = {channel.tau:g})")
    if keys and channel.keys is None:
        raise InputError(f"{verb} searches keys of a family: give fvnum.tokens(N, s2=..., keys='weighted', "
                         f"'linear' or 'softmax'), got keys=None")
    return channel


EXACT_TOKENS = "exact: law of the tokens' one statistic, shared by all layers (finite N, not only the CLT)"
EXACT_GAUSSIAN = "exact: Bayes posterior of the gaussian channel"
APPROX_TOKENS = ("approximate: the gaussian channel's posterior at tau(N), readings treated as independent "
                 "(the CLT posterior of a Gaussian prior is not closed form)")


def decoder_of(spec, channel: Channel) -> str:
    """What decodes the loss of a result under ``channel`` on the prior ``spec``: exact or approximate."""
    from fvnum.priors.capabilities import capability
    from fvnum.priors.tree import S2_FLOOR

    if channel.kind == "gaussian":
        return EXACT_GAUSSIAN
    if not capability(spec, "exact_under_tokens"):
        return APPROX_TOKENS
    if channel.s2 < S2_FLOOR * spec.second_moment:
        return f"approximate: law of the tokens with s2 raised to {S2_FLOOR:g} |theta|^2 (s2 = {channel.s2:g})"
    return EXACT_TOKENS


def _second_moment(prior) -> float:
    from fvnum.priors.tree import numeric_prior

    return numeric_prior(prior).second_moment


MAX_TAU = 1e100  # tau**2 must stay a finite float
MAX_TOKENS = 10**12


def _check_tokens(n_tokens) -> int:
    return check_int(n_tokens, "tokens N", minimum=1, maximum=MAX_TOKENS)


def _check_s2(s2) -> float:
    return check_real(s2, "s2", 0.0, MAX_TAU)


def check_tau(tau) -> float:
    return check_real(tau, "tau", 0.0, MAX_TAU)


NOISELESS_RATIO = 1e-9  # tau <= this x the smallest scale: noiseless in effect (computed at tau = 0)
FLOAT_RATIO = 1e-14  # tau below this x the largest scale (and not noiseless in effect): beyond doubles


def noise_scales(spec) -> tuple[float, float]:
    """``(smallest, largest)`` scale of a numeric prior that the channel noise is compared with: the tree's
    ``min a_k`` and ``max a_k``; a Gaussian prior's smallest and largest positive standard deviation."""
    if hasattr(spec, "scales"):
        a = np.abs(np.asarray(spec.scales, dtype=float))
    else:
        a = np.sqrt(np.asarray(spec.eigenvalues, dtype=float))
    a = a[a > 0]
    return (float(a.min()), float(a.max())) if a.size else (0.0, 0.0)


def _gaussian_channel(prior, tau: float) -> Channel:
    if tau == 0:
        return Channel("gaussian", 0.0)
    from fvnum.priors.tree import numeric_prior

    prior_spec = numeric_prior(prior)
    small, large = noise_scales(prior_spec)
    if tau <= NOISELESS_RATIO * small:
        return Channel("gaussian", 0.0, tau_given=tau)
    if tau < FLOAT_RATIO * large and hasattr(prior_spec, "scales"):  # a Gaussian prior's algebra copes
        raise InputError(f"tau = {tau:.3g} is too small to compute next to the prior's scales {small:.3g} .. "
                         f"{large:.3g}: give tau >= {FLOAT_RATIO * large:.3g}, or tau <= "
                         f"{NOISELESS_RATIO * small:.3g} (noiseless in effect, computed as tau = 0)")
    return Channel("gaussian", tau)


def tau_of_tokens(prior, n_tokens, s2=0.01) -> float:
    """Effective noise of an ``N``-token context: ``tau = sqrt((E||theta||^2 + s2) / N)`` (docs/theory.md §2)."""
    return make_channel(prior, tokens(n_tokens, s2)).tau


def make_channel(prior, channel) -> Channel:
    """``channel`` (:func:`gaussian` or :func:`tokens`) resolved against ``prior``: the gaussian channel's ``tau``
    checked against the prior's scales (noiseless in effect: computed at ``tau = 0``; too small to compute:
    refused), the tokens channel's effective ``tau`` of the prior's second moment. Every engine entry of
    ``fvnum`` resolves its channel here (once resolved, again the same)."""
    channel = check_channel(channel)
    from fvnum.guards.limits import check_spec
    from fvnum.priors.tree import numeric_prior

    check_spec(numeric_prior(prior))  # floats the kernels can square: every engine entry builds its channel here
    if channel.kind == "gaussian":
        if channel.tau_given is not None:  # resolved already: noiseless in effect
            return channel
        return replace(_gaussian_channel(prior, check_tau(channel.tau)), keys=channel.keys)
    N = _check_tokens(channel.n_tokens)
    s2 = _check_s2(channel.s2)
    tau2 = effective_tau2(_second_moment(prior), n_tokens=N, s2=s2)
    return Channel("tokens", math.sqrt(tau2), N, s2, tau2, keys=channel.keys)


def _chi(rng, df: int, n: int) -> np.ndarray:
    return np.sqrt(rng.chisquare(df, size=n)) if df > 0 else np.zeros(n)


def token_statistics(thetas, n_tokens: int, s2: float, rng) -> list:
    """``S = (1/N) sum_i y_i x_i`` for one or two latents per sample that share the tokens and the label
    noise. ``thetas``: list of ``m`` arrays (n, D), ``m`` in {1, 2}; returns a list of ``m`` arrays (n, D).
    Exact in law (see the module docstring)."""
    m = len(thetas)
    n, D = thetas[0].shape
    N = int(n_tokens)
    sigma = math.sqrt(s2)
    # orthonormal basis U (m vectors) of span(thetas), coefficients coef[a][r] = <theta_a, U_r>
    U, coef = [], [[None] * m for _ in range(m)]
    for a in range(m):
        w = thetas[a].copy()
        for r, u in enumerate(U):
            c = np.einsum("nd,nd->n", thetas[a], u)
            coef[a][r] = c
            w -= c[:, None] * u
        norm = np.sqrt(np.einsum("nd,nd->n", w, w))
        scale = np.maximum(np.abs(thetas[a]).max(axis=1), 1e-300)
        ok = norm > 1e-12 * scale
        U.append(np.where(ok[:, None], w / np.where(ok, norm, 1.0)[:, None], 0.0))
        coef[a][a] = np.where(ok, norm, 0.0)
        for r in range(a + 1, m):
            coef[a][r] = np.zeros(n)
    coef = np.array([[coef[a][r] for r in range(m)] for a in range(m)])  # (m, m, n)
    # Gram of the N-vectors (G_1..G_m, e) ~ Wishart(N, I_{m+1}) by Bartlett: A = L L^T
    p = m + 1
    Lb = np.zeros((n, p, p))
    for i in range(p):
        Lb[:, i, i] = _chi(rng, N - i, n)
        for j in range(i):
            if j < N:
                Lb[:, i, j] = rng.standard_normal(n)
    A = np.einsum("nij,nkj->nik", Lb, Lb)
    Agg, Age, Aee = A[:, :m, :m], A[:, :m, m], A[:, m, m]
    # G_r . y_a and y_a . y_b with y_a = sum_r coef[a, r] G_r + sigma e
    gy = np.einsum("nrs,asn->nra", Agg, coef) + sigma * Age[:, :, None]  # (n, m, m): [r, a]
    yy = (
        np.einsum("arn,nrs,bsn->nab", coef, Agg, coef)
        + sigma * (np.einsum("arn,nr->na", coef, Age)[:, :, None] + np.einsum("brn,nr->nb", coef, Age)[:, None, :])
        + s2 * Aee[:, None, None]
    )  # (n, m, m)
    # sum_i y_a z_i: rows iid N(0, yy) across the D coordinates, then projected off span(U)
    zeta = rng.standard_normal((n, D, m))
    chol = np.zeros((n, m, m))
    chol[:, 0, 0] = np.sqrt(np.maximum(yy[:, 0, 0], 0.0))
    if m == 2:
        l00 = chol[:, 0, 0]
        chol[:, 1, 0] = np.where(l00 > 0, yy[:, 1, 0] / np.where(l00 > 0, l00, 1.0), 0.0)
        chol[:, 1, 1] = np.sqrt(np.maximum(yy[:, 1, 1] - chol[:, 1, 0] ** 2, 0.0))
    perp = np.einsum("ndc,nac->nda", zeta, chol)  # (n, D, m)
    out = []
    for a in range(m):
        z = perp[:, :, a]
        for u in U:
            z = z - np.einsum("nd,nd->n", z, u)[:, None] * u
        s = z
        for r, u in enumerate(U):
            s = s + gy[:, r, a][:, None] * u
        out.append(s / N)
    return out
