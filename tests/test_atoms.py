"""The finite-atom prior and the mixture (THEORY.md section 6b, issue 30 items 2 and 3): every numeric piece
against a plain numpy reference written here (the posterior over the atoms, the greedy rules, the ridge
formula), brute force (quadrature, the partitions), or the tree prior's own numbers (the tree is the atoms
prior on its leaves)."""
from __future__ import annotations
import fvnum

import contextlib
import io
import json
import math

import numpy as np
import pytest

import fvnum
from fvnum import loss_mc
from fvnum.finite_theory import finite_comparison_table
from fvnum.linear_theory import ridge_loss, ridge_optimum
from fvnum.optimum.atoms_dp import noiseless_bellman
from fvnum.priors.atoms import AtomsPrior
from fvnum.priors.registry import atoms_of
from fvnum.mc.channels import make_channel
from fvnum.priors.mixture import MixturePrior
from fvsym import TreePrior, bellman

TAU = 0.4


# --- plain numpy references ------------------------------------------------------------------------------
def ref_posterior_mean(atoms, weights, W, phi, tau):
    """One sample: rows W (B, D), readings phi (B,)."""
    proj = atoms @ W.T  # (M, B)
    if tau > 0:
        logp = np.log(weights) - ((phi - proj) ** 2).sum(1) / (2 * tau**2)
        p = np.exp(logp - logp.max())
    else:
        p = weights * np.all(np.abs(proj - phi) <= 1e-9, axis=1)
    return p @ atoms / p.sum()


def ref_read_value(b, w, atoms, tau):
    """W E||E[theta | y]||^2 of one candidate read (the rule of fvnum.mc._kernels.atoms, in numpy)."""
    live = w > 0
    b, w, A = b[live], w[live], atoms[live]
    if tau == 0:
        total = 0.0
        for v in np.unique(b):
            g = b == v
            s = w[g] @ A[g]
            total += s @ s / w[g].sum()
        return total
    lo, hi = b.min() - 8 * tau, b.max() + 8 * tau
    G = min(2048, math.ceil((hi - lo) / (0.5 * tau)) + 1)
    h = (hi - lo) / (G - 1)
    y = lo + np.arange(G) * h
    E = w * np.exp(-0.5 * ((y[:, None] - b) / tau) ** 2)
    p, s = E.sum(1), E @ A
    ok = p > 0
    return ((s[ok] ** 2).sum(1) / p[ok]).sum() * h / (math.sqrt(2 * math.pi) * tau)


def ref_greedy_row(atoms, logw, tau, dense):
    w = np.exp(logw - logw.max())
    w[w < 1e-16] = 0.0
    D = atoms.shape[1]
    cands = list(np.eye(D))
    if dense:
        p = w / w.sum()
        mean = p @ atoms
        cov = (atoms * p[:, None]).T @ atoms - np.outer(mean, mean)
        vecs = np.linalg.eigh(cov)[1][:, ::-1][:, :2]
        cands += [v * (-1.0 if v.sum() < 0 else 1.0) for v in vecs.T]
    best, best_value = 0, -np.inf
    for c, row in enumerate(cands):
        v = ref_read_value(atoms @ row, w, atoms, tau)
        if best_value == -np.inf or v > best_value + 1e-12 * abs(best_value):
            best, best_value = c, v
    row = cands[best]
    return best, row / np.linalg.norm(row)


def ref_ridge_loss(C, W, tau):
    S = W @ C @ W.T + tau**2 * np.eye(W.shape[0])
    return float(np.trace(C - C @ W.T @ np.linalg.pinv(S) @ W @ C))


def _prior(M=9, D=3, seed=5, weighted=True):
    rng = np.random.default_rng(seed)
    atoms = rng.standard_normal((M, D))
    return AtomsPrior(atoms, rng.random(M) + 0.2 if weighted else None)


