"""Strategies that act (issue 59, item 2): a strategy object builds (``policy``), prices (``cost``) and describes
(``describe``) its own policy, with its options on the object (``using``). A user strategy written here, outside
the package, goes through the same path as the built-in ones: ``loss_mc``, the CLI's name registry, the price
guard. No dispatch on strategy names remains (the source scan at the end is a complement, not the evidence)."""
from __future__ import annotations

import ast
import importlib
import json
import pathlib

import numpy as np
import pytest

from fvnum import StrategyOptions, gaussian, loss_mc
from fvsym.guards.limits import time_limit
from fvnum.mc.channels import make_channel
from fvnum.mc.simulate import simulate
from fvnum.policies.builtin import BUILTIN
from fvnum.policies.policies import CallablePolicy, FixedDesign
from fvnum.mc.protocol import Policy
from fvnum.policies.registry import CLI_STRATEGIES, STRATEGIES, register_strategy, unregister_strategy
from fvnum.policies.strategies import Strategy
from fvnum.priors.tree import numeric_prior
from fvsym import TreePrior
from fvsym.errors import InputError

from tests._cli import fv

PRIOR = TreePrior(3, "1/2")
SECONDS_PER_SAMPLE = 1e-3  # the toy's own price: far above the engine's (top levels at depth 3: ~1e-7 s a sample)
KW = dict(channel=gaussian(0.2), samples=3000, seed=5, threads=1)


class FirstNodes(Strategy):
    """A user's strategy, written outside the package: the first ``B`` nodes in heap order (top levels by hand),
    with a price of its own; it reads no option (no layout: ``fv mc --layers`` is refused for it)."""

    takes = frozenset()

    def policy(self, prior, budget, channel, *, seed=0, threads=None):
        return FixedDesign(np.arange(1, budget + 1, dtype=np.int64), self.name)

    def cost(self, prior, channel, budget, samples, *, threads=1, **options):
        return SECONDS_PER_SAMPLE * samples


@pytest.fixture
def toy():
    s = register_strategy(FirstNodes("toy_first", "the first B nodes by hand (a test's strategy)", "coordinate",
                                     False))
    try:
        yield s
    finally:
        unregister_strategy("toy_first")
    assert "toy_first" not in STRATEGIES and "toy_first" not in CLI_STRATEGIES


def _channel(tau=0.2):
    spec = numeric_prior(PRIOR)
    return spec, make_channel(spec, gaussian(tau))


# --- a user strategy: the same path as the built-in ones ----------------------------------------------------------
def test_a_user_strategy_builds_prices_and_describes_its_policy_as_a_built_in_does(toy):
    spec, channel = _channel()
    assert STRATEGIES["toy_first"] is toy and toy.builds and toy.prices_itself
    mine, builtin = toy.policy(PRIOR, 2, channel), STRATEGIES["top_levels"].policy(PRIOR, 2, channel)
    assert isinstance(mine, Policy) and list(mine.design) == list(builtin.design) == [1, 2]
    assert toy.cost(spec, channel, 2, 1000) == pytest.approx(1.0)
    assert STRATEGIES["top_levels"].cost(spec, channel, 2, 1000) < 0.1  # the engine's price of the same reads
    assert toy.describe() == ("toy_first: the first B nodes by hand (a test's strategy) (coordinate class, "
                              "non-adaptive)")
    assert STRATEGIES["top_levels"].describe().startswith("top_levels: non-adaptive: the first B nodes")


def test_a_user_strategy_runs_in_loss_mc_by_name_and_by_object_with_the_numbers_of_its_built_in_twin(toy):
    twin = loss_mc(PRIOR, "top_levels", 2, **KW)
    for given in ("toy_first", toy):
        est = loss_mc(PRIOR, given, 2, **KW)
        assert (est.value, est.stderr) == (twin.value, twin.stderr)


