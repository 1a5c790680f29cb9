"""Gradient descent in context, the Marchenko-Pastur limit (THEORY.md section 3b): exact identities, the closed
forms against brute-force minimisation, the moments against the density and against random matrices."""
import math

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import quad
from scipy.optimize import minimize

from fvsym import gd
from fvsym import symbols as S
from fvsym.errors import InputError

R = sp.Rational
a = S.ratio
RATIOS = (R(1, 4), R(1, 2), R(1), R(2), R(8))


def _hankel(L):
    """The noiseless per-layer optimum by brute force: ``min q^T H q`` over ``q_0 = 1``, ``H_ij = m_(i+j)``."""
    H = sp.Matrix(L + 1, L + 1, lambda i, j: gd.mp_moment(i + j).expr)
    return sp.factor(1 / H.inv()[0, 0])


# --- exact identities ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("steps", gd.STEPS)
def test_one_layer_is_exactly_one_over_one_plus_a(steps):
    assert sp.simplify(gd.gd_steps_limit(steps).subs(L=1).expr - 1 / (1 + a)) == 0
    loss = gd.gd_steps_loss(1, "shared").expr.subs(S.sigma2, 0)  # 1 - 2 gamma + gamma^2 (1 + 1/a), minimised
    best = sp.solve(sp.diff(loss, S.step), S.step)[0]
    assert sp.simplify(loss.subs(S.step, best) - 1 / (1 + a)) == 0


def test_two_layers_at_a_one_give_one_third_per_layer_and_three_eighths_shared():
    assert gd.gd_steps_limit("per_layer").subs(L=2).exact(a=1) == R(1, 3)
    assert gd.gd_steps_limit("shared").subs(L=2).exact(a=1) == R(3, 8)
    assert sp.simplify(gd.gd_steps_limit("shared").subs(L=2).expr - (1 + 2 * a) / (1 + a) ** 3) == 0
    assert gd.gd_step_sizes("shared").exact(a=1, L=2) == 1  # each layer 1/2
    assert {gd.gd_step_sizes("per_layer").exact(a=1, L=2, l=i) for i in (1, 2)} == {R(1, 3), 1}


@pytest.mark.parametrize("L", [1, 2, 3, 4, 5])
def test_the_per_layer_closed_form_is_the_hankel_minimum(L):
    assert sp.simplify(gd.gd_steps_limit("per_layer").subs(L=L).expr - _hankel(L)) == 0
    assert sp.simplify(gd.gd_steps_noisy_limit(L).subs(sigma2=0).expr - _hankel(L)) == 0


@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_the_shared_step_is_a_stationary_point_of_a_convex_loss(L):
    loss = gd.gd_steps_loss(L, "shared").expr.subs(S.sigma2, 0)
    best = gd.gd_step_sizes("shared").subs(L=L).expr
    assert sp.cancel(sp.diff(loss, S.step).subs(S.step, best)) == 0
    assert sp.cancel(loss.subs(S.step, best) - gd.gd_steps_limit("shared").subs(L=L).expr) == 0
    # convex: the second derivative is int rho lambda^2 (1 - g lambda)^(2L-2) (2L(2L-1)/L^2) > 0; at sample points
    second = sp.diff(loss, S.step, 2)
    for x in RATIOS:
        for g in (R(0), R(1, 2), R(2), R(5)):
            assert second.subs({a: x, S.step: g}) > 0