# --- validation and construction ---------------------------------------------------------------------------
def test_atoms_prior_normalises_weights_and_moments_match_numpy():
    p = AtomsPrior([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]], [1, 1, 2])
    w = np.array([0.25, 0.25, 0.5])
    assert np.allclose(p.weights, w) and p.dim == 2 and p.n_atoms == 3
    mean = w @ p.atoms
    assert np.allclose(p.mean, mean)
    assert np.allclose(p.covariance, np.cov(p.atoms.T, aweights=w, bias=True))
    assert math.isclose(p.second_moment, float(w @ (p.atoms**2).sum(1)))
    assert not p.uniform and AtomsPrior(p.atoms).uniform


def test_draw_is_the_seed_and_standard_normal():
    a, b, c = AtomsPrior.draw(64, 8, seed=3), AtomsPrior.draw(64, 8, seed=3), AtomsPrior.draw(64, 8, seed=4)
    assert np.array_equal(a.atoms, b.atoms) and not np.array_equal(a.atoms, c.atoms)
    big = AtomsPrior.draw(4000, 2, seed=0).atoms
    assert abs(big.mean()) < 5 * 1 / math.sqrt(big.size) and abs(big.var() - 1) < 5 * math.sqrt(2 / big.size)


def test_sampling_follows_the_weights():
    p = AtomsPrior(np.eye(3), [1, 2, 7])
    idx = p.sample(40_000, np.random.default_rng(0))
    freq = np.bincount(idx, minlength=3) / idx.size
    assert np.all(np.abs(freq - p.weights) <= 5 * np.sqrt(p.weights * (1 - p.weights) / idx.size))


# --- the exact decoder (dMMSE) --------------------------------------------------------------------------------
@pytest.mark.parametrize("tau", [TAU, 0.0])
def test_posterior_means_equal_plain_numpy(tau):
    p = _prior()
    rng = np.random.default_rng(1)
    ch = make_channel(p, fvnum.gaussian(tau))
    n = 6
    leaves = rng.integers(0, p.n_atoms, n)
    nodes = np.array([[1, 3], [2, 2], [3, 0], [1, 2], [2, 1], [0, 3]])
    W = np.zeros((n, 2, 3))
    for i in range(n):
        for j, node in enumerate(nodes[i]):
            if node:
                W[i, j, node - 1] = 1.0
    phi = np.einsum("nbd,nd->nb", W, p.atoms[leaves]) + tau * rng.standard_normal((n, 2))
    got = p.posterior_means(ch, nodes, phi)
    for i in range(n):
        assert np.allclose(got[i], ref_posterior_mean(p.atoms, p.weights, W[i], phi[i], tau), atol=1e-12)
    rows = rng.standard_normal((2, 3))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    phi = p.atoms[leaves] @ rows.T + tau * rng.standard_normal((n, 2))
    got = p.posterior_means(ch, rows, phi)
    for i in range(n):
        assert np.allclose(got[i], ref_posterior_mean(p.atoms, p.weights, rows, phi[i], tau), atol=1e-12)


def test_the_tree_is_the_atoms_prior_on_its_leaves():
    """Same posterior means as the tree's own decoder (fvnum.priors.tree), coordinates and unit rows."""
    from fvnum.priors.tree import numeric_prior, posterior_means

    tree = TreePrior(3, "1/2")
    spec, atoms = numeric_prior(tree), AtomsPrior.of(tree)
    ch = make_channel(spec, fvnum.gaussian(TAU))
    rng = np.random.default_rng(2)
    leaves = rng.integers(0, 8, 20)
    nodes = np.array([1, 2, 5])
    phi = spec.values(leaves, np.tile(nodes, (20, 1))) + TAU * rng.standard_normal((20, 3))
    assert np.allclose(atoms.posterior_means(ch, nodes, phi), posterior_means(spec, ch, nodes, phi), atol=1e-12)
    rows = rng.standard_normal((2, 7))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    phi = spec.thetas(leaves) @ rows.T + TAU * rng.standard_normal((20, 2))
    assert np.allclose(atoms.posterior_means(ch, rows, phi), posterior_means(spec, ch, rows, phi), atol=1e-10)