def test_loss_mc_asks_the_object_for_its_policy_and_its_price_built_in_or_not(toy, monkeypatch):
    asked = []
    for cls in (FirstNodes, type(STRATEGIES["path"])):
        built = cls.policy
        monkeypatch.setattr(cls, "policy", lambda self, *a, _built=built, **k: asked.append(self.name) or
                            _built(self, *a, **k))
    loss_mc(PRIOR, "toy_first", 2, **KW)
    loss_mc(PRIOR, "path", 2, **KW)
    assert asked == ["toy_first", "path"]
    with time_limit(5), pytest.raises(ValueError, match=r"toy_first \(its own price\).*100000 samples"):
        loss_mc(PRIOR, "toy_first", 2, gaussian(0.2), samples=100_000, seed=0)


def test_a_user_strategy_is_a_choice_of_the_cli_and_runs_there(toy):
    assert "toy_first" in CLI_STRATEGIES
    args = ("mc", "--depth", 3, "--budget", 2, "--tau", 0.2, "--samples", 1000, "--format", "json")
    code, out, err = fv(*args, "--strategy", "toy_first")
    assert code == 0, err
    code_twin, out_twin, _ = fv(*args, "--strategy", "top_levels")
    got, twin = json.loads(out), json.loads(out_twin)
    assert code_twin == 0 and got["strategy"] == "toy_first" and (got["value"], got["stderr"]) == (
        twin["value"], twin["stderr"])
    code, out, err = fv("--max-seconds", 5, "mc", "--strategy", "toy_first", "--depth", 3, "--budget", 2, "--tau",
                        0.2, "--samples", 100_000)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "toy_first" in err
    code, out, err = fv(*args, "--strategy", "toy_first", "--layers", 2)  # its object takes no layout
    assert code == 2 and "--layers and --width apply to strategies optimal and bellman_noiseless" in err


def test_a_strategy_that_builds_no_policy_is_refused_at_registration():
    with pytest.raises(InputError, match="build must be callable .*or the strategy's class must define policy"):
        register_strategy(Strategy("toy_inert", "no policy"))
    assert "toy_inert" not in STRATEGIES


# --- options on the object -------------------------------------------------------------------------------------
def test_options_set_on_the_object_run_as_the_same_strategy_options():
    fixed = STRATEGIES["fixed"].using(design=[1, 2, 5])
    assert (loss_mc(PRIOR, fixed, 3, **KW).value
            == loss_mc(PRIOR, "fixed", 3, options=StrategyOptions(design=[1, 2, 5]), **KW).value)
    assert STRATEGIES["fixed"].design is None  # the registered object is left as it was
    layered = STRATEGIES["bellman_noiseless"].using(layers=2, width=2)
    assert (loss_mc(PRIOR, layered, 4, **KW).value
            == loss_mc(PRIOR, "bellman_noiseless", 4, options=StrategyOptions(layers=2, width=2), **KW).value)

    def rows(layer, phi):
        return np.full((phi.shape[0], 1), layer + 1, dtype=np.int64)

    mine = STRATEGIES["policy"].using(fn=rows, layers=2, width=1)
    assert (loss_mc(PRIOR, mine, 2, **KW).value
            == loss_mc(PRIOR, "policy", 2, options=StrategyOptions(policy=rows, layers=2), **KW).value)
    assert isinstance(mine.policy(PRIOR, 2, _channel()[1]), CallablePolicy)
    assert mine.describe().startswith("policy: ") and "fn=rows" in mine.describe() and "layers=2" in mine.describe()


def test_the_measurement_class_and_search_samples_are_options_of_the_design_search():
    _, channel = _channel()
    bare = STRATEGIES["optimal_nonadaptive"].using(measurement="coordinate", search_samples=200)
    named = STRATEGIES["optimal_nonadaptive_coordinate"].using(search_samples=200)
    a, b = (s.policy(PRIOR, 2, channel, seed=3, threads=1) for s in (bare, named))
    assert list(a.design) == list(b.design) and a.name == b.name == "optimal_nonadaptive"
    assert STRATEGIES["path"].using(measurement="unit").measurement == "coordinate"  # its class is what it is
    with pytest.raises(InputError, match="unknown measurement class 'diagonal'"):
        STRATEGIES["optimal_nonadaptive"].using(measurement="diagonal")
    with pytest.raises(InputError, match="unknown option 'samples'"):
        STRATEGIES["path"].using(samples=3)


