"""Issue 30, item 4's leftovers: a strategy given by name (or its registered object) to the policy builder, one
line for a name the registry does not hold; the noisy optimum priced beside its recursion and read through its
Strategy object like every other price; the channel's old spelling ``tokens=`` is gone (issue 59: a channel
object is the one way to give a channel)."""
import fvnum
import warnings

import pytest

from fvsym.errors import InputError, ResourceRefused
from fvsym.priors import TreePrior

from tests._cli import fv

PRIOR = TreePrior(3, "1/2")


def _spec_channel(prior=PRIOR, *, tau):
    from fvnum.mc.channels import make_channel
    from fvnum.priors.tree import numeric_prior

    spec = numeric_prior(prior)
    return spec, make_channel(spec, fvnum.gaussian(tau))


# --- a strategy by name (or its registered object) -------------------------------------------------------
@pytest.mark.parametrize("given", ["nope", ["path"], None, 3, "Path"])
def test_the_registry_refuses_what_it_does_not_hold_in_one_line_naming_its_names(given):
    from fvnum.policies.strategies import STRATEGIES, strategy_object

    with pytest.raises(InputError) as caught:
        strategy_object(given)
    line = str(caught.value)
    assert "\n" not in line and line.startswith("unknown strategy") and repr(given) in line
    assert all(name in line for name in STRATEGIES)


def test_the_registry_takes_a_registered_name_or_its_object_and_refuses_an_unregistered_object():
    from dataclasses import replace

    from fvnum import loss_mc
    from fvnum.policies.strategies import STRATEGIES, strategy_object

    spec, channel = _spec_channel(tau=0.2)
    by_name = strategy_object("top_levels").policy(PRIOR, 2, channel)
    by_object = strategy_object(STRATEGIES["top_levels"]).policy(PRIOR, 2, channel)
    assert type(by_name) is type(by_object) and list(by_name.design) == list(by_object.design) == [1, 2]
    stray = replace(STRATEGIES["path"], name="not_registered")
    with pytest.raises(InputError, match="strategy 'not_registered' is not registered.*registered: path, "):
        strategy_object(stray)
    kw = dict(channel=fvnum.gaussian(0.2), samples=500, seed=3, threads=1)
    assert loss_mc(PRIOR, STRATEGIES["path"], 2, **kw).value == loss_mc(PRIOR, "path", 2, **kw).value


# --- the noisy optimum's price, on its Strategy object --------------------------------------------------------
def test_the_noisy_optimum_is_priced_by_its_recursion_through_its_strategy_object():
    from fvnum.optimum import noisy_work
    from fvnum.policies.prices import mc_cost
    from fvnum.policies.strategies import STRATEGIES

    optimal = STRATEGIES["optimal"]
    assert optimal.price == "fvnum.optimum.noisy_work:mc_seconds"
    spec, noisy = _spec_channel(TreePrior(4, "1/2"), tau=0.3)
    for samples, threads in ((1000, 1), (10**6, 2)):
        want = (noisy_work.tree_solve_seconds(spec, 2, 0.3, threads, refine=False)
                + noisy_work.tree_policy_seconds(spec, 2, samples, 0.3, threads))
        assert optimal.cost(spec, noisy, 2, samples, threads=threads) == want
    # noiseless: the engine's price of the coordinate kernels and the solve, as before
    _, noiseless = _spec_channel(TreePrior(4, "1/2"), tau=0.0)
    want = mc_cost(depth=4, dim=15, budget=3, strategy="optimal", token_channel=False, samples=5000, threads=1)[1]
    assert optimal.cost(spec, noiseless, 3, 5000, threads=1) == want
    # a size the recursion does not solve (budget 4) is refused by the strategy, not by its price
    assert optimal.cost(spec, noisy, 4, 5000, threads=1) == mc_cost(
        depth=4, dim=15, budget=4, strategy="optimal", token_channel=False, samples=5000, threads=1)[1]


def test_a_too_dear_noisy_optimum_is_refused_in_the_librarys_words_and_fv_mc_adds_its_flag():
    from fvnum import loss_mc
    from fvsym.guards.limits import time_limit

    with time_limit(2):
        with pytest.raises(ResourceRefused) as caught:
            loss_mc(TreePrior(4, "1/2"), "optimal", 2, fvnum.gaussian(0.3), samples=10**8, seed=0)
    line = str(caught.value)
    assert "strategy optimal (its own price) at depth 4, budget 2 with 100000000 samples" in line
    assert "samples fit" in line and "time_limit(S)" in line and "fv " not in line and "\n" not in line
    code, out, err = fv("--max-seconds", 2, "mc", "--strategy", "optimal", "--depth", 4, "--budget", 2, "--tau", 0.3,
                        "--samples", 10**8)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "--max-seconds" in err and "samples fit" in err and "optimal" in err


# --- tokens=: the old spelling is gone ---------------------------------------------------------------------------
def _call(name: str, **channel):
    import numpy as np

    from fvnum import plot

    kw = dict(samples=400, seed=1)
    calls = {
        "loss_mc": lambda: fvnum.loss_mc(PRIOR, "path", 2, threads=1, **channel, **kw).value,
        "posterior_mean": lambda: fvnum.posterior_mean(PRIOR, np.array([1, 2]), np.array([[0.5, -0.2]]),
                                                       **channel).tolist(),
        "plot.curve": lambda: plot.curve("path", "path", [1, 2], prior=PRIOR, **channel, **kw).values,
        "patching_table": lambda: fvnum.patching_table(PRIOR, "path", 2, **channel, **kw).unpatched.value,
    }
    return calls[name]()


@pytest.mark.parametrize("name", ["loss_mc", "posterior_mean", "plot.curve", "patching_table"])
def test_the_channel_is_one_object_and_the_old_keywords_are_refused(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        value = _call(name, channel=fvnum.tokens(16))
    for old in (dict(tokens=16), dict(n_tokens=16), dict(tau=0.3)):
        with pytest.raises((TypeError, InputError)):  # an unknown keyword; plot.curve: no channel= given
            _call(name, **old)
    assert value == _call(name, channel=fvnum.tokens(16))


def test_the_library_and_fv_mc_never_warn():
    from bridges.runs.config import DataConfig
    from bridges.training.data import data_channel

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert data_channel(DataConfig(depth=3, n_tokens=16)).n_tokens == 16
        code, out, err = fv("mc", "--depth", 3, "--budget", 2, "--tokens", 16, "--samples", 200)
        assert code == 0 and "Deprecation" not in err, err


def test_a_sweep_of_fv_mc_cells_prices_the_noisy_optimum_by_its_strategy_object():
    from bridges.studies.sweep import _mc_cell_seconds, _mc_parser
    from fvnum.policies.prices import mc_cost
    from fvnum.policies.strategies import STRATEGIES

    args = _mc_parser().parse_args(["--strategy=optimal", "--depth=4", "--budget=2", "--tau=0.3", "--samples=100000",
                                    "--threads=1"])
    spec, noisy = _spec_channel(TreePrior(4, "1/2"), tau=0.3)
    want = STRATEGIES["optimal"].cost(spec, noisy, 2, 100_000, threads=1)
    engine = mc_cost(depth=4, dim=15, budget=2, strategy="optimal", token_channel=False, samples=100_000,
                     threads=1)[1]
    assert _mc_cell_seconds(args) == want and want > 2 * engine  # the recursion per sample, not the path kernel
