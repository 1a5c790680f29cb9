"""Tables that say what they hold (issue 56, item 2): the one formatter of a standard error, the model's own line
first, the rows grouped by what they are to that model."""
from __future__ import annotations
import fvnum

import numpy as np
import pytest

from fvnum.estimate import Estimate, below_noise, stderr_text, value_text
from fvnum.row_groups import grouped_rows, model_line, rows_markdown
from fvnum.theory import describe_rows


@pytest.mark.parametrize("stderr, value", [(1e-17, 0.0), (1e-17, 0.36), (7e-12, 0.1541), (0.0, 0.5), (None, 0.2),
                                           (float("nan"), 0.2)])
def test_a_standard_error_below_floating_point_noise_prints_as_exact(stderr, value):
    # before: "± 1e-17", "± 7e-12", "± 0" (patching tables, comparison tables)
    assert below_noise(stderr, value)
    assert stderr_text(stderr, value) == "exact"
    assert value_text(value, stderr) == f"{value:.4f} (exact)"
    assert "e-1" not in stderr_text(stderr, value, plus=" ± ") and "±" not in value_text(value, stderr)


@pytest.mark.parametrize("stderr, value", [(0.004, 0.1441), (1e-7, 1.46e-7), (2e-5, 0.02), (0.001, 0.0)])
def test_a_sampling_error_is_printed(stderr, value):
    assert not below_noise(stderr, value)
    assert stderr_text(stderr, value) == f"{stderr:.1g}"
    assert value_text(value, stderr) == f"{value:.4f} ± {stderr:.1g}"


def test_an_effect_within_noise_of_its_losses_prints_as_an_exact_zero():
    # a transplant's effect 4.5e-12 ± 4e-12 on losses of 0.36 is rounding: before "4.522e-12 ± 4e-12"
    assert value_text(4.522e-12, 4e-12, ".4g", scale=0.36) == "0 (exact)"
    assert value_text(1.196, 0.04, ".4g", scale=1.246) == "1.196 ± 0.04"
    assert str(Estimate(0.36, 1e-17, 6000)) == "0.36 exact (mc, n=6000)"


def test_the_patching_tables_print_no_noise():
    from fvnum.patching.keys import PatchingTable

    loss = np.array([[0.36, 0.36], [1.5, 0.36]])
    t = PatchingTable(loss, np.array([[3e-13, 8e-17], [0.03, 6e-14]]), Estimate(0.36, 0.0, 6000),
                      np.array([0.36, 0.36]), np.array([0.0, 0.0]), 6000, "path", (1, 2), (1, 2))
    md = t.to_markdown()
    assert "e-1" not in md and "± 0 " not in md and "| 1 | 0.36 (exact) | 0.36 (exact) |" in md
    assert "| 2 | 1.5 ± 0.03 | 0.36 (exact) |" in md


PRED = {"name": "best_adaptive_keyed", "value": 0.1308, "stderr": 0.008}


def test_the_model_line_says_trained_against_its_prediction_and_the_ratio():
    assert model_line("A", PRED, (0.1441, 0.004)) == (
        "Model A: trained 0.1441 ± 0.004 against its prediction 0.1308 ± 0.008 (best_adaptive_keyed): ratio 1.102")
    exact = {"name": "top_levels_linear", "value": 0.9578, "stderr": 0.0}
    assert model_line("C", exact, (0.9586, 0.003)).endswith("against its prediction 0.9578 (top_levels_linear, "
                                                            "exact): ratio 1.001")
    near = model_line("A", {"name": "best_adaptive_keyed", "value": 1.46e-7, "stderr": 1e-7}, (0.0393, 0.001))
    assert "1.46e-07 ± 1e-07 (best_adaptive_keyed): difference +0.039 ± 0.001" in near and "ratio" not in near.split(":")[-2]
    assert model_line("T", PRED, (0.14, 0.004), held_as="T-deep").startswith("Model T (held to the rows of T-deep)")