def test_loss_mc_of_a_fixed_coordinate_read_equals_quadrature():
    """One read: E loss = int sum_m w_m N(y; theta_m1, tau^2) ||E[theta | y] - theta_m||^2 dy (fine grid)."""
    p = _prior(M=5, D=2)
    y = np.linspace(p.atoms[:, 0].min() - 10 * TAU, p.atoms[:, 0].max() + 10 * TAU, 20001)
    lik = p.weights * np.exp(-0.5 * ((y[:, None] - p.atoms[:, 0]) / TAU) ** 2) / (math.sqrt(2 * math.pi) * TAU)
    mu = lik @ p.atoms / lik.sum(1, keepdims=True)
    err = ((mu[:, None, :] - p.atoms[None]) ** 2).sum(2)
    exact = float(np.trapezoid((lik * err).sum(1), y))
    est = loss_mc(p, "fixed", 1, fvnum.gaussian(TAU), options=fvnum.StrategyOptions(design=[1]), samples=40_000, seed=0)
    assert abs(est.z(exact)) < 5


@pytest.mark.parametrize("design", [[1, 3], "rows"])
def test_loss_mc_of_fixed_designs_replays_in_numpy(design):
    p = _prior()
    if design == "rows":
        design = np.random.default_rng(0).standard_normal((2, 3))
        design /= np.linalg.norm(design, axis=1, keepdims=True)
        W = design
    else:
        W = np.eye(3)[np.array(design) - 1]
    est = loss_mc(p, "fixed", 2, fvnum.gaussian(TAU), options=fvnum.StrategyOptions(design=design), samples=400, seed=1, record=True)
    fv = est.function_vectors
    phi = fv.phi.reshape(400, 2)
    ref = [((ref_posterior_mean(p.atoms, p.weights, W, phi[i], TAU) - p.atoms[fv.leaves[i]]) ** 2).sum()
           for i in range(400)]
    assert np.allclose(fv.loss, ref, atol=1e-12) and math.isclose(est.value, float(np.mean(ref)), rel_tol=1e-12)
    noise = (phi - p.atoms[fv.leaves] @ W.T) / TAU  # the channel: readings W theta + tau xi
    assert abs(noise.mean()) < 5 / math.sqrt(noise.size) and abs(noise.var() - 1) < 5 * math.sqrt(2 / noise.size)


@pytest.mark.parametrize("strategy", ["greedy_coordinate", "greedy_dense"])
@pytest.mark.parametrize("tau", [TAU, 0.0])
def test_greedy_policies_replay_in_numpy(strategy, tau):
    """Each sample's reads are the plain numpy greedy rule's, and its loss the numpy posterior's."""
    p = _prior(M=12, D=3)
    dense = strategy == "greedy_dense"
    n, B = 60, 3
    est = loss_mc(p, strategy, B, fvnum.gaussian(tau), samples=n, seed=2, record=True)
    fv = est.function_vectors
    for i in range(n):
        logw = np.log(p.weights)
        W = []
        for l in range(B):
            c, row = ref_greedy_row(p.atoms, logw, tau, dense)
            if not dense:
                assert fv.nodes[i, l, 0] == c + 1
            W.append(row)
            b = p.atoms @ row
            if tau > 0:
                logw = logw - (fv.phi[i, l, 0] - b) ** 2 / (2 * tau**2)
            else:
                logw = np.where(np.abs(fv.phi[i, l, 0] - b) <= 1e-9, logw, -np.inf)
        mean = ref_posterior_mean(p.atoms, p.weights, np.array(W), fv.phi[i, :, 0], tau)
        assert math.isclose(fv.loss[i], ((mean - p.atoms[fv.leaves[i]]) ** 2).sum(), rel_tol=1e-8, abs_tol=1e-12)


