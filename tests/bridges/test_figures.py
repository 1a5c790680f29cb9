"""Figures that show the comparison (issue 56, item 3): each trained model beside its own prediction, no curve hiding
another, zeros on a log axis said, a legend on every panel, one colour scale for panels compared, and a note on a
cell that is 0 by construction or at a ceiling. Also the report's two unpatched losses, said."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import bridges.studies.figures as figures

CFG = SimpleNamespace(n_tokens=64, depth=3, tree="alpha 0.6", train_budget=2, seed=0)


def _table(model, prior, loss, pred_name, pred, pred_se=0.0):
    return {"model": model, "prior": prior, "depth": 3, "budget": 2, "seed": 0,
            "trained": {"loss": loss, "stderr": 0.004, "n": 4096},
            "theory": [{"name": pred_name, "value": pred, "stderr": pred_se, "how": "mc n=2000", "what": "",
                        "keys": "weighted"}]}


TABLES = [_table("A", "tree", 0.0604, "best_adaptive_keyed", 0.0062, 0.002),
          _table("B", "tree", 0.1219, "best_nonadaptive_keyed", 0.0426, 0.003),
          _table("A", "gaussian", 0.9334, "best_nonadaptive_keyed", 0.9267, 0.001),
          _table("B", "gaussian", 0.9334, "best_nonadaptive_keyed", 0.9267, 0.001)]
CURVES = [{"prior": p, "strategy": s, "noise": n, "budget": b, "value": v, "stderr": 0.0}
          for p in ("tree", "gaussian") for n in ("none", "N=64")
          for s, vals in (("top_levels", (0.5, 0.25, 0.0)), ("gaussian_optimum", (0.5, 0.25, 0.0)))
          for b, v in zip((1, 2, 3), vals)]


def _labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_each_trained_model_is_drawn_beside_its_own_prediction_and_every_panel_has_its_legend():
    fig = figures.reproduction_fig(CURVES, TABLES, CFG)
    tree, gauss = fig.axes[:2]
    for ax in (tree, gauss):  # before: one legend for the figure, the panels had none
        assert ax.get_legend() is not None
    labels = _labels(tree)
    assert "trained Model A (seed 0)" in labels and "Model A's prediction: best_adaptive_keyed" in labels
    assert "Model B's prediction: best_nonadaptive_keyed" in labels
    # A and B on the Gaussian have the same loss: side by side, not one on top of the other
    xs = {c.get_label(): c.lines[0].get_xdata()[0] for c in gauss.containers if c.get_label().startswith("trained")}
    assert xs["trained Model A (seed 0)"] < xs["trained Model B (seed 0)"] and abs(xs["trained Model A (seed 0)"] - 2) < 0.5


def test_a_curve_reaching_zero_and_a_curve_hidden_by_another_say_so():
    fig = figures.reproduction_fig(CURVES, [], CFG)
    labels = _labels(fig.axes[0])
    assert any("(0 at B = 3: ▼ on the floor)" in l for l in labels)  # before: the zero was dropped in silence
    assert any("(the same as: top levels" in l for l in labels)  # before: the Gaussian optimum hid under top levels


def _patching(loss, layers=(1, 2), depths=(1, 2)):
    loss = np.array(loss, dtype=float)
    return {"loss": loss.tolist(), "unpatched": {"value": float(loss[0, 0])}, "layers": list(layers),
            "depths": list(depths)}


def test_patching_panels_share_one_colour_scale_and_layer_one_says_why_it_is_zero():
    theory = _patching([[0.36, 0.36], [1.5, 0.36]])
    model = _patching([[0.05, 0.05], [1.25, 0.11]])
    fig = figures.patching_figure({"theory: path": theory, "trained Model A": model})
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 2 and images[0].get_clim() == images[1].get_clim()  # before: each its own scale
    assert sum(1 for ax in fig.axes if ax.get_label() == "<colorbar>") == 1
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if "by construction" in t.get_text()]
    assert len(notes) == 2 and "empty workspace" in notes[0]
    assert figures.empty_workspace_rows(model, figures.patching_effects(model)) == [0]
    assert figures.empty_workspace_rows(_patching([[0.05, 0.07], [1.2, 0.1]]), np.array([[0, 0.02], [1.15, 0.05]])) == []


def test_an_injection_at_its_ceiling_everywhere_carries_a_note():
    def injection(acc):
        return {"layers": [1, 2], "prefix_accuracy": acc, "own_injected_accuracy": [1.0, 1.0]}

    fig = figures.function_vectors_figure({}, {"theory: path": injection([[1.0, None], [1.0, 1.0]]),
                                               "trained Model A": injection([[1.0, None], [1.0, 1.0]])})
    right = fig.axes[1]
    assert any("at the ceiling 1.000" in t.get_text() for t in right.texts)
    xs = [line.get_xdata()[0] for line in right.lines if not line.get_label().startswith("chance")][:4:2]
    assert xs[0] != xs[1]  # the two tables side by side
    fig = figures.function_vectors_figure({}, {"trained Model A": injection([[0.8, None], [0.7, 0.6]])})
    assert not any("ceiling" in t.get_text() for t in fig.axes[1].texts)


def test_the_report_says_why_a_model_has_two_unpatched_losses():
    from bridges.studies.reproduce import unpatched_note

    tables = [{**_table("A", "tree", 0.1441, "best_adaptive_keyed", 0.1308), "depth": 3, "budget": 2, "seed": 0}]
    tables[0]["trained"]["stderr"] = 0.0042
    note = unpatched_note("A", tables, CFG, {"unpatched": {"value": 0.1541, "stderr": 0.0047, "n": 512}}, "key-patching")
    assert note[0].startswith("Two unpatched losses of Model A: 0.1541 ± 0.005 in the key-patching tables is on their "
                              "own 512 target contexts; 0.1441 ± 0.004 in the comparison above is on the 4096 held-out")
    assert "differ by +0.0100 (1.6 standard errors)" in note[0]
    assert unpatched_note("B", tables, CFG, {"unpatched": {"value": 0.2, "stderr": 0.01, "n": 512}}, "x") == []
