"""Fitted scaling laws recover known rates and exponents from synthetic data, and pick the right law."""
import numpy as np
import pytest

from fvnum.laws import compare_laws, fit_law


@pytest.mark.parametrize("r", [0.3, 0.5, 0.8])
def test_exponential_rate_recovered_within_its_interval(r):
    rng = np.random.default_rng(0)
    budgets = np.repeat(np.arange(1, 7), 3)
    losses = 0.7 * r**budgets * np.exp(rng.normal(0, 0.05, budgets.size))
    fit = fit_law("exponential", budgets, losses)
    half = (np.log(fit.ci[1]) - np.log(fit.ci[0])) / 2  # about 2 standard errors of log r
    assert abs(np.log(fit.value / r)) < 2 * half  # about 4 standard errors: fails with probability ~1e-4
    assert abs(fit.value - r) < 0.05 * r
    assert compare_laws(budgets, losses)["better"] == "exponential"


@pytest.mark.parametrize("e", [0.5, 1.0, 2.0])
def test_power_exponent_recovered_within_its_interval(e):
    rng = np.random.default_rng(1)
    budgets = np.repeat(np.arange(1, 9), 3)
    losses = 2.0 * budgets ** (-e) * np.exp(rng.normal(0, 0.05, budgets.size))
    fit = fit_law("power", budgets, losses)
    assert abs(fit.value - e) < (fit.ci[1] - fit.ci[0])  # about 4 standard errors
    assert compare_laws(budgets, losses)["better"] == "power"


def test_exact_data_gives_exact_parameters():
    b = np.arange(1, 6)
    fit = fit_law("exponential", b, 3 * 0.5**b)
    assert fit.value == pytest.approx(0.5, rel=1e-12) and fit.c == pytest.approx(3, rel=1e-12)
    assert fit.rss == pytest.approx(0, abs=1e-20)
    fit = fit_law("power", b, 2 * b**-1.5)
    assert fit.value == pytest.approx(1.5, rel=1e-12) and fit.c == pytest.approx(2, rel=1e-12)


def test_intervals_cover_at_the_nominal_rate():
    rng = np.random.default_rng(2)
    budgets = np.repeat(np.arange(1, 7), 3)
    hits = 0
    for _ in range(400):
        losses = 0.5**budgets * np.exp(rng.normal(0, 0.2, budgets.size))
        lo, hi = fit_law("exponential", budgets, losses).ci
        hits += lo < 0.5 < hi
    assert 0.91 <= hits / 400 <= 0.99  # 95% nominal; binomial sd about 1.1%


@pytest.mark.parametrize("budgets,losses,match", [
    ([1, 2], [0.5, 0.25], "at least 3 points"),
    ([2, 2, 2], [0.5, 0.4, 0.3], "2 or more budgets"),
    ([1, 2, 3], [0.5, 0.0, 0.1], "positive"),
    ([1, 2, 3], [0.5, 0.2], "same length"),
])
def test_bad_points_are_refused(budgets, losses, match):
    with pytest.raises(ValueError, match=match):
        fit_law("power", budgets, losses)


def test_unknown_law_is_refused():
    with pytest.raises(ValueError, match="unknown law"):
        fit_law("linear", [1, 2, 3], [1, 2, 3])


# --- the law test ---------------------------------------------------------------------------------------
from fvnum.laws import law_test, local_decay  # noqa: E402

STUDY_BUDGETS = np.repeat(np.arange(1, 8), 3)  # budgets 1..7, three seeds: the study's shape


def _synthetic(law, sigma, rng, budgets=STUDY_BUDGETS):
    mu = np.log(0.55) * budgets if law == "exponential" else np.log(0.9) - 1.4 * np.log(budgets)
    return np.exp(mu + rng.normal(0, sigma, budgets.size))


@pytest.mark.parametrize("law", ["exponential", "power"])
def test_law_test_names_the_law_when_the_noise_is_small(law):
    rng = np.random.default_rng(3)
    verdicts = [law_test(STUDY_BUDGETS, _synthetic(law, 0.03, rng)).verdict for _ in range(200)]
    assert verdicts.count(law) >= 185  # 'neither' about FIT_P of the time, the other law never
    assert verdicts.count("power" if law == "exponential" else "exponential") == 0


@pytest.mark.parametrize("law", ["exponential", "power"])
def test_law_test_says_cant_tell_when_the_noise_is_large(law):
    rng = np.random.default_rng(4)
    verdicts = [law_test(STUDY_BUDGETS, _synthetic(law, 0.8, rng)).verdict for _ in range(200)]
    wrong = "power" if law == "exponential" else "exponential"
    assert verdicts.count("can't tell") >= 170
    assert verdicts.count(wrong) <= 4


