"""fvnum.plot: loss against budget for strategies, formulas and trained results, with error bars."""
import numpy as np
import pytest
import sympy as sp
from matplotlib.figure import Figure

import fvnum
from fvnum import plot
from fvnum.estimate import Estimate
from fvsym import TreePrior
from fvsym.tree import path_loss

PRIOR = TreePrior(3, "1/2")


def test_sources_become_curves_with_their_own_numbers():
    mc = plot.curve("path", "path", range(1, 4), prior=PRIOR, samples=2000, seed=4, threads=1, channel=fvnum.gaussian(0.3))
    for b, v, e in zip(mc.budgets, mc.values, mc.errors):
        est = fvnum.loss_mc(PRIOR, "path", b, fvnum.gaussian(0.3), samples=2000, seed=4, threads=1)
        assert (v, e) == (est.value, est.stderr)  # the same seed, the same numbers
    exact = plot.curve("noiseless", path_loss(), range(0, 4), values={"alpha": "1/2", "K": 3})
    assert exact.values == tuple(float(path_loss().exact(alpha="1/2", K=3, B=b)) for b in range(4))
    assert exact.errors is None and exact.kind == "exact"
    pts = plot.curve("A", [{"budget": 3, "loss": 0.1, "stderr": 0.01}, (1, Estimate(0.5, 0.02, 10)), (2, 0.3, 0.03)])
    assert pts.budgets == (1, 2, 3) and pts.values == (0.5, 0.3, 0.1) and pts.errors == (0.02, 0.03, 0.01)
    fn = plot.curve("fn", lambda b: Estimate(1 / (b + 1), 0.01, 5), [1, 2])
    assert fn.values == (0.5, 1 / 3) and fn.errors == (0.01, 0.01)
    assert plot.curve("d", {2: 0.2, 1: 0.4}).budgets == (1, 2)


class _Trained:  # the shape of bridges.training.train.TrainResult.to_dict(), without training
    def to_dict(self):
        return {"loss": 0.07, "stderr": 0.004, "config": {"model": {"budget": 3}}}


def test_loss_vs_budget_returns_a_figure_with_error_bars():
    fig = plot.loss_vs_budget({"path (mc)": "path", "path (exact)": path_loss().subs(alpha="1/2", K=3),
                               "trained": [_Trained()]},
                              budgets=range(1, 4), prior=PRIOR, samples=2000, seed=0, threads=1, channel=fvnum.gaussian(0.3))
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and [t.get_text() for t in ax.get_legend().get_texts()] == [
        "path (mc)", "path (exact) (0 at B = 3: ▼ on the floor)", "trained"]
    assert ax.containers[0].has_yerr and not ax.containers[1].has_yerr and ax.containers[2].has_yerr
    # the exact zero at B = K cannot be on the log axis: a triangle on the floor, and the label says so
    assert list(ax.containers[1].lines[0].get_xdata()) == [1, 2]
    floor = [l for l in ax.lines if l.get_marker() == "v"]
    assert len(floor) == 1 and list(floor[0].get_xdata()) == [3] and floor[0].get_ydata()[0] >= ax.get_ylim()[0]
    assert plot.png(fig)[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_sources_are_one_line_errors():
    with pytest.raises(ValueError, match="only free parameter; left: alpha, K"):
        plot.curve("f", path_loss(), [1])
    with pytest.raises(ValueError, match="needs prior="):
        plot.curve("p", "path", [1])
    with pytest.raises(ValueError, match="give budgets="):
        plot.curve("f", path_loss(), None, values={"alpha": "1/2", "K": 3})
    with pytest.raises(ValueError, match="curve 'p' at budget 4"):
        plot.curve("p", "path", [4], prior=PRIOR, samples=100, channel=fvnum.gaussian(0.3))
    with pytest.raises(ValueError, match="cannot plot a object"):
        plot.curve("x", object())


def test_a_curve_the_same_as_another_says_so_and_stays_visible():
    fig, ax = plot.figure()
    a = plot.Curve("top levels, noiseless", (1, 2, 3), (0.5, 0.25, 0.0), None, "exact")
    b = plot.Curve("Gaussian optimum, noiseless", (1, 2, 3), (0.5, 0.25, 0.0), None, "exact")
    plot.draw(ax, [a, b])
    labels = [t.get_text() for t in ax.legend().get_texts()]
    assert labels[1] == ("Gaussian optimum, noiseless (0 at B = 3: ▼ on the floor) (the same as: top levels, "
                         "noiseless)")
    under = ax.containers[1].lines[0]  # drawn wider and fainter beneath the first, so both show
    assert under.get_linewidth() > ax.containers[0].lines[0].get_linewidth() and under.get_alpha() < 1
