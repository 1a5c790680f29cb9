"""The fast paths of the tokens channel's unit-row decoder against their plain references: Gram-Schmidt row
spans against the SVD, the SIMD logarithm against libm's, and the decoder on either span against the
numpy oracle (``fvnum/mc/_reference.py``), to 1e-12."""
import numpy as np
import pytest

from fvnum.mc import _reference as R
from fvnum.priors._kernels.tokens import _log_pass, _row_span_qr
from fvnum.mc.channels import token_statistics
from fvnum.priors.tree import _row_span_svd, row_span, tokens_dense_decode

TOL = 1e-12


def _case(n, depth, B, N, seed, repeat_every=0):
    rng = np.random.default_rng(seed)
    scales = 0.5 ** (np.arange(depth) / 2)
    D = 2**depth - 1
    leaves = rng.integers(0, 2**depth, n)
    sigma2 = float((scales**2).sum()) + 0.01
    (S,) = token_statistics([R.leaf_thetas(scales)[leaves]], N, 0.01, rng)
    W = rng.standard_normal((n, B, D))
    if repeat_every:
        W[::repeat_every, -1] = W[::repeat_every, 0]  # rank B - 1: the SVD route for these samples
        W[1::repeat_every, 1] = W[1::repeat_every, 0] * (1 + 1e-7)  # full rank, ill conditioned: the SVD too
    W /= np.linalg.norm(W, axis=2, keepdims=True)
    return scales, leaves, S, sigma2, W, np.einsum("nbd,nd->nb", W, S)


def _projector(V):
    return np.einsum("nrd,nre->nde", V, V)


@pytest.mark.parametrize("depth, B", [(3, 2), (4, 4), (6, 5), (4, 15)])
def test_row_span_gram_schmidt_equals_svd(depth, B):
    """Rows of each sample's own: the span (as its projector) and the readings' projection on it agree
    with the SVD's, sample by sample, with rank-deficient and ill-conditioned samples mixed in."""
    _, _, S, _, W, phi = _case(60, depth, B, 32, depth + B, repeat_every=4)
    V, z = row_span(W, phi)
    Vs, zs = _row_span_svd(W, phi, 1e-9)
    np.testing.assert_allclose(_projector(V), _projector(Vs), atol=TOL)
    np.testing.assert_allclose(np.einsum("nrd,nr->nd", V, z), np.einsum("nrd,nr->nd", Vs, zs), atol=1e-9)
    good = np.arange(60) % 4 >= 2  # the well-conditioned samples: orthonormal rows, z = V S exactly
    ok = np.zeros(60, dtype=bool)
    _row_span_qr(W, phi, np.zeros_like(W), np.zeros(phi.shape), ok, 1e6)
    np.testing.assert_array_equal(ok, good)  # Gram-Schmidt where well conditioned, the SVD elsewhere
    np.testing.assert_allclose(np.einsum("nrd,nsd->nrs", V[good], V[good]), np.broadcast_to(np.eye(B), (good.sum(), B, B)),
                               atol=TOL)
    np.testing.assert_allclose(z[good], np.einsum("nrd,nd->nr", V[good], S[good]), atol=TOL)


@pytest.mark.parametrize("N", [4, 128])
def test_tokens_dense_decoder_on_either_span_equals_oracle(N):
    """The decoder on Gram-Schmidt spans and on SVD spans gives the oracle's posterior means and losses
    (pseudo-inverse and Bessel functions), depth 5, four unit rows per sample."""
    scales, leaves, S, sigma2, W, phi = _case(50, 5, 4, N, N, repeat_every=5)
    ref = R.tokens_posterior_mean(W, phi, float(N), sigma2, scales)
    for span in (row_span(W, phi), _row_span_svd(W, phi, 1e-9)):
        loss, mean = np.zeros(50), np.zeros((50, 31))
        tokens_dense_decode(*span, float(N), sigma2, scales, leaves, loss, mean)
        tol = TOL * max(1.0, N / 10)
        np.testing.assert_allclose(mean, ref, rtol=tol, atol=tol)
        np.testing.assert_allclose(loss, R.losses(ref, leaves, scales), rtol=tol, atol=tol)


def test_log_pass_equals_log():
    """``_log_pass`` within 4 ulp of ``np.log`` over the whole normal range, at 1 from both sides and at the
    edges of its mantissa interval."""
    rng = np.random.default_rng(3)
    x = np.concatenate([10 ** rng.uniform(-307, 308, 20000), 1 - 2.0 ** -np.arange(1, 53), 1 + 2.0 ** -np.arange(1, 53),
                        [1.0, 2.0, 0.5, np.sqrt(2), np.sqrt(0.5), np.nextafter(np.sqrt(2), 2), 1e-300]])
    out, bits = np.zeros_like(x), np.zeros(x.size, np.int64)
    _log_pass(x, out, x.view(np.int64), bits, bits.view(np.float64), x.size)
    ref = np.log(x)
    assert out[np.flatnonzero(x == 1.0)[0]] == 0.0
    np.testing.assert_array_less(np.abs(out - ref), 4 * np.spacing(np.abs(ref)) + 1e-300)
