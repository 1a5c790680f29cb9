"""The analyses of a prior found by its type (issue 59 item 5, as torch.distributions' register_kl): a prior samples
and scores; the rooms that own an analysis register it for the prior's class, and one public verb dispatches."""
import ast
from pathlib import Path

import numpy as np
import pytest

import fvnum
from fvnum.mc.channels import make_channel
from fvnum.priors.analyses import VERBS, analysis, register_analysis, unregister_analysis
from fvnum.priors.atoms import AtomsPrior, FinitePrior
from fvnum.priors.mixture import MixturePrior
from fvnum.priors.registry import Prior
from fvsym import TreePrior
from fvsym.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def test_a_finite_prior_samples_scores_and_keeps_its_moments_only():
    """FinitePrior holds its sampling, its exact decoder and its moments; its policies, optima, bracket, prices,
    theory rows and ridge baseline are found through the registry."""
    public = {n for n, v in vars(FinitePrior).items() if not n.startswith("_")}
    assert public == {"name", "dim", "n_atoms", "weights", "mean", "covariance", "second_moment", "eigenvalues",
                      "second_moment_matrix", "sample", "thetas", "log_posterior", "posterior_weights",
                      "posterior_means", "posterior_losses", "work_floats", "rotated", "to_dict"}
    p = AtomsPrior.draw(5, 3, seed=0)
    for verb in VERBS:
        found = analysis(p, verb)
        assert found is not None and not hasattr(type(p), verb) or verb in ("policy", "check_cost"), verb
    assert analysis(MixturePrior([p, p]), "bounds").func is analysis(p, "bounds").func  # a subclass finds its base's


def test_one_verb_dispatches_by_the_prior_s_class():
    from fvnum.optimum.atoms_dp import atoms_noisy_bellman
    from fvnum.optimum.noisy_dp import tree_noisy_bellman
    from fvnum.priors.tree import numeric_prior

    assert analysis(AtomsPrior.draw(4, 2, seed=1), "noisy_bellman").func is atoms_noisy_bellman
    assert analysis(numeric_prior(TreePrior(2, "1/2")), "noisy_bellman").func is tree_noisy_bellman
    p = AtomsPrior.draw(4, 2, seed=1)
    ours = fvnum.noisy_bellman(p, 1, fvnum.gaussian(0.5))
    assert ours.value == atoms_noisy_bellman(p, 1, make_channel(p, fvnum.gaussian(0.5))).value
    with pytest.raises(InputError, match="needs a tree prior or a finite prior"):
        fvnum.noisy_bellman(fvsym_gaussian(), 1, fvnum.gaussian(0.5))


def fvsym_gaussian():
    from fvsym import GaussianPrior

    return GaussianPrior([[1, 0], [0, 1]])


class _Toy(Prior):
    name = "toy"
    dim = 2

    def sample(self, n, rng):
        return rng.standard_normal((n, 2))

    def thetas(self, latents):
        return np.asarray(latents)

    def posterior_losses(self, channel, design, phi, latents):  # pragma: no cover (not run here)
        return np.zeros(len(latents))

    mean = np.zeros(2)
    covariance = np.eye(2)


def test_a_user_registers_an_analysis_for_a_prior_class_and_its_subclasses():
    class Sub(_Toy):
        pass

    @register_analysis(_Toy, "comparison_seconds")
    def toy_seconds(prior, budget, channel, **kw):
        return 1.5 * budget

    try:
        assert analysis(_Toy(), "comparison_seconds")(2, None) == 3.0
        assert analysis(Sub(), "comparison_seconds")(4, None) == 6.0
        with pytest.raises(InputError, match="registered already"):
            register_analysis(_Toy, "comparison_seconds", toy_seconds)
        register_analysis(_Toy, "comparison_seconds", "fvnum.finite_theory:finite_comparison_seconds", replace=True)
        from fvnum.finite_theory import finite_comparison_seconds

        assert analysis(Sub(), "comparison_seconds").func is finite_comparison_seconds  # loaded on first use
    finally:
        unregister_analysis(_Toy, "comparison_seconds")
    assert analysis(_Toy(), "comparison_seconds") is None
    assert analysis(_Toy(), "policy")(None, None, 1) is None  # the protocol's own method: no strategy of its own


def test_a_method_of_the_prior_s_own_class_comes_before_a_registered_base():
    class Own(AtomsPrior):
        def bounds(self, budget, channel, **kw):
            return "mine"

    p = Own(np.eye(3))
    assert analysis(p, "bounds")(1, None) == "mine"
    assert fvnum.bounds(p, 1, fvnum.gaussian(0.5), samples=100) == "mine"


@pytest.mark.parametrize("args,says", [(("not a class", "bounds"), "takes a prior class"),
                                       ((_Toy, "ridge"), "unknown analysis 'ridge'"),
                                       ((_Toy, "bounds", 3), "a callable or 'module:attribute'")])
def test_bad_registrations_are_refused_in_one_line(args, says):
    with pytest.raises(InputError, match=says) as info:
        register_analysis(*args)
    assert "\n" not in str(info.value)


def _top_level_names(path: Path) -> set:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


VERB_NAMES = ("noisy_bellman", "bounds", "comparison_table", "comparison_seconds", "mc_seconds", "best_adaptive",
              "loss_mc", "patching_table", "mean_state")


def test_the_verbs_are_defined_once():
    """``noisy_bellman``, ``bounds`` and ``comparison_table`` (once defined twice each, for the tree and for a finite
    prior) are each defined in one module of fvnum: one verb, whose implementations per prior have their own names
    (``tree_noisy_bellman``, ``atoms_noisy_bellman``, ``finite_bounds``, ``finite_comparison_table``)."""
    where = {}
    for path in sorted((ROOT / "fvnum").rglob("*.py")):
        for name in _top_level_names(path) & set(VERB_NAMES):
            where.setdefault(name, []).append(str(path.relative_to(ROOT)))
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert not twice, twice
    assert where["noisy_bellman"] == ["fvnum/optimum/noisy_dp.py"] and where["bounds"] == ["fvnum/optimum/bracket.py"]
    assert where["comparison_table"] == ["fvnum/theory.py"]
    for cls in (FinitePrior, AtomsPrior, MixturePrior):
        assert not set(vars(cls)) & set(VERB_NAMES), cls


def test_every_built_in_registration_names_a_function_that_exists():
    """The built-in analyses are registered by ``"module:attribute"`` (loaded on first use, so a low room names an
    analysis of a room above it without importing it): each one loads."""
    from fvnum.priors import analyses
    from fvnum.priors.tree import TreeSpec

    table = {(verb, klass): impl for verb, by in analyses._ANALYSES.items() for klass, impl in by.items()}
    pairs = {(verb, key): impl for verb, by in analyses._PAIRS.items() for key, impl in by.items()}
    alone = {verb for verb, klass in table if klass is FinitePrior}
    assert alone | {verb for verb, (klass, _) in pairs if klass is FinitePrior} == set(VERBS)
    assert "policy" not in alone  # a finite prior's policies are registered by the pair of classes only
    assert table[("noisy_bellman", TreeSpec)] == "fvnum.optimum.noisy_dp:tree_noisy_bellman"
    for (verb, klass), impl in (*table.items(), *pairs.items()):
        if isinstance(impl, str):
            assert callable(analyses._load(impl)), (verb, klass, impl)
    for verb, (klass, kind) in pairs:  # the strategy classes named as "module:Class" load too
        assert isinstance(analyses._load(kind), type), (verb, klass, kind)
