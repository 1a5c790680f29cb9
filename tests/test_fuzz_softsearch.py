"""Hostile inputs to the adaptive softmax search (fvnum.keys.adaptive.adaptive_softmax_losses, its real-token
run adaptive_softmax_losses_mc, best_adaptive_keyed under softmax keys, keyed_curves' greedy row, and the
``fv`` commands that price it): each gets one clear line (a ValueError naming the value, exit code 2 on the
command line), refused before any search runs, never a traceback."""
import fvnum
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fvnum.estimate import Estimate, SearchResult
from fvnum.keys.adaptive import (adaptive_softmax_cost, adaptive_softmax_losses, adaptive_softmax_losses_mc,
                                  best_adaptive_keyed)
from fvnum.keys.families import SoftmaxKeys, WeightedKeys
from fvsym.errors import ResourceRefused
from fvsym.priors import GaussianPrior, TreePrior
from tests._cli import examples, one_message

TREE = TreePrior(2, "1/2")  # D = 3
SOFT = SearchResult("best_nonadaptive_keyed", Estimate(0.5, 0.0, 1, "exact"), "a one-key design", np.ones((1, 3)),
                    keys=SoftmaxKeys(np.ones((1, 3)), 0.1))
TWO = SearchResult("best_nonadaptive_keyed", Estimate(0.5, 0.0, 1, "exact"), "two keys", np.ones((2, 3)),
                   keys=SoftmaxKeys(np.ones((2, 3)), 0.1))
WEIGHTED = SearchResult("best_nonadaptive_keyed", Estimate(0.5, 0.0, 1, "exact"), "a weighted key", np.ones((1, 3)),
                        keys=WeightedKeys(np.ones((1, 3)), np.ones(3), 1.0))
SCORES = SearchResult("best_nonadaptive_keyed", Estimate(0.5, 0.0, 1, "exact"), "a score function", None,
                      keys=SoftmaxKeys.of_scores(lambda x: x[:, :1], 3, n_samples=100))
SEARCHES = (adaptive_softmax_losses, adaptive_softmax_losses_mc)


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("kwargs,fragment", [
    (dict(max_budget=0), "budget"),
    (dict(max_budget=4), "D = 3"),
    (dict(samples=0), "samples"),
    (dict(samples=1.5), "samples"),
    (dict(n_tokens=0), "tokens"),
    (dict(s2=-1.0), "s2"),
    (dict(s2=float("nan")), "s2"),
    (dict(seed=-1), "seed"),
    (dict(steps=0), "steps"),
    (dict(joint_steps=-1), "joint_steps"),
    (dict(grid=2), "grid"),
    (dict(chunk=0), "chunk"),
    (dict(first="a design"), "one-key softmax design"),
    (dict(first=WEIGHTED), "one-key softmax design"),
    (dict(first=TWO), "one-key softmax design"),
    (dict(first=SCORES), "one-key softmax design"),
])
def test_bad_arguments_get_one_line(search, kwargs, fragment):
    from fvnum.options import KeyedSearch

    kw = dict(max_budget=2, n_tokens=16, s2=0.01, samples=10, first=SOFT)
    kw.update(kwargs)
    knobs = {k: kw.pop(k) for k in ("first", "steps", "joint_steps", "grid", "chunk") if k in kw}
    with pytest.raises(ValueError) as e:
        channel = fvnum.tokens(kw.pop("n_tokens"), kw.pop("s2"), keys="softmax")
        search(TREE, kw.pop("max_budget"), channel, search=KeyedSearch(**knobs), **kw)
    one_message(e, fragment)


@pytest.mark.parametrize("search", SEARCHES)
def test_a_gaussian_prior_is_refused_in_one_line(search):
    with pytest.raises(ValueError) as e:
        search(GaussianPrior.matched(TREE), 2, fvnum.tokens(16, keys="softmax"), samples=10)
    one_message(e, "tree prior")
    with pytest.raises(ValueError) as e:
        best_adaptive_keyed(GaussianPrior.matched(TREE), 2, fvnum.tokens(16, keys="softmax"), samples=10)
    one_message(e, "tree prior")


@examples(10)
@given(depth=st.integers(6, 14), samples=st.integers(10**6, 10**9))
def test_absurd_sizes_are_priced_and_refused_in_one_line(depth, samples):
    assert adaptive_softmax_cost(depth, 2**depth - 1, 5, samples) > 3600
    for search in SEARCHES:
        with pytest.raises(ResourceRefused) as e:
            search(TreePrior(depth, "0.6"), 5, fvnum.tokens(64, keys="softmax"), samples=samples)
        one_message(e, "adaptive softmax search", "over the limit")


def test_keyed_curves_greedy_is_for_softmax_keys_only():
    from fvnum.mc.channels import make_channel
    from fvnum.theory import keyed_curves

    channel = make_channel(TREE, fvnum.tokens(16, s2=0.01))
    with pytest.raises(ValueError) as e:
        keyed_curves(TREE, [1, 2], channel, "weighted", samples=10, greedy=True)
    one_message(e, "greedy", "weighted")


def test_the_command_lines_price_of_softmax_rows_holds_the_adaptive_search():
    """bridges.prices.cost.keyed_seconds (what fv compare, the grid and the scaling study price before work) counts the
    adaptive softmax search, so a command refuses in one line when it would run past its cap."""
    from bridges.runs.config import DataConfig
    from bridges.prices.cost import keyed_seconds

    data = DataConfig(depth=4)
    assert keyed_seconds(data, [1, 2, 3, 4], 1000, "softmax") >= adaptive_softmax_cost(4, 15, 4, 1000)
