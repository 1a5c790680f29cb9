"""The adaptive keyed search's Numba kernel (fvnum/mc/_kernels/keyed.py) against the torch autograd reference
of fvnum/keys/adaptive.py: the lookahead objective and its gradient to 1e-9, whole runs, and the defaults' losses."""
from fvnum.options import KeyedSearch
import numpy as np
import pytest
import torch

from fvnum.mc._kernels import keyed as KK
from fvnum import tokens
from fvnum.keys.nonadaptive import best_nonadaptive_keyed
from fvnum.keys.tree import mixture_loss
from fvnum.keys.adaptive import NODE_STEP, adaptive_keyed_losses
from fvnum.keys.lookahead import _next_law, _posterior_state
from fvnum.keys.lookahead import _lookahead_state
from fvnum.keys.tree import _geometry, _Tree
from fvnum.priors.tree import TreeSpec
from fvsym.priors import TreePrior

N, S2 = 32, 0.01
LQ = np.array([0.3, -0.5, -2.0, -1.0])


def _state(depth=4, n=6, l=2, seed=0):
    spec = TreeSpec(depth, 0.5 ** (np.arange(depth) / 2))
    tree = _Tree(spec)
    rng = np.random.default_rng(seed)
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    rows = rng.standard_normal((n, l, spec.dim))
    rows /= np.linalg.norm(rows, axis=-1, keepdims=True)
    geo = _geometry(tree, t(LQ[:depth]), S2, torch)
    leaves = rng.integers(0, spec.n_leaves, n)
    phi = (rows[:, :, tree.paths[leaves]] * tree.values[leaves]).sum(-1)  # rough readings near the truth
    phi = phi[np.arange(n), :, np.arange(n)] * 0.8 + 0.05 * rng.standard_normal((n, l))
    mean, L, alpha, logw = _posterior_state(tree, geo, t(rows), t(phi), N, torch)
    return tree, geo, t(rows), mean, L, alpha, logw, rng


def _torch_objective(tree, geo, rows, mean, L, alpha, logw, w, s, grid):
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    cm, cv = _next_law(tree, geo, rows[s : s + 1], wt[None, None], mean[s : s + 1], L[s : s + 1], alpha[s : s + 1],
                       N, torch)
    live = logw[s] > logw[s].max() - KK.LIVE_DROP
    val = mixture_loss(cm[0, 0, live], cv[0, 0, live], logw[s, live], tree.thetas[live.numpy()], torch, grid)
    (g,) = torch.autograd.grad(val, wt)
    return float(val.detach()), g.numpy()


@pytest.mark.parametrize("l", [1, 3])
def test_lookahead_value_and_gradient_equal_autograd(l):
    """The kernel's objective (every start's, at every sample) and its gradient in the row equal torch
    autograd through ``_next_law`` and ``mixture_loss`` on ``grid`` nodes (``node_step = 0``)."""
    tree, geo, rows, mean, L, alpha, logw, rng = _state(l=l)
    st, n_live = _lookahead_state(tree, geo, rows, mean, L, alpha, logw, N, 0.0, torch)
    wk = KK.work_arrays(int(n_live.max()), tree.spec.depth, l, tree.spec.dim)
    gw = np.zeros(tree.spec.dim)
    for s in range(rows.shape[0]):
        w = rng.standard_normal(tree.spec.dim)
        w /= np.linalg.norm(w)
        value = KK._value_grad(w, s, n_live[s], 128, True, st, wk, gw)
        ref, gref = _torch_objective(tree, geo, rows, mean, L, alpha, logw, w, s, 128)
        assert abs(value - ref) <= 1e-10 * abs(ref) + 1e-13  # the loss is a difference of terms of order 1
        np.testing.assert_allclose(gw, gref, rtol=1e-8, atol=1e-11)


def test_adaptive_nodes_agree_with_a_fine_grid():
    """Nodes at most 0.5 narrowest standard deviations apart (the default): the objective of 4096 nodes to
    1e-4 relative (measured: 9e-6; 0.3 gives 7e-9, 0.75 4e-4: the integrand has features narrower than a
    density where two leaves' densities cross)."""
    tree, geo, rows, mean, L, alpha, logw, rng = _state(n=8, seed=3)
    out = []
    for step, grid in ((NODE_STEP, 128), (0.0, 4096)):
        st, n_live = _lookahead_state(tree, geo, rows, mean, L, alpha, logw, N, step, torch)
        wk = KK.work_arrays(int(n_live.max()), tree.spec.depth, 2, tree.spec.dim)
        w = np.random.default_rng(4).standard_normal(tree.spec.dim)
        w /= np.linalg.norm(w)
        out.append([KK._value_grad(w, s, n_live[s], grid, False, st, wk, np.zeros(0))
                    for s in range(8)])
    np.testing.assert_allclose(out[0], out[1], rtol=1e-4, atol=1e-12)


