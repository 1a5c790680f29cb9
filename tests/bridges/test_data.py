"""Contexts in torch agree with the fvsym priors (one source of truth) and with THEORY.md section 1."""
import math

import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from bridges.runs.config import DataConfig
from bridges.training.data import ContextSampler, leaf_index, path_nodes, step_generator
from fvsym.priors import GaussianPrior, TreePrior

torch.set_num_threads(1)


def _second_moments_match(theta: torch.Tensor, C) -> None:
    """Empirical E[theta theta^T] and E[theta] equal the prior's within 5 standard errors, entry by entry."""
    theta = theta.double()
    n = theta.shape[0]
    prods = theta[:, :, None] * theta[:, None, :]  # (n, D, D)
    mean, se = prods.mean(0), prods.std(0) / math.sqrt(n)
    C = torch.tensor([[float(C[i, j]) for j in range(C.cols)] for i in range(C.rows)], dtype=torch.float64)
    assert torch.all((mean - C).abs() <= 5 * se), (mean - C).abs().max()
    assert torch.all(theta.mean(0).abs() <= 5 * theta.std(0) / math.sqrt(n))


@pytest.mark.parametrize("depth,alpha", [(3, 0.5), (4, 0.3)])
def test_tree_theta_covariance_is_the_priors(depth, alpha):
    cfg = DataConfig(prior="tree", depth=depth, alpha=alpha)
    s = ContextSampler(cfg)
    theta, signs = s.sample_theta(40_000, step_generator(1, 0, 0))
    _second_moments_match(theta, TreePrior(depth, sp.Rational(str(alpha))).covariance)


@pytest.mark.parametrize("cov", ["matched", "isotropic"])
def test_gaussian_theta_covariance_is_the_priors(cov):
    cfg = DataConfig(prior="gaussian", cov=cov, depth=3, alpha=0.5)
    theta, signs = ContextSampler(cfg).sample_theta(40_000, step_generator(2, 0, 0))
    assert signs is None
    prior = GaussianPrior.matched(TreePrior(3, sp.Rational(1, 2))) if cov == "matched" else GaussianPrior.isotropic(7)
    _second_moments_match(theta, prior.cov)


def test_tree_leaves_follow_the_heap_path_convention():
    cfg = DataConfig(prior="tree", depth=4, alpha=0.5)
    prior = TreePrior(4, sp.Rational(1, 2))
    s = ContextSampler(cfg)
    theta, signs = s.sample_theta(256, step_generator(3, 0, 0))
    nodes, index = path_nodes(signs), leaf_index(signs)
    for b in range(signs.shape[0]):
        leaf = tuple(int(v) for v in signs[b])
        assert tuple(int(n) for n in nodes[b]) == prior.path(leaf)  # n -> 2n (s=+1), 2n+1 (s=-1)
        assert int(index[b]) == prior.leaf_index(leaf)
        expected = torch.tensor([float(v) for v in prior.theta_vector(leaf)], dtype=theta.dtype)  # coordinate n-1
        assert torch.equal(theta[b], expected)


def test_leaves_are_uniform():
    cfg = DataConfig(prior="tree", depth=3)
    signs = ContextSampler(cfg).sample_signs(32_000, step_generator(4, 0, 0))
    counts = torch.bincount(leaf_index(signs), minlength=8).double()
    n, p = signs.shape[0], 1 / 8
    assert torch.all((counts - n * p).abs() <= 5 * math.sqrt(n * p * (1 - p)))


@given(depth=st.integers(1, 6), alpha=st.sampled_from([0.1, 0.25, 0.5, 0.9]), seed=st.integers(0, 2**32))
def test_every_leaf_has_the_second_moment_as_squared_norm(depth, alpha, seed):
    cfg = DataConfig(prior="tree", depth=depth, alpha=alpha)
    s = ContextSampler(cfg, dtype=torch.float64)
    theta, _ = s.sample_theta(64, step_generator(seed, 0, 0))
    exact = float(TreePrior(depth, sp.Rational(str(alpha))).second_moment)
    assert torch.allclose((theta**2).sum(1), torch.full((64,), exact, dtype=torch.float64), rtol=1e-12)
    assert s.second_moment == pytest.approx(exact, rel=1e-15)


