"""The predictions of THEORY.md sections 6 and 7 as fvnum states them: the law each model and theory row should
follow, and the checks of the trained grid with their thresholds (bridges lays them out, it computes none)."""
import pytest

from fvnum.theory import (
    GAUSSIAN_A_OVER_B, GAUSSIAN_TOLERANCE, ROW_KINDS, TREE_A_RATIO, TREE_C_TOLERANCE, predicted_law, prediction_checks,
)


def test_depth_is_predicted_exponential_and_one_layer_a_power():
    assert [predicted_law(m) for m in "ABC"] == ["exponential", "power", "power"]
    assert predicted_law("path") == predicted_law("best_adaptive") == "exponential"
    assert predicted_law("top_levels_linear") == predicted_law("best_nonadaptive_unit") == "power"
    assert predicted_law("optimum_lower") is None  # a bound, no law of its own
    assert all(name in ROW_KINDS for name in ("path", "best_adaptive", "top_levels", "top_levels_linear"))


def _holds(checks) -> dict:
    return {c["prediction"]: c["holds"] for c in checks}


def test_tree_checks_hold_exactly_at_their_thresholds():
    theory = {"top_levels_linear": 1.0}
    at = _holds(prediction_checks("tree", 6, 4, {"A": TREE_A_RATIO, "B": 1.0, "C": 1 + TREE_C_TOLERANCE}, theory))
    assert at == {"tree K6 B4: A <= 0.6 x B": True, "tree K6 B4: A <= 0.6 x C": True,
                  "tree K6 B4: C within 20% of linear top-levels theory": True}
    over = _holds(prediction_checks("tree", 6, 4, {"A": 0.61, "B": 1.0, "C": 0.75}, theory))
    assert over == {k: False for k in at}
    assert len(prediction_checks("tree", 6, 4, {"A": 0.5, "B": 1.0, "C": 1.0}, {})) == 2  # no linear row: no C check
    assert prediction_checks("tree", 6, 4, {"A": 0.5, "B": 1.0}, theory) == []  # a model missing: nothing


@pytest.mark.parametrize("row,where", [("best_linear_nonadaptive", "tokens channel"),
                                       ("gaussian_optimum", "gaussian channel")])
def test_gaussian_checks_name_the_channel_of_their_optimum(row, where):
    lo, hi = GAUSSIAN_A_OVER_B
    losses = {"A": 1 + GAUSSIAN_TOLERANCE / 2, "B": 1.0, "C": 1 - GAUSSIAN_TOLERANCE / 2}
    checks = prediction_checks("gaussian", 4, 3, losses, {row: 1.0})
    assert len(checks) == 4 and all(c["holds"] for c in checks) and lo < losses["A"] < hi
    assert checks[0]["prediction"] == f"Gaussian K4 B3: A within 15% of the optimum ({where})"
    assert checks[3]["prediction"] == "Gaussian K4 B3: A / B in [0.85, 1.15]"
    assert not prediction_checks("gaussian", 4, 3, {**losses, "C": 0.84}, {row: 1.0})[2]["holds"]
