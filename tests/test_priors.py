"""The prior protocol and registry (issue 30 item 1, fvnum.priors.registry): every prior found by name, and a toy prior
registered from outside the package (this file) that runs through ``loss_mc`` with no edit inside fvnum."""
from __future__ import annotations
import fvnum

import math

import numpy as np
import pytest

from fvnum import loss_mc
from fvnum.priors.registry import PRIORS, Prior, PriorOption, cli_priors, is_prior_object, numeric, prior_entry, register_prior
from fvsym import TreePrior


class SignPrior(Prior):
    """A toy written against the protocol alone (no fvnum class but the base): ``theta = s v`` with a sign ``s``
    uniform in {-1, +1} and a fixed vector ``v``; its decoder ``E[s | phi] v`` in closed form (tanh)."""

    name = "toy_sign"

    def __init__(self, v):
        self.v = np.asarray(v, dtype=float)

    @property
    def dim(self):
        return self.v.size

    @property
    def mean(self):
        return np.zeros(self.dim)

    @property
    def covariance(self):
        return np.outer(self.v, self.v)

    def sample(self, n, rng):
        return rng.integers(0, 2, size=n) * 2 - 1

    def thetas(self, latents):
        return np.asarray(latents, dtype=float)[:, None] * self.v

    def posterior_losses(self, channel, design, phi, latents):
        design = np.asarray(design)
        if design.dtype.kind in "iu":
            W = np.zeros(design.shape[-1:] + (self.dim,))
            W[np.arange(design.shape[-1]), np.asarray(design).reshape(-1, design.shape[-1])[0] - 1] = 1.0
        else:
            W = design.reshape(-1, *design.shape[-2:])[0]
        u = W @ self.v  # the readings are s u + tau xi
        mean_s = np.tanh(phi @ u / channel.tau**2)
        return ((mean_s - np.asarray(latents)) ** 2) * (self.v @ self.v)

    def policy(self, strategy, channel, budget, **options):
        if strategy.name in ("fixed", "top_levels", "policy"):
            return None
        raise ValueError(f"strategy {strategy.name!r} does not apply to the toy prior")


@pytest.fixture
def toy():
    entry = register_prior("toy_sign", SignPrior, summary="a sign times a vector")
    try:
        yield entry
    finally:
        PRIORS.pop("toy_sign", None)


def test_the_registry_holds_every_prior_by_name():
    assert set(PRIORS) >= {"tree", "gaussian", "atoms", "mixture"}
    assert PRIORS["tree"].load() is TreePrior
    from fvnum.priors.atoms import AtomsPrior
    from fvnum.priors.mixture import MixturePrior

    assert PRIORS["atoms"].load() is AtomsPrior and PRIORS["mixture"].load() is MixturePrior
    assert {"tree", "gaussian", "atoms"} <= set(cli_priors()) and "mixture" not in cli_priors()
    assert [o.flag for o in PRIORS["atoms"].options] == ["--atoms", "--diversity", "--dim"]


def test_register_prior_refuses_what_it_cannot_hold(toy):
    for args, says in ((("toy_sign", SignPrior), "registered already"), (("not a name", SignPrior), "identifier"),
                       (("toy2", 3), "entry_point"), (("toy3", SignPrior), "PriorOption")):
        with pytest.raises(ValueError, match=says):
            register_prior(*args, options=("--x",) if args[0] == "toy3" else ())
    with pytest.raises(ValueError, match="unknown prior 'nope'"):
        prior_entry("nope")
    with pytest.raises(ValueError, match="no builder"):
        toy.build(None)
    again = register_prior("toy_sign", SignPrior, replace=True, options=(PriorOption("--v", "int"),))
    assert again.options[0].dest == "v"