def test_law_test_says_neither_for_a_curve_of_neither_shape():
    b = np.repeat(np.arange(1, 8), 3)
    rng = np.random.default_rng(5)
    bent = np.exp(-0.7 * b + 0.25 * (b - 4) ** 2 + rng.normal(0, 0.02, b.size))  # a parabola in log loss
    assert law_test(b, bent).verdict == "neither"


def test_local_decay_is_flat_for_geometric_and_shrinks_like_e_over_b_for_power():
    b = np.arange(1, 9)
    flat = local_decay(b, 0.5**b, stderr=np.zeros(8), floor=1e-6)
    assert [d.budget for d in flat] == list(range(1, 8))
    assert all(d.value == pytest.approx(np.log(2), rel=1e-12) for d in flat)
    power = local_decay(b, 3 * b**-1.5, stderr=np.zeros(8), floor=1e-6)
    assert [d.value for d in power] == pytest.approx([1.5 * np.log((k + 1) / k) for k in range(1, 8)], rel=1e-12)


def test_decay_interval_covers_at_the_nominal_rate():
    rng = np.random.default_rng(6)
    hits = 0
    for _ in range(300):
        d = local_decay(STUDY_BUDGETS, _synthetic("exponential", 0.2, rng))
        hits += sum(lo < -np.log(0.55) < hi for lo, hi in (x.ci for x in d))
    assert 0.92 <= hits / (300 * 6) <= 0.98


def test_theory_points_use_their_stderr_and_the_floor():
    b = np.arange(1, 8)
    geo = 0.5**b
    t = law_test(b, geo, stderr=0.01 * geo)
    assert t.verdict == "exponential" and t.fits["exponential"].value == pytest.approx(0.5, rel=1e-9)
    assert "stderr" in t.noise and t.budgets == (2, 3, 4, 5, 6, 7) and t.cut == 2
    with pytest.raises(ValueError, match="floor > 0"):
        law_test(b, geo, stderr=np.zeros(7))


@pytest.mark.parametrize("kwargs,match", [
    (dict(budgets=[1, 2, 3], losses=[1, 0.5, 0.25]), "several seeds"),
    (dict(budgets=[1, 1, 2, 2, 3, 3], losses=[1, 1, 0.5, 0.5, 0.2, 0.2], cut=2), "at least 4 budgets"),
    (dict(budgets=[1, 2, 3, 4, 5], losses=[1, 0.5, 0.25, 0.1, 0.05], stderr=[0.1] * 4), "one per loss"),
    (dict(budgets=[1, 2, 3, 4, 5], losses=[1, 0.5, 0.25, 0.1, 0.05], stderr=[0.1] * 5, cut=0), "cut must be"),
    (dict(budgets=[1, 2, 3, 4, 5], losses=[1, 0.5, 0.25, 0.1, 0.05], stderr=[0.1] * 5, floor=2), "floor must be"),
    (dict(budgets=[1.5, 2, 3, 4, 5], losses=[1, 0.5, 0.25, 0.1, 0.05], stderr=[0.1] * 5), "integers"),
])
def test_law_test_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        law_test(**kwargs)


# --- the power of the law test -----------------------------------------------------------------------------
from fvnum.laws import VERDICTS, law_power  # noqa: E402

POWER_BUDGETS = np.arange(1, 9)


def test_power_of_a_clean_geometric_curve_is_all_exponential():
    p = law_power(POWER_BUDGETS, 0.8 * 0.55**POWER_BUDGETS, spread=0.001, target="exponential", replicates=200)
    assert p.power >= 0.97  # 'neither' only at the fit's p-value threshold FIT_P = 1%
    assert p.fractions["power"] == 0 and p.fractions["can't tell"] == 0
    assert p.power == p.fractions["exponential"] and p.stderr["exponential"] == pytest.approx(
        np.sqrt(p.power * (1 - p.power) / 200))


def test_power_of_a_clean_power_curve_is_all_power():
    p = law_power(POWER_BUDGETS, 0.9 * POWER_BUDGETS**-0.6, spread=0.001, target="power", replicates=200)
    assert p.power >= 0.97 and p.fractions["exponential"] == 0


def test_verdict_fractions_sum_to_one_and_the_seed_fixes_them():
    curve = 0.9 * POWER_BUDGETS**-0.6 * (1 + 0.02 * np.sin(POWER_BUDGETS))  # a curve between the laws
    p = law_power(POWER_BUDGETS, curve, spread=0.03, replicates=150, seed=7)
    assert set(p.fractions) == set(VERDICTS) and sum(p.fractions.values()) == pytest.approx(1, abs=1e-12)
    assert len({v for v, f in p.fractions.items() if f > 0}) >= 2  # a real mix, so the seed matters
    assert law_power(POWER_BUDGETS, curve, spread=0.03, replicates=150, seed=7).fractions == p.fractions
    other = law_power(POWER_BUDGETS, curve, spread=0.03, replicates=150, seed=8).fractions
    assert other != p.fractions
    d = p.to_dict()
    assert d["power"] is None and d["budgets"] == list(range(1, 9)) and d["n_seeds"] == 3