def test_greedy_beats_a_fixed_design_and_dense_beats_coordinate():
    p = AtomsPrior.draw(32, 4, seed=0)
    top = loss_mc(p, "top_levels", 3, fvnum.gaussian(TAU), samples=3000, seed=0)
    coord = loss_mc(p, "greedy_coordinate", 3, fvnum.gaussian(TAU), samples=3000, seed=0)
    dense = loss_mc(p, "greedy_dense", 3, fvnum.gaussian(TAU), samples=3000, seed=0)
    assert coord.value < top.value - 3 * math.hypot(coord.stderr, top.stderr)
    assert dense.value <= coord.value + 3 * math.hypot(coord.stderr, dense.stderr)


# --- the noiseless Bellman recursion over partitions ---------------------------------------------------
@pytest.mark.parametrize("depth, layers, width", [(2, 1, 1), (2, 2, 1), (3, 1, 1), (3, 2, 1), (3, 3, 1), (3, 1, 2),
                                                  (3, 2, 2)])
def test_noiseless_bellman_on_the_leaves_equals_the_tree_solver(depth, layers, width):
    tree = TreePrior(depth, "1/2")
    ours = noiseless_bellman(AtomsPrior.of(tree), layers, width)
    assert math.isclose(ours.value, float(bellman.solve(tree, layers, width).loss), abs_tol=1e-12)


def test_noiseless_bellman_equals_brute_force_over_policies():
    """M = 6 atoms, D = 3, two layers of width 1: the best first read, then the best read per cell."""
    p = _prior(M=6, D=3, seed=9)
    A = np.round(p.atoms, 0)  # ties in the coordinates: reads leave cells of several atoms
    q = AtomsPrior(A, p.weights)
    w = q.weights

    def U(idx):
        if len(idx) == 0:
            return 0.0
        mu = w[idx] @ A[idx] / w[idx].sum()
        return float(w[idx] @ ((A[idx] - mu) ** 2).sum(1))

    def cells(idx, j):
        return [idx[A[idx, j] == v] for v in np.unique(A[idx, j])]

    full = np.arange(6)
    brute = min(sum(min(sum(U(c2) for c2 in cells(c, k)) for k in range(3)) for c in cells(full, j)) for j in range(3))
    assert math.isclose(noiseless_bellman(q, 2).value, brute / w.sum(), rel_tol=1e-12)
    est = loss_mc(q, "optimal", 2, fvnum.gaussian(0), samples=4000, seed=0)
    assert abs(est.z(brute / w.sum())) < 5


# --- the ridge baseline ---------------------------------------------------------------------------------------
def test_ridge_loss_is_the_gaussian_formula_and_the_linear_decoders_mc():
    p = _prior(M=10, D=3)
    C = np.cov(p.atoms.T, aweights=p.weights, bias=True)
    W = np.eye(3)[[0, 2]]
    assert math.isclose(ridge_loss(p, [1, 3], TAU), ref_ridge_loss(C, W, TAU), rel_tol=1e-10)
    rng = np.random.default_rng(0)
    n = 50_000
    theta = p.atoms[p.sample(n, rng)]
    phi = theta @ W.T + TAU * rng.standard_normal((n, 2))
    gain = C @ W.T @ np.linalg.inv(W @ C @ W.T + TAU**2 * np.eye(2))
    est = p.mean + (phi - p.mean @ W.T) @ gain.T  # the linear (ridge) decoder with the atoms' mean
    err = ((est - theta) ** 2).sum(1)
    assert abs(err.mean() - ridge_loss(p, [1, 3], TAU)) < 5 * err.std() / math.sqrt(n)
    assert np.allclose(np.array(p.matched_gaussian().cov.evalf(), dtype=float), C, atol=1e-12)
    assert ridge_optimum(p, 2, TAU) <= ridge_loss(p, [1, 3], TAU) + 1e-12


def test_dmmse_beats_ridge_on_few_atoms():
    p = AtomsPrior.draw(8, 8, seed=0)
    est = loss_mc(p, "top_levels", 4, fvnum.gaussian(TAU), samples=4000, seed=0)
    assert est.value < ridge_loss(p, [1, 2, 3, 4], TAU) - 5 * est.stderr


