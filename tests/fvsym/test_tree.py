"""fvsym.tree: closed forms against brute-force enumeration over the 2^K leaves, exact identities,
the scaling laws as sympy limits, the views of each Formula, and bad input."""
from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from fvsym import TreePrior
from fvsym import symbols as S
from fvsym import tree

alpha, K, B, j = S.alpha, S.depth, S.budget, S.levels
RATIONAL_ALPHAS = ("1/2", "1/3", "3/4", "2/5")

alphas = st.fractions(min_value=Fraction(1, 30), max_value=Fraction(29, 30), max_denominator=30)


# --- independent oracles (Fractions, straight from the definition of the prior) ----------------------
def squared_scale_fractions(prior: TreePrior) -> list[Fraction]:
    out = []
    for a in prior.scales:
        w = sp.simplify(a**2)
        assert w.is_Rational, w
        out.append(Fraction(int(w.p), int(w.q)))
    return out


def readings(prior: TreePrior, signs, nodes) -> tuple[int, ...]:
    """Noiseless sign of theta_n for each node: +-1 on the leaf's path, 0 off it."""
    on_path = dict(zip(prior.path(signs), signs))
    return tuple(on_path.get(n, 0) for n in nodes)


@functools.cache
def _all_readings(depth: int) -> dict:
    prior = TreePrior(depth, "1/2")  # structure only
    return {s: readings(prior, s, range(1, prior.n_nodes + 1)) for s in prior.leaves()}


def set_loss(prior: TreePrior, ws, leaves) -> Fraction:
    """E||theta - mean||^2 under the uniform belief over ``leaves``: per node, a_k^2 times the variance
    of the node's sign reading over the set."""
    total = Fraction(0)
    n = len(leaves)
    table = _all_readings(prior.depth)
    per_leaf = [table[s] for s in leaves]
    for node in range(1, prior.n_nodes + 1):
        col = [r[node - 1] for r in per_leaf]
        mean = Fraction(sum(col), n)
        second = Fraction(sum(x * x for x in col), n)
        total += ws[node.bit_length() - 1] * (second - mean * mean)
    return total


def partition_loss(prior: TreePrior, ws, cells) -> Fraction:
    n = prior.n_leaves
    return sum((Fraction(len(c), n) * set_loss(prior, ws, c) for c in cells), Fraction(0))


def design_loss_oracle(prior: TreePrior, nodes) -> Fraction:
    ws = squared_scale_fractions(prior)
    cells: dict[tuple, list] = {}
    for s in prior.leaves():
        cells.setdefault(readings(prior, s, nodes), []).append(s)
    return partition_loss(prior, ws, list(cells.values()))


def policy_cells(prior: TreePrior, policy):
    """Group the leaves by the whole trajectory (nodes read, readings) the policy produces."""
    cells: dict[tuple, list] = {}
    for index, s in enumerate(prior.leaves()):
        node, trajectory = policy, []
        while node is not None:
            assert index in node.belief
            r = readings(prior, s, node.nodes)
            trajectory.append((node.nodes, r))
            node = node.children[r]
        cells.setdefault(tuple(trajectory), []).append(s)
    return list(cells.values())


def policy_loss_oracle(prior: TreePrior, policy) -> Fraction:
    ws = squared_scale_fractions(prior)
    if policy is None:
        return partition_loss(prior, ws, [prior.leaves()])
    return partition_loss(prior, ws, policy_cells(prior, policy))


def as_fraction(x) -> Fraction:
    x = sp.sympify(x)
    assert x.is_Rational, x
    return Fraction(int(x.p), int(x.q))


# --- exact identities --------------------------------------------------------------------------------
def test_sanity_values_of_the_issue():
    assert tree.tree_loss(4, 2, "path", alpha="1/2").expr == sp.Rational(3, 8)
    assert TreePrior(4, "1/2").second_moment == sp.Rational(15, 8)
    assert tree.second_moment().exact(alpha="1/2", K=4) == sp.Rational(15, 8)


