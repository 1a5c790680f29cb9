"""Function-vector interventions on theory strategies (THEORY.md section 9b): transplant, mean state, injection."""
import math

import numpy as np
import pytest
from scipy.stats import norm

import fvnum
from fvnum.patching.keys import PatchingTable
from fvnum.patching.state import injection_table, mean_state, state_patching_table
from fvnum.patching.state_tables import InjectionTable, MeanState
from fvsym.priors import GaussianPrior, TreePrior

P = TreePrior(5, 0.6)


def test_path_transplant_changes_nothing_bit_for_bit_below_the_divergence_and_costs_above():
    t = state_patching_table(P, "path", 4, fvnum.gaussian(0.2), samples=3000, seed=4)
    assert isinstance(t, PatchingTable) and t.intervention == "transplant" and t.strategy == "path"
    assert t.layers == (1, 2, 3, 4) and t.depths == (1, 2, 3, 4, 5) and t.loss.shape == (4, 5)
    for a, l in enumerate(t.layers):
        for b, j in enumerate(t.depths):
            if j > l:  # the donor's readings of layers 1..l are the target's own: the same floats
                assert t.effect[a, b] == 0.0 and t.effect_stderr[a, b] == 0.0
                assert t.loss[a, b] == t.unpatched_by_depth[b]
            else:
                assert t.effect[a, b] > 5 * t.effect_stderr[a, b] and t.effect[a, b] > 0
    # the earlier the divergence, the larger the damage of the whole state (j = 1 worst)
    assert np.all(np.diff(t.effect[-1]) < 0)
    d = t.to_dict()
    assert d["intervention"] == "transplant" and np.array(d["effect"]).shape == (4, 5)
    assert "transplant" in repr(t) and "effect (patched - unpatched, paired):" in t.to_markdown()


def test_the_whole_transplanted_state_decodes_the_donor():
    """At l = L = K the readout decodes the donor's state: under a tiny noise it names the donor's leaf, so the loss
    is ||theta_donor - theta_target||^2 = (2 a_j)^2 (the same node, the other sign) + 2 sum_{k > j} a_k^2 (below j
    the donor's nodes lie in the other subtree: a_k^2 each, twice)."""
    a = np.sqrt(0.6) ** np.arange(5)  # scales a_k = alpha^((k - 1) / 2)
    t = state_patching_table(P, "path", 5, fvnum.gaussian(1e-4), samples=2000, seed=0)
    for b, j in enumerate(t.depths):
        expect = 4 * a[j - 1] ** 2 + 2 * np.sum(a[j:] ** 2)
        assert abs(t.loss[-1, b] - expect) <= 5 * t.stderr[-1, b] + 1e-9, (j, t.loss[-1, b], expect)


def test_mean_state_of_path_matches_its_closed_form_within_five_standard_errors():
    """Phi_bar_1(s_1) = a_1 s_1; Phi_bar_2(s_1, s_2) second slot = a_2 s_2 P(the first reading has the sign s_1)
    (a wrong first sign reads the sibling, off the path: 0 on average); a_1 = 1, a_2 = sqrt(alpha)."""
    tau, n = 0.7, 40_000
    m = mean_state(P, "path", 3, fvnum.gaussian(tau), samples=n, seed=2)
    assert isinstance(m, MeanState) and m.layers == (1, 2, 3) and m.means[2].shape == (4, 2)
    assert m.counts[2].sum() == n
    right = norm.cdf(1.0 / tau)
    for prefix, (s1, s2) in enumerate(((1, 1), (1, -1), (-1, 1), (-1, -1))):
        mean = m.of(2, [s1, s2])
        se = math.sqrt(tau**2 + 0.6**2) / math.sqrt(m.counts[2][prefix])
        assert abs(mean[0] - s1) <= 5 * se
        assert abs(mean[1] - math.sqrt(0.6) * s2 * right) <= 5 * se
    assert np.array_equal(m.of(1, 0), m.means[1][0]) and m.prefix_index(2, [-1, 1]) == 2
    with pytest.raises(ValueError, match="a prefix at layer 2 is 2 signs"):
        m.of(2, [1, 1, 1])
    with pytest.raises(ValueError, match="no mean state at layer 4"):
        m.of(4, 0)


