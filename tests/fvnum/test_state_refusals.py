"""A mean state carries its prior, strategy, budget and channel, and an injection refuses one drawn under others;
``mean_samples`` beside ``means`` and a thread count out of range are refused, never ignored (issue 56 item 6)."""
import fvnum
import pytest

from fvsym.priors import TreePrior
from fvnum.patching.state import injection_table, mean_state, state_patching_table

P = TreePrior(3, "1/2")


@pytest.fixture(scope="module")
def means():
    return mean_state(P, "path", 3, fvnum.gaussian(0.3), samples=400, seed=1)


def test_a_mean_state_says_what_it_was_drawn_under(means):
    assert dict(means.origin) == {"prior": "TreePrior(depth=3, alpha=1/2)", "strategy": "path", "budget": "3",
                                  "channel": "gaussian tau=0.3"}
    assert means.to_dict()["origin"] == dict(means.origin)
    table = injection_table(P, "path", 3, fvnum.gaussian(0.3), samples=50, means=means)  # its own arguments: taken
    assert table.mean_samples == 400 and table.strategy == "path"


@pytest.mark.parametrize("other, differs", [
    (dict(prior=TreePrior(3, "0.8")), "another prior: prior TreePrior(depth=3, alpha=4/5) (the injection's: "
                                      "TreePrior(depth=3, alpha=1/2))"),
    (dict(channel=fvnum.gaussian(0.5)), "another channel: channel gaussian tau=0.5 (the injection's: gaussian tau=0.3)"),
    (dict(channel=fvnum.tokens(16)), "another channel"),
    (dict(strategy="greedy_coordinate"), "another strategy: strategy greedy_coordinate"),
    (dict(budget=2, layers=(1, 2)), "another budget: budget 2"),
])
def test_a_mean_state_drawn_under_other_arguments_is_refused(other, differs):
    kw = dict(prior=P, strategy="path", budget=3, channel=fvnum.gaussian(0.3), samples=400, seed=2)
    kw.update(other)
    other_means = mean_state(kw.pop("prior"), kw.pop("strategy"), kw.pop("budget"), kw.pop("channel"), **kw)
    with pytest.raises(ValueError, match="the mean state was drawn under") as info:
        injection_table(P, "path", 3, fvnum.gaussian(0.3), samples=50, means=other_means, patch=fvnum.PatchSpec(layers=(1, 2)))
    message = str(info.value)
    assert differs in message and "\n" not in message, message


def test_mean_samples_beside_means_is_refused(means):
    with pytest.raises(ValueError, match="give means or mean_samples, not both"):
        injection_table(P, "path", 3, fvnum.gaussian(0.3), samples=50, means=means, patch=fvnum.PatchSpec(mean_samples=1000))


def test_a_mean_state_that_does_not_say_its_origin_is_refused(means):
    from dataclasses import replace

    with pytest.raises(ValueError, match="does not say its prior, strategy, budget and channel"):
        injection_table(P, "path", 3, fvnum.gaussian(0.3), samples=50, means=replace(means, origin=()))


@pytest.mark.parametrize("threads", [0, -3, 10**6, 1.5, True, "2"])
@pytest.mark.parametrize("table", [state_patching_table, injection_table, mean_state])
def test_threads_out_of_range_are_refused(table, threads):
    with pytest.raises(ValueError, match="threads must be"):
        table(P, "path", 3, fvnum.gaussian(0.3), samples=50, threads=threads)
