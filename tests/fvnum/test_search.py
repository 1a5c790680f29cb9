"""Design and policy searches under noise."""
import fvnum
import itertools

import numpy as np
import pytest

from fvnum import best_adaptive, loss_mc, optimal_nonadaptive_coordinate, optimal_nonadaptive_unit
from fvnum.policies.search import coordinate_classes
from fvnum.guards.limits import count_classes
from fvsym import bellman
from fvsym import gaussian as fg
from fvsym import tree as ftree
from fvsym.priors import GaussianPrior, TreePrior

PRIOR = TreePrior(4, "1/2")


def _orbit_count(depth, budget):
    """Brute force: node subsets up to swapping the children of any internal node of depth < K."""
    D = 2**depth - 1
    swappable = [n for n in range(1, 2 ** (depth - 1))]

    def image(node, flips):
        # the node's path from the root, with the flipped choices applied
        bits, n = [], node
        while n > 1:
            bits.append(n & 1)
            n >>= 1
        bits.reverse()
        out, cur = 1, 1
        for b in bits:
            cur_flip = cur in flips
            out = 2 * out + (b ^ cur_flip)
            cur = 2 * cur + b
        return out

    seen, orbits = set(), 0
    for subset in itertools.combinations(range(1, D + 1), budget):
        key = frozenset(subset)
        if key in seen:
            continue
        orbits += 1
        for r in range(len(swappable) + 1):
            for flips in itertools.combinations(swappable, r):
                seen.add(frozenset(image(n, set(flips)) for n in subset))
    return orbits


@pytest.mark.parametrize("depth,budget", [(3, 0), (3, 1), (3, 2), (3, 3), (3, 4), (4, 2), (4, 3)])
def test_symmetry_classes_are_complete_and_distinct(depth, budget):
    classes = coordinate_classes(depth, budget)
    assert len(classes) == len(set(classes)) == _orbit_count(depth, budget) == count_classes(depth, budget)
    assert all(len(c) == budget and len(set(c)) == budget for c in classes)


def test_coordinate_search_finds_the_noiseless_optimum():
    loss, _ = bellman.optimal_nonadaptive(PRIOR, 3)
    found = optimal_nonadaptive_coordinate(PRIOR, 3, fvnum.gaussian(0.0), samples=4000, seed=1)
    nodes, est = tuple(found.design.tolist()), found.estimate
    exact = float(ftree.coordinate_design_loss(PRIOR, nodes))
    assert exact <= float(loss) + 5 * est.stderr
    assert abs(est.value - exact) <= 5 * est.stderr + 1e-12
    assert found.name == "optimal_nonadaptive_coordinate" and found.value == est.value
    assert found.design.dtype.kind == "i" and list(nodes) == sorted(nodes) and "exhaustive over the" in found.how
    assert found.to_dict()["design"] == list(nodes) and found.to_dict()["estimate"] == est.to_dict()
    assert "design: nodes " + ", ".join(map(str, nodes)) in repr(found)
    assert loss_mc(PRIOR, "fixed", 3, fvnum.gaussian(0.0), options=fvnum.StrategyOptions(design=nodes), samples=4000, seed=1) == est  # its policy, re-run


def test_coordinate_search_local_search_branch():
    """Forced off the exhaustive branch: greedy + swaps still reaches a good design at tau = 0."""
    loss, _ = bellman.optimal_nonadaptive(PRIOR, 2)
    found = optimal_nonadaptive_coordinate(PRIOR, 2, fvnum.gaussian(0.0), samples=4000, seed=2, max_exhaustive=0)
    assert "greedy forward selection" in found.how
    assert float(ftree.coordinate_design_loss(PRIOR, found.design.tolist())) <= float(loss) + 5 * found.estimate.stderr


def test_unit_design_beats_coordinate_designs_under_noise():
    found = optimal_nonadaptive_unit(PRIOR, 3, fvnum.gaussian(0.3), samples=3000, seed=3, restarts=2, maxiter=60)
    W, est = found.design, found.estimate
    assert W.shape == (3, 15) and found.policy.design is W and "L-BFGS" in found.how
    np.testing.assert_allclose(np.linalg.norm(W, axis=1), 1.0, atol=1e-12)
    top = loss_mc(PRIOR, "top_levels", 3, fvnum.gaussian(0.3), samples=3000, seed=3)  # same samples (EVAL stream)
    assert est.value < top.value - 5 * (est.stderr + top.stderr)
    again = loss_mc(PRIOR, "fixed", 3, fvnum.gaussian(0.3), options=fvnum.StrategyOptions(design=W), samples=3000, seed=3)
    assert again == est


def test_gaussian_unit_search_is_water_filling():
    prior = GaussianPrior.matched(TreePrior(3, "1/2"))
    W = optimal_nonadaptive_unit(prior, 2, fvnum.gaussian(0.5), samples=3000, seed=4).design
    from fvnum.priors import gaussian as G
    from fvnum.priors.tree import numeric_prior

    spec = numeric_prior(prior)
    exact = fg.water_filling(tuple(spec.eigenvalues.tolist()), 2, 0.5).loss
    assert abs(G.numeric_design_loss(spec, W, 0.5) - float(exact)) < 1e-12


def test_best_adaptive_dense_lookahead_beats_path():
    """THEORY.md section 7 (prototype): at the noise of N = 128 tokens, dense adaptive reads are far
    better than the path strategy on the depth-4 tree with budget 3."""
    tau = 0.12
    found = best_adaptive(PRIOR, 3, fvnum.gaussian(tau), samples=600, seed=5)
    name, est, scores = found.name, found.estimate, found.candidates
    assert set(scores) == {"path", "bellman_noiseless", "greedy_coordinate", "greedy_dense"}
    assert name == min(scores, key=lambda k: scores[k].value) == found.policy.name
    assert found.design is None and set(found.to_dict()["candidates"]) == set(scores)
    path = scores["path"]
    assert est.value < path.value - 5 * (est.stderr + path.stderr)


def test_best_adaptive_gaussian_is_water_filling():
    found = best_adaptive(GaussianPrior.isotropic(3), 2, fvnum.gaussian(0.5), samples=2000, seed=6)
    assert found.name == "optimal" and found.design.shape == (2, 3)
    assert abs(found.estimate.z(3 - 2 / (1 + 0.25))) < 5  # isotropic, B <= D: D - B / (1 + tau^2)


def test_search_bad_input():
    with pytest.raises(ValueError, match="budget 16 is too large"):
        optimal_nonadaptive_coordinate(PRIOR, 16, fvnum.gaussian(0.1), samples=10)
    with pytest.raises(ValueError, match="samples must be >= 2"):
        optimal_nonadaptive_unit(PRIOR, 2, fvnum.gaussian(0.1), samples=1)
    with pytest.raises(ValueError, match=r"channel must be a channel, fvnum.gaussian\(tau\) or fvnum.tokens\(N\), got 0.1"):
        best_adaptive(PRIOR, 2, 0.1, samples=10)
