"""fvsym.bellman: the exact Bellman optimum against brute force (every policy / every design, no
symmetry, no pruning), the policy realising its own value, the theorems of THEORY.md §3 and §6 as
hypothesis properties, depth 5 at every budget, and bad input."""
from __future__ import annotations

import functools
import itertools
import json
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from fvsym import TreePrior, bellman, tree

from .test_tree import as_fraction, policy_cells, policy_loss_oracle, readings, set_loss, squared_scale_fractions

alphas = st.fractions(min_value=Fraction(1, 30), max_value=Fraction(29, 30), max_denominator=30)


# --- brute force: every adaptive policy / every fixed design ------------------------------------------
def brute_optimal(depth: int, a: str, layers: int, width: int) -> Fraction:
    return brute_optimal_weights(depth, tuple(squared_scale_fractions(TreePrior(depth, a))), layers, width)


@functools.cache
def brute_optimal_weights(depth: int, ws: tuple, layers: int, width: int):
    """min over all policies, each layer any ``width`` distinct nodes (constant readings included);
    ``ws``: the squared scales (Fractions, or floats)."""
    prior = TreePrior(depth, "1/2")  # only its structure (paths, leaves) is used
    leaves = prior.leaves()
    nodes = range(1, prior.n_nodes + 1)

    @functools.cache
    def V(S: frozenset, left: int) -> Fraction:
        members = [leaves[i] for i in sorted(S)]
        if left == 0:
            return set_loss(prior, ws, members)
        best = None
        for choice in itertools.combinations(nodes, width):
            cells: dict[tuple, set] = {}
            for i in S:
                cells.setdefault(readings(prior, leaves[i], choice), set()).add(i)
            total = sum(Fraction(len(c), len(S)) * V(frozenset(c), left - 1) for c in cells.values())
            best = total if best is None else min(best, total)
        return best

    return V(frozenset(range(prior.n_leaves)), layers)


@functools.cache
def brute_nonadaptive(depth: int, a: str, budget: int) -> Fraction:
    prior = TreePrior(depth, a)
    ws = squared_scale_fractions(prior)
    leaves = prior.leaves()
    best = None
    for design in itertools.combinations(range(1, prior.n_nodes + 1), budget):
        cells: dict[tuple, list] = {}
        for s in leaves:
            cells.setdefault(readings(prior, s, design), []).append(s)
        loss = sum((Fraction(len(c), len(leaves)) * set_loss(prior, ws, c) for c in cells.values()), Fraction(0))
        best = loss if best is None else min(best, loss)
    return best


