"""loss_mc: determinism, thread independence, equivalent routes to the same numbers, the policy
protocol, function vectors, bounded memory and bad input."""
import fvnum
import numpy as np
import pytest

from fvnum import loss_mc, per_sample
from fvnum.mc.channels import make_channel
from fvnum.mc.simulate import blocks, draw_samples, run_policy, work_floats
from fvnum.policies.policies import FixedDesign, PathPolicy, TablePolicy
from fvnum.priors.tree import numeric_prior
from fvsym.bellman import PolicyNode
from fvsym.priors import GaussianPrior, TreePrior

PRIOR = TreePrior(4, "1/2")


def path_fn(layer, phi):
    """The path strategy written with the public protocol (vectorised)."""
    node = np.ones(phi.shape[0], dtype=np.int64)
    for l in range(layer):
        node = 2 * node + (phi[:, l, 0] < 0)
    return node[:, None]


@pytest.mark.parametrize("channel", [fvnum.gaussian(0.3), fvnum.tokens(64)])
def test_same_seed_same_numbers_whatever_the_threads(channel):
    spec = numeric_prior(PRIOR)
    n = 3 * blocks(spec, make_channel(spec, channel), PathPolicy(3), 3)["chunk"] + 17  # several chunks
    a = loss_mc(PRIOR, "path", 3, channel, samples=n, seed=11, threads=1)
    b = loss_mc(PRIOR, "path", 3, channel, samples=n, seed=11, threads=2)
    c = loss_mc(PRIOR, "path", 3, channel, samples=n, seed=12, threads=2)
    assert a == b
    assert a.value != c.value


