"""Formula: its views agree (numpy, numba, exact substitution), LaTeX, exact values, bad names."""
import math

import numpy as np
import pytest
import sympy as sp

from fvsym import Formula, TreePrior
from fvsym import symbols as S
from fvsym.gaussian import isotropic_loss


def second_moment(depth: int) -> Formula:
    """E||theta||^2 of the tree prior as a Formula in alpha (derived by TreePrior, not typed)."""
    return Formula("second_moment", TreePrior(depth).second_moment, (S.alpha,), "THEORY.md section 6")


POINTS = [(1, 1, 0.5), (3, 2, 0.0), (4, 4, 1.5), (3, 5, 0.7), (2, 9, 2.0), (6, 0, 0.3)]


@pytest.mark.parametrize("D, B, tau", POINTS)
def test_views_agree_on_isotropic_loss(D, B, tau):
    f = isotropic_loss()
    by_subs = float(f.expr.subs({S.dim: D, S.budget: B, S.tau: sp.Float(tau, 30)}))
    assert f(D, B, tau) == pytest.approx(by_subs, rel=1e-12, abs=1e-15)
    assert f.numba(D, B, tau) == pytest.approx(by_subs, rel=1e-12, abs=1e-15)
    assert f(D=D, B=B, tau=tau) == f(D, B, tau)
    exact = f.exact(D=D, B=B, tau=sp.nsimplify(tau))
    assert float(exact) == pytest.approx(by_subs, rel=1e-12, abs=1e-15)


def test_numpy_view_broadcasts_and_matches_scalar_calls():
    f = second_moment(5)
    alphas = np.linspace(0.05, 0.95, 7)
    values = f(alphas)
    assert values.shape == alphas.shape
    for a, v in zip(alphas, values):
        assert v == pytest.approx(float(f.expr.subs(S.alpha, a)), rel=1e-12)
        assert f.numba(a) == pytest.approx(v, rel=1e-12)
        assert v == pytest.approx((1 - a**5) / (1 - a), rel=1e-12)


def test_latex_views():
    f = isotropic_loss()
    assert f.latex == sp.latex(f.expr)
    assert "\\tau" in f.latex
    r = f._repr_latex_()
    assert r.startswith("$") and r.endswith("$") and "isotropic_loss" in r and f.latex in r
    assert str(f).startswith("isotropic_loss = ")


def test_exact_and_subs():
    f = second_moment(4)
    assert f.exact(alpha="1/2") == sp.Rational(15, 8)
    third = sp.Rational(1, 3)
    assert f.exact(alpha=third) == (1 - third**4) / (1 - third)  # THEORY.md section 6
    assert isinstance(f.exact(alpha="0.5"), sp.Rational)  # decimal strings are read exactly
    g = isotropic_loss().subs(D=4)
    assert g.params == (S.budget, S.tau)
    assert g.exact(B=2, tau="1/2") == isotropic_loss().exact(D=4, B=2, tau="1/2") == sp.Rational(12, 5)
    assert g.name == "isotropic_loss" and g.source == isotropic_loss().source


def test_bad_parameter_names_and_counts():
    f = isotropic_loss()
    with pytest.raises(ValueError, match="unknown parameters \\['depth'\\]"):
        f.exact(depth=3)
    with pytest.raises(ValueError, match="unknown parameters"):
        f.subs(alpha="1/2")
    with pytest.raises(ValueError, match="unknown parameters"):
        f(D=1, B=1, tau=0.1, K=3)
    with pytest.raises(ValueError, match="takes 3 values"):
        f(1, 2)
    with pytest.raises(ValueError, match="free symbols \\['tau'\\] not in params"):
        Formula("bad", S.alpha + S.tau, (S.alpha,), "test")
    with pytest.raises(ValueError, match="tau must be a number"):
        f.exact(tau="one half")


def test_formula_is_frozen_and_comparable():
    f = second_moment(3)
    assert f == second_moment(3)
    with pytest.raises(AttributeError):
        f.name = "other"
    assert math.isclose(f(0.5), (1 - 0.5**3) / (1 - 0.5))