def test_tau2_is_the_effective_noise_of_section_2():
    cfg = DataConfig(prior="tree", depth=4, alpha=0.5, n_tokens=64, s2=0.02)
    second = (1 - sp.Rational(1, 2) ** 4) / (1 - sp.Rational(1, 2))
    assert ContextSampler(cfg).tau2 == pytest.approx(float((second + sp.Rational(2, 100)) / 64), rel=1e-15)


def test_tokens_are_linear_in_theta_with_label_noise_s2():
    cfg = DataConfig(prior="gaussian", depth=3, n_tokens=500, s2=0.04)
    c = ContextSampler(cfg, dtype=torch.float64).sample(64, step_generator(5, 0, 0))
    assert c.x.shape == (64, 500, 7) and c.y.shape == (64, 500) and c.x_q.shape == (64, 7)
    assert torch.allclose(c.y, torch.einsum("bnd,bd->bn", c.x, c.theta) + c.noise)
    eps2 = c.noise.flatten() ** 2
    assert abs(float(eps2.mean()) - 0.04) <= 5 * float(eps2.std()) / math.sqrt(eps2.numel())
    assert torch.allclose(c.target, (c.theta * c.x_q).sum(1))


def test_same_seed_same_contexts_and_streams_differ():
    s = ContextSampler(DataConfig(depth=3, n_tokens=8))
    a, b = s.sample(4, s.generator(7, 0, 3)), s.sample(4, s.generator(7, 0, 3))
    assert torch.equal(a.x, b.x) and torch.equal(a.theta, b.theta) and torch.equal(a.noise, b.noise)
    for other in (s.generator(7, 0, 4), s.generator(7, 1, 3), s.generator(8, 0, 3)):
        assert not torch.equal(s.sample(4, other).x, a.x)


def test_donor_context_shares_tokens_and_differs_only_in_theta():
    s = ContextSampler(DataConfig(depth=3, n_tokens=16))
    g = s.generator(0, 0, 0)
    target = s.sample(8, g)
    donor_signs = target.signs.clone()
    donor_signs[:, 1] *= -1  # diverge at depth 2
    donor = s.contexts(s.theta_from_signs(donor_signs), g, signs=donor_signs, x=target.x, x_q=target.x_q, noise=target.noise)
    assert torch.equal(donor.x, target.x) and torch.equal(donor.x_q, target.x_q)
    assert torch.allclose(donor.y - target.y, torch.einsum("bnd,bd->bn", target.x, donor.theta - target.theta), atol=1e-5)
    assert torch.equal(path_nodes(donor_signs)[:, :2], path_nodes(target.signs)[:, :2])
    assert not torch.equal(path_nodes(donor_signs)[:, 2], path_nodes(target.signs)[:, 2])


def test_bad_requests_are_one_line_errors():
    gs = ContextSampler(DataConfig(prior="gaussian", depth=2))
    with pytest.raises(ValueError, match="only for the tree prior"):
        gs.sample_signs(2, step_generator(0, 0, 0))
    s = ContextSampler(DataConfig(depth=2, n_tokens=4))
    theta, _ = s.sample_theta(3, step_generator(0, 0, 0))
    with pytest.raises(ValueError, match="shapes"):
        s.contexts(theta, step_generator(0, 0, 1), x=torch.zeros(3, 5, 3))


def test_one_covariance_vocabulary_and_the_old_spelling_names_the_new_one():
    from fvsym.gaussian import COVARIANCES

    from bridges.runs.config import COVARIANCES as CONFIG_COVARIANCES

    assert CONFIG_COVARIANCES == COVARIANCES == ("matched", "isotropic")  # THEORY.md section 5
    with pytest.raises(ValueError, match="cov 'tree' is now called 'matched'"):
        DataConfig(prior="gaussian", cov="tree")