def test_closed_forms_equal_theory_forms():
    assert sp.simplify(tree.path_loss().expr - alpha**B * (1 - alpha ** (K - B)) / (1 - alpha)) == 0
    # written in the budget B = 2^j - 1 (every strategy formula takes B)
    top_j = tree.top_levels_loss().expr.subs(B, 2**j - 1)
    assert sp.simplify(sp.expand_log(top_j - alpha**j * (1 - alpha ** (K - j)) / (1 - alpha), force=True)) == 0
    assert sp.simplify(tree.second_moment().expr - (1 - alpha**K) / (1 - alpha)) == 0
    assert tree.path_loss().params == (alpha, K, B)
    assert tree.top_levels_loss().params == (alpha, K, B)
    assert tree.second_moment().params == (alpha, K)


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
def test_second_moment_matches_prior(depth):
    expr = tree.second_moment().expr.subs(K, depth)
    assert sp.simplify(expr - TreePrior(depth).second_moment) == 0
    assert sp.simplify(expr - tree.coordinate_design_loss(TreePrior(depth), [])) == 0


def test_path_at_full_depth_is_zero_and_budget_zero_is_the_prior():
    assert sp.simplify(tree.path_loss().expr.subs(B, K)) == 0
    assert sp.simplify(tree.path_loss().expr.subs(B, 0) - tree.second_moment().expr) == 0


# --- closed forms equal enumeration over the leaves ----------------------------------------------------
@functools.cache
def symbolic_prior(depth: int) -> TreePrior:
    return TreePrior(depth)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_path_loss_equals_enumeration_symbolic(depth):
    prior = symbolic_prior(depth)
    for budget in range(depth + 1):
        closed = tree.path_loss().expr.subs({K: depth, B: budget})
        # the adaptive path policy, enumerated leaf by leaf (symbolic alpha)
        policy = tree.path_design(prior, budget)
        cells = policy_cells(prior, policy) if policy is not None else [prior.leaves()]
        enumerated = _symbolic_partition_loss(prior, cells)
        assert sp.simplify(closed - enumerated) == 0, (depth, budget)


def _symbolic_partition_loss(prior: TreePrior, cells):
    total = sp.Integer(0)
    for cell in cells:
        thetas = [prior.theta(s) for s in cell]
        for n in set().union(*thetas):
            values = [t.get(n, sp.Integer(0)) for t in thetas]
            mean = sum(values) / len(values)
            total += sum((v - mean) ** 2 for v in values)
    return sp.expand(total / prior.n_leaves)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_top_levels_loss_equals_enumeration_symbolic(depth):
    prior = symbolic_prior(depth)
    for levels in range(depth + 1):
        closed = tree.top_levels_loss().exact(K=depth, B=2**levels - 1)
        design = tree.top_levels_design(prior, 2**levels - 1)
        assert sp.simplify(closed - tree._enumerate_design_loss(prior, design)) == 0
        assert sp.simplify(closed - tree.coordinate_design_loss(prior, design)) == 0


@pytest.mark.parametrize("a", RATIONAL_ALPHAS)
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_tree_loss_equals_enumeration_rational(depth, a):
    prior = TreePrior(depth, a)
    for budget in range(prior.n_nodes + 1):
        top = tree.tree_loss(depth, budget, "top_levels", alpha=a)
        assert top.params == ()
        assert as_fraction(top.expr) == design_loss_oracle(prior, range(1, budget + 1))
        if budget <= depth:
            path = tree.tree_loss(depth, budget, "path", alpha=a)
            assert as_fraction(path.expr) == policy_loss_oracle(prior, tree.path_design(prior, budget))


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_tree_loss_symbolic_substitutes_to_the_rational_value(depth):
    for budget in range(prior_nodes(depth) + 1):
        symbolic = tree.tree_loss(depth, budget, "top_levels")
        assert symbolic.params == ((alpha,) if budget < prior_nodes(depth) else ())
        numeric = tree.tree_loss(depth, budget, "top_levels", alpha="2/5")
        assert sp.simplify(symbolic.expr.subs(alpha, sp.Rational(2, 5)) - numeric.expr) == 0


