"""FLOP counts of a training step (bridges.prices.flops.step_flops) and FLOP-matched schedules."""
import pytest
import torch

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.prices.flops import flop_matched_steps, step_flops

DATA = DataConfig(prior="tree", depth=4, alpha=0.6, n_tokens=16, s2=0.01)


def run(model: str, budget: int, **train) -> RunConfig:
    return RunConfig(DATA, ModelConfig(model, budget, mlp_width=8), TrainConfig(seed=0, out=None, **train))


@pytest.mark.parametrize("budget", [1, 3])
def test_model_c_count_is_the_hand_count(budget):
    """Model C, by hand (theta loss, batch b, N tokens, D coordinates, B channels): the keys ``x W^T`` cost
    2 b N D B forward and as much for W's gradient (x needs none); the readings ``sum_n k y`` 2 b N B forward and
    as much for the keys' gradient; the readout ``p U^T`` 2 b B D forward, and 2 b B D each for the gradients of
    U and of p."""
    cfg = run("C", budget, batch=32)
    b, n, d = 32, DATA.n_tokens, 2**DATA.depth - 1
    assert step_flops(cfg) == 4 * b * n * d * budget + 4 * b * n * budget + 6 * b * budget * d


def test_flops_scale_with_batch_and_the_deep_model_with_its_layers():
    assert step_flops(run("A", 2, batch=64)) == 2 * step_flops(run("A", 2, batch=32))
    one, three = step_flops(run("A", 1, batch=32)), step_flops(run("A", 3, batch=32))
    assert 2.5 < three / one < 3.5  # each of A's layers has its own key MLP; the readout is shared


def test_matched_steps_equal_the_reference_flops():
    a, b = run("A", 3, batch=32, steps=300), run("B", 3, batch=64, steps=200)
    steps = flop_matched_steps(a, b)
    assert abs(steps * step_flops(a) - 200 * step_flops(b)) <= step_flops(a) / 2  # rounded to the nearest step
    assert flop_matched_steps(b, b) == 200


def test_counting_leaves_the_callers_random_stream_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    step_flops(run("A", 2, batch=8))
    assert torch.equal(torch.rand(3), expected)
