"""Extension points used from outside the package (issue 30, item 5): a toy strategy registered with
``fvnum.policies.registry.register_strategy`` and a toy prior (a finite prior written in this file, registered with
``register_prior``) run through ``loss_mc``, ``patching_table`` and the exact noiseless Bellman solve, with no
edit inside fvnum; each checked against an independent reference."""
from __future__ import annotations
import fvnum

import itertools

import numpy as np
import pytest

from fvnum import loss_mc
from fvnum.optimum.atoms_dp import noiseless_bellman
from fvnum.priors.atoms import FinitePrior
from fvnum.priors.registry import PRIORS, register_prior
from fvnum.policies.registry import STRATEGIES, register_strategy, unregister_strategy
from fvnum.policies.policies import CallablePolicy
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
    mine = loss_mc(prior, toy_path, 2, fvnum.gaussian(0.3), samples=4000, seed=3)
    builtin = loss_mc(prior, "path", 2, fvnum.gaussian(0.3), samples=4000, seed=3)
    assert mine.value == builtin.value and mine.stderr == builtin.stderr
    assert toy_path in STRATEGIES


def test_a_registered_strategy_runs_through_patching(toy_path):
    from fvnum.patching.keys import patching_table

    prior = TreePrior(2, "1/2")
    mine = patching_table(prior, "policy", 2, fvnum.gaussian(0.2), options=fvnum.StrategyOptions(policy=_toy_path(prior, None, 2, layers=2, width=1,
                                                                             seed=0).fn), samples=2000, seed=1)
    builtin = patching_table(prior, "path", 2, fvnum.gaussian(0.2), samples=2000, seed=1)
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
        loss_mc(TreePrior(3, "1/2"), toy_path, 2, fvnum.gaussian(0.3), samples=10)


def test_a_strategy_whose_build_is_wrong_is_named():
    register_strategy("toy_wrong", "returns a function", lambda *a, **k: (lambda layer, phi: None))
    try:
        with pytest.raises(ValueError, match="not a fvnum.policies.policies.Policy"):
            loss_mc(TreePrior(2, "1/2"), "toy_wrong", 2, fvnum.gaussian(0.3), samples=10)
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
        assert loss_mc(prior, "greedy_coordinate", budget, fvnum.gaussian(0.0), samples=500, seed=0).value == pytest.approx(
            exact, abs=1e-9)
    # the toy prior refuses the toy strategy in the strategy's own words (it is not a depth-2 tree)
    with pytest.raises(ValueError, match="toy_path"):
        loss_mc(prior, toy_path, 3, fvnum.gaussian(0.1), samples=10)


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


# --- a strategy as one object (issue 30, item 1): class, adaptivity, build, its own price, roles, figure label ---
TOY_SECONDS_PER_SAMPLE = 1e-3  # the toy's own price: far above the engine's (top levels at depth 3: ~1e-7 s)


def _toy_top_build(prior, channel, budget, *, layers, width, seed):
    from fvnum.policies.policies import FixedDesign

    return FixedDesign(np.arange(1, budget + 1, dtype=np.int64), "toy_top")


def _toy_top_price(prior, channel, budget, samples, *, threads):
    return TOY_SECONDS_PER_SAMPLE * samples


def _toy_path_strategy():
    from fvnum.policies.strategies import Strategy

    return Strategy("toy_path_obj", "path by hand on depth-2 trees, a candidate of best_adaptive", "coordinate", True,
                    build=_toy_path, roles=(("best_adaptive", 9),), max_budget="depth")


@pytest.fixture
def toy_top():
    """Top levels written outside the package as a Strategy object, with its own class, price, label and colour."""
    from fvnum.policies.strategies import Strategy

    before = (dict(STRATEGIES), tuple(_cli_names()), dict(_styles()))
    s = register_strategy(Strategy("toy_top", "the first B nodes, by hand (a test's strategy)", "coordinate", False,
                                   build=_toy_top_build, price=_toy_top_price, label="toy top levels", colour="C6"))
    try:
        yield s
    finally:
        unregister_strategy("toy_top")
        assert (dict(STRATEGIES), tuple(_cli_names()), dict(_styles())) == before  # the state restored


def _cli_names():
    from fvnum.policies.registry import CLI_STRATEGIES

    return CLI_STRATEGIES


def _styles():
    from bridges.studies.figures import STYLE

    return STYLE


