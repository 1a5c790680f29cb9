"""Channels: tau(N), the exact-in-law tokens statistic, and the tokens channel against closed forms."""
import math

import numpy as np
import pytest
import sympy as sp

from fvnum import loss_mc, tau_of_tokens
from fvnum import _reference as R
from fvnum.channels import make_channel, token_statistics
from fvsym.priors import GaussianPrior, TreePrior


def test_tau_of_tokens_is_the_theory_formula():
    prior = TreePrior(4, "1/2")
    expected = (prior.second_moment + sp.Rational(1, 100)) / 128  # THEORY.md section 2
    assert prior.second_moment == sp.Rational(15, 8)
    assert abs(tau_of_tokens(prior, 128, 0.01) ** 2 - float(expected)) < 1e-15
    assert make_channel(prior, tokens=128).tau == tau_of_tokens(prior, 128)


def _moment_z(samples, expected):
    """z-scores of sample means of ``samples`` (n, k) against ``expected`` (k,), SE from the samples."""
    n = samples.shape[0]
    return (samples.mean(axis=0) - expected) / (samples.std(axis=0, ddof=1) / math.sqrt(n))


def _theory_moments(theta, theta2, N, s2):
    """E[S] = theta and Cov(S, S') = ((theta.theta' + s2) I + theta' theta^T) / N (tokens shared)."""
    D = theta.size
    return ((theta @ theta2 + s2) * np.eye(D) + np.outer(theta2, theta)) / N


@pytest.mark.parametrize("N", [1, 2, 40])
def test_token_statistic_has_the_exact_conditional_moments(N):
    rng = np.random.default_rng(0)
    D, n, s2 = 4, 40_000, 0.3
    theta = np.array([1.0, -0.5, 0.0, 0.25])
    theta2 = np.array([1.0, 0.5, 0.7, 0.0])  # a donor sharing the tokens
    S, S2 = token_statistics([np.tile(theta, (n, 1)), np.tile(theta2, (n, 1))], N, s2, rng)
    assert np.max(np.abs(_moment_z(S, theta))) < 5
    assert np.max(np.abs(_moment_z(S2, theta2))) < 5
    for a_, b_, x, y in [(theta, theta, S, S), (theta2, theta2, S2, S2), (theta, theta2, S, S2)]:
        prods = ((x - a_)[:, :, None] * (y - b_)[:, None, :]).reshape(n, -1)
        assert np.max(np.abs(_moment_z(prods, _theory_moments(a_, b_, N, s2).ravel()))) < 5


def test_explicit_token_sampling_has_the_same_moments():
    """The oracle that draws all N x D tokens agrees with the same closed-form moments."""
    rng = np.random.default_rng(1)
    D, n, N, s2 = 3, 20_000, 5, 0.1
    theta = np.array([0.8, -0.6, 0.2])
    S = R.token_statistic(np.tile(theta, (n, 1)), N, s2, rng)
    assert np.max(np.abs(_moment_z(S, theta))) < 5
    prods = ((S - theta)[:, :, None] * (S - theta)[:, None, :]).reshape(n, -1)
    assert np.max(np.abs(_moment_z(prods, _theory_moments(theta, theta, N, s2).ravel()))) < 5


def _isotropic_tokens_loss(D, N, s2):
    """Isotropic prior, identity design, tokens channel, decoder shrinkage 1 / (1 + tau^2):
    loss = (E|noise|^2 + tau^4 E|theta|^2) / (1 + tau^2)^2 with E|noise|^2 = (D (D + s2) + D) / N."""
    t2 = (D + s2) / N
    return ((D * (D + s2) + D) / N + t2**2 * D) / (1 + t2) ** 2


@pytest.mark.parametrize("N", [8, 64])
def test_tokens_channel_matches_its_closed_form(N):
    D, s2 = 3, 0.01
    est = loss_mc(GaussianPrior.isotropic(D), "fixed", D, design=np.eye(D), tokens=N, s2=s2, samples=40_000, seed=2)
    assert abs(est.z(_isotropic_tokens_loss(D, N, s2))) < 5


@pytest.mark.slow
def test_tokens_channel_approaches_the_gaussian_channel_at_rate_one_over_N():
    """Both channels tend to the noiseless loss (0 here) like 1/N; so does their difference.
    Fitted log-log slopes against the exponent -1."""
    D, s2, Ns = 3, 0.01, np.array([64, 256, 1024, 4096])
    prior = GaussianPrior.isotropic(D)
    tok = [loss_mc(prior, "fixed", D, design=np.eye(D), tokens=int(N), s2=s2, samples=200_000, seed=3) for N in Ns]
    gau = [loss_mc(prior, "fixed", D, design=np.eye(D), tau=tau_of_tokens(prior, int(N), s2), samples=200_000,
                   seed=3) for N in Ns]
    for series in ([e.value for e in tok], [e.value for e in gau], [t.value - g.value for t, g in zip(tok, gau)]):
        slope = np.polyfit(np.log(Ns), np.log(series), 1)[0]
        assert abs(slope + 1) < 0.05, slope
    # and the tree prior's path strategy: the tokens loss tends to the noiseless loss like the gaussian one
    tree = TreePrior(4, "1/2")
    noiseless = 0.125
    gaps = [loss_mc(tree, "path", 3, tokens=int(N), samples=100_000, seed=4).value - noiseless for N in (8, 16)]
    assert gaps[1] < gaps[0]
