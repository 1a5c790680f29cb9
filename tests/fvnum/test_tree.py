"""Tree prior: Monte Carlo against fvsym's exact noiseless values (within 5 standard errors from the same
samples), exact averages over all 2^K leaves, and the Bayes decoder against the linear bound at tau > 0."""
import fvnum
import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from fvnum import loss_mc
from fvnum.mc.channels import make_channel
from fvnum.mc.simulate import Draws
from fvnum.policies.policies import PathPolicy
from fvnum.priors.tree import coordinate_losses, numeric_prior
from fvsym import bellman
from fvsym import tree as ftree
from fvsym.gaussian import design_loss as lmmse_loss
from fvsym.priors import GaussianPrior, TreePrior

ALPHA = sp.Rational(1, 2)
PRIOR4 = TreePrior(4, ALPHA)
SCALES4 = 0.5 ** (np.arange(4) / 2)


def within5(est, exact):
    """Monte Carlo agrees with an exact value: 5 standard errors from the same samples (plus float
    rounding of the exact value, for strategies whose loss is the same on every sample)."""
    exact = float(exact)
    assert abs(est.value - exact) <= 5 * est.stderr + 1e-12 * max(1.0, abs(exact)), (est, exact)


@pytest.mark.parametrize("depth,budget", [(4, 1), (4, 3), (5, 4), (3, 3)])
def test_path_noiseless_matches_fvsym(depth, budget):
    prior = TreePrior(depth, ALPHA)
    within5(loss_mc(prior, "path", budget, fvnum.gaussian(0), samples=5000, seed=1), ftree.path_loss().exact(alpha=ALPHA, K=depth, B=budget))


@pytest.mark.parametrize("depth,levels", [(4, 1), (4, 2), (5, 2), (4, 3)])
def test_top_levels_noiseless_matches_fvsym(depth, levels):
    prior = TreePrior(depth, ALPHA)
    est = loss_mc(prior, "top_levels", 2**levels - 1, fvnum.gaussian(0), samples=5000, seed=2)
    within5(est, ftree.top_levels_loss().exact(alpha=ALPHA, K=depth, B=2**levels - 1))


@given(st.lists(st.integers(1, 15), min_size=1, max_size=5))
def test_coordinate_designs_exact_over_all_leaves(nodes):
    """tau = 0: the loss is a function of the leaf, so averaging over all 16 leaves once is exact."""
    prior = TreePrior(4, "3/5")
    spec = numeric_prior(prior)
    leaves = np.arange(16)
    design = np.tile(np.array(nodes), (16, 1))
    losses = coordinate_losses(spec, design, spec.values(leaves, design), 0.0, leaves)
    assert abs(losses.mean() - float(ftree.coordinate_design_loss(prior, nodes))) < 1e-12


@pytest.mark.parametrize("nodes", [(1, 2, 5), (2, 3), (4, 5, 6, 7), (1, 1, 9)])
def test_fixed_design_mc_matches_fvsym(nodes):
    prior = TreePrior(4, ALPHA)
    est = loss_mc(prior, "fixed", len(nodes), fvnum.gaussian(0), options=fvnum.StrategyOptions(design=list(nodes)), samples=20_000, seed=3)
    within5(est, ftree.coordinate_design_loss(prior, nodes))


@pytest.mark.parametrize("layers,width", [(3, 1), (1, 3), (2, 2), (2, 1)])
def test_bellman_policy_noiseless_matches_fvsym(layers, width):
    prior = TreePrior(4, ALPHA)
    est = loss_mc(prior, "optimal", layers * width, fvnum.gaussian(0), options=fvnum.StrategyOptions(layers=layers, width=width), samples=20_000, seed=4)
    within5(est, bellman.solve(prior, layers, width).loss)