def test_a_strategy_object_registered_from_outside_runs_and_says_what_it_is(toy_top):
    from fvnum.policies.strategies import Strategy

    assert isinstance(STRATEGIES["toy_top"], Strategy) and STRATEGIES["toy_top"] is toy_top
    assert (toy_top.measurement, toy_top.adaptive) == ("coordinate", False) and str(toy_top) == toy_top.description
    prior = TreePrior(3, "1/2")
    mine = loss_mc(prior, "toy_top", 2, fvnum.gaussian(0.2), samples=3000, seed=5)
    builtin = loss_mc(prior, "top_levels", 2, fvnum.gaussian(0.2), samples=3000, seed=5)
    assert mine.value == builtin.value and mine.stderr == builtin.stderr
    assert "toy_top" in _cli_names()


def test_a_strategy_object_is_priced_by_its_own_price_in_loss_mc_and_fv_mc(toy_top):
    from fvnum.mc.channels import make_channel
    from fvsym.guards.limits import time_limit
    from fvnum.priors.tree import numeric_prior

    from tests._cli import fv

    spec = numeric_prior(TreePrior(3, "1/2"))
    assert toy_top.cost(spec, make_channel(spec, fvnum.gaussian(0.2)), 2, 1000) == pytest.approx(1.0)
    # the engine would price top levels at depth 3 with 100,000 samples far below a second: a refusal is its price
    with time_limit(5):
        with pytest.raises(ValueError, match="toy_top .its own price.*100000 samples") as caught:
            loss_mc(TreePrior(3, "1/2"), "toy_top", 2, fvnum.gaussian(0.2), samples=100_000, seed=0)
    assert "at most" in str(caught.value)
    code, out, err = fv("--max-seconds", 5, "mc", "--strategy", "toy_top", "--depth", 3, "--budget", 2, "--tau", 0.2,
                        "--samples", 100_000)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "toy_top" in err and "--max-seconds" in err and "samples fit" in err
    code, out, err = fv("--max-seconds", 5, "mc", "--strategy", "toy_top", "--depth", 3, "--budget", 2, "--tau", 0.2,
                        "--samples", 1000)
    assert code == 0, err


