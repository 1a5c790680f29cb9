"""The Bellman recursion as symbols (THEORY.md section 3): the recursion as equations and unrolled,
the optimum for every alpha at once (certified pieces), formulas that know their domain."""
import ast
import random
from fractions import Fraction
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from fvsym import GaussianPrior, TreePrior, _envelope, bellman, tree
from fvsym import symbols as S
from fvsym._notation import MinOver
from fvsym._validate import to_exact

alpha = S.alpha
R = sp.Rational


def rationals_in(lo, hi, n, rng):
    """``n`` random rationals in ``(lo, hi)`` plus the neighbours of both ends (1e-6 inside)."""
    lo_f, hi_f = float(lo), float(hi)
    out = [R(Fraction(rng.uniform(lo_f, hi_f)).limit_denominator(10**6)) for _ in range(n)]
    eps = R(1, 10**6)
    out += [R(Fraction(float(lo + eps)).limit_denominator(10**8)), R(Fraction(float(hi - eps)).limit_denominator(10**8))]
    return [x for x in out if (lo < x) == sp.true and (x < hi) == sp.true]


# --- 1. the recursion as equations, and unrolled ---------------------------------------------------------
def test_recursion_is_a_chain_of_equations_from_terminal_to_optimum():
    eqs = bellman.recursion(TreePrior(3), 3, 1)
    assert all(isinstance(e, sp.Eq) for e in eqs) and len(eqs) == 3 + 3
    assert eqs[1].lhs == sp.Function("J_3")(sp.Symbol("S"))  # terminal J_L(S)
    assert [e.lhs.func.__name__ for e in eqs[2:5]] == ["J_2", "J_1", "J_0"]
    assert eqs[-1].rhs == sp.Function("J_0")(sp.Symbol("S_0"))
    step = eqs[2].rhs  # min over actions of the written-out sum over the 3 reading outcomes
    assert isinstance(step, MinOver) and step.args[1] == sp.Symbol("W") and sp.Symbol("W") not in step.free_symbols
    summed = step.args[0]
    assert isinstance(summed, sp.Add) and len(summed.args) == 3
    assert len(bellman.recursion(TreePrior(3), 2, 2)[2].rhs.args[0].args) == 9  # 3^d outcomes
    latex = bellman.recursion_latex(eqs)
    assert latex.startswith("\\begin{aligned}") and "\\min_{W \\in" in latex and "\\left|S_{W}^{+}\\right|" in latex
    assert "min_{W in N_1(S)}" in str(eqs[2])


def test_gaussian_recursion_has_the_deterministic_covariance_update():
    eqs = bellman.recursion(GaussianPrior.isotropic(2), 2, 1)
    P = sp.MatrixSymbol("P", 2, 2)
    assert eqs[1] == sp.Eq(sp.Function("J_2")(P), sp.Trace(P))
    assert "tau" in sp.latex(eqs[2]) and "W^{T}" in sp.latex(eqs[2])


@pytest.mark.parametrize("depth, layers, width", [(d, L, w) for d in (1, 2, 3) for w in (1, 2, 3)
                                                 for L in range(0, 4) if L * w <= 2**d - 1])
def test_unrolled_recursion_equals_solve(depth, layers, width):
    for a in (R(1, 2), R(1, 7), R(9, 10)):
        prior = TreePrior(depth, a)
        assert bellman.unroll(prior, layers, width).doit() == bellman.solve(prior, layers, width).loss
    symbolic = bellman.unroll(TreePrior(depth), layers, width)  # symbolic alpha: substitute, then evaluate
    assert symbolic.subs(alpha, R(1, 3)).doit() == bellman.solve(TreePrior(depth, R(1, 3)), layers, width).loss


def test_unroll_refuses_huge_trees_in_one_line():
    with pytest.raises(ValueError, match="max_terms=10") as info:
        bellman.unroll(TreePrior(4, "1/2"), 3, 1, max_terms=10)
    assert "\n" not in str(info.value)


# --- 2. the optimum in symbolic alpha -------------------------------------------------------------------
def test_issue_examples():
    assert sp.factor(tree.tree_loss(4, 2, "optimal").expr) == alpha**2 * (3 * alpha + 1) / 4
    assert tree.tree_loss(4, 3, "optimal").expr == alpha**3 / 8


