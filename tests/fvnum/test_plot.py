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
    mc = plot.curve("path", "path", range(1, 4), prior=PRIOR, tau=0.3, samples=2000, seed=4, threads=1)
    for b, v, e in zip(mc.budgets, mc.values, mc.errors):
        est = fvnum.loss_mc(PRIOR, "path", b, tau=0.3, samples=2000, seed=4, threads=1)
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
                              budgets=range(1, 4), prior=PRIOR, tau=0.3, samples=2000, seed=0, threads=1)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and [t.get_text() for t in ax.get_legend().get_texts()] == [
        "path (mc)", "path (exact)", "trained"]
    assert ax.containers[0].has_yerr and not ax.containers[1].has_yerr and ax.containers[2].has_yerr
    # the exact zero at B = K is left off the log axis, the rest drawn
    assert list(ax.containers[1].lines[0].get_xdata()) == [1, 2]
    assert plot.png(fig)[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_sources_are_one_line_errors():
    with pytest.raises(ValueError, match="only free parameter; left: alpha, K"):
        plot.curve("f", path_loss(), [1])
    with pytest.raises(ValueError, match="needs prior="):
        plot.curve("p", "path", [1])
    with pytest.raises(ValueError, match="give budgets="):
        plot.curve("f", path_loss(), None, values={"alpha": "1/2", "K": 3})
    with pytest.raises(ValueError, match="curve 'p' at budget 4"):
        plot.curve("p", "path", [4], prior=PRIOR, tau=0.3, samples=100)
    with pytest.raises(ValueError, match="cannot plot a object"):
        plot.curve("x", object())
