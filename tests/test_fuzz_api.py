"""Hostile inputs to the calling convention of issue 30 (a prior object where a prior is taken, one meaning per
strategy name, typed errors): each works or is refused in one line (a ``ValueError`` from Python; exit code 2
and one stderr line from ``fv``), never a traceback. Example counts follow the hypothesis profiles of
``tests/conftest.py``; the file runs in seconds."""
from __future__ import annotations
import fvnum

from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fvsym.errors import InputError, ResourceRefused
from fvsym.priors import GaussianPrior, TreePrior
from fvsym.tree import tree_loss

HOSTILE = st.one_of(
    st.integers(-3, 40), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([None, True, "", "4", "1/2", "path", b"3", 2.5, Fraction(7, 2), np.int64(3), np.float32(2.0),
                     sp.Integer(3), sp.Symbol("K"), [3], (3,), {"depth": 3}, object(), TreePrior(2, "1/2"),
                     TreePrior(3), GaussianPrior([[1, 0], [0, 2]])]),
)
STRATEGY = st.one_of(st.sampled_from(["path", "top_levels", "optimal", "optimal_nonadaptive",
                                      "optimal_nonadaptive_coordinate", "optimal_nonadaptive_unit", "fixed",
                                      "PATH", " path", "optimal_nonadaptive ", "", None, 3]), st.text(max_size=8))


@settings(deadline=None, suppress_health_check=list(HealthCheck))
@given(prior=HOSTILE, budget=HOSTILE, strategy=STRATEGY)
def test_tree_loss_works_or_refuses_in_one_line(prior, budget, strategy):
    if isinstance(prior, int) and not isinstance(prior, bool) and prior > 6:
        prior = 6  # keep the exact optimum small: the guards of fv derive price deep trees, tree_loss does not
    try:
        formula = tree_loss(prior, budget, strategy)
    except ValueError as exc:  # an InputError from the checks, or a refusal of the derivation (its domain)
        assert str(exc) and "\n" not in str(exc)
        return
    assert formula.expr is not None and strategy in ("path", "top_levels", "optimal", "optimal_nonadaptive",
                                                     "optimal_nonadaptive_coordinate")


@pytest.mark.parametrize("strategy", ["optimal_nonadaptive", "optimal_nonadaptive ", "Optimal_nonadaptive",
                                      "optimal_nonadaptive_", "optimal_nonadaptive_unit"])
def test_fv_derive_refuses_every_other_spelling_in_one_line(capsys, strategy):
    from bridges.cli import main

    code = main(["derive", "tree-loss", "--depth", "3", "--budget", "2", "--strategy", strategy])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err
    assert "say the class" in lines[0] if strategy.strip() == "optimal_nonadaptive" else "invalid choice" in lines[0]


@pytest.mark.parametrize("argv, words", [
    (["--strategy", "optimal_nonadaptive"], "say the class"),
    (["--strategy", "optimal_nonadaptive_unit", "--measurement", "coordinate"], "contradicts"),
    (["--strategy", "optimal_nonadaptive_coordinate", "--measurement", "unit"], "contradicts"),
])
def test_fv_mc_refuses_a_strategy_without_or_against_its_class(capsys, argv, words):
    from bridges.cli import main

    code = main(["mc", "--depth", "3", "--budget", "2", "--samples", "100", *argv])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and words in lines[0]


@settings(deadline=None, suppress_health_check=list(HealthCheck))
@given(measurement=st.sampled_from([None, "unit", "coordinate", "dense", "", 3, "Unit"]))
def test_loss_mc_bare_name_refused_unless_its_class_is_said(measurement):
    from fvnum import loss_mc

    prior = TreePrior(2, "1/2")
    try:
        est = loss_mc(prior, "optimal_nonadaptive", 1, fvnum.gaussian(0.1), samples=50, options=fvnum.StrategyOptions(search_samples=50, measurement=measurement))
    except ValueError as exc:
        assert "\n" not in str(exc)
        assert measurement not in ("unit", "coordinate")
        if measurement is None:
            assert "say the class" in str(exc)
        return
    assert measurement in ("unit", "coordinate") and np.isfinite(est.value)