# --- the mixture ---------------------------------------------------------------------------------------------
def test_mixture_is_the_union_of_atoms_and_decodes_like_numpy():
    t1, t2 = TreePrior(2, "1/2"), TreePrior(2, "1/4")
    mix = MixturePrior([t1, t2], [0.3, 0.7])
    a1, _ = atoms_of(t1)
    a2, _ = atoms_of(t2)
    assert np.allclose(mix.atoms, np.concatenate([a1, a2])) and mix.n_atoms == 8
    assert np.allclose(mix.weights, np.r_[np.full(4, 0.3 / 4), np.full(4, 0.7 / 4)])
    est = loss_mc(mix, "fixed", 2, fvnum.gaussian(TAU), options=fvnum.StrategyOptions(design=[1, 2]), samples=300, seed=0, record=True)
    fv = est.function_vectors
    W = np.eye(3)[[0, 1]]
    ref = [((ref_posterior_mean(mix.atoms, mix.weights, W, fv.phi[i, 0], TAU) - mix.atoms[fv.leaves[i]]) ** 2).sum()
           for i in range(300)]
    assert np.allclose(fv.loss, ref, atol=1e-12)


def test_mixture_weights_default_to_equal_components():
    t1, t2 = AtomsPrior.of(TreePrior(3, "1/2")), TreePrior(3, "1/4")
    mix = MixturePrior([t1, t2])
    assert np.allclose(mix.mixture_weights, [0.5, 0.5])
    assert np.allclose(mix.weights, MixturePrior([t1, t2], [2, 2]).weights)


def test_mixture_with_a_rotated_tree_runs_greedy_like_numpy():
    tree = TreePrior(2, "1/2")
    Q = np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))[0]
    mix = MixturePrior([tree, AtomsPrior.of(tree).rotated(Q)], [0.5, 0.5])
    fv = loss_mc(mix, "greedy_coordinate", 2, fvnum.gaussian(TAU), samples=40, seed=0, record=True).function_vectors
    for i in range(40):
        logw = np.log(mix.weights)
        for l in range(2):
            c, row = ref_greedy_row(mix.atoms, logw, TAU, False)
            assert fv.nodes[i, l, 0] == c + 1
            logw = logw - (fv.phi[i, l, 0] - mix.atoms @ row) ** 2 / (2 * TAU**2)


def test_a_mixture_of_one_tree_gives_the_trees_numbers():
    from fvnum.priors.tree import numeric_prior, posterior_means

    tree = TreePrior(3, "1/2")
    mix = MixturePrior([tree], [1])
    spec = numeric_prior(tree)
    for B in (1, 2, 3):
        assert math.isclose(noiseless_bellman(mix, B).value, float(bellman.solve(tree, B, 1).loss), abs_tol=1e-12)
    ch = make_channel(spec, fvnum.gaussian(TAU))
    rng = np.random.default_rng(0)
    leaves = rng.integers(0, 8, 50)
    phi = spec.values(leaves, np.tile([1, 2, 3], (50, 1))) + TAU * rng.standard_normal((50, 3))
    assert np.allclose(mix.posterior_means(ch, np.array([1, 2, 3]), phi), posterior_means(spec, ch, [1, 2, 3], phi))
    a = loss_mc(mix, "top_levels", 3, fvnum.gaussian(TAU), samples=20_000, seed=0)
    b = loss_mc(tree, "top_levels", 3, fvnum.gaussian(TAU), samples=20_000, seed=1)
    assert abs(a.value - b.value) < 5 * math.hypot(a.stderr, b.stderr)


# --- fv mc --------------------------------------------------------------------------------------------------
def _fv(*argv):
    from bridges.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["mc", *argv])
    return code, out.getvalue(), err.getvalue()