def test_a_strategy_object_with_a_label_is_drawn_in_the_report_figure(toy_top, tmp_path, monkeypatch):
    from types import SimpleNamespace

    import bridges.studies.figures as figures

    assert figures.STYLE["toy_top"] == ("toy top levels", "C6")
    drawn = {}
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.setdefault("fig", fig) and [path])
    curves = [{"prior": "tree", "strategy": s, "noise": "N=16", "budget": b, "value": v + (s == "toy_top") / 10,
               "stderr": 0.01} for s in ("path", "toy_top") for b, v in ((1, 0.5), (2, 0.3))]
    figures.reproduction_figure(tmp_path / "f.png", curves, [], SimpleNamespace(n_tokens=16, depth=3, tree="alpha 1/2"))
    labels = [t.get_text() for ax in drawn["fig"].axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert "toy top levels, N=16" in labels and "path (adaptive, coordinate), N=16" in labels


def test_a_strategy_object_with_a_role_is_a_candidate_of_its_search():
    from fvnum.optimum.bracket import adaptive_candidates, best_adaptive

    s = register_strategy(_toy_path_strategy())
    try:
        assert adaptive_candidates()[-1] == s.name
        found = best_adaptive(TreePrior(2, "1/2"), 2, fvnum.gaussian(0.3), samples=2000, select_samples=500, seed=1)
        # same common random numbers, same reads: the hand-written path scores as the built-in one
        assert found.candidates[s.name].value == found.candidates["path"].value
        assert adaptive_candidates()[:4] == ("path", "bellman_noiseless", "greedy_coordinate", "greedy_dense")
    finally:
        unregister_strategy(s.name)
    assert s.name not in adaptive_candidates()


def test_register_strategy_refuses_a_strategy_object_it_cannot_hold():
    from fvnum.policies.strategies import Strategy

    for kw, says in ((dict(measurement="diagonal"), "measurement must be"), (dict(roles=(("nowhere", 0),)), "roles"),
                     (dict(price=3), "price must be callable"), (dict(max_budget="leaves"), "max_budget")):
        with pytest.raises(ValueError, match=says):
            Strategy("toy_bad", "x", **kw)
    with pytest.raises(ValueError, match="build must be callable"):
        register_strategy(Strategy("toy_bad", "no build"))
    with pytest.raises(ValueError, match="registered already"):
        register_strategy(Strategy("path", "x", build=_toy_path))
    with pytest.raises(ValueError, match="alone"):
        register_strategy(Strategy("toy_bad", "x", build=_toy_path), "x")
    assert "toy_bad" not in STRATEGIES


# --- the prices read from the objects equal the prices before them (fvnum.policies.prices.mc_cost, bridges.prices.cost) --------
OLD_PRICES = {  # (tree, depth, dim, strategy, budget, tokens, dense_design, threads): (bytes, seconds) before
    (True, 6, 63, "path", 4, True, False, 1): (301359808.0, 0.025425),
    (True, 6, 63, "rollout", 4, False, False, 2): (300913280.0, 2.459131136),  # a greedy step's 1.2 us (below)
    (True, 6, 63, "greedy_dense", 2, True, False, 1): (301335232.0, 15.4451595),
    (True, 6, 63, "optimal_nonadaptive", 4, True, True, 1): (301359808.0, 2.6079999999999997),
    (True, 6, 63, "optimal_nonadaptive", 4, True, False, 1): (301359808.0, 3.56464),
    (True, 10, 1023, "bellman_noiseless", 4, False, False, 2): (1360449254.9999998, 76.69811699999998),
    (True, 3, 7, "fixed", 2, False, True, 1): (300078272.0, 0.008),
    (True, 3, 7, "fixed", 2, False, False, 1): (300035264.0, 0.00045),
    (False, 0, 200, "greedy_dense", 4, False, False, 1): (302254848.0, 4845.24),
    (False, 0, 200, "rollout", 2, True, False, 2): (309234944.0, 2421.6475),
    (True, 6, 63, "a_name_not_registered", 2, True, False, 1): (301335232.0, 0.087625),
    (True, 6, 63, "greedy_coordinate", 4, True, False, 1): (301359808.0, 0.239625),
}
# The tree rows and the tree rollout above moved on 2026-12-07, when the constant of a rollout's greedy step went
# from 0.6 to 1.2 us (fvnum.policies.policies.rollout_step_seconds): 1.8476399359999998, 8.257011024 and
# 106.13143332 before it. The other prices are those from before the registry.
OLD_TABLE_SECONDS = {("tree", 3, 3): 9.553932624, ("tree", 6, 5): 113.63087652, ("gaussian", 6, 3): 1.16980705}


@pytest.mark.parametrize("case", sorted(OLD_PRICES, key=str))
def test_mc_cost_from_the_objects_equals_the_price_before_them(case):
    from fvnum.policies.prices import mc_cost

    tree, depth, dim, strategy, budget, tokens, dense, threads = case
    got = mc_cost(depth=depth if tree else None, dim=dim, budget=budget, strategy=strategy, token_channel=tokens, samples=5000,
                  threads=threads, dense_design=dense, search_samples=3000)
    assert got == pytest.approx(OLD_PRICES[case], rel=1e-12)


def test_the_comparison_table_price_equals_the_price_before_it():
    from bridges.runs.config import DataConfig
    from bridges.prices.cost import theory_table_seconds

    for (prior, depth, budget), seconds in OLD_TABLE_SECONDS.items():
        got = theory_table_seconds(DataConfig(prior=prior, depth=depth), budget, 20000, 2000)
        assert got == pytest.approx(seconds, rel=1e-12)


def test_a_strategy_s_cost_is_the_engine_s_price_without_one_of_its_own():
    from fvnum.mc.channels import make_channel
    from fvnum.policies.prices import mc_cost
    from fvnum.priors.tree import numeric_prior

    spec = numeric_prior(TreePrior(6, "1/2"))
    for name in ("path", "greedy_coordinate", "rollout", "bellman_noiseless"):
        for tau, tokens in ((0.2, None), (None, 64)):
            channel = make_channel(spec, fvnum.gaussian(tau) if tokens is None else fvnum.tokens(tokens, 0.01))
            want = mc_cost(depth=6, dim=63, budget=3, strategy=name, token_channel=tokens is not None,
                           samples=4000, threads=2)[1]
            assert STRATEGIES[name].cost(spec, channel, 3, 4000, threads=2) == want
