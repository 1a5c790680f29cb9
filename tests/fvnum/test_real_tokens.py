"""The keyed rows of Models A and B on real tokens (fvnum.keys.real_tokens; ``real_samples`` of
fvnum.theory.comparison_table and keyed_curves): A's row is the unpatched loss of keyed_patching_table on the same
contexts, B's design is decoded by the family's exact posterior on its own readings, a run continued from its
readings is the run in one go, the rows follow the law's rows within 5 standard errors where the CLT holds (large
N), the same seed gives the same numbers, and bad input is refused in one line."""
import fvnum
import functools
import math

import numpy as np
import pytest

from fvnum.keys.readings import law_posterior_mean
from fvnum.keys.nonadaptive import best_nonadaptive_keyed
from fvnum.keys.real_tokens import REAL_ROWS, design_losses, real_keyed_losses
from fvnum.keys.tree import _Tree
from fvnum.mc.channels import make_channel
from fvnum.patching.keyed import keyed_patching_table
from fvnum.keys.contexts import target_values
from fvnum.priors.tree import numeric_prior
from fvnum.theory import comparison_table, keyed_curves
from fvsym.errors import InputError
from fvsym.priors import GaussianPrior, TreePrior

PRIOR = TreePrior(3, "3/5")
N, S2 = 32, 0.01


@functools.cache
def first(family="weighted"):
    return best_nonadaptive_keyed(PRIOR, 1, fvnum.tokens(N, S2, keys=family), seed=0)


@functools.cache
def design(budget, family="weighted"):
    return best_nonadaptive_keyed(PRIOR, budget, fvnum.tokens(N, S2, keys=family), seed=0, samples=400)


@pytest.mark.parametrize("family", ["weighted", "linear"])
def test_the_adaptive_row_is_keyed_patchings_unpatched_loss(family):
    """The same policy (its layer-1 key ``first``), the same contexts (samples, seed): the same losses at every
    budget, from one run to the largest (the policy is greedy)."""
    found = real_keyed_losses(PRIOR, [1, 2], family, n_tokens=N, s2=S2, samples=40, seed=5, first=first(family),
                              designs={}, design_samples=0)
    for budget in (1, 2):
        table = keyed_patching_table(PRIOR, budget, fvnum.tokens(N, S2, keys=family), samples=40, seed=5,
                                     search=fvnum.KeyedSearch(first=first(family)), patch=fvnum.PatchSpec(depths=(1,)))
        mine = found.estimate(REAL_ROWS[0], budget)
        assert mine.value == pytest.approx(table.unpatched.value, rel=1e-12, abs=1e-15)
        assert mine.stderr == pytest.approx(table.unpatched.stderr, rel=1e-9, abs=1e-15) and mine.n == 40
    assert sorted(found.nonadaptive) == [1]  # B's budget-1 design is A's first key: the same losses
    np.testing.assert_array_equal(found.nonadaptive[1], found.adaptive[1])


def test_a_run_continued_from_its_readings_is_the_run_in_one_go():
    kw = dict(n_tokens=N, s2=S2, samples=30, seed=2, first=first(), designs={}, design_samples=0)
    whole = real_keyed_losses(PRIOR, [1, 2, 3], **kw)
    part = real_keyed_losses(PRIOR, [1], **kw)
    rest = real_keyed_losses(PRIOR, [3], **kw, readings=part.readings)
    np.testing.assert_array_equal(rest.readings, whole.readings)
    np.testing.assert_array_equal(rest.adaptive[3], whole.adaptive[3])
    with pytest.raises(InputError, match="readings must be A's readings"):  # another seed's readings
        real_keyed_losses(PRIOR, [3], **{**kw, "seed": 3}, readings=part.readings)


@pytest.mark.parametrize("family", ["weighted", "linear"])
def test_the_design_is_decoded_by_the_familys_exact_posterior_on_its_own_readings(family):
    """B's real row: each row of its design read exactly on the contexts (``keys.readings``: the family object's own
    reading of the tokens), decoded by the exact posterior mean under the keys' CLT law (``readings.law_posterior_mean``,
    as the law's row decodes): per context to 1e-10."""
    spec = numeric_prior(PRIOR)
    found = design(2, family)
    _, theta, X, _, y = target_values(spec, 50, N, S2, 4)
    mine = design_losses(spec, found, X, y, theta, N, S2)
    tree = _Tree(spec)
    law = found.keys.law(tree.thetas, n_tokens=N, s2=S2)
    theirs = law_posterior_mean(tree.thetas, np.full(spec.n_leaves, -math.log(spec.n_leaves)), law, found.keys.readings(X, y))
    np.testing.assert_allclose(mine, ((theirs - theta) ** 2).sum(1), rtol=0, atol=1e-10)
    rows = real_keyed_losses(PRIOR, [2], family, n_tokens=N, s2=S2, samples=50, seed=4, first=first(family),
                             designs={2: found})
    np.testing.assert_array_equal(rows.nonadaptive[2], mine)  # the same contexts as target_values(seed)


def _law_beside_real(prior, n_tokens, s2, budgets, samples):
    rows = keyed_curves(prior, budgets, make_channel(numeric_prior(prior), fvnum.tokens(n_tokens, s2=s2)), "weighted",
                        samples=samples, seed=0, real_samples=samples)
    for b in budgets:
        found = {r.name: r for r in rows[b]}
        for law, real in zip(("best_adaptive_keyed", "best_nonadaptive_keyed"), REAL_ROWS):
            assert found[real].how == f"mc n={samples}" and found[real].stderr > 0 and found[real].keys == "weighted"
            se = math.hypot(found[law].stderr, found[real].stderr)
            assert abs(found[real].value - found[law].value) <= 5 * se, (b, law, found[law], found[real])
    return rows


