"""Gaussian prior (THEORY.md section 5): exact identities, water-filling against brute force,
Theorem G1 (deep = shallow)."""
from fractions import Fraction
from itertools import product

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize

from fvsym import GaussianPrior, TreePrior
from fvsym import symbols as S
from fvsym.gaussian import (
    design_loss,
    gaussian_loss,
    isotropic_loss,
    optimal_design,
    posterior_covariance,
    water_filling,
)

R = sp.Rational
rationals = st.fractions(min_value=0, max_value=4, max_denominator=6).map(lambda f: R(f.numerator, f.denominator))
spectra = st.lists(rationals, min_size=1, max_size=4)
positive_tau = st.fractions(min_value=Fraction(1, 4), max_value=2, max_denominator=4).map(
    lambda f: R(f.numerator, f.denominator)
)
taus = st.one_of(st.just(R(0)), positive_tau)


def objective(c, s, tau):
    """The water-filling objective of THEORY.md section 5 at weights ``s`` (tau = 0 as its limit)."""
    if tau == 0:
        return sum((ci for ci, si in zip(c, s) if si == 0), R(0))
    return sum((ci / (1 + si * ci / tau**2) for ci, si in zip(c, s)), R(0))


# --- posterior covariance and loss of a design --------------------------------------------
small_ints = st.integers(-3, 3)


@given(
    a=st.lists(small_ints, min_size=4, max_size=4),
    w=st.lists(small_ints, min_size=6, max_size=6).filter(lambda v: any(v[:2]) and any(v[2:4]) and any(v[4:])),
    tau=positive_tau,
)
def test_posterior_covariance_equals_information_form(a, w, tau):
    A = sp.Matrix(2, 2, a)
    C = A * A.T + sp.eye(2)  # invertible
    W = sp.Matrix(3, 2, w)
    P = posterior_covariance(C, W, tau)
    assert P == (C.inv() + W.T * W / tau**2).inv()
    assert design_loss(C, W, tau) == P.trace()


def test_posterior_covariance_singular_cov_and_noiseless_limit():
    v = sp.Matrix([1, 2, -1])
    C = v * v.T + sp.diag(1, 0, 0)  # rank 2
    W = sp.Matrix([[1, 1, 0], [0, 1, 1], [1, 2, 1]])  # rank 2 (third row = sum)
    P_tau = posterior_covariance(C, W, S.tau)
    P0 = posterior_covariance(C, W, 0)
    assert P0 == P_tau.applyfunc(lambda x: sp.limit(x, S.tau, 0, "+"))
    assert (W * P0 * W.T).is_zero_matrix  # noiseless readings are known exactly
    assert all(ev >= 0 for ev in P0.eigenvals(multiple=True))


def test_noiseless_reading_of_an_eigen_direction_removes_its_variance():
    C = sp.diag(3, 2, R(1, 2))
    P = posterior_covariance(C, [[0, 1, 0]], 0)
    assert P == sp.diag(3, 0, R(1, 2))
    assert design_loss(GaussianPrior(C), sp.zeros(0, 3), R(1, 3)) == R(11, 2)


def test_design_loss_is_the_lmmse_loss_of_a_tree_prior():
    """tr P is the loss of the best linear decoder for any prior with covariance C (here: a tree,
    averaged exactly over its 2^K atoms and the Gaussian channel noise)."""
    tree = TreePrior(2, "1/2")
    W = sp.Matrix([[1, 0, 0], [0, R(3, 5), R(4, 5)]])
    tau = R(1, 2)
    C = tree.covariance
    K = C * W.T * (W * C * W.T + tau**2 * sp.eye(2)).inv()  # linear decoder theta_hat = K phi
    atoms = [tree.theta_vector(s) for s in tree.leaves()]
    err = sum(((K * W - sp.eye(3)) * th).norm() ** 2 for th in atoms) / len(atoms) + tau**2 * (K * K.T).trace()
    assert sp.simplify(design_loss(tree, W, tau) - err) == 0