def prior_nodes(depth: int) -> int:
    return 2**depth - 1


def test_tree_loss_with_scales_equals_enumeration():
    scales = [1, "1/2", "1/3"]
    prior = TreePrior(3, scales=scales)
    for budget in range(4):
        f = tree.tree_loss(3, budget, "path", scales=scales)
        assert as_fraction(f.expr) == policy_loss_oracle(prior, tree.path_design(prior, budget))
    for budget in range(8):
        f = tree.tree_loss(3, budget, "top_levels", scales=scales)
        assert as_fraction(f.expr) == design_loss_oracle(prior, range(1, budget + 1))


def test_coordinate_design_loss_symbolic_scales_equals_enumeration():
    a = sp.symbols("a1:4", positive=True)
    prior = TreePrior(3, scales=a)
    for design in ([2], [1, 5], [2, 5, 7], [4, 4, 3], [1, 2, 3, 4, 5, 6, 7]):
        fast = tree.coordinate_design_loss(prior, design)
        slow = tree._enumerate_design_loss(prior, design)
        assert sp.expand(fast - slow) == 0
        assert all(c.is_Rational for c in sp.Poly(fast, *a).coeffs())


def test_coordinate_design_loss_is_a_polynomial_in_alpha():
    fast = tree.coordinate_design_loss(symbolic_prior(4), [2, 7, 9])
    poly = sp.Poly(fast, alpha)
    assert all(c.is_Rational for c in poly.coeffs())
    assert sp.expand(fast - tree._enumerate_design_loss(symbolic_prior(4), [2, 7, 9])) == 0


designs = st.integers(1, 4).flatmap(
    lambda depth: st.tuples(st.just(depth), st.lists(st.integers(1, 2**depth - 1), max_size=2**depth + 2))
)


@given(designs, alphas)
def test_coordinate_design_loss_equals_enumeration(design, a):
    depth, nodes = design
    prior = TreePrior(depth, a)
    fast = tree.coordinate_design_loss(prior, nodes)
    assert fast.is_Rational
    assert as_fraction(fast) == design_loss_oracle(prior, nodes)
    assert 0 <= fast <= prior.second_moment


@given(designs)
def test_coordinate_design_loss_equals_enumeration_symbolic(design):
    depth, nodes = design
    prior = symbolic_prior(depth)
    assert sp.expand(tree.coordinate_design_loss(prior, nodes) - tree._enumerate_design_loss(prior, nodes)) == 0


@given(designs, alphas, st.integers(1, 15))
def test_more_nodes_never_hurt_and_duplicates_add_nothing(design, a, extra):
    depth, nodes = design
    prior = TreePrior(depth, a)
    base = tree.coordinate_design_loss(prior, nodes)
    extra = (extra - 1) % prior.n_nodes + 1
    assert tree.coordinate_design_loss(prior, nodes + [extra]) <= base
    assert tree.coordinate_design_loss(prior, nodes + nodes) == base


def test_zero_reading_is_informative():
    # reading node 2 alone beats reading the root: a zero says the path went right
    prior = TreePrior(4, "1/2")
    assert tree.coordinate_design_loss(prior, [2]) == sp.Rational(5, 8)
    assert tree.coordinate_design_loss(prior, [1]) == sp.Rational(7, 8)


def test_coordinate_design_loss_scales_to_depth_8():
    prior = TreePrior(8, "1/2")
    assert tree.coordinate_design_loss(prior, range(1, 256)) == 0
    for levels in range(9):
        expected = tree.top_levels_loss().exact(alpha="1/2", K=8, B=2**levels - 1)
        assert tree.coordinate_design_loss(prior, range(1, 2**levels)) == expected
    deep = TreePrior(12, "1/3")
    assert tree.coordinate_design_loss(deep, range(1, 2**5)) == tree.top_levels_loss().exact(alpha="1/3", K=12, B=31)


