"""Key patching on the theory strategies (THEORY.md section 8)."""
import fvnum
import numpy as np
import pytest

from fvnum import patching_table
from fvnum.patching.keys import donor_leaves
from fvnum.priors.tree import numeric_prior
from fvsym.priors import GaussianPrior, TreePrior

PRIOR = TreePrior(4, "1/2")


def test_donor_has_the_requested_divergence_depth():
    spec = numeric_prior(PRIOR)
    rng = np.random.default_rng(0)
    leaves = spec.sample(1000, rng)
    for j in range(1, 5):
        donors = donor_leaves(leaves, 4, j, rng)
        s, sd = spec.signs(leaves), spec.signs(donors)
        first = np.argmax(s != sd, axis=1) + 1
        np.testing.assert_array_equal(first, j)


@pytest.fixture(scope="module")
def path_table():
    return patching_table(PRIOR, "path", 3, fvnum.gaussian(0.3), samples=4000, seed=1)


def test_patch_at_or_above_the_divergence_is_harmless_exactly(path_table):
    """Layers l <= j read the same node with the same value on target and donor: nothing changes."""
    for j in range(1, 5):
        for l in range(1, min(j, 3) + 1):
            assert path_table.loss[l - 1, j - 1] == path_table.unpatched_by_depth[j - 1]


def test_patch_below_the_divergence_is_costly_and_more_so_earlier(path_table):
    t = path_table
    for j in range(1, 3):
        for l in range(j + 1, 4):
            gap = t.loss[l - 1, j - 1] - t.unpatched_by_depth[j - 1]
            assert gap > 5 * (t.stderr[l - 1, j - 1] + t.unpatched_stderr_by_depth[j - 1])
    assert t.loss[1, 0] - t.loss[2, 0] > 5 * (t.stderr[1, 0] + t.stderr[2, 0])  # layer 2 worse than layer 3
    assert t.unpatched.n == 4 * 4000
    assert "unpatched" in t.to_markdown() and t.to_dict()["loss"][0][0] == t.loss[0, 0]


def test_informed_decoder_is_no_worse():
    believed = patching_table(PRIOR, "path", 3, fvnum.gaussian(0.3), samples=3000, seed=2, patch=fvnum.PatchSpec(depths=[1]))
    informed = patching_table(PRIOR, "path", 3, fvnum.gaussian(0.3), samples=3000, seed=2, patch=fvnum.PatchSpec(depths=[1], informed=True))
    assert np.all(informed.loss <= believed.loss + 5 * (informed.stderr + believed.stderr))
    assert informed.loss[1, 0] < believed.loss[1, 0] - 5 * (informed.stderr[1, 0] + believed.stderr[1, 0])


def test_tokens_channel_and_other_policies():
    tok = patching_table(PRIOR, "path", 3, fvnum.tokens(64), samples=2000, seed=3)
    assert tok.loss.shape == (3, 4) and np.all(np.isfinite(tok.loss))
    opt = patching_table(PRIOR, "optimal", 3, fvnum.gaussian(0.0), samples=2000, seed=3)
    assert opt.loss.shape == (3, 4) and opt.strategy == "optimal"
    fixed = patching_table(PRIOR, "top_levels", 3, fvnum.gaussian(0.3), samples=1000, seed=3)
    assert np.all(fixed.loss == fixed.unpatched_by_depth[None, :])  # a non-adaptive design ignores the donor


def test_patching_needs_a_tree_prior():
    with pytest.raises(ValueError, match="tree prior"):
        patching_table(GaussianPrior.isotropic(3), "path", 2, fvnum.gaussian(0.1), samples=10)
    with pytest.raises(ValueError, match="divergence depth 5"):
        patching_table(PRIOR, "path", 2, fvnum.gaussian(0.1), samples=10, patch=fvnum.PatchSpec(depths=[5]))


def test_patched_loss_for_given_leaves():
    from fvnum import patched_loss

    target, donor = (1, 1, -1, 1), (1, -1, 1, 1)  # divergence depth 2
    base, patched = patched_loss(PRIOR, "path", 3, fvnum.gaussian(0.3), (target, donor), samples=3000, seed=4)
    assert len(patched) == 3
    assert patched[0] == base and patched[1] == base  # layers 1, 2 <= j
    assert patched[2].value > base.value + 5 * (patched[2].stderr + base.stderr)
    same = patched_loss(PRIOR, "path", 3, fvnum.gaussian(0.3), (2, 4), samples=3000, seed=4)  # indices of the same two leaves
    assert same[0] == base
    with pytest.raises(ValueError, match="must differ"):
        patched_loss(PRIOR, "path", 3, fvnum.gaussian(0.3), (5, 5), samples=10)
    with pytest.raises(ValueError, match="4 signs"):
        patched_loss(PRIOR, "path", 3, fvnum.gaussian(0.3), ((1, 1), 5), samples=10)
