"""Gaussian prior: Monte Carlo within 5 standard errors of the closed forms of fvsym at tau > 0,
water-filling against fvsym, the decoder against its precision-form reference, Theorem G1."""
import fvnum
import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from fvnum.mc import _reference as R
from fvnum import loss_mc, optimal_nonadaptive_unit
from fvnum.priors import gaussian as G
from fvnum.priors.tree import numeric_prior
from fvsym import gaussian as fg
from fvsym.priors import GaussianPrior, TreePrior


def within5(est, exact):
    exact = float(exact)
    assert abs(est.value - exact) <= 5 * est.stderr + 1e-12 * max(1.0, abs(exact)), (est, exact)


def _random_cov(rng, D):
    A = rng.standard_normal((D, D))
    return A @ A.T / D + 0.1 * np.eye(D)


def test_fixed_design_matches_fvsym_design_loss():
    rng = np.random.default_rng(0)
    C = np.round(_random_cov(rng, 4), 3)
    prior = GaussianPrior(sp.Matrix(C).applyfunc(sp.nsimplify))
    W = rng.standard_normal((3, 4))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    exact = fg.design_loss(prior, sp.Matrix(W), sp.Rational(3, 10))
    est = loss_mc(prior, "fixed", 3, fvnum.gaussian(0.3), options=fvnum.StrategyOptions(design=W), samples=40_000, seed=1)
    within5(est, exact)
    assert abs(G.numeric_design_loss(numeric_prior(prior), W, 0.3) - float(exact)) < 1e-9


def test_decoder_equals_precision_form():
    rng = np.random.default_rng(1)
    spec = G.GaussSpec.from_cov(_random_cov(rng, 5))
    W = rng.standard_normal((30, 3, 5))
    phi = rng.standard_normal((30, 3))
    np.testing.assert_allclose(G._posterior_means(spec, W, phi, 0.4), R.gaussian_posterior_mean(spec.cov, W, phi, 0.4),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(G._posterior_means(spec, W[0], phi, 0.4),
                               R.gaussian_posterior_mean(spec.cov, W[:1], phi, 0.4), rtol=1e-10, atol=1e-12)


@given(st.lists(st.integers(0, 9), min_size=1, max_size=5), st.integers(1, 7), st.sampled_from(["0", "1/3", "2"]))
def test_optimal_design_of_any_spectrum_attains_fvsym_water_filling(eigs, budget, tau):
    """The numeric design is built on fvsym's exact water-filling: unit rows whose exact loss is its optimum."""
    spec = G.GaussSpec.from_cov(np.diag(np.array(eigs, dtype=float)))
    exact = fg.water_filling(tuple(sp.Integer(e) for e in eigs), budget, sp.Rational(tau))
    W = G.numeric_optimal_design(spec, budget, float(sp.Rational(tau)))
    assert W.shape == (budget, len(eigs))
    np.testing.assert_allclose(np.linalg.norm(W, axis=1), 1.0, atol=1e-12)
    assert abs(G.numeric_design_loss(spec, W, float(sp.Rational(tau))) - float(exact.loss)) < 1e-9


@pytest.mark.parametrize("budget,tau", [(3, 0.3), (5, 0.5), (20, 0.3), (4, 0.0)])
def test_optimal_design_reaches_water_filling(budget, tau):
    spec = numeric_prior(GaussianPrior.matched(TreePrior(4, "1/2")))
    W = G.numeric_optimal_design(spec, budget, tau)
    np.testing.assert_allclose(np.linalg.norm(W, axis=1), 1.0, atol=1e-12)
    wf = float(fg.water_filling(tuple(spec.eigenvalues.tolist()), budget, tau).loss)
    assert abs(G.numeric_design_loss(spec, W, tau) - wf) < 1e-9


def test_optimal_strategy_mc_matches_water_filling_and_G1():
    """Theorem G1: the adaptive path strategy cannot beat the water-filling optimum; on the matched
    Gaussian (diagonal C) it reads one coordinate per level, so its loss is that of the design (1, 2, 4)."""
    prior = GaussianPrior.matched(TreePrior(4, "1/2"))
    spec = numeric_prior(prior)
    tau = sp.Rational(3, 10)
    opt = fg.water_filling(spec.eigenvalues.tolist(), 3, float(tau)).loss
    est = loss_mc(prior, "optimal", 3, fvnum.gaussian(0.3), samples=40_000, seed=2)
    within5(est, opt)
    path = loss_mc(prior, "path", 3, fvnum.gaussian(0.3), samples=40_000, seed=2)
    W = sp.zeros(3, 15)
    for b, n in enumerate((1, 2, 4)):
        W[b, n - 1] = 1
    within5(path, fg.design_loss(prior, W, tau))
    assert path.value >= float(opt) - 5 * path.stderr


def test_noiseless_gaussian_optimum():
    prior = GaussianPrior.matched(TreePrior(3, "1/2"))
    spec = numeric_prior(prior)
    found = optimal_nonadaptive_unit(prior, 3, fvnum.gaussian(0.0), samples=2000, seed=3)
    W, est = found.design, found.estimate
    within5(est, np.sort(spec.eigenvalues)[: spec.dim - 3].sum())  # the D - B smallest eigenvalues
    np.testing.assert_allclose(np.linalg.norm(W, axis=1), 1.0, atol=1e-12)


# --- Theorem G1, numerically (BFGS over the sequence of rows) against the exact water-filling ---------------
@given(c=st.lists(st.fractions(min_value=0, max_value=4, max_denominator=6), min_size=1, max_size=4),
       budget=st.integers(1, 4), tau=st.sampled_from([sp.Integer(0), sp.Rational(1, 4), sp.Rational(1, 2), sp.Integer(2)]))
def test_deep_equals_shallow(c, budget, tau):
    result = G.numeric_deep_shallow_gap(GaussianPrior(sp.diag(*[sp.Rational(x.numerator, x.denominator) for x in c])), budget, tau, seed=0, n_starts=4)
    shallow = float(result.shallow)
    assert result.deep == pytest.approx(shallow, rel=1e-8, abs=1e-12)


def test_deep_equals_shallow_for_a_correlated_covariance_and_is_seeded():
    C = sp.Matrix([[2, 1, 1], [1, 3, 0], [1, 0, 1]])
    a = G.numeric_deep_shallow_gap(C, 2, sp.Rational(1, 3), seed=7)
    b = G.numeric_deep_shallow_gap(C, 2, sp.Rational(1, 3), seed=7)
    assert a == b
    assert a.deep == pytest.approx(float(a.shallow), rel=1e-8)
    assert G.numeric_deep_shallow_gap(C, 0, 1).deep == pytest.approx(6)


def test_deep_shallow_gap_routes():
    exact = G.numeric_deep_shallow_gap(GaussianPrior.isotropic(2), 2, sp.Rational(1, 2), method="symbolic")
    assert exact.route == "symbolic" and exact.deep == exact.shallow == sp.Rational(2, 5) and exact.gap == 0
    numeric = G.numeric_deep_shallow_gap(GaussianPrior.isotropic(2), 2, sp.Rational(1, 2))
    assert numeric.route == "numeric" and abs(numeric.gap) < 1e-8 and numeric.to_dict()["route"] == "numeric"
    assert G.numeric_deep_shallow_gap(GaussianPrior.isotropic(2), 2, sp.Symbol("tau", positive=True)).route == "symbolic"
    with pytest.raises(ValueError, match="numeric"):
        G.numeric_deep_shallow_gap(GaussianPrior.isotropic(2), 2, sp.Symbol("tau", positive=True), method="numeric")
