"""Residual values and the row ``gd_steps`` (THEORY.md section 3b): the Krylov form against gradient descent run
literally, the readings' law, the exact one-layer loss at finite N, the approach to the Marchenko-Pastur limit."""
import math

import numpy as np
import pytest

import fvnum
from fvsym import GaussianPrior, TreePrior
from fvsym import gd as limit
from fvnum.keys.families import LinearKeys
from fvnum.mc._reference import gd_errors
from fvnum.values.families import VALUES, value_family
from fvnum.values.gd import (_bartlett, bartlett_gram_matrices, coefficients, gd_steps, gram_matrices,
                             preconditioner_of)
from fvsym.errors import InputError


def _contexts(prior_thetas, N, s2, rng):
    n, D = prior_thetas.shape
    X = rng.standard_normal((n, N, D))
    return X, np.einsum("nid,nd->ni", X, prior_thetas) + math.sqrt(s2) * rng.standard_normal((n, N))


# --- the Krylov form is gradient descent ------------------------------------------------------------------------
@pytest.mark.parametrize("kind, steps", [("per_layer", (0.3, 1.1, 0.7)), ("shared", (2.1,))])
def test_the_gram_form_equals_gradient_descent_run_literally(kind, steps):
    rng = np.random.default_rng(0)
    thetas = rng.standard_normal((50, 7))  # any latents
    X, y = _contexts(thetas, 11, 0.3, rng)
    L = 3
    gammas = steps if kind == "per_layer" else (steps[0] / L,) * L
    literal = (gd_errors(thetas, X, y, gammas)[:, L] ** 2).sum(1)
    q = coefficients(steps, L, kind)
    assert np.allclose(np.einsum("j,njk,k->n", q, gram_matrices(thetas, X, y, L), q), literal, rtol=1e-10)


def test_the_preconditioned_gram_form_equals_preconditioned_descent_run_literally():
    rng = np.random.default_rng(5)
    thetas = rng.standard_normal((40, 6))
    X, y = _contexts(thetas, 9, 0.2, rng)
    B = rng.standard_normal((6, 6))
    P = B @ B.T / 6  # any symmetric positive definite preconditioner
    steps = (0.4, 0.9, 0.2)
    literal = (gd_errors(thetas, X, y, steps, P=P)[:, 3] ** 2).sum(1)
    q = coefficients(steps, 3, "per_layer")
    assert np.allclose(np.einsum("j,njk,k->n", q, gram_matrices(thetas, X, y, 3, P), q), literal, rtol=1e-10)
    # Bartlett's form with the same X^T X and X^T eps: the same Gram matrices
    A = np.linalg.cholesky(np.einsum("nid,nie->nde", X, X))
    eps = y - np.einsum("nid,nd->ni", X, thetas)
    xi = np.linalg.solve(A, np.einsum("nid,ni->nd", X, eps)[..., None])[..., 0] / math.sqrt(0.2)
    assert np.allclose(bartlett_gram_matrices(thetas, A, xi, 9, 0.2, 3, P), gram_matrices(thetas, X, y, 3, P),
                       rtol=1e-9)


def test_the_prior_preconditioner_is_the_identity_on_an_isotropic_prior_and_helps_on_the_tree():
    iso = GaussianPrior.isotropic(8)
    tree = TreePrior(4, "0.5")
    kw = dict(steps="per_layer", samples=2000, select_samples=500, seed=3)
    N12 = fvnum.tokens(12, s2=0.01)
    assert gd_steps(iso, 2, N12, preconditioner="prior", **kw).value == gd_steps(iso, 2, N12, **kw).value
    plain, pre = gd_steps(tree, 2, N12, **kw), gd_steps(tree, 2, N12, preconditioner="prior", **kw)
    assert pre.value + 5 * math.hypot(pre.stderr, plain.stderr) < plain.value  # levels of variance alpha^k: it helps
    assert "preconditioned (prior)" in pre.how
    same = gd_steps(tree, 2, N12, preconditioner=preconditioner_of(fvnum_spec(tree), "prior"), **kw)
    assert same.value == pre.value  # the matrix given is the same row


def fvnum_spec(prior):
    from fvnum.priors.tree import numeric_prior
    return numeric_prior(prior)