def test_power_falls_as_the_seed_spread_grows():
    curve = 0.8 * 0.6**POWER_BUDGETS
    powers = [law_power(POWER_BUDGETS, curve, spread=s, target="exponential", replicates=200, seed=1).power
              for s in (0.02, 0.1, 0.2, 0.4, 0.8)]
    assert all(a >= b for a, b in zip(powers, powers[1:])), powers
    assert powers[0] >= 0.95 and powers[-1] <= 0.3
    assert law_power(POWER_BUDGETS, curve, spread=0.2, n_seeds=8, target="exponential", replicates=200,
                     seed=1).power > powers[2]  # more seeds, more power


def test_a_constant_bias_changes_no_verdict_and_a_growing_one_does():
    curve = 0.8 * 0.55**POWER_BUDGETS
    plain = law_power(POWER_BUDGETS, curve, spread=0.02, target="exponential", replicates=100, seed=2)
    assert law_power(POWER_BUDGETS, curve, spread=0.02, target="exponential", bias=0.5, replicates=100,
                     seed=2).fractions == plain.fractions
    drift = [0, 0, 0, 0.45, 1.04, 1.54, 2.0, 2.5]  # trained / predicted - 1: A's drift from budget 4 in the study
    bent = law_power(POWER_BUDGETS, curve, spread=0.02, target="exponential", bias=drift, replicates=100, seed=2)
    assert bent.power < 0.1 < plain.power


@pytest.mark.parametrize("kwargs,match", [
    (dict(budgets=[1, 2, 3, 4, 5], curve=[1, 0.5, 0.25, 0.1], spread=0.02), "one loss per budget"),
    (dict(budgets=[1, 2, 3, 4, 5], curve=[1, 0.5, 0.25, 0.1, 0.0], spread=0.02), "finite and positive"),
    (dict(budgets=[1, 2, 2, 4, 5], curve=[1, 0.5, 0.25, 0.1, 0.05], spread=0.02), "distinct"),
    (dict(budgets=[0, 2, 3, 4, 5], curve=[1, 0.5, 0.25, 0.1, 0.05], spread=0.02), "integers >= 1"),
    (dict(budgets=[1, 2, 3, 4, 5], curve=[1, 0.5, 0.25, 0.1, 0.05], spread=0.0), "spread must be"),
    (dict(budgets=[1, 2, 3, 4, 5], curve=[1, 0.5, 0.25, 0.1, 0.05], spread=0.02, n_seeds=1), "n_seeds"),
    (dict(budgets=[1, 2, 3, 4, 5], curve=[1, 0.5, 0.25, 0.1, 0.05], spread=0.02, replicates=0), "replicates"),
    (dict(budgets=[1, 2, 3, 4, 5], curve=[1, 0.5, 0.25, 0.1, 0.05], spread=0.02, target="linear"), "target"),
    (dict(budgets=[1, 2, 3, 4, 5], curve=[1, 0.5, 0.25, 0.1, 0.05], spread=0.02, bias=[0.1, 0.2]), "bias"),
    (dict(budgets=[1, 2, 3, 4, 5], curve=[1, 0.5, 0.25, 0.1, 0.05], spread=0.02, bias=-1), "bias"),
    (dict(budgets=[1, 2, 3, 4], curve=[1, 0.5, 0.25, 0.1], spread=0.02), "at least 4 budgets"),
])
def test_law_power_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        law_power(**kwargs)


def test_a_floor_forgives_a_small_bend_that_the_seed_spread_alone_calls_neither():
    bend = 1 + 0.03 * np.cos(np.pi * POWER_BUDGETS)  # +-3% about a geometric curve: no law fits it exactly
    curve = 0.8 * 0.55**POWER_BUDGETS * bend
    tight = law_power(POWER_BUDGETS, curve, spread=0.01, target="exponential", replicates=100, seed=4)
    floored = law_power(POWER_BUDGETS, curve, spread=0.01, target="exponential", floor=0.06, replicates=100, seed=4)
    assert tight.fractions["neither"] >= 0.95 and floored.power >= 0.8
    assert floored.to_dict()["floor"] == 0.06
    with pytest.raises(ValueError, match="floor must be"):
        law_power(POWER_BUDGETS, curve, spread=0.01, floor=1.5)