def test_fused_path_kernel_equals_generic_engine():
    spec = numeric_prior(PRIOR)
    for channel in (make_channel(spec, fvnum.gaussian(0.4)), make_channel(spec, fvnum.tokens(32))):
        draws = draw_samples(spec, channel, 500, 3, np.random.default_rng(0))
        fused = PathPolicy(3).run(spec, channel, draws, 3)
        generic = run_policy(spec, channel, PathPolicy(3), draws)
        np.testing.assert_allclose(fused.loss, generic.loss, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(fused.phi, generic.phi)


def test_fused_greedy_kernel_equals_generic_engine_under_tokens():
    """The fused greedy kernel decodes its loss with the exact tokens decoder, as the layer-by-layer engine does."""
    from fvnum.policies.policies import GreedyCoordinatePolicy

    spec = numeric_prior(TreePrior(3, "1/2"))
    channel = make_channel(spec, fvnum.tokens(16))
    pol = GreedyCoordinatePolicy(spec, channel.tau, 3, allow_repeat=False)
    draws = draw_samples(spec, channel, 300, 3, np.random.default_rng(2))
    fused = pol.run(spec, channel, draws, 3)
    generic = run_policy(spec, channel, pol, draws)
    np.testing.assert_array_equal(fused.phi, generic.phi)
    np.testing.assert_allclose(fused.loss, generic.loss, rtol=1e-12, atol=1e-12)


def _path_as_table(node, depth, leaves, layers_left):
    """The path strategy as a fvsym PolicyNode decision tree."""
    if layers_left == 0 or len(leaves) == 1:
        return None
    half = len(leaves) // 2
    children = {(1,): _path_as_table(2 * node, depth, leaves[:half], layers_left - 1),
                (-1,): _path_as_table(2 * node + 1, depth, leaves[half:], layers_left - 1)}
    return PolicyNode((node,), children, tuple(leaves), 0)


@pytest.mark.parametrize("tau", [0.0, 0.35])
def test_table_policy_runs_a_decision_tree(tau):
    """A decision tree that encodes the path strategy gives the path strategy's numbers, with noise too
    (the maximum-posterior outcome of a +-a reading under a uniform belief is its sign)."""
    table = _path_as_table(1, 4, list(range(16)), 3)
    spec = numeric_prior(PRIOR)
    channel = make_channel(spec, fvnum.gaussian(tau))
    draws = draw_samples(spec, channel, 2000, 3, np.random.default_rng(1))
    a = run_policy(spec, channel, TablePolicy(table, spec, tau, 3, 1), draws)
    b = PathPolicy(3).run(spec, channel, draws, 3)
    np.testing.assert_array_equal(a.phi, b.phi)
    np.testing.assert_allclose(a.loss, b.loss, rtol=1e-12, atol=1e-15)  # the path kernel decodes on its chain


def test_user_policy_protocol():
    a = loss_mc(PRIOR, "policy", 3, fvnum.gaussian(0.3), options=fvnum.StrategyOptions(policy=path_fn), samples=3000, seed=2)
    b = loss_mc(PRIOR, "policy", 3, fvnum.gaussian(0.3), options=fvnum.StrategyOptions(policy=per_sample(lambda l, phi: path_fn(l, phi[None])[0])), samples=3000, seed=2)
    c = loss_mc(PRIOR, "path", 3, fvnum.gaussian(0.3), samples=3000, seed=2)
    assert a == b
    assert a.value == pytest.approx(c.value, rel=1e-12)


def test_user_policy_dense_rows_and_width():
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((2, 15))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    shared = loss_mc(PRIOR, "policy", 4, fvnum.gaussian(0.3), options=fvnum.StrategyOptions(policy=lambda l, phi: rows, layers=2, width=2), samples=2000, seed=4)
    stacked = loss_mc(PRIOR, "policy", 4, fvnum.gaussian(0.3), options=fvnum.StrategyOptions(policy=lambda l, phi: np.tile(rows, (phi.shape[0], 1, 1)), layers=2, width=2), samples=2000, seed=4)
    assert shared.value == pytest.approx(stacked.value, rel=1e-12)


@pytest.mark.parametrize("bad,match", [
    (lambda l, phi: np.ones((phi.shape[0], 2), dtype=int), "shape"),
    (lambda l, phi: np.full((phi.shape[0], 1), 16), "node 16"),
    (lambda l, phi: np.full((phi.shape[0], 1, 15), 0.5), "norm"),
    (lambda l, phi: np.ones((3, 15)), "shape"),
    (lambda l, phi: [["a"]], "layer 0"),
])
def test_policy_returning_bad_rows_is_a_clear_error(bad, match):
    with pytest.raises(ValueError, match=match):
        loss_mc(PRIOR, "policy", 2, fvnum.gaussian(0.3), options=fvnum.StrategyOptions(policy=bad), samples=100)


def test_function_vectors():
    est = loss_mc(PRIOR, "path", 3, fvnum.gaussian(0), samples=200, seed=5, record=True)
    fv = est.function_vectors
    assert est == loss_mc(PRIOR, "path", 3, fvnum.gaussian(0), samples=200, seed=5)  # recording changes no number
    assert loss_mc(PRIOR, "path", 3, fvnum.gaussian(0), samples=200, seed=5).function_vectors is None
    assert "function_vectors" not in est.to_dict()
    assert fv.phi.shape == (200, 3, 1) and fv.nodes.shape == (200, 3, 1) and fv.leaves.shape == (200,)
    assert fv.Phi(2).shape == (200, 2)
    spec = numeric_prior(PRIOR)
    # noiseless path: Phi_l determines the prefix s_1..s_l (THEORY.md section 9)
    np.testing.assert_array_equal(np.sign(fv.phi[:, :, 0]), spec.signs(fv.leaves)[:, :3])
    np.testing.assert_array_equal(fv.nodes[:, :, 0], spec.path_nodes(fv.leaves)[:, :3])
    assert fv.loss.mean() == pytest.approx(est.value, rel=1e-12)
    g = loss_mc(GaussianPrior.isotropic(3), "top_levels", 2, fvnum.gaussian(0.1), samples=50, seed=5, record=True).function_vectors
    assert g.theta.shape == (50, 3) and g.leaves is None


def test_depth_12_runs_in_bounded_chunks():
    prior = TreePrior(12, "1/2")
    spec = numeric_prior(prior)
    for channel in (make_channel(spec, fvnum.gaussian(0.2)), make_channel(spec, fvnum.tokens(64))):
        for pol in (PathPolicy(12), FixedDesign(np.eye(15, spec.dim)[:12])):
            layout = blocks(spec, channel, pol, 12)
            assert layout["chunk"] % layout["block"] == 0
            assert layout["chunk"] * work_floats(spec, channel, pol, 12) * 8 <= 32 * 2**20  # bytes per chunk
    est = loss_mc(prior, "path", 12, fvnum.gaussian(0.2), samples=2000, seed=6)
    assert 0 < est.value < float(prior.second_moment)


@pytest.mark.parametrize("kwargs,match", [
    (dict(strategy="path", budget=3, tau=0.1, samples=1), "samples must be >= 2"),
    (dict(strategy="path", budget=3, tokens=0), "tokens N must be >= 1"),
    (dict(strategy="path", budget=3, tau=-0.1), "tau must be >= 0"),
    (dict(strategy="path", budget=3, channel=0.1), r"channel must be a channel, fvnum.gaussian\(tau\) or fvnum.tokens"),
    (dict(strategy="path", budget=3, channel="tokens"), "channel must be a channel"),
    (dict(strategy="path", budget=5, tau=0.1), "budget 5 is too large"),
    (dict(strategy="top_levels", budget=16, tau=0.1), "budget 16 is too large"),
    (dict(strategy="fixed", budget=2, design=[1, 16], tau=0.1), "design node 16 is outside the tree"),
    (dict(strategy="fixed", budget=2, design=[1, 0], tau=0.1), "design node 0 is outside the tree"),
    (dict(strategy="fixed", budget=3, design=[1, 2], tau=0.1), "design has 2 nodes but budget is 3"),
    (dict(strategy="fixed", budget=1, design=np.ones((1, 15)), tau=0.1), "norm"),
    (dict(strategy="fixed", budget=1, tau=0.1), "needs a design"),
    (dict(strategy="nope", budget=1, tau=0.1), "unknown strategy 'nope'"),
    (dict(strategy="optimal", budget=3, layers=2, width=2, tau=0.1), "does not equal the budget"),
    (dict(strategy="policy", budget=3, tau=0.1), "needs policy"),
    (dict(strategy="path", budget=-1, tau=0.1), "budget must be >= 0"),
])
def test_bad_input(kwargs, match):
    kwargs = {"samples": 100, **kwargs}
    strategy, budget = kwargs.pop("strategy"), kwargs.pop("budget")
    options = {k: kwargs.pop(k) for k in ("design", "layers", "width") if k in kwargs}
    with pytest.raises(ValueError, match=match):
        channel = kwargs.pop("channel") if "channel" in kwargs else \
            fvnum.gaussian(kwargs.pop("tau")) if "tau" in kwargs else fvnum.tokens(kwargs.pop("tokens"))
        loss_mc(PRIOR, strategy, budget, channel, options=fvnum.StrategyOptions(**options), **kwargs)


def test_symbolic_prior_is_rejected():
    with pytest.raises(ValueError, match="numeric"):
        loss_mc(TreePrior(4), "path", 2, fvnum.gaussian(0.1), samples=10)