@pytest.mark.parametrize("bad", ["diagonal", np.ones((3, 3)), -np.eye(15), np.full((15, 15), np.nan)])
def test_a_bad_preconditioner_is_refused_in_one_line(bad):
    with pytest.raises(InputError, match="preconditioner"):
        gd_steps(TreePrior(4, "0.5"), 1, fvnum.tokens(8), preconditioner=bad, samples=10, select_samples=10)


def test_a_layer_of_residual_readings_is_a_gradient_step():
    rng = np.random.default_rng(1)
    thetas, hats = rng.standard_normal((20, 5)), rng.standard_normal((20, 5))
    X, y = _contexts(thetas, 9, 0.1, rng)
    keys = LinearKeys(np.eye(5))
    phi = value_family("residual").readings(keys, X, y, hats)
    assert np.allclose(phi, np.einsum("ni,nid->nd", y - np.einsum("nid,nd->ni", X, hats), X) / 9)
    assert np.allclose(value_family("label").readings(keys, X, y), value_family("residual").readings(keys, X, y))
    assert VALUES == ("label", "residual") and fvnum.value_family().name == "label"  # labels stay the default


def test_residual_readings_follow_the_law_of_the_error():
    """A fixed estimate ``theta_hat``: mean ``W e`` and covariance ``((|e|^2 + s2) W W^T + W e e^T W^T) / N``, ``e =
    theta - theta_hat``; Monte Carlo within 5 standard errors from the same samples."""
    rng = np.random.default_rng(2)
    theta, hat, N, s2 = np.array([1.0, -0.5, 0.25]), np.array([0.6, 0.1, 0.0]), 16, 0.2
    W = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])
    law = value_family("residual").law(LinearKeys(W), theta[None], hat[None], n_tokens=N, s2=s2)
    n = 40_000
    X, y = _contexts(np.tile(theta, (n, 1)), N, s2, rng)
    phi = value_family("residual").readings(LinearKeys(W), X, y, np.tile(hat, (n, 1)))
    mean_se = phi.std(0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(phi.mean(0) - law.mean[0]) < 5 * mean_se)
    centred = phi - law.mean[0]
    for i, j in ((0, 0), (1, 1), (0, 1)):
        prod = centred[:, i] * centred[:, j]
        assert abs(prod.mean() - law.cov[0, i, j]) < 5 * prod.std(ddof=1) / math.sqrt(n), (i, j)
    label = value_family("label").law(LinearKeys(W), (theta - hat)[None], n_tokens=N, s2=s2)
    assert np.allclose(label.cov, law.cov) and np.allclose(label.mean, law.mean)  # the error is a latent


# --- exact at finite N, on every prior ----------------------------------------------------------------------------
@pytest.mark.parametrize("prior", [GaussianPrior.isotropic(12), TreePrior(3, "1/2"),
                                   fvnum.AtomsPrior(np.random.default_rng(3).standard_normal((5, 6)))],
                         ids=["gaussian", "tree", "atoms"])
def test_one_layer_at_finite_n_is_exact_for_any_prior(prior):
    """``E||theta - theta_hat||^2 = E||theta||^2 (1 - 2 gamma + gamma^2 (1 + (D + 1)/N)) + s2 gamma^2 D / N`` for one
    step ``gamma`` (``E tr S^2 / D = 1 + (D + 1)/N``): the prior enters through ``E||theta||^2`` only."""
    N, s2, gamma = 10, 0.3, 0.45
    est = gd_steps(prior, 1, fvnum.tokens(N, s2=s2), steps=(gamma,), samples=20_000, seed=4)
    D, m2 = _dim(prior), est.second_moment
    exact = m2 * (1 - 2 * gamma + gamma**2 * (1 + (D + 1) / N)) + s2 * gamma**2 * D / N
    assert abs(est.z(exact)) < 5, (est, exact)


def _dim(prior):
    from fvnum.priors.tree import numeric_prior

    return numeric_prior(prior).dim


