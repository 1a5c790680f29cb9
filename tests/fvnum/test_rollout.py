"""The rollout policy (approximate noisy Bellman over the greedy policy, issue 10 point 2): its kernel
agrees with the greedy kernel, and on common random numbers it is never worse than ``greedy_coordinate``
or ``path`` beyond 5 standard errors of the paired difference, and strictly better where lookahead pays."""
import fvnum
import numpy as np
import pytest

from fvnum.mc import _kernels
from fvnum.priors._kernels.coord import _coord_scratch
from fvnum.mc.channels import make_channel
from fvnum.policies.registry import STRATEGIES
from fvnum.mc.simulate import simulate
from fvnum.policies.policies import GreedyCoordinatePolicy, RolloutPolicy
from fvnum.priors.tree import numeric_prior
from fvsym.priors import TreePrior


def _losses(depth, alpha, budget, tau, names, samples, seed=0):
    """Per-sample losses of each named policy on the same draws (common random numbers)."""
    prior = TreePrior(depth, alpha)
    spec = numeric_prior(prior)
    channel = make_channel(spec, fvnum.gaussian(tau))
    out = {}
    for name in names:
        pol = STRATEGIES[name].policy(prior, budget, channel, seed=seed, threads=1)
        out[name] = simulate(spec, channel, pol, budget, samples=samples, seed=seed, threads=1, record=True).function_vectors.loss
    return out


def _paired(a, b):
    d = a - b
    return d.mean(), d.std(ddof=1) / np.sqrt(d.size)


def test_greedy_next_equals_the_greedy_kernel():
    """``_kernels._greedy_next`` (scratch in tuples) picks the node ``_greedy_coord_rows`` picks."""
    spec = numeric_prior(TreePrior(4, "1/2"))
    g = GreedyCoordinatePolicy(spec, 0.4, 4)
    rng = np.random.default_rng(3)
    for length in (0, 1, 2, 3):
        nodes = rng.integers(1, spec.dim + 1, size=(30, length))
        readings = rng.normal(0.0, 0.8, size=(30, length))
        want = np.zeros(30, dtype=np.int64)
        _kernels._greedy_coord_rows(nodes, readings, 0.4, spec.scales, g.gh_x, g.gh_w, True, want)
        cs, gs = _coord_scratch(spec.depth, 4), _kernels._greedy_scratch(spec.depth, 4)
        got = [_kernels._greedy_next(nodes[s], readings[s], 0.4, spec.scales, g.gh_x, g.gh_w, True, cs, gs)
               for s in range(30)]
        assert np.array_equal(got, want)


def test_one_candidate_is_the_greedy_policy():
    """With ``n_cand = 1`` the rollout keeps the greedy node everywhere: the same losses, sample by sample."""
    prior = TreePrior(3, "1/2")
    spec = numeric_prior(prior)
    channel = make_channel(spec, fvnum.gaussian(0.4))
    roll = RolloutPolicy(spec, 0.4, 3, n_cand=1, first_rollouts=64)
    greedy = GreedyCoordinatePolicy(spec, 0.4, 3)
    a = simulate(spec, channel, roll, 3, samples=300, seed=2, threads=1, record=True).function_vectors.loss
    b = simulate(spec, channel, greedy, 3, samples=300, seed=2, threads=1, record=True).function_vectors.loss
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

    fv = loss_mc(TreePrior(3, "1/2"), "rollout", 4, fvnum.tokens(40), samples=200, seed=1, record=True,
                 threads=1).function_vectors
    nodes = fv.nodes[:, :, 0]
    assert all(len(set(row)) == len(row) for row in nodes.tolist())


def test_table_score_equals_the_exponential_score():
    """The rollouts' greedy steps score a node from a table of likelihood ratios: the same number as
    ``_node_score`` (exponentials at every reading), for random Gram matrices, masses and depths."""
    from fvnum.mc._kernels.rollout import _ratio_table, _table_score

    spec = numeric_prior(TreePrior(5, "2/3"))
    g = GreedyCoordinatePolicy(spec, 0.35, 4)
    T = np.zeros((5, 3, g.gh_x.size, 3))
    _ratio_table(0.35, spec.scales, g.gh_x, T)
    rng = np.random.default_rng(1)
    for _ in range(200):
        k = int(rng.integers(0, 5))
        X = rng.normal(size=(3, 4))
        G = X @ X.T
        W3 = rng.dirichlet(np.ones(3)) * (rng.random(3) > 0.2)
        if W3.sum() == 0:
            continue
        W3 /= W3.sum()
        want = _kernels._node_score(spec.scales[k], 0.35, g.gh_x, g.gh_w, G, W3, np.zeros(3), np.zeros(3))
        got = _table_score(k, g.gh_w, T, G, W3)
        assert abs(got - want) <= 1e-12 * max(1.0, abs(want)), (got, want)


