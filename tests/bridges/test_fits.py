"""Fitted scaling laws recover known rates and exponents from synthetic data, and pick the right law."""
import numpy as np
import pytest

from bridges.fits import compare_laws, fit_law


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