def test_the_rows_follow_the_law_where_the_clt_holds():
    """Large N (256 tokens; label noise 4, so the losses stay away from 0) on the depth-3 tree: every real row
    within 5 standard errors of its law row (both standard errors combined; B's budget-1 row is exact)."""
    rows = _law_beside_real(TreePrior(3, "3/5"), 256, 4.0, [1, 2], 600)
    assert rows[1][0].value > 0.05 and rows[2][1].value > 0.02  # not a loss of 0 on both sides


@pytest.mark.slow
def test_the_rows_follow_the_law_where_the_clt_holds_depth_four():
    _law_beside_real(TreePrior(4, "3/5"), 256, 4.0, [1, 2, 3], 1500)


def test_same_seed_same_numbers_another_seed_others():
    kw = dict(n_tokens=N, s2=S2, samples=30, first=first(), designs={2: design(2)})
    a, b, c = (real_keyed_losses(PRIOR, [2], seed=s, **kw) for s in (1, 1, 2))
    np.testing.assert_array_equal(a.adaptive[2], b.adaptive[2])
    np.testing.assert_array_equal(a.nonadaptive[2], b.nonadaptive[2])
    assert a.estimate(REAL_ROWS[0], 2) != c.estimate(REAL_ROWS[0], 2)


def test_comparison_table_rows_and_glossary():
    """The two rows join the table with the keyed rows (computed beforehand, as fv reproduce does): tokens channel,
    Monte Carlo with their n and standard error, upper bounds of their family that bound no trained model and
    predict none (A and B stay held to the law's rows), a head for the table cell and the whole for the glossary."""
    from bridges.analysis.compare import short_what

    ch = make_channel(numeric_prior(PRIOR), fvnum.tokens(N, s2=S2))
    keyed = keyed_curves(PRIOR, [2], ch, "weighted", samples=100, seed=0, real_samples=40)[2]
    table = comparison_table(PRIOR, 2, ch, samples=300, search_samples=100, dense=False, keyed_rows_given=keyed,
                             real_samples=40)
    assert table.names[-2:] == REAL_ROWS
    for name in REAL_ROWS:
        r = table.row(name)
        assert (r.channel, r.how, r.role, r.models, r.keys, r.measurement_class) == (
            "tokens", "mc n=40", "upper_bound", (), "weighted", "unit")
        assert r.stderr > 0 and r.value == next(k.value for k in keyed if k.name == name)
        assert short_what(r.what).startswith(f"the {name[:-5]} ") and "real tokens" in short_what(r.what)
    assert table.prediction("A").name == "best_adaptive_keyed" and table.prediction("B").name == "best_nonadaptive_keyed"


@pytest.mark.parametrize("kw, words", [
    (dict(real_samples=1), "real_samples must be a number of contexts >= 2 (or None: no real-token rows), got 1"),
    (dict(real_samples=True), "got True"),
    (dict(real_samples=2.5), "got 2.5"),
    (dict(real_samples="10"), "got '10'"),
    (dict(real_samples=20, keyed=None), "give a key family"),
    (dict(real_samples=20, keyed="softmax"), "softmax family's adaptive row is a search of its own"),
    (dict(real_samples=20, keyed_rows_given=[]), "keyed_rows_given must hold the real-token rows of 20 contexts"),
])
def test_bad_input_is_refused_in_one_line(kw, words):
    keys = {"keys": kw.pop("keyed")} if "keyed" in kw else {}  # the tokens channel's key family
    ch = make_channel(numeric_prior(PRIOR), fvnum.tokens(N, s2=S2, **keys))
    with pytest.raises(InputError, match=None) as err:
        comparison_table(PRIOR, 2, ch, samples=300, search_samples=100, **kw)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_other_priors_are_refused():
    gauss = GaussianPrior.matched(TreePrior(3, "1/2"))
    with pytest.raises(InputError, match="real-token rows are built on the tree prior"):
        comparison_table(gauss, 2, fvnum.tokens(N), samples=300, real_samples=20)
    from fvnum.priors.atoms import AtomsPrior

    with pytest.raises(InputError, match="real-token rows are built on the tree prior"):
        comparison_table(AtomsPrior.draw(12, 4, seed=1), 2, fvnum.gaussian(0.3), samples=300, real_samples=20)
    with pytest.raises(InputError, match="real-token rows are built on the tree prior"):
        real_keyed_losses(gauss, [1], samples=20)


def test_a_run_priced_over_the_cap_or_the_memory_is_refused_before_work():
    """Depth 7 to budget 6: 30000 contexts are priced at 1.3 h, over the library's hour; under a cap of a year,
    300000 contexts need about 130 GB. Both refused in one line before any search."""
    from fvsym.guards.limits import time_limit
    from fvsym.errors import ResourceRefused

    tree = TreePrior(7, "0.6")
    with pytest.raises(ResourceRefused, match="real-token rows on 30000 contexts of 64 tokens to budget 6 would take "
                                              "about") as err:
        real_keyed_losses(tree, [1, 6], samples=30000)
    assert "\n" not in str(err.value)
    with time_limit(3.2e7), pytest.raises(ResourceRefused, match="300000 contexts of 64 tokens needs about"):
        real_keyed_losses(tree, [1, 6], samples=300000)
