"""The adaptive softmax search with a quadratic part per layer (fvnum.keys.adaptive.adaptive_softmax_losses;
docs/softmax.md, "A stronger adaptive softmax search"): its law is the closed form's, it starts from the greedy
step and never reads worse by its objective, it is not worse than the greedy search, its loss is a real reader's
(real tokens at N 64) within 5 standard errors, and its price refuses absurd sizes in one line."""
from fvnum.options import KeyedSearch
import numpy as np
import pytest

from fvnum import tokens
from fvnum.estimate import Estimate
from fvnum.keys.readings import softmax_law
from fvnum.priors.tree import TreeSpec
from fvsym.errors import ResourceRefused
from fvsym.priors import TreePrior
from tests._cli import one_message

torch = pytest.importorskip("torch")
PRIOR = TreePrior(3, "0.6")  # D = 7, 8 leaves
KW = dict(seed=0)
SOFTMAX = tokens(64, 0.01, keys="softmax")
FAST = dict(steps=8, joint_steps=12)


@pytest.fixture(scope="module")
def first():
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed

    return best_nonadaptive_keyed(PRIOR, 1, SOFTMAX, **KW, restarts=1, maxiter=40)


def test_rows_with_their_own_q_have_the_closed_form_law():
    """RowQGeometry through tree_law equals fvnum.keys.readings.softmax_law with one q per channel, on every leaf."""
    from fvnum.keys.adaptive import RowQGeometry
    from fvnum.keys.tree import _Tree, tree_law

    tree = _Tree(TreeSpec(3, 0.6 ** (np.arange(3) / 2)))
    rng = np.random.default_rng(5)
    B = rng.standard_normal((3, 7)) * np.array([[0.4], [1.2], [2.0]])
    q = rng.uniform(0.0, 1.5, (3, 7))
    mean, cov, _ = softmax_law(B, q, tree.thetas, 64, 0.01)
    rows = torch.tensor(np.concatenate([B, q], 1))
    m, c = tree_law(tree, RowQGeometry(tree, 0.01, torch), rows, 64, torch)
    np.testing.assert_allclose(m.numpy(), mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(c.numpy(), cov, rtol=1e-10, atol=1e-14)


def test_every_layer_reads_no_worse_than_the_greedy_step_and_the_row_no_worse_than_greedy(first):
    """Per sample and layer the row read has a lookahead objective at most the greedy step's (it is one of the
    two candidates); the losses at every budget are not above the greedy search's (same samples, same layer 1)
    beyond 2 standard errors, and at budget 1 they are the same."""
    from fvnum.keys.adaptive import _softmax_policy, adaptive_keyed_losses
    from fvnum.keys.tree import one_thread

    gains, new = [], []
    with one_thread():
        for th, lt, rows, phi, hat, f_greedy, f_new in _softmax_policy(PRIOR, 3, SOFTMAX, **KW, samples=120, first=first,
                                                                       chunk=200, grid=128, **FAST):
            new.append(Estimate.of(((hat - th[lt]) ** 2).sum(-1).numpy()))
            if f_greedy is not None:
                assert torch.all(f_new <= f_greedy + 1e-12)
                gains.append(float((f_greedy - f_new).mean()))
    assert max(gains) > 0  # the joint step found better scores somewhere
    assert rows.shape == (120, 3, 14) and torch.all(rows[:, :, 7:] > 0)  # [b, q] per layer, q > 0
    old = adaptive_keyed_losses(PRIOR, 3, SOFTMAX, **KW, samples=120,
                                search=KeyedSearch(first=first, steps=FAST["steps"]))
    assert new[0].value == pytest.approx(old[0].estimate.value, rel=1e-9)
    for o, n in zip(old, new):
        assert n.value <= o.estimate.value + 2 * max(o.estimate.stderr, n.stderr)


def test_the_policy_on_real_tokens_has_the_law_loss_within_5_se(first):
    """The same policy read from real contexts of N = 64 tokens (softmax averages, rows chosen from the real
    readings) against its law-drawn readings: the two Monte Carlo losses within 5 combined standard errors."""
    from fvnum.keys.adaptive import adaptive_softmax_losses, adaptive_softmax_losses_mc

    law = adaptive_softmax_losses(PRIOR, 2, SOFTMAX, **KW, samples=200, search=KeyedSearch(first=first, **FAST))
    real = adaptive_softmax_losses_mc(PRIOR, 2, SOFTMAX, **KW, samples=200, search=KeyedSearch(first=first, **FAST))
    for a, b in zip(law, real):
        assert a.name == "best_adaptive_keyed" and a.keys is first.keys
        a = a.estimate
        assert b.n == a.n == 200 and b.stderr > 0
        assert abs(a.value - b.value) <= 5 * np.hypot(a.stderr, b.stderr), (a, b)
    assert real[1].value < real[0].value  # the second real reading helps


def test_the_price_refuses_absurd_sizes_in_one_line():
    from fvnum.keys.adaptive import adaptive_softmax_cost, adaptive_softmax_losses, adaptive_softmax_losses_mc

    assert adaptive_softmax_cost(4, 15, 4, 1000) > adaptive_softmax_cost(4, 15, 2, 1000) > adaptive_softmax_cost(
        3, 7, 2, 1000) > 0
    assert adaptive_softmax_cost(4, 15, 4, 2000) > adaptive_softmax_cost(4, 15, 4, 1000)
    big = TreePrior(10, "0.6")
    for call in (adaptive_softmax_losses, adaptive_softmax_losses_mc):
        with pytest.raises(ResourceRefused) as e:
            call(big, 8, SOFTMAX, samples=10**6)
        one_message(e, "adaptive softmax search", "over the limit")
    for call in (adaptive_softmax_losses, adaptive_softmax_losses_mc):  # the search reads softmax keys
        with pytest.raises(ValueError, match="reads softmax keys: .* got keys='weighted'") as e:
            call(PRIOR, 2, tokens(64), samples=10)
        assert "\n" not in str(e.value)