# --- properties of the strategies ----------------------------------------------------------------------
@given(st.integers(1, 5), alphas)
def test_losses_bounded_and_non_increasing_in_budget(depth, a):
    prior = TreePrior(depth, a)
    E = prior.second_moment
    previous = E
    for budget in range(prior.n_nodes + 1):
        loss = tree.tree_loss(depth, budget, "top_levels", alpha=a).expr
        assert 0 <= loss <= previous <= E
        previous = loss
    previous = E
    for budget in range(depth + 1):
        loss = tree.tree_loss(depth, budget, "path", alpha=a).expr
        assert 0 <= loss <= previous
        # path reads one node per level: never worse than the same number of top-level nodes
        assert loss <= tree.tree_loss(depth, budget, "top_levels", alpha=a).expr
        previous = loss


# --- scaling laws --------------------------------------------------------------------------------------
def test_path_scaling_law():
    rate = tree.path_loss_rate()
    assert rate.params == (alpha, B)
    assert sp.simplify(rate.expr - alpha**B / (1 - alpha)) == 0
    c = sp.Symbol("c", positive=True)  # alpha = exp(-c) encodes 0 < alpha < 1
    ratio = (tree.path_loss().expr / rate.expr).subs(alpha, sp.exp(-c))
    assert sp.limit(ratio, K, sp.oo) == 1
    assert sp.simplify(rate.expr.subs(B, B + 1) / rate.expr - alpha) == 0  # exponential in B
    assert sp.simplify(tree.scaling_exponents()["path"] - sp.log(alpha)) == 0


def test_top_levels_scaling_law():
    rate = tree.top_levels_rate()
    assert rate.params == (alpha, B)
    assert sp.simplify(rate.expr - (B + 1) ** (sp.log(alpha) / sp.log(2)) / (1 - alpha)) == 0
    c = sp.Symbol("c", positive=True)
    # at B = 2^j - 1 the rate is the K -> oo limit of the top-levels loss
    limit = sp.limit(tree.top_levels_loss().expr.subs(B, 2**j - 1).subs(alpha, sp.exp(-c)), K, sp.oo)
    at_levels = rate.expr.subs(B, 2**j - 1).subs(alpha, sp.exp(-c))
    assert sp.simplify(limit - at_levels) == 0
    # a power law: doubling B + 1 multiplies the loss by alpha
    m = sp.Symbol("m", positive=True)  # m = B + 1
    log_ratio = sp.log(rate.expr.subs(B, 2 * m - 1) / rate.expr.subs(B, m - 1))
    assert sp.simplify(sp.expand_log(log_ratio, force=True) - sp.log(alpha)) == 0
    assert sp.simplify(tree.scaling_exponents()["top_levels"] - sp.log(alpha) / sp.log(2)) == 0


def test_path_beats_top_levels_exponentially():
    # ratio of the two infinite-depth laws at B = 2^j - 1 tends to 0 as j grows
    c = sp.Symbol("c", positive=True)
    ratio = (tree.path_loss_rate().expr / tree.top_levels_rate().expr).subs(B, 2**j - 1)
    assert sp.limit(sp.simplify(ratio.subs(alpha, sp.exp(-c))), j, sp.oo) == 0


# --- views of each formula agree ---------------------------------------------------------------------
VIEW_CASES = [
    (tree.path_loss, (0.37, 7, 3)),
    (tree.top_levels_loss, (0.61, 9, 15)),  # B = 2^4 - 1
    (tree.second_moment, (0.5, 6)),
    (tree.path_loss_rate, (0.3, 5)),
    (tree.top_levels_rate, (0.7, 6)),
]


@pytest.mark.parametrize("derive, values", VIEW_CASES, ids=[d.__name__ for d, _ in VIEW_CASES])
def test_formula_views_agree(derive, values):
    f = derive()
    numpy_value = float(f(*values))
    numba_value = float(f.numba(*values))
    sympy_value = float(f.expr.subs(dict(zip(f.params, values))))
    assert abs(numpy_value - sympy_value) <= 1e-12 * max(1.0, abs(sympy_value))
    assert abs(numba_value - sympy_value) <= 1e-12 * max(1.0, abs(sympy_value))