# --- isotropic closed forms ----------------------------------------------------------------
def test_isotropic_loss_equals_theory_expressions():
    f = isotropic_loss()
    D, B, tau = S.dim, S.budget, S.tau
    (few, few_cond), (many, many_cond) = f.expr.args
    assert few_cond == (B <= D) and many_cond == sp.true
    assert sp.simplify(few - (D - B / (1 + tau**2))) == 0
    assert sp.simplify(many - D / (1 + B / (D * tau**2))) == 0
    assert f.params == (D, B, tau)


@pytest.mark.parametrize("dim, budget", [(1, 1), (3, 1), (3, 3), (4, 2), (2, 5), (3, 7), (5, 0)])
@pytest.mark.parametrize("tau", [R(0), R(1, 3), R(2)])
def test_isotropic_loss_equals_water_filling(dim, budget, tau):
    expected = water_filling([1] * dim, budget, tau).loss
    assert isotropic_loss().exact(D=dim, B=budget, tau=tau) == expected
    assert gaussian_loss(dim, budget, tau).expr == expected


def test_isotropic_noiseless_is_the_unmeasured_dimension():
    f = isotropic_loss()
    assert sp.simplify(f.expr.subs(S.tau, 0) - sp.Piecewise((S.dim - S.budget, S.budget <= S.dim), (0, True))) == 0


# --- water-filling ---------------------------------------------------------------------------
@given(c=spectra, budget=st.integers(0, 6), tau=taus)
def test_water_filling_weights_are_feasible_and_attain_the_loss(c, budget, tau):
    wf = water_filling(c, budget, tau)
    s = wf.weights
    assert all(si >= 0 for si in s)
    assert sum(s) == budget
    assert sum(1 for si in s if si != 0) <= budget
    assert objective(c, s, tau) == wf.loss


@given(c=spectra, budget=st.integers(0, 6))
def test_noiseless_water_filling_is_sum_of_smallest(c, budget):
    smallest = sorted(c)[: max(len(c) - budget, 0)]
    assert water_filling(c, budget, 0).loss == sum(smallest, R(0))


@given(c=spectra, budget=st.integers(0, 5), tau=taus)
def test_loss_is_bounded_and_non_increasing_in_budget(c, budget, tau):
    now, more = water_filling(c, budget, tau).loss, water_filling(c, budget + 1, tau).loss
    assert 0 <= more <= now <= sum(c)
    if budget == 0:
        assert now == sum(c)


def _brute_force_loss(c, budget, tau, seed, n_starts=4):
    """min over B x D unit-row designs of tr P (batch formula), for C = Q diag(c) Q^T, by BFGS.

    With ``G = (W C W^T + tau^2 I)^-1`` and ``A = W C^2 W^T``: ``tr P = tr C - tr(G A)`` and
    ``d tr P / dW = 2 G (A G W C - W C^2)``, chained through the row normalisation."""
    rng = np.random.default_rng(seed)
    D = len(c)
    Q, _ = np.linalg.qr(rng.standard_normal((D, D)))
    C = Q @ np.diag(np.array(c, dtype=float)) @ Q.T
    t2 = float(tau) ** 2

    def loss_and_grad(x):
        V = x.reshape(budget, D)
        norms = np.linalg.norm(V, axis=1, keepdims=True)
        W = V / norms
        WC = W @ C
        G = np.linalg.inv(WC @ W.T + t2 * np.eye(budget))
        A = WC @ WC.T
        g_w = 2 * G @ (A @ G @ WC - WC @ C)
        g_v = (g_w - np.sum(g_w * W, axis=1, keepdims=True) * W) / norms
        return np.trace(C) - np.trace(G @ A), g_v.ravel()

    starts = [rng.standard_normal(budget * D) for _ in range(n_starts)]
    return min(
        minimize(loss_and_grad, x0, jac=True, method="BFGS", options={"gtol": 1e-11}).fun for x0 in starts
    )


@given(c=spectra, budget=st.integers(1, 4), tau=positive_tau, seed=st.integers(0, 2**16))
def test_water_filling_equals_brute_force_optimisation(c, budget, tau, seed):
    exact = float(water_filling(c, budget, tau).loss)
    brute = _brute_force_loss(c, budget, tau, seed)
    assert brute >= exact - 1e-9 * (1 + exact)  # nothing beats the optimum
    assert brute == pytest.approx(exact, rel=1e-6, abs=1e-9)  # and numerical search finds it


