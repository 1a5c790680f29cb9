"""Key patching of the greedy keyed policy (fvnum.patching.keyed): its readings against the law the policy
decodes with, its decoder against the search's own, one patched cell against a by-hand run of the public
search, and layer 1 unchanged bit for bit."""
from fvnum.options import KeyedSearch, PatchSpec
import functools

import numpy as np
import pytest

import fvnum
from fvnum import tokens
from fvnum.keys.nonadaptive import best_nonadaptive_keyed
from fvnum.keys.adaptive import adaptive_keyed_trace
from fvnum.patching.keyed import donors, keyed_patching_table
from fvnum.keys.contexts import contexts, family_readings, posterior_means
from fvnum.keys.tree import _Tree, geometry_of, tree_law
from fvnum.priors.tree import numeric_prior
from fvsym.priors import TreePrior

PRIOR = TreePrior(2, "3/5")
N, S2 = 64, 0.01


@functools.cache
def first(family):
    return best_nonadaptive_keyed(PRIOR, 1, tokens(N, S2, keys=family), seed=0)


@pytest.mark.parametrize("family", [pytest.param("weighted", marks=pytest.mark.slow),
                                    pytest.param("softmax", marks=pytest.mark.slow), "linear"])
def test_readings_follow_the_law_the_policy_decodes_with(family):
    """Exact readings of real tokens of the layer-1 row and of a second row: mean and variance per leaf within 5
    standard errors of ``tree_law`` (the scale of the rows, ``c``, ``Q`` and the softmax ``beta`` all matter)."""
    spec = numeric_prior(PRIOR)
    tree = _Tree(spec)
    keys = first(family).keys
    rows = adaptive_keyed_trace(PRIOR, 2, tokens(256, S2, keys=family), samples=4, seed=0,
                                search=KeyedSearch(first=first(family))).rows[0]
    mean, cov = tree_law(tree, geometry_of(tree, keys, S2), rows, 256)
    rng = np.random.default_rng(1)
    n = 2000
    for leaf in (0, 3):
        X = rng.standard_normal((n, 256, spec.dim))
        y = X @ tree.thetas[leaf] + np.sqrt(S2) * rng.standard_normal((n, 256))
        for k in range(2):
            phi = family_readings(keys, np.repeat(rows[k][None], n, 0), X, y)
            se = phi.std(ddof=1) / np.sqrt(n)
            assert abs(phi.mean() - mean[leaf, k]) < 5 * se
            var_se = phi.var(ddof=1) * np.sqrt(2 / (n - 1))
            assert abs(phi.var(ddof=1) - cov[leaf, k, k]) < 5 * var_se


@pytest.mark.parametrize("family", ["weighted", "softmax"])
def test_decoder_is_the_searchs_own(family):
    trace = adaptive_keyed_trace(PRIOR, 2, tokens(N, S2, keys=family), samples=16, seed=0,
                                 search=KeyedSearch(first=first(family)))
    mine = posterior_means(numeric_prior(PRIOR), trace.keys, trace.rows, trace.phi, N, S2)
    np.testing.assert_allclose(mine, trace.theta_hat[:, -1], rtol=0, atol=1e-12)


def test_a_patched_cell_by_hand_and_layer_one_unchanged():
    """Budget 2, layer 2 patched by donors of depth 2: the donor's layer-2 row read on the target's values,
    decoded as if the target's own row was read (the public search run by hand on the same contexts)."""
    family, n, j = "softmax", 16, 2
    spec = numeric_prior(PRIOR)
    table = keyed_patching_table(PRIOR, 2, tokens(N, S2, keys=family), samples=n, seed=3,
                                 search=KeyedSearch(first=first(family)))
    assert table.layers == (1, 2) and table.depths == (1, 2) and table.metric == "theta"
    assert np.all(table.effect[0] == 0) and np.all(table.loss[0] == table.unpatched.value)  # bit for bit
    leaves, X, eps = contexts(spec, n, N, S2, 3)
    theta, theta_d = spec.thetas(leaves), spec.thetas(donors(spec, leaves, j, 3))
    y = np.einsum("nid,nd->ni", X, theta) + eps
    y_d = np.einsum("nid,nd->ni", X, theta_d) + eps
    keys = first(family).keys
    row1 = np.repeat(first(family).keys.B, n, 0)
    kw = dict(samples=n, seed=0, search=KeyedSearch(first=first(family)))
    channel = tokens(N, S2, keys=family)

    def row2(phi1):
        return adaptive_keyed_trace(PRIOR, 2, channel, readings=np.stack([phi1, 0 * phi1], 1), **kw).rows[:, 1]

    phi1 = family_readings(keys, row1, X, y)
    phi2 = family_readings(keys, row2(family_readings(keys, row1, X, y_d)), X, y)  # the donor's key, target's values
    trace = adaptive_keyed_trace(PRIOR, 2, channel, readings=np.stack([phi1, phi2], 1), **kw)  # its own row believed
    loss = ((trace.theta_hat[:, -1] - theta) ** 2).sum(-1)
    assert table.loss[1, j - 1] == pytest.approx(loss.mean(), rel=1e-9, abs=1e-12)
    assert table.effect[1, j - 1] > 2 * table.effect_stderr[1, j - 1]  # the wrong row misleads the decoder


@pytest.mark.parametrize("bad, match", [
    (dict(channel=tokens(N, S2, keys=None)), "keys of a family"),
    (dict(channel=fvnum.gaussian(0.3)), "reads tokens: .* not the gaussian channel"),
    (dict(channel=N), "channel must be a channel"),
    (dict(samples=1), "samples"),
    (dict(budget=0), "budget"),
    (dict(budget=4), "budget"),
    (dict(patch=PatchSpec(depths=[3])), "divergence depth"),
    (dict(patch=PatchSpec(depths=[])), "at least one"),
    (dict(patch=PatchSpec(layers=[3])), "patch layer l"),
    (dict(patch=PatchSpec(informed=True)), "PatchSpec"),
    (dict(patch=(1,)), "patch must be a fvnum.PatchSpec"),
    (dict(search=KeyedSearch(first="a design")), "SearchResult"),
])
def test_bad_arguments_are_refused_in_one_line(bad, match):
    kw = dict(budget=2, channel=tokens(N, S2), samples=8) | bad
    with pytest.raises(ValueError, match=match) as info:
        keyed_patching_table(PRIOR, kw.pop("budget"), kw.pop("channel"), **kw)
    assert "\n" not in str(info.value)


def test_the_patch_layers_are_a_part_of_the_whole_table():
    """``PatchSpec(layers=...)``: the rows of those layers, the same numbers as the whole table's."""
    search = KeyedSearch(first=first("linear"))
    whole = keyed_patching_table(PRIOR, 2, tokens(N, S2, keys="linear"), samples=8, seed=1, search=search)
    part = keyed_patching_table(PRIOR, 2, tokens(N, S2, keys="linear"), samples=8, seed=1, search=search,
                                patch=PatchSpec(layers=(2,), depths=(2,)))
    assert part.layers == (2,) and part.depths == (2,)
    assert part.loss[0, 0] == whole.loss[1, 1] and part.effect[0, 0] == whole.effect[1, 1]


def test_a_gaussian_prior_is_refused():
    from fvsym.priors import GaussianPrior

    with pytest.raises(ValueError, match="tree prior"):
        keyed_patching_table(GaussianPrior.matched(PRIOR), 2, tokens(N, S2), samples=8)
