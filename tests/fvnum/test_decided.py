"""The decided tests of the scaling study (fvnum.decided): each rule against hand-made studies whose answer is known."""
import math

import numpy as np
import pytest

from fvnum.decided import BAND, apply_tests, band_test, decay_test, decided_power, pooled_spread, ratio_test, \
    study_tests
from fvsym.errors import InputError

BUDGETS = (1, 2, 3, 4, 5, 6)


def seeds(curve, spread=0.01, n=3, seed=0):
    rng = np.random.default_rng(seed)
    return {b: curve[b] * np.exp(spread * rng.standard_normal(n)) for b in curve}


GEOM = {b: 0.9 * 0.55 ** (b - 1) for b in BUDGETS}  # an adaptive curve: decays 0.60 a budget
POW = {b: 0.9 * b ** -0.6 for b in BUDGETS}  # a one-layer curve: decays 0.6 log((B+1)/B)


def test_pooled_spread_is_the_mean_of_the_per_budget_variances():
    pts = {1: np.array([1.0, 2.0]), 2: np.array([1.0, 1.0, 4.0])}
    v1 = np.var(np.log(pts[1]), ddof=1)
    v2 = np.var(np.log(pts[2]), ddof=1)
    sigma, dof = pooled_spread(pts)
    assert sigma == pytest.approx(math.sqrt((v1 + v2) / 2), rel=1e-14) and dof == 3


def test_band_edges():
    pred = {b: (v, 0.0) for b, v in GEOM.items()}
    inside = {b: np.array([v * 1.249] * 3) for b, v in GEOM.items()}
    assert band_test(inside, pred)["verdict"] == "pass"
    out = dict(inside)
    out[6] = np.array([GEOM[6] * 1.26] * 3)
    r = band_test(out, pred)
    assert r["verdict"] == "fail" and r["ratios"]["6"] == pytest.approx(1.26)
    low = {b: np.array([v * 0.79] * 3) for b, v in GEOM.items()}
    assert band_test(low, pred)["verdict"] == "fail" and tuple(r["band"]) == BAND


def test_decay_passes_an_adaptive_curve_and_fails_equal_decays():
    a, o = seeds(GEOM, seed=1), seeds(POW, seed=2)
    r = decay_test(a, o, cut=2)
    assert r["verdict"] == "pass" and sorted(r["budgets"]) == ["2", "3", "4", "5"]
    same = decay_test(seeds(POW, seed=3), seeds(POW, seed=4), cut=2)
    assert same["verdict"] == "fail"  # no decay is above the other's by 1.7 standard errors at every budget


def test_ratio_falls_as_predicted_and_a_flat_ratio_fails():
    pa, po = {b: (v, 0.0) for b, v in GEOM.items()}, {b: (v, 0.0) for b, v in POW.items()}
    r = ratio_test(seeds(GEOM, seed=5), pa, seeds(POW, seed=6), po, cut=2)
    assert r["verdict"] == "pass" and r["falls"] and r["agrees"]
    assert r["predicted_slope"] < 0
    flat = ratio_test(seeds(POW, seed=7), pa, seeds(POW, seed=8), po, cut=2)
    assert flat["verdict"] == "fail" and not flat["falls"]


def test_the_slope_is_exact_on_noiseless_data():
    pa = {b: (GEOM[b], 0.0) for b in BUDGETS}
    po = {b: (POW[b], 0.0) for b in BUDGETS}
    a = {b: np.array([GEOM[b]] * 2) * np.array([1.0, 1.001]) for b in BUDGETS}
    o = {b: np.array([POW[b]] * 2) * np.array([1.0, 1.001]) for b in BUDGETS}
    r = ratio_test(a, pa, o, po, cut=2)
    x = np.arange(2, 7, dtype=float)
    y = np.array([math.log(GEOM[b] / POW[b]) for b in range(2, 7)])
    assert r["predicted_slope"] == pytest.approx(np.polyfit(x, y, 1)[0], rel=1e-12)
    assert r["slope"] == pytest.approx(r["predicted_slope"], rel=1e-3)