def test_path_follows_an_injected_prefix_and_the_loss_counts_the_wrong_subtree():
    t = injection_table(P, "path", 4, fvnum.gaussian(0.05), samples=4000, seed=1)
    assert isinstance(t, InjectionTable) and t.intervention == "injection"
    for a, l in enumerate(t.layers):
        for b, j in enumerate(t.depths):
            if j > l:
                assert np.isnan(t.prefix_accuracy[a, b]) and np.isnan(t.loss[a, b])
            else:  # a deep adaptive strategy reads inside the injected subtree
                assert t.prefix_accuracy[a, b] >= 0.99
                assert t.effect[a, b] > 10 * t.effect_stderr[a, b]
    assert np.all(t.own_accuracy >= 0.99) and np.allclose(t.chance, 2.0 ** -np.array(t.layers))
    assert np.all(t.own_injected_accuracy >= 0.99)  # the control: its own prefix's mean keeps it on its path
    assert np.all(t.own_injected_loss < t.loss[:, 0])
    assert len(t.to_frame()) == sum(min(l, 5) for l in t.layers)
    assert "prefix accuracy" in t.to_markdown() and "own" in repr(t)
    assert t.to_dict()["prefix_accuracy"][0][1] is None  # NaN cells are null in JSON
    from fvnum.patching.state_tables import injection_from_dict

    again = injection_from_dict(t.to_dict())
    assert again.to_markdown() == t.to_markdown() and "own prefix injected" in t.to_markdown()


def test_path_transplant_under_tokens_is_harmless_within_noise_below_the_divergence():
    t = state_patching_table(P, "path", 3, fvnum.tokens(256), samples=4000, seed=0, patch=fvnum.PatchSpec(depths=(1, 4)))
    assert t.depths == (1, 4)
    assert np.all(np.abs(t.effect[:, 1]) <= 5 * t.effect_stderr[:, 1] + 1e-12)
    assert np.all(t.effect[:, 0] > 10 * t.effect_stderr[:, 0])


def test_same_seed_same_numbers_other_seed_other_numbers():
    a = state_patching_table(P, "greedy_coordinate", 3, fvnum.gaussian(0.3), samples=300, seed=7, patch=fvnum.PatchSpec(depths=(1, 2)))
    b = state_patching_table(P, "greedy_coordinate", 3, fvnum.gaussian(0.3), samples=300, seed=7, patch=fvnum.PatchSpec(depths=(1, 2)))
    c = state_patching_table(P, "greedy_coordinate", 3, fvnum.gaussian(0.3), samples=300, seed=8, patch=fvnum.PatchSpec(depths=(1, 2)))
    assert np.array_equal(a.loss, b.loss) and not np.array_equal(a.loss, c.loss)
    kw = dict(samples=200, patch=fvnum.PatchSpec(mean_samples=400))
    i1 = injection_table(P, "greedy_coordinate", 3, fvnum.gaussian(0.3), seed=3, **kw)
    i2 = injection_table(P, "greedy_coordinate", 3, fvnum.gaussian(0.3), seed=3, **kw)
    i3 = injection_table(P, "greedy_coordinate", 3, fvnum.gaussian(0.3), seed=4, **kw)
    assert np.array_equal(i1.prefix_accuracy, i2.prefix_accuracy, equal_nan=True)
    assert np.array_equal(i1.loss, i2.loss, equal_nan=True) and not np.array_equal(i1.loss, i3.loss, equal_nan=True)


@pytest.mark.heavy
def test_every_adaptive_strategy_of_the_tree_gets_a_table():
    for strategy in ("path", "optimal", "bellman_noiseless", "greedy_coordinate", "greedy_dense"):
        t = state_patching_table(P, strategy, 2, fvnum.gaussian(0.3), samples=300, seed=0, patch=fvnum.PatchSpec(depths=(1,)))
        assert t.loss.shape == (2, 1) and t.effect[:, 0].max() > 0, strategy
    assert fvnum.state_patching_table is state_patching_table and fvnum.mean_state is mean_state


def test_bad_inputs_are_one_line_errors_naming_the_value():
    with pytest.raises(ValueError, match="divergence depth j must be"):
        state_patching_table(P, "path", 3, fvnum.gaussian(0.1), samples=100, patch=fvnum.PatchSpec(depths=(6,)))
    with pytest.raises(ValueError, match="layer l must be"):
        state_patching_table(P, "path", 3, fvnum.gaussian(0.1), samples=100, patch=fvnum.PatchSpec(layers=(4,)))
    with pytest.raises(ValueError, match="needs a tree prior"):
        state_patching_table(GaussianPrior([[1.0, 0.0], [0.0, 0.25]]), "top_levels", 2, fvnum.gaussian(0.1), samples=100)
    with pytest.raises(ValueError, match="injection needs a noisy channel"):
        injection_table(P, "path", 3, fvnum.gaussian(0.0), samples=100)
    with pytest.raises(ValueError, match="tau"):
        state_patching_table(P, "path", 3, fvnum.gaussian(-1.0), samples=100)
    with pytest.raises(ValueError, match="give the tokens channel, fvnum.tokens"):
        state_patching_table(P, "adaptive_keyed_weighted", 2, fvnum.gaussian(0.1))
    with pytest.raises(ValueError, match="no context among the mean state"):
        injection_table(P, "path", 3, fvnum.gaussian(0.3), samples=200, patch=fvnum.PatchSpec(mean_samples=3))
    m = mean_state(P, "path", 2, fvnum.gaussian(0.3), samples=500)
    with pytest.raises(ValueError, match="the mean state was drawn under another budget: budget 2"):
        injection_table(P, "path", 3, fvnum.gaussian(0.3), samples=100, means=m)
    m = mean_state(P, "path", 3, fvnum.gaussian(0.3), samples=500, layers=(1, 2))
    with pytest.raises(ValueError, match="the mean state holds layers 1, 2"):
        injection_table(P, "path", 3, fvnum.gaussian(0.3), samples=100, means=m)


