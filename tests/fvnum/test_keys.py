"""The key channel: reading laws of key families and the exact Bayes decoder on them."""
import numpy as np
import pytest

from fvnum.keys.families import LinearKeys
from fvnum.keys.readings import ReadingLaw, law_from_key_values
from fvnum.keys.readings import law_posterior_mean
from fvnum.priors.tree import TreeSpec

N, S2 = 16, 0.01


def _tree_thetas(depth, alpha=0.5):
    spec = TreeSpec(depth, alpha ** (np.arange(depth) / 2))
    return spec.thetas(np.arange(spec.n_leaves))


def test_linear_keys_law_is_the_closed_form():
    thetas = _tree_thetas(3)
    W = np.random.default_rng(1).standard_normal((2, 7))
    law = LinearKeys(W).law(thetas, n_tokens=N, s2=S2)
    for m, t in enumerate(thetas):
        # Cov(y x | theta) = (|theta|^2 + s2) I + theta theta^T, projected by W and divided by N
        cov_yx = (t @ t + S2) * np.eye(7) + np.outer(t, t)
        np.testing.assert_allclose(law.mean[m], W @ t, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(law.cov[m], W @ cov_yx @ W.T / N, rtol=1e-12, atol=1e-15)


def test_law_from_key_values_converges_to_the_linear_law():
    rng = np.random.default_rng(2)
    thetas = _tree_thetas(3)
    W = rng.standard_normal((2, 7))
    X = rng.standard_normal((200_000, 7))
    F = X @ W.T
    law = law_from_key_values(X, F, thetas, n_tokens=N, s2=S2)
    exact = LinearKeys(W).law(thetas, n_tokens=N, s2=S2)
    n = X.shape[0]
    for m, t in enumerate(thetas):
        p = X @ t
        h = p[:, None] * F  # (n, k) per-token mean term
        g = (p**2 + S2)[:, None, None] * F[:, :, None] * F[:, None, :]  # (n, k, k)
        hbar = h.mean(axis=0)
        se_mean = h.std(axis=0, ddof=1) / np.sqrt(n)
        # delta method for mean(g) - hbar hbar^T
        infl = g - h[:, :, None] * hbar[None, None, :] - hbar[None, :, None] * h[:, None, :]
        se_cov = infl.std(axis=0, ddof=1) / np.sqrt(n) / N
        assert np.all(np.abs(law.mean[m] - exact.mean[m]) <= 5 * se_mean)
        assert np.all(np.abs(law.cov[m] - exact.cov[m]) <= 5 * se_cov)


def _brute_posterior_mean(thetas, prior, W, phi):
    """Plain Gaussian densities (explicit inverse and determinant) over the leaves."""
    out = []
    for x in phi:
        w = []
        for t, p in zip(thetas, prior):
            mean = W @ t
            cov = ((t @ t + S2) * W @ W.T + np.outer(mean, mean)) / N
            r = x - mean
            dens = np.exp(-0.5 * r @ np.linalg.inv(cov) @ r) / np.sqrt(np.linalg.det(2 * np.pi * cov))
            w.append(p * dens)
        w = np.array(w)
        out.append(w @ thetas / w.sum())
    return np.array(out)


def test_posterior_mean_is_brute_force_and_a_repeated_row_carries_nothing():
    rng = np.random.default_rng(3)
    thetas = _tree_thetas(2)  # 4 leaves, D = 3
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    W2 = np.array([[0.8, 0.6, 0.0], [0.0, 0.6, -0.8]])
    W3 = np.vstack([W2, W2[:1]])  # the first row read again
    leaves = rng.integers(0, 4, size=20)
    S = thetas[leaves] + rng.standard_normal((20, 3)) * 0.3  # readings near the leaves
    phi2 = S @ W2.T
    phi3 = S @ W3.T
    brute = _brute_posterior_mean(thetas, prior, W2, phi2)
    got2 = law_posterior_mean(thetas, np.log(prior), LinearKeys(W2).law(thetas, n_tokens=N, s2=S2), phi2)
    got3 = law_posterior_mean(thetas, np.log(prior), LinearKeys(W3).law(thetas, n_tokens=N, s2=S2), phi3)
    np.testing.assert_allclose(got2, brute, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got3, brute, rtol=1e-7, atol=1e-10)
    # a law per sample (n, M, k) gives the same numbers
    law = LinearKeys(W3).law(thetas, n_tokens=N, s2=S2)
    per = ReadingLaw(np.broadcast_to(law.mean, (20,) + law.mean.shape), np.broadcast_to(law.cov, (20,) + law.cov.shape))
    np.testing.assert_allclose(law_posterior_mean(thetas, np.log(prior), per, phi3), got3, rtol=1e-12, atol=1e-14)
    # a single reading vector returns (D,)
    np.testing.assert_allclose(law_posterior_mean(thetas, np.log(prior), law, phi3[0]), got3[0], rtol=1e-12)


def test_bad_inputs_get_one_clear_line():
    thetas = _tree_thetas(2)
    with pytest.raises(ValueError, match="thetas must be"):
        LinearKeys(np.eye(2)).law(thetas, n_tokens=N, s2=S2)
    with pytest.raises(ValueError, match="tokens N"):
        LinearKeys(np.eye(3)).law(thetas, n_tokens=0, s2=S2)
    with pytest.raises(ValueError, match="readings must be"):
        law = LinearKeys(np.eye(3)).law(thetas, n_tokens=N, s2=S2)
        law_posterior_mean(thetas, np.zeros(4), law, np.zeros(2))
    with pytest.raises(ValueError, match="reading law needs"):
        ReadingLaw(np.zeros((4, 2)), np.zeros((4, 2)))


# --- weighted keys -----------------------------------------------------------------------------------
def _law_se(X, F, thetas):
    """Sample standard errors of law_from_key_values' mean and cov (delta method), per latent."""
    n = X.shape[0]
    out = []
    for t in thetas:
        p = X @ t
        h = p[:, None] * F
        g = (p**2 + S2)[:, None, None] * F[:, :, None] * F[:, None, :]
        hbar = h.mean(axis=0)
        infl = g - h[:, :, None] * hbar[None, None, :] - hbar[None, :, None] * h[:, None, :]
        out.append((h.std(axis=0, ddof=1) / np.sqrt(n), infl.std(axis=0, ddof=1) / np.sqrt(n) / N))
    return out


def test_weighted_keys_law_matches_monte_carlo():
    from fvnum.keys.families import WeightedKeys

    rng = np.random.default_rng(4)
    thetas = _tree_thetas(3)
    q = rng.uniform(0.0, 2.0, 7)
    fam = WeightedKeys(rng.standard_normal((2, 7)), q, 0.7)
    X = rng.standard_normal((200_000, 7))
    F = fam(X)
    law = law_from_key_values(X, F, thetas, n_tokens=N, s2=S2)
    exact = fam.law(thetas, n_tokens=N, s2=S2)
    for m, (se_mean, se_cov) in enumerate(_law_se(X, F, thetas)):
        assert np.all(np.abs(law.mean[m] - exact.mean[m]) <= 5 * se_mean)
        assert np.all(np.abs(law.cov[m] - exact.cov[m]) <= 5 * se_cov)


def test_weighted_keys_quadrature_and_stein():
    """m_d and h_d against scipy's adaptive quadrature; the mean is theta . E grad f (Stein), with
    E grad_d f = w_d (E[1/(q + c)] - 2 q_d E[x_d^2 / (q + c)^2])."""
    from scipy.integrate import quad

    from fvnum.keys.families import WeightedKeys

    rng = np.random.default_rng(5)
    q, c = rng.uniform(0.0, 3.0, 5), 0.4
    fam = WeightedKeys(rng.standard_normal((1, 5)), q, c)

    def integral(power, d=None):
        def g(t):
            val = t ** (power - 1) * np.exp(-t * c) * np.prod(1 / np.sqrt(1 + 2 * t * q))
            return val / (1 + 2 * t * q[d]) if d is not None else val

        return quad(g, 0, np.inf, epsabs=0, epsrel=1e-13, limit=400)[0]

    m = np.array([integral(1, d) for d in range(5)])
    h = np.array([integral(2, d) for d in range(5)])
    np.testing.assert_allclose(fam.m_, m, rtol=1e-10)
    np.testing.assert_allclose(fam.h_, h, rtol=1e-10)
    grad = fam.W[0] * (integral(1) - 2 * q * h)
    np.testing.assert_allclose(fam.stein_rows()[0], grad, rtol=1e-10)


def test_weighted_keys_with_zero_q_are_linear_keys_and_a_rotated_q_is_honoured():
    from fvnum.keys.families import WeightedKeys

    rng = np.random.default_rng(6)
    thetas = _tree_thetas(2)
    W = rng.standard_normal((2, 3))
    lin = LinearKeys(W).law(thetas, n_tokens=N, s2=S2)
    wz = WeightedKeys(W, np.zeros(3), 1.0).law(thetas, n_tokens=N, s2=S2)
    np.testing.assert_allclose(wz.mean, lin.mean, rtol=1e-12)
    np.testing.assert_allclose(wz.cov, lin.cov, rtol=1e-12)
    O, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    q = np.array([0.5, 1.0, 2.0])
    full = WeightedKeys(W, (O * q) @ O.T, 0.5)
    X = rng.standard_normal((4, 3))
    np.testing.assert_allclose(full(X), (X @ W.T) / (np.einsum("nd,de,ne->n", X, (O * q) @ O.T, X) + 0.5)[:, None])
    # rotating tokens, keys and latents together changes nothing
    diag = WeightedKeys(W @ O, q, 0.5).law(thetas @ O, n_tokens=N, s2=S2)
    law = full.law(thetas, n_tokens=N, s2=S2)
    np.testing.assert_allclose(law.mean, diag.mean, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(law.cov, diag.cov, rtol=1e-10, atol=1e-14)


def test_learned_keys_take_numpy_and_torch_callables():
    import torch
    from fvnum.keys.families import LearnedKeys

    thetas = _tree_thetas(2)
    W = np.array([[1.0, 0.5, 0.0]])
    lin = torch.nn.Linear(3, 1, bias=False).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(W))
    a = LearnedKeys(lambda X: X @ W.T, 3, n_samples=5000, seed=1).law(thetas, n_tokens=N, s2=S2)
    b = LearnedKeys(lin, 3, n_samples=5000, seed=1).law(thetas, n_tokens=N, s2=S2)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12)
    np.testing.assert_allclose(a.cov, b.cov, rtol=1e-12)
    with pytest.raises(ValueError, match="callable"):
        LearnedKeys(3.0, 3)
    with pytest.raises(ValueError, match="positive semi-definite"):
        from fvnum.keys.families import WeightedKeys

        WeightedKeys(W, -np.ones(3), 1.0)