def test_lambda_rho_is_a_semicircle_about_its_centre():
    """The reason for the shared step: the odd central moments of ``lambda rho_MP`` about ``1 + 1/a`` vanish; the
    even ones are ``Catalan(m) a^-m``, which the shared closed form sums."""
    mu = 1 + 1 / a
    for k in range(1, 8):
        central = sum(sp.binomial(k, i) * (-mu) ** (k - i) * gd.mp_moment(i + 1).expr for i in range(k + 1))
        assert sp.cancel(central - (sp.catalan(k // 2) * a ** -(k // 2) if k % 2 == 0 else 0)) == 0


def test_the_shared_loss_summed_to_infinity_leaves_the_atom():
    n = sp.Symbol("n", integer=True, nonnegative=True)
    for x in (R(1, 3), R(1), R(3)):
        tail = sp.Sum(sp.catalan(n) * x**-n / (1 + 1 / x) ** (2 * n + 1), (n, 0, sp.oo)).doit()
        assert sp.simplify(1 - tail - max(0, 1 - x)) == 0


@pytest.mark.parametrize("L", [2, 3, 4])
def test_the_per_layer_steps_attain_the_per_layer_limit(L):
    loss = gd.gd_steps_loss(L, "per_layer")
    sizes = gd.gd_step_sizes("per_layer")
    for x in (0.3, 1.0, 2.5):
        gammas = [float(sizes(a=x, L=L, l=i)) for i in range(1, L + 1)]
        assert loss(x, *gammas, 0.0) == pytest.approx(float(gd.gd_steps_limit("per_layer")(a=x, L=L)), rel=1e-12)


# --- the numeric views and brute-force minimisation -------------------------------------------------------------
@pytest.mark.parametrize("steps", gd.STEPS)
def test_the_numeric_view_equals_the_exact_value(steps):
    f = gd.gd_steps_limit(steps)
    for L in (1, 2, 3, 6):
        exact = f.subs(L=L)
        for x in RATIOS:
            # the shared form subtracts from 1: its error is ~1e-16 absolute, ~1e-16 / loss relative
            assert f(a=float(x), L=L) == pytest.approx(float(exact.exact(a=x)), rel=1e-12, abs=1e-14)
        fixed = f.subs(L=L)  # the numba view needs L fixed (a Sum to a symbolic bound does not compile)
        assert fixed.numba(1.5) == pytest.approx(f(a=1.5, L=L), rel=1e-12, abs=1e-14)
    values = f(a=np.array([0.5, 1.0, 2.0]), L=3)
    assert np.allclose(values, [float(f.subs(L=3).exact(a=x)) for x in (R(1, 2), 1, 2)], rtol=1e-12)


@pytest.mark.parametrize("L", [2, 3])
def test_numerical_minimisation_finds_the_closed_forms(L):
    for steps in gd.STEPS:
        f = gd.gd_steps_loss(L, steps)
        loss = sp.lambdify(f.params, f.expr)  # unchecked, for the optimiser's many calls
        for x in (0.5, 1.0, 3.0):
            n = 1 if steps == "shared" else L
            start = np.linspace(0.4, 1.2, n) * (L if steps == "shared" else 1)
            found = minimize(lambda g: loss(x, *g, 0.0), start, method="BFGS", options={"gtol": 1e-10})
            assert found.fun == pytest.approx(float(gd.gd_steps_limit(steps)(a=x, L=L)), rel=1e-9)


def test_with_label_noise_one_layer_and_the_exact_optimum():
    assert sp.simplify(gd.gd_steps_noisy_limit(1, "shared").expr - (1 + S.sigma2) / (1 + S.sigma2 + a)) == 0
    assert sp.simplify(gd.gd_steps_noisy_limit(1).expr - gd.gd_steps_noisy_limit(1, "shared").expr) == 0
    for L in (2, 3):
        per = gd.gd_steps_optimum(1, L, "per_layer", sigma2="1/10")
        shared = gd.gd_steps_optimum(1, L, "shared", sigma2="1/10")
        assert float(per.loss) == pytest.approx(float(gd.gd_steps_noisy_limit(L).exact(a=1, sigma2=R(1, 10))),
                                                rel=1e-12)
        loss = gd.gd_steps_loss(L, "per_layer")
        assert loss(1.0, *[float(s) for s in per.steps], 0.1) == pytest.approx(float(per.loss), rel=1e-10)
        assert float(gd.gd_steps_loss(L, "shared")(1.0, float(shared.steps[0]), 0.1)) == \
            pytest.approx(float(shared.loss), rel=1e-12)
        assert float(per.loss) <= float(shared.loss) + 1e-15
        assert float(per.loss) > float(gd.gd_steps_limit("per_layer")(a=1, L=L))  # noise costs
    with pytest.raises(InputError, match="no closed form at L = 2"):
        gd.gd_steps_noisy_limit(2, "shared")


# --- depth ------------------------------------------------------------------------------------------------------
def test_one_more_layer_never_hurts_and_a_step_per_layer_beats_a_shared_one():
    grid = np.geomspace(0.05, 50, 41)
    for steps in gd.STEPS:
        f = gd.gd_steps_limit(steps)
        rows = np.array([f(a=grid, L=L) for L in range(1, 9)])
        assert np.all(np.diff(rows, axis=0) <= 1e-15)
    per, shared = gd.gd_steps_limit("per_layer"), gd.gd_steps_limit("shared")
    for L in range(1, 9):
        assert np.all(per(a=grid, L=L) <= shared(a=grid, L=L) + 1e-15)
        if L > 1:
            assert np.all(per(a=grid, L=L) < shared(a=grid, L=L))


@pytest.mark.parametrize("steps", gd.STEPS)
def test_depths_advantage_vanishes_as_a_grows(steps):
    f = gd.gd_steps_limit(steps)
    gain = sp.simplify(f.subs(L=1).expr - f.subs(L=4).expr)
    assert sp.limit(gain, a, sp.oo) == 0
    grid = np.geomspace(2, 1e4, 30)
    values = sp.lambdify(a, gain)(grid)
    assert np.all(values > 0) and np.all(np.diff(values) < 0)
    # the ratio does not: L = 4 falls like a^-4 (per layer) or Catalan(4) a^-4 (shared), L = 1 like 1/a
    assert sp.limit(f.subs(L=4).expr * a**4, a, sp.oo) == (1 if steps == "per_layer" else 14)


# --- the Marchenko-Pastur law -------------------------------------------------------------------------------------
@pytest.mark.parametrize("x", [0.25, 0.5, 1.0, 2.0, 5.0])
def test_the_moments_are_those_of_the_density_and_its_atom(x):
    density, atom = sp.lambdify((a, S.eigenvalue), gd.mp_density().expr), gd.mp_atom()
    lo, hi = (1 - 1 / math.sqrt(x)) ** 2, (1 + 1 / math.sqrt(x)) ** 2
    for k in range(6):
        bulk = quad(lambda lam: lam**k * float(density(x, lam)), max(lo, 1e-300), hi, limit=200, epsabs=1e-13)[0]
        assert bulk + (float(atom(x)) if k == 0 else 0.0) == pytest.approx(float(gd.mp_moment(k)(x)), rel=1e-8)


def test_the_moments_match_random_matrices():
    """``X`` (N x D) standard normal, ``W = X^T X``: ``E tr W^2 = N D (N + D + 1)``, ``E tr W^3 = N D (N^2 + D^2 +
    3 N D + 3 N + 3 D + 4)`` exactly, whose leading orders at ``N = a D`` are the Narayana moments; Monte Carlo
    within 5 standard errors of the exact finite sizes, on both sides of ``a = 1``."""
    N_, D_ = sp.symbols("N D", positive=True)
    exact = {1: N_ * D_, 2: N_ * D_ * (N_ + D_ + 1),
             3: N_ * D_ * (N_**2 + D_**2 + 3 * N_ * D_ + 3 * N_ + 3 * D_ + 4)}
    for k, e in exact.items():
        leading = sp.limit((e / (N_**k * D_)).subs(N_, a * D_), D_, sp.oo)
        assert sp.simplify(leading - gd.mp_moment(k).expr) == 0
    rng = np.random.default_rng(58)
    for N, D in ((12, 24), (40, 20)):
        X = rng.standard_normal((4000, N, D))
        eig = np.linalg.eigvalsh(np.swapaxes(X, 1, 2) @ X)  # (samples, D)
        for k, e in exact.items():
            values = (eig**k).sum(1)
            mean, se = values.mean(), values.std(ddof=1) / math.sqrt(values.size)
            assert abs(mean - float(e.subs({N_: N, D_: D}))) < 5 * se, (N, D, k)


# --- refusals ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, words", [
    (lambda: gd.gd_steps_limit("tied"), "unknown steps 'tied'; choose one of shared, per_layer"),
    (lambda: gd.gd_steps_limit("shared")(a=0, L=2), "a must lie in"),
    (lambda: gd.gd_steps_limit("shared")(a=1, L=0), "L must lie in"),
    (lambda: gd.gd_steps_optimum(-1, 2), r"a \(N/D\) must be a number in \(0, oo\)"),
    (lambda: gd.gd_steps_optimum(1, 0), r"layers \(L\) must be >= 1"),
    (lambda: gd.gd_steps_optimum(1, 2, sigma2=-1), "sigma2 must be a number >= 0"),
    (lambda: gd.gd_step_sizes("per_layer")(a=1, L=2, l=3), "needs l <= L"),
])
def test_refusals_are_one_line_and_name_the_value(call, words):
    with pytest.raises(ValueError, match=words) as info:
        call()
    assert "\n" not in str(info.value)
