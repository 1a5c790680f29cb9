"""The regime scan: law tests of theory curves, the separating cells, and the tail-geometric scales."""
import fvnum
from fractions import Fraction

import numpy as np
import pytest

from fvnum import loss_mc
from fvnum.estimate import Estimate
from fvnum.regime import assess, choose, tail_geometric_variances, theory_curves, tree_prior


def _curve(values, rel=0.005):
    return [Estimate(float(v), rel * float(v), 1000, "mc") for v in values]


def test_tail_geometric_scales_make_the_noiseless_path_loss_exactly_geometric():
    var = tail_geometric_variances(6, Fraction(1, 2))
    assert var == (1, Fraction(1, 2), Fraction(1, 4), Fraction(1, 8), Fraction(1, 16), Fraction(1, 16))
    prior = tree_prior(6, scales=var)
    losses = [loss_mc(prior, "path", b, fvnum.gaussian(0), samples=2000, seed=0) for b in range(1, 6)]
    assert all(e.stderr == 0 for e in losses)
    ratios = [losses[i + 1].value / losses[i].value for i in range(4)]
    assert ratios == pytest.approx([0.5] * 4, rel=1e-12)
    with pytest.raises(ValueError, match="alpha in"):
        tail_geometric_variances(6, 0.7)


def test_a_cell_separates_when_adaptive_is_geometric_and_one_layer_a_power_law():
    b = np.arange(1, 8)
    curves = {"path": _curve(0.6 * 0.5**b), "top_levels": _curve(0.9 * b**-0.8)}
    r = assess(8, 0.5, 128, b, curves)
    assert r.tests["path"].verdict == "exponential" and r.tests["top_levels"].verdict == "power"
    assert r.separating and r.separation > 9
    flat = assess(8, 0.5, 64, b, {"path": _curve(0.9 * b**-0.8), "top_levels": _curve(0.9 * b**-0.8)})
    assert not flat.separating
    too_shallow = assess(7, 0.5, 32, b, curves)  # largest budget 7 is not below the depth
    assert not too_shallow.separating
    assert choose([flat, r, too_shallow]) is r and choose([flat]) is None
    d = r.to_dict()
    assert d["separating"] and d["tests"]["path"]["verdict"] == "exponential"


def test_theory_curves_are_the_fvnum_rows():
    curves = theory_curves(4, 0.5, 64, range(1, 4), samples=500, seed=3)
    prior = tree_prior(4, 0.5)
    assert curves["path"][1].value == loss_mc(prior, "path", 2, fvnum.tokens(64), samples=500, seed=3).value
    assert set(curves) == {"path", "top_levels"}


def test_predicted_powers_hold_each_curve_to_its_law():
    from fvnum.regime import predicted_powers

    b = np.arange(1, 9)
    curves = {"best_adaptive_keyed": _curve(0.8 * 0.55**b), "top_levels": list(0.9 * b**-0.6),
              "gaussian_optimum": list(0.5 * b**-0.1)}  # no predicted law: left out
    got = predicted_powers(b, curves, spread={"adaptive": 0.01, "one_layer": 0.005}, replicates=100, seed=3)
    assert set(got) == {"best_adaptive_keyed", "top_levels"}
    assert got["best_adaptive_keyed"].target == "exponential" and got["best_adaptive_keyed"].power >= 0.95
    assert got["top_levels"].target == "power" and got["top_levels"].power >= 0.95
    assert got["best_adaptive_keyed"].spread == 0.01 and got["top_levels"].spread == 0.005
    swapped = predicted_powers(b, {"path": list(0.9 * b**-0.6)}, spread=0.01, replicates=100, seed=3)
    assert swapped["path"].power == 0 and swapped["path"].fractions["power"] >= 0.95  # the wrong law for path
    with pytest.raises(ValueError, match="spread must be"):
        predicted_powers(b, curves, spread={"A": 0.01})