# --- a finite prior's policies: by the pair of classes (prior, strategy), as register_kl -------------------------
ATOMS_KW = dict(channel=gaussian(0.3), samples=2000, seed=4, threads=1)


def _atoms():
    from fvnum.priors.atoms import AtomsPrior

    return AtomsPrior.draw(12, 4, seed=2)


def test_a_user_subclass_of_a_built_in_strategy_finds_its_policy_and_price_on_the_atoms_prior():
    """The atoms prior's greedy policy and its price are registered for (FinitePrior, GreedyCoordinate): a user's
    subclass, under its own name, finds them through its class's bases, on the built-in's path (same numbers)."""
    from fvnum.optimum.finite import finite_mc_seconds
    from fvnum.policies.builtin import GreedyCoordinate
    from fvnum.priors.analyses import analysis

    class Patient(GreedyCoordinate):
        pass

    prior, channel = _atoms(), make_channel(_atoms(), gaussian(0.3))
    mine = register_strategy(Patient("toy_patient", "greedy over coordinates, a user's subclass", "coordinate", True))
    try:
        assert analysis(prior, "policy", mine).func is analysis(prior, "policy", STRATEGIES["greedy_coordinate"]).func
        ours, builtin = loss_mc(prior, "toy_patient", 3, **ATOMS_KW), loss_mc(prior, "greedy_coordinate", 3, **ATOMS_KW)
        assert (ours.value, ours.stderr) == (builtin.value, builtin.stderr)
        assert finite_mc_seconds(prior, mine, 3, channel, 5000, 2) == finite_mc_seconds(prior, "greedy_coordinate", 3,
                                                                                        channel, 5000, 2)
        with pytest.raises(InputError, match="strategy 'toy_patient' has layers = budget and width = 1") as info:
            mine.using(layers=1, width=3).policy(prior, 3, channel)
        assert "\n" not in str(info.value)
    finally:
        unregister_strategy("toy_patient")


def test_a_policy_and_a_price_registered_for_the_finite_prior_and_a_user_strategy_class_are_found():
    """A user's Strategy subclass builds its own policy on the atoms prior (no pair: the prior builds none); a policy
    registered for (FinitePrior, its class) is then found for it and its subclasses, given the object itself, and
    so is a price, checked by loss_mc's guard."""
    from fvnum.priors.analyses import analysis, register_analysis, unregister_analysis
    from fvnum.priors.atoms import FinitePrior

    class Ordered(Strategy):
        """Coordinates 1..B in order (as top_levels), by its build."""

    class Later(Ordered):
        pass

    def ordered(prior, channel, budget, *, layers, width, seed):
        return FixedDesign(np.arange(1, budget + 1, dtype=np.int64), "toy_ordered")

    asked = []

    def backwards(prior, strategy, channel, budget, **options):
        asked.append(strategy)
        return FixedDesign(np.arange(budget, 0, -1, dtype=np.int64), strategy.name)

    prior = _atoms()
    mine = register_strategy(Ordered("toy_ordered", "coordinates 1..B in order", "coordinate", False, build=ordered))
    try:
        assert analysis(prior, "policy", mine)(mine, None, 3) is None  # the protocol's own method: it builds none
        own, twin = loss_mc(prior, "toy_ordered", 3, **ATOMS_KW), loss_mc(prior, "top_levels", 3, **ATOMS_KW)
        assert (own.value, own.stderr) == (twin.value, twin.stderr)
        register_analysis(FinitePrior, "policy", backwards, strategy=Ordered)
        register_analysis(FinitePrior, "mc_seconds", lambda prior, strategy, budget, channel, samples, threads:
                          samples * 1e-3, strategy=Ordered)  # a millisecond a sample
        assert analysis(prior, "policy", Later("toy_later", "a subclass", "coordinate", False)).func is backwards
        got = loss_mc(prior, "toy_ordered", 2, channel=gaussian(0.3), samples=2000, seed=4, threads=1)
        assert asked == [mine]  # the object itself
        fixed = loss_mc(prior, "fixed", 2, options=StrategyOptions(design=[2, 1]), **ATOMS_KW)
        assert (got.value, got.stderr) == (fixed.value, fixed.stderr)
        with time_limit(5), pytest.raises(ValueError, match=r"Monte Carlo of 'toy_ordered' on the atoms prior") as info:
            loss_mc(prior, "toy_ordered", 2, gaussian(0.3), samples=10_000, seed=4, threads=1)
        assert "\n" not in str(info.value)
        assert loss_mc(PRIOR, "toy_ordered", 2, **KW).value == loss_mc(PRIOR, "top_levels", 2, **KW).value  # a tree
    finally:
        unregister_analysis(FinitePrior, "policy", strategy=Ordered)
        unregister_analysis(FinitePrior, "mc_seconds", strategy=Ordered)
        unregister_strategy("toy_ordered")
    assert analysis(prior, "policy", mine)(mine, None, 3) is None


