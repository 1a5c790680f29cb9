"""Theory rows under key families (fvnum.keys.nonadaptive): exact laws and losses against plain references."""
from fvnum.options import KeyedSearch
import numpy as np
import pytest
import torch

from fvnum import tokens
from fvnum.keys.adaptive import adaptive_keyed_losses
from fvnum.keys.nonadaptive import best_nonadaptive_keyed, gaussian_keyed
from fvnum.keys.tree import mixture_loss, tree_law
from fvnum.keys.lookahead import _next_law, _posterior_state
from fvnum.keys.tree import _geometry, _Tree
from fvnum.keys.families import LinearKeys, WeightedKeys
from fvnum.keys.readings import ReadingLaw
from fvnum.keys.readings import law_posterior_mean, posterior_weights
from fvnum.priors.tree import TreeSpec
from fvsym.priors import GaussianPrior, TreePrior

N, S2 = 32, 0.01
SPEC = TreeSpec(3, 0.5 ** (np.arange(3) / 2))
TREE = _Tree(SPEC)
LQ = np.array([0.3, -0.5, -2.0])


def test_tree_law_is_the_general_law_of_the_family():
    W = np.random.default_rng(0).standard_normal((2, 7))
    for lq, fam in ((None, LinearKeys(W)), (LQ, WeightedKeys(W, np.exp(LQ)[TREE.depth_of], 1.0))):
        mean, cov = tree_law(TREE, _geometry(TREE, lq, S2, np), W, N)
        law = fam.law(TREE.thetas, n_tokens=N, s2=S2)
        np.testing.assert_allclose(mean, law.mean, rtol=1e-11, atol=1e-14)
        np.testing.assert_allclose(cov, law.cov, rtol=1e-11, atol=1e-14)


def test_mixture_loss_is_the_monte_carlo_loss_of_the_bayes_decoder():
    rng = np.random.default_rng(1)
    fam = WeightedKeys(rng.standard_normal(7), np.exp(LQ)[TREE.depth_of], 1.0)
    law = fam.law(TREE.thetas, n_tokens=N, s2=S2)
    logp = np.full(8, -np.log(8))
    exact = mixture_loss(law.mean[:, 0], law.cov[:, 0, 0], logp, TREE.thetas)
    assert abs(exact - mixture_loss(law.mean[:, 0], law.cov[:, 0, 0], logp, TREE.thetas, grid=2048)) < 1e-10
    leaves = rng.integers(0, 8, 40_000)
    phi = law.mean[leaves] + np.sqrt(law.cov[leaves, 0]) * rng.standard_normal((40_000, 1))
    losses = ((law_posterior_mean(TREE.thetas, logp, law, phi) - TREE.thetas[leaves]) ** 2).sum(1)
    assert abs(losses.mean() - exact) <= 5 * losses.std(ddof=1) / np.sqrt(losses.size)


def test_adaptive_conditioning_is_the_joint_law():
    """The greedy policy's belief and the conditional law of a new reading against plain Gaussian
    conditioning of the joint law of all readings."""
    rng = np.random.default_rng(2)
    n = 5
    rows = rng.standard_normal((n, 2, 7))
    w = rng.standard_normal((n, 1, 7))
    phi = rng.standard_normal((n, 2)) * 0.5
    geo_t = _geometry(TREE, torch.tensor(LQ), S2, torch)
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    mean, L, alpha, logw = _posterior_state(TREE, geo_t, t(rows), t(phi), N, torch)
    cm, cv = _next_law(TREE, geo_t, t(rows), t(w), mean, L, alpha, N, torch)
    geo = _geometry(TREE, LQ, S2, np)
    for i in range(n):
        m2, c2 = tree_law(TREE, geo, rows[i], N)
        np.testing.assert_allclose(np.exp(logw[i].numpy()),
                                   posterior_weights(np.zeros(8), ReadingLaw(m2, c2), phi[i])[0], rtol=1e-9)
        m3, c3 = tree_law(TREE, geo, np.vstack([rows[i], w[i]]), N)
        for j in range(8):
            gain = np.linalg.solve(c3[j, :2, :2], c3[j, :2, 2])
            np.testing.assert_allclose(float(cm[i, 0, j]), m3[j, 2] + gain @ (phi[i] - m3[j, :2]), rtol=1e-9)
            np.testing.assert_allclose(float(cv[i, 0, j]), c3[j, 2, 2] - c3[j, :2, 2] @ gain, rtol=1e-8)