# a tree table's rows where a lower bound of the coordinate class (0.2520) is above an upper bound of the unit
# class (0.2028): the report's case
ROWS = [
    {"name": "path", "value": 0.36, "stderr": 0.0, "how": "mc n=2000", "what": "adaptive, coordinate"},
    {"name": "best_adaptive", "value": 0.2028, "stderr": 0.004, "how": "mc n=2000", "what": "found",
     "policy": "greedy_dense"},
    {"name": "optimum_lower", "value": 0.2520, "stderr": 0.0, "how": "exact", "what": "noiseless optimum",
     "channel": "noiseless"},
    {"name": "optimum_upper", "value": 0.30, "stderr": 0.01, "how": "mc n=2000", "what": "optimal"},
    {"name": "top_levels_linear", "value": 0.9578, "stderr": 0.0, "how": "exact", "what": "linear theory"},
    {"name": "best_linear_nonadaptive", "value": 0.9578, "stderr": 0.0, "how": "exact", "what": "Ky Fan"},
    {"name": "best_adaptive_keyed", "value": 0.1308, "stderr": 0.008, "how": "mc n=2000", "what": "keyed",
     "keys": "weighted"},
    {"name": "best_nonadaptive_keyed", "value": 0.2713, "stderr": 0.004, "how": "mc n=8000", "what": "keyed",
     "keys": "weighted"},
]


def test_rows_are_grouped_by_what_they_are_to_the_model():
    rows = describe_rows(ROWS)
    groups = grouped_rows(rows, "best_adaptive_keyed")
    titles = [t for t, _ in groups]
    assert titles[0] == "its prediction" and [r["name"] for r in groups[0][1]] == ["best_adaptive_keyed"]
    assert titles[1].startswith("its class (unit")  # A's class: its bounds, then references
    assert [r["name"] for r in groups[1][1]] == ["best_adaptive", "best_nonadaptive_keyed"]
    assert titles[2].startswith("another class (coordinate") and "bound coordinate-class policies only" in titles[2]
    assert [r["name"] for r in groups[2][1]] == ["optimum_lower", "optimum_upper", "path"]
    assert titles[3].startswith("another class (linear")
    # C's table: its class is linear, and the unit and coordinate rows come after it
    c = [t for t, _ in grouped_rows(rows, "top_levels_linear")]
    assert c[1].startswith("its class (linear") and c[2].startswith("another class (coordinate")


def test_no_lower_bound_sits_unexplained_above_an_upper_bound_of_another_class():
    md = rows_markdown(describe_rows(ROWS), "A", prediction="best_adaptive_keyed", trained=(0.1441, 0.004)).splitlines()
    assert md[0].startswith("Model A: trained 0.1441 ± 0.004 against its prediction 0.1308 ± 0.008")
    body = [line for line in md if line.startswith("| ") and not line.startswith("| what")]
    last_class, last_upper = None, {}
    for line in body:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].startswith("*"):  # a group's line: a new class begins, said in words
            last_class = None
            continue
        role, klass = cells[4], cells[5]
        if role.startswith("lower bound"):  # every row above it in its group is of its own class, which it names
            assert last_class in (None, klass) and f"of the {klass} class" in role
        last_class = klass
    assert "lower bound of the coordinate class" in "\n".join(md)


def test_a_comparison_table_opens_with_the_model_line():
    from fvnum.theory import comparison_table
    from fvsym.priors import TreePrior
    from fvnum.mc.channels import make_channel

    prior = TreePrior(3, "1/2")
    table = comparison_table(prior, 2, make_channel(prior, fvnum.gaussian(0.5)), samples=400, seed=0, search_samples=100)
    md = table.to_markdown("C").splitlines()
    assert md[0].startswith("Model C: its prediction ") and "(top_levels_linear, exact)" in md[0]
    assert md[4] == "| *its prediction* | | | | | | | |" and md[5].startswith("| top_levels_linear |")
    trained = table.to_markdown("C", trained=(0.6, 0.01)).splitlines()[0]
    assert trained.startswith("Model C: trained 0.6000 ± 0.01 against its prediction ") and ": ratio " in trained