def test_power_is_seeded_and_high_on_the_prediction():
    preds = {"A": {b: (v, 0.01 * v) for b, v in GEOM.items()}, "B": {b: (v, 0.01 * v) for b, v in POW.items()}}
    kw = dict(adaptive=("A",), one_layer=("B",), replicates=200)
    p1 = decided_power(preds, {m: BUDGETS for m in preds}, {"A": 0.014, "B": 0.009}, {"A": 3, "B": 3}, seed=3, **kw)
    p2 = decided_power(preds, {m: BUDGETS for m in preds}, {"A": 0.014, "B": 0.009}, {"A": 3, "B": 3}, seed=3, **kw)
    assert p1 == p2
    t = p1["tests"]
    assert t["band"]["A"]["power"] > 0.99 and t["decay"]["A"]["power"] > 0.99 and t["ratio"]["A"]["power"] > 0.9
    assert t["band"]["A"]["power_against"]["power"] > 0.99


def test_a_model_off_its_prediction_fails_band_but_can_pass_the_shape_tests():
    preds = {"A": {b: (v, 0.0) for b, v in GEOM.items()}, "B": {b: (v, 0.0) for b, v in POW.items()}}
    losses = {"A": {b: list(1.6 * v) for b, v in seeds(GEOM, seed=9).items()},
              "B": {b: list(v) for b, v in seeds(POW, seed=10).items()}}
    r = apply_tests(losses, preds, adaptive=("A",), one_layer=("B",))
    assert r["band"]["A"]["verdict"] == "fail" and r["band"]["B"]["verdict"] == "pass"
    assert r["decay"]["A"]["verdict"] == "pass" and r["ratio"]["A"]["verdict"] == "pass"
    assert r["decay"]["B"]["pair"] == ["A", "B"]
    full = study_tests(losses, preds, adaptive=("A",), one_layer=("B",), replicates=50)
    assert full["band"]["A"]["verdict"] == "fail" and 0 <= full["band"]["A"]["power"] <= 1


def test_bad_input_is_named():
    with pytest.raises(InputError, match="budget 2"):
        apply_tests({"A": {2: [-1.0, 1.0]}}, {"A": {2: (1, 0)}}, adaptive=("A",), one_layer=())
    with pytest.raises(InputError, match="no prediction at budget 3"):
        apply_tests({"A": {3: [1.0, 1.1]}}, {"A": {2: (1, 0)}}, adaptive=("A",), one_layer=())
    with pytest.raises(InputError, match="two seeds"):
        pooled_spread({1: np.array([1.0])})
    with pytest.raises(InputError, match="replicates"):
        decided_power({}, {}, {}, {}, adaptive=(), one_layer=(), replicates=1)
    with pytest.raises(InputError, match=r"replicates must be an integer in \[2, 20000\].*10000000000"):
        decided_power({}, {}, {}, {}, adaptive=(), one_layer=(), replicates=10**10)  # refused, not run for hours
    r = apply_tests({"A": {2: [1.0, 1.1], 3: [0.5, 0.6]}, "B": {2: [1.0, 1.1], 3: [0.9, 0.8]}},
                    {"A": {2: (1, 0), 3: (0.5, 0)}, "B": {2: (1, 0), 3: (0.9, 0)}}, adaptive=("A",), one_layer=("B",))
    assert r["ratio"]["A"]["verdict"] == "not run" and "fewer than 3" in r["ratio"]["A"]["refused"]


def test_inputs_of_the_wrong_shape_are_refused_in_one_line():
    kw = dict(adaptive=("A",), one_layer=("B",))
    with pytest.raises(InputError, match="losses must be a dict model -> budget -> losses"):
        apply_tests([0.1, 0.2], {}, **kw)
    with pytest.raises(InputError, match="losses must be a dict model -> budget -> losses"):
        study_tests({"A": [0.1, 0.2]}, {}, **kw)
    with pytest.raises(InputError, match="predictions a dict"):
        apply_tests({"A": {1: [0.1, 0.2]}}, [0.1], **kw)