def test_keyed_searches_at_budget_one_and_two():
    prior = TreePrior(3, "1/2")
    lin = best_nonadaptive_keyed(prior, 1, tokens(N, keys="linear"), restarts=1, maxiter=30)
    wtd = best_nonadaptive_keyed(prior, 1, tokens(N, keys="weighted"), restarts=1, maxiter=30)
    logp = np.full(8, -np.log(8))
    for r in (lin, wtd):  # the reported loss is the exact loss of the design found
        law = r.keys.law(TREE.thetas, n_tokens=N, s2=S2)
        assert abs(r.estimate.value - mixture_loss(law.mean[:, 0], law.cov[:, 0, 0], logp, TREE.thetas)) < 1e-9
    top = LinearKeys(np.eye(7)[:1]).law(TREE.thetas, n_tokens=N, s2=S2)
    assert lin.estimate.value < mixture_loss(top.mean[:, 0], top.cov[:, 0, 0], logp, TREE.thetas)
    out = adaptive_keyed_losses(prior, 2, tokens(N, keys="weighted"), samples=200, search=KeyedSearch(steps=5, first=wtd))
    assert [r.name for r in out] == ["best_adaptive_keyed"] * 2 and ["L = 1" in out[0].how, "L = 2" in out[1].how] == [True] * 2
    assert abs(out[0].estimate.value - wtd.estimate.value) <= 5 * out[0].estimate.stderr
    assert out[1].estimate.value < out[0].estimate.value
    assert "adaptive" in out[1].how and out[1].to_dict()["keys"]["keys"] == "weighted" and out[1].design is None


def test_gaussian_cell_and_bad_inputs():
    prior = GaussianPrior.matched(TreePrior(2, "1/2"))
    r = gaussian_keyed(prior, 1, tokens(N, keys="linear"), samples=400)
    unread = 0.5  # the two unread coordinates, variance 1/4 each
    assert unread < r.estimate.value < 1.5
    with pytest.raises(ValueError, match="unknown key family"):
        best_nonadaptive_keyed(TreePrior(3, "1/2"), 1, tokens(128, keys="mlp"))
    with pytest.raises(ValueError, match="tree prior"):
        adaptive_keyed_losses(prior, 2, tokens(128, keys="linear"))
    with pytest.raises(ValueError, match="at most D = 3"):
        gaussian_keyed(prior, 4, tokens(128, keys="linear"))


def test_importance_sampled_decoder_agrees_with_the_grid(monkeypatch):
    """Where a product grid would not fit, the decoder's nodes are importance-sampled: on a cell where both
    fit, the two decoders' losses agree (paired on the same samples, within 5 standard errors of the
    differences, and within 1% of the loss)."""
    import fvnum.keys.nonadaptive as K
    from fvnum.priors.tree import numeric_prior

    vals = numeric_prior(GaussianPrior.matched(TreePrior(3, "1/2"))).eigenvalues
    rng = np.random.default_rng(1)
    truth, xi = rng.standard_normal((300, 7)) * np.sqrt(vals), rng.standard_normal((300, 3))
    q = np.full(7, 0.3)
    grid = K._gaussian_losses(vals, 3, q, 16, S2, truth, xi, 11)
    monkeypatch.setattr(K, "GRID_POINTS", 1)
    sampled = K._gaussian_losses(vals, 3, q, 16, S2, truth, xi, 11)
    d = sampled - grid
    assert abs(d.mean()) <= 5 * d.std(ddof=1) / np.sqrt(d.size) + 1e-12
    assert abs(d.mean()) < 0.01 * grid.mean()
    assert "importance sampling" in K._decoder_mesh(7, 9, 7.0)[2] and "11^3" in K._decoder_mesh(3, 11, 7.0)[2]


CELL = """
import resource, sys
import numpy as np
cap = 2 * 2**30
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
from fvsym.priors import GaussianPrior
from fvnum.mc.channels import make_channel
from fvnum.priors.tree import numeric_prior
prior = GaussianPrior.isotropic(7)
if sys.argv[1] == "cell":  # the keyed rows of fv compare --prior gaussian --cov isotropic --depth 3 --budget 7 --tokens 16
    from fvnum.theory import keyed_curves
    rows = keyed_curves(prior, [7], make_channel(numeric_prior(prior), tokens=16), "weighted", samples=2000)[7]
    print(rows[0].value, rows[0].stderr)
else:  # the same decoder on a few samples
    from fvnum.keys.nonadaptive import _gaussian_losses
    r = np.random.default_rng(0)
    out = _gaussian_losses(np.ones(7), 7, np.full(7, 0.1), 16, 0.01, r.standard_normal((40, 7)), r.standard_normal((40, 7)), 9)
    print(out.mean(), out.std() / np.sqrt(out.size))
"""


@pytest.mark.parametrize("what", ["decoder", pytest.param("cell", marks=pytest.mark.slow)])
def test_the_budget_7_gaussian_cell_fits_in_two_gigabytes(what):
    """Issue 32: a 9^7 product grid took 16 GiB; the decoder now fits, with the process's whole address space
    (torch, numba, scipy included) capped at 2 GiB, and its price says so."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fvnum.keys.nonadaptive import keyed_memory

    assert keyed_memory(tree=False, depth=3, dim=7, budgets=[7], samples=2000) < 256 * 2**20
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", CELL, what], env=env, capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    value, stderr = map(float, out.stdout.split())
    assert 0 < value < 7 and stderr > 0  # 7: the prior's trace (nothing read)