# --- the limit ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("steps", ["shared", "per_layer"])
def test_finite_n_approaches_the_limit_as_d_grows(steps):
    """a = 1, L = 2, noiseless: the gap to the limit falls over D = 8, 32, 128, like 1/D: with ``C`` the gap times
    ``D`` at D = 32, the largest D is within 5 standard errors of ``limit + C / D``."""
    lim = float(limit.gd_steps_limit(steps)(a=1, L=2))
    gaps, ses = [], []
    for D, n in ((8, 16_000), (32, 4000), (128, 1000)):
        est = gd_steps(GaussianPrior.isotropic(D), 2, fvnum.tokens(D, s2=0.0), steps=steps, samples=n, select_samples=1000,
                       seed=5).relative
        gaps.append(est.value - lim)
        ses.append(est.stderr)
    assert gaps[0] > gaps[1] > gaps[2] > -5 * ses[2], gaps
    assert gaps[0] - gaps[1] > 5 * math.hypot(ses[0], ses[1])
    C = gaps[1] * 32
    assert abs(gaps[2] - C / 128) < 5 * math.hypot(ses[2], ses[1] / 4), (gaps, C)


def test_one_more_layer_never_hurts_and_per_layer_steps_beat_a_shared_one():
    prior, N = GaussianPrior.isotropic(16), 16
    rows = {kind: [gd_steps(prior, L, fvnum.tokens(N), steps=kind, samples=2000, select_samples=1000, seed=6) for L in (1, 2, 3, 4)]
            for kind in ("shared", "per_layer")}
    for kind, row in rows.items():
        for shallow, deep in zip(row, row[1:]):
            assert deep.value < shallow.value + 5 * max(deep.stderr, shallow.stderr), kind
    for shared, per in zip(rows["shared"], rows["per_layer"]):
        assert per.value <= shared.value + 5 * max(per.stderr, shared.stderr)
    assert rows["per_layer"][3].value < rows["shared"][3].value - 5 * rows["shared"][3].stderr


def test_depths_advantage_vanishes_as_a_grows():
    D = 16
    gain = []
    for a in (1, 4, 16):
        one, four = (gd_steps(GaussianPrior.isotropic(D), L, fvnum.tokens(a * D), steps="per_layer", samples=1000,
                              select_samples=500, seed=7).relative for L in (1, 4))
        gain.append((one.value - four.value, math.hypot(one.stderr, four.stderr)))
    for (g0, s0), (g1, s1) in zip(gain, gain[1:]):
        assert g0 - g1 > 5 * math.hypot(s0, s1), gain
    lim = [float(limit.gd_steps_limit("per_layer")(a=a, L=1) - limit.gd_steps_limit("per_layer")(a=a, L=4))
           for a in (1, 4, 16)]
    assert lim[0] > lim[1] > lim[2]


def test_same_seed_same_numbers_and_the_steps_are_reported():
    prior = TreePrior(3, "1/2")
    one = gd_steps(prior, 2, fvnum.tokens(20), steps="per_layer", samples=500, seed=8)
    assert one == gd_steps(prior, 2, fvnum.tokens(20), steps="per_layer", samples=500, seed=8)
    assert one == gd_steps(prior, 2, fvnum.tokens(20, keys=None), steps="per_layer", samples=500, seed=8)  # keys: no part
    assert len(one.steps) == 2 and "SELECT" in one.how and one.to_dict()["steps"] == list(one.steps)
    assert isinstance(one, fvnum.Estimate) and fvnum.gd_steps is gd_steps


@pytest.mark.parametrize("call, words", [
    (lambda: gd_steps(TreePrior(3, "1/2"), 0, fvnum.tokens(10)), r"layers \(L\) must be >= 1"),
    (lambda: gd_steps(TreePrior(3, "1/2"), 2, fvnum.tokens(10), steps="tied"), "unknown steps 'tied'"),
    (lambda: gd_steps(TreePrior(3, "1/2"), 2, fvnum.tokens(10), steps=(0.1,)), "one number a layer, 2, got 1"),
    (lambda: gd_steps(TreePrior(3, "1/2"), 2, None), "channel must be a channel"),
    (lambda: gd_steps(TreePrior(3, "1/2"), 2, 10), "channel must be a channel, .* got 10"),
    (lambda: gd_steps(TreePrior(3, "1/2"), 2, fvnum.gaussian(0.3)), "gd_steps reads tokens: .* not the gaussian"),
    (lambda: gd_steps(TreePrior(3, "1/2"), 2, fvnum.tokens(0)), "tokens N must be >= 1"),
    (lambda: gd_steps(TreePrior(3, "1/2"), 2, fvnum.tokens(10), samples=1), "samples must be >= 2"),
    (lambda: gd_steps(TreePrior(3, "1/2"), 2, fvnum.tokens(10), seed=-1), "seed must be an integer >= 0"),
    (lambda: fvnum.value_family("token"), "unknown values 'token'; choose one of label, residual"),
])
def test_refusals_are_one_line_and_name_the_value(call, words):
    with pytest.raises(ValueError, match=words) as info:
        call()
    assert "\n" not in str(info.value)


