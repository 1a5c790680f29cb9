"""Hostile inputs where the engine asks a prior instead of its class (issue 30 item 1, ``fvnum.priors.capabilities.Capabilities``):
another prior's options on ``fv mc``, strategies and searches on a prior without the structure they need, a prior
that speaks the protocol without subclassing it. Each is one line (exit code 2 on the command line, a ValueError
in Python), never a traceback or a silent answer."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fvnum
from fvnum import loss_mc
from fvnum.optimum.atoms_dp import noiseless_bellman
from fvnum.priors.atoms import AtomsPrior
from fvnum.priors.registry import atoms_of
from fvnum.priors.capabilities import Capabilities, capability
from fvnum.priors.registry import Prior

from ._cli import examples, fv

# (prior and its own options, an option of another prior and its value)
FOREIGN = {
    ("--prior", "tree", "--depth", "3"): (("--cov", "isotropic"), ("--eigenvalues", "1,2"), ("--dim", "3"),
                                          ("--diversity", "3")),
    ("--prior", "gaussian", "--cov", "isotropic", "--dim", "3"): (("--diversity", "3"), ("--atoms", "a.npy")),
    ("--prior", "atoms", "--diversity", "3", "--dim", "2"): (("--depth", "3"), ("--alpha", "1/2"),
                                                             ("--scales", "1,1/2"), ("--cov", "isotropic"),
                                                             ("--eigenvalues", "1,2")),
}
CASES = [(own, foreign) for own, foreigns in FOREIGN.items() for foreign in foreigns]


@examples(10)
@given(case=st.sampled_from(CASES))
def test_another_priors_option_is_refused_in_one_line(case):
    own, (flag, value) = case
    code, out, err = fv("mc", *own, flag, value, "--strategy", "top_levels", "--budget", "1", "--tau", "1/2",
                        "--samples", "100")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, (code, err)
    assert flag in lines[0]


class Duck:
    """A prior speaking the protocol by its methods alone (no base class): none of the structures asked of it."""

    name = "duck"
    dim = 3
    mean = np.zeros(3)
    covariance = np.eye(3)
    eigenvalues = np.ones(3)

    def sample(self, n, rng):
        return rng.integers(0, 2, size=n)

    def thetas(self, latents):
        return np.asarray(latents, dtype=float)[:, None] * np.ones(3)

    def posterior_losses(self, channel, design, phi, latents):
        return np.zeros(len(latents))

    def policy(self, strategy, channel, budget, **options):
        return None


def test_capabilities_default_for_a_prior_without_the_base_class():
    duck = Duck()
    assert capability(duck, "heap_depth") is None and capability(duck, "linear_posterior") is False
    assert capability(duck, "decodes_nodes") is True and capability(duck, "coordinate_values") is None
    latents, theta = capability(duck, "draw_latents")(4, np.random.default_rng(0))
    assert latents.shape == (4,) and theta is None
    assert capability(duck, "check_floats")() is None
    for ask, says in ((lambda: atoms_of(duck), "has no atoms"), (lambda: noiseless_bellman(duck, 1), "has no atoms"),
                      (lambda: capability(duck, "exact_prior")(), "no exact")):
        with pytest.raises(ValueError, match=says) as info:
            ask()
        assert "\n" not in str(info.value)
    assert not isinstance(duck, Capabilities)


@pytest.mark.parametrize("strategy", ["greedy_coordinate", "bellman_noiseless", "optimal", "rollout"])
def test_a_strategy_of_the_tree_on_a_prior_without_its_nodes_is_refused_naming_the_prior(strategy):
    with pytest.raises(ValueError, match="duck prior") as info:
        loss_mc(Duck(), strategy, 2, fvnum.gaussian(0.3), samples=100)
    assert "\n" not in str(info.value)


def test_searches_of_another_structure_refuse_an_atoms_prior_in_one_line():
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed, gaussian_keyed

    prior = AtomsPrior.draw(5, 3, seed=2)
    for ask, says in ((lambda: best_nonadaptive_keyed(prior, 1, fvnum.tokens(16)), "not on the atoms prior"),
                      (lambda: gaussian_keyed(prior, 1, fvnum.tokens(16)), "for a Gaussian prior"),
                      (lambda: fvnum.bounds(prior, 1, fvnum.tokens(16), samples=100), "gaussian channel"),
                      (lambda: fvnum.posterior_mean(prior, [1, 4], np.zeros((1, 2)), fvnum.gaussian(0.5)), "node 4"),
                      (lambda: fvnum.posterior_mean(prior, [1, 2], np.array([[np.nan, 0.0]]), fvnum.gaussian(0.5)), "finite")):
        with pytest.raises(ValueError, match=says) as info:
            ask()
        assert "\n" not in str(info.value)


@examples(10)
@given(tau=st.floats(0.05, 3.0), seed=st.integers(0, 2**32 - 1))
def test_posterior_mean_of_a_prior_object_is_its_own_decoder(tau, seed):
    """``fvnum.posterior_mean`` asks the prior for its decoder: on atoms, the posterior weights (numpy) times the
    atoms, for node numbers and for unit rows alike."""
    rng = np.random.default_rng(seed)
    prior = AtomsPrior(rng.standard_normal((7, 3)))
    phi = rng.standard_normal((4, 2))
    nodes = np.array([3, 1])
    w = np.exp(-((phi[:, :, None] - prior.atoms.T[nodes - 1][None]) ** 2).sum(1) / (2 * tau * tau))
    ref = (w / w.sum(1, keepdims=True)) @ prior.atoms
    assert np.allclose(fvnum.posterior_mean(prior, nodes, phi, fvnum.gaussian(tau)), ref, atol=1e-12)
    rows = np.eye(3)[nodes - 1]
    assert np.allclose(fvnum.posterior_mean(prior, rows, phi, fvnum.gaussian(tau)), ref, atol=1e-12)
    assert isinstance(prior, Prior)