def test_derivations_are_cached():
    assert tree.path_loss() is tree.path_loss()
    assert tree.top_levels_rate() is tree.top_levels_rate()


# --- designs and bad input -----------------------------------------------------------------------------
def test_designs():
    prior = TreePrior(3, "1/2")
    assert tree.top_levels_design(prior, 0) == ()
    assert tree.top_levels_design(prior, 5) == (1, 2, 3, 4, 5)
    policy = tree.path_design(prior, 2)
    assert policy.nodes == (1,)
    assert policy.next_nodes([(-1,)]) == (3,)
    assert policy.next_nodes([(-1,), (1,)]) == ()
    assert policy.value == sp.Rational(1, 4)
    assert tree.path_design(prior, 0) is None


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(depth=3, budget=4, strategy="path", alpha="1/2"), "4"),
        (dict(depth=3, budget=8, strategy="top_levels", alpha="1/2"), "8"),
        (dict(depth=3, budget=8, strategy="optimal", alpha="1/2"), "8"),
        (dict(depth=3, budget=-1, strategy="path", alpha="1/2"), "-1"),
        (dict(depth=3, budget=2, strategy="greedy", alpha="1/2"), "greedy"),
        (dict(depth=3, budget=2, strategy="path", alpha="3/2"), "3/2"),
        (dict(depth=3, budget=2, strategy="path", alpha=0), "0"),
        (dict(depth=3, budget=2, strategy="path", alpha=1), "1"),
        (dict(depth=3, budget=2, strategy="path", alpha="-1/2"), "-1/2"),
        (dict(depth=0, budget=0, strategy="path", alpha="1/2"), "0"),
        (dict(depth=6, budget=2, strategy="optimal"), "6"),  # symbolic alpha: depth <= 5
        (dict(depth=6, budget=2, strategy="optimal_nonadaptive"), "6"),
        (dict(depth=3, budget=4, strategy="optimal", alpha="1/2", layers=3), "layers=3"),
        (dict(depth=3, budget=4, strategy="optimal", alpha="1/2", layers=3, width=2), "width=2"),
        (dict(depth=3, budget=4, strategy="optimal_nonadaptive", alpha="1/2", layers=2), "layers=2"),
        (dict(depth=3, budget=2, strategy="path", alpha="1/2", scales=[1, 1, 1]), "1/2"),
    ],
)
def test_tree_loss_bad_input(kwargs, fragment):
    with pytest.raises(ValueError, match=None) as info:
        tree.tree_loss(**kwargs)
    message = str(info.value)
    assert fragment in message and "\n" not in message


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda: tree.coordinate_design_loss(TreePrior(3, "1/2"), [8]), "8"),
        (lambda: tree.coordinate_design_loss(TreePrior(3, "1/2"), [0]), "0"),
        (lambda: tree.coordinate_design_loss("prior", [1]), "str"),
        (lambda: tree.top_levels_design(TreePrior(3, "1/2"), 9), "9"),
        (lambda: tree.path_design(TreePrior(3, "1/2"), 4), "4"),
        (lambda: tree.path_design(TreePrior(3, "1/2"), -2), "-2"),
    ],
)
def test_helpers_bad_input(call, fragment):
    with pytest.raises(ValueError) as info:
        call()
    assert fragment in str(info.value)


def test_tree_loss_optimal_strategies():
    # full Bellman is covered in test_bellman; here the routing and the defaults L = B, d = 1
    assert tree.tree_loss(4, 2, "optimal", alpha="1/2").expr == sp.Rational(5, 32)
    assert tree.tree_loss(4, 2, "optimal", alpha="1/2", layers=1, width=2).expr == sp.Rational(5, 16)
    assert tree.tree_loss(4, 2, "optimal_nonadaptive", alpha="1/2").expr == sp.Rational(5, 16)
    assert tree.tree_loss(4, 0, "optimal", alpha="1/2").expr == sp.Rational(15, 8)
    f = tree.tree_loss(4, 4, "optimal", alpha="1/2", width=2)
    assert f.params == () and "L=2, d=2" in f.source