@pytest.mark.parametrize("a", ["1/2", "1/3", "4/5"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_adaptive_optimum_equals_brute_force(depth, a):
    prior = TreePrior(depth, a)
    for layers in range(prior.n_nodes + 1):
        sol = bellman.solve(prior, layers, 1)
        assert as_fraction(sol.loss) == brute_optimal(depth, a, layers, 1), layers


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_adaptive_optimum_equals_brute_force_depth_4(layers):
    prior = TreePrior(4, "1/2")
    assert as_fraction(bellman.solve(prior, layers, 1).loss) == brute_optimal(4, "1/2", layers, 1)


@pytest.mark.parametrize("layers, width", [(2, 2), (3, 2), (2, 3)])
def test_wide_layers_equal_brute_force(layers, width):
    prior = TreePrior(3, "2/5")
    assert as_fraction(bellman.solve(prior, layers, width).loss) == brute_optimal(3, "2/5", layers, width)


@pytest.mark.parametrize("a", ["1/2", "1/3"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_nonadaptive_optimum_equals_brute_force(depth, a):
    prior = TreePrior(depth, a)
    for budget in range(prior.n_nodes + 1):
        loss, nodes = bellman.optimal_nonadaptive(prior, budget)
        assert as_fraction(loss) == brute_nonadaptive(depth, a, budget)
        assert len(nodes) == len(set(nodes)) <= budget
        assert tree.coordinate_design_loss(prior, nodes) == loss
        if budget:
            assert bellman.solve(prior, 1, budget).loss == loss


@pytest.mark.parametrize("budget", [1, 2, 3, 4, 13, 14])
def test_nonadaptive_optimum_equals_brute_force_depth_4(budget):
    prior = TreePrior(4, "1/2")
    loss, nodes = bellman.optimal_nonadaptive(prior, budget)
    assert as_fraction(loss) == brute_nonadaptive(4, "1/2", budget)
    assert tree.coordinate_design_loss(prior, nodes) == loss


@pytest.mark.slow
@pytest.mark.parametrize("budget", range(5, 13))
def test_nonadaptive_optimum_equals_brute_force_depth_4_middle(budget):
    loss, _ = bellman.optimal_nonadaptive(TreePrior(4, "1/3"), budget)
    assert as_fraction(loss) == brute_nonadaptive(4, "1/3", budget)


# --- the policy ----------------------------------------------------------------------------------------
def check_policy(prior: TreePrior, sol):
    """The policy attains its loss, every node's value is the loss of following it from its belief,
    children cover the belief exactly with positive-probability outcomes."""
    assert as_fraction(sol.loss) == policy_loss_oracle(prior, sol.policy)
    ws = squared_scale_fractions(prior)
    leaves = prior.leaves()

    def walk(node, layers_left):
        assert 1 <= len(node.nodes) <= sol.width and layers_left >= 1
        parts = []
        for reading, child in node.children.items():
            members = [i for i in node.belief if readings(prior, leaves[i], node.nodes) == reading]
            assert members, reading
            if child is not None:
                assert list(child.belief) == members
                walk(child, layers_left - 1)
            parts.append((reading, members, child))
        assert sorted(i for _, m, _ in parts for i in m) == list(node.belief)
        # value: expected terminal loss of following this subtree from this belief
        total = Fraction(0)
        for _, members, child in parts:
            if child is None:
                total += len(members) * set_loss(prior, ws, [leaves[i] for i in members])
            else:
                total += len(members) * as_fraction(child.value)
        assert as_fraction(node.value) == total / len(node.belief)

    walk(sol.policy, sol.layers)


@pytest.mark.parametrize("depth, layers, width", [(3, 2, 1), (3, 3, 1), (4, 3, 1), (4, 2, 2), (3, 2, 3), (4, 1, 5)])
def test_policy_attains_its_value(depth, layers, width):
    prior = TreePrior(depth, "1/2")
    check_policy(prior, bellman.solve(prior, layers, width))


def test_policy_navigation_and_views():
    prior = TreePrior(4, "1/2")
    sol = bellman.solve(prior, 3, 1)
    policy = sol.policy
    assert sol.loss == sp.Rational(1, 64) and sol.layers == 3 and sol.width == 1 and sol.n_states > 0
    # walk one leaf: the nodes returned are the ones the decision tree says
    for index, s in enumerate(prior.leaves()):
        node, history = policy, []
        while node is not None:
            assert policy.next_nodes(history) == node.nodes
            r = readings(prior, s, node.nodes)
            history.append(r)
            node = node.child(r)
        assert policy.next_nodes(history) == ()
    # a reading of probability zero somewhere in the tree is refused with a clear message
    stack = [((), policy)]
    while stack:
        history, node = stack.pop()
        missing = [r for r in [(1,), (-1,), (0,)] if r not in node.children]
        if missing:
            break
        stack.extend((history + (r,), c) for r, c in node.children.items() if c is not None)
    assert missing
    with pytest.raises(ValueError, match="probability zero"):
        policy.next_nodes(list(history) + [missing[0]])
    text = policy.describe()
    assert text.splitlines()[0].startswith(f"read node {policy.nodes[0]}") and str(policy) == text
    assert "stop" in text
    data = json.loads(json.dumps(policy.to_dict()))
    assert data["nodes"] == list(policy.nodes) and data["value"] == str(policy.value)
    assert len(data["children"]) == len(policy.children)
    first = data["children"][0]
    assert tuple(first["reading"]) in policy.children


def test_wide_policy_keys_have_one_sign_per_node():
    prior = TreePrior(3, "1/2")
    policy = bellman.solve(prior, 2, 2).policy
    assert len(policy.nodes) == 2
    assert all(len(k) == 2 and set(k) <= {-1, 0, 1} for k in policy.children)
    assert "read nodes" in policy.describe()


# --- theorems and THEORY.md's warning --------------------------------------------------------------------
def test_optimum_strictly_beats_path_and_top_levels():
    prior = TreePrior(4, "1/2")
    assert bellman.solve(prior, 2, 1).loss == sp.Rational(5, 32) < tree.tree_loss(4, 2, "path", alpha="1/2").expr
    loss, nodes = bellman.optimal_nonadaptive(prior, 2)
    assert loss == sp.Rational(5, 16) < tree.tree_loss(4, 2, "top_levels", alpha="1/2").expr
    assert 1 not in nodes  # the optimal pair avoids the root: zero readings are informative


@given(st.integers(1, 4), alphas, st.data())
def test_orderings(depth, a, data):
    prior = TreePrior(depth, a)
    E = prior.second_moment
    budget = data.draw(st.integers(0, prior.n_nodes), label="budget")
    opt = bellman.solve(prior, budget, 1).loss
    nonadaptive, nodes = bellman.optimal_nonadaptive(prior, budget)
    top = tree.tree_loss(depth, budget, "top_levels", alpha=a).expr
    assert 0 <= opt <= nonadaptive <= top <= E
    assert tree.coordinate_design_loss(prior, nodes) == nonadaptive
    if budget <= depth:
        assert opt <= tree.tree_loss(depth, budget, "path", alpha=a).expr
    if budget < prior.n_nodes:
        assert bellman.solve(prior, budget + 1, 1).loss <= opt
        assert bellman.optimal_nonadaptive(prior, budget + 1)[0] <= nonadaptive


@given(st.integers(2, 3), alphas, st.integers(1, 3), st.integers(1, 3))
def test_adaptivity_orderings_mixed(depth, a, layers, width):
    prior = TreePrior(depth, a)
    if layers * width > prior.n_nodes:
        layers = 1
    deep = bellman.solve(prior, layers * width, 1).loss
    mixed = bellman.solve(prior, layers, width).loss
    shallow = bellman.optimal_nonadaptive(prior, layers * width)[0]
    assert deep <= mixed <= shallow


def test_irrational_alpha_and_scales():
    a = sp.sqrt(2) / 2
    prior = TreePrior(3, a)
    weights = [float(a) ** k for k in range(3)]
    for layers in range(4):
        sol = bellman.solve(prior, layers, 1)
        assert sol.loss.is_number and not sol.loss.is_Float
        # same cells as the rational-alpha policy would give: evaluate its partition in floats
        cells = policy_cells(prior, sol.policy) if sol.policy else [prior.leaves()]
        assert abs(float(sol.loss) - _float_partition_loss(prior, weights, cells)) < 1e-12
        assert abs(float(sol.loss) - brute_optimal_weights(3, tuple(weights), layers, 1)) < 1e-12
    wide = bellman.solve(prior, 2, 2)
    assert abs(float(wide.loss) - _float_partition_loss(prior, weights, policy_cells(prior, wide.policy))) < 1e-12
    assert abs(float(wide.loss) - brute_optimal_weights(3, tuple(weights), 2, 2)) < 1e-12
    loss, nodes = bellman.optimal_nonadaptive(prior, 2)
    assert sp.simplify(loss - tree.coordinate_design_loss(prior, nodes)) == 0
    scaled = TreePrior(3, scales=[1, "1/2", "1/3"])
    sol = bellman.solve(scaled, 2, 1)
    assert as_fraction(sol.loss) == policy_loss_oracle(scaled, sol.policy)
    assert sol.loss == sp.Rational(1, 36)


def _float_partition_loss(prior, weights, cells) -> float:
    total = 0.0
    nodes = range(1, prior.n_nodes + 1)
    for cell in cells:
        rows = [readings(prior, s, nodes) for s in cell]
        for n in nodes:
            col = [r[n - 1] for r in rows]
            mean = sum(col) / len(col)
            total += weights[n.bit_length() - 1] * sum((x - mean) ** 2 for x in col)
    return total / prior.n_leaves


# --- depth 5 at every budget ------------------------------------------------------------------------------
def test_depth_5_every_budget():
    prior = TreePrior(5, "1/2")
    previous = (prior.second_moment,) * 2
    for budget in range(prior.n_nodes + 1):
        deep = bellman.solve(prior, budget, 1).loss
        shallow = bellman.solve(prior, 1, budget).loss if budget else prior.second_moment
        nonadaptive, _ = bellman.optimal_nonadaptive(prior, budget)
        assert shallow == nonadaptive
        assert 0 <= deep <= shallow <= tree.tree_loss(5, budget, "top_levels", alpha="1/2").expr
        assert deep <= previous[0] and shallow <= previous[1]
        if budget <= 5:
            assert deep <= tree.tree_loss(5, budget, "path", alpha="1/2").expr
        previous = (deep, shallow)
    for layers, width in [(2, 2), (3, 2), (2, 3)]:
        mixed = bellman.solve(prior, layers, width).loss
        shallow = bellman.optimal_nonadaptive(prior, layers * width)[0]
        assert bellman.solve(prior, layers * width, 1).loss <= mixed <= shallow


def test_depth_5_policy_attains_its_value():
    prior = TreePrior(5, "1/3")
    sol = bellman.solve(prior, 4, 1)
    assert as_fraction(sol.loss) == policy_loss_oracle(prior, sol.policy)
    assert sol.loss < tree.tree_loss(5, 4, "path", alpha="1/3").expr


# --- bad input ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda: bellman.solve(TreePrior(3), 2, 1), "alpha"),
        (lambda: bellman.solve(TreePrior(3, "1/2"), -1, 1), "-1"),
        (lambda: bellman.solve(TreePrior(3, "1/2"), 2, -3), "-3"),
        (lambda: bellman.solve(TreePrior(3, "1/2"), 4, 2), "8"),
        (lambda: bellman.solve("tree", 1, 1), "str"),
        (lambda: bellman.optimal_nonadaptive(TreePrior(3, "1/2"), 8), "8"),
        (lambda: bellman.optimal_nonadaptive(TreePrior(3, "1/2"), -1), "-1"),
        (lambda: bellman.optimal_nonadaptive(TreePrior(2), 1), "alpha"),
    ],
)
def test_bad_input(call, fragment):
    with pytest.raises(ValueError) as info:
        call()
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_zero_budget():
    prior = TreePrior(3, "1/2")
    sol = bellman.solve(prior, 0, 1)
    assert sol.loss == prior.second_moment and sol.policy is None
    assert bellman.optimal_nonadaptive(prior, 0) == (prior.second_moment, ())
