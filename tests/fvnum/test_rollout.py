"""The rollout policy (approximate noisy Bellman over the greedy policy, issue 10 point 2): its kernel
agrees with the greedy kernel, and on common random numbers it is never worse than ``greedy_coordinate``
or ``path`` beyond 5 standard errors of the paired difference, and strictly better where lookahead pays."""
import numpy as np
import pytest

from fvnum import _kernels
from fvnum.channels import make_channel
from fvnum.registry import build_policy
from fvnum.simulate import simulate
from fvnum.strategies import GreedyCoordinate, RolloutPolicy
from fvnum.tree import numeric_prior
from fvsym.priors import TreePrior


def _losses(depth, alpha, budget, tau, names, samples, seed=0):
    """Per-sample losses of each named policy on the same draws (common random numbers)."""
    prior = TreePrior(depth, alpha)
    spec = numeric_prior(prior)
    channel = make_channel(spec, tau, None, 0.01)
    out = {}
    for name in names:
        pol = build_policy(prior, spec, channel, name, budget, seed=seed, threads=1)
        out[name] = simulate(spec, channel, pol, budget, samples=samples, seed=seed, threads=1, record=True)[1].loss
    return out


def _paired(a, b):
    d = a - b
    return d.mean(), d.std(ddof=1) / np.sqrt(d.size)


def test_greedy_next_equals_the_greedy_kernel():
    """``_kernels._greedy_next`` (scratch in tuples) picks the node ``_greedy_coord_rows`` picks."""
    spec = numeric_prior(TreePrior(4, "1/2"))
    g = GreedyCoordinate(spec, 0.4, 4)
    rng = np.random.default_rng(3)
    for length in (0, 1, 2, 3):
        nodes = rng.integers(1, spec.dim + 1, size=(30, length))
        readings = rng.normal(0.0, 0.8, size=(30, length))
        want = np.zeros(30, dtype=np.int64)
        _kernels._greedy_coord_rows(nodes, readings, 0.4, spec.scales, g.gh_x, g.gh_w, True, want)
        cs, gs = _kernels._coord_scratch(spec.depth, 4), _kernels._greedy_scratch(spec.depth, 4)
        got = [_kernels._greedy_next(nodes[s], readings[s], 0.4, spec.scales, g.gh_x, g.gh_w, True, cs, gs)
               for s in range(30)]
        assert np.array_equal(got, want)


def test_one_candidate_is_the_greedy_policy():
    """With ``n_cand = 1`` the rollout keeps the greedy node everywhere: the same losses, sample by sample."""
    prior = TreePrior(3, "1/2")
    spec = numeric_prior(prior)
    channel = make_channel(spec, 0.4, None, 0.01)
    roll = RolloutPolicy(spec, 0.4, 3, n_cand=1, first_rollouts=64)
    greedy = GreedyCoordinate(spec, 0.4, 3)
    a = simulate(spec, channel, roll, 3, samples=300, seed=2, threads=1, record=True)[1].loss
    b = simulate(spec, channel, greedy, 3, samples=300, seed=2, threads=1, record=True)[1].loss
    assert np.array_equal(a, b)


def test_never_worse_than_greedy_or_path_and_better_than_greedy():
    """Depth 2, budget 2, alpha 1/2, tau 0.2: greedy reads node 2 first (its readings 0 and +-a_2 are
    confused), the rollout reads the root (as path does): about 0.04 below greedy, equal to path."""
    loss = _losses(2, "1/2", 2, 0.2, ("path", "greedy_coordinate", "rollout"), samples=4000)
    for other in ("path", "greedy_coordinate"):
        mean, se = _paired(loss["rollout"], loss[other])
        assert mean <= 5 * se + 1e-12, (other, mean, se)
    mean, se = _paired(loss["rollout"], loss["greedy_coordinate"])
    assert mean < -5 * se, (mean, se)


@pytest.mark.parametrize("depth,alpha,budget,tau", [(3, "1/4", 3, 0.5), (3, "4/5", 2, 0.8)])
def test_never_worse_beyond_noise(depth, alpha, budget, tau):
    loss = _losses(depth, alpha, budget, tau, ("path", "greedy_coordinate", "rollout"), samples=2000, seed=5)
    for other in ("path", "greedy_coordinate"):
        mean, se = _paired(loss["rollout"], loss[other])
        assert mean <= 5 * se + 1e-12, (other, mean, se)


@pytest.mark.slow
def test_strictly_better_than_both_at_depth_6():
    """Depth 6, budget 6, alpha 4/5, tau 0.3: below path and below greedy, each by more than 3 SE."""
    loss = _losses(6, "4/5", 6, 0.3, ("path", "greedy_coordinate", "rollout"), samples=4000)
    for other in ("path", "greedy_coordinate"):
        mean, se = _paired(loss["rollout"], loss[other])
        assert mean < -3 * se, (other, mean, se)


@pytest.mark.parametrize("key,value", [("n_rollouts", 1), ("first_rollouts", 0), ("n_cand", 0), ("n_cand", 2.5)])
def test_bad_settings_are_refused(key, value):
    spec = numeric_prior(TreePrior(2, "1/2"))
    with pytest.raises(ValueError, match=key):
        RolloutPolicy(spec, 0.3, 2, **{key: value})


def test_tokens_channel_reads_no_node_twice():
    """Under the tokens channel a repeated reading is the same statistic: the rollout, like greedy, never repeats."""
    from fvnum import loss_mc

    est, fv = loss_mc(TreePrior(3, "1/2"), "rollout", 4, tokens=40, samples=200, seed=1, return_phi=True, threads=1)
    nodes = fv.nodes[:, :, 0]
    assert all(len(set(row)) == len(row) for row in nodes.tolist())