CASES = [(K, B) for K in (1, 2, 3, 4) for B in range(0, 2**K)]


@pytest.mark.parametrize("depth, budget", CASES)
def test_piecewise_optimum_equals_solve_in_every_piece_and_near_breakpoints(depth, budget):
    rng = random.Random(depth * 100 + budget)
    for strategy in ("optimal", "optimal_nonadaptive"):
        f = tree.tree_loss(depth, budget, strategy)
        assert f.params == (alpha,) and f.pieces
        assert f.pieces[0].lower == 0 and f.pieces[-1].upper == 1
        for left, right in zip(f.pieces, f.pieces[1:]):
            assert left.upper == right.lower
        for piece in f.pieces:
            for a in rationals_in(piece.lower, piece.upper, 6, rng) + [piece.sample]:
                prior = TreePrior(depth, a)
                if strategy == "optimal":
                    numeric = bellman.solve(prior, budget, 1).loss
                else:
                    numeric = bellman.optimal_nonadaptive(prior, budget)[0]
                assert piece.loss.subs(alpha, a) == numeric == f.expr.subs(alpha, a)
            if strategy == "optimal" and piece.policy is not None:  # the policy's own value is the piece
                cells = policy_cells(TreePrior(depth), piece.policy)
                assert tree.coordinate_design_loss(TreePrior(depth), []) - partition_gain(depth, cells) == piece.loss
            if strategy == "optimal_nonadaptive":
                assert tree.coordinate_design_loss(TreePrior(depth), piece.design) == piece.loss


def policy_cells(prior, policy):
    """Final leaf sets of a policy tree (by sign patterns, brute force over the leaves)."""
    cells = {}
    for i in range(prior.n_leaves):
        theta = prior.theta(prior.leaf_signs(i))
        node, key = policy, ()
        while node is not None:
            reading = tuple(int(sp.sign(theta.get(n, 0))) for n in node.nodes)
            key += (node.nodes, reading)
            node = node.children[reading]
        cells.setdefault(key, []).append(i)
    return list(cells.values())


def partition_gain(depth, cells):
    """``2^-K sum_C ||sum_{s in C} theta_s||^2 / |C|`` for a partition of the leaves (symbolic alpha)."""
    prior = TreePrior(depth)
    total = 0
    for cell in cells:
        vec = sum((prior.theta_vector(prior.leaf_signs(i)) for i in cell), sp.zeros(prior.n_nodes, 1))
        total += (vec.T * vec)[0] / len(cell)
    return sp.expand(total / prior.n_leaves)


@pytest.mark.slow  # run by .ci/run after the default suite
def test_depth_five_all_budgets_certified_and_correct():
    rng = random.Random(5)
    for budget in range(0, 32):
        for strategy in ("optimal", "optimal_nonadaptive"):
            f = tree.tree_loss(5, budget, strategy)
            a = R(rng.randint(1, 999), 1000)
            solved = (bellman.solve(TreePrior(5, a), budget, 1).loss if strategy == "optimal"
                      else bellman.optimal_nonadaptive(TreePrior(5, a), budget)[0])
            assert f.expr.subs(alpha, a) == solved


@given(depth=st.integers(1, 4), data=st.data(),
       a=st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(999, 1000), max_denominator=1000))
def test_properties_over_depth_budget_alpha(depth, data, a):
    budget = data.draw(st.integers(0, 2**depth - 1))
    a = R(a.numerator, a.denominator)
    prior = TreePrior(depth, a)
    opt = tree.tree_loss(depth, budget, "optimal").expr.subs(alpha, a)
    nonadaptive = tree.tree_loss(depth, budget, "optimal_nonadaptive").expr.subs(alpha, a)
    assert opt == bellman.solve(prior, budget, 1).loss
    assert 0 <= opt <= nonadaptive <= prior.second_moment  # adaptivity can only help
    if budget <= depth:
        assert opt <= tree.tree_loss(depth, budget, "path", alpha=a).expr
    if budget >= 1:
        assert opt <= tree.tree_loss(depth, budget - 1, "optimal").expr.subs(alpha, a)  # more budget helps