def test_fv_mc_atoms_file_and_diversity(tmp_path):
    p = AtomsPrior.draw(16, 3, seed=7)
    path = tmp_path / "atoms.npy"
    np.save(path, p.atoms)
    code, out, _ = _fv("--prior", "atoms", "--atoms", str(path), "--strategy", "greedy_coordinate", "--budget", "2",
                       "--tau", "0.4", "--samples", "500", "--seed", "1", "--format", "json")
    rec = json.loads(out)
    assert code == 0 and rec["n_atoms"] == 16 and rec["dim"] == 3 and rec["atoms"] == str(path)
    assert rec["value"] == loss_mc(p, "greedy_coordinate", 2, fvnum.gaussian(0.4), samples=500, seed=1).value
    code, out, _ = _fv("--prior", "atoms", "--diversity", "16", "--dim", "3", "--strategy", "top_levels", "--budget",
                       "2", "--tau", "0.4", "--samples", "500", "--seed", "7", "--format", "json")
    rec = json.loads(out)
    assert code == 0 and rec["diversity"] == 16 and rec["value"] == loss_mc(p, "top_levels", 2, fvnum.gaussian(0.4), samples=500,
                                                                             seed=7).value


# --- the exact noisy recursion on atoms (fvnum.optimum.atoms_dp) ----------------------------------------------------
def ref_noisy_value(atoms, weights, tau, budget):
    """``V_B`` of THEORY.md section 3 on the atoms, by scipy's adaptive quadrature over each reading (no lattice)."""
    from scipy.integrate import quad

    A, sq = np.asarray(atoms, float), (np.asarray(atoms, float) ** 2).sum(1)

    def V(p, R):
        p = p / p.sum()
        if R == 0:
            mu = p @ A
            return float(p @ sq - mu @ mu)
        best = math.inf
        for n in range(A.shape[1]):
            def f(y):
                lik = p * np.exp(-0.5 * ((y - A[:, n]) / tau) ** 2) / (math.sqrt(2 * math.pi) * tau)
                mass = lik.sum()
                return 0.0 if mass <= 0 else mass * V(lik, R - 1)

            lo, hi = A[:, n].min() - 9 * tau, A[:, n].max() + 9 * tau
            pts = sorted(set(A[:, n].tolist()))
            best = min(best, quad(f, lo, hi, points=pts, limit=200, epsabs=1e-10, epsrel=1e-9)[0])
        return best

    return V(np.asarray(weights, float), budget)


@pytest.mark.parametrize("depth, budget, tau", [(2, 1, 0.5), (2, 2, 0.5), (3, 1, 0.4), (3, 2, 0.6)])
def test_noisy_recursion_on_the_leaves_equals_the_trees(depth, budget, tau):
    """The atoms' recursion (any values per coordinate) against fvnum.optimum.noisy_dp (the tree's three reading classes)."""
    from fvnum import noisy_bellman

    tree = TreePrior(depth, "1/2")
    ours, theirs = noisy_bellman(AtomsPrior.of(tree), budget, fvnum.gaussian(tau)), noisy_bellman(tree, budget, fvnum.gaussian(tau))
    assert abs(ours.value - theirs.value) <= 2 * (ours.error + theirs.error) + 1e-9
    assert ours.first_node == theirs.first_node


@pytest.mark.parametrize("budget", [1, pytest.param(2, marks=pytest.mark.slow)])  # 2: run by .ci/run
def test_noisy_recursion_equals_adaptive_quadrature(budget):
    p = _prior(M=4, D=2, seed=11)
    ours = fvnum.noisy_bellman(p, budget, fvnum.gaussian(0.6))
    ref = ref_noisy_value(p.atoms, p.weights, 0.6, budget)
    assert abs(ours.value - ref) <= max(4 * ours.error, 1e-7) + 1e-6 * ref
    assert ours.error < 1e-3 * ref


def test_noisy_policy_mc_equals_its_value_and_beats_greedy():
    from fvnum import noisy_bellman

    p = AtomsPrior.draw(10, 3, seed=4)
    solved = noisy_bellman(p, 2, fvnum.gaussian(0.5))
    est = loss_mc(p, "optimal", 2, fvnum.gaussian(0.5), samples=6000, seed=2)
    greedy = loss_mc(p, "greedy_coordinate", 2, fvnum.gaussian(0.5), samples=6000, seed=2)
    assert abs(est.z(solved.value)) < 5
    assert solved.value <= greedy.value + 5 * greedy.stderr
    q = solved.q_values()
    assert q.best == solved.first_node and math.isclose(float(np.min(q)), solved.value, rel_tol=1e-3)


