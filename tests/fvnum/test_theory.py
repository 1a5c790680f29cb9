"""The theory side of a comparison (fvnum.theory): the exact linear theory of both channels against Monte
Carlo and closed forms, the best linear design, and the typed comparison table."""
import fvnum
import math

import numpy as np
import pytest
import sympy as sp

from fvnum.mc.channels import Channel, effective_tau2, make_channel, token_statistics
from fvnum.model_rows import plain_models
from fvnum.theory import ComparisonTable, TheoryRow, comparison_table, describe_rows, prediction_row
from fvnum.model_rows import MODELS
from fvnum.linear_theory import best_linear_loss, gaussian_optimum, lmmse, top_levels_rows
from fvnum.linear_theory import prior_covariance
from fvsym.gaussian import water_filling
from fvsym.priors import GaussianPrior, TreePrior


def _linear_mc(prior, W, channel, n, seed):
    """Per-sample losses ``||U phi - theta||^2`` of the exact linear readout, readings drawn from the channel."""
    rng = np.random.default_rng(seed)
    C = prior_covariance(prior)
    if isinstance(prior, TreePrior):
        from fvnum.priors.tree import numeric_prior

        spec = numeric_prior(prior)
        theta = spec.thetas(spec.sample(n, rng))  # (n, D)
    else:
        theta = rng.multivariate_normal(np.zeros(C.shape[0]), C, size=n)  # (n, D)
    if channel.kind == "tokens":
        (S,) = token_statistics([theta], channel.n_tokens, channel.s2, rng)  # (n, D) exact in law
        phi = S @ W.T  # (n, B)
    else:
        phi = theta @ W.T + channel.tau * rng.standard_normal((n, W.shape[0]))
    U = lmmse(prior, W, channel).U  # (D, B)
    return ((phi @ U.T - theta) ** 2).sum(1)


@pytest.mark.parametrize("prior", [TreePrior(3, "1/2"), GaussianPrior.matched(TreePrior(3, "1/2"))],
                         ids=["tree", "gaussian"])
@pytest.mark.parametrize("kind", ["tokens", "gaussian"])
def test_linear_loss_is_the_monte_carlo_loss_of_its_readout(prior, kind):
    """``lmmse`` under each channel against the loss of its readout on readings drawn from that channel
    (within 5 standard errors), at a small N where the tokens channel's (1 + 1/N) W C W^T term matters."""
    tokens = make_channel(prior, fvnum.tokens(3, s2=0.05))
    channel = tokens if kind == "tokens" else make_channel(prior, fvnum.gaussian(tokens.tau))
    rng = np.random.default_rng(7)
    W = rng.standard_normal((2, 7))
    W /= np.linalg.norm(W, axis=1, keepdims=True)  # unit rows
    losses = _linear_mc(prior, W, channel, 200_000, seed=1)
    mean, se = losses.mean(), losses.std(ddof=1) / math.sqrt(losses.size)
    exact = lmmse(prior, W, channel).loss
    assert abs(mean - exact) < 5 * se
    other = lmmse(prior, W, make_channel(prior, fvnum.gaussian(tokens.tau)) if kind == "tokens" else tokens).loss
    assert abs(mean - other) > 5 * se  # the two channels' linear theories are told apart


def test_tokens_linear_theory_has_the_one_plus_one_over_n_term():
    """Isotropic C = I_D, coordinate design of B rows: Cov(phi) = (1 + 1/N + tau^2) I_B, so the loss is
    D - B / (1 + 1/N + tau^2) exactly (tau^2 = (D + s2) / N), and the gaussian channel's D - B / (1 + tau^2)."""
    prior = GaussianPrior.isotropic(5)
    ch = make_channel(prior, fvnum.tokens(8, s2=0.25))
    tau2 = sp.Rational(5 * 4 + 1, 4 * 8)
    want = 5 - 3 / (1 + sp.Rational(1, 8) + tau2)
    assert ch.tau2 == float(tau2)
    assert lmmse(prior, top_levels_rows(5, 3), ch).loss == pytest.approx(float(want), rel=1e-14)
    assert best_linear_loss(prior, 3, ch) == float(want)  # exact in sympy, rounded once
    gauss = make_channel(prior, fvnum.gaussian(ch.tau))
    assert gaussian_optimum(prior, 3, ch) == pytest.approx(float(5 - 3 / (1 + tau2)), rel=1e-14)
    assert lmmse(prior, top_levels_rows(5, 3), gauss).loss == pytest.approx(float(5 - 3 / (1 + tau2)), rel=1e-14)


