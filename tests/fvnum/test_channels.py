"""Channels: tau(N), the exact-in-law tokens statistic, and the tokens channel against closed forms."""
import fvnum
import math

import numpy as np
import pytest
import sympy as sp

from fvnum import loss_mc, tau_of_tokens
from fvnum.mc import _reference as R
from fvnum.mc.channels import EXACT_TOKENS, make_channel, token_statistics
from fvnum.priors.tree import numeric_prior, tokens_law
from fvsym.priors import GaussianPrior, TreePrior


def test_tau_of_tokens_is_the_theory_formula():
    prior = TreePrior(4, "1/2")
    expected = (prior.second_moment + sp.Rational(1, 100)) / 128  # THEORY.md section 2
    assert prior.second_moment == sp.Rational(15, 8)
    assert abs(tau_of_tokens(prior, 128, 0.01) ** 2 - float(expected)) < 1e-15
    assert make_channel(prior, fvnum.tokens(128)).tau == tau_of_tokens(prior, 128)


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
    est = loss_mc(GaussianPrior.isotropic(D), "fixed", D, fvnum.tokens(N, s2=s2), options=fvnum.StrategyOptions(design=np.eye(D)), samples=40_000, seed=2)
    assert abs(est.z(_isotropic_tokens_loss(D, N, s2))) < 5


@pytest.mark.slow
def test_tokens_channel_approaches_the_gaussian_channel_at_rate_one_over_N():
    """Both channels tend to the noiseless loss (0 here) like 1/N; so does their difference.
    Fitted log-log slopes against the exponent -1."""
    D, s2, Ns = 3, 0.01, np.array([64, 256, 1024, 4096])
    prior = GaussianPrior.isotropic(D)
    tok = [loss_mc(prior, "fixed", D, fvnum.tokens(int(N), s2=s2), options=fvnum.StrategyOptions(design=np.eye(D)), samples=200_000, seed=3) for N in Ns]
    gau = [loss_mc(prior, "fixed", D, fvnum.gaussian(tau_of_tokens(prior, int(N), s2)), options=fvnum.StrategyOptions(design=np.eye(D)), samples=200_000,
                   seed=3) for N in Ns]
    for series in ([e.value for e in tok], [e.value for e in gau], [t.value - g.value for t, g in zip(tok, gau)]):
        slope = np.polyfit(np.log(Ns), np.log(series), 1)[0]
        assert abs(slope + 1) < 0.05, slope
    # and the tree prior's path strategy: the tokens loss tends to the noiseless loss like the gaussian one
    tree = TreePrior(4, "1/2")
    noiseless = 0.125
    gaps = [loss_mc(tree, "path", 3, fvnum.tokens(int(N)), samples=100_000, seed=4).value - noiseless for N in (8, 16)]
    assert gaps[1] < gaps[0]


# --- the exact decoder of the tokens channel (the law of the one statistic) ---------------------------------
def test_rereading_a_node_under_tokens_changes_nothing():
    """Issue 19: designs 2, 2,2 and 2,2,2,2 read the same statistic, so with the same seed their losses are
    equal sample by sample; with other seeds they agree within 3 standard errors. Likewise a unit row read
    twice, or a row in the span of the rows read."""
    prior = TreePrior(3, "1/2")
    runs = [loss_mc(prior, "fixed", len(d), fvnum.tokens(16), options=fvnum.StrategyOptions(design=d), samples=20_000, seed=0, record=True)
            for d in ([2], [2, 2], [2, 2, 2, 2])]
    for est in runs[1:]:
        np.testing.assert_allclose(est.function_vectors.loss, runs[0].function_vectors.loss, rtol=1e-12, atol=1e-15)
    other = [loss_mc(prior, "fixed", len(d), fvnum.tokens(16), options=fvnum.StrategyOptions(design=d), samples=20_000, seed=s)
             for s, d in ((1, [2]), (2, [2, 2]), (3, [2, 2, 2, 2]))]
    for a in other:
        for b in other:
            assert abs(a.value - b.value) <= 3 * math.hypot(a.stderr, b.stderr)
    assert runs[0].decoder == EXACT_TOKENS
    rng = np.random.default_rng(0)
    W = rng.standard_normal((2, 7))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    w3 = (W[0] - 2 * W[1]) / np.linalg.norm(W[0] - 2 * W[1])
    base = loss_mc(prior, "fixed", 2, fvnum.tokens(16), options=fvnum.StrategyOptions(design=W), samples=4000, seed=4, record=True).function_vectors.loss
    for design in (np.vstack([W, W[:1]]), np.vstack([W, w3])):
        again = loss_mc(prior, "fixed", 3, fvnum.tokens(16), options=fvnum.StrategyOptions(design=design), samples=4000, seed=4,
                        record=True).function_vectors.loss
        np.testing.assert_allclose(again, base, rtol=1e-9, atol=1e-12)