def test_noisy_recursion_refuses_in_one_line():
    from fvnum import noisy_bellman
    from fvsym.errors import InputError, ResourceRefused

    p = AtomsPrior.draw(10, 3, seed=4)
    with pytest.raises(InputError, match="gaussian channel"):
        noisy_bellman(p, 2, fvnum.tokens(64))
    with pytest.raises(InputError, match="budget must be <= 3, got 4"):
        noisy_bellman(p, 4, fvnum.gaussian(0.5))
    with pytest.raises(InputError, match="noiseless optimum"):
        noisy_bellman(p, 2, fvnum.gaussian(0))
    with pytest.raises(ResourceRefused, match="exact noisy recursion on 400 atoms"):
        noisy_bellman(AtomsPrior.draw(400, 12, seed=0), 3, fvnum.gaussian(0.05))
    with pytest.raises(ValueError, match="solved exactly only for width 1 and budget <= 3"):
        loss_mc(p, "optimal", 4, fvnum.gaussian(0.5), samples=100)


def test_bounds_on_atoms_bracket_the_solved_optimum():
    from fvnum import bounds

    p = AtomsPrior.draw(10, 3, seed=4)
    b = bounds(p, 2, fvnum.gaussian(0.5), samples=3000, seed=1)
    assert b.collapsed and b.lower <= b.exact <= b.upper.value
    assert noiseless_bellman(p, 2).value <= b.lower
    assert b.candidates["greedy_coordinate"].value >= b.exact - 5 * b.candidates["greedy_coordinate"].stderr
    b3 = bounds(p, 3, fvnum.gaussian(0.5), samples=2000, seed=1, exact=False)
    assert b3.exact is None and b3.lower == noiseless_bellman(p, 3).value and b3.policy == "greedy_coordinate"


def test_fv_bounds_on_atoms_and_its_refusals(tmp_path):
    from tests._cli import fv, one_line

    path = tmp_path / "atoms.npy"
    np.save(path, AtomsPrior.draw(10, 3, seed=4).atoms)
    code, out, _ = fv("bounds", "--prior", "atoms", "--atoms", str(path), "--budget", "2", "--tau", "0.5", "--samples",
                      "2000", "--format", "json")
    rec = json.loads(out)
    assert code == 0
    assert rec["collapsed"] and rec["n_atoms"] == 10 and rec["atoms"] == str(path)
    assert abs(rec["exact"] - fvnum.noisy_bellman(AtomsPrior(np.load(path)), 2, fvnum.gaussian(0.5)).value) < 1e-12
    one_line(*fv("bounds", "--prior", "atoms", "--atoms", str(path), "--budget", "2", "--tokens", "64")[::2],
             "bounds on the atoms prior are the gaussian channel's")
    one_line(*fv("bounds", "--prior", "atoms", "--atoms", str(path), "--budget", "5", "--tau", "0.5")[::2],
             "1 <= budget <= D = 3, got 5")
    one_line(*fv("bounds", "--prior", "tree", "--diversity", "8", "--budget", "2", "--tau", "0.5")[::2],
             "--diversity applies to --prior atoms")


def test_comparison_table_of_atoms_is_the_priors_own():
    from fvnum import comparison_table

    p = AtomsPrior.draw(12, 4, seed=1)
    ours = comparison_table(p, 2, fvnum.gaussian(0.3), samples=1000, search_samples=500)
    own = finite_comparison_table(p, 2, make_channel(p, fvnum.gaussian(0.3)), samples=1000, search_samples=500)
    assert [r.name for r in ours.rows] == [r.name for r in own.rows] and "best_adaptive" in [r.name for r in ours.rows]
    assert [r.value for r in ours.rows] == [r.value for r in own.rows]