def test_path_exact_over_all_leaves_general_scales():
    prior = TreePrior(4, scales=("1", "3/4", "3/4", "1/5"))
    spec = numeric_prior(prior)
    leaves = np.arange(16, dtype=np.int64)
    for budget in range(5):
        run = PathPolicy(budget).run(spec, make_channel(spec, fvnum.gaussian(0.0)),
                                     Draws(16, leaves=leaves, noise=np.zeros((16, budget))), budget)
        assert abs(run.loss.mean() - float(sum(a**2 for a in prior.scales[budget:]))) < 1e-12


@pytest.mark.parametrize("nodes", [(1, 2, 3), (1, 2, 4), (4, 5, 6)])
def test_bayes_decoder_beats_the_linear_decoder_under_noise(nodes):
    """At tau > 0 no closed form exists; the exact Bayes loss is at most the LMMSE loss ``tr P``."""
    prior = TreePrior(4, ALPHA)
    W = sp.zeros(len(nodes), 15)
    for b, n in enumerate(nodes):
        W[b, n - 1] = 1
    tau = sp.Rational(3, 10)
    est = loss_mc(prior, "fixed", len(nodes), fvnum.gaussian(0.3), options=fvnum.StrategyOptions(design=list(nodes)), samples=20_000, seed=5)
    assert est.value <= float(lmmse_loss(prior, W, tau)) + 5 * est.stderr
    dense = loss_mc(prior, "fixed", len(nodes), fvnum.gaussian(0.3), options=fvnum.StrategyOptions(design=np.array(W, dtype=float)), samples=20_000, seed=5)
    assert dense.value == pytest.approx(est.value, rel=1e-12)  # the dense decoder on the same samples


def test_generic_unit_design_is_exact_without_noise():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((1, 15))
    W /= np.linalg.norm(W)
    est = loss_mc(TreePrior(4, ALPHA), "fixed", 1, fvnum.gaussian(0), options=fvnum.StrategyOptions(design=W), samples=5000, seed=6)
    assert est.value == 0 and est.stderr == 0  # one generic projection separates the 16 leaves


def test_noise_only_hurts_path():
    prior = TreePrior(4, ALPHA)
    losses = [loss_mc(prior, "path", 3, fvnum.gaussian(t), samples=20_000, seed=7) for t in (0.0, 0.2, 0.5)]
    assert losses[0].value < losses[1].value - 5 * losses[1].stderr
    assert losses[1].value < losses[2].value - 5 * losses[2].stderr


def test_public_posterior_mean():
    from fvnum.mc import _reference as R
    from fvnum import posterior_mean, tau_of_tokens

    rng = np.random.default_rng(8)
    nodes = rng.integers(1, 16, (20, 3))
    phi = rng.standard_normal((20, 3))
    np.testing.assert_allclose(posterior_mean(PRIOR4, nodes, phi, fvnum.gaussian(0.3)),
                               R.coord_posterior_mean(nodes, phi, 0.3, SCALES4), rtol=1e-12, atol=1e-12)
    W = rng.standard_normal((3, 15))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    t = tau_of_tokens(PRIOR4, 128)
    sigma2 = float(PRIOR4.second_moment) + 0.01  # the tokens channel: the exact law of the statistic
    np.testing.assert_allclose(posterior_mean(PRIOR4, W, phi, fvnum.tokens(128)),
                               R.tokens_posterior_mean(W[None], phi, 128, sigma2, SCALES4), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(posterior_mean(PRIOR4, nodes, phi, fvnum.tokens(128)),
                               R.tokens_posterior_mean(nodes, phi, 128, sigma2, SCALES4), rtol=1e-12, atol=1e-12)
    gauss = posterior_mean(GaussianPrior.isotropic(3), np.eye(3), phi, fvnum.tokens(128))  # approximate there
    np.testing.assert_allclose(gauss, phi / (1 + tau_of_tokens(GaussianPrior.isotropic(3), 128) ** 2), rtol=1e-12)
    with pytest.raises(ValueError, match="outside"):
        posterior_mean(PRIOR4, np.array([16, 1, 1]), phi, fvnum.gaussian(0.1))