def test_wider_layers_in_symbolic_alpha():
    for layers, width in [(1, 2), (2, 2), (1, 3)]:
        optimum = bellman.solve_alpha(4, layers, width)
        for a in (R(1, 5), R(1, 2), R(4, 5)):
            assert optimum.at(a) == bellman.solve(TreePrior(4, a), layers, width).loss
    assert tree.tree_loss(4, 4, "optimal", layers=2).expr == bellman.solve_alpha(4, 2, 2).loss


def test_alpha_optimum_to_dict_and_bad_input():
    d = bellman.solve_alpha(3, 2, 1).to_dict()
    assert sp.sympify(d["loss"]) .subs(sp.Symbol("alpha"), R(1, 2)) == bellman.solve(TreePrior(3, "1/2"), 2, 1).loss
    assert d["pieces"][0]["policy"]["nodes"]
    for call, fragment in [(lambda: bellman.solve_alpha(6, 1, 1), "6"), (lambda: bellman.solve_alpha(3, 8, 1), "8"),
                           (lambda: bellman.optimal_nonadaptive_alpha(3, 9), "9"),
                           (lambda: bellman.solve_alpha(3, 1, 1).at(2), "2")]:
        with pytest.raises(ValueError) as info:
            call()
        assert fragment in str(info.value) and "\n" not in str(info.value)


# --- the certified envelope itself (pieces with algebraic breakpoints) -----------------------------------
def test_envelope_has_exact_algebraic_breakpoints():
    x = sp.Symbol("alpha")
    polys = [(1, 0, 0), (0, 0, 2), (0, 1, 0), (0, 1, 1)]  # 1, 2x^2, x, x + x^2
    pieces = _envelope.upper_envelope(polys, x)
    assert [p[3] for p in pieces] == [(1, 0, 0), (0, 1, 1)]
    assert sp.simplify(pieces[0][1] - (sp.sqrt(5) - 1) / 2) == 0  # x + x^2 = 1
    cubic = _envelope.upper_envelope([(0, 0, 0, 1), (R(1, 1), -3, 0, 0)], x)  # x^3 vs 1 - 3x: a CRootOf
    assert len(cubic) == 2 and isinstance(cubic[0][1], sp.CRootOf)
    b = cubic[0][1]
    assert sp.simplify(b**3 - (1 - 3 * b)) == 0
    for lo, hi, sample, best in pieces + cubic:
        assert (lo < sample) == sp.true and (sample < hi) == sp.true


def test_piecewise_expression_of_an_envelope():
    x = sp.Symbol("alpha")
    polys = [(1, 0, 0), (0, 0, 2), (0, 1, 0), (0, 1, 1)]
    pieces = _envelope.upper_envelope(polys, x)
    expr = bellman.piecewise_in_alpha([(hi, sum(c * alpha**k for k, c in enumerate(p))) for _, hi, _, p in pieces])
    assert isinstance(expr, sp.Piecewise) and expr.free_symbols == {alpha}
    rng = random.Random(0)
    for t in [R(rng.randint(1, 999), 1000) for _ in range(20)]:
        assert expr.subs(alpha, t) == max(_envelope.evaluate(p, Fraction(int(t.p), int(t.q))) for p in polys)
    assert sp.sympify(sp.sstr(expr)).subs(sp.Symbol("alpha"), R(9, 10)) == expr.subs(alpha, R(9, 10))


@given(st.lists(st.tuples(*[st.integers(-20, 20)] * 4), min_size=1, max_size=8),
       st.lists(st.fractions(min_value=0, max_value=1, max_denominator=500), min_size=1, max_size=10))
def test_prune_keeps_the_maximum_and_envelope_is_the_maximum(polys, points):
    kept = _envelope.prune(polys)
    assert set(kept) <= set(polys)
    x = sp.Symbol("alpha")
    pieces = _envelope.upper_envelope(polys, x)
    for t in points:
        top = max(_envelope.evaluate(p, t) for p in polys)
        assert max(_envelope.evaluate(p, t) for p in kept) == top
        if 0 < t < 1:
            piece = next(p for p in pieces if (sp.Rational(t.numerator, t.denominator) <= p[1]) == sp.true)
            assert _envelope.evaluate(piece[3], t) == top