@pytest.mark.slow
def test_keyed_policy_transplant_and_injection():
    """A's prediction policy (the greedy keyed policy, weighted keys) on drawn tokens: the whole state of a donor
    diverging at the root costs, its injected root prefix is followed."""
    t = state_patching_table(P, "adaptive_keyed_weighted", 2, fvnum.tokens(64), samples=40, seed=0, patch=fvnum.PatchSpec(depths=(1,)))
    assert t.strategy == "adaptive_keyed_weighted" and t.intervention == "transplant"
    assert t.effect[-1, 0] > 5 * t.effect_stderr[-1, 0]
    i = injection_table(P, "adaptive_keyed_weighted", 2, fvnum.tokens(64), samples=40, seed=0, patch=fvnum.PatchSpec(depths=(1,)))
    assert i.prefix_accuracy[0, 0] >= 0.8


@pytest.mark.heavy
def test_absurd_sizes_are_priced_before_work():
    from fvsym.errors import ResourceRefused

    with pytest.raises(ResourceRefused, match=r"state_patching_table of path with 10000000000 samples would take about"):
        state_patching_table(P, "path", 3, fvnum.gaussian(0.1), samples=10**10)
    with pytest.raises(ResourceRefused, match="injection_table of path"):
        injection_table(P, "path", 3, fvnum.gaussian(0.1), samples=10**9)
    with pytest.raises(ResourceRefused, match="adaptive_keyed_weighted with 100000 contexts"):
        state_patching_table(TreePrior(7, 0.6), "adaptive_keyed_weighted", 6, fvnum.tokens(64), samples=100_000)
    with pytest.raises(ValueError, match="budget must be >= 1, got 0"):
        mean_state(P, "path", 0, fvnum.gaussian(0.1), samples=10)


def test_injection_stderr_covers_the_spread_of_the_mean_states_across_their_seeds():
    """The same targets, mean states of six seeds: the loss's sd across them is within the reported standard
    error's scale (the targets' stderr alone, the old report, is ten times smaller than that spread)."""
    P = TreePrior(3, "0.8")
    kw = dict(samples=2000, seed=0, patch=fvnum.PatchSpec(layers=[3], depths=[1]))
    tables = [injection_table(P, "path", 3, fvnum.gaussian(1.0), means=mean_state(P, "path", 3, fvnum.gaussian(1.0), samples=1000, seed=s, layers=[3]),
                              **kw) for s in range(1, 7)]
    loss = np.array([t.loss[0, 0] for t in tables])
    stderr = np.median([t.stderr[0, 0] for t in tables])
    assert loss.std(ddof=1) < 3 * stderr and stderr < 5 * loss.std(ddof=1)
    assert all(t.stderr_includes.startswith("targets and the mean state") for t in tables)
    assert "jackknife" in tables[0].to_dict()["stderr_includes"] and tables[0].to_dict()["seed"] == 0


def test_theory_tables_carry_their_seed_sizes_and_what_they_patched():
    P = TreePrior(3, "0.8")
    kw = dict(samples=200, seed=7)
    keys = fvnum.patching_table(P, "path", 3, fvnum.gaussian(0.5), **kw)
    transplant = state_patching_table(P, "path", 3, fvnum.gaussian(0.5), **kw)
    inj = injection_table(P, "path", 3, fvnum.gaussian(0.5), patch=fvnum.PatchSpec(mean_samples=300), **kw)
    for t in (keys, transplant, inj):
        d = t.to_dict()
        assert d["seed"] == 7 and d["n"] == 200 and d["patched"] and d["how"]
        assert t.to_markdown().splitlines()[0].startswith(d["intervention"].replace("key", "key patching"))
    assert inj.to_dict()["mean_samples"] == 300 and "mean states of 300 contexts" in inj.to_markdown()
    assert transplant.to_dict()["how"] == "replaced by the donor's"
    assert inj.to_dict()["how"] == "replaced by the mean workspace of the donor's prefix"
