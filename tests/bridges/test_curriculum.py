"""The curriculum of Model A: ``bridges.models.networks.grow`` and ``TrainConfig.init_from``."""
import json

import pytest
import torch

from bridges.cli import main as fv
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.data import ContextSampler
from bridges.models.networks import build_model, grow
from bridges.training.train import train

torch.set_num_threads(1)
DATA = DataConfig(depth=3, n_tokens=32)


def run(tmp_path, budget, **kw):
    train_kw = dict(steps=60, batch=64, lr=1e-2, warmup=5, eval_every=30, eval_batches=1, seed=0,
                    precision="fp32", out=str(tmp_path))
    train_kw.update(kw)
    return RunConfig(DATA, ModelConfig("A", budget, mlp_width=16), TrainConfig(**train_kw))


@pytest.mark.parametrize("readout", ["decode", "generic"])
def test_a_grown_model_computes_its_source(readout):
    torch.manual_seed(1)
    small = build_model((DATA, ModelConfig("A", 2, mlp_width=16, readout=readout)))
    big = grow(small, build_model((DATA, ModelConfig("A", 4, mlp_width=16, readout=readout))))
    sampler = ContextSampler(DATA, torch.device("cpu"))
    c = sampler.sample(128, sampler.generator(0, 0, 0))
    a, b = small(c.x, c.y, c.x_q), big(c.x, c.y, c.x_q)
    torch.testing.assert_close(b.y_hat, a.y_hat, rtol=1e-6, atol=1e-6)
    assert torch.equal(b.workspace[:, :2], a.workspace)  # the first layers read what they read before
    assert b.workspace[:, 2:].abs().min() > 0  # the new layers measure; the readout does not see it yet
    loss = (b.y_hat - c.target).pow(2).mean()
    loss.backward()
    reads_workspace = big.readout.g.inp if readout == "decode" else big.readout.g.inp_shared
    assert reads_workspace.weight.grad[:, 2:].abs().sum() > 0  # training can open the new slots


def test_grow_refuses_what_does_not_fit():
    small = build_model((DATA, ModelConfig("A", 3, mlp_width=16)))
    with pytest.raises(ValueError, match="budget 3 -> 2"):
        grow(small, build_model((DATA, ModelConfig("A", 2, mlp_width=16))))
    with pytest.raises(ValueError, match="does not fit"):
        grow(build_model((DATA, ModelConfig("A", 2, mlp_width=16))), build_model((DATA, ModelConfig("A", 3, mlp_width=8))))
    with pytest.raises(ValueError, match="Model A"):
        grow(small, build_model((DATA, ModelConfig("B", 4, mlp_width=16))))


def test_init_from_starts_at_the_source_loss_and_is_its_own_experiment(tmp_path):
    source = train(run(tmp_path, 2), progress=False)
    cfg = run(tmp_path, 3, init_from=source.config.key())
    grown = train(cfg, progress=False)
    assert grown.history[0][2] == pytest.approx(source.loss, rel=1e-6)  # step 0: the source's held-out loss
    fresh = train(run(tmp_path, 3), progress=False)
    assert fresh.history[0][2] > 2 * grown.history[0][2]  # an untrained budget-3 model starts far above it
    assert cfg.key() != fresh.config.key() and cfg.key().startswith("A-tree-K3-B3-N32-s0-")
    assert json.loads((tmp_path / cfg.key() / "config.json").read_text())["train"]["init_from"] == source.config.key()
    assert "init_from" not in fresh.config.to_dict()["train"]  # runs without it keep their keys
    again = train(cfg.replace(train=dict(steps=60)), progress=False)  # a finished run is returned, not regrown
    assert again.loss == grown.loss


def test_init_from_problems_are_one_line(tmp_path, capsys):
    source = train(run(tmp_path, 2), progress=False).config.key()
    bad = [
        (run(tmp_path, 3, init_from="A-tree-K3-B2-N32-s0-0123456789"), "no finished run A-tree-K3-B2-N32-s0-0123456789"),
        (run(tmp_path, 2, init_from=source), "budget 2 is not below 2"),
        (run(tmp_path, 3, init_from=source).replace(model=dict(mlp_width=8)), "mlp_width 16 vs 8"),
        (run(tmp_path, 3, init_from=source).replace(data=dict(n_tokens=16)), "other data (data.n_tokens: 16 vs 32"),
    ]
    for cfg, message in bad:
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            train(cfg, progress=False)
        assert not (tmp_path / cfg.key()).exists()  # a refused --init-from leaves no run folder behind
    with pytest.raises(ValueError, match="model B has one layer"):
        RunConfig(DATA, ModelConfig("B", 2), TrainConfig(out=str(tmp_path), init_from=source))
    with pytest.raises(ValueError, match="init_from must be the key"):
        TrainConfig(init_from="../elsewhere")
    argv = ["train", "--model", "A", "--depth", "3", "--budget", "3", "--tokens", "32", "--mlp-width", "16",
            "--out", str(tmp_path), "--init-from", "A-tree-K3-B2-N32-s0-0123456789", "--quiet"]
    assert fv(argv) == 2
    err = capsys.readouterr().err
    assert "no finished run" in err and err.count("\n") == 1
