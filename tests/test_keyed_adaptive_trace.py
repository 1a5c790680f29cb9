"""The greedy keyed search's trace (fvnum.keys.adaptive.adaptive_keyed_trace): the rows, readings and
posterior means behind adaptive_keyed_losses' numbers."""
import numpy as np
import pytest

from fvnum import tokens
from fvnum.keys.adaptive import adaptive_keyed_losses, adaptive_keyed_trace
from fvnum.options import KeyedSearch
from fvnum.keys.families import WeightedKeys
from fvsym.priors import TreePrior

PRIOR = TreePrior(3, "3/5")
N = 16
KW = dict(samples=120, seed=3, search=KeyedSearch(steps=8))


@pytest.fixture(scope="module")
def trace():
    return adaptive_keyed_trace(PRIOR, 3, tokens(N), **KW)


def test_trace_has_the_losses_of_the_search(trace):
    losses = adaptive_keyed_losses(PRIOR, 3, tokens(N), **KW)
    assert [r.estimate.value for r in trace.losses] == [r.estimate.value for r in losses]  # same seed: identical
    assert [r.estimate.stderr for r in trace.losses] == [r.estimate.stderr for r in losses]
    for layer, r in enumerate(trace.losses):  # every loss is the squared error of the trace's posterior means
        err = ((trace.theta_hat[:, layer] - trace.thetas) ** 2).sum(-1).mean()
        assert err == pytest.approx(r.estimate.value, rel=1e-12)


def test_trace_shapes_and_rows(trace):
    n, B, D = KW["samples"], 3, 7
    assert trace.rows.shape == (n, B, D) and trace.phi.shape == (n, B) and trace.theta_hat.shape == (n, B, D)
    assert trace.budget == B and trace.leaves.shape == (n,) and trace.thetas.shape == (n, D)
    np.testing.assert_allclose(np.linalg.norm(trace.rows[:, 1:], axis=-1), 1.0, rtol=1e-12)
    assert np.all(trace.rows[:, 0] == trace.rows[0, 0])  # layer 1 reads one key for every sample
    assert len({tuple(r) for r in np.round(trace.rows[:, 1], 6)}) > 1  # later layers adapt


def test_the_policy_replayed_on_its_own_readings_chooses_the_same_rows(trace):
    again = adaptive_keyed_trace(PRIOR, 3, tokens(N), **KW, readings=trace.phi)
    np.testing.assert_array_equal(again.rows, trace.rows)
    other = trace.phi.copy()
    other[:, 0] *= -1  # other readings: other rows at layer 2
    moved = adaptive_keyed_trace(PRIOR, 3, tokens(N), **KW, readings=other)
    assert np.abs(moved.rows[:, 1] - trace.rows[:, 1]).max() > 0.1
    np.testing.assert_array_equal(moved.phi, other)


def test_key_values_are_the_weighted_keys_of_the_rows(trace):
    x = np.random.default_rng(0).standard_normal((KW["samples"], 5, 7))
    got = trace.key_values(x, 1)
    for i in (0, 7, 50):
        want = WeightedKeys(trace.rows[i, 1], trace.keys.Q, trace.keys.c)(x[i])[:, 0]
        np.testing.assert_allclose(got[i], want, rtol=1e-12)


def test_layer_one_readings_follow_their_law(trace):
    """Layer 1's readings given the leaf: Gaussian with the key's CLT law (standardised mean within 5 SE)."""
    law = trace.keys.law(trace.thetas, n_tokens=N, s2=0.01)
    z = (trace.phi[:, 0] - law.mean[:, 0]) / np.sqrt(law.cov[:, 0, 0])
    assert abs(z.mean()) < 5 / np.sqrt(len(z)) and 0.6 < z.var() < 1.5


def test_bad_readings_are_refused():
    with pytest.raises(ValueError, match="readings must be finite, shape"):
        adaptive_keyed_trace(PRIOR, 2, tokens(N), **KW, readings=np.zeros((KW["samples"], 3)))
    with pytest.raises(ValueError, match="readings must be finite"):
        adaptive_keyed_trace(PRIOR, 2, tokens(N), **KW, readings=np.full((KW["samples"], 2), np.nan))


def test_canonical_signs_read_the_same(trace):
    """Canonical rows (largest entry positive) are the search's rows up to sign, with their readings flipped
    alike: the same posterior, so the same losses (up to rounding in the later layers' searches)."""
    canon = adaptive_keyed_trace(PRIOR, 3, tokens(N), **KW, canonical=True)
    rows = canon.rows[:, 1:]
    big = np.take_along_axis(rows, np.abs(rows).argmax(-1)[..., None], -1)[..., 0]
    assert np.all(big > 0)
    sign = np.sign((canon.rows[:, 1] * trace.rows[:, 1]).sum(-1))
    np.testing.assert_allclose(canon.rows[:, 1], sign[:, None] * trace.rows[:, 1], atol=1e-9)
    np.testing.assert_allclose(canon.phi[:, 1], sign * trace.phi[:, 1], atol=1e-12)
    np.testing.assert_allclose(canon.theta_hat[:, 1], trace.theta_hat[:, 1], atol=1e-9)
    for a, b in zip(canon.losses, trace.losses):
        assert abs(a.estimate.value - b.estimate.value) <= 5 * b.estimate.stderr