def test_enumeration_oracle_agrees_with_itself():
    # the two oracles (sympy enumeration, Fraction readings) agree on every design of depth 3
    prior = TreePrior(3, "1/3")
    for r in range(0, 8):
        for design in itertools.combinations(range(1, 8), r):
            assert as_fraction(tree._enumerate_design_loss(prior, design)) == design_loss_oracle(prior, design)


# --- top_levels at any budget: the closed sum over the depths ---------------------------------------------
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_top_levels_closed_form_equals_enumeration_at_every_budget_symbolic(depth):
    # every budget, not only B = 2^j - 1: the closed form (a sum over depths) equals the enumeration of the
    # 2^K leaves, exactly in the symbol alpha
    prior = symbolic_prior(depth)
    for budget in range(prior.n_nodes + 1):
        closed = tree.tree_loss(depth, budget, "top_levels").expr
        design = tree.top_levels_design(prior, budget)
        assert sp.simplify(closed - tree._enumerate_design_loss(prior, design)) == 0, budget
        assert sp.simplify(closed - tree.coordinate_design_loss(prior, design)) == 0, budget


@pytest.mark.parametrize("a", RATIONAL_ALPHAS + ("1/7", "9/10"))
@pytest.mark.parametrize("depth", [2, 3, 4, 5])
def test_top_levels_closed_form_equals_the_design_pass_rational(depth, a):
    prior = TreePrior(depth, a)
    for budget in range(prior.n_nodes + 1):
        closed = tree.top_levels_any_loss(prior, budget)
        assert closed.is_Rational
        assert closed == tree.coordinate_design_loss(prior, range(1, budget + 1)), budget


@pytest.mark.parametrize("scales", [(1, "1/2", "1/3"), (3, 2, 2, "1/5"), ("7/3", "7/3", 1, 1, "1/9")])
def test_top_levels_closed_form_general_scales(scales):
    prior = TreePrior(len(scales), scales=scales)
    for budget in range(prior.n_nodes + 1):
        closed = tree.tree_loss(prior.depth, budget, "top_levels", scales=scales).expr
        assert as_fraction(closed) == design_loss_oracle(prior, range(1, budget + 1)), budget


def test_top_levels_closed_form_by_hand():
    # K = 4, B = 2: levels 1 read, one of the two level-2 nodes read (probability 1/2 it is the path's):
    # alpha + alpha^2 + alpha^3 - alpha / 2
    assert sp.expand(tree.tree_loss(4, 2, "top_levels").expr - (alpha / 2 + alpha**2 + alpha**3)) == 0
    # deep trees at a budget not of the form 2^j - 1 (enumeration would visit 2^30 leaves)
    half = sp.Rational(1, 2)
    expected = sum(half**(k - 1) for k in range(3, 31)) - sp.Rational(2, 4) * half**2
    assert tree.tree_loss(30, 5, "top_levels", alpha="1/2").expr == expected


def test_every_strategy_of_tree_loss_has_one_formula_builder():
    """``tree_loss`` chooses its formula from a table keyed by name (no if-chain): each name it takes, its
    class-named spellings mapped, has one builder, and the table holds no other."""
    from fvsym.strategy_names import CLASS_NAMED, TREE_LOSS
    from fvsym.tree import FORMULAS, tree_loss

    assert set(FORMULAS) == {CLASS_NAMED.get(name, name) for name in TREE_LOSS}
    prior = TreePrior(3, "1/2")
    for name in TREE_LOSS:
        assert tree_loss(prior, budget=2, strategy=name).name == f"tree_loss_{CLASS_NAMED.get(name, name)}"