def test_symbolic_tau_gives_piecewise_that_agrees_with_numbers():
    c = [3, 1, R(1, 2), R(1, 5)]
    sym = water_filling(c, 3, S.tau)
    assert isinstance(sym.loss, sp.Piecewise)
    for tau in [R(0), R(1, 4), R(1), R(3, 2), R(3), R(10)]:
        num = water_filling(c, 3, tau)
        assert sym.loss.subs(S.tau, tau) == num.loss
        assert tuple(w.subs(S.tau, tau) for w in sym.weights) == num.weights


def test_water_filling_order_and_zero_eigenvalues():
    c = [R(1, 2), 0, 3, 1]
    wf = water_filling(c, 2, 1)
    assert wf.weights[1] == 0 and wf.weights[0] == 0  # weight sits on the two largest
    assert wf.weights[2] > wf.weights[3] > 0
    assert water_filling([0, 0], 3, 1).loss == 0
    assert water_filling([0, 2], 3, 1).weights == (0, 3)  # all the budget on the only nonzero direction


# --- optimal design ------------------------------------------------------------------------
DESIGN_CASES = [
    (sp.diag(3, 1, R(1, 2)), 2, R(1)),  # fractional weights 4/3, 2/3
    (sp.diag(3, 1, R(1, 2)), 5, R(1)),  # B > D
    (sp.diag(1, 1, 1), 2, R(0)),  # isotropic noiseless
    (sp.Matrix([[2, 1], [1, 2]]), 3, R(1, 2)),  # non-diagonal C, B > D
    (sp.Matrix([[2, 1, 0], [1, 2, 0], [0, 0, 1]]), 2, R(1, 3)),
    (TreePrior(2, "1/2"), 3, R(1, 3)),  # matched Gaussian of a tree
]


@pytest.mark.parametrize("prior, budget, tau", DESIGN_CASES)
def test_optimal_design_attains_water_filling(prior, budget, tau):
    gauss = GaussianPrior.matched(prior) if isinstance(prior, TreePrior) else GaussianPrior(prior)
    W = optimal_design(gauss, budget, tau)
    assert W.shape == (budget, gauss.dim)
    for r in range(budget):
        assert sp.simplify((W[r, :] * W[r, :].T)[0] - 1) == 0  # unit rows
    assert sp.simplify(design_loss(gauss, W, tau) - water_filling(gauss.eigenvalues, budget, tau).loss) == 0


def test_optimal_design_of_zero_budget_is_empty():
    assert optimal_design(GaussianPrior.isotropic(3), 0, 1).shape == (0, 3)


# --- Theorem G1 ----------------------------------------------------------------------------
# --- gaussian_loss (the API behind `fv derive gaussian-loss`) --------------------------------
def test_gaussian_loss_tree_equals_design_loss_of_optimal_design():
    tree = TreePrior(2, "1/2")
    for budget, tau in product([1, 2, 4], [R(0), R(1, 2)]):
        f = gaussian_loss(None, budget, tau, cov="matched", depth=2, alpha="1/2")
        assert f.params == ()
        W = optimal_design(tree, budget, tau)
        assert sp.simplify(f.expr - design_loss(tree, W, tau)) == 0