def test_top_candidates_by_branch_and_bound_are_the_best_scores():
    """The ``n_cand`` candidates found by branch and bound are the nodes of largest greedy score of the
    full scan (``_greedy_coord_scores``), best first, among the candidate classes."""
    from fvnum.mc._kernels.rollout import _ratio_table, _top_candidates

    spec = numeric_prior(TreePrior(6, "1/2"))
    tau = 0.4
    g = GreedyCoordinatePolicy(spec, tau, 5)
    T = np.zeros((6, 3, g.gh_x.size, 3))
    _ratio_table(tau, spec.scales, g.gh_x, T)
    rng = np.random.default_rng(4)
    cs, gs = _coord_scratch(6, 5), _kernels._greedy_scratch(6, 5)
    cand, score, leaf = np.zeros(4, np.int64), np.zeros(gs[4].shape[0]), np.zeros(8, np.int64)
    U = rng.random((8, 6))
    for length in (0, 1, 2, 3):
        nodes = rng.integers(1, 8, size=(20, length))
        readings = rng.normal(0.0, 0.8, size=(20, length))
        full = np.zeros((20, spec.dim))
        _kernels._greedy_coord_scores(nodes, readings, tau, spec.scales, g.gh_x, g.gh_w, full)
        for s in range(20):
            C = _top_candidates(nodes[s], readings[s], tau, spec.scales, g.gh_w, T, True, U, cs, gs, cand, score, leaf)
            got = full[s, cand[:C] - 1]
            assert np.all(np.diff(got) <= 1e-12), got  # best first
            top = np.sort(np.unique(np.round(full[s], 12)))[::-1][:C]  # the C best distinct scores
            assert got[0] == pytest.approx(full[s].max(), rel=1e-9, abs=1e-12)
            assert got[-1] >= top[-1] - 1e-9


def _largest_accepted(check, n_max):
    """The largest sample count in [2, n_max] that ``check(n)`` accepts (bisection; None if none)."""
    if not check(2):
        return None
    lo, hi = 2, n_max
    while hi - lo > max(1, lo // 50):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if check(mid) else (lo, mid)
    return lo


def _fits(fn):
    try:
        fn()
        return True
    except ValueError:
        return False


@pytest.mark.heavy
def test_rollout_size_accepted_under_a_cap_finishes_within_it():
    """``fv --max-seconds 3 mc --strategy rollout``: the largest sample count the guard accepts at depth 3,
    budget 8 runs in less CPU time than the cap (one thread), and a size 1.5 times larger is refused."""
    import time

    from fvnum.policies.prices import check_mc
    from fvsym.guards.limits import time_limit

    from ..test_limits import fv, one_line_error

    cap = 3.0
    spec = numeric_prior(TreePrior(3, "1/2"))
    with time_limit(cap):
        n = _largest_accepted(lambda m: _fits(lambda: check_mc(spec, budget=8, strategy="rollout", token_channel=False,
                                                                samples=m, threads=1)), 10**6)
    assert n is not None and n >= 20, n
    argv = ["--max-seconds", str(cap), "mc", "--depth", "3", "--budget", "8", "--strategy", "rollout", "--tau", "0.5",
            "--threads", "1", "--samples"]
    assert fv(*argv, "20")[0] == 0  # compile the kernels first: the cap prices the work, not a cold Numba cache
    t0 = time.process_time()
    code, out, err = fv(*argv, str(n))
    spent = time.process_time() - t0
    assert code == 0, err
    assert spent < cap, (n, spent)
    code, _, err = fv(*argv, str(int(1.5 * n) + 2))
    one_line_error(code, err, "rollout", "limit")
