"""A budget far too large is named as the problem (issue 56 item 6): ``fv mc``, ``fv bounds`` and ``loss_mc`` say that
the budget, not the depth, does not fit, and say it within a second (the rollout's price is summed in closed form)."""
import fvnum
import time

import pytest

from fvsym.priors import TreePrior
from tests._cli import fv, one_line


@pytest.mark.parametrize("argv, words", [
    (["mc", "--tau", "0.1"], "the budget is the problem: strategy path reads at most K = 4"),
    (["bounds", "--tau", "0.1"], "the budget is the problem: strategy path reads at most K = 3"),
    (["mc", "--tau", "0.1", "--strategy", "rollout"], "the budget is the problem: the largest that fits here is"),
    (["mc", "--tau", "0.1", "--strategy", "greedy_coordinate"], "the budget is the problem"),
    (["mc", "--prior", "gaussian", "--cov", "isotropic", "--dim", "7", "--tau", "0.1"], "the budget is the problem"),
])
def test_a_huge_budget_is_named_as_the_problem(argv, words):
    start = time.monotonic()
    line = one_line(*fv(*argv, "--budget", "1000000000")[::2], words, "budget 1000000000")
    assert "no depth fits" not in line and time.monotonic() - start < 10


def test_loss_mc_names_the_budget_too():
    from fvnum import loss_mc

    with pytest.raises(ValueError, match="budget 1000000000 .* the budget is the problem") as info:
        loss_mc(TreePrior(4, "1/2"), "path", 10**9, fvnum.gaussian(0.1))
    assert "no depth fits" not in str(info.value)


def test_the_rollout_price_of_a_huge_budget_is_immediate():
    from fvnum.policies.policies import rollout_seconds

    start = time.monotonic()
    assert rollout_seconds(20, 10**9, 1000) > 1e20 and time.monotonic() - start < 0.1
