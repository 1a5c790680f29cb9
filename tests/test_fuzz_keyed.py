"""Hostile inputs to the keyed theory rows (fvnum.keys.nonadaptive, fvnum.keys.adaptive, fvnum.theory.keyed_curves and
the --keyed option of fv compare): each gets one clear line (a ValueError in the library, exit 2 from the
CLI), refused before any search runs; the prices stay finite and positive on every size they accept."""
from fvnum.options import KeyedSearch
import fvnum
import contextlib
import io

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from bridges.cli import main
from fvnum.mc.channels import make_channel
from fvnum.keys.nonadaptive import best_nonadaptive_keyed, gaussian_keyed, keyed_memory, tokens_loss_mc
from fvnum.keys.adaptive import adaptive_keyed_losses, best_adaptive_keyed
from fvnum.guards.limits import keyed_cost
from fvnum.theory import keyed_curves
from fvsym.priors import GaussianPrior, TreePrior
from tests._cli import one_message

TREE = TreePrior(2, "1/2")  # D = 3
GAUSS = GaussianPrior.matched(TREE)
TOKENS = make_channel(TREE, fvnum.tokens(16))


def fv(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


NOT_A_BUDGET = st.one_of(st.integers(max_value=0), st.integers(min_value=4, max_value=10**30), st.booleans(),
                         st.floats(allow_nan=True).filter(lambda x: not (x == int(x) if np.isfinite(x) else False)),
                         st.text(max_size=20), st.none(), st.just(sp.Rational(3, 2)), st.just(np.float64(0.5)))


@given(NOT_A_BUDGET)
def test_keyed_curves_refuse_a_bad_budget_in_one_line(budget):
    with pytest.raises(ValueError) as e:
        keyed_curves(TREE, [1, budget], TOKENS, "weighted", samples=50)
    one_message(e, "budget")


@given(NOT_A_BUDGET)
def test_one_layer_search_refuses_a_bad_budget_in_one_line(budget):
    with pytest.raises(ValueError) as e:
        best_nonadaptive_keyed(TREE, budget, fvnum.tokens(16, keys="weighted"), samples=50)
    one_message(e, "budget")


@given(st.one_of(st.text(max_size=30), st.integers(), st.none(), st.just("none"), st.just("Weighted")))
def test_unknown_families_are_refused(family):
    with pytest.raises(ValueError) as e:
        keyed_curves(TREE, [1], TOKENS, family, samples=50)
    one_message(e, "key family")


@pytest.mark.parametrize("call,fragment", [
    (lambda: keyed_curves(TREE, [], TOKENS, "weighted", samples=50), "at least one budget"),
    (lambda: keyed_curves(TREE, "12", TOKENS, "weighted", samples=50), "budget"),
    (lambda: keyed_curves(TREE, 3, TOKENS, "weighted", samples=50), "budgets"),
    (lambda: keyed_curves(TREE, [1], make_channel(TREE, fvnum.gaussian(0.1)), "weighted"), "tokens channel"),
    (lambda: keyed_curves(TREE, [1], "tokens", "weighted"), "Channel"),
    (lambda: keyed_curves(TREE, [1], TOKENS, "weighted", samples=1), "samples"),
    (lambda: keyed_curves(TREE, [1], TOKENS, "weighted", samples=50, seed=-1), "seed"),
    (lambda: best_nonadaptive_keyed(TREE, 1, fvnum.tokens(128, s2=float("nan"))), "s2"),
    (lambda: best_nonadaptive_keyed(TREE, 1, fvnum.tokens(0)), "N"),
    (lambda: best_nonadaptive_keyed("tree", 1, fvnum.tokens(128)), "prior"),
    (lambda: best_nonadaptive_keyed(TREE, 1, 128), "channel must be a channel"),
    (lambda: best_nonadaptive_keyed(TREE, 1, "weighted"), "channel must be a channel"),
    (lambda: best_nonadaptive_keyed(TREE, 1, fvnum.gaussian(0.1)), "not the gaussian channel (tau = 0.1)"),
    (lambda: best_nonadaptive_keyed(TREE, 1, fvnum.tokens(16, keys=None)), "keys of a family"),
    (lambda: best_adaptive_keyed(TREE, 2, fvnum.gaussian(0.1)), "reads tokens"),
    (lambda: best_adaptive_keyed(TREE, 2, fvnum.tokens(16, keys="none")), "keys of a family"),
    (lambda: gaussian_keyed(GAUSS, 4, fvnum.tokens(128, keys="linear")), "at most D = 3"),
    (lambda: gaussian_keyed(TREE, 1, fvnum.tokens(128)), "Gaussian prior"),
    (lambda: gaussian_keyed(GAUSS, 1, fvnum.gaussian(0.1)), "reads tokens"),
    (lambda: tokens_loss_mc(TREE, None, fvnum.gaussian(0.1)), "reads tokens"),
    (lambda: adaptive_keyed_losses(GAUSS, 2, fvnum.tokens(128)), "tree prior"),
    (lambda: adaptive_keyed_losses(TREE, 4, fvnum.tokens(128)), "D = 3"),
    (lambda: adaptive_keyed_losses(TREE, 2, fvnum.gaussian(0.1)), "reads tokens"),
    (lambda: adaptive_keyed_losses(TREE, 2, fvnum.tokens(128), search=KeyedSearch(first="a design")), "SearchResult"),
    (lambda: adaptive_keyed_losses(TREE, 2, fvnum.tokens(128), search=KeyedSearch(engine="gpu")), "engine"),
    (lambda: adaptive_keyed_losses(TREE, 2, fvnum.tokens(128), search=KeyedSearch(node_step=-1.0)), "node_step"),
])
def test_bad_arguments_get_one_line(call, fragment):
    with pytest.raises(ValueError) as e:
        call()
    one_message(e, fragment)


def test_sympy_and_numpy_scalars_are_numbers():
    found = best_nonadaptive_keyed(TREE, np.int64(1), fvnum.tokens(sp.Integer(16), s2=sp.Rational(1, 100)),
                                   maxiter=3, restarts=1)
    assert np.isfinite(found.estimate.value) and found.estimate.value >= 0


@given(st.booleans(), st.integers(1, 12), st.lists(st.integers(1, 64), min_size=1, max_size=6),
       st.integers(2, 10**6))
def test_prices_are_finite_and_positive(tree, depth, budgets, samples):
    dim = 2**depth - 1
    budgets = [min(b, dim) for b in budgets]
    size = dict(tree=tree, depth=depth, dim=dim, budgets=budgets, samples=samples)
    seconds, memory = keyed_cost(**size), keyed_memory(**size)
    assert np.isfinite(seconds) and seconds > 0 and np.isfinite(memory) and memory > 0
    if not tree and max(budgets) <= 32:  # the Gaussian decoder works in chunks of bounded memory
        assert memory - keyed_memory(**{**size, "budgets": [1]}) < 200 * 2**20


@pytest.mark.parametrize("argv,fragment", [
    (["compare", "--model", "B", "--depth", "3", "--budget", "2", "--keyed", "mlp"], "--keyed"),
    (["compare", "--model", "B", "--depth", "3", "--budget", "2", "--keyed"], "--keyed"),
])
def test_cli_refuses_bad_keyed_options(argv, fragment):
    code, _, err = fv(*argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0], lines[0]


def test_a_channel_too_precise_for_the_quadrature_is_estimated_by_monte_carlo_not_misread():
    """At tokens N = 10^9 the readings' laws are far narrower than the B = 1 quadrature's step: the search reports a
    Monte Carlo estimate of its design (an achievable loss, below the prior's), never the quadrature's misreading
    (which gave the prior's loss, 1.875 at depth 4, before)."""
    from fvnum.keys.tree import GRID, mixture_loss, quadrature_resolves

    prior = TreePrior(4, "1/2")
    found = best_nonadaptive_keyed(prior, 1, fvnum.tokens(10**9, keys="weighted"), samples=500, seed=0)
    assert found.estimate.how.startswith("mc") and found.estimate.value < 0.875  # reading the root gives 0.875
    coarse = best_nonadaptive_keyed(prior, 1, fvnum.tokens(64, keys="weighted"), samples=500, seed=0)
    assert "quadrature" in coarse.estimate.how  # a resolved law keeps the exact rule
    thetas = np.array([[-1.0], [0.0], [1.0]])
    logw = np.log(np.full(3, 1 / 3))
    for sd, resolved in ((0.2, True), (1e-4, False)):
        mean, var = thetas[:, 0], np.full(3, sd**2)
        assert quadrature_resolves(mean, var, logw, 4 * GRID) is resolved
        if resolved:  # the rule equals a 64 times finer one
            assert abs(mixture_loss(mean, var, logw, thetas, grid=4 * GRID)
                       - mixture_loss(mean, var, logw, thetas, grid=256 * GRID)) < 1e-9


def test_the_real_tokens_check_is_priced_before_it_draws():
    """tokens_loss_mc draws N tokens a context: a job over the time cap is refused in one line before any draw, and
    its chunks of contexts keep the tokens in bounded memory (the check at N = 10^5 runs)."""
    from fvsym.errors import InputError, ResourceRefused
    from fvsym.guards.limits import time_limit

    prior = TreePrior(3, "1/2")
    found = best_nonadaptive_keyed(prior, 1, fvnum.tokens(64, keys="weighted"), samples=200, seed=0)
    with time_limit(5), pytest.raises(ResourceRefused, match="N = 1000000 tokens"):
        tokens_loss_mc(prior, found, fvnum.tokens(10**6), samples=1000)
    with pytest.raises(InputError, match="chunk must be >= 1"):
        tokens_loss_mc(prior, found, fvnum.tokens(64), chunk=0)
    assert np.isfinite(tokens_loss_mc(prior, found, fvnum.tokens(10**5), samples=20, seed=1).value)