def test_best_linear_design_of_the_tokens_channel_beats_random_designs():
    prior = TreePrior(3, "3/10")
    ch = make_channel(prior, fvnum.tokens(16))
    best = best_linear_loss(prior, 3, ch)
    assert lmmse(prior, top_levels_rows(7, 3), ch).loss == pytest.approx(best, rel=1e-12)  # top eigen-directions
    rng = np.random.default_rng(0)
    for _ in range(200):
        W = rng.standard_normal((3, 7))
        W /= np.linalg.norm(W, axis=1, keepdims=True)
        assert lmmse(prior, W, ch).loss >= best - 1e-12
    # the tokens channel cannot use the water-filling's repeated readings: worse than the gaussian channel's
    assert best > gaussian_optimum(prior, 3, ch)


def test_best_linear_loss_of_the_gaussian_channel_is_water_filling():
    prior = TreePrior(3, "1/2")
    ch = make_channel(prior, fvnum.gaussian(0.3))
    gauss = GaussianPrior.matched(prior)
    assert best_linear_loss(prior, 5, ch) == float(water_filling(gauss.eigenvalues, 5, sp.Rational(3, 10)).loss)


def test_tau_has_one_definition_for_floats_and_exact_numbers():
    prior = TreePrior(4, "1/2")
    exact = effective_tau2(prior, n_tokens=128, s2=sp.Rational(1, 100))
    assert exact == (sp.Rational(15, 8) + sp.Rational(1, 100)) / 128
    ch = make_channel(prior, fvnum.tokens(128, s2=0.01))
    assert ch.tau2 == effective_tau2(15 / 8, n_tokens=128, s2=0.01) and ch.tau == math.sqrt(ch.tau2)


def test_bad_inputs_get_one_line_errors():
    prior = TreePrior(3, "1/2")
    with pytest.raises(ValueError, match="channel must be a fvnum Channel"):
        lmmse(prior, top_levels_rows(7, 2), "tokens")
    with pytest.raises(ValueError, match="design must be"):
        lmmse(prior, np.ones((2, 5)), make_channel(prior, fvnum.gaussian(0.1)))
    with pytest.raises(ValueError, match="budget must be an integer in 1..D=7"):
        top_levels_rows(7, 8)
    with pytest.raises(ValueError, match="unknown channel 'noisy'"):
        Channel("noisy", 0.1)
    with pytest.raises(ValueError, match="row channel"):
        TheoryRow.exact("x", 1.0, "x", "both")


def test_comparison_table_rows_carry_their_channel_and_are_reproducible():
    prior = TreePrior(3, "1/2")
    ch = make_channel(prior, fvnum.tokens(64, keys=None))
    kw = dict(samples=2000, seed=3, search_samples=300, dense=False)
    table = comparison_table(prior, 2, ch, **kw)
    assert isinstance(table, ComparisonTable) and table.prior == "tree" and table.budget == 2
    d = table.to_dict()
    assert d["channel"] == "tokens" and d["tokens"] == 64 and len(d["rows"]) == len(table)
    channels = {r.name: r.channel for r in table}
    assert channels["optimum_lower"] == "noiseless" and channels["gaussian_optimum"] == "gaussian"
    assert all(channels[n] == "tokens" for n in ("path", "top_levels", "top_levels_linear", "best_linear_nonadaptive"))
    assert "not the models' tokens channel" in table.row("gaussian_optimum").what
    lower, upper = table.optimum_bracket
    assert lower <= upper + 5 * table.row("optimum_upper").stderr
    assert table.row("best_linear_nonadaptive").value == pytest.approx(table.row("top_levels_linear").value,
                                                                       rel=1e-12)
    with pytest.raises(ValueError, match="no theory row 'nope'"):
        table.row("nope")
    assert comparison_table(prior, 2, ch, **kw).to_dict() == d  # same seed, same numbers


def test_comparison_table_of_a_gaussian_prior():
    prior = GaussianPrior.matched(TreePrior(3, "1/2"))
    table = comparison_table(prior, 2, make_channel(prior, fvnum.tokens(64, keys=None)), samples=2000, seed=0)
    assert table.names == ("water_filling_mc", "top_levels_linear", "best_linear_nonadaptive", "gaussian_optimum")
    assert table.optimum_bracket is None
    assert table.prediction("A").name == table.prediction("B").name == "water_filling_mc"
    mc = table.row("water_filling_mc")
    # the water-filling design decoded by its posterior mean: within 5 SE of, or below, the linear theory
    assert mc.value <= table.row("best_linear_nonadaptive").value + 5 * mc.stderr