@pytest.mark.parametrize("seconds, what", [(0.0, "zero"), (-1, "negative"), ("nan", "nan"), ("abc", "text")])
def test_a_hostile_time_cap_is_an_input_error(seconds, what):
    from fvsym.guards.limits import time_limit

    with pytest.raises(InputError):
        time_limit(seconds)


@settings(deadline=None, suppress_health_check=list(HealthCheck))
@given(seconds=st.floats(min_value=1e-300, max_value=1e300), need=st.floats(min_value=0, max_value=1e300))
def test_the_guards_refuse_in_one_line_naming_the_limit(seconds, need):
    from fvsym.guards.limits import TIME_CAP_NOTE, check_time, time_limit

    with time_limit(1.0):
        try:
            check_time("a job", seconds)
        except ResourceRefused as exc:
            assert seconds > 1.0 and "\n" not in str(exc) and TIME_CAP_NOTE in str(exc)
        else:
            assert seconds <= 1.0


@pytest.mark.parametrize("keyed", ["", 3, "softmax?", "Weighted"])  # "none" is None: no keyed rows
def test_a_bad_key_family_of_the_tokens_channel_is_refused_in_one_line(keyed):
    with pytest.raises(ValueError) as info:
        fvnum.tokens(16, keys=keyed)
    assert "\n" not in str(info.value) and "unknown key family" in str(info.value)


# --- one channel argument -------------------------------------------------------------------------------------
NOISE = st.one_of(st.none(), st.integers(-2, 300), st.floats(allow_nan=True, allow_infinity=True),
                  st.sampled_from([True, "", "0.1", "1/2", [1], object(), np.float32(0.3), sp.Rational(1, 3)]))


@settings(deadline=None, suppress_health_check=list(HealthCheck))
@given(tau=NOISE, n_tokens=NOISE, s2=NOISE, keys=NOISE)
def test_every_channel_is_built_or_refused_in_one_line(tau, n_tokens, s2, keys):
    """``fvnum.gaussian(tau)`` and ``fvnum.tokens(N, s2, keys)`` build the one channel argument, and
    ``make_channel`` resolves it against the prior (where every entry point builds its channel): anything gives a
    Channel or one line (a ValueError), never another error."""
    from fvnum.mc.channels import Channel, make_channel

    prior = TreePrior(2, "1/2")
    for build in (lambda: fvnum.gaussian(tau), lambda: fvnum.tokens(n_tokens, 0.01 if s2 is None else s2),
                  lambda: fvnum.tokens(8, keys=keys), lambda: tau):
        try:
            ch = make_channel(prior, build())
        except ValueError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        assert isinstance(ch, Channel) and np.isfinite(ch.tau) and ch.tau >= 0


@pytest.mark.parametrize("channel", ["tokens", 0.3, {"tau": 0.3}, TreePrior(2, "1/2")])
def test_plot_curve_refuses_a_channel_that_is_no_channel_in_one_line(channel):
    from fvnum import plot

    with pytest.raises(ValueError) as info:
        plot.curve("path", "path", [1], prior=TreePrior(2, "1/2"), channel=channel, samples=50, threads=1)
    assert "\n" not in str(info.value) and "channel must be a channel, fvnum.gaussian(tau)" in str(info.value)


@pytest.mark.parametrize("argv", [[], ["--s2", "0.5"], ["--tokens", "0"], ["--tau", "x"], ["--tau", "0.1", "--tokens", "8"]])
def test_fv_mc_channel_options_refused_in_one_line(capsys, argv):
    from bridges.cli import main

    code = main(["mc", "--depth", "2", "--budget", "1", "--samples", "50", *argv])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in lines[0] and "--" in lines[0]
