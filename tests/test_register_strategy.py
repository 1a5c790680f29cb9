"""Extension points used from outside the package (issue 30, item 5): a toy strategy registered with
``fvnum.registry.register_strategy`` and a toy prior (a finite prior written in this file, registered with
``register_prior``) run through ``loss_mc``, ``patching_table`` and the exact noiseless Bellman solve, with no
edit inside fvnum; each checked against an independent reference."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from fvnum import loss_mc
from fvnum.atoms import FinitePrior, noiseless_bellman
from fvnum.priors import PRIORS, register_prior
from fvnum.registry import STRATEGIES, register_strategy, unregister_strategy
from fvnum.strategies import CallablePolicy
from fvsym import TreePrior
from fvsym.bellman import solve


def _toy_path(prior, channel, budget, *, layers, width, seed):
    """``path`` written by hand for depth-2 trees: node 1, then node 2 or 3 by the sign of the first reading."""
    if budget != 2 or getattr(prior, "depth", 2) != 2:
        raise ValueError(f"toy_path reads two nodes of a depth-2 tree, got budget {budget}")

    def rows(layer, phi):
        if layer == 0:
            return np.ones((phi.shape[0], 1), dtype=np.int64)
        return np.where(phi[:, 0] > 0, 2, 3).astype(np.int64)

    return CallablePolicy(rows, 2, 1, "toy_path")


@pytest.fixture
def toy_path():
    register_strategy("toy_path", "path by hand on depth-2 trees (a test's strategy)", _toy_path)
    try:
        yield "toy_path"
    finally:
        unregister_strategy("toy_path")


class Corners(FinitePrior):
    """A toy prior from outside the package: the 2^D corners of a box with side lengths ``sides``."""

    name = "toy_corners"

    def __init__(self, sides):
        sides = np.asarray(sides, dtype=float)
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=sides.size)))
        self._set(signs * sides, None)


@pytest.fixture
def corners():
    register_prior("toy_corners", Corners, summary="the corners of a box (a test's prior)")
    try:
        yield Corners
    finally:
        PRIORS.pop("toy_corners", None)


def test_a_registered_strategy_runs_through_loss_mc_as_the_builtin_it_copies(toy_path):
    """Same seed, same draws: the hand-written path equals the built-in one sample for sample."""
    prior = TreePrior(2, "1/2")
    mine = loss_mc(prior, toy_path, 2, tau=0.3, samples=4000, seed=3)
    builtin = loss_mc(prior, "path", 2, tau=0.3, samples=4000, seed=3)
    assert mine.value == builtin.value and mine.stderr == builtin.stderr
    assert toy_path in STRATEGIES


def test_a_registered_strategy_runs_through_patching(toy_path):
    from fvnum.patching import patching_table

    prior = TreePrior(2, "1/2")
    mine = patching_table(prior, 2, 0.2, strategy="policy", policy=_toy_path(prior, None, 2, layers=2, width=1,
                                                                             seed=0).fn, samples=2000, seed=1)
    builtin = patching_table(prior, 2, 0.2, strategy="path", samples=2000, seed=1)
    np.testing.assert_allclose(mine.loss, builtin.loss)


def test_register_strategy_refuses_what_it_cannot_hold(toy_path):
    for args, says in ((("path", "x", _toy_path), "registered already"), (("toy_path", "x", _toy_path),
                       "registered already"), (("not a name", "x", _toy_path), "identifier"),
                       (("fine", "x", 3), "callable")):
        with pytest.raises(ValueError, match=says):
            register_strategy(*args)
    with pytest.raises(ValueError, match="not added by register_strategy"):
        unregister_strategy("path")
    with pytest.raises(ValueError, match="toy_path reads two nodes"):
        loss_mc(TreePrior(3, "1/2"), toy_path, 2, tau=0.3, samples=10)


def test_a_strategy_whose_build_is_wrong_is_named():
    register_strategy("toy_wrong", "returns a function", lambda *a, **k: (lambda layer, phi: None))
    try:
        with pytest.raises(ValueError, match="not a fvnum.strategies.Policy"):
            loss_mc(TreePrior(2, "1/2"), "toy_wrong", 2, tau=0.3, samples=10)
    finally:
        unregister_strategy("toy_wrong")


def test_a_toy_prior_runs_loss_mc_and_the_exact_bellman_solve(corners, toy_path):
    """The corners of a box, a prior written here: the greedy policy's Monte Carlo and the noiseless Bellman value.
    Noiseless, a coordinate read of a corner reveals its sign there, so ``B`` reads leave the other ``D - B``
    coordinates unknown: the optimum is the sum of the ``D - B`` smallest squared sides (best: read the largest)."""
    sides = np.array([1.0, 0.7, 0.4, 0.2])
    prior = Corners(sides)
    for budget in (1, 2, 3):
        exact = float(np.sort(sides**2)[: sides.size - budget].sum())
        assert noiseless_bellman(prior, budget).value == pytest.approx(exact, abs=1e-12)
        assert loss_mc(prior, "greedy_coordinate", budget, tau=0.0, samples=500, seed=0).value == pytest.approx(
            exact, abs=1e-9)
    # the toy prior refuses the toy strategy in the strategy's own words (it is not a depth-2 tree)
    with pytest.raises(ValueError, match="toy_path"):
        loss_mc(prior, toy_path, 3, tau=0.1, samples=10)


def test_the_toy_prior_on_a_tree_s_leaves_is_the_tree():
    """The same machinery on the leaves of a depth-2 tree written as a toy finite prior equals fvsym's exact solve."""
    tree = TreePrior(2, "1/2")

    class Leaves(FinitePrior):
        name = "toy_leaves"

        def __init__(self):
            a = [1.0, 0.5**0.5]  # a_k^2 = alpha^(k - 1)
            self._set(np.array([[s1 * a[0], (s2 * a[1] if s1 > 0 else 0), (0 if s1 > 0 else s2 * a[1])]
                                for s1 in (1, -1) for s2 in (1, -1)]), None)

    for layers in (1, 2):
        assert noiseless_bellman(Leaves(), layers).value == pytest.approx(float(solve(tree, layers, 1).loss), abs=1e-12)