def test_gaussian_loss_symbolic_alpha_and_tau_agree_with_numbers():
    f = gaussian_loss(7, 3, cov="matched", depth=3)
    assert set(f.params) == {S.alpha, S.tau}
    for alpha, tau in product([R(1, 2), R(9, 10)], [R(0), R(1, 3), R(2)]):
        assert f.exact(alpha=alpha, tau=tau) == gaussian_loss(7, 3, tau, cov="matched", depth=3, alpha=alpha).expr


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dim=5, budget=-1), "budget must be >= 0"),
        (dict(dim=5, budget=2, tau="-1/2"), "tau must be >= 0"),
        (dict(dim=0, budget=2), "dim must be >= 1"),
        (dict(dim=None, budget=2), "needs dim"),
        (dict(dim=5, budget=2, cov="wishart"), "unknown cov 'wishart'"),
        (dict(dim=5, budget=2, alpha="1/2"), "only to cov 'matched'"),
        (dict(dim=None, budget=2, cov="tree", depth=3), "unknown cov 'tree'; choose one of matched, isotropic"),
        (dict(dim=6, budget=2, cov="matched", depth=3), "2\\^depth - 1 = 7"),
        (dict(dim=None, budget=2, cov="matched"), "needs depth"),
        (dict(dim=None, budget=2, cov="matched", depth=3, alpha="3/2"), "alpha must lie in"),
    ],
)
def test_gaussian_loss_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gaussian_loss(**kwargs)


def test_bad_input_elsewhere():
    with pytest.raises(ValueError, match="eigenvalues must be >= 0, got -1"):
        water_filling([1, -1], 1, 1)
    with pytest.raises(ValueError, match="not PSD"):
        design_loss([[1, 2], [2, 1]], [[1, 0]], 1)
    with pytest.raises(ValueError, match="3 columns"):
        posterior_covariance(sp.eye(3), [[1, 0]], 1)
    with pytest.raises(ValueError, match="tau must be >= 0"):
        posterior_covariance(sp.eye(2), [[1, 0]], -1)
    with pytest.raises(ValueError, match="numeric tau"):
        optimal_design(GaussianPrior.isotropic(2), 1, S.tau)


# --- Theorem G1 symbolically ---------------------------------------------------------------------
def test_g1_identity_with_symbolic_tau_eigenvalues_and_rows():
    from fvsym.gaussian import g1_identity, sequential_posterior, stacked_posterior

    c1, c2 = sp.symbols("c1 c2", positive=True)
    assert g1_identity(sp.diag(c1, c2)) == sp.zeros(2, 2)  # 2 generic rows, symbolic tau and eigenvalues
    assert g1_identity(sp.Matrix([[2, 1], [1, 3]]), 2) == sp.zeros(2, 2)  # a correlated covariance
    W = sp.Matrix([[1, 0], [R(3, 5), R(4, 5)]])
    seq = sequential_posterior(sp.diag(c1, c2), W, S.tau)
    assert sp.simplify(seq - posterior_covariance(sp.diag(c1, c2), W, S.tau)) == sp.zeros(2, 2)
    assert sp.simplify(stacked_posterior(sp.eye(2), W, 0) - sequential_posterior(sp.eye(2), W, 0)) == sp.zeros(2, 2)


@pytest.mark.parametrize("prior, budget", [
    (GaussianPrior.isotropic(2), 1), (GaussianPrior.isotropic(3), 2), (GaussianPrior.isotropic(2), 3),
    pytest.param(TreePrior(2, "1/2"), 2, marks=pytest.mark.slow),
    (GaussianPrior(sp.diag(*sp.symbols("c1 c2", positive=True))), 1),
])
def test_deep_shallow_gap_is_zero_for_symbolic_tau(prior, budget):
    from fvsym.gaussian import deep_shallow_gap

    result = deep_shallow_gap(prior, budget, S.tau)
    assert result.route == "symbolic" and result.identity_checked and result.gap == 0
    assert S.tau in result.shallow.free_symbols and "simplified to zero" in result.detail
    for t in (R(1, 3), R(2)):  # the symbolic answer at numbers, against the exact numeric water-filling
        gauss = GaussianPrior.matched(prior) if isinstance(prior, TreePrior) else prior
        if all(x.is_number for x in gauss.cov):
            assert sp.simplify(result.deep.subs(S.tau, t) - water_filling(gauss.eigenvalues, budget, t).loss) == 0


def test_deep_shallow_gap_is_exact_at_numbers():
    from fvsym import gaussian

    exact = gaussian.deep_shallow_gap(GaussianPrior.isotropic(2), 2, R(1, 2))
    assert exact.route == "symbolic" and exact.deep == exact.shallow == R(2, 5) and exact.gap == 0