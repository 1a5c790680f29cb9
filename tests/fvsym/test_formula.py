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
    assert r.startswith("$") and r.endswith("$") and "\\mathrm{isotropic\\_loss}" in r and f.latex in r
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


# --- REPL behaviour (issue 20 item 2) ------------------------------------------------------------------
def test_subs_by_name_returns_a_formula_although_symbols_carry_assumptions():
    from fvsym.tree import path_loss

    f = path_loss()
    assert f.expr.subs(sp.Symbol("K"), 6) == f.expr  # the plain Symbol("K") is another symbol: the trap
    g = f.subs(K=6)
    assert isinstance(g, Formula) and g.params == (S.alpha, S.budget)
    assert g.exact(alpha="1/2", B=2) == f.exact(alpha="1/2", K=6, B=2) == sp.Rational(15, 32)
    assert f.symbols["K"] is S.depth and f.symbols["K"].is_integer
    assert f.expr.subs(f.symbols["K"], 6) == g.expr


def test_missing_parameters_are_named_in_one_line():
    from fvsym.tree import path_loss, top_levels_loss

    with pytest.raises(ValueError, match=r"^path_loss needs B \(its parameters: alpha, K, B\)$"):
        path_loss()(alpha=0.5, K=4)
    with pytest.raises(ValueError, match=r"^top_levels_loss needs K, B "):
        top_levels_loss()(alpha=0.5)


def test_series_is_refused_where_the_order_depends_on_a_symbolic_exponent():
    from fvsym.tree import path_loss

    f = path_loss()
    assert sp.series(f.expr, S.alpha, 0, 4).removeO() == 0  # sympy's answer, false for B < 4
    with pytest.raises(ValueError, match=r"depends on the symbolic B, K; fix them first"):
        f.series("alpha", 0, 4)
    # with every exponent fixed the series is the exact expansion: alpha^2 + alpha^3 + ... + alpha^5
    series = f.subs(K=6, B=2).series("alpha", 0, 4)
    assert series.removeO() == S.alpha**2 + S.alpha**3
    assert series.getO() == sp.O(S.alpha**4)
    # at a point where alpha does not vanish a symbolic exponent is harmless: Taylor's theorem holds for all B
    half = sp.Rational(1, 2)
    taylor = f.series("alpha", half, 2).removeO()
    assert sp.simplify(taylor.subs(S.alpha, half) - f.expr.subs(S.alpha, half)) == 0
    slope = sp.diff(f.expr, S.alpha).subs(S.alpha, half)
    assert sp.simplify(sp.diff(taylor, S.alpha) - slope) == 0


def test_limit_under_the_domain_where_sympy_cannot_assume_alpha_below_one():
    from fvsym.tree import path_loss

    f = path_loss()
    with pytest.raises(NotImplementedError):
        sp.limit(f.expr, S.depth, sp.oo)  # sympy alone: alpha is only known positive
    assert sp.simplify(f.limit("K", sp.oo) - S.alpha**S.budget / (1 - S.alpha)) == 0
    assert "f.limit" in Formula.__doc__  # the pointer a REPL user reads in help(f)


def test_every_strategy_formula_takes_the_budget():
    from fvsym import tree

    for derive in (tree.path_loss, tree.top_levels_loss, tree.path_loss_rate, tree.top_levels_rate):
        assert "B" in derive().symbols
    top = tree.top_levels_loss()
    assert top.exact(alpha="1/2", K=4, B=3) == sp.Rational(3, 8)  # levels 1, 2 read: alpha^2 + alpha^3
    assert top.exact(alpha="1/2", K=4, B=3) == tree.tree_loss(4, 3, "top_levels", alpha="1/2").expr
    with pytest.raises(ValueError, match=r"needs B \+ 1 in \{1, 2, 4, \.\.\.\}, got B=4"):
        top.exact(alpha="1/2", K=4, B=4)
    with pytest.raises(ValueError, match=r"needs B \+ 1 <= 2\*\*K"):
        top.exact(alpha="1/2", K=2, B=7)
    values = top(np.array([0.5, 0.5]), 4, np.array([1, 7]))
    assert values.tolist() == [float(top.exact(alpha="1/2", K=4, B=1)), float(top.exact(alpha="1/2", K=4, B=7))]
    with pytest.raises(ValueError, match="needs B \\+ 1 in"):
        top(0.5, 4, np.array([1, 2]))