def test_a_toy_prior_registered_outside_runs_through_loss_mc(toy):
    prior = PRIORS["toy_sign"].load()([1.0, 0.5])
    assert is_prior_object(prior) and numeric(prior) is prior
    tau = 0.7
    est = loss_mc(prior, "fixed", 1, fvnum.gaussian(tau), options=fvnum.StrategyOptions(design=[1]), samples=40_000, seed=0)
    # exact: E (tanh(y / tau^2) - s)^2 |v|^2 with y = s + tau xi (quadrature on a fine grid)
    y = np.linspace(1 - 12 * tau, 1 + 12 * tau, 40_001)
    dens = np.exp(-0.5 * ((y - 1) / tau) ** 2) / (math.sqrt(2 * math.pi) * tau)
    exact = float(np.trapezoid(dens * (np.tanh(y / tau**2) - 1) ** 2, y)) * 1.25
    assert abs(est.z(exact)) < 5
    rows = np.array([[0.6, 0.8]])
    est = loss_mc(prior, "fixed", 1, fvnum.gaussian(tau), options=fvnum.StrategyOptions(design=rows), samples=2000, seed=0, record=True)
    fv = est.function_vectors
    u = 0.6 + 0.4
    assert np.allclose(fv.loss, (np.tanh(fv.phi[:, 0, 0] * u / tau**2) - fv.leaves) ** 2 * 1.25)
    with pytest.raises(ValueError, match="does not apply to the toy prior"):
        loss_mc(prior, "path", 1, fvnum.gaussian(tau), samples=100)


def _toy_exact(tau: float) -> float:
    """``E (tanh(y / tau^2) - 1)^2 |v|^2`` for ``y = 1 + tau xi``, v = (1, 1/2): the toy's loss reading coordinate 1."""
    y = np.linspace(1 - 12 * tau, 1 + 12 * tau, 40_001)
    dens = np.exp(-0.5 * ((y - 1) / tau) ** 2) / (math.sqrt(2 * math.pi) * tau)
    return float(np.trapezoid(dens * (np.tanh(y / tau**2) - 1) ** 2, y)) * 1.25


def test_a_toy_prior_registered_outside_gets_a_comparison_table(toy):
    """fvnum.theory asks the prior (its covariance, its Gaussian of the same covariance, its decoder): the rows
    every prior has, held to closed forms (v = (1, 1/2), C = v v^T, tau = 0.7)."""
    from fvnum.theory import comparison_table

    prior, tau = SignPrior([1.0, 0.5]), 0.7
    table = comparison_table(prior, 1, fvnum.gaussian(tau), samples=4000, search_samples=500, dense=False)
    assert table.prior == "toy_sign"
    rows = {r.name: r for r in table.rows}
    assert set(rows) == {"top_levels", "top_levels_linear", "best_linear_nonadaptive", "gaussian_optimum"}
    top = rows["top_levels"]  # its own decoder, reading e_1
    assert top.stderr > 0 and abs(top.value - _toy_exact(tau)) < 5 * top.stderr
    # linear decoder reading e_1: tr C - (e_1^T C)(C e_1) / (C_11 + tau^2) = 1.25 - 1.25 / 1.49
    assert rows["top_levels_linear"].value == pytest.approx(1.25 - 1.25 / (1 + tau**2), rel=1e-12)
    # water-filling on the one eigenvalue 1.25 (the unit row v / |v|)
    assert rows["gaussian_optimum"].value == pytest.approx(1.25 - 1.25**2 / (1.25 + tau**2), rel=1e-12)
    assert rows["best_linear_nonadaptive"].value == pytest.approx(rows["gaussian_optimum"].value, rel=1e-12)


class FiniteSignPrior(SignPrior):
    """The toy with its two atoms ``-v, v`` (uniform) named, as a finite prior of the protocol has them."""

    @property
    def atoms(self):
        return np.stack([-self.v, self.v])

    @property
    def log_weights(self):
        return np.full(2, -math.log(2))


def test_a_toy_finite_prior_registered_outside_gets_a_bellman_solve():
    """The noiseless Bellman recursion over the partitions of the atoms (fvnum.priors.atoms) on the toy: the best
    coordinate is the one the two atoms differ on most, checked against brute force over every design."""
    from itertools import combinations

    from fvnum.optimum.atoms_dp import noiseless_bellman

    prior = FiniteSignPrior([0.0, 0.3, 2.0])
    none = noiseless_bellman(prior, 0)
    assert none.value == pytest.approx(float(prior.v @ prior.v), rel=1e-12) and none.design == ()
    one = noiseless_bellman(prior, 1)

    def brute(design):  # the atoms a design separates are resolved; else the loss is E||theta||^2
        return 0.0 if any(prior.v[d - 1] != 0 for d in design) else float(prior.v @ prior.v)

    assert one.value == min(brute(d) for d in combinations(range(1, 4), 1)) == 0.0
    assert one.design in ((2,), (3,))
    flat = FiniteSignPrior([0.0, 0.0, 0.0])  # nothing to read: every design ties at the prior's loss, 0
    assert noiseless_bellman(flat, 1).value == 0.0