def test_reading_every_node_is_observing_the_statistic():
    """Budget = all D nodes, or D unit rows of a rotation: both observe S itself, so the two routes of the
    decoder (closure of the nodes, leaves in the row span) give the same loss sample by sample, and it is
    the Bayes loss of observing S (the enumeration oracle on S)."""
    prior = TreePrior(3, "1/2")
    spec = numeric_prior(prior)
    Q = np.linalg.qr(np.random.default_rng(1).standard_normal((7, 7)))[0]
    coord = loss_mc(prior, "fixed", 7, fvnum.tokens(8), options=fvnum.StrategyOptions(design=list(range(1, 8))), samples=3000, seed=5,
                    record=True).function_vectors
    unit = loss_mc(prior, "fixed", 7, fvnum.tokens(8), options=fvnum.StrategyOptions(design=Q), samples=3000, seed=5, record=True).function_vectors
    np.testing.assert_allclose(unit.loss, coord.loss, rtol=1e-8, atol=1e-10)
    S = coord.phi[:, 0, :]  # the readings of nodes 1..7 are S
    ref = R.tokens_posterior_mean(np.eye(7)[None], S[:300], *tokens_law(spec, make_channel(spec, fvnum.tokens(8))),
                                  spec.scales)
    np.testing.assert_allclose(coord.loss[:300], R.losses(ref, coord.leaves[:300], spec.scales), rtol=1e-10,
                               atol=1e-12)


def _orthogonality_z(spec, tokens, channel, pol, budget, n, seed):
    """Draw leaves and their tokens statistic (exact in law, as every simulation does), run the policy,
    decode by ``channel``'s decoder (``tokens`` itself: the exact one; a gaussian channel: a control), and
    return the z-score of ``E[theta_hat . (theta - theta_hat)]``, 0 when ``theta_hat`` is the posterior mean."""
    from fvnum.mc.simulate import draw_samples, run_policy
    from fvnum.priors.tree import posterior_means

    draws = draw_samples(spec, tokens, n, budget, np.random.default_rng(seed))
    run = pol.run(spec, tokens, draws, budget) or run_policy(spec, tokens, pol, draws)
    if all(r.coordinate for r in run.rows):
        design = np.concatenate([r.nodes(n) for r in run.rows], axis=1)
    else:
        design = np.concatenate([np.broadcast_to(r.dense(n, spec.dim), (n, r.array.shape[-2], spec.dim))
                                 for r in run.rows], axis=1)
    mean = posterior_means(spec, channel, design, run.phi.reshape(n, -1))
    theta = spec.thetas(draws.leaves)
    if channel is tokens:  # the engine's loss is this decoder's
        np.testing.assert_allclose(((mean - theta) ** 2).sum(1), run.loss, rtol=1e-9, atol=1e-12)
    g = (mean * (theta - mean)).sum(1)
    return g.mean() / (g.std(ddof=1) / math.sqrt(n))


@pytest.mark.parametrize("strategy,budget,design", [
    ("path", 3, None), ("fixed", 7, [1, 2, 3, 3, 4, 5, 6]), ("fixed", 2, "unit"), ("greedy_coordinate", 3, None),
])
def test_exact_decoder_is_the_posterior_mean_of_the_tokens(strategy, budget, design):
    """An independent check of the decoder: on the statistic of sampled tokens (exact in law, N = 4), the
    error of a posterior mean is orthogonal to it (``E[theta_hat . (theta - theta_hat)] = 0``, within 5
    standard errors from the same samples), for adaptive and fixed, coordinate and unit rows. The gaussian
    channel's decoder at ``tau(N)`` (the one used before) fails the same test by far."""
    from fvnum.policies.registry import STRATEGIES

    prior = TreePrior(3, "1/2")
    spec = numeric_prior(prior)
    ch = make_channel(spec, fvnum.tokens(4, s2=0.05))
    if design == "unit":
        design = np.random.default_rng(2).standard_normal((2, 7))
        design /= np.linalg.norm(design, axis=1, keepdims=True)
    pol = STRATEGIES[strategy].using(design=design).policy(prior, budget, ch)
    assert abs(_orthogonality_z(spec, ch, ch, pol, budget, 40_000, seed=6)) < 5
    if strategy == "fixed" and not isinstance(design, np.ndarray):
        assert abs(_orthogonality_z(spec, ch, make_channel(spec, fvnum.gaussian(ch.tau)), pol, budget, 40_000, seed=6)) > 10


def test_decoder_is_named_exact_or_approximate():
    tree = loss_mc(TreePrior(3, "1/2"), "path", 2, fvnum.tokens(16), samples=100)
    gauss = loss_mc(GaussianPrior.isotropic(3), "top_levels", 2, fvnum.tokens(16), samples=100)
    plain = loss_mc(TreePrior(3, "1/2"), "path", 2, fvnum.gaussian(0.3), samples=100)
    noiseless_labels = loss_mc(TreePrior(3, "1/2"), "path", 2, fvnum.tokens(16, s2=0), samples=100)
    assert tree.to_dict()["decoder"] == EXACT_TOKENS
    assert gauss.to_dict()["decoder"].startswith("approximate:")
    assert plain.to_dict()["decoder"].startswith("exact:")
    assert noiseless_labels.decoder.startswith("approximate:") and np.isfinite(noiseless_labels.value)
    from fvnum import patching_table

    assert patching_table(TreePrior(3, "1/2"), "path", 2, fvnum.tokens(16), samples=100).to_dict()["decoder"] == tree.decoder