def test_the_atoms_prior_finds_each_built_in_strategy_s_policy_by_its_class():
    from fvnum.optimum import finite
    from fvnum.policies.builtin import GreedyCoordinate
    from fvnum.priors.analyses import analysis, register_analysis
    from fvnum.priors.atoms import FinitePrior

    prior = _atoms()
    expected = {"greedy_coordinate": finite.greedy_coordinate_policy, "greedy_dense": finite.greedy_dense_policy,
                "optimal": finite.finite_optimal_policy, "fixed": finite.shared_policy,
                "top_levels": finite.shared_policy, "policy": finite.shared_policy}
    for s in BUILTIN:
        assert analysis(prior, "policy", s).func is expected.get(s.name, finite.refused_policy), s.name
    for args, kw, says in (((FinitePrior, "bounds", len), {"strategy": Strategy}, "registered for a prior class alone"),
                           ((FinitePrior, "policy", len), {"strategy": 3}, "a strategy class or 'module:Class'"),
                           ((FinitePrior, "policy", len), {"strategy": GreedyCoordinate}, "registered already")):
        with pytest.raises(InputError, match=says) as info:
            register_analysis(*args, **kw)
        assert "\n" not in str(info.value)
    assert analysis(prior, "policy", STRATEGIES["greedy_coordinate"]).func is finite.greedy_coordinate_policy


# --- no dispatch on names --------------------------------------------------------------------------------------
def test_every_built_in_strategy_builds_its_policy_by_its_own_method_and_the_old_builder_is_gone():
    for s in BUILTIN:
        assert STRATEGIES[s.name] is s and s.build is None and type(s).policy is not Strategy.policy
    registry = importlib.import_module("fvnum.policies.registry")
    assert not hasattr(registry, "build_policy")
    with pytest.raises(ImportError):
        importlib.import_module("fvnum.policies.objects")  # no forwarding module at the old path
    assert hasattr(importlib.import_module("fvnum.policies.policies"), "PathPolicy")
    assert importlib.import_module("fvnum.policies.strategies").Strategy is Strategy


# (file, source) comparisons of a strategy's name that dispatch nothing: a file-path kind named "path", a report
# of paired differences, the distillation's teacher names (not strategies)
NOT_DISPATCH = {("fvnum/cli.py", "opt.kind == 'path'"), ("fvnum/optimum/bracket.py", "'rollout' in runs"),
                ("bridges/training/distil.py", "teacher != 'path'")}


def _names(node) -> set:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(set(), *(_names(e) for e in node.elts))
    return set()


def test_no_library_module_compares_a_strategy_name_to_choose_what_to_do():
    """A complement of the tests above: no ``==``, ``!=``, ``in`` against a built-in strategy's name in fvnum or
    bridges, the prior objects included (a finite prior's policies and prices are found by the pair of classes,
    ``fvnum.priors.analyses``), nor in ``fvsym/tree.py`` (``tree_loss``'s formulas are a table keyed by name)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    names = {s.name for s in BUILTIN}
    found = []
    paths = [*sorted((root / "fvnum").rglob("*.py")), *sorted((root / "bridges").rglob("*.py")), root / "fvsym/tree.py", root / "fvsym/guards/costs.py"]
    for path in paths:
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(isinstance(o, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                     for o in node.ops):
                if set().union(*(_names(x) for x in (node.left, *node.comparators))) & names:
                    if (rel, ast.unparse(node)) not in NOT_DISPATCH:
                        found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert found == []