def test_under_strong_label_noise_the_per_layer_steps_stay_real_and_never_lose_to_a_shared_one():
    """With label noise the best polynomial may have complex zeros (fvsym.gd); the per-layer search then runs over
    real steps, from the shared optimum among other starts."""
    from fvnum.priors.tree import numeric_prior
    from fvnum.values.gd import _grams, best_steps

    for s2 in (1.0, 10.0):
        G = _grams(numeric_prior(GaussianPrior.isotropic(8)), 4, 4, s2, 400, 9, 2).mean(0)
        per, shared = best_steps(G, 4, "per_layer"), best_steps(G, 4, "shared")
        q_per, q_shared = coefficients(per, 4, "per_layer"), coefficients(shared, 4, "shared")
        assert all(isinstance(g, float) for g in per)
        assert q_per @ G @ q_per <= q_shared @ G @ q_shared * (1 + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("steps", ["shared", "per_layer"])
def test_the_gap_to_the_limit_falls_like_one_over_d(steps):
    """a = 1, L = 2, noiseless, D = 8 .. 128: the weighted least-squares slope of log(gap) on log(D) is -1 within 5
    of its standard errors (each gap's standard error from its own samples, propagated to the log)."""
    lim = float(limit.gd_steps_limit(steps)(a=1, L=2))
    dims = np.array([8, 16, 32, 64, 128])
    gaps, ses = [], []
    for D in dims:
        est = gd_steps(GaussianPrior.isotropic(int(D)), 2, fvnum.tokens(int(D), s2=0.0), steps=steps, samples=30_000,
                       select_samples=4000, seed=10).relative
        gaps.append(est.value - lim)
        ses.append(est.stderr)
    gaps, ses = np.array(gaps), np.array(ses)
    assert np.all(gaps > 5 * ses), (gaps, ses)
    x, y, w = np.log(dims), np.log(gaps), (gaps / ses) ** 2  # var(log gap) ~ (se / gap)^2
    X = np.stack([np.ones_like(x), x], 1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    slope = (cov @ X.T @ (w * y))[1]
    assert abs(slope + 1) < 5 * math.sqrt(cov[1, 1]), (slope, math.sqrt(cov[1, 1]), gaps)


def test_drawing_x_transpose_x_by_its_bartlett_factor_has_the_law_of_the_tokens():
    """Where ``N >= D`` the contexts are drawn through ``X^T X`` and ``X^T eps``: every entry of the Gram matrix has the
    same mean as with the tokens drawn, within 5 standard errors of the difference (independent streams)."""
    from fvnum.priors.tree import numeric_prior
    from fvnum.values.gd import _grams

    spec = numeric_prior(TreePrior(3, "1/2"))
    n = 20_000
    drawn = {tokens: _grams(spec, 3, 12, 0.5, n, 11, 0, tokens=tokens).reshape(n, -1) for tokens in (True, False)}
    diff = drawn[True].mean(0) - drawn[False].mean(0)
    se = np.hypot(drawn[True].std(0, ddof=1), drawn[False].std(0, ddof=1)) / math.sqrt(n)
    fixed = se == 0  # |theta|^2 is the same for every leaf
    assert np.allclose(diff[fixed], 0) and fixed.sum() == 1
    assert np.all(np.abs(diff[~fixed]) < 5 * se[~fixed]), diff[~fixed] / se[~fixed]