def test_formula_repr_and_to_dict():
    from fvsym.tree import path_loss

    f = path_loss()
    r = repr(f)
    assert r.startswith("<Formula path_loss(alpha, K, B) = ") and "needs B <= K" in r and "docs/theory.md" in r
    d = f.to_dict()
    assert d["params"] == ["alpha", "K", "B"] and d["constraints"] == ["B <= K"]
    assert sp.sympify(d["expr"], locals=f.symbols) == f.expr


# --- domains: limits, series and arithmetic (issue 32) ------------------------------------------------------
def test_limits_outside_the_domain_are_refused_in_one_line():
    from fvsym._formula import DomainError
    from fvsym.tree import path_loss, top_levels_loss

    f = path_loss()
    # B -> oo at a fixed K leaves B <= K (sympy alone returns alpha**K/(alpha - 1), a negative "loss")
    for args, fragment in [(("B", sp.oo), "B <= K"), (("alpha", 2), "(0, 1)"), (("alpha", 1, "+"), "from above"),
                           (("alpha", 0, "-"), "from below"), (("K", -sp.oo), "integers >= 1"),
                           (("B", -1), "integers >= 0"), (("B", "1/2"), "integers >= 0")]:
        with pytest.raises(DomainError, match=fragment) as info:
            f.limit(*args)
        assert "\n" not in str(info.value) and isinstance(info.value, ValueError)
    with pytest.raises(DomainError, match="B \\+ 1 <= 2\\*\\*K|in \\{1, 2, 4"):
        top_levels_loss().limit("B", sp.oo)
    with pytest.raises(DomainError):
        f.subs(K=4, B=2).series("alpha", 2)


def test_limits_inside_the_domain_and_at_its_ends():
    from fvsym.tree import path_loss

    f = path_loss()
    assert sp.simplify(f.limit("K", sp.oo) - S.alpha**S.budget / (1 - S.alpha)) == 0
    assert sp.simplify(f.limit("alpha", 1) - (S.depth - S.budget)) == 0  # from below, by default
    assert f.subs(K=4, B=2).limit("alpha", 0) == 0
    assert f.subs(K=4, B=0).limit("alpha", 0) == 1
    # alpha -> 0 with a symbolic exponent depends on B: one line asking to fix it
    with pytest.raises(ValueError, match="fix B, K first") as info:
        f.limit("alpha", 0)
    assert "\n" not in str(info.value)


def test_formula_arithmetic_keeps_both_domains():
    from fvsym._formula import DomainError
    from fvsym.tree import path_loss, second_moment, top_levels_loss

    path, top = path_loss(), top_levels_loss()
    both = path + top
    assert both.params == (S.alpha, S.depth, S.budget)
    assert set(both.constraints) == set(path.constraints) | set(top.constraints)
    assert both.exact(alpha="1/2", K=4, B=3) == path.exact(alpha="1/2", K=4, B=3) + top.exact(alpha="1/2", K=4, B=3)
    with pytest.raises(DomainError, match="1, 2, 4"):  # B = 2 is in path's domain, not in top_levels'
        both.exact(alpha="1/2", K=4, B=2)
    with pytest.raises(DomainError, match="B <= K"):
        (top - path).exact(alpha="1/2", K=2, B=3)
    gap = top - path
    assert gap.exact(alpha="1/3", K=5, B=3) == top.exact(alpha="1/3", K=5, B=3) - path.exact(alpha="1/3", K=5, B=3)
    share = path / second_moment()
    assert share.exact(alpha="1/2", K=4, B=2) == sp.Rational(3, 8) / sp.Rational(15, 8)
    assert (2 * path).exact(alpha="1/2", K=4, B=2) == sp.Rational(3, 4)
    assert (1 - path).exact(alpha="1/2", K=4, B=2) == sp.Rational(5, 8)
    assert (path / 2).exact(alpha="1/2", K=4, B=2) == (-path).exact(alpha="1/2", K=4, B=2) * -sp.Rational(1, 2)
    assert (path**2).exact(alpha="1/2", K=4, B=2) == sp.Rational(9, 64)
    assert float((path + top)(0.5, 4, 3)) == pytest.approx(0.5)
    with pytest.raises(ZeroDivisionError):
        path / 0
    with pytest.raises(TypeError):
        path + "a word"
    with pytest.raises(DomainError, match="B <= K"):
        (path + 1).limit("B", sp.oo)


def test_domain_errors_from_the_numeric_view_are_typed():
    from fvsym._formula import DomainError
    from fvsym.tree import path_loss

    with pytest.raises(DomainError, match="alpha must lie in \\(0, 1\\)"):
        path_loss()(1.5, 4, 2)
    with pytest.raises(DomainError, match="B <= K"):
        path_loss().exact(alpha="1/2", K=2, B=3)