def test_rows_say_what_they_are_beside_the_models():
    """Every row has a role, the models it predicts or bounds, a class and a key family; each model has exactly
    one prediction row; the only bound proven for a trained model is the linear one for Model C, and the
    noiseless optimum bounds no model (the MLP keys of A and B are not linear keys)."""
    prior = TreePrior(3, "1/2")
    table = comparison_table(prior, 2, make_channel(prior, fvnum.tokens(64, keys=None)), samples=1000, seed=0,
                             search_samples=200)
    for model in plain_models():  # T is held to a row by its shape's name (T-deep, T-wide), not listed in rows
        assert [r.name for r in table if r.role == "prediction" and model in r.models] == [table.prediction(model).name]
    assert (table.prediction("A").name, table.prediction("B").name, table.prediction("C").name) == (
        "best_adaptive", "best_nonadaptive_unit", "top_levels_linear")
    assert (table.prediction("T-deep").name, table.prediction("T-wide").name) == ("best_adaptive",
                                                                                 "best_nonadaptive_unit")
    rows = {r.name: r for r in table}
    assert rows["optimum_lower"].role == "lower_bound" and rows["optimum_lower"].models == ()
    assert rows["optimum_lower"].measurement_class == "coordinate" and "not a bound for Models A, B" in rows[
        "optimum_lower"].what
    assert rows["best_linear_nonadaptive"].bounds_below("C") and not rows["best_linear_nonadaptive"].bounds_below("A")
    assert rows["best_nonadaptive_unit"].measurement_class == "unit"
    assert rows["best_adaptive"].measurement_class == ("unit" if rows["best_adaptive"].policy == "greedy_dense"
                                                       else "coordinate")
    assert {r.keys for r in table} == {"linear"}
    d = table.to_dict()["rows"]
    assert all({"role", "models", "class", "keys", "channel"} <= set(r) for r in d)
    # a table stored before rows said what they are is described the same way
    bare = [{k: v for k, v in r.items() if k not in ("role", "models", "class", "keys")} for r in d]
    assert describe_rows(bare) == d


def test_keyed_rows_become_the_predictions_of_a_and_b():
    names = ["path", "best_adaptive", "best_nonadaptive_unit", "best_adaptive_keyed", "best_nonadaptive_keyed",
             "top_levels_linear"]
    assert [prediction_row(m, names) for m in MODELS] == ["best_adaptive_keyed", "best_nonadaptive_keyed",
                                                           "top_levels_linear", "best_adaptive_keyed", None]
    # T: deep T's row; G: gd_steps, which this table lacks
    rows = describe_rows([{"name": n, "value": 0.1} for n in names])
    assert {r["name"]: r["role"] for r in rows}["best_adaptive"] == "upper_bound"
    with pytest.raises(ValueError, match="model must be one of A, B, C, T"):
        prediction_row("D", names)


@pytest.mark.parametrize("bad, match", [(dict(role="bound"), "row role"), (dict(measurement_class="dense"), "row class"),
                                        (dict(role="prediction"), "names the models"), (dict(models=("Z",)), "row models"),
                                        (dict(keys=""), "row keys")])
def test_bad_row_descriptions_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        TheoryRow.exact("x", 1.0, "x", "tokens", **bad)


def test_keyed_rows_join_the_table_as_the_predictions_of_a_and_b(monkeypatch):
    """The wiring of fvnum.keys.nonadaptive's rows (a stand-in module here: the numbers are fvnum.keys.nonadaptive's to test)."""
    import sys
    import types

    from fvnum.estimate import Estimate

    def found(name, value, family):
        return types.SimpleNamespace(name=name, estimate=Estimate(value, 0.001, 100), how="searched",
                                     keys=types.SimpleNamespace(name=family))

    fake = types.ModuleType("fvnum.keys.nonadaptive")
    fake.check_family, fake.gaussian_keyed = (lambda f: f), None
    fake.keyed_memory = lambda **size: 0.0
    fake.best_nonadaptive_keyed = lambda prior, budget, channel, **kw: found("best_nonadaptive_keyed", 0.3, channel.keys)
    adaptive = types.ModuleType("fvnum.keys.adaptive")
    adaptive.has_adaptive_search = lambda prior: True
    adaptive.adaptive_keyed_losses = lambda prior, budget, channel, **kw: [found("best_adaptive_keyed", 0.2,
                                                                                  channel.keys)] * budget
    monkeypatch.setitem(sys.modules, "fvnum.keys.nonadaptive", fake)
    monkeypatch.setitem(sys.modules, "fvnum.keys.adaptive", adaptive)
    prior = TreePrior(2, "1/2")
    table = comparison_table(prior, 1, make_channel(prior, fvnum.tokens(32, keys="weighted")), samples=500,
                             search_samples=100)
    assert table.prediction("A").name == "best_adaptive_keyed" and table.prediction("B").name == "best_nonadaptive_keyed"
    assert table.prediction("B").keys == "weighted" and table.row("best_adaptive").role == "upper_bound"
    with pytest.raises(ValueError, match="unknown key family 'nope'"):
        fvnum.tokens(32, keys="nope")