# --- 3. domains -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("values, fragment", [
    (dict(alpha="1/2", K=4, B=6), "B <= K"),
    (dict(alpha=2, K=4, B=2), "alpha=2"),
    (dict(alpha="1/2", K=-1, B=0), "K=-1"),
    (dict(alpha="1/2", K=R(5, 2), B=0), "K=5/2"),
    (dict(alpha=0, K=3, B=1), "alpha=0"),
])
def test_formulas_refuse_values_outside_their_domain(values, fragment):
    f = tree.path_loss()
    for call in (lambda: f.exact(**values), lambda: f(**{k: float(v) if not isinstance(v, str) else float(Fraction(v))
                                                       for k, v in values.items()})):
        with pytest.raises(ValueError) as info:
            call()
        assert fragment in str(info.value) and "\n" not in str(info.value)


def test_domain_is_visible_and_travels_with_subs():
    f = tree.path_loss()
    assert f.domain == {alpha: sp.Interval.open(0, 1), S.depth: sp.Range(1, sp.oo), S.budget: sp.Range(0, sp.oo)}
    assert sp.Le(S.budget, S.depth) in f.conditions
    g = f.subs(K=3)
    assert g.constraints == (sp.Le(S.budget, 3),)
    with pytest.raises(ValueError, match="B <= 3"):
        g.exact(alpha="1/2", B=4)
    assert g.exact(alpha="1/2", B=3) == 0
    assert f.assumptions[S.depth] == ("integer", "positive", "nonnegative", "real")  # sympy assumptions
    assert "positive" in f.assumptions[alpha] and "integer" not in f.assumptions[alpha]


def test_limits_under_the_domain():
    f = tree.path_loss()
    assert sp.simplify(f.limit(S.depth, sp.oo) - alpha**S.budget / (1 - alpha)) == 0
    assert f.limit("B", 0) == f.expr.subs(S.budget, 0)
    assert sp.simplify(tree.second_moment().limit(S.depth, sp.oo) - 1 / (1 - alpha)) == 0
    # at a number alpha, sympy's own limit works directly on the expression (K is a positive integer)
    at_half = f.expr.subs(alpha, R(1, 2))
    assert sp.simplify(sp.limit(at_half, S.depth, sp.oo) - tree.path_loss_rate().expr.subs(alpha, R(1, 2))) == 0


def test_numpy_view_checks_arrays():
    import numpy as np

    f = tree.path_loss()
    assert np.allclose(f(np.array([0.2, 0.5]), 4, 2), [0.2**2 * (1 - 0.2**2) / 0.8, 0.375])
    with pytest.raises(ValueError, match="alpha"):
        f(np.array([0.2, 1.5]), 4, 2)
    with pytest.raises(ValueError, match="B <= K"):
        f(0.5, 4, np.array([2, 5]))


def test_floats_are_read_by_their_shortest_decimal():
    assert to_exact(0.3, "alpha") == R(3, 10) and to_exact(0.1 + 0.2, "x") == R(30000000000000004, 10**17)
    assert TreePrior(3, 0.3).alpha == R(3, 10)
    assert tree.tree_loss(3, 2, "path", alpha=0.5).expr == tree.tree_loss(3, 2, "path", alpha="1/2").expr


# --- 4. (G1) and the module graph ------------------------------------------------------------------------
def test_fvsym_has_no_import_cycles():
    root = Path(__file__).resolve().parents[2] / "fvsym"
    graph = {}
    for path in root.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
        graph[path.stem] = {d for d in deps if (root / f"{d}.py").exists()}
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for d in graph[m]:
            assert state.get(d) != "open", f"import cycle: {' -> '.join(stack + [m, d])}"
            if d not in state:
                visit(d, stack + [m])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [])


@given(st.tuples(*[st.integers(-30, 30)] * 5), st.tuples(*[st.integers(-30, 30)] * 5),
       st.lists(st.fractions(min_value=0, max_value=1, max_denominator=997), min_size=5, max_size=20))
def test_dominance_certificate_is_sound(p, q, points):
    if _envelope.dominates(p, q):  # certified p >= q on [0, 1]: never refuted at a point
        assert all(_envelope.evaluate(p, t) >= _envelope.evaluate(q, t) for t in points)
    shifted = (p[0] + 31 * 5 * 2,) + p[1:]  # p + 310 >= q for all coefficients in range: must be certified
    assert _envelope.dominates(shifted, q)