def test_fast_search_equals_the_reference_run():
    """Same starts, steps and nodes: the kernel's policy is the torch reference's, loss for loss."""
    prior = TreePrior(3, "1/2")
    first = best_nonadaptive_keyed(prior, 1, tokens(N, keys="weighted"), restarts=1, maxiter=30)
    kw = dict(samples=60)
    fast = adaptive_keyed_losses(prior, 3, tokens(N), search=KeyedSearch(node_step=0, steps=6, first=first), **kw)
    ref = adaptive_keyed_losses(prior, 3, tokens(N), search=KeyedSearch(engine="torch", steps=6, first=first), **kw)
    for a, b in zip(fast, ref):
        assert abs(a.estimate.value - b.estimate.value) <= 1e-7 * max(1.0, b.estimate.value)


@pytest.mark.slow  # about a minute: the torch reference at the defaults' sample count
def test_fast_defaults_agree_with_the_reference_within_noise():
    """The defaults (25 steps, adaptive nodes) against the reference's 40 steps on 128 nodes, depth 4."""
    prior = TreePrior(4, "1/2")
    first = best_nonadaptive_keyed(prior, 1, tokens(N, keys="weighted"), restarts=1, maxiter=30)
    fast = adaptive_keyed_losses(prior, 3, tokens(N), samples=150, search=KeyedSearch(first=first))
    ref = adaptive_keyed_losses(prior, 3, tokens(N), samples=150, search=KeyedSearch(first=first, steps=40, engine="torch"))
    for a, b in zip(fast, ref):
        assert abs(a.estimate.value - b.estimate.value) <= 5 * np.hypot(a.estimate.stderr, b.estimate.stderr)


def test_bad_engine_and_nodes():
    prior = TreePrior(3, "1/2")
    with pytest.raises(ValueError, match="engine must be"):
        adaptive_keyed_losses(prior, 2, tokens(128), search=KeyedSearch(engine="jax"))
    with pytest.raises(ValueError, match="torch reference"):
        adaptive_keyed_losses(prior, 2, tokens(128), search=KeyedSearch(engine="torch", node_step=0.75))
    with pytest.raises(ValueError, match="node_step must be"):
        adaptive_keyed_losses(prior, 2, tokens(128), search=KeyedSearch(node_step=-1))


def test_one_layer_kernel_equals_its_numpy_twin():
    from fvnum.mc._kernels.keyed import _one_layer_mc
    from fvnum.mc._reference import one_layer_mc

    rng = np.random.default_rng(3)
    M, k, n = 8, 3, 300
    mean = rng.standard_normal((M, k))
    A = rng.standard_normal((M, k, k))
    cov = A @ A.transpose(0, 2, 1) + np.eye(k)
    L, P = np.linalg.cholesky(cov), np.linalg.inv(cov)
    hl = np.log(np.einsum("mii->mi", L)).sum(-1)
    leaves, xi = rng.integers(0, M, n), rng.standard_normal((n, k))
    paths, vals = _Tree(TreeSpec(3, np.ones(3))).paths, rng.standard_normal((M, 3))  # any values on the paths
    out = [np.zeros((M, k)), np.zeros((M, k, k)), np.zeros((M, k, k)), np.zeros(M)]
    value = _one_layer_mc(mean, L, P, hl, leaves, xi, paths, vals, *out)
    ref = one_layer_mc(mean, L, P, hl, leaves, xi, paths, vals)
    assert abs(value - ref[0]) <= 1e-13 * abs(ref[0])
    for got, want in zip(out, ref[1:]):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("depth,budget,family", [(3, 2, "weighted"), (4, 3, "weighted"), (3, 3, "linear")])
def test_one_layer_objective_and_gradient_equal_autograd(depth, budget, family):
    """The one-layer search's Monte Carlo loss and its gradient written out (rows and log q) against torch
    autograd on the same samples."""
    from fvnum.mc import _chunks
    from fvnum.keys.nonadaptive import _mc_loss_torch, _OneLayerMC

    spec = TreeSpec(depth, 0.5 ** (np.arange(depth) / 2))
    tree = _Tree(spec)
    rng = np.random.default_rng(depth + budget)
    x = np.concatenate([rng.standard_normal(budget * spec.dim), rng.standard_normal(depth) - 2 if family == "weighted"
                        else []])
    value, grad = _OneLayerMC(tree, budget, family, 32, 0.01, 400, 0, _chunks.SEARCH)(x)
    xt = torch.tensor(x, requires_grad=True)
    vt = _mc_loss_torch(tree, budget, family, 32, 0.01, 400, 0, _chunks.SEARCH)(xt)
    (gt,) = torch.autograd.grad(vt, xt)
    assert abs(value - vt.item()) <= 1e-12 * abs(vt.item())
    np.testing.assert_allclose(grad, gt.numpy(), rtol=1e-9, atol=1e-12 * np.abs(gt.numpy()).max())
